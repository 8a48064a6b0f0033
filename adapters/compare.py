"""Run ragbridge, RAGAS and DeepEval on the same samples and compare their scores, measure by
measure.

Why it exists: "our faithfulness is 0.71, RAGAS says 0.64" is only worth discussing when both
numbers come from the same samples, the same judge model and the same cached judge replies, and
when what cannot be compared is said out loud. `ragbridge.core.crosscheck` does the statistics;
this module *runs* the frameworks and turns what each returns into one ragbridge `Evaluation` per
framework, keyed by the common measure names below.

**Frameworks and labels.** ``"ragbridge"`` (LLM provider), ``"ragbridge:offline"`` (the
embedding/lexical provider), ``"ragas"`` (RAGAS 0.4 ``ragas.metrics.collections`` on the judge,
plus its id-based and string metrics) and ``"deepeval"`` (DeepEval's RAG metrics). Asking for
``"ragas"`` also yields a ``"ragas:non-llm"`` column on the two context measures: RAGAS's
``NonLLMContextPrecisionWithReference`` / ``NonLLMContextRecall``, which match retrieved passages
against ``reference_contexts`` by string similarity. The non-LLM measures of ragbridge (ids,
strings) are scored under ``"ragbridge:offline"`` when it is asked for, else under
``"ragbridge"`` (one column, not two identical ones).

**What is compared with what** (`PROVIDERS`; `DEFINITIONS` says where definitions differ):

* ``faithfulness``, ``answer_relevance``, ``context_precision``, ``context_recall``: the judge
  measures of each framework, plus ragbridge's offline provider and, for the context measures,
  RAGAS's non-LLM versions — cheap proxies of the same quantity, so their agreement with the
  judge columns is the interesting number.
* ``id_context_precision`` / ``id_context_recall``: RAGAS ``IDBasedContextPrecision`` /
  ``IDBasedContextRecall`` vs ragbridge's ranking measures ``precision@n`` / ``recall@n`` with
  ``n`` = the number of retrieved contexts. Same definition: they must agree exactly; a
  difference means duplicate ids or a conversion problem.
* ``rouge_l``, ``bleu``, ``exact_match``: RAGAS's string metrics vs `ragbridge.adapters.strings`.
  ROUGE-L is the same library on both sides; BLEU and exact match differ by definition.

Every framework/measure pair that cannot run is a `Skipped` with the reason (no judge, no such
metric in DeepEval, no sample with reference_contexts, ...), so an offline run says plainly what
it left out. (DeepEval's ``deepeval.scorer.Scorer`` has ROUGE/BLEU/exact-match helpers, but they
are not metrics — its "BLEU" is a single n-gram order's precision and needs NLTK data — so DeepEval
counts as having no non-LLM implementation.)

**One judge, one cache, honest costs.** The judge is wrapped once in a `JudgeEngine` holding the
cache; ragbridge's `Scorer`, every `RagasInstructorJudge` and every `DeepEvalJudge` go through it.
RAGAS and DeepEval cells each get a *fresh* wrapper around that engine, so the wrapper's
``usage`` is exactly what that cell spent (cached calls counted as cached); ragbridge's scores
carry their own usage. Template ids differ per framework, so no framework is served another's
replies.

**Failures, never NaN.** A RAGAS NaN becomes a typed failure (`score_from_ragas`). When RAGAS's
faithfulness returns NaN because its statement-extraction reply held no statement — observed
through the cell's judge wrapper, not guessed — the failure kind is ``no_claims``, so
`compare_frameworks` names the sample a policy difference when DeepEval scores 1.0 there. A
DeepEval metric that raises becomes a failure with its message. RAGAS gives no reason for its
scores; DeepEval's ``reason`` and ragbridge's are kept.

Importing this module needs neither RAGAS nor DeepEval: each is imported when asked for, and a
missing one raises ImportError naming the extra (``pip install "ragbridge[ragas]"``).
"""

from __future__ import annotations

import asyncio
import math
import os
import warnings
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragbridge.adapters._frameworks import framework_noise_off, quiet_frameworks
from ragbridge.core.cache import Cache, open_cache
from ragbridge.core.crosscheck import CrossComparison, Skipped, compare_frameworks
from ragbridge.core.engine import EmbeddingEngine, JudgeEngine
from ragbridge.core.judge import Embedder, Judge
from ragbridge.core.results import Evaluation, Failure, FailureKind, Score, Usage
from ragbridge.core.runner import run_sync
from ragbridge.core.sample import Sample

quiet_frameworks()  # before RAGAS or DeepEval is imported below

__all__ = [
    "DEFINITIONS",
    "FRAMEWORKS",
    "ID_MEASURES",
    "JUDGE_MEASURES",
    "MEASURES",
    "PROVIDERS",
    "STRING_MEASURES",
    "ComparisonRun",
    "acompare_frameworks_on",
    "compare_frameworks_on",
]

JUDGE_MEASURES: tuple[str, ...] = (
    "faithfulness",
    "answer_relevance",
    "context_precision",
    "context_recall",
)
ID_MEASURES: tuple[str, ...] = ("id_context_precision", "id_context_recall")
STRING_MEASURES: tuple[str, ...] = ("rouge_l", "bleu", "exact_match")
MEASURES: tuple[str, ...] = (*JUDGE_MEASURES, *ID_MEASURES, *STRING_MEASURES)
"""Every measure `compare_frameworks_on` knows, in table order."""

FRAMEWORKS: tuple[str, ...] = ("ragbridge", "ragbridge:offline", "ragas", "deepeval")
"""The frameworks one can ask for (``"ragas"`` also brings the ``"ragas:non-llm"`` column)."""

NON_LLM = "ragas:non-llm"

PROVIDERS: dict[str, dict[str, str]] = {
    "faithfulness": {
        "ragbridge": "ragbridge Faithfulness (judge extracts claims, then verifies them)",
        "ragbridge:offline": "ragbridge faithfulness:offline (embedding match + exact numbers)",
        "ragas": "RAGAS collections Faithfulness",
        "deepeval": "DeepEval FaithfulnessMetric",
    },
    "answer_relevance": {
        "ragbridge": "ragbridge AnswerRelevance (generated questions vs the question)",
        "ragbridge:offline": "ragbridge answer_relevance:offline (question-answer similarity)",
        "ragas": "RAGAS collections AnswerRelevancy (needs an embedder)",
        "deepeval": "DeepEval AnswerRelevancyMetric",
    },
    "context_precision": {
        "ragbridge": "ragbridge ContextPrecision",
        "ragbridge:offline": "ragbridge context_precision:offline (question-context similarity)",
        "ragas": "RAGAS collections ContextPrecision (LLM, with reference)",
        NON_LLM: "RAGAS NonLLMContextPrecisionWithReference (string match to reference_contexts)",
        "deepeval": "DeepEval ContextualPrecisionMetric",
    },
    "context_recall": {
        "ragbridge": "ragbridge ContextRecall",
        "ragbridge:offline": "ragbridge context_recall:offline (reference sentences supported)",
        "ragas": "RAGAS collections ContextRecall",
        NON_LLM: "RAGAS NonLLMContextRecall (string match of reference_contexts)",
        "deepeval": "DeepEval ContextualRecallMetric",
    },
    "id_context_precision": {
        "ragbridge": "ragbridge precision@n over the retrieved ids (n = number retrieved)",
        "ragas": "RAGAS IDBasedContextPrecision",
    },
    "id_context_recall": {
        "ragbridge": "ragbridge recall@n over the retrieved ids (n = number retrieved)",
        "ragas": "RAGAS IDBasedContextRecall",
    },
    "rouge_l": {
        "ragbridge": "ragbridge RougeScore (rouge-score, ROUGE-L F, stemming)",
        "ragas": "RAGAS collections RougeScore (rougeL, fmeasure)",
    },
    "bleu": {
        "ragbridge": "ragbridge Bleu (sacrebleu sentence BLEU)",
        "ragas": "RAGAS collections BleuScore (sacrebleu corpus BLEU over '. '-split sentences)",
    },
    "exact_match": {
        "ragbridge": "ragbridge ExactMatch (SQuAD-normalised)",
        "ragas": "RAGAS collections ExactMatch (raw string equality)",
    },
}
"""Measure → column label → what computes it. For the non-LLM measures the ``"ragbridge"``
column is scored under ``"ragbridge:offline"`` when that framework is asked for."""

DEFINITIONS: dict[str, str] = {
    "faithfulness": (
        "faithfulness: every framework scores the share of the answer's claims the contexts "
        "support; they differ on an answer with no claim — RAGAS returns NaN (a no_claims "
        "failure here), DeepEval scores 1.0, ragbridge fails it as no_claims."
    ),
    "answer_relevance": (
        "answer_relevance: ragbridge and RAGAS answer_relevancy are the embedding similarity of "
        "questions generated from the answer to the asked question (noncommittal answers score "
        "0); DeepEval AnswerRelevancyMetric is the share of the answer's statements the judge "
        "finds relevant to the input — a different definition, expect weaker agreement."
    ),
    "context_precision": (
        "context_precision: ragbridge, RAGAS and DeepEval judge each retrieved context useful "
        "for the reference answer and weight by rank (RAGAS: one judge call per context); "
        "ragas:non-llm replaces the judge by string similarity to reference_contexts; "
        "ragbridge:offline by question-context embedding similarity."
    ),
    "context_recall": (
        "context_recall: share of the reference answer's statements attributable to the "
        "contexts (ragbridge, RAGAS, DeepEval); ragas:non-llm is the share of reference_contexts "
        "found among the retrieved ones by string similarity; ragbridge:offline checks reference "
        "sentences against the contexts by embeddings."
    ),
    "id_context_precision": (
        "id_context_precision: the same definition on both sides (relevant retrieved ids / "
        "retrieved ids); any difference means duplicate ids or a conversion problem."
    ),
    "id_context_recall": (
        "id_context_recall: the same definition on both sides (relevant ids retrieved / "
        "relevant ids)."
    ),
    "rouge_l": "rouge_l: the same library and settings on both sides; values should match.",
    "bleu": (
        "bleu: ragbridge is sacrebleu sentence BLEU; RAGAS splits both texts on '. ' and "
        "computes corpus BLEU over the pieces, pairing them by position — multi-sentence and "
        "short answers score differently."
    ),
    "exact_match": (
        "exact_match: ragbridge normalises as SQuAD does (case, punctuation, articles); RAGAS "
        "compares the raw strings."
    ),
}

_NEEDS_JUDGE = "needs a judge (pass --judge)"
_RAGAS_NO_REASON = "RAGAS gives no reason"

# Sample fields each measure reads (for the LLM/string frameworks; ids are checked apart).
_INPUTS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("question", "answer", "contexts"),
    "answer_relevance": ("question", "answer"),
    "context_precision": ("question", "reference", "contexts"),
    "context_recall": ("question", "reference", "contexts"),
    "rouge_l": ("answer", "reference"),
    "bleu": ("answer", "reference"),
    "exact_match": ("answer", "reference"),
}
_NON_LLM_INPUTS = ("contexts", "reference_contexts")

Progress = Callable[[int, int], Any]


@dataclass
class ComparisonRun:
    """What `compare_frameworks_on` returns: the comparison and each column's `Evaluation`."""

    comparison: CrossComparison
    evaluations: dict[str, Evaluation]
    skipped: list[Skipped] = field(default_factory=list)

    def usage(self) -> dict[str, Usage]:
        """Judge usage per framework label, summed over every cell."""
        return {label: ev.usage() for label, ev in self.evaluations.items()}


# --------------------------------------------------------------------------- public entry


def compare_frameworks_on(
    samples: Iterable[Sample],
    *,
    frameworks: Sequence[str] = ("ragbridge", "ragas", "deepeval"),
    measures: Sequence[str] | None = None,
    judge: Judge | JudgeEngine | None = None,
    embedder: Embedder | EmbeddingEngine | None = None,
    cache: str | os.PathLike[str] | Cache | None = None,
    max_concurrency: int = 8,
    progress: Progress | None = None,
) -> ComparisonRun:
    """Score ``samples`` with each of ``frameworks`` on ``measures`` (default: all of `MEASURES`)
    and compare them. Sync form of `acompare_frameworks_on`; safe inside a running event loop.

    ``judge`` drives every judge measure of every framework through one `JudgeEngine` (with
    ``cache``); without it those pairs are `Skipped`. ``embedder`` serves ragbridge's and RAGAS's
    answer relevance and the offline provider (default: the local model, when one is needed).
    ``progress(done, total)`` is called as jobs finish. Raises ValueError for an unknown framework
    or measure, naming the known ones.
    """
    result: ComparisonRun = run_sync(
        acompare_frameworks_on(
            samples,
            frameworks=frameworks,
            measures=measures,
            judge=judge,
            embedder=embedder,
            cache=cache,
            max_concurrency=max_concurrency,
            progress=progress,
        )
    )
    return result


async def acompare_frameworks_on(
    samples: Iterable[Sample],
    *,
    frameworks: Sequence[str] = ("ragbridge", "ragas", "deepeval"),
    measures: Sequence[str] | None = None,
    judge: Judge | JudgeEngine | None = None,
    embedder: Embedder | EmbeddingEngine | None = None,
    cache: str | os.PathLike[str] | Cache | None = None,
    max_concurrency: int = 8,
    progress: Progress | None = None,
) -> ComparisonRun:
    """The async form of `compare_frameworks_on`."""
    items = _check_samples(samples)
    chosen_frameworks = _check_frameworks(frameworks)
    chosen = _check_measures(measures)
    store = open_cache(cache)
    engine = _judge_engine(judge, store, max_concurrency)
    plan = _Plan(items, chosen_frameworks, chosen, engine)
    if plan.needs_embedder:
        plan.embeddings = _embedding_engine(embedder, store)
    with framework_noise_off():  # the frameworks' warnings stay inside; edge cases are ours
        jobs = plan.jobs()
    evaluations: dict[str, Evaluation] = {
        label: Evaluation(metadata=_metadata(label, engine, plan.embeddings))
        for label in plan.labels
    }
    done = 0
    total = len(jobs)
    gate = asyncio.Semaphore(max(1, max_concurrency))
    if progress is not None:
        progress(0, total)

    async def run(job: Callable[[], Awaitable[list[_Cell]]]) -> list[_Cell]:
        nonlocal done
        async with gate:
            cells = await job()
        done += 1
        if progress is not None:
            progress(done, total)
        return cells

    with framework_noise_off():
        results = await asyncio.gather(*(run(job) for job in jobs))
    for cells in results:
        for label, measure, sample_id, score in cells:
            evaluations[label].add(sample_id, measure, score)
    order = {s.id: i for i, s in enumerate(items)}
    evaluations = {
        label: _ordered(ev, order, chosen) for label, ev in evaluations.items() if ev.metrics
    }
    compared = [m for m in chosen if any(m in ev.metrics for ev in evaluations.values())]
    comparison = (
        compare_frameworks(
            evaluations,
            measures=compared,
            skipped=plan.skipped,
            judge_model=engine.model if engine is not None else None,
            notes=_notes(engine, plan, compared),
        )
        if evaluations
        else CrossComparison(
            measures=[],
            skipped=plan.skipped,
            n_samples=len(items),
            judge_model=engine.model if engine is not None else None,
            notes=_notes(engine, plan, compared),
        )
    )
    return ComparisonRun(comparison=comparison, evaluations=evaluations, skipped=plan.skipped)


# --------------------------------------------------------------------------- checks


def _check_samples(samples: Iterable[Sample]) -> list[Sample]:
    items = list(samples)
    if not items:
        raise ValueError("no samples to compare")
    seen: dict[str, int] = {}
    for i, sample in enumerate(items):
        if not isinstance(sample, Sample):
            raise TypeError(f"samples[{i}]: expected a Sample, got {type(sample).__name__}")
        if sample.id in seen:
            first = seen[sample.id]
            raise ValueError(
                f"samples[{i}]: id: duplicate sample id {sample.id!r} (first at [{first}])"
            )
        seen[sample.id] = i
    return items


def _check_frameworks(frameworks: Sequence[str]) -> list[str]:
    if isinstance(frameworks, str):
        frameworks = [f.strip() for f in frameworks.split(",") if f.strip()]
    out: list[str] = []
    for name in frameworks:
        if name not in FRAMEWORKS:
            raise ValueError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"no framework given; known: {', '.join(FRAMEWORKS)}")
    return out


def _check_measures(measures: Sequence[str] | None) -> list[str]:
    if measures is None:
        return list(MEASURES)
    if isinstance(measures, str):
        measures = [m.strip() for m in measures.split(",") if m.strip()]
    out: list[str] = []
    for name in measures:
        if name not in MEASURES:
            raise ValueError(f"unknown measure {name!r}; known: {', '.join(MEASURES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"no measure given; known: {', '.join(MEASURES)}")
    return out


def _judge_engine(
    judge: Judge | JudgeEngine | None, cache: Cache | None, max_concurrency: int
) -> JudgeEngine | None:
    if judge is None:
        return None
    if isinstance(judge, JudgeEngine):
        if cache is not None and judge.cache is not cache:
            raise ValueError("pass cache= to the JudgeEngine, not next to one")
        return judge
    return JudgeEngine(judge, cache=cache, max_concurrency=max_concurrency)


def _embedding_engine(
    embedder: Embedder | EmbeddingEngine | None, cache: Cache | None
) -> EmbeddingEngine:
    if isinstance(embedder, EmbeddingEngine):
        return embedder
    if embedder is None:
        from ragbridge.core.runner import default_embedder

        embedder = default_embedder()
    return EmbeddingEngine(embedder, cache=cache)


def _metadata(
    label: str, engine: JudgeEngine | None, embeddings: EmbeddingEngine | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"framework": label}
    if engine is not None and label not in ("ragbridge:offline", NON_LLM):
        meta["judge_model"] = engine.model
    if embeddings is not None:
        meta["embedder_model"] = embeddings.model
    return meta


def _ordered(evaluation: Evaluation, order: dict[str, int], measures: Sequence[str]) -> Evaluation:
    """The cells in measure order, then sample order (jobs finish in any order)."""
    out = Evaluation(metadata=evaluation.metadata)
    rank = {m: i for i, m in enumerate(measures)}
    rows = sorted(evaluation, key=lambda row: (rank[row.metric], order[row.sample_id]))
    for sample_id, metric, score in rows:
        out.add(sample_id, metric, score)
    return out


def _notes(engine: JudgeEngine | None, plan: _Plan, measures: Sequence[str]) -> list[str]:
    notes = []
    if engine is not None:
        notes.append(
            f"every judge measure of every framework ran on the same judge ({engine.model}) "
            "through one ragbridge engine and cache"
        )
    else:
        notes.append("no judge: only offline, id-based and string measures ran")
    if plan.embeddings is not None:
        notes.append(f"embedder: {plan.embeddings.model}")
    if plan.nonllm_label is not None and plan.nonllm_label != "ragbridge":
        notes.append(f"ragbridge's id and string measures are in the {plan.nonllm_label} column")
    notes.extend(DEFINITIONS[m] for m in measures if m in DEFINITIONS)
    return notes


# --------------------------------------------------------------------------- the plan

_Cell = tuple[str, str, str, Score]  # label, measure, sample id, score


def _missing(sample: Sample, fields: Sequence[str], measure: str) -> Score | None:
    for name in fields:
        value = getattr(sample, name)
        if value is None or (isinstance(value, (str, list)) and not value):
            return Score.fail(
                FailureKind.MISSING_INPUT, f"{measure} needs the sample's {name!r}, which is empty"
            )
    return None


def _has(samples: Sequence[Sample], fields: Sequence[str], measure: str) -> bool:
    return any(_missing(s, fields, measure) is None for s in samples)


class _Plan:
    """Which jobs run and which pairs are skipped, for one comparison."""

    def __init__(
        self,
        samples: list[Sample],
        frameworks: list[str],
        measures: list[str],
        engine: JudgeEngine | None,
    ) -> None:
        self.samples = samples
        self.frameworks = frameworks
        self.measures = measures
        self.engine = engine
        self.embeddings: EmbeddingEngine | None = None
        self.skipped: list[Skipped] = []
        self.labels: list[str] = []
        self.running: set[tuple[str, str]] = set()
        self.nonllm_label: str | None = None
        if "ragbridge:offline" in frameworks:
            self.nonllm_label = "ragbridge:offline"
        elif "ragbridge" in frameworks:
            self.nonllm_label = "ragbridge"
        judge_measures = [m for m in measures if m in JUDGE_MEASURES]
        self.ragbridge_llm = (
            judge_measures if "ragbridge" in frameworks and engine is not None else []
        )
        self.ragbridge_offline = judge_measures if "ragbridge:offline" in frameworks else []
        self.ragbridge_plain = (
            [m for m in measures if m not in JUDGE_MEASURES] if self.nonllm_label else []
        )
        self.needs_embedder = bool(self.ragbridge_offline) or (
            engine is not None
            and "answer_relevance" in measures
            and any(f in frameworks for f in ("ragbridge", "ragas"))
        )
        self._decide()

    def _skip(self, framework: str, measure: str, reason: str) -> None:
        self.skipped.append(Skipped(framework=framework, measure=measure, reason=reason))

    def _decide(self) -> None:
        """Fill ``skipped`` for every pair that will not run, and the column labels."""
        samples = self.samples
        labels: list[str] = []
        for measure in self.measures:
            for framework in self.frameworks:
                for label, reason in self._pair(framework, measure, samples):
                    if reason is None:
                        self.running.add((label, measure))
                        if label not in labels:
                            labels.append(label)
                    else:
                        self._skip(label, measure, reason)
        self.labels = labels

    def _pair(
        self, framework: str, measure: str, samples: Sequence[Sample]
    ) -> list[tuple[str, str | None]]:
        """(label, None) for a column that runs, (label, reason) for one that is skipped."""
        judged = measure in JUDGE_MEASURES
        if framework == "ragbridge":
            if judged:
                return [("ragbridge", None if self.engine is not None else _NEEDS_JUDGE)]
            if self.nonllm_label == "ragbridge":
                return [("ragbridge", None)]
            return []  # scored under ragbridge:offline
        if framework == "ragbridge:offline":
            return [("ragbridge:offline", None)]
        if framework == "ragas":
            out: list[tuple[str, str | None]] = []
            if judged:
                out.append(("ragas", None if self.engine is not None else _NEEDS_JUDGE))
                if measure in ("context_precision", "context_recall"):
                    reason = (
                        None
                        if _has(samples, _NON_LLM_INPUTS, measure)
                        else "needs reference_contexts (no sample has them)"
                    )
                    out.append((NON_LLM, reason))
            elif measure in ID_MEASURES:
                ok = any(_ids_present(s) for s in samples)
                out.append(("ragas", None if ok else "needs context ids and relevance labels"))
            else:
                out.append(("ragas", None))
            return out
        # deepeval
        if judged:
            return [("deepeval", None if self.engine is not None else _NEEDS_JUDGE)]
        return [("deepeval", "DeepEval has no non-LLM implementation")]

    def runs(self, label: str, measure: str) -> bool:
        return (label, measure) in self.running

    def jobs(self) -> list[Callable[[], Awaitable[list[_Cell]]]]:
        jobs: list[Callable[[], Awaitable[list[_Cell]]]] = []
        if self.ragbridge_llm or self.ragbridge_offline or self.ragbridge_plain:
            jobs.extend(self._ragbridge_jobs())
        if "ragas" in self.frameworks:
            jobs.extend(self._ragas_jobs())
        if "deepeval" in self.frameworks:
            jobs.extend(self._deepeval_jobs())
        return jobs

    # -- ragbridge

    def _ragbridge_jobs(self) -> list[Callable[[], Awaitable[list[_Cell]]]]:
        from ragbridge.core.scoring import Scorer

        groups: list[tuple[str, Any, list[str]]] = []
        if self.ragbridge_llm:
            scorer = Scorer(self.ragbridge_llm, judge=self.engine, embedder=self.embeddings)
            groups.append(("ragbridge", scorer, self.ragbridge_llm))
        if self.ragbridge_offline:
            names = [f"{m}:offline" for m in self.ragbridge_offline]
            scorer = Scorer(names, embedder=self.embeddings)
            groups.append(("ragbridge:offline", scorer, self.ragbridge_offline))
        strings = [m for m in self.ragbridge_plain if m in STRING_MEASURES]
        if strings:
            scorer = Scorer(_string_metrics(strings))
            assert self.nonllm_label is not None
            groups.append((self.nonllm_label, scorer, strings))
        ids = [m for m in self.ragbridge_plain if m in ID_MEASURES]
        jobs: list[Callable[[], Awaitable[list[_Cell]]]] = []
        for sample in self.samples:
            for label, scorer, names in groups:
                jobs.append(_bind_scorer(label, scorer, names, sample))
            if ids:
                assert self.nonllm_label is not None
                jobs.append(_bind_ids(self.nonllm_label, ids, sample))
        return jobs

    # -- RAGAS

    def _ragas_jobs(self) -> list[Callable[[], Awaitable[list[_Cell]]]]:
        from ragbridge.adapters import ragas as adapter  # raises naming the extra

        jobs: list[Callable[[], Awaitable[list[_Cell]]]] = []
        for measure in self.measures:
            for label in ("ragas", NON_LLM):
                if not self.runs(label, measure):
                    continue
                for sample in self.samples:
                    jobs.append(_bind_ragas(adapter, self, label, measure, sample))
        return jobs

    # -- DeepEval

    def _deepeval_jobs(self) -> list[Callable[[], Awaitable[list[_Cell]]]]:
        measures = [m for m in self.measures if self.runs("deepeval", m)]
        if not measures:
            return []
        from ragbridge.adapters import deepeval as adapter  # raises naming the extra

        return [
            _bind_deepeval(adapter, self, measure, sample)
            for measure in measures
            for sample in self.samples
        ]


def _string_metrics(names: Sequence[str]) -> list[Any]:
    from ragbridge.adapters.strings import Bleu, ExactMatch, RougeScore

    made = {"rouge_l": RougeScore, "bleu": Bleu, "exact_match": ExactMatch}
    return [made[n]() for n in names]


def _ids_present(sample: Sample) -> bool:
    return (
        bool(sample.contexts)
        and all(c.id is not None for c in sample.contexts)
        and sample.relevance is not None
    )


def _bind_scorer(
    label: str, scorer: Any, names: list[str], sample: Sample
) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        scores: dict[str, Score] = await scorer.ascore(sample)
        return [(label, name, sample.id, scores[name]) for name in names]

    return job


def _bind_ids(label: str, names: list[str], sample: Sample) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        from ragbridge.core.retrieval import score_sample

        n = len(sample.contexts)
        out: list[_Cell] = []
        for name in names:
            if n == 0:
                score = Score.fail(
                    FailureKind.MISSING_INPUT,
                    f"{name} needs the sample's 'contexts', which is empty",
                )
            else:
                family = "precision" if name == "id_context_precision" else "recall"
                measure = f"{family}@{n}"
                score = score_sample(sample, [measure])[measure]
            out.append((label, name, sample.id, score))
        return out

    return job


# --------------------------------------------------------------------------- RAGAS cells


def _bind_ragas(
    adapter: Any, plan: _Plan, label: str, measure: str, sample: Sample
) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        return [
            (label, measure, sample.id, await _ragas_cell(adapter, plan, label, measure, sample))
        ]

    return job


def _observing_llm(adapter: Any, engine: JudgeEngine) -> Any:
    """A fresh `RagasInstructorJudge` on ``engine`` that records each (schema name, reply)."""

    class ObservingJudge(adapter.RagasInstructorJudge):  # type: ignore[misc]
        def __init__(self, engine: JudgeEngine) -> None:
            super().__init__(engine)
            self.replies: list[tuple[str, BaseModel]] = []

        async def agenerate(self, prompt: str, response_model: type[Any]) -> Any:
            reply = await super().agenerate(prompt, response_model)
            self.replies.append((response_model.__name__, reply))
            return reply

    return ObservingJudge(engine)


async def _ragas_cell(adapter: Any, plan: _Plan, label: str, measure: str, sample: Sample) -> Score:
    if label == NON_LLM:
        return await _ragas_non_llm(adapter, measure, sample)
    if measure in ID_MEASURES:
        return await _ragas_ids(adapter, measure, sample)
    missing = _missing(sample, _INPUTS[measure], measure)
    if missing is not None:
        return missing.model_copy(update={"provider": "ragas"})
    from ragas.metrics import collections as rc

    if measure in STRING_MEASURES:
        metric: Any = {
            "rouge_l": rc.RougeScore,
            "bleu": rc.BleuScore,
            "exact_match": rc.ExactMatch,
        }[measure]()
        try:
            result = await metric.ascore(reference=sample.reference, response=sample.answer)
        except Exception as exc:
            return _raised("RAGAS", measure, exc, provider="ragas")
        return _ragas_score(adapter, result, measure, None)

    assert plan.engine is not None
    llm = _observing_llm(adapter, plan.engine)
    contexts = [c.text for c in sample.contexts]
    answer, reference = sample.answer or "", sample.reference or ""  # present: checked above
    try:
        if measure == "faithfulness":
            result = await rc.Faithfulness(llm=llm).ascore(
                user_input=sample.question, response=answer, retrieved_contexts=contexts
            )
        elif measure == "answer_relevance":
            assert plan.embeddings is not None
            embeddings = adapter.RagasModernEmbedder(plan.embeddings)
            result = await rc.AnswerRelevancy(llm=llm, embeddings=embeddings).ascore(
                user_input=sample.question, response=answer
            )
        elif measure == "context_precision":
            result = await rc.ContextPrecision(llm=llm).ascore(
                user_input=sample.question, reference=reference, retrieved_contexts=contexts
            )
        else:
            result = await rc.ContextRecall(llm=llm).ascore(
                user_input=sample.question, retrieved_contexts=contexts, reference=reference
            )
    except adapter.RagasJudgeError as exc:
        return Score(
            failure=exc.failure,
            provider="ragas",
            judge_model=llm.model,
            usage=llm.usage,
        )
    except Exception as exc:
        return _raised("RAGAS", measure, exc, provider="ragas", usage=llm.usage, model=llm.model)
    score = _ragas_score(adapter, result, measure, llm)
    if measure == "faithfulness" and score.value is None and _no_statements(llm.replies):
        score = score.model_copy(
            update={
                "failure": Failure(
                    kind=FailureKind.NO_CLAIMS,
                    message="RAGAS extracted no statement from the answer and returned NaN",
                )
            }
        )
    return score


def _no_statements(replies: Sequence[tuple[str, BaseModel]]) -> bool:
    """Whether RAGAS's statement-extraction reply held no statement (what makes it return NaN)."""
    for name, reply in replies:
        if name == "StatementGeneratorOutput":
            return not [s for s in getattr(reply, "statements", []) if str(s).strip()]
    return False


def _ragas_score(adapter: Any, result: Any, measure: str, llm: Any) -> Score:
    score: Score = adapter.score_from_ragas(result, metric=measure)
    update: dict[str, Any] = {}
    if score.value is not None and score.reason is None:
        update["reason"] = _RAGAS_NO_REASON
    if llm is not None:
        update["usage"] = llm.usage
        update["judge_model"] = llm.model
    return score.model_copy(update=update) if update else score


async def _ragas_non_llm(adapter: Any, measure: str, sample: Sample) -> Score:
    missing = _missing(sample, _NON_LLM_INPUTS, measure)
    if missing is not None:
        return missing.model_copy(update={"provider": "ragas"})
    from ragas.dataset_schema import SingleTurnSample

    with warnings.catch_warnings():  # RAGAS 0.4.3 has no collections version of these yet
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

    metric: Any = (
        NonLLMContextPrecisionWithReference()
        if measure == "context_precision"
        else NonLLMContextRecall()
    )
    row = SingleTurnSample(
        retrieved_contexts=[c.text for c in sample.contexts],
        reference_contexts=list(sample.reference_contexts or []),
    )
    try:
        value = await metric.single_turn_ascore(row)
    except Exception as exc:
        return _raised("RAGAS", measure, exc, provider="ragas")
    return _ragas_score(adapter, value, measure, None)


async def _ragas_ids(adapter: Any, measure: str, sample: Sample) -> Score:
    if not _ids_present(sample):
        return Score.fail(
            FailureKind.MISSING_INPUT,
            f"{measure} needs an id on every context and relevance labels",
            provider="ragas",
        )
    with warnings.catch_warnings():  # RAGAS 0.4.3 has no collections version of these yet
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import IDBasedContextPrecision, IDBasedContextRecall

    metric: Any = (
        IDBasedContextPrecision() if measure == "id_context_precision" else IDBasedContextRecall()
    )
    (row,) = adapter.to_ragas_dataset([sample]).samples
    try:
        value = await metric.single_turn_ascore(row)
    except Exception as exc:
        return _raised("RAGAS", measure, exc, provider="ragas")
    return _ragas_score(adapter, value, measure, None)


def _raised(
    framework: str,
    measure: str,
    exc: BaseException,
    *,
    provider: str,
    usage: Usage | None = None,
    model: str | None = None,
) -> Score:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return Score(
        failure=Failure(
            kind=FailureKind.JUDGE_ERROR,
            message=f"{framework} {measure} raised {type(exc).__name__}: {first}",
        ),
        provider=provider,
        usage=usage or Usage(),
        judge_model=model,
    )


# --------------------------------------------------------------------------- DeepEval cells


def _bind_deepeval(
    adapter: Any, plan: _Plan, measure: str, sample: Sample
) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        return [
            ("deepeval", measure, sample.id, await _deepeval_cell(adapter, plan, measure, sample))
        ]

    return job


async def _deepeval_cell(adapter: Any, plan: _Plan, measure: str, sample: Sample) -> Score:
    missing = _missing(sample, _INPUTS[measure], measure)
    if missing is not None:
        return missing.model_copy(update={"provider": "deepeval"})
    from deepeval.metrics import (
        AnswerRelevancyMetric,
        ContextualPrecisionMetric,
        ContextualRecallMetric,
        FaithfulnessMetric,
    )

    assert plan.engine is not None
    model = adapter.DeepEvalJudge(plan.engine)  # fresh: its usage is this cell's
    cls: Any = {
        "faithfulness": FaithfulnessMetric,
        "answer_relevance": AnswerRelevancyMetric,
        "context_precision": ContextualPrecisionMetric,
        "context_recall": ContextualRecallMetric,
    }[measure]
    metric = cls(model=model, async_mode=True, include_reason=True)
    try:
        await metric.a_measure(adapter.to_test_case(sample), _show_indicator=False)
    except adapter.JudgeCallFailed as exc:
        return Score(
            failure=exc.failure,
            provider="deepeval",
            judge_model=model.engine.model,
            usage=model.usage,
        )
    except Exception as exc:
        return _raised(
            "DeepEval",
            measure,
            exc,
            provider="deepeval",
            usage=model.usage,
            model=model.engine.model,
        )
    value = metric.score
    reason = metric.reason if isinstance(metric.reason, str) and metric.reason else None
    common: dict[str, Any] = {
        "provider": "deepeval",
        "judge_model": model.engine.model,
        "usage": model.usage,
    }
    error = getattr(metric, "error", None)
    if error:
        return Score.fail(FailureKind.JUDGE_ERROR, f"DeepEval {measure}: {error}", **common)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"DeepEval {measure} returned no score (got {value!r})",
            **common,
        )
    if not 0.0 <= float(value) <= 1.0:
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"DeepEval {measure} returned {value!r}, outside [0, 1]",
            **common,
        )
    return Score(value=float(value), reason=reason, **common)
