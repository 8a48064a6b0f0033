"""Entry point of the ``ragbridge`` command: one subcommand per job, user errors as one line.

Exit codes (`ragbridge.adapters.cli.errors`): 0 passed, 1 the run failed its bar (or a gate
check missed), 2 usage or input error (one line ``ragbridge: error: ...``, no traceback), 3 the
run stopped early because the judge or embedder is unusable, 130 interrupted. A reader closing
stdout early (``| head -1``) is not an error: the command finishes with its own code.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from importlib import import_module
from typing import Any, NoReturn

from ragbridge.adapters.cli.commands import COMMANDS
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``ragbridge`` parser: every command in full, or only the one named ``only``.

    With ``only``, the other commands are stubs carrying their help line (enough for the
    top-level ``--help`` and for argparse's "invalid choice" message), so their modules are not
    imported; ``only=""`` builds the stubs alone.
    """
    parser = argparse.ArgumentParser(
        prog="ragbridge", description="Framework-neutral evaluation of RAG pipelines."
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    owner = next((module for name, module, _ in COMMANDS if name == only), None)
    registered: set[str] = set()
    for name, module, help_line in COMMANDS:
        if only is None or module == owner:
            if module not in registered:  # one module may register several commands
                registered.add(module)
                import_module(f"ragbridge.adapters.cli.{module}").register(sub)
        else:
            sub.add_parser(name, help=help_line, add_help=False)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word not starting with ``-``), if any."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if any(first == name for name, _, _ in COMMANDS) else None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    command = _command_named(words)
    if command is not None:
        from ragbridge.adapters._frameworks import quiet_frameworks

        quiet_frameworks()  # telemetry off before the command's module imports a framework
    parser = build_parser(only=command or "")  # "": stubs alone, for --help and --version
    args = parser.parse_args(words)
    from ragbridge.adapters.cli import console

    console.reset()
    try:
        with warnings.catch_warnings():
            _said_by_the_command()
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


def _said_by_the_command() -> None:
    """Python warnings a command says in its own words (one line on stderr) are not repeated
    by the warnings machinery: the judge grading its own model's answers."""
    from ragbridge.core.judging.self_preference import SelfPreferenceWarning

    warnings.simplefilter("ignore", SelfPreferenceWarning)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
