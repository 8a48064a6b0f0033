"""``ragbridge history``: a metric over the recorded runs, and which run changed it.

``ragbridge eval|run|langsmith|gate ... --history PATH`` records each run in the monitor store
PATH (opt-in: no environment variable turns it on behind the user's back). This command reads
them back::

    ragbridge history runs.sqlite [--metric M] [--source FILE] [--limit N] [--json]
    ragbridge history runs.sqlite --show RUN
    ragbridge history runs.sqlite --markdown [--baseline-branch main] [--data DATA.jsonl]

``--markdown`` prints a pull request's report (`ragbridge.adapters.cli.markdown_report`): the
newest run against the latest run of the baseline branch over the same input.

The table has one row per run (oldest first): id prefix, local time, commit (``*`` when the
working tree had uncommitted changes), command, outcome, samples, and each metric's mean ± half
its 95% CI; ``▲``/``▼`` marks a run that changed the metric against the previous run of the
same input file (paired permutation test over the samples both scored: ``p < --alpha`` and
``|Δ| >= --min-effect``), and a line under the table says which run, which commit, from what to
what. A store with no runs says so and exits 0; a ``--source`` or ``--metric`` that no run has
is a likely typo: exit 2, naming what the store holds.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import require_non_negative, require_open_share, whole_number
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.paths import SQLITE_HEADER, check_output
from ragbridge.adapters.cli.plural import plural
from ragbridge.adapters.cli.tables import aligned

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.monitoring import ResultsStore, RunRecord
    from ragbridge.core.monitoring.history import HistoryRow, MetricPoint

__all__ = ["add_history_option", "check_history", "open_store", "register", "store_name"]

DEFAULT_LIMIT = 20
NOT_SCORING = frozenset({"concurrency", "max_failed_share", "max_retries", "timeout", "cache"})
"""Settings that cannot move a score: not named as suspects when a metric changed."""


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "history",
        "Show the runs recorded in a monitor store (ragbridge eval/run/langsmith/"
        "gate ... --history PATH): per run its commit, outcome and each metric's mean ± half "
        "its 95% CI, oldest first; a run that changed a metric against the previous run of "
        "the same input (paired permutation test over the samples both scored, p < --alpha "
        "and a mean difference of at least --min-effect) is marked and named. Exit codes: 0 "
        "shown (also when no run is recorded yet), 2 bad arguments or store.",
    )
    parser.add_argument(
        "store",
        metavar="STORE",
        help="the monitor store: an SQLite file, or a postgresql://user@host/db URL",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="M",
        help="metric(s) to show, comma-separated or repeated (default: all)",
    )
    parser.add_argument("--source", metavar="FILE", help="only runs over this input file")
    parser.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show the last N runs (default {DEFAULT_LIMIT}; 0 for all)",
    )
    parser.add_argument("--show", metavar="RUN", help="one run's summary, config and metadata")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of the paired test between consecutive runs (default 0.05)",
    )
    parser.add_argument(
        "--min-effect",
        type=float,
        default=0.03,
        help="smallest mean difference called a change (default 0.03, as gate --max-drop)",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print Markdown for a pull request: the newest run (of --source) against the "
        "latest run of --baseline-branch over the same input, per metric and per question",
    )
    parser.add_argument(
        "--baseline-branch",
        default="main",
        metavar="BRANCH",
        help="the branch --markdown compares with (default main)",
    )
    parser.add_argument(
        "--data",
        metavar="DATA.jsonl",
        help="the samples the runs scored: --markdown shows their questions",
    )
    parser.set_defaults(handler=run_history)


def add_history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history",
        metavar="STORE",
        help="record this run (summary, settings, git commit and branch, every per-sample "
        "score) in the monitor store STORE: an SQLite file, created when missing, or a "
        "postgresql://user@host/db URL (the password is never printed); read it with "
        "ragbridge history STORE",
    )


_limit = whole_number(lambda n: n >= 0, "must be >= 0, got {value}")


# --------------------------------------------------------------------------- the store file


def check_history(
    path: str, flag: str = "--history", *, inputs: Sequence[Path] = ()
) -> Path | None:
    """``path`` can hold the monitor store: a writable new file, or an existing store.

    An existing SQLite file of another kind (the ``--cache``, a results database) is refused
    before anything is written to it: opening it as a store would add tables to it. A store
    URL (``postgresql://...``) is checked when it is opened: None.
    """
    from ragbridge.core.monitoring.store_api import is_store_url

    if is_store_url(path):
        return None
    target = check_output(path, flag, inputs=inputs)
    _probe(target, flag)
    return target


def _probe(target: Path, flag: str) -> None:
    if not target.exists():
        return
    try:
        with target.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UserError(f"{flag} {target}: cannot be read ({exc.strerror or exc})") from None
    name = f"{flag} {target}" if flag else str(target)
    if not head:
        return  # an empty file: a new store
    if head != SQLITE_HEADER:
        raise UserError(f"{name}: not a ragbridge monitor store (not an SQLite file)")
    import sqlite3

    try:
        conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UserError(f"{name}: not a ragbridge monitor store ({exc})") from None
    tables = {row[0] for row in rows}
    if tables and not {"meta", "runs", "run_scores"} <= tables:
        raise UserError(
            f"{name}: an SQLite file but not a ragbridge monitor store (it holds "
            f"{', '.join(sorted(tables))}); is it the --cache? name another file"
        )


def store_name(spec: str | Path) -> str:
    """A store as messages name it: a path as is, a URL without its password."""
    from ragbridge.core.cache.backend import redact_url

    return redact_url(str(spec))


def open_store(path: str | Path, flag: str = "--history") -> ResultsStore:
    """The store at ``path`` (an SQLite file, or a ``SCHEME://`` URL of an installed store);
    one that cannot be opened is one line naming the flag, never the URL's password."""
    import sqlite3

    from ragbridge.core.monitoring import StoreError
    from ragbridge.core.monitoring.store_api import open_store as open_spec

    where = store_name(path)
    try:
        return open_spec(path)
    except (StoreError, sqlite3.Error, OSError, ImportError, ValueError) as exc:
        text = str(exc)
        name = f"{flag} {where}" if flag else where
        known = text.startswith((where, f"store {where}"))
        raise UserError(text if known else f"{name}: {text}") from None


# --------------------------------------------------------------------------- the command


def run_history(args: argparse.Namespace) -> int:
    from ragbridge.core.monitoring.history import gate_runs, short_ids
    from ragbridge.core.monitoring.history import run_history as history_rows

    require_open_share("--alpha", args.alpha)
    require_non_negative("--min-effect", args.min_effect)
    path = _store_file(args.store)
    with open_store(path, "") as store:
        args.store = store_name(args.store)  # every message from here names it without a password
        runs = store.runs()
        ids = short_ids(r.run_id for r in runs)
        if args.show:
            return _show(store, args, ids)
        if not runs:
            return _empty(args, f"no runs recorded in {args.store} yet")
        source = _source(args, runs)
        if args.markdown:
            from ragbridge.adapters.cli.markdown_report import history_markdown

            console.say(history_markdown(store, args, runs, source).rstrip("\n"))
            return EXIT_OK
        everything = [r for r in runs if source in (None, r.source)]
        metrics = _metrics(args.metric, everything)
        rows = history_rows(
            store,
            metrics=metrics,
            source=source,
            limit=args.limit or None,
            alpha=args.alpha,
            min_effect=args.min_effect,
        )
    if not rows:
        return _empty(args, f"no run in {args.store} measured anything (only gate checks)")
    gates = gate_runs(everything)
    shown = metrics or list(dict.fromkeys(m for row in rows for m in row.points))
    if args.json:
        console.say(json.dumps(_json(args, rows, shown, gates, source), indent=2))
    else:
        console.say(*_table(args, rows, shown, gates, ids, source, everything))
    return EXIT_OK


def _store_file(store: str) -> Path | str:
    """The store the command reads: an existing monitor store (never created here), or a
    store URL as given."""
    from ragbridge.core.monitoring.store_api import is_store_url

    if is_store_url(store):
        return store
    path = Path(store)
    if not path.is_file():
        raise UserError(
            f"{store}: {'is a folder' if path.is_dir() else 'no such file'}; record runs "
            f"with ragbridge eval DATA.jsonl --history {store}"
        )
    _probe(path, "")
    return path


def _source(args: argparse.Namespace, runs: list[RunRecord]) -> str | None:
    """The recorded source ``--source`` names (as given, or by its file name), or None."""
    from ragbridge.core.monitoring.history import source_name

    if not args.source:
        return None
    sources = list(dict.fromkeys(r.source for r in runs if r.source))
    source = next((s for s in (args.source, source_name(args.source)) if s in sources), None)
    if source is None:
        raise UserError(
            f"--source {args.source}: no run of it in {args.store} (recorded sources: "
            f"{', '.join(sources) or 'none'})"
        )
    return source


def _empty(args: argparse.Namespace, text: str) -> int:
    if args.json:
        console.say(json.dumps({"store": args.store, "runs": []}, indent=2))
    else:
        console.say(f"{text}; record one with ragbridge eval DATA.jsonl --history {args.store}")
    return EXIT_OK


def _metrics(given: list[str], runs: list[RunRecord]) -> list[str] | None:
    names = [n.strip() for text in given for n in text.split(",") if n.strip()]
    if not names:
        return None
    known = list(dict.fromkeys(m for r in runs for m in r.summary))
    missing = [n for n in names if n not in known]
    if missing:
        raise UserError(
            f"--metric {', '.join(missing)}: no recorded run has it (they have: "
            f"{', '.join(known) or 'none'})"
        )
    return list(dict.fromkeys(names))


def _outcome(run: RunRecord, gates: dict[str, list[RunRecord]]) -> str:
    text = str(run.metadata.get("outcome") or "—")
    for gate in gates.get(run.run_id, []):
        text += f", gate {'✓' if gate.metadata.get('outcome') == 'passed' else '✗'}"
    return text


def _commit(run: RunRecord) -> str:
    if not run.commit:
        return "—"
    return run.commit[:7] + ("*" if run.metadata.get("git_dirty") else "")


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def _n(run: RunRecord) -> str:
    n = run.metadata.get("n_samples")
    if isinstance(n, int):
        return str(n)
    counts = [
        sum(int(s.get(k) or 0) for k in ("n_scored", "n_failed", "n_skipped"))
        for s in run.summary.values()
    ]
    return str(max(counts, default=0))


def _cell(point: MetricPoint | None) -> str:
    if point is None:
        return ""
    if point.mean is None:
        return "—"
    text = f"{point.mean:.3f}"
    if point.ci_low is not None and point.ci_high is not None:
        text += f" ±{(point.ci_high - point.ci_low) / 2:.3f}"
    if point.change is not None:
        text += " ▲" if point.change == "up" else " ▼"
    return text


def _table(
    args: argparse.Namespace,
    rows: list[HistoryRow],
    metrics: list[str],
    gates: dict[str, list[RunRecord]],
    ids: dict[str, str],
    source: str | None,
    everything: list[RunRecord],
) -> list[str]:
    """The runs as a table: a title line, a row per run, what the marks mean, the changes."""
    sources = list(dict.fromkeys(row.run.source or "—" for row in rows))
    many = len(sources) > 1
    where = source or (sources[0] if not many else f"{len(sources)} sources")
    total = sum(1 for r in everything if r.summary)
    shown = f"the last {len(rows)} of {total} runs" if len(rows) < total else plural(total, "run")
    head = ["run", "time", "commit", "command", "outcome", "n"]
    if many:
        head.insert(3, "source")
    table = [[*head, *metrics]]
    table += [_row(row, metrics, gates, ids, many) for row in rows]
    lines = [f"{args.store}: {shown} of {where}, oldest first", *aligned(table)]
    lines += [
        "mean ±half its 95% CI; ▲/▼ the run changed the metric against the previous run of its",
        f"source (paired test over the samples both scored: p < {args.alpha:g} and "
        f"|Δ| >= {args.min_effect:g})",
    ]
    if any(r.run.metadata.get("git_dirty") for r in rows):
        lines.append("* uncommitted changes in the working tree")
    changes = [(row, p) for row in rows for m in metrics if (p := row.points.get(m)) and p.change]
    if not changes:
        lines.append("no run changed a metric significantly")
    by_id = {r.run_id: r for r in everything}
    for row, point in changes:
        lines.append(_change_line(row.run, point, ids, by_id.get(point.previous_run_id or "")))
    return lines


def _row(
    row: HistoryRow,
    metrics: list[str],
    gates: dict[str, list[RunRecord]],
    ids: dict[str, str],
    many: bool,
) -> list[str]:
    """A run's cells: who, when, what, how it ended, then each metric (`_cell`)."""
    run = row.run
    cells = [ids.get(run.run_id, run.run_id), _when(run.timestamp), _commit(run),
             run.command, _outcome(run, gates), _n(run)]  # fmt: skip
    if many:
        cells.insert(3, run.source or "—")
    return [*cells, *(_cell(row.points.get(m)) for m in metrics)]


def _change_line(
    run: RunRecord, point: MetricPoint, ids: dict[str, str], previous: RunRecord | None
) -> str:
    """``▼ run 0190a3f2 (commit def5678) dropped faithfulness 0.842 → 0.771 (-0.071, worse;
    p=0.010, 50 samples in both) against run 0190a3e1 (commit abc1234); changed: judge ...``."""
    from ragbridge.core.monitoring.history import config_changes

    verb = "raised" if point.change == "up" else "dropped"
    mark = "▲" if point.change == "up" else "▼"
    before = point.previous_run_id or "?"
    then = _commit(previous) if previous is not None else (point.previous_commit or "—")[:7]
    line = (
        f"{mark} run {ids.get(run.run_id, run.run_id)} (commit {_commit(run)}) {verb} "
        f"{point.metric} {point.mean_before:.3f} → {point.mean_after:.3f} "
        f"({point.diff:+.3f}, {'worse' if point.worse else 'better'}; {_p(point.p_value)}, "
        f"{plural(point.n_paired, 'sample')} in both) against run {ids.get(before, before)} "
        f"(commit {then})"
    )
    if previous is not None:
        changed = config_changes(previous, run, point.metric, ignore=NOT_SCORING)
        if changed:
            line += "; changed: " + ", ".join(changed)
    return line


def _p(p: float | None) -> str:
    if p is None:
        return "no test"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _json(
    args: argparse.Namespace,
    rows: list[HistoryRow],
    metrics: list[str],
    gates: dict[str, list[RunRecord]],
    source: str | None,
) -> dict[str, Any]:
    out_rows = []
    for row in rows:
        run = row.run
        out_rows.append(
            {
                "run_id": run.run_id,
                "timestamp": run.timestamp,
                "command": run.command,
                "source": run.source,
                "commit": run.commit,
                "git_dirty": run.metadata.get("git_dirty"),
                "outcome": run.metadata.get("outcome"),
                "exit_code": run.metadata.get("exit_code"),
                "gates": [
                    {"run_id": g.run_id, "outcome": g.metadata.get("outcome")}
                    for g in gates.get(run.run_id, [])
                ],
                "metrics": {
                    m: row.points[m].model_dump(
                        mode="json",
                        exclude={"metric", "run_id", "timestamp", "command", "source", "commit"},
                    )
                    for m in metrics
                    if m in row.points
                },
            }
        )
    return {
        "store": args.store,
        "source": source,
        "metrics": metrics,
        "alpha": args.alpha,
        "min_effect": args.min_effect,
        "runs": out_rows,
    }


def _show(store: ResultsStore, args: argparse.Namespace, ids: dict[str, str]) -> int:
    try:
        run = store.run(args.show)
    except KeyError as exc:
        raise UserError(str(exc.args[0]) if exc.args else str(exc)) from None
    if args.json:
        console.say(json.dumps(run.model_dump(mode="json"), indent=2, sort_keys=True))
        return EXIT_OK
    skip = {"outcome", "exit_code", "checks", "results_run", "git_dirty", "metrics"}
    console.say(
        *_run_head(run, ids),
        *_summary_table(run.summary),
        *_keyed("config", run.config),
        *_keyed("metadata", {k: v for k, v in run.metadata.items() if k not in skip}),
    )
    return EXIT_OK


def _run_head(run: RunRecord, ids: dict[str, str]) -> list[str]:
    """What ran, when, on what, and how it ended; for a gate, the run it checked and its
    checks."""
    dirty = " (uncommitted changes)" if run.metadata.get("git_dirty") else ""
    lines = [
        f"run {run.run_id}",
        f"time     {_when(run.timestamp)}",
        f"command  {run.command}",
        f"source   {run.source or '—'}",
        f"commit   {run.commit or '—'}{dirty}",
        f"outcome  {run.metadata.get('outcome', '—')} (exit {run.metadata.get('exit_code', '—')})",
    ]
    checked = run.metadata.get("results_run")
    if isinstance(checked, str):
        lines.append(f"checked  run {ids.get(checked, checked)}")
    lines += [f"  {check}" for check in run.metadata.get("checks") or []]
    return lines


def _summary_table(summary: dict[str, dict[str, Any]]) -> list[str]:
    """A recorded summary, one metric a row: mean, CI, counts and provider."""
    if not summary:
        return []
    table = [["metric", "mean", "95% CI", "scored", "failed", "skipped", "provider"]]
    for metric, s in summary.items():
        mean, low, high = s.get("mean"), s.get("ci_low"), s.get("ci_high")
        table.append(
            [
                metric,
                "—" if mean is None else f"{mean:.3f}",
                "—" if low is None or high is None else f"[{low:.3f}, {high:.3f}]",
                str(s.get("n_scored", 0)),
                str(s.get("n_failed", 0)),
                str(s.get("n_skipped", 0)),
                str(s.get("provider") or "—"),
            ]
        )
    return aligned(table)


def _keyed(title: str, values: dict[str, Any]) -> list[str]:
    """``title`` and one ``  key: value`` line per entry, sorted; nothing when empty."""
    if not values:
        return []
    return [title, *(f"  {k}: {_value(v)}" for k, v in sorted(values.items()))]


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
