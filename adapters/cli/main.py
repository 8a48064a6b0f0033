"""Entry point of the ``ragbridge`` command: one subcommand per job, user errors as one line.

Exit codes (`ragbridge.adapters.cli.errors`): 0 passed, 1 the run failed its bar (or a gate
check missed), 2 usage or input error (one line ``ragbridge: error: ...``, no traceback), 3 the
run stopped early because the judge or embedder is unusable, 130 interrupted. A reader closing
stdout early (``| head -1``) is not an error: the command finishes with its own code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters.cli import (
    agreement_command,
    annotate_command,
    cache_command,
    compare_command,
    console,
    demo_command,
    eval_command,
    export_command,
    gate_command,
    history_command,
    metrics_command,
    report_command,
    split_command,
    testset_command,
    trec_command,
)
from ragbridge.adapters.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError


def _version() -> str:
    # importlib.metadata costs ~10 ms to import and scans the installed distributions: paid
    # only when --version is asked for, not by every command.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ragbridge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _VersionAction(argparse.Action):
    """argparse's ``version`` action with the version looked up when the flag is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> NoReturn:
        sys.stdout.write(f"ragbridge {_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragbridge", description="Framework-neutral evaluation of RAG pipelines."
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    agreement_command.register(sub)
    annotate_command.register(sub)
    cache_command.register(sub)
    compare_command.register(sub)
    demo_command.register(sub)
    eval_command.register(sub)
    export_command.register(sub)
    gate_command.register(sub)
    history_command.register(sub)
    metrics_command.register(sub)
    report_command.register(sub)
    split_command.register(sub)
    testset_command.register(sub)
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
    except Exception as exc:
        # sqlite3 is imported by the commands that open a cache, not by every command: when it
        # is not loaded, no SQLite error can have been raised.
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is None or not isinstance(exc, sqlite3.Error):
            raise
        console.error(f"--cache: {_one_line(exc)}")  # a cache file that SQLite cannot use
        return EXIT_USAGE
    return code


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
