"""What a robustness run will ask of the pipeline and the judge, said before anything is paid,
and the measures each condition is scored with.

Each condition is scored with its own measures: noise with answer correctness and faithfulness
(does the answer stay right, and grounded, as noise rises), the negative condition with negative
rejection (no relevant passage: the answer should decline), the counterfactual condition with
counterfactual robustness (does the answer follow the planted wrong fact) and answer correctness.
Every condition also gets the abstention rate, computed from the answers with no judge.

Without a judge the run is offline, as ``ragbridge eval`` is: a judge measure named without a
provider becomes its ``offline`` provider. Answer correctness has no offline provider, so the
offline default scores the answer against the reference with SQuAD token F1 (``token_f1``, lexical,
no model) instead, and says so; a measure named explicitly that needs a judge is refused before
anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..judging.engine import Price
from ..metrics.base import Metric
from ..sample import Sample
from ..scoring.runner import estimate, resolve_metrics
from .answers import AnswerCache, answer_key
from .conditions import CLEAN, Condition
from .counterfactual import Counterfactual, offline_counterfactual_attempt, user_counterfactual
from .jobs import JobBuilder, run_conditions
from .perturb import NoisePool

__all__ = [
    "DEFAULT_METRICS",
    "OFFLINE_METRICS",
    "ConditionMetrics",
    "RobustnessPlan",
    "condition_metrics",
    "plan_robustness",
]

DEFAULT_METRICS: dict[str, list[str]] = {
    "noise": ["answer_correctness", "faithfulness"],
    "negative": ["negative_rejection"],
    "counterfactual": ["counterfactual_robustness", "answer_correctness"],
}
"""Each condition kind's measures when a judge is configured (abstention is always added)."""

OFFLINE_METRICS: dict[str, list[str]] = {
    "noise": ["token_f1", "faithfulness:offline"],
    "negative": ["negative_rejection:offline"],
    "counterfactual": ["counterfactual_robustness:offline", "token_f1"],
}
"""Each condition kind's measures without a judge: the offline providers, and SQuAD token F1
against the reference where answer correctness (judge-only) would be."""

_KINDS = ("noise", "negative", "counterfactual")

_OFFLINE_STAND_IN = {"answer_correctness": "token_f1"}
"""Judge-only measures of the defaults and the offline measure that stands in for them."""


@dataclass
class ConditionMetrics:
    """The metrics of a run: one resolved list (each measure once) and, per condition kind, the
    names of those that score it; ``notes`` say what was substituted for want of a judge."""

    metrics: list[Metric]
    by_kind: dict[str, list[str]]
    notes: list[str] = field(default_factory=list)

    def applies(self, sample: Sample, metric: Metric) -> bool:
        """Whether ``metric`` scores ``sample`` (by its ``robustness_condition`` metadata)."""
        name = sample.metadata.get("robustness_condition")
        if not isinstance(name, str):
            return False
        return metric.name in self.by_kind.get(Condition.parse(name).kind, ())


def condition_metrics(
    metrics: Mapping[str, Sequence[str | Metric]] | None, *, have_judge: bool
) -> ConditionMetrics:
    """Resolve each condition kind's measures (`DEFAULT_METRICS`, or `OFFLINE_METRICS` without
    a judge, for the kinds ``metrics`` does not name).

    Without a judge a judge measure named without a provider becomes its offline provider (as
    ``ragbridge eval`` does); one with no offline provider is a ValueError naming it. A measure
    given with two different providers for two kinds is a ValueError: one run scores each
    measure one way.
    """
    given = dict(metrics or {})
    unknown = sorted(set(given) - set(_KINDS))
    if unknown:
        raise ValueError(f"unknown condition kind(s) {unknown}; expected {list(_KINDS)}")
    base = DEFAULT_METRICS if have_judge else OFFLINE_METRICS
    chosen: dict[str, Metric] = {}
    by_kind: dict[str, list[str]] = {}
    notes: list[str] = []
    for kind in _KINDS:
        names: list[str] = []
        for item in given.get(kind, base[kind]):
            metric = _metric(item, have_judge, notes)
            known = chosen.get(metric.name)
            if known is not None and len({known.provider, metric.provider}) > 1:
                raise ValueError(
                    f"measure {metric.name!r} is asked with two providers "
                    f"({known.provider} and {metric.provider}); one run scores it one way"
                )
            chosen.setdefault(metric.name, metric)
            if metric.name not in names:
                names.append(metric.name)
        by_kind[kind] = names
    if not have_judge and metrics is None:
        notes.append(
            "no judge: offline providers; answer correctness has no offline provider, "
            "so token_f1 (SQuAD token F1 against the reference) stands in for it"
        )
    return ConditionMetrics(resolve_metrics(chosen.values()), by_kind, notes)


def _metric(item: str | Metric, have_judge: bool, notes: list[str]) -> Metric:
    """One measure by the no-judge rule (a `Metric` object is used as given)."""
    if isinstance(item, Metric):
        return item
    (metric,) = resolve_metrics([item])
    if have_judge or not metric.needs_judge or ":" in item:
        if metric.needs_judge and not have_judge:
            raise ValueError(f"{item} needs a judge: configure one or pick an offline provider")
        return metric
    if "offline" in metric.providers:
        (offline,) = resolve_metrics([f"{metric.name}:offline"])
        note = f"{item} → {metric.name}:offline (no judge)"
        if note not in notes:
            notes.append(note)
        return offline
    stand_in = _OFFLINE_STAND_IN.get(metric.name)
    if stand_in is not None:
        (other,) = resolve_metrics([stand_in])
        note = f"{item} → {stand_in} (no judge, and {metric.name} has no offline provider)"
        if note not in notes:
            notes.append(note)
        return other
    raise ValueError(f"{item} needs a judge and has no offline provider: configure a judge")


@dataclass
class RobustnessPlan:
    """The cost of a robustness run before it starts: pipeline calls (cached answers left out),
    judge calls and prompt tokens of the scoring (a cold cache), judge calls that write
    counterfactuals (at most), and the cost when a price is known."""

    questions: int
    conditions: list[Condition]
    pipeline_calls: int
    answers_cached: int
    judge_calls: int
    prompt_tokens: int
    counterfactual_calls: int = 0
    skipped: int = 0
    """(question, condition) pairs the run will skip (known only from a warm cache)."""
    by_metric: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    metrics: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Human lines for the CLI and ``--dry-run``."""
        listed = ", ".join(c.name for c in self.conditions)
        out = [
            f"{self.questions} question(s) x {len(self.conditions)} condition(s) ({listed})",
            f"pipeline calls: {self.pipeline_calls}"
            + (f" ({self.answers_cached} answer(s) cached)" if self.answers_cached else "")
            + (f", {self.skipped} skipped" if self.skipped else ""),
        ]
        judge = f"judge calls: {self.judge_calls} for scoring"
        if self.counterfactual_calls:
            judge += f" + at most {self.counterfactual_calls} writing counterfactuals"
        judge += f", ~{self.prompt_tokens} prompt tokens (cold cache)"
        out.append(judge)
        if self.cost_usd is not None:
            out.append(f"estimated judge cost: ${self.cost_usd:.4f}")
        for kind, names in self.metrics.items():
            if any(c.kind == kind for c in self.conditions):
                out.append(f"{kind}: {', '.join(names) or 'abstention only'} + abstention")
        out.extend(self.notes)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (``--json``)."""
        return {
            "questions": self.questions,
            "conditions": [c.name for c in self.conditions],
            "pipeline_calls": self.pipeline_calls,
            "answers_cached": self.answers_cached,
            "skipped": self.skipped,
            "judge_calls": self.judge_calls,
            "counterfactual_calls": self.counterfactual_calls,
            "prompt_tokens": self.prompt_tokens,
            "by_metric": dict(self.by_metric),
            "cost_usd": self.cost_usd,
            "metrics": {k: list(v) for k, v in self.metrics.items()},
            "notes": list(self.notes),
        }


def stand_in(sample: Sample, condition: Condition) -> Sample:
    """What a condition's scored sample looks like, for the estimate: the reference as the
    answer (the answer is not known yet) and the sample's own passages when it has any."""
    meta = {**sample.metadata, "robustness_condition": condition.name}
    update: dict[str, Any] = {
        "id": f"{sample.id}@{condition.name}",
        "answer": sample.answer or sample.reference or sample.question,
        "metadata": meta,
    }
    if condition.kind == "negative":
        update["relevance"] = {}
        meta["no_answer"] = True
    if condition.kind == "counterfactual":
        meta.setdefault("counterfactual", {"original": "x", "wrong": "y"})
    return sample.model_copy(update=update)


def plan_robustness(
    samples: Sequence[Sample],
    conditions: Sequence[Condition] | None = None,
    *,
    metrics: Mapping[str, Sequence[str | Metric]] | None = None,
    have_judge: bool = False,
    counterfactuals: Literal["offline", "judge"] = "offline",
    seed: int = 0,
    answers_cached: int = 0,
    cache: AnswerCache | None = None,
    price: Price | None = None,
) -> RobustnessPlan:
    """The cost of `arun_robustness` on ``samples`` under ``conditions`` (default
    `default_conditions`; the clean run is always one), before anything is sent.

    Pipeline calls are questions x conditions minus ``answers_cached``, or minus what ``cache``
    (the pipeline's `AnswerCache`) already holds: with every clean answer cached the plan
    rebuilds the noise pool and the counterfactuals as the run will, so it counts exactly the
    perturbed answers cached and the questions a condition will skip (a judge-written
    counterfactual cannot be known beforehand: counted as a call). Judge calls and prompt tokens
    come from `ragbridge.core.scoring.runner.estimate` over stand-in samples (the reference as
    the answer), with each condition's measures, for a cold judge cache; counterfactuals written
    by the judge (``counterfactuals="judge"``) are at most one call per question without a user
    counterfactual. ``have_judge`` picks the default measures as the run does.
    """
    conds = run_conditions(conditions)
    chosen = condition_metrics(metrics, have_judge=have_judge)
    skipped = 0
    if cache is not None:
        found, skipped = _cached(samples, conds, cache, counterfactuals, seed)
        answers_cached += found
    calls = max(0, len(samples) * len(conds) - answers_cached - skipped)
    standins = [stand_in(s, c) for c in conds for s in samples]
    est = estimate(standins, chosen.metrics, applies=chosen.applies)
    written = 0
    if counterfactuals == "judge" and any(c.kind == "counterfactual" for c in conds):
        written = sum(1 for s in samples if not isinstance(s.metadata.get("counterfactual"), dict))
    # a counterfactual written by the judge is one short call (~400 prompt tokens)
    tokens = est.prompt_tokens + written * _COUNTERFACTUAL_TOKENS
    est.prompt_tokens = tokens
    est.calls += written
    return RobustnessPlan(
        questions=len(samples),
        conditions=conds,
        pipeline_calls=calls,
        answers_cached=answers_cached,
        judge_calls=est.calls - written,
        prompt_tokens=tokens,
        counterfactual_calls=written,
        skipped=skipped,
        by_metric=dict(est.by_metric),
        cost_usd=est.cost(price),
        metrics=chosen.by_kind,
        notes=chosen.notes,
    )


_COUNTERFACTUAL_TOKENS = 400


def _cached(
    samples: Sequence[Sample],
    conds: Sequence[Condition],
    cache: AnswerCache,
    counterfactuals: Literal["offline", "judge"],
    seed: int,
) -> tuple[int, int]:
    """(answers ``cache`` holds, (question, condition) pairs the run will skip)."""
    clean: dict[str, Sample] = {}
    for sample in samples:
        got = cache.peek(answer_key(cache.identity, sample.question, CLEAN))
        if got is not None:
            clean[sample.id] = got
    if len(clean) < len(samples):
        return len(clean), 0  # the noise pool is not known until every clean answer is
    found, skipped = len(clean), 0
    pool = NoisePool.from_samples(list(clean.values()))
    builder = JobBuilder(clean, pool, cache.identity, seed)
    answered = list(clean.values())
    for cond in conds:
        if cond.clean:
            continue
        for sample in samples:
            fact: Counterfactual | None = None
            why: str | None = None
            if cond.kind == "counterfactual":
                try:
                    fact = user_counterfactual(sample)
                except ValueError as exc:
                    why = str(exc)
                if fact is None and why is None:
                    if counterfactuals == "judge":
                        continue  # the judge's fact is not known before the run: a call
                    done = clean[sample.id]
                    others = [s for s in answered if s.id != sample.id]
                    built = offline_counterfactual_attempt(done, done.contexts, others)
                    fact, why = built.counterfactual, built.reason
            job = builder.job(sample, cond, fact, why)
            if isinstance(job, str):
                skipped += 1
            elif cache.has(job.key):
                found += 1
    return found, skipped
