"""Run ragbridge, RAGAS and DeepEval on the same samples and compare their scores, measure by
measure.

Why it exists: "our faithfulness is 0.71, RAGAS says 0.64" is only worth discussing when both
numbers come from the same samples, the same judge model and the same cached judge replies, and
when what cannot be compared is said out loud. A comparison is "run every provider of these
measures on the same samples with the same judge": each framework's implementation is a
provider in the registry (`ragbridge.adapters.ragas.provider`,
`ragbridge.adapters.deepeval.provider`), which is where running RAGAS or DeepEval on one sample
lives; `ragbridge.core.results.crosscheck` does the statistics. This module plans the columns, runs
the cells and turns them into one ragbridge `Evaluation` per column.

**Frameworks and labels.** ``"ragbridge"`` (the measures' default providers),
``"ragbridge:offline"`` (the ``offline`` providers), ``"ragas"`` and ``"deepeval"``. Asking for
``"ragas"`` also yields a ``"ragas:non-llm"`` column on the two context measures (the
``ragas_non_llm`` provider). The non-LLM measures of ragbridge (ids, strings) are scored under
``"ragbridge:offline"`` when it is asked for, else under ``"ragbridge"`` (one column, not two
identical ones). `providers` says what computes each column (the registry's ``how``),
`definitions` where the definitions differ (the providers' ``note``).

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
it left out.

**One judge, one cache, honest costs.** The judge is wrapped once in a `JudgeEngine` holding the
cache; ragbridge's `Scorer` and every RAGAS and DeepEval cell go through it, each framework
cell with a fresh wrapper, so its usage is exactly what it spent. Template ids differ per
framework, so no framework is served another's replies. The framework cells call the provider
functions directly, so a column shows what the framework itself does at the edges (RAGAS's NaN
on an answer with no claim becomes a ``no_claims`` failure; DeepEval scores 1.0 there), which
`compare_frameworks` names a policy difference.

Importing this module needs neither RAGAS nor DeepEval: each is imported when asked for, and a
missing one raises ImportError naming the extra (``pip install ".[ragas]"`` in your ragbridge
clone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

from ragbridge.adapters._framework_cells import missing
from ragbridge.adapters._frameworks import framework_noise_off, quiet_frameworks
from ragbridge.adapters._samples import distinct_samples
from ragbridge.adapters.deepeval.provider import deepeval_score
from ragbridge.adapters.ragas.provider import (
    NON_LLM_INPUTS,
    ids_present,
    ragas_id_score,
    ragas_non_llm_score,
    ragas_score,
)
from ragbridge.core.cache.backend import CacheBackend
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.results.crosscheck import CrossComparison, Skipped, compare_frameworks
from ragbridge.core.results.evaluation import Evaluation, FailureKind, Score, Usage
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import build_engines, run_sync
from ragbridge.core.settings import Settings, SettingsOptions

quiet_frameworks()  # before RAGAS or DeepEval is imported below

__all__ = [
    "FRAMEWORKS",
    "ID_MEASURES",
    "JUDGE_MEASURES",
    "MEASURES",
    "STRING_MEASURES",
    "ComparisonRun",
    "acompare_frameworks_on",
    "compare_frameworks_on",
    "definitions",
    "providers",
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

_LABELS: dict[str, str | None] = {
    "ragbridge": None,
    "ragbridge:offline": "offline",
    "ragas": "ragas",
    NON_LLM: "ragas_non_llm",
    "deepeval": "deepeval",
}
"""Column label -> the registry provider behind it (None: the measure's default provider)."""

_ID_HOW = {
    "id_context_precision": "ragbridge precision@n over the retrieved ids (n = number retrieved)",
    "id_context_recall": "ragbridge recall@n over the retrieved ids (n = number retrieved)",
}
_ID_NOTES = {
    "id_context_precision": (
        "id_context_precision: the same definition on both sides (relevant retrieved ids / "
        "retrieved ids); any difference means duplicate ids or a conversion problem."
    ),
    "id_context_recall": (
        "id_context_recall: the same definition on both sides (relevant ids retrieved / "
        "relevant ids)."
    ),
}


def providers() -> dict[str, dict[str, str]]:
    """Measure -> column label -> what computes it, read from the registry (the providers'
    ``how``). For the non-LLM measures the ``"ragbridge"`` column is scored under
    ``"ragbridge:offline"`` when that framework is asked for."""
    from ragbridge.adapters.ragas.provider import ID_HOW

    out: dict[str, dict[str, str]] = {}
    for measure in MEASURES:
        if measure in ID_MEASURES:
            out[measure] = {"ragbridge": _ID_HOW[measure], "ragas": ID_HOW[measure]}
            continue
        row: dict[str, str] = {}
        for label, name in _LABELS.items():
            spec = _provider(measure, name)
            if spec is not None:
                who = label.split(":")[0]
                row[label] = f"{'RAGAS' if who == 'ragas' else who}: {spec.how}"
        out[measure] = row
    return out


def definitions() -> dict[str, str]:
    """Measure -> where the frameworks' definitions differ, from the providers' notes."""
    out = dict(_ID_NOTES)
    for measure in MEASURES:
        notes = [
            f"{label} — {spec.note}"
            for label, name in _LABELS.items()
            if (spec := _provider(measure, name)) is not None and spec.note
        ]
        if notes:
            out[measure] = f"{measure}: " + "; ".join(notes) + "."
    return out


def _provider(measure: str, name: str | None) -> Any:
    from ragbridge.core import metrics  # noqa: F401  (the built-in measures)
    from ragbridge.core.registry import REGISTRY, UnknownMeasureError

    try:
        return REGISTRY.provider(measure, name)
    except UnknownMeasureError:
        return None


_NEEDS_JUDGE = "needs a judge (pass --judge)"

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
    progress: Progress | None = None,
    settings: Settings | None = None,
    **options: Unpack[SettingsOptions],
) -> ComparisonRun:
    """Score ``samples`` with each of ``frameworks`` on ``measures`` (default: all of `MEASURES`)
    and compare them. Sync form of `acompare_frameworks_on`; safe inside a running event loop.

    ``settings`` (or its fields as keywords) mean what they mean for `ragbridge.core.evaluate`:
    ``judge`` drives every judge measure of every framework through one `JudgeEngine` (with
    ``cache``, ``timeout``, ``max_retries``, ``price``); without it those pairs are `Skipped`.
    ``embedder`` serves ragbridge's and RAGAS's answer relevance and the offline provider
    (default: the local model, when one is needed); ``max_concurrency`` caps the cells in flight.
    ``progress(done, total)`` is called as jobs finish. Raises ValueError for an unknown framework
    or measure, naming the known ones.
    """
    result: ComparisonRun = run_sync(
        acompare_frameworks_on(
            samples,
            frameworks=frameworks,
            measures=measures,
            progress=progress,
            settings=Settings.of(settings, options),
        )
    )
    return result


async def acompare_frameworks_on(
    samples: Iterable[Sample],
    *,
    frameworks: Sequence[str] = ("ragbridge", "ragas", "deepeval"),
    measures: Sequence[str] | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    **options: Unpack[SettingsOptions],
) -> ComparisonRun:
    """The async form of `compare_frameworks_on`."""
    items = _check_samples(samples)
    chosen_frameworks = _check_frameworks(frameworks)
    chosen = _check_measures(measures)
    config = Settings.of(settings, options)
    engines = build_engines(config, [])
    engine = engines.judge
    plan = _Plan(items, chosen_frameworks, chosen, engine)
    if plan.needs_embedder:
        plan.embeddings = engines.embedder or _default_embeddings(engines.cache)
    with framework_noise_off():  # the frameworks' warnings stay inside; edge cases are ours
        jobs = plan.jobs()
    evaluations: dict[str, Evaluation] = {
        label: Evaluation(metadata=_metadata(label, engine, plan.embeddings))
        for label in plan.labels
    }
    done = 0
    total = len(jobs)
    gate = asyncio.Semaphore(config.max_concurrency)
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
    items = distinct_samples(samples)
    if not items:
        raise ValueError("no samples to compare")
    return items


def _check_frameworks(frameworks: Sequence[str]) -> list[str]:
    return _known_names(frameworks, FRAMEWORKS, "framework")


def _check_measures(measures: Sequence[str] | None) -> list[str]:
    if measures is None:
        return list(MEASURES)
    return _known_names(measures, MEASURES, "measure")


def _known_names(given: Sequence[str], known: Sequence[str], kind: str) -> list[str]:
    """``given`` (a list or one comma-separated string) in order, once each, all of ``known``.

    Why one check for frameworks and measures: both come from the same kind of option
    (``--frameworks ragas,deepeval``, ``--measures ...``) and should be refused the same way.
    """
    names = [n.strip() for n in given.split(",") if n.strip()] if isinstance(given, str) else given
    out: list[str] = []
    for name in names:
        if name not in known:
            raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(known)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"no {kind} given; known: {', '.join(known)}")
    return out


def _default_embeddings(cache: CacheBackend | None) -> EmbeddingEngine:
    from ragbridge.core.scoring.runner import default_embedder

    return EmbeddingEngine(default_embedder(), cache=cache)


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
    differ = definitions()
    notes.extend(differ[m] for m in measures if m in differ)
    return notes


# --------------------------------------------------------------------------- the plan

_Cell = tuple[str, str, str, Score]  # label, measure, sample id, score


def _has(samples: Sequence[Sample], fields: Sequence[str], measure: str) -> bool:
    return any(missing(s, fields, measure) is None for s in samples)


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
                        if _has(samples, NON_LLM_INPUTS, measure)
                        else "needs reference_contexts (no sample has them)"
                    )
                    out.append((NON_LLM, reason))
            elif measure in ID_MEASURES:
                ok = any(ids_present(s) for s in samples)
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
        from ragbridge.core.scoring.scorer import Scorer

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
        from ragbridge.adapters.ragas import models  # noqa: F401  (raises naming the extra)

        return [
            self._ragas_job(label, measure, sample)
            for measure in self.measures
            for label in ("ragas", NON_LLM)
            if self.runs(label, measure)
            for sample in self.samples
        ]

    def _ragas_job(
        self, label: str, measure: str, sample: Sample
    ) -> Callable[[], Awaitable[list[_Cell]]]:
        async def job() -> list[_Cell]:
            if label == NON_LLM:
                score = await ragas_non_llm_score(measure, sample)
            elif measure in ID_MEASURES:
                score = await ragas_id_score(measure, sample)
            else:
                score = await ragas_score(measure, sample, self.engine, self.embeddings)
            return [(label, measure, sample.id, score)]

        return job

    # -- DeepEval

    def _deepeval_jobs(self) -> list[Callable[[], Awaitable[list[_Cell]]]]:
        measures = [m for m in self.measures if self.runs("deepeval", m)]
        if not measures:
            return []
        from ragbridge.adapters.deepeval import models  # noqa: F401  (raises naming the extra)

        return [self._deepeval_job(m, s) for m in measures for s in self.samples]

    def _deepeval_job(self, measure: str, sample: Sample) -> Callable[[], Awaitable[list[_Cell]]]:
        async def job() -> list[_Cell]:
            score = await deepeval_score(measure, sample, self.engine)
            return [("deepeval", measure, sample.id, score)]

        return job


def _string_metrics(names: Sequence[str]) -> list[Any]:
    from ragbridge.adapters.strings import Bleu, ExactMatch, RougeScore

    made = {"rouge_l": RougeScore, "bleu": Bleu, "exact_match": ExactMatch}
    return [made[n]() for n in names]


def _bind_scorer(
    label: str, scorer: Any, names: list[str], sample: Sample
) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        scores: dict[str, Score] = await scorer.ascore(sample)
        return [(label, name, sample.id, scores[name]) for name in names]

    return job


def _bind_ids(label: str, names: list[str], sample: Sample) -> Callable[[], Awaitable[list[_Cell]]]:
    async def job() -> list[_Cell]:
        from ragbridge.core.retrieval import score_ranking

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
                score = score_ranking(sample, [measure])[measure]
            out.append((label, name, sample.id, score))
        return out

    return job
