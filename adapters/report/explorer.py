"""The sample explorer and the paired comparison of two runs.

The explorer is a table of every sample — id, question, one column per metric — that the page's
script sorts, filters and searches; a row opens the sample's drill-down. With two or more runs
it also shows two of them side by side on one metric, per question, with the paired difference.
Its data travels as JSON in a ``<script type="application/json">`` element (not executed, read
with ``textContent``), escaped by `json_for_script`; the script builds every cell with
``textContent``, so no user text is ever parsed as markup.

The paired comparison is `ragbridge.core.results.stats.compare` of each run against the first (the
same numbers ``ragbridge demo`` prints): mean difference over the samples both runs scored, its
paired bootstrap CI and the paired permutation p-value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import Comparison, compare
from ragbridge.core.sample import Sample

from .markup import LOWER_IS_BETTER, ci_text, esc, json_for_script, number, sample_anchor

__all__ = [
    "explorer_data",
    "explorer_section",
    "paired_comparisons",
    "paired_section",
    "shown_metrics",
]

#: Resamples and seed of the paired comparison: `compare`'s defaults, as the CLI prints them.
N_RESAMPLES = 10_000
SEED = 0


def shown_metrics(ev: Evaluation) -> tuple[list[str], list[str]]:
    """(metrics with a column, metrics left out): a metric gets a column when at least one
    sample has a value or a failure for it; one skipped (or absent) everywhere has nothing to
    show."""
    shown: list[str] = []
    hidden: list[str] = []
    for metric in ev.metrics:
        cells = ev.column(metric).values()
        (shown if any(s.status != "skipped" for s in cells) else hidden).append(metric)
    return shown, hidden


def _cell(score: Score | None) -> float | str | None:
    """A cell for the script: the value, ``"failed (kind)"``, ``"skipped"``, or None (absent)."""
    if score is None:
        return None
    if score.failure is not None:
        return f"failed ({score.failure.kind.value})"
    if score.value is None:
        return "skipped"
    return score.value


def explorer_data(
    pipelines: Mapping[str, Evaluation],
    index: Mapping[str, Mapping[str, Sample]],
    order: Mapping[str, Sequence[str]],
    comparisons: Mapping[str, Mapping[str, Comparison] | str],
) -> dict[str, Any]:
    """What the explorer's script reads: pipelines, their metric columns, the pairs of runs it
    can put side by side (each opens on its metric with the smallest p-value) and one row per
    sample id."""
    names = list(pipelines)
    shown = {name: shown_metrics(ev) for name, ev in pipelines.items()}
    metrics = {name: cols for name, (cols, _) in shown.items()}
    ids = list(dict.fromkeys(sid for name in names for sid in order[name]))
    members = {name: set(order[name]) for name in names}
    rows: list[dict[str, Any]] = []
    for sid in ids:
        question = next((index[n][sid].question for n in names if sid in index[n]), None)
        runs: dict[str, Any] = {}
        answers: list[str] = []
        for name, ev in pipelines.items():
            if sid not in members[name]:
                continue
            sample = index[name].get(sid)
            if sample is not None and sample.answer and sample.answer not in answers:
                answers.append(sample.answer)
            runs[name] = {
                "anchor": sample_anchor(sid, name),
                "cells": [_cell(ev.get(sid, m)) for m in metrics[name]],
            }
        rows.append({"id": sid, "q": question, "answers": answers, "runs": runs})
    all_metrics = list(dict.fromkeys(m for name in names for m in metrics[name]))
    return {
        "pipelines": names,
        "metrics": metrics,
        "lowerBetter": [m for m in all_metrics if m.split(":")[0] in LOWER_IS_BETTER],
        "pairs": [
            {"a": names[0], "b": other, "metric": _most_changed(comparisons.get(other))}
            for other in names[1:]
        ],
        "hasQuestions": any(r["q"] is not None for r in rows),
        "rows": rows,
    }


def explorer_section(data: Mapping[str, Any], hidden: Mapping[str, Sequence[str]]) -> list[str]:
    """The explorer's controls, its empty table (the script fills it) and its data block."""
    out = ['<section id="explorer"><h2>Sample explorer</h2>']
    n = len(data["rows"])
    out.append(
        f'<p class="muted">{n} sample{"s" if n != 1 else ""}. Click a column header to sort, '
        "a row to open the sample. Failed and skipped cells sort last; a failure is never a "
        "low score.</p>"
    )
    out.append(
        '<p class="note" id="explorer-nojs">The sample explorer needs JavaScript; every sample '
        'is listed under <a href="#samples">Samples</a>.</p>'
    )
    for name, metrics in hidden.items():
        if metrics:
            where = f" in {esc(name)}" if len(hidden) > 1 else ""
            out.append(
                f'<p class="muted hidden-metrics">No column{where} for '
                f"{esc(', '.join(metrics))}: skipped on every sample.</p>"
            )
    out.append(
        '<form id="explorer-tools" class="tools" hidden>'
        '<label id="ex-view-label">View <select id="ex-view"></select></label>'
        '<label id="ex-metric-label">Metric <select id="ex-metric"></select></label>'
        '<label>Search <input type="search" id="ex-search" '
        'placeholder="question, answer or id" size="28"></label>'
        '<label>Show <select id="ex-status">'
        '<option value="all">all samples</option>'
        '<option value="failed">with a failed cell</option>'
        '<option value="skipped">with a skipped cell</option>'
        '<option value="scored">fully scored</option>'
        '<option value="changed" id="ex-changed">scored differently by the two runs</option>'
        "</select></label>"
        '<label>Range of <select id="ex-range-col"></select></label>'
        '<label>from <input type="number" id="ex-min" step="0.01" size="5"></label>'
        '<label>to <input type="number" id="ex-max" step="0.01" size="5"></label>'
        '<button type="reset" id="ex-reset">Clear</button>'
        "</form>"
    )
    out.append('<p id="ex-count" class="muted" aria-live="polite"></p>')
    out.append(
        '<div class="table-scroll"><table id="ex-table" class="explorer">'
        "<thead></thead><tbody></tbody></table></div>"
    )
    out.append(
        f'<script type="application/json" id="explorer-data">{json_for_script(data)}</script>'
    )
    out.append("</section>")
    return out


def _most_changed(result: Mapping[str, Comparison] | str | None) -> str | None:
    """The metric whose paired difference is the least likely to be noise (smallest p)."""
    if not isinstance(result, Mapping):
        return None
    tested = [(c.p_value, i, m) for i, (m, c) in enumerate(result.items()) if c.p_value is not None]
    return min(tested)[2] if tested else None


def paired_comparisons(
    pipelines: Mapping[str, Evaluation],
) -> dict[str, Mapping[str, Comparison] | str]:
    """Each run after the first → `compare` (first, run) by metric, or why it cannot be."""
    names = list(pipelines)
    out: dict[str, Mapping[str, Comparison] | str] = {}
    for other in names[1:]:
        try:
            out[other] = compare(
                pipelines[names[0]], pipelines[other], n_resamples=N_RESAMPLES, seed=SEED
            )
        except ValueError as exc:
            out[other] = str(exc)
    return out


def _p_value(p: float | None) -> str:
    if p is None:
        return "—"
    return "&lt; 0.001" if p < 0.001 else f"{p:.3f}"


def _comparison_rows(base: str, other: str, pair: int, result: Mapping[str, Comparison]) -> str:
    unpaired = any(c.n_unpaired for c in result.values())
    head = (
        '<thead><tr><th>Metric</th><th class="num">Pairs</th>'
        + ('<th class="num">Unpaired</th>' if unpaired else "")
        + f'<th class="num">{esc(base)}</th><th class="num">{esc(other)}</th>'
        '<th class="num">Diff</th><th class="num">95% CI</th><th class="num">p-value</th>'
        "<th></th></tr></thead>"
    )
    rows = []
    for metric, c in result.items():
        lower = metric.split(":")[0] in LOWER_IS_BETTER
        cls = ""
        settled = c.ci_low is not None and c.ci_high is not None and (c.ci_low > 0 or c.ci_high < 0)
        if settled and c.diff is not None:
            cls = " better" if (c.diff > 0) != lower else " worse"
        diff = "—" if c.diff is None else f"{c.diff:+.3f}"
        rows.append(
            f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
            f'<td class="num n-paired">{c.n_paired}</td>'
            + (f'<td class="num">{c.n_unpaired}</td>' if unpaired else "")
            + f'<td class="num mean-a">{number(c.mean_a)}</td>'
            f'<td class="num mean-b">{number(c.mean_b)}</td>'
            f'<td class="num diff{cls}">{diff}</td>'
            f'<td class="num ci">{ci_text(c.ci_low, c.ci_high, signed=True)}</td>'
            f'<td class="num p-value">{_p_value(c.p_value)}</td>'
            f'<td><a href="#explorer" class="per-question" data-pair="{pair}" '
            f'data-metric="{esc(metric)}">per question</a></td></tr>'
        )
    return f"{head}<tbody>{''.join(rows)}</tbody>"


def paired_section(
    names: Sequence[str], comparisons: Mapping[str, Mapping[str, Comparison] | str]
) -> list[str]:
    """Each run against the first, metric by metric, over the samples both scored."""
    base = names[0]
    out = ['<section id="paired"><h2>Paired comparison</h2>']
    out.append(
        '<p class="muted">Samples are paired by id; a sample scored in only one run is left '
        "out (counted as unpaired), so a difference is the systems', not the samples'. Diff = "
        f"second − first run; 95% CI: paired bootstrap ({N_RESAMPLES:,} resamples, seed {SEED}); "
        "p-value: paired permutation (sign-flip) test, two-sided. Coloured when the CI excludes "
        "0.</p>"
    )
    for pair, other in enumerate(names[1:]):
        out.append(
            f'<h3 data-pair="{pair}">{esc(other)} vs {esc(base)} '
            '<span class="muted">(paired over the samples both scored)</span></h3>'
        )
        result = comparisons[other]
        if isinstance(result, str):
            out.append(f'<p class="note">Not compared: {esc(result)}</p>')
        elif not result:
            out.append('<p class="note">Not compared: the two runs share no metric.</p>')
        else:
            out.append(
                f'<table class="paired" data-a="{esc(base)}" data-b="{esc(other)}">'
                f"{_comparison_rows(base, other, pair, result)}</table>"
            )
    out.append("</section>")
    return out
