"""``ragbridge compare``: run ragbridge, RAGAS and DeepEval on one eval set, compare the scores.

Prints `CrossComparison.table` (per measure: each framework's mean, CI, failures and judge cost;
per pair: Spearman, Pearson, mean absolute difference; edge cases; then every skipped
framework/measure pair with its reason). ``--out`` writes the comparison JSON
(`CrossComparison.from_json` reads it back), ``--report`` the HTML report with every framework's
scores side by side. Without ``--judge`` only the offline, id-based and string measures run and
the judge measures are listed as skipped. Exit codes: 0 done, 2 bad arguments or files.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ragbridge.adapters.cli.options import (
    UserError,
    add_scoring_options,
    build_embedder,
    build_judge,
    progress,
    read_samples,
    self_judging_warning,
)

DEFAULT_FRAMEWORKS = "ragbridge,ragas,deepeval"


def register(sub: Any) -> None:
    from ragbridge.adapters.compare import FRAMEWORKS, MEASURES

    cmp: argparse.ArgumentParser = sub.add_parser(
        "compare",
        help="score one eval set with ragbridge, RAGAS and DeepEval and compare the scores",
        description="Run each framework's version of the same measures on DATA.jsonl, on the "
        "same judge and cache, and compare them: means, correlations, disagreements, edge "
        "cases, cost. Pairs that cannot run (no judge, no such metric) are listed as skipped.",
    )
    cmp.add_argument("data", metavar="DATA.jsonl", help="ragbridge samples, one JSON per line")
    cmp.add_argument(
        "--frameworks",
        default=DEFAULT_FRAMEWORKS,
        help=f"comma-separated, from {', '.join(FRAMEWORKS)} (default: {DEFAULT_FRAMEWORKS})",
    )
    cmp.add_argument(
        "--measures",
        help=f"comma-separated, from {', '.join(MEASURES)} (default: all)",
    )
    cmp.add_argument("--out", metavar="comparison.json", help="write the comparison as JSON")
    cmp.add_argument("--report", metavar="report.html", help="write the HTML report")
    add_scoring_options(cmp, metrics=False)
    cmp.set_defaults(handler=run_compare)


def _names(text: str, option: str, known: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError(f"{option} is empty; choose from {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(
            f"{option}: unknown {'name' if len(unknown) == 1 else 'names'} "
            f"{', '.join(repr(n) for n in unknown)}; choose from {', '.join(known)}"
        )
    return names


def run_compare(args: argparse.Namespace) -> int:
    from ragbridge.adapters.compare import FRAMEWORKS, MEASURES, compare_frameworks_on

    frameworks = _names(args.frameworks, "--frameworks", FRAMEWORKS)
    measures = _names(args.measures, "--measures", MEASURES) if args.measures else None
    samples = read_samples(args.data)
    judge = build_judge(args.judge, args.base_url)
    embedder = build_embedder(args.embedder, args.base_url)
    warning = self_judging_warning(samples, judge)
    if warning:
        print(warning, file=sys.stderr)
    with progress("comparing", None) as advance:
        run = compare_frameworks_on(
            samples,
            frameworks=frameworks,
            measures=measures,
            judge=judge,
            embedder=embedder,
            cache=args.cache,
            max_concurrency=args.concurrency,
            progress=advance,
        )
    comparison = run.comparison
    head = f"{comparison.n_samples} samples; frameworks: {', '.join(run.evaluations) or 'none'}"
    if comparison.judge_model:
        head += f"; judge {comparison.judge_model}"
    print(head)
    for label, usage in run.usage().items():
        if usage.calls or usage.cached_calls:
            print(
                f"  {label}: {usage.calls} judge calls ({usage.cached_calls} cached), "
                f"{usage.prompt_tokens:,} prompt tokens"
            )
    print(comparison.table())
    if args.out:
        comparison.to_json(args.out)
        print(f"wrote {args.out}")
    if args.report:
        from ragbridge.adapters.report import write_report

        write_report(
            args.report,
            run.evaluations,
            samples=samples,
            comparison=comparison,
            title="ragbridge framework comparison",
            generated_by="ragbridge compare",
        )
        print(f"wrote {args.report}")
    return 0
