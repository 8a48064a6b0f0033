"""The ``ragbridge`` subcommands: the table ``--help`` lists, and where each one registers.

``ragbridge --help`` needs only each command's name and one-line help, so they live here, in
a module that imports nothing, and not in the command modules (importing all of them cost
about half of the command's start-up). Each command module registers its parser with
`add_command`, which takes the help line from this table: written once, so the top-level list
and the command's own ``--help`` cannot drift apart.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["COMMANDS", "add_command"]

COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "agreement",
        "agreement_command",
        "judge metrics against human labels: kappa, Spearman, AUROC, threshold",
    ),
    (
        "annotate",
        "annotate_command",
        "export results as annotation tasks (JSONL, HTML form); import labels",
    ),
    (
        "cache",
        "cache_command",
        "inspect or prune a judge cache file (stats, prune --failed/--old-prompts/...)",
    ),
    (
        "compare",
        "compare_command",
        "score one eval set with ragbridge, RAGAS and DeepEval and compare the scores",
    ),
    (
        "criteria",
        "criteria_command",
        "pin or check the evaluation steps of a criteria file (freeze, check)",
    ),
    (
        "demo",
        "demo_command",
        "run the offline demo: two pipelines captured, scored, compared and reported",
    ),
    ("eval", "eval_command", "score a JSONL eval set (offline providers unless --judge)"),
    (
        "run",
        "eval_command",
        "run a LangChain chain or LlamaIndex engine over an eval set, then score it",
    ),
    ("langsmith", "eval_command", "score runs exported from LangSmith (JSON or JSONL)"),
    (
        "estimate",
        "eval_command",
        "dry run: judge calls, tokens and cost a judge evaluation would spend",
    ),
    (
        "export",
        "export_command",
        "write an eval set in RAGAS, DeepEval or LangSmith-examples format",
    ),
    (
        "gate",
        "gate_command",
        "exit 1 on a missed threshold or a significant regression against a baseline",
    ),
    (
        "history",
        "history_command",
        "metrics over the runs recorded with --history, and which run changed them",
    ),
    ("metrics", "metrics_command", "list every measure, its providers and what each needs"),
    (
        "report",
        "report_command",
        "write the HTML report of results files (two or more: compared side by side)",
    ),
    (
        "robustness",
        "robustness_command",
        "re-run a pipeline under retrieval faults (noise, no relevant passage, wrong facts)",
    ),
    (
        "serve",
        "serve_command",
        "serve a results store as a read-only web app: runs, samples, diffs, trends",
    ),
    ("split", "split_command", "split a data set into dev and a locked, held-out test file"),
    ("testset", "testset_command", "write an eval set with no-answer questions from documents"),
    ("trec", "trec_command", "evaluate a TREC run against qrels, printing trec_eval's output"),
)
"""Every subcommand: its name, the module that registers it, and its one-line help.

A command's module is imported when that command runs (or when `build_parser` builds the
whole tree); it registers under the help line given here (`add_command`).
"""


def add_command(sub: Any, name: str, description: str) -> argparse.ArgumentParser:
    """The parser of command ``name`` under ``sub``, with its help line from `COMMANDS`."""
    help_line = {command: line for command, _, line in COMMANDS}[name]
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_line, description=description)
    return parser
