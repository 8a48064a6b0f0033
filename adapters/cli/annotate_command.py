"""``ragbridge annotate``: human annotation export and import (placeholder; issue 17)."""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli.errors import UserError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "annotate", help="export results as annotation tasks (JSONL, HTML form); import labels"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise UserError("ragbridge annotate is not built yet")
