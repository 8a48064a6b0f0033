"""A robustness run in the report: each measure's curve over the noise ratio, and a table per
retrieval condition.

RGB's question (Chen et al., 2023) is how fast the answers degrade as retrieval gets worse, so
the chart puts the noise ratio on the x axis (0 is the clean run) and draws one line per measure
through its means, with the 95% confidence interval as a band: a band that widens or a line that
drops says where the pipeline stops coping. The table beside it gives every condition — the noise
ratios, no relevant passage (``negative``) and wrong-fact passages (``counterfactual``) — with its
questions, each measure's mean and interval, the abstention rate, how often a counterfactual
answer followed the wrong fact or flagged the conflict, the pipeline's errors, and the questions
skipped with the reason (a condition that could not be built is said, never dropped).

Everything user-supplied (measure names, skip reasons, question ids) goes through `esc`, as in
every other section; the chart is inline SVG with ``<title>`` hover text, no script.
`render_robustness_report` is the whole page: the usual report of the run's cells (summary,
explorer, drill-down of each question under each condition) with this section after the
summaries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ragbridge.core.results.stats import MeanCI

from .charts import _legend, _segments
from .markup import PALETTE, esc, integer
from .page import render_report

if TYPE_CHECKING:
    from ragbridge.core.robustness.harness import RobustnessResult
    from ragbridge.core.robustness.summary import Skipped

__all__ = ["curve_svg", "render_robustness_report", "robustness_section"]

Curve = Sequence[tuple[float, MeanCI | None]]
"""One measure over the noise ratio: ``(ratio, its mean and CI)``, None where nothing scored."""

ABSTENTION = "abstention"
_IDS_SHOWN = 5
"""The curve of the share of answers that decline (no judge: the abstention detector)."""


def _cell(value: MeanCI | None) -> str:
    """A table cell's mean, its interval below it in small print (numbers only: no escaping)."""
    if value is None:
        return "—"
    return f'{value.mean:.3f}<br><span class="muted">[{value.low:.3f}, {value.high:.3f}]</span>'


def _ci(value: MeanCI | None) -> str:
    if value is None:
        return "—"
    return f"{value.mean:.3f} [{value.low:.3f}, {value.high:.3f}]"


def curve_svg(curves: Mapping[str, Curve]) -> str:
    """The measures over the noise ratio: a line per measure through the means, its CI as a
    band, a point per ratio with its numbers as hover text. Scores lie in [0, 1], so the y axis
    is [0, 1]: curves of different runs compare at a glance."""
    width, height = 460, 240
    left, right, top, bottom = 40, 14, 12, 38
    plot_w, plot_h = width - left - right, height - top - bottom
    ratios = sorted({r for curve in curves.values() for r, _ in curve}) or [0.0]
    x_max = max(ratios) or 1.0

    def px(r: float) -> float:
        return left + r / x_max * plot_w

    def py(v: float) -> float:
        return top + (1.0 - min(max(v, 0.0), 1.0)) * plot_h

    parts = [
        f'<svg class="robustness-curve" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="measures over the noise ratio">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#6b7a8f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#6b7a8f"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{left - 4}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:.1f}</text>'
        )
    for r in ratios:
        parts.append(
            f'<text x="{px(r):.1f}" y="{top + plot_h + 14}" text-anchor="middle">{r:g}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">'
        "noise ratio (share of the top-k replaced)</text>"
    )
    for j, (metric, curve) in enumerate(curves.items()):
        color = PALETTE[j % len(PALETTE)]
        points = sorted(curve, key=lambda item: item[0])
        band = [None if v is None else (px(r), py(v.low), py(v.high)) for r, v in points]
        for span in _segments(band):
            if len(span) == 1:  # a ratio alone: its interval as a bar
                x, y_low, y_high = span[0]
                parts.append(
                    f'<line class="ci-band" data-metric="{esc(metric)}" x1="{x:.1f}" '
                    f'y1="{y_low:.1f}" x2="{x:.1f}" y2="{y_high:.1f}" stroke="{color}" '
                    'stroke-opacity="0.35" stroke-width="6"/>'
                )
                continue
            upper = [f"{x:.1f},{y:.1f}" for x, _, y in span]
            lower = [f"{x:.1f},{y:.1f}" for x, y, _ in reversed(span)]
            parts.append(
                f'<polygon class="ci-band" data-metric="{esc(metric)}" '
                f'points="{" ".join(upper + lower)}" fill="{color}" fill-opacity="0.15" '
                'stroke="none"/>'
            )
        line = [None if v is None else (px(r), py(v.mean)) for r, v in points]
        for seg in _segments(line):
            if len(seg) > 1:
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
                parts.append(
                    f'<polyline class="curve" data-metric="{esc(metric)}" points="{pts}" '
                    f'fill="none" stroke="{color}" stroke-width="1.5"/>'
                )
        for r, v in points:
            if v is None:
                continue
            hover = f"{metric} at noise {r:g}: {_ci(v)} over {v.n} answers"
            parts.append(
                f'<circle class="curve-pt" data-metric="{esc(metric)}" data-ratio="{r:g}" '
                f'data-mean="{v.mean:.6g}" cx="{px(r):.1f}" cy="{py(v.mean):.1f}" r="3" '
                f'fill="{color}"><title>{esc(hover)}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- the table


def _skipped(skipped: Sequence[Skipped]) -> str:
    """How many questions the condition skipped, each reason once with its count and the
    questions it struck (the first few)."""
    if not skipped:
        return "0"
    by_reason: dict[str, list[str]] = {}
    for item in skipped:
        by_reason.setdefault(item.reason, []).append(item.sample_id)
    why = []
    for reason, ids in by_reason.items():
        shown = ", ".join(ids[:_IDS_SHOWN]) + (", …" if len(ids) > _IDS_SHOWN else "")
        why.append(f'<li>{esc(reason)} ×{len(ids)} <span class="muted">({esc(shown)})</span></li>')
    return f'{integer(len(skipped))}<ul class="skipped">{"".join(why)}</ul>'


def condition_table(result: RobustnessResult) -> str:
    """A row per condition: questions answered, each measure's mean [low, high], abstention,
    counterfactual follows / flags, pipeline errors, skipped questions with their reasons."""
    summaries = list(result.summary)
    metrics: list[str] = []
    for row in summaries:
        metrics.extend(m for m in row.metrics if m not in metrics)
    counterfactual = any(row.condition.kind == "counterfactual" for row in summaries)
    head = ["condition", "n", *metrics, "abstention"]
    head += ["follows wrong fact", "flags conflict"] if counterfactual else []
    head += ["errors", "skipped"]
    out = ['<table class="robustness-table"><thead><tr>']
    out.extend(f"<th>{esc(h)}</th>" for h in head)
    out.append("</tr></thead><tbody>")
    for row in summaries:
        name = row.condition.name
        cells = [f"<td><code>{esc(name)}</code></td>", f"<td>{integer(row.n)}</td>"]
        for metric in metrics:
            text = _cell(row.metrics.get(metric)) if metric in row.metrics else ""
            bad = row.failed.get(metric)
            if bad:
                text += f' <span class="bad-text">({integer(bad)} failed)</span>'
            cells.append(f'<td data-metric="{esc(metric)}">{text}</td>')
        cells.append(f"<td>{_cell(row.abstention)}</td>")
        if counterfactual:
            cells.append(f"<td>{_cell(row.follows_wrong)}</td>")
            cells.append(f"<td>{_cell(row.flags_conflict)}</td>")
        cells.append(f"<td>{integer(row.errors)}</td>")
        cells.append(f"<td>{_skipped(row.skipped)}</td>")
        out.append(f'<tr data-condition="{esc(name)}">{"".join(cells)}</tr>')
    out.append("</tbody></table>")
    return "".join(out)


# --------------------------------------------------------------------------- the section


def curves_of(result: RobustnessResult) -> dict[str, Curve]:
    """Every measure scored under the noise conditions, and the abstention rate, over the
    noise ratio (`RobustnessResult.curve`)."""
    noise = [row for row in result.summary if row.condition.kind == "noise"]
    names: list[str] = []
    for row in noise:
        names.extend(m for m in row.metrics if m not in names)
    names.append(ABSTENTION)
    return {name: result.curve(name) for name in names}


def robustness_section(result: RobustnessResult) -> str:
    """The section: the curves over the noise ratio and the table per condition."""
    curves = curves_of(result)
    out = ['<section id="robustness"><h2>Robustness</h2>']
    out.append(
        '<p class="muted">Each question answered again under retrieval faults (RGB): noise '
        "at each ratio (that share of the top-k replaced by passages retrieved for other "
        "questions; 0 is the clean run), no relevant passage (negative) and passages stating "
        "a wrong fact (counterfactual). Lines are means over the questions, bands their 95% "
        "confidence intervals; hover a point for its numbers.</p>"
    )
    if curves:
        out.append(_legend(list(curves)))
        out.append(
            f'<div class="charts"><figure>{curve_svg(curves)}<figcaption>measures over the '
            "noise ratio</figcaption></figure></div>"
        )
    out.append(condition_table(result))
    out.append("</section>")
    return "".join(out)


def render_robustness_report(
    result: RobustnessResult,
    *,
    title: str = "ragbridge robustness report",
    generated_by: str | None = None,
    generated_at: datetime | None = None,
    source: str | None = None,
) -> str:
    """The whole page: the report of the run's cells (one sample per question and condition)
    with the robustness section after the summaries."""
    return render_report(
        result.evaluation,
        samples=result.samples,
        title=title,
        generated_by=generated_by,
        generated_at=generated_at,
        source=source,
        sections=[("robustness", "Robustness", robustness_section(result))],
    )
