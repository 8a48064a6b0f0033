"""The Markdown a pull request shows: this run against a baseline, per metric and per question.

``ragbridge gate ... --markdown`` and ``ragbridge history STORE --markdown`` print it for a CI job
to post as a comment or a job summary. The numbers are `ragbridge.core.results.stats.compare`'s
(paired over the samples both runs scored) and each metric's verdict is the one the command
itself reaches (the gate's rule, or the history's), handed in here: this module lays them out
and adds nothing to the statistics.

Everything that comes from the data (metric names, sample ids, questions, file names, run ids) is
text to show, never markup: a question holding ``|`` would split a table row, ``<img
onerror=...>`` would be HTML, ``@someone`` would notify someone, ``#12`` would link an issue.
`escape` turns each datum into one line of inert text; long questions are cut short.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from ragbridge.core.monitoring import RunRecord, ScoreCell
    from ragbridge.core.monitoring.store_api import ResultsStore
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.stats import Comparison

__all__ = [
    "MAX_QUESTION",
    "TOP_REGRESSIONS",
    "MetricRow",
    "Regression",
    "escape",
    "evaluation_of",
    "history_markdown",
    "latest_run",
    "questions_of",
    "regressions",
    "render",
]

MAX_QUESTION = 120
"""Characters of a question shown in the table of regressions; longer ones end in ``…``."""
TOP_REGRESSIONS = 5
"""How many (sample, metric) pairs the table of regressions shows: the largest drops."""

# Line breaks of every kind and the other control characters: a datum is one line of a table.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# ASCII punctuation CommonMark/GFM reads as markup inside a line (emphasis, code, links,
# tables, strikethrough, autolinks' brackets); a backslash makes each one literal.
_PUNCTUATION = re.compile(r"([\\`*_\[\]|~(){}!#+-])")
# GitHub turns @name into a notification and #12 (also owner/repo#12) into a link and a
# back-reference in that issue; a zero-width space after the sign (as an entity) keeps the text,
# not the effect. An @ after a letter or digit (recall@4, an e-mail address) mentions no one.
_MENTION = re.compile(r"((?<!\w)@|#)(?=[\w-])")


def escape(value: object, limit: int | None = None) -> str:
    """``value`` as inert Markdown text on one line.

    Line breaks and control characters become one space; the text is cut to ``limit``
    characters (ending in ``…``) before escaping, so no escape is cut in half; ``&``, ``<`` and
    ``>`` become entities (no HTML, no entity of the data's own survives as markup); Markdown
    punctuation is backslash-escaped (``|`` cannot end a table cell); ``@`` and ``#`` before a
    word cannot mention anyone or link an issue.
    """
    text = _BREAKS.sub(" ", str(value)).strip()
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)].rstrip() + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCTUATION.sub(r"\\\1", text)
    return _MENTION.sub(r"\1&#8203;", text)


@dataclass(frozen=True)
class MetricRow:
    """One metric of the table: the comparison and the command's verdict on it."""

    metric: str
    comparison: Comparison
    verdict: str
    """What the command concluded, with its mark (``✗ more than the allowed drop 0.030 and
    significant``); shown as given (it is the command's own wording, not data)."""


@dataclass(frozen=True)
class Regression:
    """One sample that scored worse on one metric than in the baseline."""

    sample_id: str
    metric: str
    before: float
    after: float
    worse_by: float
    """How much worse, in the metric's bad direction (> 0)."""


def regressions(
    base: Evaluation,
    current: Evaluation,
    metrics: Iterable[str],
    higher_is_better: Callable[[str], bool],
    *,
    top: int = TOP_REGRESSIONS,
) -> list[Regression]:
    """The ``top`` (sample, metric) pairs that got worse the most, over the samples scored in
    both runs: largest drop first, then metric order, then sample id (a stable order for a
    report that is diffed and re-posted)."""
    found: list[tuple[float, int, str, Regression]] = []
    for rank, metric in enumerate(metrics):
        up = higher_is_better(metric)
        ids_a, vals_a = base.values(metric)
        ids_b, vals_b = current.values(metric)
        before = dict(zip(ids_a, vals_a.tolist(), strict=True))
        for sample_id, after in zip(ids_b, vals_b.tolist(), strict=True):
            if sample_id not in before:
                continue
            was = before[sample_id]
            worse = (was - after) if up else (after - was)
            if worse > 0:  # ranked at 1e-9: 0.9 - 0.5 and 1.0 - 0.6 are one drop, not two
                key = -round(worse, 9)
                found.append(
                    (key, rank, sample_id, Regression(sample_id, metric, was, after, worse))
                )
    found.sort(key=lambda item: item[:3])
    return [item[3] for item in found[:top]]


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ci(c: Comparison) -> str:
    if c.ci_low is None or c.ci_high is None:
        return "—"
    return f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"


def _table(rows: Sequence[MetricRow], confidence: str) -> list[str]:
    lines = [
        f"| metric | baseline | this run | difference | {confidence} CI | p | n | verdict |",
        "|:--|--:|--:|--:|:-:|--:|--:|:--|",
    ]
    for row in rows:
        c = row.comparison
        diff = "—" if c.diff is None else f"{c.diff:+.3f}"
        p = "—" if c.p_value is None else f"{c.p_value:.3f}"
        lines.append(
            f"| {escape(row.metric)} | {_number(c.mean_a)} | {_number(c.mean_b)} | {diff} | "
            f"{_ci(c)} | {p} | {c.n_paired} | {row.verdict} |"
        )
    return lines


def _regression_lines(found: Sequence[Regression], questions: Mapping[str, str]) -> list[str]:
    if not found:
        return ["No sample scored worse than in the baseline."]
    lines = [
        "| sample | question | metric | baseline | this run | change |",
        "|:--|:--|:--|--:|--:|--:|",
    ]
    for r in found:
        question = questions.get(r.sample_id)
        shown = "—" if question is None else escape(question, MAX_QUESTION)
        lines.append(
            f"| {escape(r.sample_id, MAX_QUESTION)} | {shown} | {escape(r.metric)} | "
            f"{r.before:.3f} | {r.after:.3f} | {r.after - r.before:+.3f} |"
        )
    return lines


def render(
    verdict: str,
    compared: str,
    rows: Sequence[MetricRow],
    found: Sequence[Regression],
    *,
    questions: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    checks: Sequence[str] = (),
    confidence: str = "95%",
) -> str:
    """The report: the one-line verdict (bold), what was compared, the metric table, the
    command's other checks (escaped, one bullet each), then the largest regressions by question.

    ``verdict``, ``compared`` and ``notes`` are the command's own wording; the caller escapes
    any datum it puts in them (`escape`).
    """
    lines = [f"**{verdict}**", "", compared, ""]
    lines += _table(rows, confidence)
    lines += ["", *notes] if notes else []
    if checks:
        lines += ["", "Other checks:", "", *(f"- {escape(check)}" for check in checks)]
    lines += ["", "#### The largest regressions by question", ""]
    lines += _regression_lines(found, questions or {})
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- inputs


def questions_of(path: str | None) -> dict[str, str]:
    """Each sample id's question, from the samples file the runs scored (none without one)."""
    if not path:
        return {}
    from ragbridge.adapters.cli.options import read_samples

    return {s.id: s.question for s in read_samples(path)}


def evaluation_of(
    cells: Iterable[tuple[str, str, ScoreCell]], metrics: Sequence[str] = ()
) -> Evaluation:
    """A recorded run's cells as an `Evaluation`, so `compare` reads a stored baseline exactly
    as it reads a results file: a value is a scored cell, a failure a failed one (its kind
    kept), a skipped cell skipped. The metrics come in the order of ``metrics`` (the one the
    report shows), not the store's sorted one."""
    from ragbridge.core.results.evaluation import Evaluation, FailureKind, Score

    kinds = {kind.value for kind in FailureKind}
    rank = {name: i for i, name in enumerate(metrics)}
    out = Evaluation()
    for sample_id, metric, cell in sorted(cells, key=lambda c: rank.get(c[1], len(rank))):
        if cell.value is not None:
            score = Score(value=cell.value)
        elif cell.failure is not None:
            kind = cell.failure if cell.failure in kinds else FailureKind.INVALID_OUTPUT.value
            score = Score.fail(kind, f"recorded as {cell.failure}")
        else:
            score = Score.skip("recorded as skipped")
        out.add(sample_id, metric, score)
    return out


def latest_run(
    runs: Iterable[RunRecord],
    branch: str,
    *,
    source: str | None = None,
    exclude: str | None = None,
) -> RunRecord | None:
    """The latest recorded run of ``branch`` that measured something (not a gate's record),
    over ``source`` when given, other than the run ``exclude``."""
    chosen = [
        r
        for r in runs
        if r.branch == branch
        and r.command != "gate"
        and r.summary
        and r.run_id != exclude
        and (source is None or r.source == source)
    ]
    return max(chosen, key=lambda r: (r.timestamp, r.run_id), default=None)


# --------------------------------------------------------------------------- history --markdown


def history_markdown(
    store: ResultsStore, args: argparse.Namespace, runs: Sequence[RunRecord], source: str | None
) -> str:
    """``ragbridge history STORE --markdown``: the newest run that measured something (of
    ``source`` when given) against the latest other run of ``--baseline-branch`` over the same
    input, by the history's rule (a change is ``|Δ| >= --min-effect`` with ``p < --alpha``)."""
    from ragbridge.adapters.cli.errors import UserError
    from ragbridge.core.monitoring.history import higher_is_better
    from ragbridge.core.results.stats import compare

    measured = [r for r in runs if r.command != "gate" and r.summary]
    measured = [r for r in measured if source in (None, r.source)]
    if not measured:
        raise UserError(f"{args.store}: no recorded run measured anything to compare")
    current = max(measured, key=lambda r: (r.timestamp, r.run_id))
    branch = args.baseline_branch
    base = latest_run(runs, branch, source=current.source, exclude=current.run_id)
    if base is None:
        over = f" over {current.source}" if current.source else ""
        raise UserError(
            f"{args.store}: no other run of branch {branch}{over} is recorded to compare run "
            f"{current.run_id} with; record one on {branch} (ragbridge eval ... --history)"
        )
    names = [n.strip() for text in args.metric for n in text.split(",") if n.strip()]
    before = evaluation_of(store.run_cells(base.run_id), list(base.summary))
    after = evaluation_of(store.run_cells(current.run_id), list(current.summary))
    try:
        comparisons = compare(before, after, metrics=names or None)
    except ValueError as exc:
        text = f"cannot compare run {current.run_id} with run {base.run_id}: {exc}"
        raise UserError(text) from None
    rows: list[MetricRow] = []
    worse = better = 0
    for name, c in comparisons.items():
        if c.diff is None:
            rows.append(MetricRow(name, c, "? no sample scored in both runs"))
            continue
        changed = c.p_value is not None and c.p_value < args.alpha
        changed = changed and abs(c.diff) >= args.min_effect
        down = (c.diff < 0) == higher_is_better(name)
        worse += changed and down
        better += changed and not down
        verdict = ("▼ worse" if down else "▲ better") if changed else "no significant change"
        rows.append(MetricRow(name, c, verdict))
    if worse:
        verdict = f"▼ {worse} metric{'s' if worse > 1 else ''} worse than {branch}"
    else:
        verdict = f"✓ no metric worse than {branch}"
    if better:
        verdict += f", {better} better"
    compared = (
        f"This run: {_run_name(current)}; baseline: {_run_name(base)}. Paired over the "
        f"samples both scored; a change is a mean difference of at least "
        f"{args.min_effect:.3f} that the paired permutation test finds significant "
        f"(p &lt; {args.alpha:g})."
    )
    found = regressions(
        before, after, [r.metric for r in rows if r.comparison.diff is not None], higher_is_better
    )
    return render(escape(verdict), compared, rows, found, questions=questions_of(args.data))


def _run_name(run: RunRecord) -> str:
    """``run 0190a3f2c4e19b2d4f10 (branch main, commit abc1234) over eval.jsonl``, escaped."""
    facts = [f"branch {escape(run.branch)}" if run.branch else "no branch recorded"]
    if run.commit:
        facts.append(f"commit {escape(run.commit[:7])}")
    over = f" over {escape(run.source)}" if run.source else ""
    return f"run {escape(run.run_id)} ({', '.join(facts)}){over}"
