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
Exit codes: 0 pass, 1 gate failed, 2 bad arguments or files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console, history_command, split_command
from ragbridge.adapters.cli.argtypes import require_non_negative, require_open_share
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UserError
from ragbridge.adapters.cli.paths import check_input

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without it
    from ragbridge.core.monitoring import MonitorStore, RunRecord
    from ragbridge.core.results.evaluation import Evaluation


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


def _baseline_line(name: str, c: Any, up: bool, regressed: bool, args: argparse.Namespace) -> str:
    """``✗ recall@1 baseline 1.000 → 0.333: -0.667, more than the allowed drop 0.030 and
    significant (p=0.000 < alpha 0.05, n=30)``."""
    allowed = f"allowed {'drop' if up else 'rise'} {args.max_drop:.3f}"
    worse = -c.diff if up else c.diff
    test = "no paired test" if c.p_value is None else f"p={c.p_value:.3f}"
    if worse > args.max_drop:
        significant = c.p_value is not None and c.p_value < args.alpha
        if significant:
            verdict = f"more than the {allowed} and significant ({test} < alpha {args.alpha:g}"
        else:
            verdict = f"more than the {allowed} but not significant ({test} >= alpha {args.alpha:g}"
    else:
        verdict = f"within the {allowed} ({test}"
    mark = "✗" if regressed else "✓"
    return (
        f"{mark} {name} baseline {c.mean_a:.3f} → {c.mean_b:.3f}: {c.diff:+.3f}, "
        f"{verdict}, n={c.n_paired})"
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
    if not (args.threshold or args.baseline or args.strict or args.data):
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
    checks = [  # each: its lines, in the order printed, and how many of them missed
        _aborted_lines(current),
        _heldout(args, current.metadata.get("heldout")),
        _threshold_lines(current, thresholds),
        _baseline_lines(args, current),
    ]
    lines = [line for found, _ in checks for line in found]
    failed = sum(missed for _, missed in checks)
    code = EXIT_FAILED if failed else EXIT_OK
    if failed:
        lines.append(f"gate failed: {failed} check{'s' if failed > 1 else ''} missed")
        console.say(*lines)
    else:
        console.say(*lines, "gate passed")
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


def _baseline_lines(args: argparse.Namespace, current: Evaluation) -> tuple[list[str], int]:
    """With ``--baseline``: one line per shared metric; a regression is a drop larger than
    ``--max-drop`` that the paired test finds significant."""
    from ragbridge.core.results.stats import compare

    if not args.baseline:
        return [], 0
    base = _load(args.baseline, "baseline")
    chosen = None
    if args.metrics:
        chosen = [m.strip() for m in args.metrics.split(",") if m.strip()]
    try:
        comparisons = compare(base, current, metrics=chosen)
    except ValueError as exc:
        raise UserError(f"cannot compare with the baseline: {exc}") from None
    if not comparisons:
        raise UserError("the results and the baseline share no metric")
    lines: list[str] = []
    failed = 0
    for name, c in comparisons.items():
        if c.diff is None or c.mean_a is None or c.mean_b is None:
            lines.append(f"? {name}: no sample scored in both runs")
            continue
        up = higher_is_better(name)
        worse = -c.diff if up else c.diff
        significant = c.p_value is not None and c.p_value < args.alpha
        regressed = worse > args.max_drop and significant
        failed += regressed
        lines.append(_baseline_line(name, c, up, regressed, args))
    return lines, failed


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
        console.error(f"--history {args.history}: the gate run was not recorded: {exc}")
        return EXIT_USAGE
    what = f"the check of run {checked.run_id}" if checked is not None else "the gate run"
    console.say(f"recorded {what} as run {run.run_id} in {args.history}")
    return code


def _recorded_run(store: MonitorStore, run_id: object) -> RunRecord | None:
    """The recorded run the results came from (by the id in their header), or None."""
    if not isinstance(run_id, str) or not run_id:
        return None
    try:
        run = store.run(run_id)
    except KeyError:
        return None
    return run if run.run_id == run_id else None
