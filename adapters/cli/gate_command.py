"""``ragbridge gate``: fail CI on a missed threshold or a significant regression.

A mean below a fixed threshold fails. Against a baseline, a drop fails only when it is larger
than ``--max-drop`` *and* a paired permutation test over the samples both runs scored says it is
unlikely to be noise (p < ``--alpha``): small eval sets jitter, and a gate that cries wolf gets
switched off. Exit codes: 0 pass, 1 gate failed, 2 bad arguments or files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ragbridge.adapters.cli.options import UserError
from ragbridge.core.results import Evaluation


def register(sub: Any) -> None:
    gate: argparse.ArgumentParser = sub.add_parser(
        "gate",
        help="exit 1 on a missed threshold or a significant regression against a baseline",
        description="Check a results JSONL (from `ragbridge eval --out`) against thresholds "
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
    gate.set_defaults(handler=run_gate)


def higher_is_better(metric: str) -> bool:
    from ragbridge.core.metrics import by_name

    try:
        return by_name(metric).higher_is_better
    except KeyError:
        return True  # ranking measures and custom metrics: higher is better


def _load(path: str, what: str) -> Evaluation:
    if not Path(path).exists():
        raise UserError(f"{what} {path}: no such file")
    try:
        return Evaluation.from_jsonl(path)
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


def run_gate(args: argparse.Namespace) -> int:
    from ragbridge.core.stats import compare

    if not args.threshold and not args.baseline:
        raise UserError("nothing to check: give --threshold METRIC=VALUE and/or --baseline FILE")
    if not 0.0 < args.alpha < 1.0:
        raise UserError(f"--alpha must lie within (0, 1), got {args.alpha}")
    if args.max_drop < 0:
        raise UserError(f"--max-drop must be >= 0, got {args.max_drop}")
    current = _load(args.results, "results")
    thresholds = _thresholds(args.threshold, current)
    summary = current.summary()
    failed = 0
    lines: list[str] = []
    for name, wanted in thresholds.items():
        mean = summary[name].mean
        up = higher_is_better(name)
        ok = mean is not None and (mean >= wanted if up else mean <= wanted)
        failed += not ok
        shown = "—" if mean is None else f"{mean:.3f}"
        lines.append(f"{'✓' if ok else '✗'} {name} {shown} {'>=' if up else '<='} {wanted:g}")
    if args.baseline:
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
        for name, c in comparisons.items():
            if c.diff is None or c.mean_a is None or c.mean_b is None:
                lines.append(f"? {name}: no sample scored in both runs")
                continue
            worse = -c.diff if higher_is_better(name) else c.diff
            significant = c.p_value is not None and c.p_value < args.alpha
            regressed = worse > args.max_drop and significant
            failed += regressed
            mark = "✗" if regressed else "✓"
            note = f"p={c.p_value:.3f}, n={c.n_paired}" if c.p_value is not None else ""
            if worse > args.max_drop and not significant:
                note += ", drop not significant"
            lines.append(f"{mark} {name} {c.mean_a:.3f} → {c.mean_b:.3f} ({c.diff:+.3f}; {note})")
    print("\n".join(lines))
    if failed:
        print(f"gate failed: {failed} check{'s' if failed > 1 else ''} missed")
        return 1
    print("gate passed")
    return 0
