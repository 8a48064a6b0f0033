"""The report's charts as inline SVG: score distributions, the retrieval × generation
quadrants, and the trend of each metric over the recorded runs.

Every label and hover title is escaped text (`esc`); points link to their sample's drill-down by
`sample_anchor`. No chart needs a script: hover values are SVG ``<title>`` elements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ragbridge.core.monitoring.records import RunRecord
from ragbridge.core.results.diagnosis import Diagnosis, Quadrant, SampleDiagnosis
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Sample

from .markup import LOWER_IS_BETTER, PALETTE, esc, number, sample_anchor

__all__ = [
    "distribution_section",
    "histogram_counts",
    "quadrant_section",
    "trend_section",
]

_BINS = 10
_P = TypeVar("_P")


def histogram_counts(values: Sequence[float]) -> list[int]:
    """Counts of ``values`` in 10 equal bins over [0, 1]; 1.0 falls in the last bin."""
    counts = [0] * _BINS
    for v in values:
        counts[min(math.floor(v * _BINS + 1e-9), _BINS - 1)] += 1
    return counts


def _histogram_svg(metric: str, series: Mapping[str, list[int]]) -> str:
    width, height = 340, 170
    left, right, top, bottom = 34, 10, 10, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((max(c) for c in series.values() if c), default=0) or 1
    bin_w = plot_w / _BINS
    k = max(len(series), 1)
    parts = [
        f'<svg class="histogram" data-metric="{esc(metric)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(metric)} distribution">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#6b7a8f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#6b7a8f"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for tick in (0.0, 0.5, 1.0):
        x = left + tick * plot_w
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{tick:g}</text>'
        )
    for j, (name, counts) in enumerate(series.items()):
        color = PALETTE[j % len(PALETTE)]
        for i, count in enumerate(counts):
            h = plot_h * count / peak
            x = left + i * bin_w + 1 + j * (bin_w - 2) / k
            y = top + plot_h - h
            lo, hi = i / _BINS, (i + 1) / _BINS
            label = f"{name}: {lo:.1f}–{hi:.1f}: {count}"
            parts.append(
                f'<rect class="bar" data-pipeline="{esc(name)}" data-bin="{i}" '
                f'data-count="{count}" x="{x:.1f}" y="{y:.1f}" width="{(bin_w - 2) / k:.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{esc(label)}</title></rect>'
            )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 2}" text-anchor="middle">score</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _legend(names: Sequence[str]) -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{PALETTE[j % len(PALETTE)]}"></i>'
        f"{esc(n)}</span>"
        for j, n in enumerate(names)
    )
    return f'<p class="legend">{items}</p>'


def distribution_section(pipelines: Mapping[str, Evaluation]) -> list[str]:
    out = ['<section id="distributions"><h2>Distributions</h2>']
    out.append(
        '<p class="muted">Scored values in 10 bins over [0, 1]; failed and skipped cells are '
        "not drawn (see the summary counts).</p>"
    )
    if len(pipelines) > 1:
        out.append(_legend(list(pipelines)))
    metrics: list[str] = []
    for ev in pipelines.values():
        metrics.extend(m for m in ev.metrics if m not in metrics)
    out.append('<div class="charts">')
    for metric in metrics:
        series: dict[str, list[int]] = {}
        n = 0
        for name, ev in pipelines.items():
            if metric in ev.metrics:
                _, vals = ev.values(metric)
                series[name] = histogram_counts([float(v) for v in vals])
                n += int(vals.size)
        out.append(
            f"<figure>{_histogram_svg(metric, series)}"
            f"<figcaption>{esc(metric)} — {n} scored</figcaption></figure>"
        )
    out.append("</div></section>")
    return out


def _quadrant_svg(diag: Diagnosis, pipeline: str, index: Mapping[str, Sample]) -> str:
    size, pad = 420, 44
    plot = size - 2 * pad
    lower_better = diag.generation_metric.split(":")[0] in LOWER_IS_BETTER

    def px(v: float) -> float:
        return pad + v * plot

    def py(v: float) -> float:
        return pad + (1.0 - v) * plot

    rt, gt = diag.retrieval_threshold, diag.generation_threshold
    # The dangerous quadrant: retrieval below its threshold, generation on its "good" side.
    g_lo, g_hi = (0.0, gt) if lower_better else (gt, 1.0)
    parts = [
        f'<svg class="quadrants" data-pipeline="{esc(pipeline)}" width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" role="img" aria-label="retrieval by generation">',
        f'<rect x="{pad}" y="{pad}" width="{plot}" height="{plot}" fill="#fff" stroke="#6b7a8f"/>',
        f'<rect class="danger-zone" x="{px(0):.1f}" y="{py(g_hi):.1f}" '
        f'width="{px(rt) - px(0):.1f}" height="{py(g_lo) - py(g_hi):.1f}" fill="#fbd5d0">'
        f"<title>{esc(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER.value)}</title></rect>",
        f'<line x1="{px(rt):.1f}" y1="{pad}" x2="{px(rt):.1f}" y2="{pad + plot}" '
        'stroke="#6b7a8f" stroke-dasharray="4 3"/>',
        f'<line x1="{pad}" y1="{py(gt):.1f}" x2="{pad + plot}" y2="{py(gt):.1f}" '
        'stroke="#6b7a8f" stroke-dasharray="4 3"/>',
    ]
    good_top = not lower_better
    labels = [
        (0.0, good_top, Quadrant.BAD_RETRIEVAL_GOOD_ANSWER),
        (1.0, good_top, Quadrant.GOOD_RETRIEVAL_GOOD_ANSWER),
        (0.0, not good_top, Quadrant.BAD_RETRIEVAL_BAD_ANSWER),
        (1.0, not good_top, Quadrant.GOOD_RETRIEVAL_BAD_ANSWER),
    ]
    for xr, top, quadrant in labels:
        # Centred in its quadrant, on two lines ("bad retrieval," / "good-looking answer").
        x = (px(0.0) + px(rt)) / 2 if xr == 0.0 else (px(rt) + px(1.0)) / 2
        y = pad + 14 if top else pad + plot - 20
        weight = ' font-weight="700"' if quadrant is Quadrant.BAD_RETRIEVAL_GOOD_ANSWER else ""
        first, _, second = quadrant.value.partition(", ")
        parts.append(
            f'<text class="qlabel" data-quadrant="{esc(quadrant.value)}" x="{x:.1f}" y="{y}" '
            f'text-anchor="middle"{weight}><tspan x="{x:.1f}">{esc(first)},</tspan>'
            f'<tspan x="{x:.1f}" dy="13">{esc(second)}</tspan></text>'
        )
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{px(tick):.1f}" y="{pad + plot + 14}" text-anchor="middle">{tick:g}</text>'
        )
        parts.append(
            f'<text x="{pad - 5}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>'
        )
    parts.append(
        f'<text x="{size / 2:.1f}" y="{size - 8}" text-anchor="middle">'
        f"{esc(diag.retrieval_metric)} (retrieval)</text>"
    )
    parts.append(
        f'<text x="12" y="{size / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {size / 2:.1f})">{esc(diag.generation_metric)} '
        "(generation)</text>"
    )
    groups: dict[tuple[float, float], list[tuple[SampleDiagnosis, float, float]]] = {}
    for row in diag.rows:
        if row.quadrant is Quadrant.UNKNOWN or row.retrieval is None or row.generation is None:
            continue
        spot = (round(row.retrieval, 3), round(row.generation, 3))
        groups.setdefault(spot, []).append((row, row.retrieval, row.generation))
    counts: list[str] = []
    for (x0, y0), rows in groups.items():
        begin, width = _sector(x0, y0, diag)
        for k, (row, rx, gy) in enumerate(rows):
            dx, dy = _spread(k, begin, width)
            danger = row.quadrant is Quadrant.BAD_RETRIEVAL_GOOD_ANSWER
            color = "#c0392b" if danger else "#2f6fb0"
            label = (
                f"{row.sample_id}: {diag.retrieval_metric} {rx:.3f}, "
                f"{diag.generation_metric} {gy:.3f} ({row.quadrant.value})"
            )
            question = _question(index, row.sample_id)
            if question:
                label += "\n" + (question if len(question) <= 120 else question[:119] + "…")
            parts.append(
                f'<a href="#{sample_anchor(row.sample_id, pipeline)}">'
                f'<circle class="pt{" pt-danger" if danger else ""}" '
                f'data-sample="{esc(row.sample_id)}" cx="{px(rx) + dx:.1f}" '
                f'cy="{py(gy) + dy:.1f}" r="4" fill="{color}" fill-opacity="0.75" '
                f'stroke="#1d232b" stroke-width="0.6"><title>{esc(label)}</title></circle></a>'
            )
        if len(rows) > 1:
            # The count sits on the side away from the spread points (outside the frame for a
            # spot on its edge), beyond the spread for a spot inside.
            away = begin + width / 2 + math.pi
            reach = 9.0 if width < 2 * math.pi else _SPACING * math.sqrt(len(rows)) + 7
            cos, sin = (1.0, 0.0) if width >= 2 * math.pi else (math.cos(away), math.sin(away))
            lx, ly = px(x0) + reach * cos, py(y0) + reach * sin + (8 if sin > 0.3 else 0)
            anchor = "start" if cos > 0.3 else "end" if cos < -0.3 else "middle"
            what = (
                f"{len(rows)} samples at {diag.retrieval_metric} {x0:g}, "
                f"{diag.generation_metric} {y0:g}"
            )
            counts.append(
                f'<text class="qcount" data-count="{len(rows)}" x="{lx:.1f}" y="{ly:.1f}" '
                f'text-anchor="{anchor}">{len(rows)}<title>{esc(what)}</title></text>'
            )
    parts.extend(counts)
    parts.append("</svg>")
    return "".join(parts)


_SPACING = 4.6
_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


def _sector(x: float, y: float, diag: Diagnosis) -> tuple[float, float]:
    """(first angle, width) in SVG angles (y down) of the directions a spread may take from the
    spot at scores (x, y): into the plot (half a turn on an edge, a quarter in a corner), and
    onto the spot's own side of a threshold it sits on, so no point seems to cross into the
    neighbouring quadrant."""
    inward = {  # quarter q spans [q, q + 1] * pi/2; its (dx, dy) signs
        0: (1, 1),
        1: (-1, 1),
        2: (-1, -1),
        3: (1, -1),
    }
    xs = {1} if x <= 0.0 else {-1} if x >= 1.0 else {1, -1}
    ys = {-1} if y <= 0.0 else {1} if y >= 1.0 else {1, -1}  # a score of 1 is at the top
    if math.isclose(x, diag.retrieval_threshold, abs_tol=1e-9) and 1 in xs:
        xs = {1}  # at the threshold is good retrieval: the right side
    lower_better = diag.generation_metric.split(":")[0] in LOWER_IS_BETTER
    good_side = 1 if lower_better else -1  # up (-1 in SVG) when higher is better
    if math.isclose(y, diag.generation_threshold, abs_tol=1e-9) and good_side in ys:
        ys = {good_side}
    allowed = [q for q, (sx, sy) in inward.items() if sx in xs and sy in ys]
    if len(allowed) == 4:
        return 0.0, 2 * math.pi
    first = next(q for q in allowed if (q - 1) % 4 not in allowed)
    return first * math.pi / 2, len(allowed) * math.pi / 2


def _spread(k: int, begin: float, width: float) -> tuple[float, float]:
    """Offset of the k-th point at one spot: a sunflower (Vogel) spiral over the sector
    ``[begin, begin + width]``, evenly filled, so 37 samples at the same two scores read as a
    blob of 37 points rather than one dot. A narrower sector gets a longer radius: the same
    density."""
    if k == 0:
        return 0.0, 0.0
    radius = _SPACING * math.sqrt(k * 2 * math.pi / width)
    angle = begin + (k * _GOLDEN_ANGLE) % (2 * math.pi) * width / (2 * math.pi)
    return radius * math.cos(angle), radius * math.sin(angle)


def _question(index: Mapping[str, Sample], sample_id: str) -> str:
    sample = index.get(sample_id)
    return "" if sample is None else sample.question


def quadrant_section(
    diagnoses: Mapping[str, Diagnosis | str], index: Mapping[str, Mapping[str, Sample]]
) -> list[str]:
    out = ['<section id="quadrants"><h2>Where it fails: retrieval × generation</h2>']
    out.append(
        '<p class="muted">Each point is a sample (hover for its values, click it for the '
        "drill-down); samples with the same two scores are spread around their spot, and the "
        "number beside it says how many share it. The shaded "
        "quadrant is <strong>bad retrieval, good-looking answer</strong>: the generation "
        "measure passes, so nobody looks, yet the retriever missed what the question needed.</p>"
    )
    for name, diag in diagnoses.items():
        if len(diagnoses) > 1:
            out.append(f"<h3>{esc(name)}</h3>")
        if isinstance(diag, str):
            out.append(f'<p class="note quadrant-omitted">Quadrant chart omitted: {esc(diag)}</p>')
            continue
        out.extend(_quadrants(name, diag, index[name]))
    out.append("</section>")
    return out


def _quadrants(name: str, diag: Diagnosis, samples: Mapping[str, Sample]) -> list[str]:
    """One pipeline's chart, its count per quadrant, its dangerous and undiagnosed samples."""
    out = [
        f'<div class="charts"><figure>{_quadrant_svg(diag, name, samples)}<figcaption>'
        f"thresholds: {esc(diag.retrieval_metric)} ≥ {diag.retrieval_threshold:g}, "
        f"{esc(diag.generation_metric)} {esc(_gen_rule(diag))}</figcaption></figure>"
    ]
    out.append('<table class="quadrant-counts"><thead><tr><th>Quadrant</th>')
    out.append('<th class="num">Samples</th></tr></thead><tbody>')
    for quadrant, count in diag.counts.items():
        cls = ' class="danger"' if quadrant == Quadrant.BAD_RETRIEVAL_GOOD_ANSWER.value else ""
        out.append(f'<tr{cls}><td>{esc(quadrant)}</td><td class="num">{count}</td></tr>')
    out.append("</tbody></table></div>")
    return [*out, *_dangerous(name, diag, samples), *_undiagnosed(name, diag)]


def _dangerous(name: str, diag: Diagnosis, samples: Mapping[str, Sample]) -> list[str]:
    """The samples in the dangerous quadrant (bad retrieval, good-looking answer), linked."""
    danger = diag.in_quadrant(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER)
    out = [f"<h3>Dangerous samples ({len(danger)})</h3>"]
    if not danger:
        return [*out, '<p class="muted">None.</p>']
    out.append(
        f'<table class="dangerous" data-pipeline="{esc(name)}"><thead><tr><th>Sample</th>'
        f'<th class="num">{esc(diag.retrieval_metric)}</th>'
        f'<th class="num">{esc(diag.generation_metric)}</th><th>Question</th></tr>'
        "</thead><tbody>"
    )
    for row in danger:
        out.append(
            f'<tr class="danger"><td><a href="#{sample_anchor(row.sample_id, name)}">'
            f'{esc(row.sample_id)}</a></td><td class="num">{number(row.retrieval)}</td>'
            f'<td class="num">{number(row.generation)}</td>'
            f"<td>{esc(_question(samples, row.sample_id))}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


def _undiagnosed(name: str, diag: Diagnosis) -> list[str]:
    """The samples no quadrant could hold (a value missing), with the reason."""
    unknown = diag.in_quadrant(Quadrant.UNKNOWN)
    if not unknown:
        return []
    items = [
        f'<li><a href="#{sample_anchor(row.sample_id, name)}">{esc(row.sample_id)}'
        f"</a>: {esc(row.note or 'missing a value')}</li>"
        for row in unknown
    ]
    return [f'<h3>Not diagnosed ({len(unknown)})</h3><ul class="undiagnosed">', *items, "</ul>"]


def _gen_rule(diag: Diagnosis) -> str:
    op = "≤" if diag.generation_metric.split(":")[0] in LOWER_IS_BETTER else "≥"
    return f"{op} {diag.generation_threshold:g}"


# --------------------------------------------------------------------------- trends


def _unit(value: Any) -> float | None:
    """A score from a run summary (JSON read back): a finite number in [0, 1], else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) and 0.0 <= v <= 1.0 else None


def _run_label(run: RunRecord) -> str:
    return run.commit[:7] if run.commit else run.run_id[:8]


def _run_title(run: RunRecord, metric: str, cell: Mapping[str, Any]) -> str:
    when = datetime.fromtimestamp(run.timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mean, low, high = (_unit(cell.get(k)) for k in ("mean", "ci_low", "ci_high"))
    line = f"{metric} {number(mean)}"
    if low is not None and high is not None:
        line += f" [{low:.3f}, {high:.3f}]"
    counts = [
        f"{cell[k]} {word}"
        for k, word in (("n_scored", "scored"), ("n_failed", "failed"), ("n_skipped", "skipped"))
        if isinstance(cell.get(k), int) and not isinstance(cell.get(k), bool)
    ]
    if counts:
        line += f" ({', '.join(counts)})"
    where = [f"run {run.run_id}", when, run.command]
    if run.commit:
        where.append(f"commit {run.commit[:12]}")
    if run.source:
        where.append(f"source {run.source}")
    return line + "\n" + " · ".join(where)


def _segments(points: Sequence[_P | None]) -> list[list[_P]]:
    """Consecutive runs of present points (a run without the value breaks the line)."""
    out: list[list[_P]] = [[]]
    for p in points:
        if p is None:
            if out[-1]:
                out.append([])
        else:
            out[-1].append(p)
    return [seg for seg in out if seg]


def _y_range(cells: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """The y axis: the values and CIs with a margin, at least 0.1 tall, within [0, 1]."""
    seen = [
        v
        for c in cells
        for k in ("mean", "ci_low", "ci_high")
        if (v := _unit(c.get(k))) is not None
    ]
    if not seen:
        return 0.0, 1.0
    lo, hi = min(seen), max(seen)
    margin = max(0.02, (hi - lo) * 0.15)
    lo, hi = max(0.0, lo - margin), min(1.0, hi + margin)
    if hi - lo < 0.1:
        mid = (lo + hi) / 2
        lo, hi = max(0.0, mid - 0.05), min(1.0, mid + 0.05)
        lo, hi = (lo, lo + 0.1) if lo == 0.0 else (hi - 0.1, hi) if hi == 1.0 else (lo, hi)
    return lo, hi


def _trend_svg(metric: str, runs: Sequence[RunRecord], series: Mapping[str, list[int]]) -> str:
    """One metric over the runs: a line per source through the means, its CI as a band."""
    width, height = 360, 190
    left, right, top, bottom = 40, 12, 10, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    cells = [r.summary.get(metric) or {} for r in runs]
    lo, hi = _y_range(cells)
    n = len(runs)

    def px(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else i * plot_w / (n - 1))

    def py(v: float) -> float:
        return top + (hi - v) / (hi - lo) * plot_h

    parts = [
        f'<svg class="trend" data-metric="{esc(metric)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(metric)} over runs">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#6b7a8f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#6b7a8f"/>',
    ]
    for tick in (lo, (lo + hi) / 2, hi):
        parts.append(
            f'<text x="{left - 4}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    step = max(1, math.ceil(n / 10))
    for i, run in enumerate(runs):
        # every step-th run and the latest, without crowding the latest's label
        if i != n - 1 and (i % step or n - 1 - i < step):
            continue
        x, y = px(i), top + plot_h + 12
        parts.append(
            f'<text class="run-label" x="{x:.1f}" y="{y}" text-anchor="end" '
            f'transform="rotate(-40 {x:.1f} {y})">{esc(_run_label(run))}</text>'
        )
    for j, (_, members) in enumerate(series.items()):
        color = PALETTE[j % len(PALETTE)]
        band: list[tuple[float, float, float] | None] = []
        line: list[tuple[float, float] | None] = []
        for i in members:
            low, high = _unit(cells[i].get("ci_low")), _unit(cells[i].get("ci_high"))
            mean = _unit(cells[i].get("mean"))
            band.append(None if low is None or high is None else (px(i), py(low), py(high)))
            line.append(None if mean is None else (px(i), py(mean)))
        for span in _segments(band):
            if len(span) == 1:  # a run alone: its interval as a bar
                x, y_low, y_high = span[0]
                parts.append(
                    f'<line class="ci-band" x1="{x:.1f}" y1="{y_low:.1f}" x2="{x:.1f}" '
                    f'y2="{y_high:.1f}" stroke="{color}" stroke-opacity="0.35" stroke-width="6"/>'
                )
                continue
            upper = [f"{x:.1f},{y:.1f}" for x, _, y in span]
            lower = [f"{x:.1f},{y:.1f}" for x, y, _ in reversed(span)]
            parts.append(
                f'<polygon class="ci-band" points="{" ".join(upper + lower)}" fill="{color}" '
                'fill-opacity="0.15" stroke="none"/>'
            )
        for seg in _segments(line):
            if len(seg) > 1:
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in seg)
                parts.append(
                    f'<polyline class="trend-line" points="{pts}" fill="none" stroke="{color}" '
                    'stroke-width="1.5"/>'
                )
        for i in members:
            mean = _unit(cells[i].get("mean"))
            if mean is None:
                continue
            last = ' stroke="#1d232b" stroke-width="1.2"' if i == n - 1 else ""
            parts.append(
                f'<circle class="run-pt" data-run="{esc(runs[i].run_id)}" data-mean="{mean:.6g}" '
                f'cx="{px(i):.1f}" cy="{py(mean):.1f}" r="{4 if i == n - 1 else 3}" '
                f'fill="{color}"{last}><title>{esc(_run_title(runs[i], metric, cells[i]))}'
                "</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def trend_section(history: Sequence[RunRecord]) -> list[str]:
    """Each metric's mean and CI over the recorded runs, oldest first (``--history``)."""
    out = ['<section id="trends"><h2>Trends over recorded runs</h2>']
    runs = sorted(history, key=lambda r: r.timestamp)
    if not runs:
        out.append('<p class="note">The history holds no run yet.</p></section>')
        return out
    series: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        series.setdefault(run.source or "(no source)", []).append(i)
    first = datetime.fromtimestamp(runs[0].timestamp, tz=timezone.utc).strftime("%Y-%m-%d")
    last = datetime.fromtimestamp(runs[-1].timestamp, tz=timezone.utc).strftime("%Y-%m-%d")
    out.append(
        f'<p class="muted">{len(runs)} run{"s" if len(runs) != 1 else ""} from {esc(first)} to '
        f"{esc(last)}, oldest on the left; the band is each run's confidence interval, the "
        "outlined point the latest run. Labels are commits (or run ids); hover a point for its "
        "numbers. The y axis is zoomed to the values.</p>"
    )
    if len(series) > 1:
        out.append(_legend(list(series)))
    metrics: list[str] = []
    for run in runs:
        metrics.extend(m for m in run.summary if m not in metrics)
    if not metrics:
        out.append('<p class="note">The recorded runs hold no metric summary.</p></section>')
        return out
    out.append('<div class="charts">')
    for metric in metrics:
        scored = sum(
            1 for r in runs if _unit((r.summary.get(metric) or {}).get("mean")) is not None
        )
        out.append(
            f"<figure>{_trend_svg(metric, runs, series)}"
            f"<figcaption>{esc(metric)} — {scored} of {len(runs)} runs</figcaption></figure>"
        )
    out.append("</div></section>")
    return out
