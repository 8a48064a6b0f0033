"""``ragbridge split`` and the held-out check of ``eval``/``gate`` (placeholder; issue 17)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ragbridge.adapters.cli.errors import UserError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "split", help="split a data set into dev and a locked, held-out test file"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise UserError("ragbridge split is not built yet")


def add_heldout_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``eval`` that check a locked test split."""


def check_heldout(args: argparse.Namespace, data: Path) -> dict[str, Any] | None:
    """Check ``data`` against its split lock, if it has one; the result goes to the run's
    metadata (``heldout``) so ``gate`` can read it from the results file."""
    return None
