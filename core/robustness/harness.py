"""`arun_robustness`: answer every question again under retrieval faults and score each condition.

RGB (Chen et al., 2023) asks how a RAG system holds up when retrieval goes wrong. This harness
asks the user's own pipeline (a `RobustPipeline`: the adapters wrap LangChain and LlamaIndex
retrievers) to answer every question

1. clean (`CLEAN`): the pipeline's own retrieval, unchanged. The clean passages of all questions
   make the noise pool (`NoisePool`: passages retrieved for *other* questions, so noise looks like
   real retrieval), and each question's counterfactual is built from its clean passages (the
   user's ``metadata["counterfactual"]`` first; else the judge's with
   ``counterfactuals="judge"``; else the offline one);
2. under every other condition, with a `Perturb` that turns the live retrieval into what the
   condition gives (`perturb`): noise at a ratio, only other questions' passages (negative), the
   reference's fact replaced by a wrong one (counterfactual).

Every (question, condition) answer becomes one `Sample` (id ``{id}@{condition}``, metadata
``robustness_condition``, ``noise_ratio``, ``source_id``; a negative one is labelled "no relevant
document" (``relevance == {}``), a counterfactual one carries ``metadata["counterfactual"]``), and
ONE scoring run scores them all, each condition with its measures (`condition_metrics`). A
question a condition cannot be built for (the clean run failed, no counterfactual, a pool too
small) is skipped with its reason in that condition's summary, never dropped silently.

Pipeline answers are kept in the run's cache (`AnswerCache`) and judge replies by the engine, so
a rerun calls neither. Questions run concurrently, at most ``max_concurrency`` pipeline calls at
once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from typing_extensions import Unpack

from ..cache.disk import open_cache
from ..cache.guard import guard_cache
from ..judging.engine import JudgeEngine, cost_of
from ..metrics.base import Metric
from ..results.evaluation import Evaluation, Usage
from ..results.stats import MeanCI
from ..sample import Sample
from ..scoring.runner import aevaluate, judge_engine, run_sync
from ..settings import Settings, SettingsOptions
from .answers import AnswerCache, answer_key, failed
from .conditions import CLEAN, Condition
from .counterfactual import (
    Counterfactual,
    judge_counterfactual_attempt,
    offline_counterfactual_attempt,
    user_counterfactual,
)
from .jobs import Job, JobBuilder, run_conditions
from .perturb import NoisePool
from .plan import DEFAULT_METRICS, condition_metrics
from .summary import ConditionSummary, Skipped, summarise
from .types import RobustPipeline

__all__ = ["DEFAULT_METRICS", "RobustnessResult", "arun_robustness", "run_robustness"]

Progress = Callable[[str, int, int], Any]
"""Called as ``progress(condition_name, done, total)`` after each question of a condition."""

CounterfactualMode = Literal["offline", "judge"]


@dataclass
class RobustnessResult:
    """A robustness run: the scored samples, the one `Evaluation`, and a summary per condition.

    ``metrics`` names each condition kind's measures; ``notes`` say what was chosen for want of
    a judge; ``pipeline_calls`` / ``answers_cached`` count the pipeline answers asked for and
    read from the cache; ``counterfactuals`` is each question's planted fact
    (`Counterfactual.as_metadata`).
    """

    samples: list[Sample]
    evaluation: Evaluation
    conditions: list[Condition]
    summary: list[ConditionSummary]
    metrics: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    pipeline_calls: int = 0
    answers_cached: int = 0
    counterfactuals: dict[str, dict[str, str]] = field(default_factory=dict)

    def condition(self, name: str) -> ConditionSummary:
        """The summary of the condition ``name`` (``"noise@0.2"``, ``"negative"``)."""
        for item in self.summary:
            if item.name == name:
                return item
        raise KeyError(f"no condition {name!r} in this run: {[s.name for s in self.summary]}")

    def curve(self, metric: str) -> list[tuple[float, MeanCI | None]]:
        """``metric``'s mean and CI at each noise ratio, lowest first (``"abstention"`` for the
        abstention rate); None where no question got a value."""
        noise = sorted(
            (s for s in self.summary if s.condition.kind == "noise"),
            key=lambda s: s.condition.ratio,
        )
        if metric == "abstention":
            return [(s.condition.ratio, s.abstention) for s in noise]
        return [(s.condition.ratio, s.metrics.get(metric)) for s in noise]

    def to_dict(self) -> dict[str, Any]:
        """The run's figures as JSON-ready values (not the samples: see ``samples``)."""
        return {
            "conditions": [c.name for c in self.conditions],
            "metrics": {k: list(v) for k, v in self.metrics.items()},
            "summary": [s.to_dict() for s in self.summary],
            "notes": list(self.notes),
            "pipeline_calls": self.pipeline_calls,
            "answers_cached": self.answers_cached,
            "counterfactuals": dict(self.counterfactuals),
            "evaluation": dict(self.evaluation.metadata),
        }


class _Runner:
    """The pipeline side of a run: cached answers, the in-flight cap, the counts."""

    def __init__(self, pipeline: RobustPipeline, answers: AnswerCache, limit: int) -> None:
        self.pipeline = pipeline
        self.answers = answers
        self.gate = asyncio.Semaphore(limit)
        self.calls = 0

    async def answer(self, job: Job) -> Sample:
        cached = self.answers.get(job.key)
        if cached is not None:
            return cached
        async with self.gate:
            self.calls += 1
            try:
                out = await self.pipeline.answer(job.source, job.perturb)
            except Exception as exc:  # the protocol says record it; a pipeline may not
                meta = {**job.source.metadata, "error": f"{type(exc).__name__}: {exc}"}
                out = job.source.model_copy(update={"answer": None, "metadata": meta})
        if not isinstance(out, Sample):
            raise TypeError(
                f"{type(self.pipeline).__name__}.answer returned {type(out).__name__}, not a Sample"
            )
        self.answers.put(job.key, out)
        return out

    async def run(
        self, condition: Condition, jobs: Sequence[Job], progress: Progress | None
    ) -> list[Sample]:
        total = len(jobs)
        done = 0
        if not jobs and progress is not None:
            progress(condition.name, 0, 0)  # every question skipped: still say it is done

        async def one(job: Job) -> Sample:
            nonlocal done
            out = await self.answer(job)
            done += 1
            if progress is not None:
                progress(condition.name, done, total)
            return out

        return list(await asyncio.gather(*(one(j) for j in jobs)))


def _scored(out: Sample, job: Job) -> Sample:
    """The pipeline's answer as the condition's sample (see the module docstring)."""
    cond = job.condition
    meta: dict[str, Any] = {
        **out.metadata,
        "robustness_condition": cond.name,
        "noise_ratio": cond.ratio if cond.kind == "noise" else None,
        "source_id": job.source.id,
    }
    update: dict[str, Any] = {"id": f"{job.source.id}@{cond.name}", "metadata": meta}
    if cond.kind == "negative":
        update["relevance"] = {}  # no relevant document exists among what it was given
        meta["no_answer"] = True
    if job.counterfactual is not None:
        meta["counterfactual"] = job.counterfactual.as_metadata()
    return out.model_copy(update=update)


async def _counterfactuals(
    samples: Sequence[Sample],
    clean: Mapping[str, Sample],
    mode: CounterfactualMode,
    engine: JudgeEngine | None,
) -> tuple[dict[str, Counterfactual], dict[str, str], Usage]:
    """Each question's counterfactual: the user's, else the judge's (``mode="judge"``), else
    the offline one; with the reason where none was built."""
    facts: dict[str, Counterfactual] = {}
    reasons: dict[str, str] = {}
    spent = Usage()
    answered = [clean[s.id] for s in samples if not failed(clean[s.id])]

    async def one(source: Sample) -> None:
        nonlocal spent
        try:
            fact = user_counterfactual(source)
        except ValueError as exc:
            reasons[source.id] = str(exc)
            return
        if fact is not None:
            facts[source.id] = fact
            return
        done = clean[source.id]
        if failed(done):
            return
        why: list[str] = []
        if mode == "judge" and engine is not None:
            judged = await judge_counterfactual_attempt(engine, done, done.contexts)
            if judged.usage is not None:
                spent += judged.usage
            if judged.counterfactual is not None:
                facts[source.id] = judged.counterfactual
                return
            why.append(f"judge: {judged.reason}")
        others = [s for s in answered if s.id != source.id]
        built = offline_counterfactual_attempt(done, done.contexts, others)
        if built.counterfactual is not None:
            facts[source.id] = built.counterfactual
            return
        why.append(built.reason if not why else f"offline: {built.reason}")
        reasons[source.id] = "; ".join(why)

    await asyncio.gather(*(one(s) for s in samples))
    return facts, reasons, spent


async def arun_robustness(
    pipeline: RobustPipeline,
    samples: Sequence[Sample],
    *,
    conditions: Sequence[Condition] | None = None,
    counterfactuals: CounterfactualMode = "offline",
    seed: int = 0,
    metrics: Mapping[str, Sequence[str | Metric]] | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    **options: Unpack[SettingsOptions],
) -> RobustnessResult:
    """Answer every question of ``samples`` with ``pipeline`` under each of ``conditions``
    (default `default_conditions`: clean, noise at 0.2 to 0.8, negative, counterfactual) and
    score each condition with its measures.

    ``metrics`` maps a condition kind (``"noise"``, ``"negative"``, ``"counterfactual"``) to its
    measure names; unnamed kinds get `DEFAULT_METRICS` with a judge, the offline ones without
    (`condition_metrics`). ``settings`` (or its fields as keywords) is as for `aevaluate`: its
    ``cache`` also keeps the pipeline's answers, its ``max_concurrency`` caps pipeline calls in
    flight. ``counterfactuals="judge"`` has the judge write each question's wrong fact (one call;
    the offline builder when it finds none); a user's ``metadata["counterfactual"]`` always
    wins. ``progress(condition, done, total)`` follows the pipeline calls.
    """
    conds = run_conditions(conditions)
    config = Settings.of(settings, options)
    if counterfactuals not in ("offline", "judge"):
        raise ValueError(f"counterfactuals must be 'offline' or 'judge', got {counterfactuals!r}")
    wants_judge = any(c.kind == "counterfactual" for c in conds) and counterfactuals == "judge"
    if wants_judge and config.judge is None:
        raise ValueError("counterfactuals='judge' needs a judge: configure one, or use 'offline'")
    chosen = condition_metrics(metrics, have_judge=config.judge is not None)
    seen: set[str] = set()
    for sample in samples:
        if sample.id in seen:
            raise ValueError(f"duplicate sample id {sample.id!r}")
        seen.add(sample.id)
    opened = open_cache(config.cache)
    store = guard_cache(opened)
    try:
        engine: JudgeEngine | None
        if config.judge is None or isinstance(config.judge, JudgeEngine):
            engine = config.judge
        else:  # one engine for counterfactuals and scoring: one cap, one set of counts
            engine = judge_engine(config, config.judge, store)
        run_settings = config.replace(cache=store, judge=engine)
        answers = AnswerCache(store, pipeline.identity)
        runner = _Runner(pipeline, answers, config.max_concurrency)

        clean_jobs = [
            Job(s, CLEAN, answer_key(pipeline.identity, s.question, CLEAN), None) for s in samples
        ]
        clean_out = await runner.run(CLEAN, clean_jobs, progress)
        clean = {s.id: out for s, out in zip(samples, clean_out, strict=True)}
        pool = NoisePool.from_samples([c for c in clean_out if not failed(c)])
        facts: dict[str, Counterfactual] = {}
        reasons: dict[str, str] = {}
        spent = Usage()
        if any(c.kind == "counterfactual" for c in conds):
            facts, reasons, spent = await _counterfactuals(samples, clean, counterfactuals, engine)

        builder = JobBuilder(clean, pool, pipeline.identity, seed)
        jobs: dict[Condition, list[Job]] = {CLEAN: clean_jobs}
        skipped: dict[Condition, list[Skipped]] = {c: [] for c in conds}
        for cond in conds[1:]:
            jobs[cond] = []
            for source in samples:
                built = builder.job(source, cond, facts.get(source.id), reasons.get(source.id))
                if isinstance(built, str):
                    skipped[cond].append(Skipped(source.id, built))
                else:
                    jobs[cond].append(built)
        outs = await asyncio.gather(*(runner.run(c, jobs[c], progress) for c in conds[1:]))
        answered: dict[Condition, list[Sample]] = {
            CLEAN: clean_out,
            **dict(zip(conds[1:], outs, strict=True)),
        }
        scored = {
            c: [_scored(o, j) for o, j in zip(answered[c], jobs[c], strict=True)] for c in conds
        }
        every = [s for c in conds for s in scored[c]]
        evaluation = await aevaluate(
            every, chosen.metrics, settings=run_settings, applies=chosen.applies
        )
    finally:
        if opened is not None and opened is not config.cache and store is not None:
            store.close()
    if spent != Usage():  # the judge's counterfactuals: spent outside the scoring run
        evaluation.metadata["counterfactual_usage"] = spent.model_dump()
        cost = cost_of(spent, engine.price if engine is not None else None)
        if cost is not None:
            total = evaluation.metadata.get("cost_usd", 0.0) + cost
            evaluation.metadata["cost_usd"] = round(total, 6)
    summary = [
        summarise(c, scored[c], evaluation, chosen.by_kind[c.kind], skipped[c], seed=seed)
        for c in conds
    ]
    return RobustnessResult(
        samples=every,
        evaluation=evaluation,
        conditions=conds,
        summary=summary,
        metrics=chosen.by_kind,
        notes=chosen.notes,
        pipeline_calls=runner.calls,
        answers_cached=answers.hits,
        counterfactuals={k: v.as_metadata() for k, v in facts.items()},
    )


def run_robustness(
    pipeline: RobustPipeline,
    samples: Sequence[Sample],
    *,
    conditions: Sequence[Condition] | None = None,
    counterfactuals: CounterfactualMode = "offline",
    seed: int = 0,
    metrics: Mapping[str, Sequence[str | Metric]] | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    **options: Unpack[SettingsOptions],
) -> RobustnessResult:
    """`arun_robustness` from sync code (also inside a running loop, as `evaluate` does)."""
    result: RobustnessResult = run_sync(
        arun_robustness(
            pipeline,
            samples,
            conditions=conditions,
            counterfactuals=counterfactuals,
            seed=seed,
            metrics=metrics,
            settings=settings,
            progress=progress,
            **options,
        )
    )
    return result
