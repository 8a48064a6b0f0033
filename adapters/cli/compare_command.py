"""``ragbridge compare``: run ragbridge, RAGAS and DeepEval on one eval set, compare the scores.

Prints `CrossComparison.table` (per measure: each framework's mean, CI, failures and judge cost;
per pair: Spearman, Pearson, mean absolute difference; edge cases; then every skipped
framework/measure pair with its reason). ``--out`` writes the comparison JSON
(`CrossComparison.from_json` reads it back), ``--report`` the HTML report with every framework's
scores side by side. Without ``--judge`` only the offline, id-based and string measures run and
the judge measures are listed as skipped. ``--timeout`` and ``--max-retries`` shape the one
judge engine every framework shares. Exit codes as for ``eval``: 0 done, 1 a framework's measure
failed its bar (``--max-failed-share``; pairs skipped by design are not failures), 2 bad
arguments or files, 3 stopped early (judge unusable), 130 interrupted.
"""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_USAGE, UserError
from ragbridge.adapters.cli.options import (
    LOCAL_EXTRA,
    add_scoring_options,
    build_embedder,
    build_judge,
    progress,
    read_samples,
    self_judging_warning,
    settings_from,
)
from ragbridge.adapters.cli.outcome import report_outcome
from ragbridge.adapters.cli.outputs import Written
from ragbridge.adapters.cli.paths import check_input
from ragbridge.adapters.cli.plural import noun, plural

DEFAULT_FRAMEWORKS = "ragbridge,ragas,deepeval"

# The names --help lists. `ragbridge.adapters.compare` holds the real tuples, but importing it
# loads pydantic, numpy and the whole core (~0.2 s), which `ragbridge --help` must not pay; the
# arguments are checked against the real tuples in `run_compare`, and
# tests/test_cli_imports.py checks that these copies still equal them.
FRAMEWORK_NAMES: tuple[str, ...] = ("ragbridge", "ragbridge:offline", "ragas", "deepeval")
MEASURE_NAMES: tuple[str, ...] = (
    "faithfulness",
    "answer_relevance",
    "context_precision",
    "context_recall",
    "id_context_precision",
    "id_context_recall",
    "rouge_l",
    "bleu",
    "exact_match",
)


def register(sub: Any) -> None:
    cmp = add_command(
        sub,
        "compare",
        "Run each framework's version of the same measures on DATA.jsonl, on the "
        "same judge and cache, and compare them: means, correlations, disagreements, edge "
        "cases, cost. Pairs that cannot run (no judge, no such metric) are listed as skipped.",
    )
    cmp.add_argument("data", metavar="DATA.jsonl", help="ragbridge samples, one JSON per line")
    cmp.add_argument(
        "--frameworks",
        default=DEFAULT_FRAMEWORKS,
        help=f"comma-separated, from {', '.join(FRAMEWORK_NAMES)} (default: {DEFAULT_FRAMEWORKS})",
    )
    cmp.add_argument(
        "--measures",
        help=f"comma-separated, from {', '.join(MEASURE_NAMES)} (default: all)",
    )
    cmp.add_argument("--out", metavar="comparison.json", help="write the comparison as JSON")
    cmp.add_argument("--report", metavar="report.html", help="write the HTML report")
    add_scoring_options(cmp, metrics=False, nli=False)
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
    from ragbridge.adapters.cli.eval_command import check_paths
    from ragbridge.adapters.compare import FRAMEWORKS, MEASURES, compare_frameworks_on

    frameworks = _names(args.frameworks, "--frameworks", FRAMEWORKS)
    measures = _names(args.measures, "--measures", MEASURES) if args.measures else None
    data = check_input(args.data)
    check_paths(args, [data])
    samples = read_samples(args.data)
    judge = build_judge(args.judge, args.base_url)
    embedder = build_embedder(args.embedder, args.base_url)
    warning = self_judging_warning(samples, judge)
    if warning:
        console.note(warning)
    try:
        with progress("comparing", None) as advance:
            # One judge engine for every framework, with the command's limits and cache.
            run = compare_frameworks_on(
                samples,
                frameworks=frameworks,
                measures=measures,
                progress=advance,
                **settings_from(args, judge=judge, embedder=embedder),
            )
    except ImportError as exc:
        if "embedder=" not in str(exc):
            raise
        raise UserError(
            "the comparison needs an embedder and the default one (--embedder local) is not "
            f"installed: {LOCAL_EXTRA}, or pass --embedder SPEC"
        ) from None
    comparison = run.comparison
    files = Written()
    if args.out:  # files first: a closed stdout must not cost the results
        files.write_text("--out", args.out, lambda: comparison.model_dump_json(indent=2))
    if args.report:
        from ragbridge.adapters.report import render_report

        files.write_text(
            "--report",
            args.report,
            lambda: render_report(
                run.evaluations,
                samples=samples,
                comparison=comparison,
                title="ragbridge framework comparison",
                generated_by="ragbridge compare",
            ),
        )
    head = (
        f"{plural(comparison.n_samples, 'sample')}; "
        f"frameworks: {', '.join(run.evaluations) or 'none'}"
    )
    if comparison.judge_model:
        head += f"; judge {comparison.judge_model}"
    lines = [head]
    for label, usage in run.usage().items():
        if usage.calls or usage.cached_calls:
            lines.append(
                f"  {label}: {plural(usage.calls, 'judge call')} ({usage.cached_calls} cached), "
                f"{usage.prompt_tokens:,} prompt {noun(usage.prompt_tokens, 'token')}"
            )
    lines.append(comparison.table())
    console.say(*lines, *files.lines())
    code = report_outcome(run.evaluations, max_failed_share=args.max_failed_share, source="compare")
    return files.settle(code, EXIT_USAGE)
