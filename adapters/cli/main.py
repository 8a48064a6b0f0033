"""Entry point of the ``ragbridge`` command: one subcommand per job, user errors as one line.

Exit codes (`ragbridge.adapters.cli.errors`): 0 passed, 1 the run failed its bar (or a gate
check missed), 2 usage or input error (one line ``ragbridge: error: ...``, no traceback), 3 the
run stopped early because the judge or embedder is unusable, 130 interrupted. A reader closing
stdout early (``| head -1``) is not an error: the command finishes with its own code.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters.cli import (
    cache_command,
    compare_command,
    console,
    demo_command,
    eval_command,
    export_command,
    gate_command,
    trec_command,
)
from ragbridge.adapters.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError


def _version() -> str:
    try:
        return version("ragbridge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragbridge", description="Framework-neutral evaluation of RAG pipelines."
    )
    parser.add_argument("--version", action="version", version=f"ragbridge {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cache_command.register(sub)
    compare_command.register(sub)
    demo_command.register(sub)
    eval_command.register(sub)
    export_command.register(sub)
    gate_command.register(sub)
    trec_command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    quiet_frameworks()  # telemetry off before any command imports a framework
    parser = build_parser()
    args = parser.parse_args(argv)
    console.reset()
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        console.note("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout closed by its reader (`| head`) outside console.say
        console.silence_stdout()
        return EXIT_OK
    except (UserError, ValueError, OSError, ImportError) as exc:  # ImportError names the extra
        console.error(_one_line(exc))
        return EXIT_USAGE
    except sqlite3.Error as exc:  # a cache file that SQLite cannot use
        console.error(f"--cache: {_one_line(exc)}")
        return EXIT_USAGE
    return code


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
