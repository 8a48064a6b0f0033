"""Compare the scores several frameworks give the same samples for the same measure.

The adapters run each framework (ragbridge with a judge, ragbridge offline, RAGAS, DeepEval) and
hand back one `Evaluation` per framework, keyed by ragbridge's measure names; everything after
that is framework-neutral and lives here: per framework the mean with a CI, failures and what
the judge calls cost; per pair of frameworks Spearman, Pearson and the mean absolute difference
over the samples both scored; the samples where they disagree most, with each framework's reason
side by side; and the *edge cases*, where one framework scored and another could not — the
differences that come from policy (what to do with an answer that has no claims) rather than from
judgement, named as such so nobody mistakes them for noise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from . import stats
from .evaluation import Evaluation, MetricSummary, Score, Usage

__all__ = [
    "CrossComparison",
    "Disagreement",
    "EdgeCase",
    "FrameworkStats",
    "MeasureComparison",
    "PairStats",
    "Skipped",
    "compare_frameworks",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FrameworkStats(_Frozen):
    """One framework's column for one measure."""

    framework: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_scored: int
    n_failed: int
    n_skipped: int
    failures_by_kind: dict[str, int]
    usage: Usage


_SUMMARY_FIELDS = tuple(name for name in FrameworkStats.model_fields if name != "framework")


class PairStats(_Frozen):
    """Agreement of two frameworks over the ``n`` samples both scored.

    A correlation is ``None`` (with ``note`` saying why) when it is undefined: fewer than two
    shared samples, or one side constant.
    """

    a: str
    b: str
    n: int
    spearman: float | None
    pearson: float | None
    mean_abs_diff: float | None
    note: str | None = None


class Disagreement(_Frozen):
    """A sample the frameworks scored far apart (``spread`` = max − min of their values)."""

    sample_id: str
    spread: float
    values: dict[str, float | None]
    reasons: dict[str, str]


class EdgeCase(_Frozen):
    """A sample where some frameworks scored and others could not, and what each did."""

    sample_id: str
    kind: str
    description: str
    values: dict[str, float | None]


class Skipped(_Frozen):
    """A framework/measure pair that was not run, and why (e.g. it needs a judge)."""

    framework: str
    measure: str
    reason: str


class MeasureComparison(_Frozen):
    measure: str
    frameworks: list[FrameworkStats]
    pairs: list[PairStats]
    disagreements: list[Disagreement]
    edge_cases: list[EdgeCase]


class CrossComparison(_Frozen):
    """The whole comparison; serialises to JSON for reports and CI artefacts."""

    measures: list[MeasureComparison]
    skipped: list[Skipped]
    n_samples: int
    judge_model: str | None = None
    notes: list[str] = []

    def measure(self, name: str) -> MeasureComparison:
        for m in self.measures:
            if m.measure == name:
                return m
        known = ", ".join(m.measure for m in self.measures) or "none"
        raise KeyError(f"no comparison for measure {name!r}; compared: {known}")

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(self.model_dump_json(indent=2), encoding="utf-8")

    @classmethod
    def from_json(cls, path: str | Path) -> CrossComparison:
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))

    def table(self) -> str:
        """A plain-text table per measure, for terminals and logs."""
        out: list[str] = []
        for m in self.measures:
            out.append(f"{m.measure}")
            for f in m.frameworks:
                mean = "—" if f.mean is None else f"{f.mean:.3f}"
                ci = "" if f.ci_low is None else f" [{f.ci_low:.3f}, {f.ci_high:.3f}]"
                calls = f"{f.usage.calls} calls, {f.usage.prompt_tokens:,} prompt tokens"
                out.append(
                    f"  {f.framework:<20} {mean}{ci:<18}  scored {f.n_scored}, "
                    f"failed {f.n_failed}  ({calls})"
                )
            for p in m.pairs:
                rho = "—" if p.spearman is None else f"{p.spearman:+.2f}"
                r = "—" if p.pearson is None else f"{p.pearson:+.2f}"
                mad = "—" if p.mean_abs_diff is None else f"{p.mean_abs_diff:.3f}"
                out.append(
                    f"  {p.a} vs {p.b}: spearman {rho}, pearson {r}, mean |diff| {mad} over {p.n}"
                )
            for e in m.edge_cases[:5]:
                out.append(f"  edge case {e.sample_id}: {e.description}")
        for s in self.skipped:
            out.append(f"skipped {s.framework} / {s.measure}: {s.reason}")
        return "\n".join(out)


def compare_frameworks(
    results: Mapping[str, Evaluation],
    *,
    measures: Sequence[str] | None = None,
    skipped: Iterable[Skipped] = (),
    top: int = 5,
    confidence: float = 0.95,
    seed: int = 0,
    judge_model: str | None = None,
    notes: Iterable[str] = (),
) -> CrossComparison:
    """Compare ``results`` (framework label → its `Evaluation`) measure by measure.

    ``measures`` defaults to every measure at least two frameworks scored, in first-seen order.
    A measure only one framework has still gets its column (nothing to correlate against).
    ``top`` bounds the disagreements listed per measure.
    """
    if not results:
        raise ValueError("nothing to compare: no framework results given")
    if measures is None:
        seen: dict[str, int] = {}
        for evaluation in results.values():
            for name in evaluation.metrics:
                seen[name] = seen.get(name, 0) + 1
        measures = list(seen)
    sample_ids = list(dict.fromkeys(sid for ev in results.values() for sid in ev.sample_ids))
    summaries = {
        fw: evaluation.summary(confidence=confidence, seed=seed)
        for fw, evaluation in results.items()
    }
    compared = []
    for measure in measures:
        columns = {
            fw: evaluation.column(measure)
            for fw, evaluation in results.items()
            if measure in evaluation.metrics
        }
        if not columns:
            raise KeyError(f"no framework scored measure {measure!r}")
        frameworks = [_framework_stats(fw, summaries[fw][measure]) for fw in columns]
        compared.append(_compare_measure(measure, columns, frameworks, sample_ids, top))
    return CrossComparison(
        measures=compared,
        skipped=list(skipped),
        n_samples=len(sample_ids),
        judge_model=judge_model,
        notes=list(notes),
    )


def _compare_measure(
    measure: str,
    columns: Mapping[str, Mapping[str, Score]],
    frameworks: list[FrameworkStats],
    sample_ids: Sequence[str],
    top: int,
) -> MeasureComparison:
    names = list(columns)
    pairs = [
        _pair(a, b, columns[a], columns[b], sample_ids)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    disagreements: list[Disagreement] = []
    edge_cases: list[EdgeCase] = []
    for sid in sample_ids:
        cells = {fw: col.get(sid) for fw, col in columns.items()}
        present = {fw: s for fw, s in cells.items() if s is not None}
        if len(present) < 2:
            continue
        values = {fw: s.value for fw, s in present.items()}
        scored = [v for v in values.values() if v is not None]
        if len(scored) >= 2 and max(scored) > min(scored):
            disagreements.append(
                Disagreement(
                    sample_id=sid,
                    spread=max(scored) - min(scored),
                    values=values,
                    reasons={fw: _reason(s) for fw, s in present.items()},
                )
            )
        if scored and len(scored) < len(present):
            edge_cases.append(_edge_case(sid, present))
    disagreements.sort(key=lambda d: (-d.spread, d.sample_id))
    return MeasureComparison(
        measure=measure,
        frameworks=frameworks,
        pairs=pairs,
        disagreements=disagreements[:top],
        edge_cases=edge_cases,
    )


def _framework_stats(framework: str, summary: MetricSummary) -> FrameworkStats:
    """The summary's fields (all of `FrameworkStats` but ``framework``) under the framework."""
    shared = {name: getattr(summary, name) for name in _SUMMARY_FIELDS}
    return FrameworkStats(framework=framework, **shared)


def _pair(
    a: str,
    b: str,
    col_a: Mapping[str, Score],
    col_b: Mapping[str, Score],
    sample_ids: Sequence[str],
) -> PairStats:
    xs: list[float] = []
    ys: list[float] = []
    for sid in sample_ids:
        sa, sb = col_a.get(sid), col_b.get(sid)
        if sa is not None and sb is not None and sa.value is not None and sb.value is not None:
            xs.append(sa.value)
            ys.append(sb.value)
    n = len(xs)
    if n == 0:
        return PairStats(
            a=a,
            b=b,
            n=0,
            spearman=None,
            pearson=None,
            mean_abs_diff=None,
            note="no sample was scored by both",
        )
    mad = float(np.mean(np.abs(np.subtract(xs, ys))))
    rho = r = None
    note = None
    if n < 2:
        note = "correlation needs at least two shared samples"
    else:
        try:
            rho = _finite(stats.spearman(xs, ys))
            r = _finite(stats.pearson(xs, ys))
        except ValueError:
            constant = [name for name, v in ((a, xs), (b, ys)) if len(set(v)) == 1]
            note = f"correlation undefined: {' and '.join(constant)} constant over these samples"
    return PairStats(a=a, b=b, n=n, spearman=rho, pearson=r, mean_abs_diff=mad, note=note)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _reason(score: Score) -> str:
    if score.failure is not None:
        return f"failed ({score.failure.kind.value}): {score.failure.message}"
    if score.value is None:
        return f"skipped: {score.reason}"
    return score.reason or ""


def _edge_case(sample_id: str, present: Mapping[str, Score]) -> EdgeCase:
    values = {fw: s.value for fw, s in present.items()}
    unscored = {fw: s for fw, s in present.items() if s.value is None}
    kinds = {s.failure.kind.value for s in unscored.values() if s.failure is not None}
    kind = "no_claims" if "no_claims" in kinds else (sorted(kinds)[0] if kinds else "skipped")
    scored_text = ", ".join(f"{fw} {v:.2f}" for fw, v in values.items() if v is not None)
    unscored_text = "; ".join(f"{fw} {_reason(s)}" for fw, s in unscored.items())
    if kind == "no_claims":
        description = (
            f"no claims to check: {unscored_text} — while {scored_text}. A policy difference "
            "(what an answer with no checkable statement scores), not a judgement difference."
        )
    else:
        description = f"{unscored_text} — while {scored_text}"
    return EdgeCase(sample_id=sample_id, kind=kind, description=description, values=values)
