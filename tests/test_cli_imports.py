"""``ragbridge --help`` imports only what building the parser needs.

Every subcommand's module is imported to build the parser, so one top-level import of pydantic,
numpy, rich or a framework in any of them made ``ragbridge --help`` pay ~0.25 s for nothing.
These tests check *what* is imported, in a fresh interpreter (this process has long loaded
everything); how long it takes is printed by ``benchmarks/import_time.py``, never asserted here.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from importlib.metadata import version

import pytest

from ragbridge.adapters.cli import cache_command
from ragbridge.adapters.cli.main import build_parser, main

HEAVY = (
    "pydantic",
    "numpy",
    "rich",
    "torch",
    "ragas",
    "deepeval",
    "langchain_core",
    "llama_index",
    "langsmith",
)
"""Packages the parser must not load: each costs tens of milliseconds or more to import."""

SUBCOMMANDS = (
    "agreement",
    "annotate",
    "cache",
    "compare",
    "criteria",
    "demo",
    "eval",
    "run",
    "langsmith",
    "estimate",
    "export",
    "gate",
    "history",
    "metrics",
    "report",
    "robustness",
    "serve",
    "split",
    "testset",
    "trec",
)

REPORT = (
    f"\nimport json, sys\nheavy = {sorted(HEAVY)!r}\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))"
)


def _loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_building_the_parser_loads_no_heavy_package() -> None:
    code = "from ragbridge.adapters.cli.main import build_parser\nbuild_parser()"
    assert _loaded_after(code) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["eval", "--help"]])
def test_help_and_version_load_no_heavy_package(argv: list[str]) -> None:
    """The whole of ``main``, ``quiet_frameworks()`` included, up to argparse's exit."""
    code = (
        "import contextlib, io\n"
        "from ragbridge.adapters.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})"
    )
    assert _loaded_after(code) == []


def test_the_check_sees_a_heavy_import() -> None:
    """The probe itself works: a command that needs pydantic is seen loading it."""
    assert "pydantic" in _loaded_after("import ragbridge.core.sample")


def test_help_lists_every_subcommand() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ragbridge.adapters.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    listed = re.findall(r"^ {4}(\w+)", done.stdout, re.M)  # continuation lines indent more
    assert listed == list(SUBCOMMANDS)
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert tuple(sub.choices or ()) == SUBCOMMANDS


def test_version_is_looked_up_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"ragbridge {version('ragbridge')}\n"


def test_compare_help_names_what_the_comparison_accepts() -> None:
    """--help lists copies of the names (importing `adapters.compare` loads the whole core)."""
    from ragbridge.adapters import compare
    from ragbridge.adapters.cli import compare_command

    assert compare_command.FRAMEWORK_NAMES == compare.FRAMEWORKS
    assert compare_command.MEASURE_NAMES == compare.MEASURES


def test_a_sqlite_error_is_still_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """sqlite3 is no longer imported by ``main`` itself; its errors are caught all the same."""

    def broken(args: object) -> int:
        raise sqlite3.DatabaseError("file is not a database\nsecond line")

    monkeypatch.setattr(cache_command, "run_cache", broken)
    assert main(["cache", "x.sqlite"]) == 2
    assert capsys.readouterr().err == "ragbridge: error: --cache: file is not a database\n"


def test_other_errors_still_propagate(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: object) -> int:
        raise RuntimeError("a bug, not a user error")

    monkeypatch.setattr(cache_command, "run_cache", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["cache", "x.sqlite"])


def test_the_help_table_matches_what_each_command_registers() -> None:
    """`main.COMMANDS` copies each command's help line so --help imports no command module."""
    cli_main = importlib.import_module(
        "ragbridge.adapters.cli.main"
    )  # the package's `main` is the function
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    registered = [(action.dest, action.help) for action in sub._choices_actions]
    assert registered == [(name, help_line) for name, _, help_line in cli_main.COMMANDS]


@pytest.mark.parametrize(
    ("argv", "imported"),
    [(["--help"], []), (["--version"], []), (["trec", "--help"], ["trec_command"])],
)
def test_only_the_named_commands_module_is_imported(argv: list[str], imported: list[str]) -> None:
    """``ragbridge --help`` builds stubs: no command module (and no logging) is imported."""
    code = (
        "import contextlib, io, json, sys\n"
        "from ragbridge.adapters.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules\n"
        "    if m.startswith('ragbridge.adapters.cli.') and m.endswith('_command'))))\n"
        "print('logging' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules, logging_loaded = done.stdout.strip().splitlines()[-2:]
    assert json.loads(modules) == imported
    if not imported:
        assert logging_loaded == "False"
