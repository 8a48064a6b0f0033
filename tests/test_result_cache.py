"""Whole Scores kept in the cache: a rerun reuses them, and any change that decides a Score misses.

Every test runs a first evaluation into an SQLite cache, then a second one, and counts the
judge's calls and the engine's reply lookups: a reused cell costs neither.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import Context, Sample, Settings, evaluate
from ragbridge.core.cache import scores as result_cache
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.judge import JudgeTimeout
from ragbridge.core.metrics import ContextPrecision, Faithfulness
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge

METRICS = ["faithfulness", "answer_relevance", "context_precision", "context_recall"]


def samples(n: int = 3, answer: str = "Paris is the capital of France.") -> list[Sample]:
    return [
        Sample(
            id=f"s{i}",
            question=f"What is the capital of France? ({i})",
            answer=answer,
            contexts=[
                Context(text=f"Paris is the capital and largest city of France ({i}).", id="d1"),
                Context(text=f"Lyon is a city in France ({i}).", id="d2"),
            ],
            reference="Paris.",
        )
        for i in range(n)
    ]


def run(cache: Path, judge: Any, metrics: list[Any] | None = None, **settings: Any) -> Evaluation:
    config = Settings(judge=judge, embedder=HashEmbedder(), cache=cache, **settings)
    return evaluate(samples(), metrics or METRICS, settings=config)


def outcome(score: Score) -> tuple[Any, ...]:
    return (score.value, score.failure, score.reason, score.details, score.provider)


def test_a_rerun_reuses_every_judged_cell_and_reports_it(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    first_judge, again_judge = CountingJudge(), CountingJudge()
    first = run(db, first_judge)
    again = run(db, again_judge)
    assert first_judge.calls == 9  # 3 calls per sample for the four metrics
    assert again_judge.calls == 0
    assert again.metadata["results_reused"] == {"hits": 12, "misses": 0}
    assert again.metadata["judge_stats"]["cached"] == 0  # not even a reply lookup
    for sample_id, metric, score in first:
        kept = again.get(sample_id, metric)
        assert kept is not None
        assert outcome(kept) == outcome(score)
        # what the first run paid shows as cached calls, as a reply-cache hit would
        assert kept.usage.calls == 0
        assert kept.usage.prompt_tokens == 0
        assert kept.usage.cached_calls == score.usage.calls + score.usage.cached_calls
    assert again.usage().cached_calls == first.usage().calls


def test_reuse_off_rescores_from_the_cached_replies(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    run(db, CountingJudge(), reuse_results=False)
    with Cache(db) as cache:
        assert cache.stats().results == 0
    judge = CountingJudge()
    again = run(db, judge, reuse_results=False)
    assert judge.calls == 0
    assert again.metadata["judge_stats"]["cached"] == 9
    assert "results_reused" not in again.metadata


@pytest.mark.parametrize(
    ("change", "misses"),
    [
        ("judge model", 12),
        ("judge params", 12),
        # every sample's answer edited: context_recall reads no answer, so its 3 cells hit
        ("answer", 9),
        # precision alone no longer shares the combined context call, so recall's key moves too
        ("metric setting", 6),
        ("metric added", 3),  # only hallucination's cells are new
    ],
)
def test_whatever_decides_a_score_is_in_the_key(tmp_path: Path, change: str, misses: int) -> None:
    db = tmp_path / "c.sqlite"
    run(db, CountingJudge())
    judge = CountingJudge(model="other-model" if change == "judge model" else "counting-judge")
    metrics: list[Any] = list(METRICS)
    if change == "metric setting":
        metrics[2] = ContextPrecision(use_reference=False)
    if change == "metric added":
        metrics.append("hallucination")
    judged: Any = judge
    if change == "judge params":
        from ragbridge.core.judging.engine import JudgeEngine

        judged = JudgeEngine(judge, cache=Cache(db), params={"temperature": 0.5})
    config = Settings(judge=judged, embedder=HashEmbedder(), cache=db)
    data = samples(answer="Paris, the capital.") if change == "answer" else samples()
    again = evaluate(data, metrics, settings=config)
    reused = again.metadata["results_reused"]
    assert reused["misses"] == misses
    assert reused["hits"] == len(again) - misses
    if change == "metric added":
        assert judge.calls == 0  # hallucination reads the claims and verdicts from the replies


def test_a_changed_prompt_version_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "c.sqlite"
    run(db, CountingJudge(), metrics=["faithfulness"])
    monkeypatch.setattr(Faithfulness, "prompt_version", "faithfulness-next")
    again = run(db, CountingJudge(), metrics=["faithfulness"])
    assert again.metadata["results_reused"] == {"hits": 0, "misses": 3}


def test_changed_scoring_code_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "c.sqlite"
    run(db, CountingJudge(), metrics=["faithfulness"])
    monkeypatch.setattr(result_cache, "_DIGESTS", {})
    monkeypatch.setattr(result_cache, "_core_digest", lambda: "edited core")
    again = run(db, CountingJudge(), metrics=["faithfulness"])
    assert again.metadata["results_reused"] == {"hits": 0, "misses": 3}


def test_the_digest_follows_the_source_of_a_metric_defined_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "my_metric.py"
    source = """
        from ragbridge.core.metrics.base import Metric
        from ragbridge.core.results.evaluation import Score

        class Mine(Metric):
            needs_judge = False
            needs_embedder = True

            async def _score(self, sample, ctx):
                return Score(value=VALUE)
    """
    module.write_text(textwrap.dedent(source).replace("VALUE", "0.25"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(result_cache, "_DIGESTS", {})
    first = importlib.import_module("my_metric").Mine
    digest = result_cache.code_digest(first)
    assert digest is not None
    assert digest == result_cache.code_digest(first)
    assert digest != result_cache.code_digest(Faithfulness)
    module.write_text(textwrap.dedent(source).replace("VALUE", "0.5"))
    del sys.modules["my_metric"]
    edited = importlib.import_module("my_metric").Mine
    assert result_cache.code_digest(edited) != digest


def test_transient_failures_are_not_kept(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    failing = ScriptedJudge({"*": JudgeTimeout("slow")})
    first = run(db, failing, metrics=["faithfulness"], max_retries=0)
    assert all(score.failure is not None for _, _, score in first)
    with Cache(db) as cache:
        assert cache.stats().results == 0
    judge = CountingJudge()
    again = run(db, judge, metrics=["faithfulness"])
    assert judge.calls == 6
    assert all(score.value is not None for _, _, score in again)


def test_settled_failures_and_skips_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    data = [
        Sample(id="abstains", question="q?", answer="I don't know.", contexts=[]),
        Sample(id="asserts-nothing", question="q?", answer="Hmm.", contexts=[]),
    ]
    no_claims = ScriptedJudge({"*": {"claims": [], "questions": [], "noncommittal": True}})
    first = evaluate(data, ["faithfulness"], judge=no_claims, cache=db)
    statuses = {sid: score.status for sid, _, score in first}
    assert statuses == {"abstains": "skipped", "asserts-nothing": "failed"}
    with Cache(db) as cache:
        assert cache.stats().results == 2
    again = evaluate(data, ["faithfulness"], judge=CountingJudge(model="scripted-judge"), cache=db)
    assert again.metadata["results_reused"]["hits"] == 2
    assert {sid: outcome(s) for sid, _, s in again} == {sid: outcome(s) for sid, _, s in first}


def test_an_unreadable_entry_is_a_miss_not_a_wrong_score(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    first = run(db, CountingJudge(), metrics=["faithfulness"])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET score = '{\"value\": 7.5}'")
    judge = CountingJudge()
    again = run(db, judge, metrics=["faithfulness"])
    assert again.metadata["results_reused"] == {"hits": 0, "misses": 3}
    assert judge.calls == 0  # rebuilt from the cached replies
    assert [outcome(s) for _, _, s in again] == [outcome(s) for _, _, s in first]


class Addressed(Metric):
    """A metric holding an object whose repr differs per process: never kept."""

    needs_judge = False
    needs_embedder = True

    def __init__(self) -> None:
        self.helper = object()
        self.runs = 0

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        self.runs += 1
        return Score(value=1.0)


def test_a_configuration_without_a_stable_repr_is_not_kept(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    metric = Addressed()
    for _ in range(2):
        ev = evaluate(samples(), [metric], embedder=HashEmbedder(), cache=db)
        assert "results_reused" not in ev.metadata
    assert metric.runs == 6


def test_cheap_measures_are_computed_not_looked_up(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    data = [s.model_copy(update={"relevance": {"d1": 1}}) for s in samples()]
    for _ in range(2):
        ev = evaluate(data, ["recall@2", "faithfulness"], judge=CountingJudge(), cache=db)
    assert ev.metadata["results_reused"] == {"hits": 3, "misses": 0}
    with Cache(db) as cache:
        assert set(cache.result_codes().values()) == {3}


def test_the_scorer_reuses_kept_cells_too(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    sample = samples(1)[0]
    first = Scorer(METRICS, judge=CountingJudge(), embedder=HashEmbedder(), cache=db)
    scored = first.score(sample)
    judge = CountingJudge()
    again = Scorer(METRICS, judge=judge, embedder=HashEmbedder(), cache=db).score(sample)
    assert judge.calls == 0
    assert {k: outcome(v) for k, v in again.items()} == {k: outcome(v) for k, v in scored.items()}
    assert first.cache is not None
    assert first.cache.stats().results == 4


def test_prune_old_prompts_removes_results_of_other_code(tmp_path: Path) -> None:
    from ragbridge.adapters.cli import main

    db = tmp_path / "c.sqlite"
    run(db, CountingJudge())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET code = 'old' WHERE metric = 'faithfulness'")
    assert main(["cache", str(db), "prune", "--old-prompts", "--dry-run"]) == 0
    with Cache(db) as cache:
        assert cache.stats().results == 12
    assert main(["cache", str(db), "prune", "--old-prompts"]) == 0
    with Cache(db) as cache:
        assert cache.result_codes() == {result_cache.code_digest(Faithfulness): 9}


def test_registered_providers_are_reused_too(tmp_path: Path) -> None:
    """A provider is a function the metric holds; its address must not make the configuration
    look unrepeatable (before: offline and NLI Scores were never kept, silently)."""
    db = tmp_path / "c.sqlite"
    names = ["faithfulness:offline", "context_recall:offline", "answer_relevance:offline"]
    run(db, None, names)
    again = run(db, None, names)
    assert again.metadata["results_reused"] == {"hits": 9, "misses": 0}


def test_a_plugins_provider_module_is_part_of_the_code_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing a provider that lives outside the core misses, as editing a metric class does."""
    from ragbridge.core.registry import REGISTRY

    source = tmp_path / "my_provider.py"
    text = textwrap.dedent(
        """
        from ragbridge.core.registry import register_provider
        from ragbridge.core.results.evaluation import Score

        @register_provider("faithfulness", "mine", how="a plugin")
        async def mine(metric, sample, ctx):
            return Score(value=VALUE)
        """
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    source.write_text(text.replace("VALUE", "1.0"))
    module = importlib.import_module("my_provider")
    try:
        first = result_cache.code_digest(Faithfulness, module.mine)
        assert first is not None
        assert first != result_cache.code_digest(Faithfulness)
        assert result_cache.code_digest(Faithfulness, Faithfulness._score) == (
            result_cache.code_digest(Faithfulness)
        )  # a core provider is covered by the core's digest already
        source.write_text(text.replace("VALUE", "0.5"))
        result_cache._DIGESTS.clear()
        assert result_cache.code_digest(Faithfulness, module.mine) != first
    finally:
        REGISTRY.remove_provider("faithfulness", "mine")
        sys.modules.pop("my_provider", None)
        result_cache._DIGESTS.clear()
