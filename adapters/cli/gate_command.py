"""``ragbridge gate``: fail CI on a missed threshold or a significant regression.

A mean below a fixed threshold fails. Against a baseline, a drop fails only when it is larger
than ``--max-drop`` *and* a paired permutation test over the samples both runs scored says it is
unlikely to be noise (p < ``--alpha``): small eval sets jitter, and a gate that cries wolf gets
switched off. Each line says what was required and what was found
(``✗ recall@4 = 0.892, required >= 0.900``). A results file of a run that was stopped early
(its header carries ``aborted``) fails the gate.

A results file of a held-out test split carries the check ``eval`` made before scoring
(``heldout`` in its header: the test file against its split lock, test questions against the
dev file and prompt files). A problem it recorded is a warning on stderr, and with ``--strict``
a failed check (``✗ held-out split (recorded by eval): 1 test sample edited since the lock
...``), so a CI gate on a tampered test split is not silently green; ``--strict`` also fails a
results file that records no check. ``--data DATA.jsonl`` checks the test file again now.

``--history PATH`` records the gate run in the monitor store: its checks and verdict, pointing
at the run that produced the results when that run was recorded there (``eval --history``
writes its run id into the results header), else carrying the results' summary and cells
itself. ``ragbridge history`` shows the verdict beside the run it checked.

``--markdown`` prints the same checks as a pull request's Markdown instead
(`ragbridge.adapters.cli.markdown_report`): the verdict, a table per metric (baseline, this run,
difference, its CI, p-value, the verdict above) and the samples that fell most, with their
questions from ``--data``. With ``--history STORE`` and no ``--baseline``, the baseline is the
latest run of ``--baseline-branch`` (default main) recorded in the store, over the same input.
Exit codes: 0 pass, 1 gate failed, 2 bad arguments or files.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console, history_command, split_command
from ragbridge.adapters.cli.argtypes import require_non_negative, require_open_share
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UserError
from ragbridge.adapters.cli.paths import check_input

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without it
    from ragbridge.core.monitoring import ResultsStore, RunRecord
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.stats import Comparison


def register(sub: Any) -> None:
    gate = add_command(
        sub,
        "gate",
        "Check a results JSONL (from `ragbridge eval --out`) against thresholds "
        "and, optionally, a baseline results file. Exit 0 when every check passes, 1 otherwise.",
    )
    gate.add_argument("results", metavar="results.jsonl")
    gate.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="minimum mean (maximum for hallucination), e.g. recall@5=0.8; repeatable",
    )
    gate.add_argument("--baseline", metavar="base.jsonl", help="results of the reference run")
    gate.add_argument(
        "--max-drop",
        type=float,
        default=0.03,
        help="largest tolerated drop of a mean against the baseline (default 0.03)",
    )
    gate.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of the paired test (default 0.05)",
    )
    gate.add_argument(
        "--metrics",
        help="comma-separated metrics to compare with the baseline (default: all in both)",
    )
    split_command.add_heldout_options(gate, gate=True)
    history_command.add_history_option(gate)
    gate.add_argument(
        "--criteria",
        metavar="CRITERIA.yaml",
        help="the criteria file the results were scored with: its criteria are gated in their "
        "own direction (higher_is_better: false gates from above)",
    )
    gate.add_argument(
        "--markdown",
        action="store_true",
        help="print the checks as Markdown for a pull request (a comment or a job summary): "
        "the verdict, a table per metric against the baseline and the samples that fell most "
        "(their questions from --data); the exit code is the gate's",
    )
    gate.add_argument(
        "--baseline-branch",
        default="main",
        metavar="BRANCH",
        help="with --history STORE and no --baseline: compare with the latest run of BRANCH "
        "recorded in the store over the same input (default main)",
    )
    gate.set_defaults(handler=run_gate)


def higher_is_better(metric: str) -> bool:
    from ragbridge.core.metrics import by_name

    try:
        return by_name(metric).higher_is_better
    except KeyError:
        return True  # ranking measures and custom metrics: higher is better


def _load(path: str, what: str) -> Evaluation:
    from ragbridge.core.results.evaluation import Evaluation

    try:
        check_input(path)
    except UserError as exc:
        raise UserError(f"{what} {exc}") from None
    try:
        return Evaluation.from_jsonl(path)
    except UnicodeDecodeError:
        raise UserError(f"{what} {path}: not UTF-8 text; is it a results file?") from None
    except ValueError as exc:
        raise UserError(f"{what} {path}: {exc}") from None


def _thresholds(specs: list[str], evaluation: Evaluation) -> dict[str, float]:
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--threshold {spec!r}: expected METRIC=VALUE, e.g. recall@5=0.8")
        try:
            number = float(value)
        except ValueError:
            raise UserError(f"--threshold {spec!r}: {value!r} is not a number") from None
        if not 0.0 <= number <= 1.0:
            raise UserError(f"--threshold {spec!r}: the value must lie within [0, 1]")
        name = name.strip()
        if name not in evaluation.metrics:
            raise UserError(
                f"--threshold {spec!r}: the results have no metric {name!r} "
                f"(they have: {', '.join(evaluation.metrics)})"
            )
        out[name] = number
    return out


def threshold_line(name: str, mean: float | None, wanted: float, up: bool) -> tuple[bool, str]:
    """``✗ recall@4 = 0.892, required >= 0.900``: what was found, then what was required."""
    ok = mean is not None and (mean >= wanted if up else mean <= wanted)
    found = "— (no scored cell)" if mean is None else f"{mean:.3f}"
    required = f"{'>=' if up else '<='} {wanted:.3f}"
    return ok, f"{'✓' if ok else '✗'} {name} = {found}, required {required}"


@dataclass(frozen=True)
class _Verdict:
    """The gate's verdict on one metric against the baseline, printed as a line or a row."""

    metric: str
    comparison: Comparison
    regressed: bool
    phrase: str
    """``more than the allowed drop 0.030 and significant``, ``within the allowed drop 0.030``."""


def _verdict(name: str, c: Comparison, args: argparse.Namespace) -> _Verdict:
    """A drop (a rise, for a lower-is-better metric) larger than ``--max-drop`` that the paired
    test finds significant (p < ``--alpha``) is a regression."""
    if c.diff is None:
        return _Verdict(name, c, False, "no sample scored in both runs")
    up = higher_is_better(name)
    allowed = f"allowed {'drop' if up else 'rise'} {args.max_drop:.3f}"
    worse = -c.diff if up else c.diff
    significant = c.p_value is not None and c.p_value < args.alpha
    if worse <= args.max_drop:
        return _Verdict(name, c, False, f"within the {allowed}")
    if significant:
        return _Verdict(name, c, True, f"more than the {allowed} and significant")
    return _Verdict(name, c, False, f"more than the {allowed} but not significant")


def _baseline_line(v: _Verdict, args: argparse.Namespace) -> str:
    """``✗ recall@1 baseline 1.000 → 0.333: -0.667, more than the allowed drop 0.030 and
    significant (p=0.000 < alpha 0.05, n=30)``."""
    c = v.comparison
    if c.diff is None or c.mean_a is None or c.mean_b is None:
        return f"? {v.metric}: {v.phrase}"
    test = "no paired test" if c.p_value is None else f"p={c.p_value:.3f}"
    if v.phrase.startswith("within"):
        why = f"({test}"
    elif v.regressed:
        why = f"({test} < alpha {args.alpha:g}"
    else:
        why = f"({test} >= alpha {args.alpha:g}"
    mark = "✗" if v.regressed else "✓"
    return (
        f"{mark} {v.metric} baseline {c.mean_a:.3f} → {c.mean_b:.3f}: {c.diff:+.3f}, "
        f"{v.phrase} {why}, n={c.n_paired})"
    )


def _heldout(args: argparse.Namespace, recorded: Any) -> tuple[list[str], int]:
    """The held-out lines of the gate and how many of them failed it.

    Each problem is one line: a warning on stderr, or with ``--strict`` a ✗ line that fails
    the gate. A clean check is a ✓ line; no check at all fails only ``--strict``.
    """
    from ragbridge.core.heldout.check import note_lines, ok_line, problem_lines

    checks: list[tuple[str, dict[str, Any], list[str]]] = []
    if isinstance(recorded, dict):
        checks.append(("recorded by eval", recorded, []))
    if args.data:
        fresh = split_command.heldout_record(args, check_input(args.data))
        if fresh is not None:
            extra: list[str] = []
            before = recorded.get("lock_sha256") if isinstance(recorded, dict) else None
            now = fresh.get("lock_sha256")
            if before and now and before != now:
                extra.append(
                    f"the split lock {fresh.get('lock')} is not the one eval checked "
                    "(it was replaced or edited since)"
                )
            checks.append(("checked now", fresh, extra))
    if not checks:
        if not args.strict:
            return [], 0
        return [
            "✗ held-out split: the results record no held-out check (eval found no split "
            "lock for its data); give --data DATA.jsonl to check the test file now"
        ], 1
    lines: list[str] = []
    failed = 0
    for when, meta, extra in checks:
        problems = [*problem_lines(meta), *extra]
        for note in note_lines(meta):
            console.note(f"held-out split ({when}): {note}")
        if not problems:
            lines.append(f"✓ held-out split ({when}): {ok_line(meta)}")
        elif args.strict:
            lines += [f"✗ held-out split ({when}): {p}" for p in problems]
            failed += len(problems)
        else:
            for problem in problems:
                console.warn(f"held-out split ({when}): {problem}")
            console.note("the gate does not fail on it without --strict")
    return lines, failed


def run_gate(args: argparse.Namespace) -> int:
    if args.markdown and not (args.baseline or args.history):
        raise UserError(
            "--markdown compares with a baseline: give --baseline FILE, or --history STORE "
            f"holding a run of {args.baseline_branch} (--baseline-branch)"
        )
    if not (args.threshold or args.baseline or args.strict or args.data or args.markdown):
        raise UserError(
            "nothing to check: give --threshold METRIC=VALUE, --baseline FILE, --strict "
            "or --data DATA.jsonl"
        )
    require_open_share("--alpha", args.alpha)
    require_non_negative("--max-drop", args.max_drop)
    if args.history:
        inputs = [Path(p) for p in (args.results, args.baseline, args.data) if p]
        history_command.check_history(args.history, inputs=inputs)
    current = _load(args.results, "results")
    if args.criteria:  # their names resolve, with their direction, like any measure's
        from ragbridge.adapters.cli.criteria_command import register_file

        register_file(args.criteria)
    thresholds = _thresholds(args.threshold, current)
    against = _against(args, current)
    verdicts = [] if against is None else _verdicts(args, against[0], current)
    checks = [  # each: its lines, in the order printed, and how many of them missed
        _aborted_lines(current),
        _heldout(args, current.metadata.get("heldout")),
        _threshold_lines(current, thresholds),
        ([_baseline_line(v, args) for v in verdicts], sum(v.regressed for v in verdicts)),
    ]
    lines = [line for found, _ in checks for line in found]
    failed = sum(missed for _, missed in checks)
    code = EXIT_FAILED if failed else EXIT_OK
    ending = f"gate failed: {failed} check{'s' if failed > 1 else ''} missed" if failed else ""
    if args.markdown and against is not None:
        others = [line for found, _ in checks[:3] for line in found]
        console.say(_markdown(args, current, against, verdicts, others, ending).rstrip("\n"))
    else:
        console.say(*lines, ending or "gate passed")
    if failed:
        lines.append(ending)
    if args.history:
        code = _record(args, current, lines, failed, code)
    return code


def _aborted_lines(current: Evaluation) -> tuple[list[str], int]:
    """A run stopped early (its header carries ``aborted``) fails the gate."""
    aborted = current.metadata.get("aborted")
    return ([f"✗ the run was stopped early: {aborted}"], 1) if aborted else ([], 0)


def _threshold_lines(current: Evaluation, thresholds: dict[str, float]) -> tuple[list[str], int]:
    """One line per ``--threshold``: the mean found against the one required."""
    summary = current.summary()
    lines: list[str] = []
    failed = 0
    for name, wanted in thresholds.items():
        ok, line = threshold_line(name, summary[name].mean, wanted, higher_is_better(name))
        failed += not ok
        lines.append(line)
    return lines, failed


def _against(args: argparse.Namespace, current: Evaluation) -> tuple[Evaluation, str] | None:
    """The baseline and how the report names it: ``--baseline``'s file, or with ``--markdown``
    and ``--history`` alone the latest run of ``--baseline-branch`` in the store; else None."""
    if args.baseline:
        return _load(args.baseline, "baseline"), args.baseline
    if not (args.markdown and args.history):
        return None
    from ragbridge.adapters.cli.markdown_report import evaluation_of, latest_run
    from ragbridge.core.monitoring.history import RUN_ID_KEY, source_name

    own_id = current.metadata.get(RUN_ID_KEY)
    with history_command.open_store(args.history) as store:
        own = _recorded_run(store, own_id)
        source = own.source if own is not None else None
        if source is None and args.data:
            source = source_name(args.data)
        exclude = own_id if isinstance(own_id, str) else None
        run = latest_run(store.runs(), args.baseline_branch, source=source, exclude=exclude)
        if run is None:
            over = f" over {source}" if source else ""
            raise UserError(
                f"--history {history_command.store_name(args.history)}: no run of branch "
                f"{args.baseline_branch}{over} is recorded to compare with; record one there "
                f"(ragbridge eval ... --history STORE on {args.baseline_branch}) or give "
                "--baseline FILE"
            )
        cells = store.run_cells(run.run_id)
    over = f" over {run.source}" if run.source else ""
    baseline = evaluation_of(cells, current.metrics)  # in this run's order, as a file's would
    return baseline, f"run {run.run_id} of {args.baseline_branch}{over}"


def _verdicts(args: argparse.Namespace, base: Evaluation, current: Evaluation) -> list[_Verdict]:
    """One verdict per metric both runs have (or ``--metrics``), from `compare`."""
    from ragbridge.core.results.stats import compare

    chosen = None
    if args.metrics:
        chosen = [m.strip() for m in args.metrics.split(",") if m.strip()]
    try:
        comparisons = compare(base, current, metrics=chosen)
    except ValueError as exc:
        raise UserError(f"cannot compare with the baseline: {exc}") from None
    if not comparisons:
        raise UserError("the results and the baseline share no metric")
    return [_verdict(name, c, args) for name, c in comparisons.items()]


def _markdown(
    args: argparse.Namespace,
    current: Evaluation,
    against: tuple[Evaluation, str],
    verdicts: list[_Verdict],
    others: list[str],
    ending: str,
) -> str:
    """The gate's checks as a pull request's Markdown (`markdown_report.render`)."""
    from ragbridge.adapters.cli.markdown_report import (
        MetricRow,
        escape,
        questions_of,
        regressions,
        render,
    )

    base, name = against
    rows = [
        MetricRow(v.metric, v.comparison, f"{'✗' if v.regressed else '✓'} {v.phrase}")
        if v.comparison.diff is not None
        else MetricRow(v.metric, v.comparison, f"? {v.phrase}")
        for v in verdicts
    ]
    compared = (
        f"This run: {escape(args.results)}; baseline: {escape(name)}. Paired over the samples "
        f"both scored; a regression is a drop (a rise, for a lower-is-better metric) of more "
        f"than {args.max_drop:.3f} that the paired permutation test finds significant "
        f"(p &lt; {args.alpha:g})."
    )
    compared_metrics = [v.metric for v in verdicts if v.comparison.diff is not None]
    found = regressions(base, current, compared_metrics, higher_is_better)
    verdict = f"✗ ragbridge {ending}" if ending else "✓ ragbridge gate passed"
    return render(verdict, compared, rows, found, questions=questions_of(args.data), checks=others)


def _record(
    args: argparse.Namespace, current: Evaluation, lines: list[str], failed: int, code: int
) -> int:
    """Record the gate run in ``--history``; a store that cannot take it is exit 2."""
    import sqlite3

    from ragbridge.core.monitoring import RunRecord
    from ragbridge.core.monitoring.history import (
        RUN_ID_KEY,
        brief,
        cells_of,
        git_branch,
        git_commit,
        git_dirty,
        new_run_id,
        run_record,
        source_name,
    )

    metadata = {
        "exit_code": code,
        "outcome": "passed" if code == EXIT_OK else "failed",
        "checks": lines,
        "failed_checks": failed,
        "git_dirty": git_dirty(),
    }
    config = {
        "threshold": args.threshold,
        "baseline": source_name(args.baseline) if args.baseline else None,
        "max_drop": args.max_drop,
        "alpha": args.alpha,
        "metrics": args.metrics,
        "strict": args.strict,
        "data": source_name(args.data) if args.data else None,
    }
    commit = git_commit()
    try:
        with history_command.open_store(args.history) as store:
            checked = _recorded_run(store, current.metadata.get(RUN_ID_KEY))
            if checked is not None:
                run = RunRecord(
                    run_id=new_run_id(),
                    command="gate",
                    source=checked.source,
                    commit=commit,
                    branch=git_branch(),
                    config=config,
                    metadata=brief({**metadata, "results_run": checked.run_id}),
                )
                store.add_run(run)
            else:
                run = run_record(
                    current, "gate", source_name(args.results), config, commit,
                    run_id=new_run_id(), metadata=metadata,
                )  # fmt: skip
                store.add_run(run, cells_of(current))
    except (OSError, ValueError, sqlite3.Error) as exc:
        where = history_command.store_name(args.history)
        console.error(f"--history {where}: the gate run was not recorded: {exc}")
        return EXIT_USAGE
    what = f"the check of run {checked.run_id}" if checked is not None else "the gate run"
    said = f"recorded {what} as run {run.run_id} in {history_command.store_name(args.history)}"
    if args.markdown:  # stdout is the Markdown a CI job posts
        console.note(said)
    else:
        console.say(said)
    return code


def _recorded_run(store: ResultsStore, run_id: object) -> RunRecord | None:
    """The recorded run the results came from (by the id in their header), or None."""
    if not isinstance(run_id, str) or not run_id:
        return None
    try:
        run = store.run(run_id)
    except KeyError:
        return None
    return run if run.run_id == run_id else None
