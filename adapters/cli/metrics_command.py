"""``ragbridge metrics``: every measure and every provider that computes it, from the registry.

One row per measure × provider: what the provider needs (judge, embedder, NLI model, reference,
relevance labels), its judge calls per sample, and the one-line definition it computes — the
measure's, or the provider's own where that differs (RAGAS's ``exact_match`` compares raw strings
where the measure is SQuAD-normalised: `ProviderSpec.definition`). The table is
read from `ragbridge.core.registry` (plugins included), so it cannot drift from what
``--metrics`` accepts. ``--markdown`` prints the table the docs hold; ``--json`` one object per row.

``--criteria FILE`` lists a team's own criteria instead (registered from the file as ``eval
--criteria`` registers them, kind ``criteria``): each one's kind, the fields it reads, its
direction, scale, where its steps come from and its judge calls per sample.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ragbridge.adapters.cli import console, criteria_command
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK
from ragbridge.adapters.cli.tables import aligned

KINDS = ("judge", "string", "ranking", "agent", "criteria")


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "metrics",
        "List every measure × provider: needs, judge calls per sample, and the "
        "definition each provider computes.",
    )
    parser.add_argument("--kind", choices=KINDS, help="only measures of this kind")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--markdown", action="store_true", help="a Markdown table")
    shape.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--criteria",
        metavar="CRITERIA.yaml",
        help="list the criteria of this file (kind criteria): fields read, direction, scale, "
        "steps, judge calls",
    )
    parser.set_defaults(handler=run_metrics)


def run_metrics(args: argparse.Namespace) -> int:
    from ragbridge.core import metrics  # noqa: F401  (registers the built-in measures)
    from ragbridge.core.registry import REGISTRY

    if args.criteria:
        return _list_criteria(args)
    if args.markdown:
        console.say(REGISTRY.markdown().rstrip("\n"))
        return EXIT_OK
    rows = [r for r in REGISTRY.rows() if args.kind is None or r["kind"] == args.kind]
    if args.json:
        console.say(*(json.dumps(r, ensure_ascii=False) for r in rows))
        return EXIT_OK
    table = [("name", "needs", "judge calls", "meaning")]
    table += [
        (f"{r['measure']}:{r['provider']}", r["needs"], r["judge calls"], r["meaning"])
        for r in rows
    ]
    for problem in REGISTRY.plugin_errors:
        console.note(f"a provider plugin failed to load: {problem}")
    for spec in REGISTRY.dangling():
        console.note(f"provider {spec.key} is registered for a measure that does not exist")
    console.say(*aligned(table))
    return EXIT_OK


def _list_criteria(args: argparse.Namespace) -> int:
    """The file's criteria, registered as ``eval --criteria`` registers them; stale frozen
    steps are listed as such, not refused: this only reads the file."""
    file = criteria_command.register_file(args.criteria)
    rows = criteria_command.criteria_rows(file)
    if args.json:
        console.say(*(json.dumps(r, ensure_ascii=False) for r in rows))
        return EXIT_OK
    columns = ("measure", "type", "reads", "direction", "scale", "steps", "judge calls", "meaning")
    if args.markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(r[c] for c in columns) + " |" for r in rows]
        console.say(*lines)
        return EXIT_OK
    table: list[tuple[str, ...]] = [("name", *columns[1:])]
    table += [tuple(r[c] for c in columns) for r in rows]
    console.say(*aligned(table))
    return EXIT_OK
