"""``ragbridge history``: placeholder, built under issue 18."""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli.errors import UserError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("history", help="(being built)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise UserError("ragbridge history is not built yet")
