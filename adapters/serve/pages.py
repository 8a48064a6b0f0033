"""The HTML of ``ragbridge serve``: every page rendered on the server, every datum escaped.

Run ids, sample ids, metric names, branches, sources, settings, questions and alert messages
are data someone else wrote: each goes through `esc` (element text and quoted attributes) or,
inside a URL, through `quote` first. No page carries an inline script or style: the one script
and the stylesheet come from the app's own ``/static/`` route, which the Content-Security-Policy
(`CSP`) allows and nothing else, so a planted ``<script>`` or ``onerror=`` is text twice over.
The pages work without the script (forms and links); the script only re-queries the sample table
in place through the JSON API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from ragbridge.adapters.report.markup import LOWER_IS_BETTER, ci_text, esc, number
from ragbridge.core.monitoring.records import RunRecord

from .data import MAX_PAGE, N_RESAMPLES, SEED, STATUSES, RunTable, TableQuery

__all__ = ["CSP", "page", "url"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""Scripts, styles and requests only from this app; no inline script or style, no framing."""


def url(path: str, **params: Any) -> str:
    """``path`` with its query (ids percent-encoded); escape the result for an attribute."""
    given = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"{path}?{urlencode(given)}" if given else path


def when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + " UTC"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return "&lt; 0.001" if p < 0.001 else f"{p:.3f}"


def page(title: str, body: Sequence[str], *, store: str) -> str:
    """A whole page: the navigation, ``body`` (already escaped) and the static assets."""
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)} · ragbridge</title>",
            '<link rel="stylesheet" href="/static/serve.css">',
            '<script src="/static/serve.js" defer></script></head><body><main>',
            '<header><nav><a href="/">Runs</a><a href="/compare">Compare</a>',
            '<a href="/trends">Trends</a><a href="/production">Production</a></nav>',
            f'<p class="muted">Store: <span class="store">{esc(store)}</span> (read-only)</p>',
            f"<h1>{esc(title)}</h1></header>",
            *body,
            "</main></body></html>",
        ]
    )


def error_body(message: str) -> list[str]:
    return [f'<p class="warnings" id="error">{esc(message)}</p>']


# -- runs ---------------------------------------------------------------------------------------


def _short(text: str | None, n: int = 10) -> str:
    return "—" if not text else esc(text[:n])


def _options(values: Sequence[str], chosen: str | None, empty: str | None = None) -> str:
    out = [] if empty is None else [f'<option value="">{esc(empty)}</option>']
    for v in values:
        sel = " selected" if v == chosen else ""
        out.append(f'<option value="{esc(v)}"{sel}>{esc(v)}</option>')
    return "".join(out)


def _run_options(runs: Sequence[RunRecord], chosen: str | None) -> str:
    out = []
    for r in runs:
        sel = " selected" if r.run_id == chosen else ""
        label = f"{r.run_id[:12]} · {r.branch or '—'} · {when(r.timestamp)} · {r.source or ''}"
        out.append(f'<option value="{esc(r.run_id)}"{sel}>{esc(label)}</option>')
    return "".join(out)


def runs_body(
    runs: Sequence[RunRecord],
    every: Sequence[RunRecord],
    *,
    branch: str | None,
    source: str | None,
) -> list[str]:
    branches = sorted({r.branch or "" for r in every} - {""})
    sources = sorted({r.source for r in every if r.source})
    out = [
        '<form id="run-filter" class="tools" method="get" action="/">',
        f'<label>Branch <select name="branch">{_options(branches, branch, "any")}</select></label>',
        f'<label>Input <select name="source">{_options(sources, source, "any")}</select></label>',
        '<button type="submit">Show</button></form>',
        f'<p class="muted" id="run-count">{len(runs)} of {len(every)} runs, newest first.</p>',
    ]
    if not runs:
        out.append('<p class="note">No run recorded here yet (ragbridge eval ... --history).</p>')
        return out
    out.append(
        '<div class="table-scroll"><table id="runs"><thead><tr><th>Run</th><th>When</th>'
        "<th>Branch</th><th>Commit</th><th>Command</th><th>Input</th><th>Metrics</th>"
        "</tr></thead><tbody>"
    )
    for r in runs:
        means = ", ".join(
            f"{m} {number(s.get('mean') if isinstance(s.get('mean'), float) else None)}"
            for m, s in list(r.summary.items())[:6]
        )
        out.append(
            f'<tr data-run="{esc(r.run_id)}"><td><a href="{esc(url("/run", id=r.run_id))}">'
            f"{esc(r.run_id[:16])}</a></td><td>{when(r.timestamp)}</td>"
            f"<td>{esc(r.branch or '—')}</td><td><code>{_short(r.commit)}</code></td>"
            f"<td>{esc(r.command)}</td><td>{esc(r.source or '—')}</td><td>{esc(means)}</td></tr>"
        )
    out.append("</tbody></table></div>")
    return out


# -- one run ------------------------------------------------------------------------------------


def _meta(run: RunRecord) -> str:
    items = [
        ("Run", run.run_id),
        ("When", when(run.timestamp)),
        ("Branch", run.branch or "—"),
        ("Commit", run.commit or "—"),
        ("Command", run.command),
        ("Input", run.source or "—"),
    ]
    return (
        '<dl class="meta">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
        + "</dl>"
    )


def _summary(run: RunRecord) -> str:
    rows = []
    for metric, s in run.summary.items():
        mean = s.get("mean")
        low, high = s.get("ci_low"), s.get("ci_high")
        rows.append(
            f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
            f'<td class="num">{number(mean if isinstance(mean, float | int) else None)}</td>'
            f'<td class="num">{ci_text(low, high) if isinstance(low, float | int) and isinstance(high, float | int) else "—"}</td>'  # noqa: E501
            f'<td class="num">{esc(s.get("n_scored", "—"))}</td>'
            f'<td class="num">{esc(s.get("n_failed", "—"))}</td>'
            f'<td class="num">{esc(s.get("n_skipped", "—"))}</td>'
            f"<td>{esc(s.get('provider') or '—')}</td></tr>"
        )
    return (
        '<table id="summary"><thead><tr><th>Metric</th><th class="num">Mean</th>'
        '<th class="num">95% CI</th><th class="num">Scored</th><th class="num">Failed</th>'
        '<th class="num">Skipped</th><th>Provider</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


def _cell_html(cell: float | str | None) -> str:
    if cell is None:
        return '<td class="num absent">—</td>'
    if isinstance(cell, float):
        return f'<td class="num">{cell:.3f}</td>'
    cls = "failed" if cell.startswith("failed") else "skipped"
    return f'<td class="num {cls}">{esc(cell)}</td>'


def table_rows(run_id: str, rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(
        f'<tr data-sample="{esc(r["id"])}"><td>'
        f'<a href="{esc(url("/sample", run=run_id, id=r["id"]))}">'
        f"{esc(r['id'])}</a></td>{''.join(_cell_html(c) for c in r['cells'])}</tr>"
        for r in rows
    )


def _pager(run_id: str, query: TableQuery, matched: int) -> str:
    def link(offset: int, text: str, rel: str) -> str:
        params = _query_params(query) | {"offset": offset}
        return f'<a rel="{rel}" href="{esc(url("/run", id=run_id, **params))}">{text}</a>'

    parts = []
    if query.offset > 0:
        parts.append(link(max(0, query.offset - query.limit), "← previous", "prev"))
    if query.offset + query.limit < matched:
        parts.append(link(query.offset + query.limit, "next →", "next"))
    return f'<p id="pager" class="tools">{" ".join(parts)}</p>'


def _limits(chosen: int) -> str:
    sizes = sorted({10, 25, 50, 100, 200, MAX_PAGE, chosen})
    return "".join(
        f'<option value="{n}"{" selected" if n == chosen else ""}>{n}</option>' for n in sizes
    )


def _query_params(query: TableQuery) -> dict[str, Any]:
    return {
        "sort": None if query.sort == "id" else query.sort,
        "desc": "1" if query.desc else None,
        "q": query.q or None,
        "status": None if query.status == "all" else query.status,
        "metric": query.metric,
        "low": query.low,
        "high": query.high,
        "limit": None if query.limit == 50 else query.limit,
    }


def run_body(
    table: RunTable, result: Mapping[str, Any], query: TableQuery, previous: RunRecord | None
) -> list[str]:
    run = table.run
    out = [_meta(run)]
    if previous is not None:
        target = url("/compare", a=previous.run_id, b=run.run_id)
        out.append(
            f'<p><a id="vs-previous" href="{esc(target)}">Compare with the previous run of this '
            f"input ({esc(previous.run_id[:12])})</a></p>"
        )
    out.append("<h2>Summary</h2>" + _summary(run))
    rid = esc(run.run_id)
    metrics = table.metrics
    sort_opts = _options(["id", *metrics], query.sort)
    out.append('<h2 id="samples">Samples</h2>')
    out.append(
        f'<form id="sample-tools" class="tools" method="get" action="/run" data-run="{rid}">'
        f'<input type="hidden" name="id" value="{rid}">'
        f'<label>Search <input type="search" name="q" id="st-q" value="{esc(query.q)}" '
        'placeholder="sample id" size="24"></label>'
        f'<label>Show <select name="status" id="st-status">{_options(list(STATUSES), query.status)}'
        "</select></label>"
        f'<label>Sort by <select name="sort" id="st-sort">{sort_opts}</select></label>'
        f'<label><input type="checkbox" name="desc" value="1" id="st-desc"'
        f"{' checked' if query.desc else ''}> descending</label>"
        f'<label>Range of <select name="metric" id="st-metric">'
        f"{_options(metrics, query.metric, '—')}</select></label>"
        f'<label>from <input type="number" name="low" id="st-low" step="0.01" '
        f'value="{esc("" if query.low is None else query.low)}"></label>'
        f'<label>to <input type="number" name="high" id="st-high" step="0.01" '
        f'value="{esc("" if query.high is None else query.high)}"></label>'
        f'<label>Rows <select name="limit" id="st-limit">{_limits(query.limit)}</select></label>'
        '<button type="submit" id="st-apply">Apply</button></form>'
    )
    shown_to = min(result["matched"], query.offset + len(result["rows"]))
    out.append(
        f'<p id="st-count" class="muted" aria-live="polite">{result["matched"]} of '
        f"{result['total']} samples match; showing {query.offset + 1 if result['rows'] else 0}"
        f"–{shown_to}.</p>"
    )
    head = "".join(f'<th class="num" data-metric="{esc(m)}">{esc(m)}</th>' for m in metrics)
    out.append(
        '<div class="table-scroll"><table id="sample-table" class="explorer"><thead><tr>'
        f"<th>Sample</th>{head}</tr></thead><tbody>{table_rows(run.run_id, result['rows'])}"
        "</tbody></table></div>"
    )
    out.append(_pager(run.run_id, query, result["matched"]))
    out.append("<h2>Settings</h2>")
    out.append(f'<pre class="text" id="config">{esc(_json(run.config))}</pre>')
    out.append("<h2>Metadata</h2>")
    out.append(f'<pre class="text" id="metadata">{esc(_json(run.metadata))}</pre>')
    return out


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _previous_head(detail: Mapping[str, Any]) -> str:
    before = detail.get("previous_run")
    if not before:
        return ""
    link = url("/sample", run=before, id=detail["id"])
    return (
        f'<th class="num">In the previous run (<a id="previous" href="{esc(link)}">'
        f"{esc(before[:12])}</a>)</th>"
    )


def _previous_cell(cell: float | str | None) -> str:
    if isinstance(cell, float):
        return f'<td class="num previous">{cell:.3f}</td>'
    return f'<td class="num previous">{esc(cell or "—")}</td>'


def _sample_texts(record: Mapping[str, Any] | None) -> list[str]:
    """The sample as the store kept it: question, answer, reference, then its contexts."""
    if record is None:
        return [
            '<p class="muted" id="no-texts">The store kept no texts for this sample (a run '
            "recorded before store schema 3, or without its samples); they stay in the run's "
            "results file.</p>"
        ]
    out = ['<dl class="meta" id="sample-texts">']
    for name, label in (("question", "Question"), ("answer", "Answer"), ("reference", "Reference")):
        value = record.get(name)
        shown = "—" if value is None else str(value)
        out.append(f'<dt>{label}</dt><dd><pre class="text" id="{name}">{esc(shown)}</pre></dd>')
    out.append("</dl>")
    contexts = record.get("contexts") or []
    out.append(f'<h2 id="contexts-head">Contexts ({len(contexts)})</h2>')
    if record.get("cut"):
        total = record.get("contexts_total")
        more = f" of {esc(str(total))}" if total else ""
        out.append(
            f'<p class="muted" id="cut">Cut to keep the store small: the first {len(contexts)}'
            f"{more} contexts, each text at most 2,000 characters.</p>"
        )
    out.append('<ol id="contexts">')
    for c in contexts:
        cid = c.get("id") if isinstance(c, Mapping) else None
        text = c.get("text") if isinstance(c, Mapping) else c
        head = f'<span class="context-id">{esc(str(cid))}</span>' if cid is not None else ""
        out.append(f'<li>{head}<pre class="text">{esc(str(text))}</pre></li>')
    out.append("</ol>")
    return out


def _explanations(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each metric's reason and details (claims, verdicts) as the store kept them."""
    kept = [c for c in cells if c.get("reason") is not None or c.get("details") is not None]
    if not kept:
        return []
    out = ['<h2 id="explanations">Reasons and claims</h2>']
    for c in kept:
        out.append(f'<section class="explanation" data-metric="{esc(c["metric"])}">')
        out.append(f"<h3>{esc(c['metric'])}</h3>")
        if c.get("reason") is not None:
            out.append(f'<p class="reason">{esc(str(c["reason"]))}</p>')
        if c.get("details") is not None:
            out.append(f'<pre class="text details">{esc(_json(c["details"]))}</pre>')
        out.append("</section>")
    return out


def sample_body(run: RunRecord, detail: Mapping[str, Any]) -> list[str]:
    back = url("/run", id=run.run_id)
    out = [
        f'<p><a id="back" href="{esc(back)}">← run {esc(run.run_id[:16])}</a></p>',
        '<dl class="meta">'
        f'<dt>Sample</dt><dd id="sample-id">{esc(detail["id"])}</dd>'
        f"<dt>Run</dt><dd>{esc(run.run_id)}</dd><dt>Input</dt><dd>{esc(run.source or '—')}</dd>"
        "</dl>",
        *_sample_texts(detail.get("sample")),
        '<h2 id="scores">Scores</h2>',
        '<table id="cells"><thead><tr><th>Metric</th><th>Outcome</th><th class="num">Value</th>'
        '<th>Failure</th><th>Provider</th><th class="num">Run mean</th>'
        f"{_previous_head(detail)}</tr></thead><tbody>",
    ]
    for c in detail["cells"]:
        out.append(
            f'<tr class="{esc(c["status"])}" data-metric="{esc(c["metric"])}">'
            f"<td>{esc(c['metric'])}</td><td>{esc(c['status'])}</td>"
            f'<td class="num value">{number(c["value"])}</td>'
            f"<td>{esc(c['failure'] or '—')}</td><td>{esc(c['provider'] or '—')}</td>"
            f'<td class="num">{number(c["run_mean"] if isinstance(c["run_mean"], float | int) else None)}</td>'  # noqa: E501
            + (_previous_cell(c["previous"]) if detail.get("previous_run") else "")
            + "</tr>"
        )
    out.append("</tbody></table>")
    out.extend(_explanations(detail["cells"]))
    return out


# -- two runs -----------------------------------------------------------------------------------


def compare_body(
    runs: Sequence[RunRecord], result: Mapping[str, Any] | None, a: str | None, b: str | None
) -> list[str]:
    out = [
        '<form id="compare-form" class="tools" method="get" action="/compare">',
        f'<label>Run A <select name="a" id="cmp-a">{_run_options(runs, a)}</select></label>',
        f'<label>Run B <select name="b" id="cmp-b">{_run_options(runs, b)}</select></label>',
        '<button type="submit">Compare</button></form>',
    ]
    if result is None:
        out.append('<p class="muted">Choose two runs over the same samples.</p>')
        return out
    out.append(
        f'<p class="muted">B − A over the samples both scored (paired by id). 95% CI: paired '
        f"bootstrap ({N_RESAMPLES:,} resamples, seed {SEED}); p-value: paired permutation "
        "(sign-flip) test, two-sided — <code>ragbridge.core.compare</code> itself.</p>"
    )
    if result.get("error"):
        out.append(f'<p class="note" id="not-compared">Not compared: {esc(result["error"])}</p>')
        return out
    rows = []
    for metric, c in result["metrics"].items():
        lower = metric.split(":")[0] in LOWER_IS_BETTER
        cls = ""
        low, high, diff = c["ci_low"], c["ci_high"], c["diff"]
        if low is not None and high is not None and diff is not None and (low > 0 or high < 0):
            cls = " better" if (diff > 0) != lower else " worse"
        rows.append(
            f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
            f'<td class="num n-paired">{c["n_paired"]}</td>'
            f'<td class="num">{c["n_unpaired"]}</td>'
            f'<td class="num mean-a">{number(c["mean_a"])}</td>'
            f'<td class="num mean-b">{number(c["mean_b"])}</td>'
            f'<td class="num diff{cls}">{_signed(diff)}</td>'
            f'<td class="num ci">{ci_text(low, high, signed=True)}</td>'
            f'<td class="num p-value">{_p(c["p_value"])}</td></tr>'
        )
    out.append(
        '<table id="paired"><thead><tr><th>Metric</th><th class="num">Pairs</th>'
        '<th class="num">Unpaired</th><th class="num">A</th><th class="num">B</th>'
        '<th class="num">Diff</th><th class="num">95% CI</th><th class="num">p-value</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    out.append("<h2>Samples that moved most</h2>")
    for metric, moved in result.get("moved", {}).items():
        out.append(f'<h3 data-metric="{esc(metric)}">{esc(metric)}</h3>')
        if not moved:
            out.append('<p class="muted">No paired sample changed.</p>')
            continue
        lower = metric.split(":")[0] in LOWER_IS_BETTER
        items = []
        for m in moved:
            cls = "better" if (m["diff"] > 0) != lower else "worse"
            link = url("/sample", run=result["b"], id=m["id"])
            items.append(
                f'<tr data-sample="{esc(m["id"])}"><td><a href="{esc(link)}">{esc(m["id"])}</a>'
                f'</td><td class="num">{m["a"]:.3f}</td><td class="num">{m["b"]:.3f}</td>'
                f'<td class="num diff {cls}">{m["diff"]:+.3f}</td></tr>'
            )
        out.append(
            f'<table class="moved" data-metric="{esc(metric)}"><thead><tr><th>Sample</th>'
            '<th class="num">A</th><th class="num">B</th><th class="num">B − A</th></tr>'
            "</thead><tbody>" + "".join(items) + "</tbody></table>"
        )
    return out


# -- trends -------------------------------------------------------------------------------------


def _line_chart(points: Sequence[Mapping[str, Any]], metric: str) -> str:
    width, height, pad = 640, 180, 28
    xs = [pad + (width - 2 * pad) * (i / max(1, len(points) - 1)) for i in range(len(points))]

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * min(1.0, max(0.0, v))

    parts = [
        f'<svg class="trend" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(metric)} over runs">',
        f'<line class="axis" x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}"/>',
        f'<text x="2" y="{y(1) + 4}">1</text><text x="2" y="{y(0) + 4}">0</text>',
    ]
    line = [
        f"{x:.1f},{y(p['mean']):.1f}"
        for x, p in zip(xs, points, strict=True)
        if p["mean"] is not None
    ]
    if len(line) > 1:
        parts.append(f'<polyline class="series" points="{" ".join(line)}"/>')
    for x, p in zip(xs, points, strict=True):
        if p["mean"] is None:
            continue
        cls = "point"
        if p.get("change"):
            cls += " change " + ("worse" if p.get("worse") else "better")
        label = f"{p['run_id'][:12]} {when(p['timestamp'])} mean {p['mean']:.3f}"
        if p.get("change"):
            label += f" — changed {p['change']} (Δ {p['diff']:+.3f}, p {p['p_value']:.3g})"
        r = 6 if p.get("change") else 3.5
        parts.append(
            f'<circle class="{cls}" cx="{x:.1f}" cy="{y(p["mean"]):.1f}" r="{r}" '
            f'data-run="{esc(p["run_id"])}"><title>{esc(label)}</title></circle>'
        )
    parts.append("</svg>")
    return "".join(parts)


def trends_body(
    trends: Mapping[str, Sequence[Mapping[str, Any]]], sources: Sequence[str], source: str | None
) -> list[str]:
    out = [
        '<form id="trend-filter" class="tools" method="get" action="/trends">',
        f'<label>Input <select name="source">{_options(sources, source, "any")}</select></label>',
        '<button type="submit">Show</button></form>',
        '<p class="muted">Each run is set against the previous run of the same input over the '
        "samples both scored; a run is marked (▲ up, ▼ down; red when worse) when the mean "
        "paired difference is at least 0.03 and the paired permutation test gives p &lt; 0.05 — "
        "the rule of <code>ragbridge history</code>.</p>",
    ]
    if not trends:
        out.append('<p class="note">No run with metrics recorded yet.</p>')
    for metric, points in trends.items():
        out.append(f'<section class="metric-trend" data-metric="{esc(metric)}">')
        out.append(f"<h2>{esc(metric)}</h2><figure>{_line_chart(points, metric)}</figure>")
        rows = []
        for p in points:
            mark = ""
            if p.get("change"):
                arrow = "▲" if p["change"] == "up" else "▼"
                mark = f'<span class="{"bad" if p.get("worse") else "ok"}">{arrow}</span>'
            rows.append(
                f'<tr data-run="{esc(p["run_id"])}" class="{"changed" if p.get("change") else ""}">'
                f'<td><a href="{esc(url("/run", id=p["run_id"]))}">{esc(p["run_id"][:12])}</a></td>'
                f"<td>{when(p['timestamp'])}</td><td>{esc(p.get('branch') or '—')}</td>"
                f"<td><code>{_short(p.get('commit'))}</code></td>"
                f'<td class="num">{number(p["mean"])}</td>'
                f'<td class="num">{ci_text(p["ci_low"], p["ci_high"])}</td>'
                f'<td class="num">{_signed(p["diff"])}</td>'
                f'<td class="num">{_p(p["p_value"])}</td><td class="mark">{mark}</td></tr>'
            )
        out.append(
            '<table class="trend-table"><thead><tr><th>Run</th><th>When</th><th>Branch</th>'
            '<th>Commit</th><th class="num">Mean</th><th class="num">95% CI</th>'
            '<th class="num">Δ vs previous</th><th class="num">p</th><th></th></tr></thead>'
            "<tbody>" + "".join(rows) + "</tbody></table></section>"
        )
    return out


# -- production ---------------------------------------------------------------------------------


def _bucket_mean(bucket: Mapping[str, Any], metric: str) -> str:
    found = bucket["scores"].get(metric)
    return "—" if found is None else number(found["mean"])


def production_body(data: Mapping[str, Any]) -> list[str]:
    days = data["days"]
    choices = [
        ("1", "last day"),
        ("2", "last 2 days"),
        ("7", "last 7 days"),
        ("30", "last 30 days"),
        ("0", "all"),
    ]
    opts = "".join(
        f'<option value="{v}"{" selected" if float(v) == days else ""}>{t}</option>'
        for v, t in choices
    )
    out = [
        '<form id="prod-filter" class="tools" method="get" action="/production">',
        f'<label>Window <select name="days">{opts}</select></label>',
        '<button type="submit">Show</button></form>',
        f'<p id="prod-count">{data["requests"]} requests, {data["sampled"]} sampled for '
        "scoring.</p>",
    ]
    buckets = data["buckets"]
    metrics = sorted({m for b in buckets for m in b["scores"]})
    if buckets:
        span = "hour" if data["bucket_seconds"] == 3600 else "day"
        head = "".join(f'<th class="num">{esc(m)}</th>' for m in metrics)
        rows = []
        for b in buckets:
            cells = "".join(f'<td class="num">{_bucket_mean(b, m)}</td>' for m in metrics)
            rows.append(
                f'<tr><td>{when(b["start"])}</td><td class="num">{b["requests"]}</td>'
                f'<td class="num">{b["sampled"]}</td><td class="num">{b["errors"]}</td>{cells}</tr>'
            )
        out.append(
            f"<h2>Requests per {span}</h2>"
            '<table id="buckets"><thead><tr><th>From</th><th class="num">Requests</th>'
            '<th class="num">Sampled</th><th class="num">Errors</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    out.append("<h2>Alert episodes</h2>")
    if not data["episodes"]:
        out.append('<p class="muted" id="no-alerts">No alert in this window.</p>')
    else:
        rows = [
            f"<tr><td>{esc(e['signal'])}</td><td>{when(e['started'])}</td>"
            f"<td>{when(e['ended']) if e['ended'] is not None else 'active'}</td>"
            f"<td>{esc(e['message'])}</td></tr>"
            for e in data["episodes"]
        ]
        out.append(
            '<table id="episodes"><thead><tr><th>Signal</th><th>Fired</th><th>Resolved</th>'
            f"<th>Why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return out
