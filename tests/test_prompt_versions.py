"""Prompt versions follow every change of what the judge sees, and the cache key follows them.

A template's version enters the cache key and every Score, so a reworded prompt (or a changed
reply schema) that keeps its version would be served replies given to the old prompt.
tests/data/prompt_fingerprints.json is the ledger of ``{id: {version: fingerprint}}``, the
fingerprint hashing the system text, the data rule, the user text and the schema the judge
sees (`PromptTemplate.fingerprint`). Editing any of them without bumping the version fails here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import pytest

from ragbridge.core import prompts
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import MetricContext
from ragbridge.core.prompts import PromptTemplate
from ragbridge.core.prompts.base import Reply
from ragbridge.core.prompts.faithfulness import FAITHFULNESS_VERIFY, ClaimVerdict
from ragbridge.core.testing import CountingJudge, HashEmbedder

LEDGER_PATH = Path(__file__).parent / "data" / "prompt_fingerprints.json"
LEDGER: dict[str, dict[str, str]] = json.loads(LEDGER_PATH.read_text(encoding="utf-8"))


def ledger_problem(template: PromptTemplate, ledger: dict[str, dict[str, str]]) -> str | None:
    """Why ``template`` does not match the ledger, as the instruction to fix it; None if it does."""
    versions = ledger.get(template.id, {})
    recorded = versions.get(template.version)
    if recorded is None:
        return (
            f"template {template.id} v{template.version} is not in {LEDGER_PATH.name}: add "
            f'"{template.version}": "{template.fingerprint}" under "{template.id}"'
        )
    if recorded != template.fingerprint:
        return (
            f"template {template.id} changed: bump its version and update the fingerprint "
            f'(new version -> "{template.fingerprint}" in {LEDGER_PATH.name})'
        )
    return None


@pytest.mark.parametrize("template", prompts.templates(), ids=lambda t: t.id)
def test_every_template_matches_the_fingerprint_of_its_version(template: PromptTemplate) -> None:
    problem = ledger_problem(template, LEDGER)
    assert problem is None, problem


def test_the_ledger_names_only_registered_templates() -> None:
    assert set(LEDGER) == {t.id for t in prompts.templates()}


def test_one_fingerprint_is_never_recorded_under_two_versions() -> None:
    # A version bump without a change would be harmless; the same text under two versions of
    # the same template is a sign that the ledger was edited instead of the template bumped.
    for template_id, versions in LEDGER.items():
        assert len(set(versions.values())) == len(versions), template_id


class _ClaimVerdictWithConfidence(Reply):
    reason: str
    verdict: Literal["supported", "contradicted", "unsupported"]
    context: int | None
    confidence: float


class _ClaimVerdictsChanged(Reply):
    verdicts: list[_ClaimVerdictWithConfidence]


class _TwoVerdictsOnly(Reply):
    verdicts: list[ClaimVerdict]
    other: Literal["supported", "unsupported"]


@pytest.mark.parametrize("schema", [_ClaimVerdictsChanged, _TwoVerdictsOnly])
def test_a_schema_change_without_a_version_bump_is_caught(schema: type[Reply]) -> None:
    changed = dataclasses.replace(FAITHFULNESS_VERIFY, schema=schema)
    assert changed.fingerprint != FAITHFULNESS_VERIFY.fingerprint
    problem = ledger_problem(changed, LEDGER)
    assert problem is not None
    assert problem.startswith(
        "template faithfulness.verify changed: bump its version and update the fingerprint"
    )
    # bumping the version alone is not enough either: the new version must be recorded
    bumped = dataclasses.replace(changed, version="99")
    assert "is not in prompt_fingerprints.json" in (ledger_problem(bumped, LEDGER) or "")


@pytest.mark.parametrize("field", ["system", "user"])
def test_a_text_change_without_a_version_bump_is_caught(field: str) -> None:
    original = getattr(FAITHFULNESS_VERIFY, field)
    changed = dataclasses.replace(FAITHFULNESS_VERIFY, **{field: original + " Be brief."})
    problem = ledger_problem(changed, LEDGER)
    assert problem is not None
    assert "bump its version" in problem


def test_the_fingerprint_ignores_the_version_and_the_description() -> None:
    # What it hashes is what the judge sees, minus the task tag (which carries the version).
    same = dataclasses.replace(FAITHFULNESS_VERIFY, version="99", description="other")
    assert same.fingerprint == FAITHFULNESS_VERIFY.fingerprint


# --------------------------------------------------------------------------- the cache follows

CLAIMS = ["Paris is the capital of France.", "Paris has ten million inhabitants."]
CONTEXTS = ["Paris is the capital and largest city of France."]


def _verify(template: PromptTemplate, cache: Cache, judge: CountingJudge) -> Any:
    ctx = MetricContext(
        judge=JudgeEngine(judge, max_retries=0, timeout=None, cache=cache),
        embedder=EmbeddingEngine(HashEmbedder()),
    )
    return asyncio.run(ctx.ask(template, claims=CLAIMS, contexts=CONTEXTS))


def test_a_prompt_version_change_misses_the_cache(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache.sqlite")
    judge = CountingJudge()
    first = _verify(FAITHFULNESS_VERIFY, cache, judge)
    again = _verify(FAITHFULNESS_VERIFY, cache, judge)
    assert first.ok
    assert again.ok
    assert judge.calls == 1  # same template, same version: a hit
    assert again.usage.cached_calls == 1

    bumped = dataclasses.replace(FAITHFULNESS_VERIFY, version=f"{FAITHFULNESS_VERIFY.version}.1")
    fresh = _verify(bumped, cache, judge)
    assert fresh.ok
    assert judge.calls == 2  # the reply to the old version is not served for the new one
    assert fresh.usage.cached_calls == 0


def test_a_schema_change_misses_the_cache_even_at_the_same_version(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache.sqlite")
    judge = CountingJudge()
    _verify(FAITHFULNESS_VERIFY, cache, judge)
    changed = dataclasses.replace(FAITHFULNESS_VERIFY, schema=_ClaimVerdictsChanged)
    call = _verify(changed, cache, judge)
    assert call.ok
    assert isinstance(call.value, _ClaimVerdictsChanged)
    assert judge.calls == 2


def test_the_version_alone_is_in_the_key_not_just_the_task_tag(tmp_path: Path) -> None:
    # The rendered task tag carries the version too; the key must not rely on that alone
    # (a caller may send its own messages under a template id, as the adapters do).
    messages = FAITHFULNESS_VERIFY.render(claims=CLAIMS, contexts=CONTEXTS)
    judge = CountingJudge()
    engine = JudgeEngine(judge, max_retries=0, timeout=None, cache=Cache(tmp_path / "c.sqlite"))

    def ask(version: str) -> Any:
        return asyncio.run(
            engine.ask(
                messages,
                FAITHFULNESS_VERIFY.schema,
                template_id=FAITHFULNESS_VERIFY.id,
                template_version=version,
            )
        )

    ask("2")
    ask("2")
    assert judge.calls == 1
    assert ask("3").usage.cached_calls == 0
    assert judge.calls == 2
