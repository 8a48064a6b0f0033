"""The measure × provider registry (`ragbridge.core.registry`).

* every registered measure × provider resolves by name, scores a sample with scripted doubles
  (judge, embedder, NLI model) to a value in [0, 1] or a typed failure that is not a bug, and
  appears in ``ragbridge metrics``;
* a user's provider registers with the decorator and is dispatched to, after the measure's own
  edge policy; a plugin comes through the ``ragbridge.providers`` entry points, and a broken one
  is recorded, not raised;
* unknown names get "did you mean", and an unknown provider the list of the measure's providers.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from ragbridge.adapters.cli import main as cli
from ragbridge.core import evaluate
from ragbridge.core.judging.judge import Entailment
from ragbridge.core.metrics import Faithfulness, Metric, MetricContext, resolve
from ragbridge.core.multiturn import CONVERSATION_METRICS
from ragbridge.core.registry import (
    REGISTRY,
    MeasureSpec,
    ProviderSpec,
    Registry,
    UnknownMeasureError,
    register_provider,
)
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.testing import CountingJudge, HashEmbedder
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

SAMPLE = Sample(
    id="q1",
    question="How tall is Mount Everest?",
    answer="Mount Everest is 8,849 metres tall. It lies in Nepal.",
    reference="Mount Everest is 8,849 metres high.",
    contexts=[
        {"id": "d1", "text": "Mount Everest's elevation is 8,849 metres."},
        {"id": "d2", "text": "Everest lies on the border of Nepal and China."},
    ],
    relevance={"d1": 1},
    reference_contexts=["Mount Everest's elevation is 8,849 metres."],
)

# A conversation-level measure reads a sample with its history (issue 31): the same sample as
# the first exchange of a conversation. Without one it fails missing_input by design.
CONVERSATION_SAMPLE = SAMPLE.model_copy(update={"history": []})

# An agent's measure reads a sample with its trajectory (issue 32): the same sample, retrieved by
# one search step, with the call expected. Without a trajectory it fails missing_input by design.
AGENT_SAMPLE = SAMPLE.model_copy(
    update={
        "trajectory": [
            Step(name="search", args={"query": "Everest height"}, contexts=SAMPLE.contexts)
        ],
        "reference_tool_calls": [ToolCall(name="search", args={"query": "Everest height"})],
    }
)

# Failures that mean "this pair is broken", as opposed to a measure's honest verdict.
BUGS = {FailureKind.JUDGE_ERROR, FailureKind.MISSING_INPUT, FailureKind.PARSE_ERROR}


class ThreeLabelNLI:
    """An `EntailmentModel` that finds every pair mostly entailed."""

    model = "scripted-nli"
    detects_contradiction = True

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        return [Entailment(0.8, 0.15, 0.05) for _ in pairs]


def _names() -> list[str]:
    """Every pair as a name, a ranking family with a cutoff (``recall@k`` → ``recall@2``)."""
    out = []
    for measure, provider in REGISTRY.pairs():
        name = measure.name.replace("@k", "@2")
        out.append(f"{name}:{provider.name}" if measure.kind != "ranking" else name)
    return out


def _available(name: str) -> bool:
    """Providers of optional frameworks or models not on this machine are skipped, said why."""
    measure = REGISTRY.measure(name.partition(":")[0].replace("@2", "@k"))
    provider = REGISTRY.provider(measure.name, name.partition(":")[2] or None)
    return provider.extra not in {"bertscore"}  # a model download: tests/test_strings.py has it


def test_the_registry_holds_every_kind_of_measure() -> None:
    kinds = {m.kind for m in REGISTRY.measures()}
    assert kinds == {"judge", "string", "ranking", "agent"}
    providers = {p.name for _, p in REGISTRY.pairs()}
    assert {"llm", "offline", "nli", "string", "retrieval"} <= providers
    assert REGISTRY.dangling() == []
    assert REGISTRY.plugin_errors == []


@pytest.mark.parametrize("name", _names())
def test_every_pair_resolves_and_scores(name: str) -> None:
    if not _available(name):
        pytest.skip(f"{name}: needs a model that the suite does not download")
    metric = resolve(name)
    assert isinstance(metric, Metric)
    base = name.partition(":")[0]
    assert metric.name == base
    if ":" in name:
        assert metric.provider == name.partition(":")[2]
    ctx_models: dict[str, Any] = {
        "judge": CountingJudge(),
        "embedder": HashEmbedder(),
        "nli": ThreeLabelNLI(),
    }
    sample = CONVERSATION_SAMPLE if base in CONVERSATION_METRICS else SAMPLE
    if REGISTRY.measure(base.replace("@2", "@k")).kind == "agent":
        sample = AGENT_SAMPLE
    evaluation = evaluate([sample], [metric], **ctx_models)
    score = evaluation.get("q1", metric.name)
    assert score is not None
    if score.failure is not None:
        assert score.failure.kind not in BUGS, f"{name}: {score.failure}"
    elif score.value is not None:
        assert 0.0 <= score.value <= 1.0
    assert score.provider == metric.provider


def test_every_pair_is_listed_by_the_metrics_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["metrics", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    listed = {(r["measure"], r["provider"]) for r in rows}
    assert listed == {(m.name, p.name) for m, p in REGISTRY.pairs()}
    faithfulness = next(
        r for r in rows if r["measure"] == "faithfulness" and r["provider"] == "llm"
    )
    assert faithfulness["needs"] == "judge"
    assert faithfulness["judge calls"] == "2, shared"
    assert "claims" in faithfulness["meaning"]
    recall = next(
        r for r in rows if r["measure"] == "context_recall" and r["provider"] == "offline"
    )
    assert recall["needs"] == "embedder, reference"


def test_the_text_table_has_a_line_per_pair(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(REGISTRY.pairs())
    assert any(line.startswith("exact_match:string ") for line in lines)
    assert cli(["metrics", "--kind", "ranking"]) == 0
    ranking = capsys.readouterr().out.splitlines()[1:]
    assert ranking
    assert all(":retrieval" in line for line in ranking)


def test_string_measures_resolve_by_name() -> None:
    """Before the registry, ``resolve_metrics(["exact_match"])`` was an unknown measure."""
    from ragbridge.core.scoring.runner import resolve_metrics

    assert [m.name for m in resolve_metrics(["exact_match", "token_f1", "rouge_l"])] == [
        "exact_match", "token_f1", "rouge_l",
    ]  # fmt: skip
    point = [p for p in importlib.metadata.entry_points(group="ragbridge.providers")]
    assert "ragbridge.adapters.strings:register" in {p.value for p in point}


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("fathfulness", "did you mean faithfulness"),
        ("faithfulnes:offline", "did you mean faithfulness:offline"),
        ("recal@5", "did you mean recall@5"),
        ("recall", "did you mean recall@5"),
        ("exact_mach", "did you mean exact_match"),
    ],
)
def test_unknown_names_get_did_you_mean(name: str, hint: str) -> None:
    with pytest.raises(UnknownMeasureError, match=hint) as info:
        resolve(name)
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"unknown measure {name!r}")


def test_an_unknown_provider_lists_the_measures_providers() -> None:
    with pytest.raises(
        UnknownMeasureError, match="has no provider 'ofline'; use llm, nli, offline"
    ):
        resolve("faithfulness:ofline")


@pytest.fixture
def user_provider() -> Iterator[list[str]]:
    seen: list[str] = []

    @register_provider("faithfulness", "keyword", how="answers that say 'Everest' are faithful")
    async def keyword(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
        seen.append(sample.id)
        return Score(value=float("everest" in (sample.answer or "").lower()))

    yield seen
    REGISTRY.remove_provider("faithfulness", "keyword")


def test_a_users_provider_is_dispatched_to_after_the_edge_policy(user_provider: list[str]) -> None:
    metric = resolve("faithfulness:keyword")
    assert isinstance(metric, Faithfulness)
    assert not metric.needs_judge  # the provider declared no needs
    abstains = SAMPLE.model_copy(update={"id": "q2", "answer": "I don't know."})
    evaluation = evaluate([SAMPLE, abstains], [metric])
    first, second = evaluation.get("q1", "faithfulness"), evaluation.get("q2", "faithfulness")
    assert first is not None
    assert second is not None
    assert (first.value, first.provider) == (1.0, "keyword")
    assert second.value is None
    assert "abstains" in (second.reason or "")
    assert user_provider == ["q1"]  # the abstention never reached the provider


class _Point:
    """What `importlib.metadata.entry_points` returns, reduced to what the registry reads."""

    def __init__(self, name: str, loaded: Any) -> None:
        self.name, self.value, self._loaded = name, f"plugin:{name}", loaded

    def load(self) -> Any:
        if isinstance(self._loaded, Exception):
            raise self._loaded
        return self._loaded


def test_plugins_come_from_entry_points_and_a_broken_one_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Registry()

    def register(target: Registry) -> None:
        target.add_measure(
            MeasureSpec(name="brevity", meaning="short answers score high"),
            ProviderSpec(measure="brevity", name="plugin", how="1 / words"),
        )

    points = [_Point("good", register), _Point("broken", ImportError("no module named x"))]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: points if group else [])
    assert registry.measure("brevity").meaning == "short answers score high"  # loaded on a miss
    assert [p.key for p in registry.providers("brevity")] == ["brevity:plugin"]
    assert registry.plugin_errors == ["broken (plugin:broken): no module named x"]
    with pytest.raises(UnknownMeasureError, match="did you mean brevity"):
        registry.measure("brevty")


def test_a_provider_may_register_before_its_measure() -> None:
    registry = Registry()
    early = ProviderSpec(measure="later", name="p", how="-")
    registry.add_provider(early)
    assert registry.dangling() == [early]
    registry.add_measure(MeasureSpec(name="later", meaning="-"))
    assert registry.dangling() == []
    assert registry.providers("later") == [early]


def test_provider_dispatch_is_not_branching_on_names() -> None:
    """The measures look their provider up; no ``provider ==`` branch is left in the core."""
    from pathlib import Path

    import ragbridge.core

    root = Path(ragbridge.core.__file__).parent
    offenders = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "provider ==" in line or "provider !=" in line
    ]
    assert offenders == []


def test_registered_measures_match_their_classes() -> None:
    """Name, requires and direction are written once, on the class; the spec reads them."""
    for measure in REGISTRY.measures(kind="judge"):
        assert measure.factory is not None
        metric = measure.factory()
        assert (metric.name, metric.requires, metric.higher_is_better) == (
            measure.name, measure.requires, measure.higher_is_better,
        )  # fmt: skip


def test_resolve_is_safe_from_threads() -> None:
    async def many() -> list[str]:
        names = ["faithfulness:offline", "exact_match", "recall@3", "context_usage"] * 25
        found = await asyncio.gather(*(asyncio.to_thread(resolve, n) for n in names))
        return sorted({m.name for m in found})

    assert asyncio.run(many()) == ["context_usage", "exact_match", "faithfulness", "recall@3"]
