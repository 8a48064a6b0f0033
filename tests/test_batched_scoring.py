"""`evaluate` scores model-free measures a chunk at a time (`ragbridge.core.scoring.batched`).

The batched path must give exactly the cells of the one-sample-at-a-time path (values to the
last bit, reasons, details, failures, skips, the order ``on_result`` and ``progress`` see them
in, the run's warnings); only ``latency_s`` may differ. The reference here is the same run with
batching turned off, on a few hundred random samples with every case the per-sample policy has.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from ragbridge.core import evaluate
from ragbridge.core.metrics import RankingMetric, resolve
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.results.evaluation import Score
from ragbridge.core.retrieval import per_sample
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring import batched, runner

pytest.importorskip("ragbridge.adapters.strings")

CHEAP = [
    "recall@4",
    "mrr",
    "ndcg@4",
    "token_f1",
    "exact_match",
    "context_usage",
    "no_answer",
    "precision@3",
    "map@5",
]

_WORDS = [
    "the",
    "leave",
    "policy",
    "gives",
    "employees",
    "twenty",
    "25",
    "days",
    "of",
    "paid",
    "annual",
    "holiday",
    "in",
    "2024",
    "a",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)) + rng.choice(["", ".", "!", " 3.0 m"])


def _maybe_score(rng: random.Random) -> float | None:
    return rng.random() if rng.random() < 0.3 else None


def _sample(i: int, rng: random.Random) -> Sample:
    """One random sample, drawn so that every edge of the per-sample policy occurs."""
    kind = rng.random()
    docs = [f"d{rng.randrange(12)}" for _ in range(rng.randrange(0, 7))]  # repeats: dedupe
    contexts = [
        Context(id=d, text=_text(rng, rng.randrange(1, 12)), score=_maybe_score(rng)) for d in docs
    ]
    if kind < 0.05 and contexts:  # a context without an id
        contexts[rng.randrange(len(contexts))] = Context(text=_text(rng, 4))
    relevance: dict[str, int] | None
    if kind < 0.15:
        relevance = None  # nobody labelled it
    elif kind < 0.3:
        relevance = {}  # no relevant document: ranking skipped, no_answer scores it
    else:
        relevance = {f"d{rng.randrange(12)}": rng.randrange(0, 4) for _ in range(rng.randrange(4))}
    if 0.3 <= kind < 0.35 and contexts:  # labels held in metadata, ids that name chunks
        relevance = {"doc-a": 1}
        contexts = [
            Context(id=f"chunk{j}", text=c.text, metadata={"source": "doc-a"})
            for j, c in enumerate(contexts)
        ]
    answer = rng.choice([None, "", "I don't know.", "the a an", _text(rng, rng.randrange(1, 9))])
    reference = rng.choice([None, _text(rng, rng.randrange(0, 6)), answer or "x"])
    metadata: dict[str, Any] = {"declined": True} if rng.random() < 0.05 else {}
    return Sample(
        id=f"s{i}",
        question=f"question {i}?",
        answer=answer,
        contexts=contexts,
        reference=reference,
        relevance=relevance,
        metadata=metadata,
    )


def _samples(n: int, seed: int) -> list[Sample]:
    rng = random.Random(seed)
    return [_sample(i, rng) for i in range(n)]


class _Awaits(Metric):
    """A model-free metric that is not batched (its `_score` awaits): scored per sample."""

    needs_judge = False
    provider = "test"
    name = "awaits"

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        return Score(value=min(1.0, len(sample.contexts) / 6))


def _run(samples: list[Sample], metrics: list[Any], **options: Any) -> dict[str, Any]:
    cells: list[tuple[str, str, dict[str, Any]]] = []
    ticks: list[tuple[int, int | None]] = []
    ev = evaluate(
        samples,
        metrics,
        on_result=lambda s, m, score: cells.append((s, m, score.model_dump())),
        progress=lambda done, total: ticks.append((done, total)),
        **options,
    )
    for _, _, dumped in cells:
        assert dumped["latency_s"] is not None
        assert dumped["latency_s"] >= 0.0
        dumped.pop("latency_s")
    kept = [(s, m, c.model_dump(exclude={"latency_s"})) for s, m, c in ev]
    return {"cells": cells, "kept": kept, "ticks": ticks, "meta": ev.metadata}


def _unbatched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.Batched, "of", classmethod(lambda cls, metrics, size=None: None))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("size", [1, 7, 512])
def test_batched_cells_equal_one_at_a_time(
    seed: int, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = _samples(300, seed)
    monkeypatch.setattr(batched, "CHUNK", size)
    fast = _run(samples, CHEAP)
    _unbatched(monkeypatch)
    slow = _run(samples, CHEAP)
    assert fast == slow  # values to the last bit, reasons, details, order, progress, warnings
    statuses = {
        c["failure"]["kind"] if c["failure"] else c["value"] is None for *_, c in fast["cells"]
    }
    # every outcome occurs: values, skips and several kinds of failure
    assert {False, True, "missing_input", "invalid_input", "no_claims"} <= statuses


def test_mixed_run_keeps_the_metric_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-sample metric between batched ones: each sample's cells in the run's order."""
    samples = _samples(120, 5)
    metrics = [resolve("mrr"), _Awaits(), resolve("token_f1"), resolve("ndcg@4")]
    fast = _run(samples, metrics, window=4)
    names = [m for _, m, _ in fast["cells"][:4]]
    assert names == ["mrr", "awaits", "token_f1", "ndcg@4"]
    _unbatched(monkeypatch)
    assert fast == _run(samples, metrics, window=4)


def test_applies_chooses_cells_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = _samples(150, 9)

    def applies(sample: Sample, metric: Metric) -> bool:
        return (int(sample.id[1:]) + len(metric.name)) % 3 != 0

    fast = _run(samples, CHEAP, applies=applies)
    _unbatched(monkeypatch)
    slow = _run(samples, CHEAP, applies=applies)
    assert fast == slow
    assert len(fast["cells"]) < len(samples) * len(CHEAP)  # some cells were left out


def test_ranking_measures_are_computed_a_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 samples × 3 ranking measures: a handful of vectorised calls, not 3,000."""
    calls = []
    real = per_sample._ranking_cells

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(per_sample, "_ranking_cells", counting)
    rng = random.Random(3)
    samples = [
        Sample(
            id=f"q{i}",
            question="q?",
            contexts=[Context(id=f"d{rng.randrange(9)}", text="t") for _ in range(5)],
            relevance={f"d{rng.randrange(9)}": 1},
        )
        for i in range(1000)
    ]
    ev = evaluate(samples, ["recall@4", "mrr", "ndcg@4"])
    assert len(ev) == 3000
    assert len(calls) <= 2
    assert sum(calls) == 1000


def test_duplicate_id_raises_after_the_samples_before_it() -> None:
    samples = _samples(20, 4)
    seen: list[str] = []

    def stream() -> Iterator[Sample]:
        yield from samples
        yield samples[3]

    with pytest.raises(ValueError, match="duplicate sample id 's3'"):
        evaluate(stream(), ["mrr", "token_f1"], on_result=lambda s, m, c: seen.append(s))
    assert len(seen) == 40


def test_a_metric_that_breaks_its_inline_promise_fails_its_cells_only() -> None:
    class Liar(Metric):
        needs_judge = False
        provider = "test"
        name = "liar"
        scores_inline = True

        async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
            import asyncio

            await asyncio.sleep(0)
            return Score(value=1.0)

    ev = evaluate(_samples(5, 1), [Liar(), "mrr"])
    liar = [c for _, m, c in ev if m == "liar"]
    assert len(liar) == 5
    assert all(c.failure is not None and "scores_inline" in c.failure.message for c in liar)


def test_only_declared_pure_metrics_are_batched() -> None:
    class Sub(RankingMetric):
        pass

    plan = batched.Batched.of([resolve("mrr"), Sub("recall@3"), _Awaits(), resolve("token_f1")])
    assert plan is not None
    assert plan.names == {"mrr", "token_f1"}
    assert not plan.everything
    assert batched.Batched.of([_Awaits()]) is None


def test_result_lines_are_the_bytes_cell_line_writes() -> None:
    """`ResultWriter` writes `cell_json`'s lines: byte for byte `cell_line`'s, on every cell
    of a random run and on Scores with usage, a judge, failures and text to escape."""
    from ragbridge.core.results.cell_json import cell_json, cell_line
    from ragbridge.core.results.evaluation import Failure, FailureKind
    from ragbridge.core.results.usage import Usage

    cells: list[tuple[str, str, Score]] = []
    evaluate(_samples(200, 11), CHEAP, on_result=lambda s, m, c: cells.append((s, m, c)))
    odd = [
        Score(
            failure=Failure(kind=FailureKind.TIMEOUT, message='naïve "quoted" \\ \n ✓'),
            usage=Usage(calls=2, cached_calls=1, prompt_tokens=30, completion_tokens=4),
            judge_model="gpt-x",
            prompt_version="v3",
            latency_s=0,
        ),
        Score(value=1, reason="ünïcode", details=[{"a": [1.5, None, True, "é"]}], latency_s=1e-7),
        Score(reason="skipped", details={"x": {"y": 1e300, "z": -0.0}}),
    ]
    cells += [("id ✓", "metric\t", score) for score in odd]
    assert len(cells) > 1500
    for sample_id, metric, score in cells:
        assert cell_json(sample_id, metric, score) == cell_line(sample_id, metric, score)
