"""Repeatability: score every sample N times and measure how much a judge's verdicts move.

An LLM judge is a sampled model: the same prompt can get a different verdict tomorrow (sampling
at temperature > 0, provider-side batching, a silently updated model). A mean reported to three
decimals means little when a fifth of the verdicts flip between two runs, and nothing else tells
a team that. ``evaluate_repeated`` runs the evaluation ``repeats`` times and
`repeatability` reports, per metric: the variance of each sample's score across runs, the share
of samples whose verdict is not the same in every run, the run means, and the CI of the mean of
each sample's average over the runs.

**The cache is bypassed for the repeats**, and that is said wherever the figures are shown. The
first run reads and writes the cache as any run does; runs 2..N read no cached judge reply and
reuse no kept Score, because a cached reply would make the repeat agree with run 1 by
construction. They write nothing either: a repeat's reply must not replace run 1's in the cache.
Embeddings and NLI scores stay cached: those models are deterministic, and repeating them would
cost time and measure nothing. Offline providers are deterministic too, so their repeats agree
exactly; the figures say so rather than suggest a judge was tested.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from typing_extensions import Unpack

from ..judging.engine import JudgeEngine
from ..metrics.base import Metric
from ..results.evaluation import Evaluation
from ..results.stats import mean_ci
from ..sample import Sample
from ..scoring.runner import Progress, evaluate, judge_engine, resolve_metrics
from ..settings import Settings, SettingsOptions

__all__ = [
    "DEFAULT_VERDICT_THRESHOLD",
    "MetricRepeatability",
    "RepeatedEvaluation",
    "evaluate_repeated",
    "repeat_settings",
    "repeatability",
]

DEFAULT_VERDICT_THRESHOLD = 0.5
"""A score above this is a "yes" verdict when counting flips, as in ``ragbridge agreement`` and the
offline providers' own verdicts (0/1 graders are unaffected)."""

SampleSource = Sequence[Sample] | Callable[[], Iterable[Sample]]
"""The samples, or a function that yields them afresh for each run (a file read N times)."""


def repeat_settings(settings: Settings) -> Settings:
    """``settings`` for runs 2..N: the judge reads and writes no cache, no Score is reused."""
    judge = settings.judge
    if isinstance(judge, JudgeEngine):
        fresh: JudgeEngine | None = dataclasses.replace(judge, cache=None)
    elif judge is not None:
        fresh = judge_engine(settings, judge, None)
    else:
        fresh = None
    return settings.replace(judge=fresh, reuse_results=False)


@dataclass
class RepeatedEvaluation:
    """The ``runs`` of one evaluation repeated; ``runs[0]`` is the ordinary (cached) run."""

    runs: list[Evaluation]
    judged: list[str] = field(default_factory=list)
    """Metrics whose provider calls a judge: the only ones whose repeats can differ."""

    @property
    def aborted(self) -> str | None:
        """Why a run stopped early (the judge or embedder unusable), or None."""
        for run in self.runs:
            line = run.metadata.get("aborted")
            if line:
                return str(line)
        return None

    def summary(
        self, *, threshold: float = DEFAULT_VERDICT_THRESHOLD
    ) -> dict[str, MetricRepeatability]:
        return repeatability(self.runs, threshold=threshold, judged=self.judged)


def evaluate_repeated(
    samples: SampleSource,
    metrics: Iterable[Metric | str],
    *,
    repeats: int,
    settings: Settings | None = None,
    progress: Callable[[int, int, int | None], Any] | None = None,
    **options: Unpack[SettingsOptions],
) -> RepeatedEvaluation:
    """Score ``metrics`` on ``samples`` ``repeats`` times (see the module docstring).

    ``progress(run, done, total)`` is called after each sample of each run (``run`` is
    1-based). A run that stops early (unusable judge) ends the repetition: later runs would
    fail alike.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    config = Settings.of(settings, options)
    resolved = resolve_metrics(metrics)
    runs: list[Evaluation] = []
    for run in range(1, repeats + 1):
        batch = samples() if callable(samples) else samples
        evaluation = evaluate(
            batch,
            resolved,
            settings=config if run == 1 else repeat_settings(config),  # own counts per run
            progress=None if progress is None else _for_run(progress, run),
        )
        evaluation.metadata["repeat"] = run
        runs.append(evaluation)
        if evaluation.metadata.get("aborted"):
            break
    judged = [m.name for m in resolved if m.needs_judge]
    return RepeatedEvaluation(runs, judged)


def _for_run(progress: Callable[[int, int, int | None], Any], run: int) -> Progress:
    def advance(done: int, total: int | None) -> None:
        progress(run, done, total)

    return advance


@dataclass(frozen=True)
class MetricRepeatability:
    """How one metric's scores moved across the runs.

    Only samples scored in *every* run enter the figures (``n_samples``); the others are
    ``incomplete`` (a failure or skip in some run but not all) or not scored at all, so a flaky
    judge call is reported as such rather than read as a flip.
    """

    metric: str
    runs: int
    judged: bool
    n_samples: int
    incomplete: list[str]
    run_means: list[float]
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    mean_variance: float | None
    max_variance: float | None
    most_variable: str | None
    threshold: float
    flipped: list[str]

    @property
    def flip_share(self) -> float | None:
        return len(self.flipped) / self.n_samples if self.n_samples else None

    @property
    def run_spread(self) -> float | None:
        """Largest run mean minus the smallest."""
        return max(self.run_means) - min(self.run_means) if self.run_means else None

    def as_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["flip_share"] = self.flip_share
        return out


def repeatability(
    runs: Sequence[Evaluation],
    *,
    threshold: float = DEFAULT_VERDICT_THRESHOLD,
    judged: Iterable[str] = (),
) -> dict[str, MetricRepeatability]:
    """Per-metric repeatability of ``runs`` (the same samples and metrics scored each time).

    Variance is the population variance of a sample's N scores (0 when they agree). A sample
    *flips* when some of its scores are above ``threshold`` and some are not. The CI is the
    seeded bootstrap CI of the mean over samples of each sample's average score across the runs.
    """
    if not runs:
        raise ValueError("repeatability needs at least one run")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie within [0, 1], got {threshold}")
    calls_judge = set(judged)
    out: dict[str, MetricRepeatability] = {}
    for metric in runs[0].metrics:
        columns = [run.column(metric) for run in runs]
        ids = list(columns[0])
        complete: list[str] = []
        incomplete: list[str] = []
        for sample_id in ids:
            scored = [sample_id in c and c[sample_id].status == "scored" for c in columns]
            if all(scored):
                complete.append(sample_id)
            elif any(scored):
                incomplete.append(sample_id)
        matrix = np.array(
            [[float(c[s].value) for c in columns] for s in complete],  # type: ignore[arg-type]
            dtype=np.float64,
        ).reshape(len(complete), len(columns))
        out[metric] = _figures(
            metric, matrix, complete, incomplete, threshold, metric in calls_judge
        )
    return out


def _figures(
    metric: str,
    matrix: np.ndarray[tuple[int, int], np.dtype[np.float64]],
    ids: list[str],
    incomplete: list[str],
    threshold: float,
    judged: bool,
) -> MetricRepeatability:
    runs = int(matrix.shape[1])
    if not ids:
        return MetricRepeatability(
            metric, runs, judged, 0, incomplete, [], None, None, None, None, None, None,
            threshold, [],
        )  # fmt: skip
    variance = matrix.var(axis=1)
    verdicts = matrix > threshold
    flips = [
        bool(low != high)
        for low, high in zip(verdicts.min(axis=1), verdicts.max(axis=1), strict=True)
    ]
    ci = mean_ci(matrix.mean(axis=1))
    worst = int(np.argmax(variance))
    return MetricRepeatability(
        metric=metric,
        runs=runs,
        judged=judged,
        n_samples=len(ids),
        incomplete=incomplete,
        run_means=[float(m) for m in matrix.mean(axis=0)],
        mean=ci.mean,
        ci_low=ci.low,
        ci_high=ci.high,
        mean_variance=float(variance.mean()),
        max_variance=float(variance[worst]),
        most_variable=ids[worst] if variance[worst] > 0 else None,
        threshold=threshold,
        flipped=[s for s, f in zip(ids, flips, strict=True) if f],
    )
