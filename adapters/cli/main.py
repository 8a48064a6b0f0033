"""Entry point of the ``ragbridge`` command: one subcommand per job, user errors as one line.

User errors (bad arguments, bad files) print ``ragbridge: error: ...`` and exit 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ragbridge.adapters.cli import (
    compare_command,
    demo_command,
    eval_command,
    export_command,
    gate_command,
    trec_command,
)
from ragbridge.adapters.cli.options import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragbridge", description="Framework-neutral evaluation of RAG pipelines."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    compare_command.register(sub)
    demo_command.register(sub)
    eval_command.register(sub)
    export_command.register(sub)
    gate_command.register(sub)
    trec_command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except (UserError, ValueError, OSError, ImportError) as exc:  # ImportError names the extra
        print(f"ragbridge: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into `head`
        return 0
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
