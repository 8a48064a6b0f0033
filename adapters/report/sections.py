"""The report's tables: metric summaries, the cross-framework comparison, judge agreement.

Each function returns the lines of one ``<section>``; every user-supplied text is escaped with
`esc`. A column that would be empty for the run (no failures, no judge calls) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragbridge.core.labels.agreement import AgreementTable, MetricAgreement, Statistic
from ragbridge.core.results.crosscheck import CrossComparison, MeasureComparison
from ragbridge.core.results.evaluation import MetricSummary, Usage

from .markup import ci_text, esc, integer, number

__all__ = ["agreement_section", "comparison_section", "summary_section", "usage_cell"]


def _failures(by_kind: Mapping[str, int]) -> str:
    if not by_kind:
        return "—"
    return ", ".join(f"{esc(kind)} {count}" for kind, count in sorted(by_kind.items()))


def usage_cell(usage: Usage) -> str:
    return f"{integer(usage.calls)} / {integer(usage.total_tokens)}"


def summary_section(summaries: Mapping[str, Mapping[str, MetricSummary]]) -> list[str]:
    out = ['<section id="summary"><h2>Metric summaries</h2>']
    out.append(
        '<p class="muted">Means are over scored cells only; a failed or skipped cell is '
        "counted, never averaged in as a low score. CI: seeded percentile bootstrap.</p>"
    )
    for name, summary in summaries.items():
        if len(summaries) > 1:
            out.append(f"<h3>{esc(name)}</h3>")
        kinds = any(s.failures_by_kind for s in summary.values())
        spent = any(s.usage.calls or s.usage.total_tokens for s in summary.values())
        out.append(f'<table class="summary" data-pipeline="{esc(name)}">')
        out.append(
            '<thead><tr><th>Metric</th><th class="num">Mean</th><th class="num">CI</th>'
            '<th class="num">Scored</th><th class="num">Failed</th><th class="num">Skipped</th>'
            + ("<th>Failures by kind</th>" if kinds else "")
            + ('<th class="num">Calls / tokens</th>' if spent else "")
            + "</tr></thead><tbody>"
        )
        for metric, s in summary.items():
            level = f"{s.confidence:.0%}"
            out.append(
                f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
                f'<td class="num mean">{number(s.mean)}</td>'
                f'<td class="num ci" title="{esc(level)} CI">{ci_text(s.ci_low, s.ci_high)}</td>'
                f'<td class="num scored">{s.n_scored}</td>'
                f'<td class="num failed">{s.n_failed}</td>'
                f'<td class="num skipped">{s.n_skipped}</td>'
                + (f'<td class="kinds">{_failures(s.failures_by_kind)}</td>' if kinds else "")
                + (f'<td class="num">{usage_cell(s.usage)}</td>' if spent else "")
                + "</tr>"
            )
        out.append("</tbody></table>")
    if len(summaries) > 1:
        out.append("<h3>Side by side</h3>")
        names = list(summaries)
        metrics: list[str] = []
        for summary in summaries.values():
            metrics.extend(m for m in summary if m not in metrics)
        head = "".join(f'<th class="num">{esc(n)}</th>' for n in names)
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
                    f'<td class="num">{number(col.mean)} {ci_text(col.ci_low, col.ci_high)}'
                    f'<br><span class="muted">{col.n_scored} scored, {col.n_failed} failed, '
                    f"{col.n_skipped} skipped</span></td>"
                )
            out.append(
                f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>{"".join(cells)}</tr>'
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return out


def _comparison_measure(m: MeasureComparison, anchors: Mapping[str, str], out: list[str]) -> None:
    out.append(f'<h3 data-measure="{esc(m.measure)}">{esc(m.measure)}</h3>')
    kinds = any(f.failures_by_kind for f in m.frameworks)
    spent = any(f.usage.calls or f.usage.total_tokens for f in m.frameworks)
    out.append(
        '<table class="frameworks"><thead><tr><th>Framework</th><th class="num">Mean</th>'
        '<th class="num">CI</th><th class="num">Scored</th><th class="num">Failed</th>'
        '<th class="num">Skipped</th>'
        + ("<th>Failures by kind</th>" if kinds else "")
        + ('<th class="num">Calls</th><th class="num">Tokens</th>' if spent else "")
        + "</tr></thead><tbody>"
    )
    for f in m.frameworks:
        out.append(
            f'<tr data-framework="{esc(f.framework)}"><td>{esc(f.framework)}</td>'
            f'<td class="num mean">{number(f.mean)}</td>'
            f'<td class="num ci">{ci_text(f.ci_low, f.ci_high)}</td>'
            f'<td class="num">{f.n_scored}</td><td class="num">{f.n_failed}</td>'
            f'<td class="num">{f.n_skipped}</td>'
            + (f"<td>{_failures(f.failures_by_kind)}</td>" if kinds else "")
            + (
                f'<td class="num">{integer(f.usage.calls)}</td>'
                f'<td class="num">{integer(f.usage.total_tokens)}</td>'
                if spent
                else ""
            )
            + "</tr>"
        )
    out.append("</tbody></table>")
    if m.pairs:
        notes = any(p.note for p in m.pairs)
        out.append(
            '<table class="pairs"><thead><tr><th>Pair</th><th class="num">n</th>'
            '<th class="num">Spearman</th><th class="num">Pearson</th>'
            '<th class="num">Mean |diff|</th>'
            + ("<th>Note</th>" if notes else "")
            + "</tr></thead><tbody>"
        )
        for p in m.pairs:
            rho = "—" if p.spearman is None else f"{p.spearman:+.2f}"
            r = "—" if p.pearson is None else f"{p.pearson:+.2f}"
            out.append(
                f'<tr><td>{esc(p.a)} vs {esc(p.b)}</td><td class="num">{p.n}</td>'
                f'<td class="num spearman">{rho}</td><td class="num pearson">{r}</td>'
                f'<td class="num mad">{number(p.mean_abs_diff)}</td>'
                + (f"<td>{esc(p.note or '')}</td>" if notes else "")
                + "</tr>"
            )
        out.append("</tbody></table>")
    if m.disagreements:
        fws = [f.framework for f in m.frameworks]
        head = "".join(f"<th>{esc(fw)}</th>" for fw in fws)
        out.append(
            f'<h4>Top disagreements</h4><table class="disagreements"><thead><tr><th>Sample</th>'
            f'<th class="num">Spread</th>{head}</tr></thead><tbody>'
        )
        for d in m.disagreements:
            cells = []
            for fw in fws:
                value = d.values.get(fw)
                reason = d.reasons.get(fw, "")
                shown = "not scored" if fw not in d.values else number(value)
                cells.append(
                    f'<td><strong>{shown}</strong><div class="muted">{esc(reason)}</div></td>'
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
                f"<tr><td>{_sample_link(ec.sample_id, anchors)}</td><td>{esc(ec.kind)}</td>"
                f"<td>{esc(ec.description)}</td></tr>"
            )
        out.append("</tbody></table>")


def _sample_link(sample_id: str, anchors: Mapping[str, str]) -> str:
    anchor = anchors.get(sample_id)
    if anchor is None:
        return esc(sample_id)
    return f'<a href="#{anchor}">{esc(sample_id)}</a>'


def comparison_section(comparison: CrossComparison, anchors: Mapping[str, str]) -> list[str]:
    out = ['<section id="comparison"><h2>Cross-framework comparison</h2>']
    judge = f", judge {esc(comparison.judge_model)}" if comparison.judge_model else ""
    out.append(
        f'<p class="muted">{comparison.n_samples} samples, {len(comparison.measures)} '
        f"measures compared{judge}. Correlations are over the samples both frameworks "
        "scored.</p>"
    )
    for note in comparison.notes:
        out.append(f'<p class="note">{esc(note)}</p>')
    for m in comparison.measures:
        _comparison_measure(m, anchors, out)
    if comparison.skipped:
        out.append(
            '<h3>Not run</h3><table class="skipped-pairs"><thead><tr><th>Framework</th>'
            "<th>Measure</th><th>Why</th></tr></thead><tbody>"
        )
        for s in comparison.skipped:
            out.append(
                f"<tr><td>{esc(s.framework)}</td><td>{esc(s.measure)}</td>"
                f"<td>{esc(s.reason)}</td></tr>"
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return out


# --------------------------------------------------------------------------- judge agreement


def _stat(stat: Statistic) -> str:
    """A statistic's cell: the value and its CI, or "undefined" with the reason on hover."""
    if stat.value is None:
        return f'<span class="muted" title="{esc(stat.undefined)}">undefined</span>'
    text = f"{stat.value:.3f}"
    if stat.ci_low is not None and stat.ci_high is not None:
        text += f' <span class="muted">{ci_text(stat.ci_low, stat.ci_high)}</span>'
    return text


def _agreement_row(row: MetricAgreement) -> str:
    default = row.default
    best = row.best
    kappa0 = _stat(default.kappa) if default else _stat(Statistic.missing(row.best_undefined or ""))
    if best is not None:
        kappa_best = f"{_stat(best.kappa)} at {best.threshold:.3g}"
        balanced = _stat(best.balanced_accuracy)
        confusion_best = esc(best.confusion.text())
    else:
        why = row.best_undefined or "no threshold"
        kappa_best = f'<span class="muted" title="{esc(why)}">undefined</span>'
        balanced = confusion_best = "—"
    balanced0 = _stat(default.balanced_accuracy) if default else "—"
    lost = f"{row.n_failed} failed, {row.n_skipped} skipped, {row.n_missing} missing"
    return (
        f'<tr data-metric="{esc(row.label)}"><td>{esc(row.label)}</td><td>{esc(row.question)}</td>'
        f'<td class="num n">{row.n}</td><td class="num">{row.n_labels}</td>'
        f'<td class="num kappa-default">{kappa0}</td>'
        f'<td class="num">{balanced0}</td>'
        f'<td class="num kappa-best">{kappa_best}</td><td class="num">{balanced}</td>'
        f'<td class="num spearman">{_stat(row.spearman)}</td>'
        f'<td class="num auroc">{_stat(row.auroc)}</td>'
        f'<td class="num confusion">{esc(default.confusion.text()) if default else "—"}</td>'
        f'<td class="num">{confusion_best}</td><td class="muted">{esc(lost)}</td></tr>'
    )


def agreement_section(table: AgreementTable) -> list[str]:
    """Each judge metric against the people's labels of the same samples (`judge_agreement`)."""
    out = ['<section id="agreement"><h2>Judge agreement with people</h2>']
    source = "; ".join(f"{k}: {v}" for k, v in table.source.items())
    out.append(
        f'<p class="muted">{table.labelled_samples} labelled samples, {table.labels} labels by '
        f"{table.annotators} annotator(s){'; ' + esc(source) if source else ''}. Positive = the "
        "people's yes (the row's question); the judge says yes when its score is above the "
        f"threshold ({table.default_threshold:g} by default), below it for a measure of harm "
        f"(hallucination). Best threshold: {esc(table.best_by)}. Ties: {esc(table.ties)}. "
        f"CIs: {table.confidence:.0%} percentile bootstrap, {table.n_resamples} resamples, "
        f"seed {table.seed}.</p>"
    )
    out.extend(f'<p class="note">{esc(note)}</p>' for note in table.notes)
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
            items = "".join(f"<li>{esc(line)}</li>" for line in lines)
            details.append(
                f'<li data-metric="{esc(row.label)}">{esc(row.label)}<ul>{items}</ul></li>'
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
                f'<tr><td>{esc(p.question)}</td><td class="num">{p.samples}</td>'
                f'<td class="num">{p.annotators}</td><td class="num">{_stat(p.alpha)}</td>'
                f'<td class="num">{_stat(p.kappa)}</td><td class="num">{p.kappa_pairs}</td></tr>'
            )
        out.append("</tbody></table>")
    if table.not_compared:
        items = "".join(
            f"<li>{esc(metric)}: {esc(why)}</li>" for metric, why in table.not_compared.items()
        )
        out.append(f'<p class="muted">Not compared:</p><ul class="not-compared">{items}</ul>')
    out.append("</section>")
    return out
