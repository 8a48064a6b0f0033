"""A self-contained HTML report of an evaluation: one file to attach to a PR, a ticket or a mail.

Why it exists: a table of means answers "how good is it?" but not "where does it break, and can
I trust the judge?". This report puts on one page what the core already computes — the metric
summaries with their confidence intervals and failure counts (`Evaluation.summary`), the score
distributions, the retrieval × generation quadrants with the dangerous *bad retrieval,
good-looking answer* samples first (`diagnose`), the cross-framework comparison
(`compare_frameworks`) and, per sample, what was asked, retrieved and answered with every
claim/statement/context verdict behind each score.

Run-level warnings (``Evaluation.metadata["warnings"]``: likely input mistakes such as context
ids that never match the relevance labels) and an early stop (``metadata["aborted"]``) are shown
in a red block at the top of the overview, above the numbers they call into question.

It is one HTML file with inline CSS and inline SVG and a few lines of optional JavaScript (open
a sample's drill-down when a chart point links to it). It makes no network request of any kind
— no CDN, no web font, no remote image — so it opens the same on a laptop on a plane and in a CI
artefact viewer, and it can be archived as is.

Everything shown comes from user data (questions, answers, retrieved passages, judge reasons,
metadata, ids), and retrieved passages are exactly where hostile markup turns up. Every such
text is escaped with ``html.escape(..., quote=True)``, in element text and in attributes alike,
and anchor ids are built from a hash of the sample id, never from the raw id. The report embeds
no data for scripts, so nothing user-supplied ever lands inside a ``<script>`` element.

Only the standard library and ragbridge's core are used: no framework, no template engine.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeAlias

from ragbridge.core.agreement import AgreementTable, MetricAgreement, Statistic
from ragbridge.core.crosscheck import CrossComparison, MeasureComparison
from ragbridge.core.diagnosis import Diagnosis, Quadrant, diagnose
from ragbridge.core.results import Evaluation, MetricSummary, Score, Usage
from ragbridge.core.sample import Context, Sample

__all__ = ["histogram_counts", "render_report", "sample_anchor", "write_report"]

Evaluations: TypeAlias = Evaluation | Mapping[str, Evaluation]
Samples: TypeAlias = Sequence[Sample] | Mapping[str, Sequence[Sample]] | None
Diagnoses: TypeAlias = Diagnosis | Mapping[str, Diagnosis] | None

#: Label of the pipeline when a single `Evaluation` (not a mapping) is given.
DEFAULT_PIPELINE = "evaluation"

_BINS = 10
_GOOD_VERDICTS = {"supported", "attributed", "useful", "relevant", "yes", "entailed"}
_BAD_VERDICTS = {"unsupported", "contradicted", "not useful", "irrelevant", "no", "not relevant"}
_VERDICT_FLAGS = ("supported", "attributed", "useful", "relevant")
_LOWER_IS_BETTER = {"hallucination"}
_PALETTE = ("#2f6fb0", "#d9822b", "#3a9a5b", "#8e5bb5", "#c0392b", "#6b7a8f")


def _e(value: object) -> str:
    """Escape any user-supplied value for element text *and* quoted attributes."""
    return html.escape(str(value), quote=True)


def sample_anchor(sample_id: str, pipeline: str = DEFAULT_PIPELINE) -> str:
    """The ``id`` of a sample's drill-down ``<details>``: ``sample-<slug>-<hash>``.

    The slug keeps only ASCII letters and digits of the id (for a readable URL); the hash of the
    pipeline and the raw id makes it unique. No character of the raw id reaches the attribute
    unless it is ``[a-z0-9]``.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", sample_id.lower()).strip("-")[:32].strip("-")
    digest = hashlib.sha256(f"{pipeline}\x00{sample_id}".encode()).hexdigest()[:12]
    return f"sample-{slug}-{digest}" if slug else f"sample-{digest}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def _int(value: int) -> str:
    return f"{value:,}"


# --------------------------------------------------------------------------- input checking


def _pipelines(evaluations: Evaluations) -> dict[str, Evaluation]:
    if isinstance(evaluations, Evaluation):
        return {DEFAULT_PIPELINE: evaluations}
    if not isinstance(evaluations, Mapping):
        raise TypeError(
            "evaluations must be an Evaluation or a mapping pipeline name → Evaluation, "
            f"got {type(evaluations).__name__}"
        )
    if not evaluations:
        raise ValueError("evaluations: nothing to report (the mapping is empty)")
    out: dict[str, Evaluation] = {}
    for name, ev in evaluations.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"evaluations: pipeline names must be non-empty strings, got {name!r}")
        if not isinstance(ev, Evaluation):
            raise TypeError(
                f"evaluations[{name!r}]: expected an Evaluation, got {type(ev).__name__}"
            )
        out[name] = ev
    return out


def _sample_index(samples: Samples, pipelines: Sequence[str]) -> dict[str, dict[str, Sample]]:
    index: dict[str, dict[str, Sample]] = {name: {} for name in pipelines}
    if samples is None:
        return index
    if isinstance(samples, Mapping):
        per: dict[str, Sequence[Sample]] = {}
        for name, seq in samples.items():
            if name not in index:
                raise ValueError(
                    f"samples[{name!r}]: no such pipeline in evaluations "
                    f"(has: {', '.join(map(repr, pipelines))})"
                )
            per[name] = seq
    else:
        per = {name: samples for name in pipelines}
    for name, seq in per.items():
        if isinstance(seq, (str, bytes)):
            raise TypeError(f"samples[{name!r}]: expected a sequence of Sample, got a string")
        for i, sample in enumerate(seq):
            if not isinstance(sample, Sample):
                raise TypeError(
                    f"samples[{name!r}][{i}]: expected a Sample, got {type(sample).__name__}"
                )
            if sample.id in index[name]:
                raise ValueError(f"samples[{name!r}][{i}]: id: duplicate sample id {sample.id!r}")
            index[name][sample.id] = sample
    return index


def _diagnoses(
    diagnosis: Diagnoses, pipelines: Mapping[str, Evaluation]
) -> dict[str, Diagnosis | str]:
    """Pipeline → its Diagnosis, or the one-line note saying why there is none."""
    given: dict[str, Diagnosis] = {}
    if isinstance(diagnosis, Diagnosis):
        if len(pipelines) != 1:
            raise ValueError(
                "diagnosis: a single Diagnosis is ambiguous with several pipelines; "
                "pass a mapping pipeline name → Diagnosis"
            )
        given = {next(iter(pipelines)): diagnosis}
    elif diagnosis is not None:
        for name, diag in diagnosis.items():
            if name not in pipelines:
                raise ValueError(f"diagnosis[{name!r}]: no such pipeline in evaluations")
            if not isinstance(diag, Diagnosis):
                raise TypeError(
                    f"diagnosis[{name!r}]: expected a Diagnosis, got {type(diag).__name__}"
                )
            given[name] = diag
    out: dict[str, Diagnosis | str] = {}
    for name, ev in pipelines.items():
        if name in given:
            out[name] = given[name]
            continue
        try:
            out[name] = diagnose(ev)
        except ValueError as exc:
            out[name] = str(exc)
    return out


# --------------------------------------------------------------------------- page parts

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; padding: 0 1.5rem 3rem; background: #fafbfc; color: #1d232b;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  "Noto Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; }
header { border-bottom: 2px solid #d6dde5; padding: 1.2rem 0 0.6rem; margin-bottom: 1rem; }
h1 { font-size: 1.7rem; margin: 0 0 0.3rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 0.6rem; border-bottom: 1px solid #d6dde5; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 0.4rem; }
nav a { margin-right: 1rem; }
a { color: #1f5f9e; }
.muted { color: #5d6875; }
.note { background: #fff7e0; border-left: 4px solid #e0b040; padding: 0.4rem 0.8rem; }
.warnings { background: #fde8e6; border-left: 4px solid #b23030; padding: 0.4rem 0.8rem;
  margin: 0.6rem 0; }
.warnings ul { margin: 0.2rem 0 0; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: 0.4rem 0 1rem; background: #fff; font-size: 0.92rem; }
th, td { border: 1px solid #d6dde5; padding: 0.3rem 0.55rem; text-align: left;
  vertical-align: top; }
th { background: #eef2f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td.value { color: #a12a2a; }
tr.skipped td.value { color: #6b7a8f; }
.meta dt { font-weight: 600; float: left; clear: left; width: 13rem; }
.meta dd { margin: 0 0 0.2rem 13rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
figure { margin: 0; background: #fff; border: 1px solid #d6dde5; padding: 0.5rem; }
figcaption { font-size: 0.85rem; color: #3d4753; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: #3d4753; }
.legend span { display: inline-block; margin-right: 1rem; font-size: 0.85rem; }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.3rem;
  vertical-align: middle; }
details.sample { background: #fff; border: 1px solid #d6dde5; margin: 0.4rem 0;
  padding: 0.3rem 0.8rem; }
details.sample > summary { cursor: pointer; font-weight: 600; }
details.sample[open] { border-color: #8aa5c2; }
details.sample:target { outline: 3px solid #e0b040; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.2rem 0 0.6rem;
  background: #f4f6f8; padding: 0.4rem 0.6rem; border-radius: 3px; }
.ok { color: #25794a; font-weight: 700; }
.bad { color: #b23030; font-weight: 700; }
.danger { background: #fde8e6; }
.tag { display: inline-block; padding: 0 0.4rem; border-radius: 3px; font-size: 0.8rem;
  background: #eef2f6; }
.tag.rel { background: #dcf1e3; }
.tag.nonrel { background: #f6e0de; }
@media print { details.sample { break-inside: avoid; } }
"""

# Opens a sample's <details> when a link (a chart point, a table row) targets it. No data is
# embedded: the script only reads the URL fragment and looks the element up by id.
_JS = """
(function () {
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    if (!id) { return; }
    var el = document.getElementById(id);
    if (el && el.tagName === "DETAILS") { el.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  var tools = document.getElementById("sample-tools");
  if (tools) { tools.hidden = false; }
  var all = document.getElementById("expand-all");
  var none = document.getElementById("collapse-all");
  function setAll(open) {
    var items = document.querySelectorAll("details.sample");
    for (var i = 0; i < items.length; i++) { items[i].open = open; }
  }
  if (all) { all.addEventListener("click", function () { setAll(true); }); }
  if (none) { none.addEventListener("click", function () { setAll(false); }); }
})();
"""


def _judge_models(ev: Evaluation) -> list[str]:
    found = ev.metadata.get("judge_model")
    if isinstance(found, str) and found:
        return [found]
    # Offline scores stamp their embedding model in judge_model; only LLM scores had a judge.
    models = {s.judge_model for _, _, s in ev if s.judge_model and s.provider in (None, "llm")}
    return sorted(models)


def _header(
    title: str,
    pipelines: Mapping[str, Evaluation],
    index: Mapping[str, Mapping[str, Sample]],
    generated_by: str | None,
    generated_at: datetime,
    nav: str,
) -> list[str]:
    out = ["<header>", f"<h1>{_e(title)}</h1>"]
    stamp = generated_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    by = f" by {_e(generated_by)}" if generated_by else ""
    out.append(f'<p class="muted">Generated {_e(stamp)}{by}. Self-contained: no network use.</p>')
    out.append(nav)
    out.append("</header>")
    out.append('<section id="overview"><h2>Overview</h2>')
    for name, ev in pipelines.items():
        if len(pipelines) > 1:
            out.append(f"<h3>Pipeline {_e(name)}</h3>")
        usage = ev.usage()
        ids = set(ev.sample_ids) | set(index[name])
        rows: list[tuple[str, str]] = [
            ("Samples", _int(len(ids))),
            ("Metrics", ", ".join(ev.metrics) or "none"),
            ("Judge model", ", ".join(_judge_models(ev)) or "none (offline providers only)"),
            ("Embedding model", str(ev.metadata.get("embedding_model") or "none")),
        ]
        if usage.calls or usage.cached_calls:
            rows += [
                ("Judge calls", f"{_int(usage.calls)} ({_int(usage.cached_calls)} from cache)"),
                (
                    "Tokens",
                    f"{_int(usage.prompt_tokens)} prompt + {_int(usage.completion_tokens)} "
                    f"completion = {_int(usage.total_tokens)}",
                ),
            ]
        cost = ev.metadata.get("cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost):
            rows.append(("Cost", f"${cost:,.4f}"))
        out.extend(_warnings_block(name, ev))
        out.append(f'<dl class="meta" data-pipeline="{_e(name)}">')
        for key, value in rows:
            out.append(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>")
        out.append("</dl>")
    out.append("</section>")
    return out


def _run_warnings(ev: Evaluation) -> list[str]:
    """The run's likely input mistakes and early stop, as recorded in its metadata."""
    found = ev.metadata.get("warnings")
    lines = [str(w) for w in found if w] if isinstance(found, list) else []
    aborted = ev.metadata.get("aborted")
    if isinstance(aborted, str) and aborted:
        lines.insert(0, f"the run stopped early: {aborted}")
    return lines


def _warnings_block(pipeline: str, ev: Evaluation) -> list[str]:
    """A visible block listing ``metadata["warnings"]`` (and ``["aborted"]``): numbers that
    may be wrong are said next to them, not only in the results file."""
    lines = _run_warnings(ev)
    if not lines:
        return []
    out = [f'<div class="warnings" role="alert" data-pipeline="{_e(pipeline)}">']
    out.append("<strong>Warning" + ("s" if len(lines) > 1 else "") + "</strong><ul>")
    out.extend(f"<li>{_e(line)}</li>" for line in lines)
    out.append("</ul></div>")
    return out


def _failures(by_kind: Mapping[str, int]) -> str:
    if not by_kind:
        return "—"
    return ", ".join(f"{_e(kind)} {count}" for kind, count in sorted(by_kind.items()))


def _usage_cell(usage: Usage) -> str:
    return f"{_int(usage.calls)} / {_int(usage.total_tokens)}"


def _summary_section(summaries: Mapping[str, Mapping[str, MetricSummary]]) -> list[str]:
    out = ['<section id="summary"><h2>Metric summaries</h2>']
    out.append(
        '<p class="muted">Means are over scored cells only; a failed or skipped cell is '
        "counted, never averaged in as a low score. CI: seeded percentile bootstrap.</p>"
    )
    for name, summary in summaries.items():
        if len(summaries) > 1:
            out.append(f"<h3>{_e(name)}</h3>")
        out.append(f'<table class="summary" data-pipeline="{_e(name)}">')
        out.append(
            '<thead><tr><th>Metric</th><th class="num">Mean</th><th class="num">CI</th>'
            '<th class="num">Scored</th><th class="num">Failed</th><th class="num">Skipped</th>'
            '<th>Failures by kind</th><th class="num">Calls / tokens</th></tr></thead><tbody>'
        )
        for metric, s in summary.items():
            level = f"{s.confidence:.0%}"
            out.append(
                f'<tr data-metric="{_e(metric)}"><td>{_e(metric)}</td>'
                f'<td class="num mean">{_fmt(s.mean)}</td>'
                f'<td class="num ci" title="{_e(level)} CI">{_ci(s.ci_low, s.ci_high)}</td>'
                f'<td class="num scored">{s.n_scored}</td>'
                f'<td class="num failed">{s.n_failed}</td>'
                f'<td class="num skipped">{s.n_skipped}</td>'
                f'<td class="kinds">{_failures(s.failures_by_kind)}</td>'
                f'<td class="num">{_usage_cell(s.usage)}</td></tr>'
            )
        out.append("</tbody></table>")
    if len(summaries) > 1:
        out.append("<h3>Side by side</h3>")
        names = list(summaries)
        metrics: list[str] = []
        for summary in summaries.values():
            metrics.extend(m for m in summary if m not in metrics)
        head = "".join(f'<th class="num">{_e(n)}</th>' for n in names)
        out.append(f'<table class="side-by-side"><thead><tr><th>Metric</th>{head}</tr></thead>')
        out.append("<tbody>")
        for metric in metrics:
            cells = []
            for n in names:
                col = summaries[n].get(metric)
                if col is None:
                    cells.append('<td class="num">not run</td>')
                    continue
                cells.append(
                    f'<td class="num">{_fmt(col.mean)} {_ci(col.ci_low, col.ci_high)}'
                    f'<br><span class="muted">{col.n_scored} scored, {col.n_failed} failed, '
                    f"{col.n_skipped} skipped</span></td>"
                )
            out.append(f'<tr data-metric="{_e(metric)}"><td>{_e(metric)}</td>{"".join(cells)}</tr>')
        out.append("</tbody></table>")
    out.append("</section>")
    return out


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
        f'<svg class="histogram" data-metric="{_e(metric)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(metric)} distribution">',
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
        color = _PALETTE[j % len(_PALETTE)]
        for i, count in enumerate(counts):
            h = plot_h * count / peak
            x = left + i * bin_w + 1 + j * (bin_w - 2) / k
            y = top + plot_h - h
            lo, hi = i / _BINS, (i + 1) / _BINS
            label = f"{name}: {lo:.1f}–{hi:.1f}: {count}"
            parts.append(
                f'<rect class="bar" data-pipeline="{_e(name)}" data-bin="{i}" '
                f'data-count="{count}" x="{x:.1f}" y="{y:.1f}" width="{(bin_w - 2) / k:.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{_e(label)}</title></rect>'
            )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 2}" text-anchor="middle">score</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _legend(names: Sequence[str]) -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{_PALETTE[j % len(_PALETTE)]}"></i>'
        f"{_e(n)}</span>"
        for j, n in enumerate(names)
    )
    return f'<p class="legend">{items}</p>'


def _distribution_section(pipelines: Mapping[str, Evaluation]) -> list[str]:
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
            f"<figcaption>{_e(metric)} — {n} scored</figcaption></figure>"
        )
    out.append("</div></section>")
    return out


def _quadrant_svg(diag: Diagnosis, pipeline: str) -> str:
    size, pad = 420, 44
    plot = size - 2 * pad
    lower_better = diag.generation_metric.split(":")[0] in _LOWER_IS_BETTER

    def px(v: float) -> float:
        return pad + v * plot

    def py(v: float) -> float:
        return pad + (1.0 - v) * plot

    rt, gt = diag.retrieval_threshold, diag.generation_threshold
    # The dangerous quadrant: retrieval below its threshold, generation on its "good" side.
    g_lo, g_hi = (0.0, gt) if lower_better else (gt, 1.0)
    parts = [
        f'<svg class="quadrants" data-pipeline="{_e(pipeline)}" width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" role="img" aria-label="retrieval by generation">',
        f'<rect x="{pad}" y="{pad}" width="{plot}" height="{plot}" fill="#fff" stroke="#6b7a8f"/>',
        f'<rect class="danger-zone" x="{px(0):.1f}" y="{py(g_hi):.1f}" '
        f'width="{px(rt) - px(0):.1f}" height="{py(g_lo) - py(g_hi):.1f}" fill="#fbd5d0">'
        f"<title>{_e(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER.value)}</title></rect>",
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
            f'<text class="qlabel" data-quadrant="{_e(quadrant.value)}" x="{x:.1f}" y="{y}" '
            f'text-anchor="middle"{weight}><tspan x="{x:.1f}">{_e(first)},</tspan>'
            f'<tspan x="{x:.1f}" dy="13">{_e(second)}</tspan></text>'
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
        f"{_e(diag.retrieval_metric)} (retrieval)</text>"
    )
    parts.append(
        f'<text x="12" y="{size / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {size / 2:.1f})">{_e(diag.generation_metric)} '
        "(generation)</text>"
    )
    for row in diag.rows:
        if row.quadrant is Quadrant.UNKNOWN or row.retrieval is None or row.generation is None:
            continue
        danger = row.quadrant is Quadrant.BAD_RETRIEVAL_GOOD_ANSWER
        color = "#c0392b" if danger else "#2f6fb0"
        label = (
            f"{row.sample_id}: {diag.retrieval_metric} {row.retrieval:.3f}, "
            f"{diag.generation_metric} {row.generation:.3f} ({row.quadrant.value})"
        )
        parts.append(
            f'<a href="#{sample_anchor(row.sample_id, pipeline)}">'
            f'<circle class="pt{" pt-danger" if danger else ""}" data-sample="{_e(row.sample_id)}"'
            f' cx="{px(row.retrieval):.1f}" cy="{py(row.generation):.1f}" r="5" fill="{color}"'
            f' fill-opacity="0.75" stroke="#1d232b" stroke-width="0.6">'
            f"<title>{_e(label)}</title></circle></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _question(index: Mapping[str, Sample], sample_id: str) -> str:
    sample = index.get(sample_id)
    return "" if sample is None else sample.question


def _quadrant_section(
    diagnoses: Mapping[str, Diagnosis | str], index: Mapping[str, Mapping[str, Sample]]
) -> list[str]:
    out = ['<section id="quadrants"><h2>Where it fails: retrieval × generation</h2>']
    out.append(
        '<p class="muted">Each point is a sample (click it for the drill-down). The shaded '
        "quadrant is <strong>bad retrieval, good-looking answer</strong>: the generation "
        "measure passes, so nobody looks, yet the retriever missed what the question needed.</p>"
    )
    for name, diag in diagnoses.items():
        if len(diagnoses) > 1:
            out.append(f"<h3>{_e(name)}</h3>")
        if isinstance(diag, str):
            out.append(f'<p class="note quadrant-omitted">Quadrant chart omitted: {_e(diag)}</p>')
            continue
        out.append(
            f'<div class="charts"><figure>{_quadrant_svg(diag, name)}<figcaption>'
            f"thresholds: {_e(diag.retrieval_metric)} ≥ {diag.retrieval_threshold:g}, "
            f"{_e(diag.generation_metric)} {_e(_gen_rule(diag))}</figcaption></figure>"
        )
        out.append('<table class="quadrant-counts"><thead><tr><th>Quadrant</th>')
        out.append('<th class="num">Samples</th></tr></thead><tbody>')
        for quadrant, count in diag.counts.items():
            cls = ' class="danger"' if quadrant == Quadrant.BAD_RETRIEVAL_GOOD_ANSWER.value else ""
            out.append(f'<tr{cls}><td>{_e(quadrant)}</td><td class="num">{count}</td></tr>')
        out.append("</tbody></table></div>")
        danger = diag.in_quadrant(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER)
        out.append(f"<h3>Dangerous samples ({len(danger)})</h3>")
        if danger:
            out.append(
                f'<table class="dangerous" data-pipeline="{_e(name)}"><thead><tr><th>Sample</th>'
                f'<th class="num">{_e(diag.retrieval_metric)}</th>'
                f'<th class="num">{_e(diag.generation_metric)}</th><th>Question</th></tr>'
                "</thead><tbody>"
            )
            for row in danger:
                out.append(
                    f'<tr class="danger"><td><a href="#{sample_anchor(row.sample_id, name)}">'
                    f'{_e(row.sample_id)}</a></td><td class="num">{_fmt(row.retrieval)}</td>'
                    f'<td class="num">{_fmt(row.generation)}</td>'
                    f"<td>{_e(_question(index[name], row.sample_id))}</td></tr>"
                )
            out.append("</tbody></table>")
        else:
            out.append('<p class="muted">None.</p>')
        unknown = diag.in_quadrant(Quadrant.UNKNOWN)
        if unknown:
            out.append(f'<h3>Not diagnosed ({len(unknown)})</h3><ul class="undiagnosed">')
            for row in unknown:
                out.append(
                    f'<li><a href="#{sample_anchor(row.sample_id, name)}">{_e(row.sample_id)}'
                    f"</a>: {_e(row.note or 'missing a value')}</li>"
                )
            out.append("</ul>")
    out.append("</section>")
    return out


def _gen_rule(diag: Diagnosis) -> str:
    op = "≤" if diag.generation_metric.split(":")[0] in _LOWER_IS_BETTER else "≥"
    return f"{op} {diag.generation_threshold:g}"


def _comparison_measure(m: MeasureComparison, anchors: Mapping[str, str], out: list[str]) -> None:
    out.append(f'<h3 data-measure="{_e(m.measure)}">{_e(m.measure)}</h3>')
    out.append(
        '<table class="frameworks"><thead><tr><th>Framework</th><th class="num">Mean</th>'
        '<th class="num">CI</th><th class="num">Scored</th><th class="num">Failed</th>'
        '<th class="num">Skipped</th><th>Failures by kind</th><th class="num">Calls</th>'
        '<th class="num">Tokens</th></tr></thead><tbody>'
    )
    for f in m.frameworks:
        out.append(
            f'<tr data-framework="{_e(f.framework)}"><td>{_e(f.framework)}</td>'
            f'<td class="num mean">{_fmt(f.mean)}</td>'
            f'<td class="num ci">{_ci(f.ci_low, f.ci_high)}</td>'
            f'<td class="num">{f.n_scored}</td><td class="num">{f.n_failed}</td>'
            f'<td class="num">{f.n_skipped}</td><td>{_failures(f.failures_by_kind)}</td>'
            f'<td class="num">{_int(f.usage.calls)}</td>'
            f'<td class="num">{_int(f.usage.total_tokens)}</td></tr>'
        )
    out.append("</tbody></table>")
    if m.pairs:
        out.append(
            '<table class="pairs"><thead><tr><th>Pair</th><th class="num">n</th>'
            '<th class="num">Spearman</th><th class="num">Pearson</th>'
            '<th class="num">Mean |diff|</th><th>Note</th></tr></thead><tbody>'
        )
        for p in m.pairs:
            rho = "—" if p.spearman is None else f"{p.spearman:+.2f}"
            r = "—" if p.pearson is None else f"{p.pearson:+.2f}"
            out.append(
                f'<tr><td>{_e(p.a)} vs {_e(p.b)}</td><td class="num">{p.n}</td>'
                f'<td class="num spearman">{rho}</td><td class="num pearson">{r}</td>'
                f'<td class="num mad">{_fmt(p.mean_abs_diff)}</td>'
                f"<td>{_e(p.note or '')}</td></tr>"
            )
        out.append("</tbody></table>")
    if m.disagreements:
        fws = [f.framework for f in m.frameworks]
        head = "".join(f"<th>{_e(fw)}</th>" for fw in fws)
        out.append(
            f'<h4>Top disagreements</h4><table class="disagreements"><thead><tr><th>Sample</th>'
            f'<th class="num">Spread</th>{head}</tr></thead><tbody>'
        )
        for d in m.disagreements:
            cells = []
            for fw in fws:
                value = d.values.get(fw)
                reason = d.reasons.get(fw, "")
                shown = "not scored" if fw not in d.values else _fmt(value)
                cells.append(
                    f'<td><strong>{shown}</strong><div class="muted">{_e(reason)}</div></td>'
                )
            out.append(
                f"<tr><td>{_sample_link(d.sample_id, anchors)}</td>"
                f'<td class="num">{d.spread:.3f}</td>{"".join(cells)}</tr>'
            )
        out.append("</tbody></table>")
    if m.edge_cases:
        out.append(
            '<h4>Edge cases</h4><table class="edge-cases"><thead><tr><th>Sample</th>'
            "<th>Kind</th><th>What happened</th></tr></thead><tbody>"
        )
        for ec in m.edge_cases:
            out.append(
                f"<tr><td>{_sample_link(ec.sample_id, anchors)}</td><td>{_e(ec.kind)}</td>"
                f"<td>{_e(ec.description)}</td></tr>"
            )
        out.append("</tbody></table>")


def _sample_link(sample_id: str, anchors: Mapping[str, str]) -> str:
    anchor = anchors.get(sample_id)
    if anchor is None:
        return _e(sample_id)
    return f'<a href="#{anchor}">{_e(sample_id)}</a>'


def _comparison_section(comparison: CrossComparison, anchors: Mapping[str, str]) -> list[str]:
    out = ['<section id="comparison"><h2>Cross-framework comparison</h2>']
    judge = f", judge {_e(comparison.judge_model)}" if comparison.judge_model else ""
    out.append(
        f'<p class="muted">{comparison.n_samples} samples, {len(comparison.measures)} '
        f"measures compared{judge}. Correlations are over the samples both frameworks "
        "scored.</p>"
    )
    for note in comparison.notes:
        out.append(f'<p class="note">{_e(note)}</p>')
    for m in comparison.measures:
        _comparison_measure(m, anchors, out)
    if comparison.skipped:
        out.append(
            '<h3>Not run</h3><table class="skipped-pairs"><thead><tr><th>Framework</th>'
            "<th>Measure</th><th>Why</th></tr></thead><tbody>"
        )
        for s in comparison.skipped:
            out.append(
                f"<tr><td>{_e(s.framework)}</td><td>{_e(s.measure)}</td>"
                f"<td>{_e(s.reason)}</td></tr>"
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return out


# --------------------------------------------------------------------------- judge agreement


def _stat(stat: Statistic) -> str:
    """A statistic's cell: the value and its CI, or "undefined" with the reason on hover."""
    if stat.value is None:
        return f'<span class="muted" title="{_e(stat.undefined)}">undefined</span>'
    text = f"{stat.value:.3f}"
    if stat.ci_low is not None and stat.ci_high is not None:
        text += f' <span class="muted">{_ci(stat.ci_low, stat.ci_high)}</span>'
    return text


def _agreement_row(row: MetricAgreement) -> str:
    default = row.default
    best = row.best
    kappa0 = _stat(default.kappa) if default else _stat(Statistic.missing(row.best_undefined or ""))
    if best is not None:
        kappa_best = f"{_stat(best.kappa)} at {best.threshold:.3g}"
        balanced = _stat(best.balanced_accuracy)
        confusion_best = _e(best.confusion.text())
    else:
        why = row.best_undefined or "no threshold"
        kappa_best = f'<span class="muted" title="{_e(why)}">undefined</span>'
        balanced = confusion_best = "—"
    balanced0 = _stat(default.balanced_accuracy) if default else "—"
    lost = f"{row.n_failed} failed, {row.n_skipped} skipped, {row.n_missing} missing"
    return (
        f'<tr data-metric="{_e(row.label)}"><td>{_e(row.label)}</td><td>{_e(row.question)}</td>'
        f'<td class="num n">{row.n}</td><td class="num">{row.n_labels}</td>'
        f'<td class="num kappa-default">{kappa0}</td>'
        f'<td class="num">{balanced0}</td>'
        f'<td class="num kappa-best">{kappa_best}</td><td class="num">{balanced}</td>'
        f'<td class="num spearman">{_stat(row.spearman)}</td>'
        f'<td class="num auroc">{_stat(row.auroc)}</td>'
        f'<td class="num confusion">{_e(default.confusion.text()) if default else "—"}</td>'
        f'<td class="num">{confusion_best}</td><td class="muted">{_e(lost)}</td></tr>'
    )


def _agreement_section(table: AgreementTable) -> list[str]:
    """Each judge metric against the people's labels of the same samples (`judge_agreement`)."""
    out = ['<section id="agreement"><h2>Judge agreement with people</h2>']
    source = "; ".join(f"{k}: {v}" for k, v in table.source.items())
    out.append(
        f'<p class="muted">{table.labelled_samples} labelled samples, {table.labels} labels by '
        f"{table.annotators} annotator(s){'; ' + _e(source) if source else ''}. Positive = the "
        "people's yes (the row's question); the judge says yes when its score is above the "
        f"threshold ({table.default_threshold:g} by default), below it for a measure of harm "
        f"(hallucination). Best threshold: {_e(table.best_by)}. Ties: {_e(table.ties)}. "
        f"CIs: {table.confidence:.0%} percentile bootstrap, {table.n_resamples} resamples, "
        f"seed {table.seed}.</p>"
    )
    out.extend(f'<p class="note">{_e(note)}</p>' for note in table.notes)
    t0 = f"{table.default_threshold:g}"
    out.append(
        '<table class="agreement"><thead><tr><th>Metric</th><th>Question</th>'
        '<th class="num">n</th><th class="num">Labels</th>'
        f'<th class="num">Kappa at {t0}</th><th class="num">Balanced acc. at {t0}</th>'
        '<th class="num">Kappa at best threshold</th>'
        '<th class="num">Balanced acc. at best</th><th class="num">Spearman</th>'
        '<th class="num">AUROC</th>'
        f'<th class="num">TP/FP/FN/TN at {t0}</th><th class="num">TP/FP/FN/TN at best</th>'
        "<th>Not compared</th></tr></thead><tbody>"
    )
    out.extend(_agreement_row(row) for row in table.rows)
    out.append("</tbody></table>")
    details: list[str] = []
    for row in table.rows:
        lines = list(row.notes)
        for name, stat in (
            (f"kappa at {t0}", row.default.kappa if row.default else None),
            ("Spearman", row.spearman),
            ("AUROC", row.auroc),
        ):
            if stat is not None and stat.undefined:
                lines.append(f"{name} undefined: {stat.undefined}")
            if stat is not None and stat.ci_note:
                lines.append(f"{name}: no CI, {stat.ci_note}")
        if row.best is not None:
            lines.append(f"best threshold: {row.best.rule}")
        elif row.best_undefined:
            lines.append(f"no best threshold: {row.best_undefined}")
        if lines:
            items = "".join(f"<li>{_e(line)}</li>" for line in lines)
            details.append(
                f'<li data-metric="{_e(row.label)}">{_e(row.label)}<ul>{items}</ul></li>'
            )
    if details:
        out.append(f'<ul class="agreement-notes">{"".join(details)}</ul>')
    if table.people:
        out.append(
            '<h3>Between people</h3><p class="muted">On the question\'s own scale, over the '
            "samples two or more people labelled: the agreement a judge can hardly exceed.</p>"
            '<table class="people"><thead><tr><th>Question</th><th class="num">Samples</th>'
            '<th class="num">Annotators</th><th class="num">Krippendorff\'s alpha</th>'
            '<th class="num">Mean pairwise kappa (quadratic)</th><th class="num">Pairs</th>'
            "</tr></thead><tbody>"
        )
        for p in table.people:
            out.append(
                f'<tr><td>{_e(p.question)}</td><td class="num">{p.samples}</td>'
                f'<td class="num">{p.annotators}</td><td class="num">{_stat(p.alpha)}</td>'
                f'<td class="num">{_stat(p.kappa)}</td><td class="num">{p.kappa_pairs}</td></tr>'
            )
        out.append("</tbody></table>")
    if table.not_compared:
        items = "".join(
            f"<li>{_e(metric)}: {_e(why)}</li>" for metric, why in table.not_compared.items()
        )
        out.append(f'<p class="muted">Not compared:</p><ul class="not-compared">{items}</ul>')
    out.append("</section>")
    return out


# --------------------------------------------------------------------------- drill-down


def _relevance_tag(sample: Sample, context: Context) -> str:
    if sample.relevance is None:
        return '<span class="tag">unlabelled</span>'
    if context.id is None:
        return '<span class="tag">no id</span>'
    grade = sample.relevance.get(context.id, 0)
    if grade > 0:
        return f'<span class="tag rel">relevant (grade {grade})</span>'
    return '<span class="tag nonrel">not relevant</span>'


def _verdict_mark(item: Mapping[str, Any]) -> str:
    verdict: Any = None
    if "verdict" in item:
        verdict = item["verdict"]
    else:
        for key in _VERDICT_FLAGS:
            if key in item and isinstance(item[key], bool):
                verdict = item[key]
                break
        else:
            if isinstance(item.get("contradiction"), bool):
                verdict = not item["contradiction"]
    if verdict is True or (isinstance(verdict, str) and verdict.lower() in _GOOD_VERDICTS):
        return '<span class="ok" title="pass">✓</span>'
    if verdict is False or (isinstance(verdict, str) and verdict.lower() in _BAD_VERDICTS):
        return '<span class="bad" title="fail">✗</span>'
    return '<span class="muted">·</span>'


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list)):
        return _e(json.dumps(value, ensure_ascii=False))
    return _e(value)


def _details_html(details: Any) -> str:
    """Per-claim/statement/context verdicts as small tables; other fields as a short list."""
    if details is None:
        return ""
    if isinstance(details, list):
        details = {"items": details}
    out: list[str] = []
    scalars: list[str] = []
    for key, value in details.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            columns: list[str] = []
            for item in value:
                columns.extend(k for k in item if k not in columns)
            head = "".join(f"<th>{_e(c)}</th>" for c in columns)
            out.append(
                f'<table class="verdicts" data-kind="{_e(key)}"><caption>{_e(key)}</caption>'
                f"<thead><tr><th></th>{head}</tr></thead><tbody>"
            )
            for item in value:
                cells = "".join(f"<td>{_cell(item.get(c))}</td>" for c in columns)
                out.append(f"<tr><td>{_verdict_mark(item)}</td>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            items = "".join(f"<li>{_e(v)}</li>" for v in value)
            out.append(f'<div class="detail-list">{_e(key)}:<ul>{items}</ul></div>')
        else:
            scalars.append(f"{_e(key)}: {_cell(value)}")
    if scalars:
        out.insert(0, f'<p class="muted detail-fields">{"; ".join(scalars)}</p>')
    return "".join(out)


def _score_rows(ev: Evaluation, sample_id: str) -> list[str]:
    rows: list[str] = []
    for metric in ev.metrics:
        score: Score | None = ev.get(sample_id, metric)
        if score is None:
            continue
        status = score.status
        if score.failure is not None:
            shown = f"failed ({_e(score.failure.kind.value)})"
            why = _e(score.failure.message)
        elif score.value is None:
            shown = "skipped"
            why = _e(score.reason or "")
        else:
            shown = f"{score.value:.3f}"
            why = _e(score.reason or "")
        source = ", ".join(
            _e(part) for part in (score.provider, score.judge_model, score.prompt_version) if part
        )
        rows.append(
            f'<tr class="{status}" data-metric="{_e(metric)}"><td>{_e(metric)}</td>'
            f'<td class="num value">{shown}</td><td>{why}{_details_html(score.details)}</td>'
            f'<td class="muted">{source or "—"}</td>'
            f'<td class="num">{_usage_cell(score.usage)}</td></tr>'
        )
    return rows


def _text_block(label: str, text: str | None) -> str:
    if text is None:
        return f'<p><strong>{_e(label)}</strong> <span class="muted">none</span></p>'
    return f'<p><strong>{_e(label)}</strong></p><div class="text">{_e(text)}</div>'


def _drilldown_one(
    pipeline: str, sample_id: str, sample: Sample | None, ev: Evaluation, status: str
) -> list[str]:
    anchor = sample_anchor(sample_id, pipeline)
    out = [
        f'<details class="sample" id="{anchor}" data-pipeline="{_e(pipeline)}">',
        f'<summary>{_e(sample_id)} <span class="muted">{_e(status)}</span></summary>',
    ]
    if sample is None:
        out.append('<p class="muted">The sample record was not given to the report.</p>')
    else:
        out.append(_text_block("Question", sample.question))
        out.append(_text_block("Answer", sample.answer))
        out.append(_text_block("Reference", sample.reference))
        out.append(f"<p><strong>Contexts</strong> ({len(sample.contexts)})</p>")
        if sample.contexts:
            out.append(
                '<table class="contexts"><thead><tr><th class="num">Rank</th><th>Id</th>'
                '<th class="num">Retriever score</th><th>Label</th><th>Text</th></tr></thead>'
                "<tbody>"
            )
            for rank, ctx in enumerate(sample.contexts, start=1):
                out.append(
                    f'<tr><td class="num">{rank}</td><td>{_e(ctx.id or "—")}</td>'
                    f'<td class="num">{_fmt(ctx.score)}</td>'
                    f"<td>{_relevance_tag(sample, ctx)}</td>"
                    f'<td><div class="text">{_e(ctx.text)}</div></td></tr>'
                )
            out.append("</tbody></table>")
    rows = _score_rows(ev, sample_id)
    if rows:
        out.append(
            '<table class="scores"><thead><tr><th>Metric</th><th class="num">Value</th>'
            '<th>Reason and verdicts</th><th>Source</th><th class="num">Calls / tokens</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    else:
        out.append('<p class="muted">No metric was scored on this sample.</p>')
    out.append("</details>")
    return out


def _drilldown_section(
    pipelines: Mapping[str, Evaluation],
    index: Mapping[str, Mapping[str, Sample]],
    diagnoses: Mapping[str, Diagnosis | str],
) -> list[str]:
    out = ['<section id="samples"><h2>Samples</h2>']
    out.append(
        '<p id="sample-tools" hidden><button type="button" id="expand-all">Expand all</button> '
        '<button type="button" id="collapse-all">Collapse all</button></p>'
    )
    for name, ev in pipelines.items():
        if len(pipelines) > 1:
            out.append(f"<h3>{_e(name)}</h3>")
        quadrant: dict[str, str] = {}
        order: list[str] = []
        diag = diagnoses.get(name)
        if isinstance(diag, Diagnosis):
            for row in diag.rows:
                quadrant[row.sample_id] = row.quadrant.value
                order.append(row.sample_id)
        ids = list(dict.fromkeys([*order, *ev.sample_ids, *index[name]]))
        for sid in ids:
            out.extend(_drilldown_one(name, sid, index[name].get(sid), ev, quadrant.get(sid, "")))
    out.append("</section>")
    return out


# --------------------------------------------------------------------------- entry points


def render_report(
    evaluations: Evaluations,
    *,
    samples: Samples = None,
    comparison: CrossComparison | None = None,
    diagnosis: Diagnoses = None,
    title: str = "ragbridge report",
    generated_by: str | None = None,
    generated_at: datetime | None = None,
    agreement: AgreementTable | None = None,
) -> str:
    """The report as one self-contained HTML document (a ``str``).

    ``evaluations`` is one `Evaluation` or a mapping pipeline name → `Evaluation` shown side by
    side. ``samples`` (one sequence for every pipeline, or a mapping per pipeline) fills the
    drill-down with questions, answers and contexts. ``diagnosis`` defaults to ``diagnose()`` of
    each pipeline; where no retrieval or generation measure was scored the quadrant chart is
    omitted with a note. ``generated_at`` (default: now) is the date printed in the header.
    ``agreement`` (`ragbridge.core.agreement.judge_agreement`) adds the judge-agreement section;
    without it there is none. Bad input raises ValueError/TypeError naming the argument and the key.
    """
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    if agreement is not None and not isinstance(agreement, AgreementTable):
        raise TypeError(f"agreement must be an AgreementTable, got {type(agreement).__name__}")
    if comparison is not None and not isinstance(comparison, CrossComparison):
        raise TypeError(f"comparison must be a CrossComparison, got {type(comparison).__name__}")
    pipelines = _pipelines(evaluations)
    index = _sample_index(samples, list(pipelines))
    diagnoses = _diagnoses(diagnosis, pipelines)
    summaries = {name: ev.summary() for name, ev in pipelines.items()}
    anchors: dict[str, str] = {}
    for name, ev in pipelines.items():
        for sid in [*ev.sample_ids, *index[name]]:
            anchors.setdefault(sid, sample_anchor(sid, name))
    nav = [
        ("overview", "Overview"),
        ("summary", "Summaries"),
        *([("agreement", "Agreement")] if agreement is not None else []),
        ("distributions", "Distributions"),
        ("quadrants", "Quadrants"),
        *([("comparison", "Comparison")] if comparison is not None else []),
        ("samples", "Samples"),
    ]
    body: list[str] = []
    when = generated_at or datetime.now(timezone.utc)
    nav_html = "<nav>" + "".join(f'<a href="#{i}">{t}</a>' for i, t in nav) + "</nav>"
    body.extend(_header(title, pipelines, index, generated_by, when, nav_html))
    body.extend(_summary_section(summaries))
    if agreement is not None:
        body.extend(_agreement_section(agreement))
    body.extend(_distribution_section(pipelines))
    body.extend(_quadrant_section(diagnoses, index))
    if comparison is not None:
        body.extend(_comparison_section(comparison, anchors))
    body.extend(_drilldown_section(pipelines, index, diagnoses))
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Belt and braces: even if a future bug let markup through, the page may load nothing
        # from anywhere and run no script but its own inline one.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'sha256-" + _script_hash() + "'; img-src data:\">",
        '<meta name="generator" content="ragbridge">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        *body,
        "</main>",
        f"<script>{_JS}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"


def _script_hash() -> str:
    return base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()


def write_report(
    path: str | os.PathLike[str],
    evaluations: Evaluations,
    *,
    samples: Samples = None,
    comparison: CrossComparison | None = None,
    diagnosis: Diagnoses = None,
    title: str = "ragbridge report",
    generated_by: str | None = None,
    generated_at: datetime | None = None,
    agreement: AgreementTable | None = None,
) -> Path:
    """Render the report and write it to ``path`` (UTF-8, parent folders created); returns it."""
    text = render_report(
        evaluations,
        samples=samples,
        comparison=comparison,
        diagnosis=diagnosis,
        title=title,
        generated_by=generated_by,
        generated_at=generated_at,
        agreement=agreement,
    )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
