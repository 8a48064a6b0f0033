"""``ragbridge agreement``: how far judge metrics agree with people (placeholder; issue 17)."""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli.errors import UserError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "agreement", help="judge metrics against human labels: kappa, Spearman, AUROC, threshold"
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    raise UserError("ragbridge agreement is not built yet")
