"""``ragbridge eval --repeat N``: score every sample N times and say how repeatable it is."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli.errors import UserError

if TYPE_CHECKING:
    from ragbridge.adapters.cli.eval_command import Plan


def add_repeat_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help=argparse.SUPPRESS)


def run_repeated(
    args: argparse.Namespace, plan: Plan, data: Path, count: int, metadata: dict[str, Any]
) -> int:
    raise UserError("--repeat is not built yet")
