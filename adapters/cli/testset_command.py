"""``ragbridge testset``: write an eval set from documents (placeholder; built under issue 17)."""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli.errors import UserError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "testset", help="write an eval set with no-answer questions from documents"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise UserError("ragbridge testset is not built yet")
