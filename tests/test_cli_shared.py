"""What the commands share, written once: number flags, tables, help lines, files written after
the calls were paid, and the keywords `write_report` passes on to `render_report`.

Each helper replaced copies in several commands, so these tests pin what every copy printed:
the same error wording through argparse, the same table layout, the same exit codes.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import get_type_hints

import pytest

from ragbridge.adapters.cli.argtypes import (
    number,
    require_non_negative,
    require_open_share,
    whole_number,
)
from ragbridge.adapters.cli.commands import COMMANDS, add_command
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_OK, EXIT_USAGE, UserError
from ragbridge.adapters.cli.main import build_parser, main
from ragbridge.adapters.cli.outputs import Written
from ragbridge.adapters.cli.tables import aligned
from ragbridge.adapters.report import render_report, write_report
from ragbridge.adapters.report.page import ReportOptions
from ragbridge.core.results.evaluation import Evaluation, Score


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one argparse line a bad flag value gives (exit 2)."""
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    assert info.value.code == EXIT_USAGE
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["history", "s.sqlite", "--limit", "-1"], "argument --limit: must be >= 0, got -1"),
        (
            ["history", "s.sqlite", "--limit", "x"],
            "argument --limit: expected a whole number, got 'x'",
        ),
        (
            ["cache", "c.sqlite", "prune", "--older-than", "-1"],
            "argument --older-than: expected a number of days >= 0, got '-1'",
        ),
        (
            ["cache", "c.sqlite", "prune", "--older-than", "soon"],
            "argument --older-than: expected a number of days, got 'soon'",
        ),
        (
            ["agreement", "--threshold", "2"],
            "argument --threshold: must lie within [0, 1], got 2",
        ),
        (["eval", "d.jsonl", "--repeat", "0"], "argument --repeat: must lie within 1..100, got 0"),
        (
            ["testset", "handbook", "--price-in", "-1"],
            "argument --price-in: must be a finite number >= 0, got -1",
        ),
        (
            ["testset", "handbook", "--price-out", "nan"],
            "argument --price-out: must be a finite number >= 0, got nan",
        ),
    ],
)
def test_number_flags_say_what_they_always_said(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert _usage_error(capsys, *argv).endswith(said)


def test_a_reader_takes_what_it_accepts_and_names_what_it_expected() -> None:
    positive = whole_number(lambda n: n >= 1, "must be at least 1, got {value}")
    assert positive("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 1, got 0"):
        positive("0")
    days = number(lambda d: d >= 0, "no past, got {text!r}", expected="a number of days")
    assert days("1.5") == 1.5
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number of days, got 'x'"):
        days("x")
    with pytest.raises(argparse.ArgumentTypeError, match="no past, got '-2'"):
        days("-2")


@pytest.mark.parametrize("value", [0.0, 1.0, float("nan"), float("inf")])
def test_an_open_share_excludes_its_ends_and_what_is_no_number(value: float) -> None:
    with pytest.raises(UserError, match=r"--alpha must lie within \(0, 1\)"):
        require_open_share("--alpha", value)


def test_a_non_negative_flag_takes_zero_and_refuses_the_rest() -> None:
    require_non_negative("--max-drop", 0.0)
    require_open_share("--alpha", 0.05)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(UserError, match="--max-drop must be a finite number >= 0"):
            require_non_negative("--max-drop", bad)


def test_gate_and_history_check_their_numbers_alike(capsys: pytest.CaptureFixture[str]) -> None:
    """The range checks after parsing, one line each and exit 2, before any file is read."""
    assert main(["gate", "r.jsonl", "--strict", "--alpha", "1"]) == EXIT_USAGE
    assert capsys.readouterr().err == "ragbridge: error: --alpha must lie within (0, 1), got 1.0\n"
    assert main(["history", "s.sqlite", "--min-effect", "-1"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "ragbridge: error: --min-effect must be a finite number >= 0, got -1.0\n"
    )


def test_aligned_pads_every_column_but_leaves_no_trailing_blank() -> None:
    rows = [("name", "n", "note"), ("a", "10", ""), ("longer", "2", "x")]
    assert aligned(rows) == ["name    n   note", "a       10", "longer  2   x"]
    assert aligned(rows, indent="  ")[1] == "  a       10"


def test_each_command_registers_with_the_help_line_of_the_table() -> None:
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    helps = {action.dest: action.help for action in sub._choices_actions}
    assert helps == {name: help_line for name, _, help_line in COMMANDS}


def test_a_command_missing_from_the_table_is_a_key_error() -> None:
    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(KeyError, match="nosuch"):
        add_command(sub, "nosuch", "text")


def test_a_file_that_cannot_be_written_is_a_line_and_changes_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = Written()
    files.write_text("--out", str(tmp_path / "ok.json"), lambda: "{}")
    files.write_text("--report", str(tmp_path / "gone" / "r.html"), lambda: "<html>")

    def broken() -> str:
        raise ValueError("cannot render")

    files.write_text("--report", str(tmp_path / "r2.html"), broken)
    assert files.lines() == [f"wrote {tmp_path / 'ok.json'}"]
    assert (tmp_path / "ok.json").read_text() == "{}"
    assert not (tmp_path / "r2.html").exists()
    assert files.settle(EXIT_OK, EXIT_FAILED) == EXIT_FAILED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith(
        f"ragbridge: error: --report {tmp_path / 'gone' / 'r.html'}: not written:"
    )
    assert (
        err[1] == f"ragbridge: error: --report {tmp_path / 'r2.html'}: not written: cannot render"
    )
    assert files.settle(EXIT_ABORTED, EXIT_FAILED) == EXIT_ABORTED  # 3 says more


def test_nothing_missing_keeps_the_runs_own_code() -> None:
    assert Written(paths=["x"]).settle(EXIT_FAILED, EXIT_USAGE) == EXIT_FAILED


def test_report_options_are_render_reports_keywords() -> None:
    """`write_report` takes `ReportOptions`: the same names and types as `render_report`."""
    hints = get_type_hints(render_report)
    keywords = {
        name: hints[name]
        for name, param in inspect.signature(render_report).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert get_type_hints(ReportOptions) == keywords


def test_write_report_writes_what_render_report_renders(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    evaluation = Evaluation([("s1", "faithfulness", Score(value=0.5))])
    when = datetime(2026, 1, 2, tzinfo=timezone.utc)
    target = write_report(
        tmp_path / "new" / "r.html", evaluation, title="T", generated_by="me", generated_at=when
    )
    assert target.read_text(encoding="utf-8") == render_report(
        evaluation, title="T", generated_by="me", generated_at=when
    )
