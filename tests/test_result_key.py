"""A kept Score's key covers the sample fields its metric reads, and only those.

A rerun whose samples differ only in volatile metadata (a pipeline's ``latency_s``) must reuse
every kept Score and add no row to the cache; a change to any field a measure reads must miss,
or a stale Score is served. Three kinds of checks:

* end to end through `evaluate` and an SQLite cache (what ``ragbridge demo`` does twice);
* for every built-in measure × provider that is kept, each field changed in turn: the key moves
  exactly when the change touches a field the metric declares;
* the declarations are sufficient: when a change leaves the key alone, scoring the changed
  sample with content-sensitive fakes (a judge whose every free-text answer is a digest of the
  prompt and that cites context 1, the hash embedder, a hashed NLI model) gives the same Score.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ragbridge.core import Context, Sample, Settings, evaluate
from ragbridge.core.cache.disk import Cache
from ragbridge.core.cache.result_key import CONTEXT_PARTS, FIELDS, fields_read, sample_body
from ragbridge.core.cache.scores import ResultReuse
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import Entailment, JudgeReply, Message
from ragbridge.core.metrics import Faithfulness, graders
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.registry import REGISTRY, register_provider
from ragbridge.core.results.evaluation import Evaluation, Score, Usage
from ragbridge.core.scoring.runner import shared_tags
from ragbridge.core.testing import CountingJudge, HashEmbedder, block_counts, minimal_reply

JUDGED = ["faithfulness", "answer_relevance", "context_precision", "context_recall"]
OFFLINE = [
    "faithfulness:offline",
    "answer_relevance:offline",
    "context_precision:offline",
    "context_recall:offline",
    "answer_similarity",
]


def sample(i: int = 0, latency: float = 0.25, **changes: Any) -> Sample:
    """A sample with every field set, each part of each context distinct."""
    data: dict[str, Any] = {
        "id": f"s{i}",
        "question": f"What is the capital of France? ({i})",
        "answer": "Paris is the capital of France. It lies on the Seine.",
        "contexts": [
            {
                "text": f"Paris is the capital and largest city of France ({i}).",
                "id": "d1",
                "score": 0.9,
                "metadata": {"title": "Paris", "retrieved_in_s": latency},
            },
            {
                "text": "Lyon is a city in France on the Rhone.",
                "id": "d2",
                "score": 0.4,
                "metadata": {"title": "Lyon", "retrieved_in_s": latency},
            },
        ],
        "reference": "Paris is the capital of France.",
        "reference_contexts": ["Paris is the capital of France."],
        "relevance": {"d1": 1},
        "metadata": {"latency_s": latency, "trace_id": f"t-{latency}", "declined": False},
    }
    data.update(changes)
    return Sample.model_validate(data)


def samples(latency: float = 0.25) -> list[Sample]:
    return [sample(i, latency) for i in range(3)]


def kept_rows(db: Path) -> int:
    with Cache(db) as cache:
        return cache.stats().results


def run(db: Path, metrics: Sequence[Any], data: list[Sample], judge: Any = None) -> Evaluation:
    config = Settings(judge=judge or CountingJudge(), embedder=HashEmbedder(), cache=db)
    return evaluate(data, list(metrics), settings=config)


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("metrics", [JUDGED, OFFLINE], ids=["judged", "offline"])
def test_a_rerun_differing_only_in_volatile_metadata_reuses_every_score(
    tmp_path: Path, metrics: list[str]
) -> None:
    db = tmp_path / "c.sqlite"
    first = run(db, metrics, samples(latency=0.25))
    rows = kept_rows(db)
    assert rows > 0
    judge = CountingJudge()
    # what a pipeline run records differs on every run: the latency, a trace id, and the
    # retrieval time in each context's metadata
    again = run(db, metrics, samples(latency=0.31), judge=judge)
    assert again.metadata["results_reused"] == {"hits": len(again), "misses": 0}
    assert judge.calls == 0
    assert kept_rows(db) == rows  # the cache does not grow
    for sample_id, metric, score in first:
        kept = again.get(sample_id, metric)
        assert kept is not None
        assert (kept.value, kept.reason, kept.details) == (score.value, score.reason, score.details)


def test_samples_reading_the_same_fields_share_kept_scores(tmp_path: Path) -> None:
    """Two pipelines answering one question alike: answer_similarity reads only the answer and
    the reference, so the second run's cells are found under the first's keys."""
    db = tmp_path / "c.sqlite"
    run(db, ["answer_similarity"], [sample(0)])
    other = sample(0, id="other-pipeline-s0", question="Where is the capital?")
    again = run(db, ["answer_similarity"], [other])
    assert again.metadata["results_reused"] == {"hits": 1, "misses": 0}


# --------------------------------------------------------------------------- fakes


class DigestJudge:
    """`CountingJudge`'s valid minimal reply, made to depend on everything the prompt shows:
    every free text is a digest of the prompt, and every cited context is context 1."""

    model = "digest-judge"

    async def generate(self, messages: Sequence[Message], *, schema: Any = None) -> JudgeReply:
        shown = "\n".join(m.get("content", "") for m in messages)
        digest = hashlib.sha256(shown.encode()).hexdigest()[:12]
        cite = 1 if block_counts(messages).get("CONTEXT", 0) else None

        def vary(node: Any) -> Any:
            if isinstance(node, dict):
                out = {k: vary(v) for k, v in node.items()}
                if "context" in out and out["context"] is None and cite is not None:
                    out["context"] = cite
                return out
            if isinstance(node, list):
                return [vary(v) for v in node]
            return f"x {digest}" if node == "x" else node  # free text, not a Literal

        text = minimal_reply(messages, schema)
        with contextlib.suppress(ValueError):  # a reply that is not JSON stays as it is
            text = json.dumps(vary(json.loads(text)))
        return JudgeReply(text=text, usage=Usage(prompt_tokens=1, completion_tokens=1))


class DigestNLI:
    """An entailment model whose probabilities are a hash of each (premise, hypothesis)."""

    model = "digest-nli"

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        out = []
        for premise, hypothesis in pairs:
            h = hashlib.sha256(f"{premise}\0{hypothesis}".encode()).digest()
            e, c = h[0] / 510, h[1] / 510  # each < 0.5, so neutral stays >= 0
            out.append(Entailment(e, 1.0 - e - c, c))
        return out


# --------------------------------------------------------------------------- every field


def _with_contexts(s: Sample, change: Callable[[int, dict[str, Any]], None]) -> Sample:
    contexts = [c.model_dump() for c in s.contexts]
    for i, c in enumerate(contexts):
        change(i, c)
    return s.model_copy(update={"contexts": [Context.model_validate(c) for c in contexts]})


def _set(path: str, value: Any) -> Callable[[Sample], Sample]:
    return lambda s: s.model_copy(update={path: value})


def _context_part(part: str, values: Sequence[Any]) -> Callable[[Sample], Sample]:
    return lambda s: _with_contexts(s, lambda i, c: c.update({part: values[i]}))


def _metadata(key: str, value: Any) -> Callable[[Sample], Sample]:
    return lambda s: s.model_copy(update={"metadata": {**s.metadata, key: value}})


# change -> (how, the read names that must see it)
ANY_CONTEXT = frozenset(f"contexts.{p}" for p in CONTEXT_PARTS)
CHANGES: dict[str, tuple[Callable[[Sample], Sample], frozenset[str]]] = {
    "id": (_set("id", "renamed"), frozenset({"id"})),
    "question": (
        _set("question", "Which city is the seat of government?"),
        frozenset({"question"}),
    ),
    "answer": (_set("answer", "Lyon is the capital of France."), frozenset({"answer"})),
    "reference": (_set("reference", "Lyon."), frozenset({"reference"})),
    "reference_contexts": (
        _set("reference_contexts", ["Lyon."]),
        frozenset({"reference_contexts"}),
    ),
    "relevance": (_set("relevance", {"d2": 2}), frozenset({"relevance"})),
    "contexts.text": (
        _context_part("text", ["Paris is a city in France.", "Lyon is far from Paris."]),
        frozenset({"contexts.text"}),
    ),
    "contexts.id": (_context_part("id", ["p1", "p2"]), frozenset({"contexts.id"})),
    "contexts.score": (_context_part("score", [0.1, 0.2]), frozenset({"contexts.score"})),
    "contexts.metadata": (
        _context_part("metadata", [{"title": "P"}, {"title": "L"}]),
        frozenset({"contexts.metadata"}),
    ),
    "contexts reversed": (
        lambda s: s.model_copy(update={"contexts": s.contexts[::-1]}),
        ANY_CONTEXT,
    ),
    "a context dropped": (
        lambda s: s.model_copy(update={"contexts": s.contexts[:1]}),
        ANY_CONTEXT,
    ),
    "metadata.latency_s": (
        _metadata("latency_s", 9.5),
        frozenset({"metadata", "metadata.latency_s"}),
    ),
    "metadata.declined": (
        _metadata("declined", True),
        frozenset({"metadata", "metadata.declined"}),
    ),
    "metadata.new": (_metadata("run", "b"), frozenset({"metadata", "metadata.run"})),
}


def _kept_specs() -> list[str]:
    """Every measure:provider of the core whose Scores are kept (it calls a model)."""
    out = []
    for measure, provider in REGISTRY.pairs(plugins=False):
        module = getattr(provider.compute or provider.build or measure.factory, "__module__", "")
        if not module.startswith("ragbridge.core"):
            continue
        if provider.needs & {"judge", "embedder", "nli"}:
            out.append(provider.key)
    return out


KEPT = _kept_specs()


def test_every_kept_core_measure_declares_what_it_reads() -> None:
    assert len(KEPT) >= 15  # the judge measures, their offline and nli providers
    for spec in KEPT:
        metric = REGISTRY.build(spec)
        assert fields_read(metric) is not None, spec


def _context(metrics: Sequence[Metric]) -> MetricContext:
    """Fresh engines for each scoring: one sample's failures never trip the next's breaker."""
    return MetricContext(
        judge=JudgeEngine(DigestJudge()),
        embedder=EmbeddingEngine(HashEmbedder()),
        nli=DigestNLI(),
        shared_tags=shared_tags(metrics),
    )


def _score(metric: Metric, s: Sample, metrics: Sequence[Metric]) -> Score:
    score = asyncio.run(metric.score(s, _context(metrics)))
    assert score.failure is None or score.failure.kind not in {"judge_error", "parse_error"}
    return score


def _outcome(score: Score) -> tuple[Any, ...]:
    return (score.value, score.failure, score.reason, score.details, score.prompt_version)


LONG_ANSWER = (
    "Paris is the capital of France. It lies on the Seine. Lyon is smaller. "
    "Both cities are in France."
)
BASES: dict[str, Sample] = {
    "full": sample(),
    # a measure may fall back to another field when one is absent (precision: the answer)
    "no labels": sample(reference=None, reference_contexts=None, relevance=None),
    # offline faithfulness scores a long answer another way than a short one
    "long answer": sample(answer=LONG_ANSWER),
}


@pytest.mark.parametrize("base_name", list(BASES))
@pytest.mark.parametrize("spec", KEPT)
def test_the_key_moves_exactly_with_the_fields_a_measure_reads(
    spec: str, base_name: str, tmp_path: Path
) -> None:
    metric = REGISTRY.build(spec)
    reads = fields_read(metric)
    assert reads is not None
    reuse = ResultReuse(Cache(tmp_path / "c.sqlite"), [metric], _context([metric]))
    assert reuse.active
    base = BASES[base_name]
    key = reuse.keys(base)[metric.name]
    for change, (apply, seen_by) in CHANGES.items():
        changed = apply(base)
        assert changed != base, change
        moved = reuse.keys(changed)[metric.name] != key
        assert moved == bool(seen_by & reads), f"{spec}: {change}"
        if not moved:
            # a hit must serve what scoring the changed sample would give
            before, after = (_score(metric, s, [metric]) for s in (base, changed))
            assert _outcome(after) == _outcome(before), f"{spec}: {change} is read"


def test_the_shared_context_call_reads_what_each_context_metric_declares(tmp_path: Path) -> None:
    """context_precision and context_recall together answer from one combined call."""
    metrics = [REGISTRY.build("context_precision"), REGISTRY.build("context_recall")]
    assert shared_tags(metrics)
    reuse = ResultReuse(Cache(tmp_path / "c.sqlite"), metrics, _context(metrics))
    base = BASES["full"]
    keys = reuse.keys(base)
    for change, (apply, _) in CHANGES.items():
        changed = apply(base)
        moved = reuse.keys(changed)
        for metric in metrics:
            if moved[metric.name] != keys[metric.name]:
                continue
            before, after = (_score(metric, s, metrics) for s in (base, changed))
            assert _outcome(after) == _outcome(before), f"{metric.name}: {change}"


# --------------------------------------------------------------------------- the safe default


class Undeclared(Metric):
    """A third-party metric that says nothing about what it reads."""

    needs_judge = False
    needs_embedder = True

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        return Score(value=0.5)


class MyFaithfulness(Faithfulness):
    """A subclass may read more than its base: the base's declaration does not carry over."""

    name = "faithfulness"


def test_a_metric_that_does_not_declare_is_keyed_on_the_whole_sample(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    metrics: list[Any] = [Undeclared(), MyFaithfulness()]
    assert [fields_read(m) for m in metrics] == [None, None]
    run(db, metrics, samples(latency=0.25))
    again = run(db, metrics, samples(latency=0.31))
    assert again.metadata["results_reused"] == {"hits": 0, "misses": 6}
    same = run(db, metrics, samples(latency=0.31))
    assert same.metadata["results_reused"] == {"hits": 6, "misses": 0}


def test_a_provider_that_does_not_declare_is_keyed_on_the_whole_sample() -> None:
    @register_provider("answer_similarity", "test_undeclared", how="a test double")
    async def undeclared(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
        return Score(value=float(sample.metadata.get("latency_s", 0.0) > 1))

    @register_provider(
        "answer_similarity", "test_declared", how="a test double", reads=["answer", "metadata.k"]
    )
    async def declared(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
        return Score(value=0.5)

    try:
        assert fields_read(REGISTRY.build("answer_similarity:test_undeclared")) is None
        reads = fields_read(REGISTRY.build("answer_similarity:test_declared"))
        # the class's own reads and requires come with the provider's
        assert reads == {"answer", "reference", "metadata.k"}
    finally:
        REGISTRY.remove_provider("answer_similarity", "test_undeclared")
        REGISTRY.remove_provider("answer_similarity", "test_declared")


class Declares(Metric):
    needs_judge = False
    needs_embedder = True
    requires = ("reference",)
    reads: ClassVar[tuple[str, ...] | None] = ("answer",)


class DeclaresBadly(Declares):
    reads = ("answer", "answers")


class DeclaresWholeParts(Declares):
    reads = ("contexts", "metadata", "metadata.latency_s")


def test_declarations_are_normalised_and_a_bad_one_keys_on_everything() -> None:
    assert fields_read(Declares()) == {"answer", "reference"}  # requires is always read
    assert fields_read(DeclaresBadly()) is None
    parts = fields_read(DeclaresWholeParts())
    assert parts == {"reference", "metadata", *(f"contexts.{p}" for p in CONTEXT_PARTS)}


def test_the_body_names_its_fields_and_covers_each_context() -> None:
    s = sample()
    body = sample_body(s, frozenset({"answer"}))
    assert body != sample_body(s, frozenset({"reference"}))
    assert body == sample_body(s.model_copy(update={"metadata": {}}), frozenset({"answer"}))
    # an absent metadata key and a key holding null are different inputs
    absent = sample_body(s, frozenset({"metadata.k"}))
    assert absent != sample_body(_metadata("k", None)(s), frozenset({"metadata.k"}))
    assert sample_body(s, None) != sample_body(_metadata("k", None)(s), None)
    # history is not a field a metric declares: a turn's history is always in its body
    assert set(FIELDS) | {"contexts", "metadata", "history"} == set(Sample.model_fields)
    assert set(CONTEXT_PARTS) == set(Context.model_fields)


@pytest.mark.parametrize(
    "grader",
    [graders.Correctness, graders.Helpfulness, graders.Groundedness, graders.DocumentRelevance],
)
def test_a_grader_reads_its_template_variables(grader: type[graders._Grader]) -> None:
    reads = fields_read(grader())
    assert reads is not None
    wanted = {"contexts.text" if v == "contexts" else v for v in grader.template.variables}
    assert wanted <= reads


# --------------------------------------------------------------------------- the benchmark


def test_the_benchmark_reports_the_saved_share_of_the_cold_run() -> None:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "demo_rerun.py"
    spec = importlib.util.spec_from_file_location("demo_rerun", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = module.summary([10.0, 3.1, 2.5])
    assert line == "rerun 2.5 s = 0.25x cold (goal <= 0.5x); saves 7.5 s (75% of cold)"
    rows = [
        {"results": 378, "replies": 0, "embeddings": 334},
        {"results": 756, "replies": 0, "embeddings": 334},
    ]
    assert module.growth(rows) == "+378 results, +0 replies, +0 embeddings"


def test_a_turns_history_is_always_in_its_body_and_a_plain_sample_keeps_its_bytes() -> None:
    """Two turns asking the same words after different conversations never share a score; a
    sample that is no turn has the bytes it had before samples carried a history."""
    from ragbridge.core import Turn

    plain = Sample(id="s", question="And for part-timers?", answer="Pro rata.")
    first = plain.model_copy(update={"history": [Turn(role="user", content="Leave?")]})
    second = plain.model_copy(update={"history": [Turn(role="user", content="Pensions?")]})
    reads = frozenset({"question", "answer"})
    assert sample_body(first, reads) != sample_body(second, reads)
    assert sample_body(first, None) != sample_body(second, None)
    assert b"history" not in sample_body(plain, reads)
    assert b"history" not in sample_body(plain, None)
    # an agent's sample: its trajectory is in the body when read, and absent while None
    from ragbridge.core.trajectory import Step

    agent = plain.model_copy(update={"trajectory": [Step(name="search", args={"q": "leave"})]})
    assert b"trajectory" not in sample_body(plain, None)
    assert sample_body(agent, None) != sample_body(plain, None)
    steps = frozenset({"question", "trajectory"})
    assert sample_body(agent, steps) != sample_body(plain, steps)
