"""``ragbridge gate``: lines that say what was required and what was found; no NaN loopholes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.results.evaluation import Evaluation, Score


def _results(path: Path, values: dict[str, list[float]], **metadata: object) -> Path:
    ev = Evaluation(metadata=dict(metadata))
    for metric, column in values.items():
        for i, value in enumerate(column):
            ev.add(f"q{i}", metric, Score(value=value))
    ev.to_jsonl(path)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "-0.01"])
def test_max_drop_must_be_a_finite_non_negative_number(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: --max-drop nan let a -0.8 drop pass the gate.
    good = _results(tmp_path / "good.jsonl", {"mrr": [1.0] * 20})
    bad = _results(tmp_path / "bad.jsonl", {"mrr": [0.2] * 20})
    code, out, err = run_cli(
        capsys, "gate", str(bad), "--baseline", str(good), f"--max-drop={value}"
    )
    assert code == 2
    assert out == ""
    assert err.startswith("ragbridge: error: --max-drop must be a finite number >= 0, got ")


@pytest.mark.parametrize("value", ["nan", "inf", "0", "1"])
def test_alpha_must_lie_strictly_between_0_and_1(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path / "r.jsonl", {"mrr": [1.0] * 3})
    code, _, err = run_cli(capsys, "gate", str(results), "--baseline", str(results),
                           f"--alpha={value}")  # fmt: skip
    assert code == 2
    assert "--alpha must lie within (0, 1)" in err


def test_threshold_lines_name_what_was_found_and_what_was_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "✗ recall@4 0.892 >= 0.9", which reads as a true statement.
    results = _results(
        tmp_path / "r.jsonl",
        {"recall@4": [1.0, 1.0, 0.676], "hallucination": [0.0, 0.5, 0.1]},
    )
    code, out, _ = run_cli(
        capsys, "gate", str(results), "--threshold", "recall@4=0.9",
        "--threshold", "hallucination=0.1",
    )  # fmt: skip
    assert code == 1
    assert out.splitlines() == [
        "✗ recall@4 = 0.892, required >= 0.900",
        "✗ hallucination = 0.200, required <= 0.100",  # lower is better: a maximum
        "gate failed: 2 checks missed",
    ]
    code, out, _ = run_cli(capsys, "gate", str(results), "--threshold", "recall@4=0.89")
    assert code == 0
    assert out.splitlines() == ["✓ recall@4 = 0.892, required >= 0.890", "gate passed"]


def test_baseline_lines_name_the_allowed_drop_and_the_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _results(tmp_path / "base.jsonl", {"mrr": [1.0] * 20, "ndcg@5": [0.5] * 20})
    now = _results(tmp_path / "now.jsonl", {"mrr": [0.2] * 20, "ndcg@5": [0.51] * 20})
    code, out, _ = run_cli(capsys, "gate", str(now), "--baseline", str(base))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(
        "✗ mrr baseline 1.000 → 0.200: -0.800, more than the allowed drop 0.030 and significant (p="
    )
    assert lines[0].endswith("< alpha 0.05, n=20)")
    assert lines[1].startswith("✓ ndcg@5 baseline 0.500 → 0.510: +0.010, within the allowed drop")


def test_results_of_a_run_that_stopped_early_fail_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(
        tmp_path / "r.jsonl", {"mrr": [1.0] * 3}, aborted="judge: 401 Unauthorized on 5/5 calls"
    )
    code, out, _ = run_cli(capsys, "gate", str(results), "--threshold", "mrr=0.5")
    assert code == 1
    assert out.splitlines() == [
        "✗ the run was stopped early: judge: 401 Unauthorized on 5/5 calls",
        "✓ mrr = 1.000, required >= 0.500",
        "gate failed: 1 check missed",
    ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("folder", "results {p}: is a folder, not a file"),
        ("empty", "results {p}: the file is empty"),
        ("binary", "results {p}: not UTF-8 text; is it a results file?"),
    ],
)
def test_bad_results_files_are_one_line(
    setup: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.jsonl"
    if setup == "folder":
        path.mkdir()
    elif setup == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(capsys, "gate", str(path), "--threshold", "mrr=0.5")
    assert code == 2
    assert err == f"ragbridge: error: {message.format(p=path)}\n"


# --------------------------------------------------------------------------- held-out split

TAMPERED = {
    "data": "data.test.jsonl",
    "ok": False,
    "lock": "data.test.lock.json",
    "lock_sha256": "0" * 64,
    "checked": 12,
    "locked": 12,
    "edited": [{"id": "q7", "fields": ["reference"]}],
    "added": [],
    "removed": [],
    "renamed": [],
    "dev_file": "data.dev.jsonl",
    "dev": "checked",
    "counts": {"edited": 1, "added": 0, "removed": 0, "renamed": 0, "dev_leaks": 1,
               "prompt_leaks": 0},
    "prompt_files": [],
    "near_duplicate": 0.8,
    "leaks": [{"test_id": "q9", "source": "dev", "where": "q2", "kind": "near",
               "similarity": 0.857, "text": "..."}],
}  # fmt: skip
"""What ``eval`` records in the results header for a test file edited since its lock."""


def test_a_recorded_held_out_problem_warns_without_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path / "r.jsonl", {"mrr": [1.0] * 3}, heldout=TAMPERED)
    code, out, err = run_cli(capsys, "gate", str(results), "--threshold", "mrr=0.5")
    assert code == 0
    assert out.splitlines() == ["✓ mrr = 1.000, required >= 0.500", "gate passed"]
    assert err.splitlines() == [
        "ragbridge: warning: held-out split (recorded by eval): 1 test sample edited since the "
        "lock data.test.lock.json: q7 (reference)",
        "ragbridge: warning: held-out split (recorded by eval): 1 test question also in the dev "
        "split data.dev.jsonl: q9 (near duplicate 0.86: dev q2)",
        "ragbridge: the gate does not fail on it without --strict",
    ]


def test_a_recorded_held_out_problem_fails_a_strict_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path / "r.jsonl", {"mrr": [1.0] * 3}, heldout=TAMPERED)
    code, out, _ = run_cli(capsys, "gate", str(results), "--threshold", "mrr=0.5", "--strict")
    assert code == 1
    assert out.splitlines() == [
        "✗ held-out split (recorded by eval): 1 test sample edited since the lock "
        "data.test.lock.json: q7 (reference)",
        "✗ held-out split (recorded by eval): 1 test question also in the dev split "
        "data.dev.jsonl: q9 (near duplicate 0.86: dev q2)",
        "✓ mrr = 1.000, required >= 0.500",
        "gate failed: 2 checks missed",
    ]


def test_strict_alone_is_a_check_and_needs_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = {**TAMPERED, "ok": True, "edited": [], "leaks": [], "counts": {}}
    results = _results(tmp_path / "r.jsonl", {"mrr": [1.0] * 3}, heldout=clean)
    code, out, _ = run_cli(capsys, "gate", str(results), "--strict")
    assert code == 0
    assert out.splitlines() == [
        "✓ held-out split (recorded by eval): data.test.jsonl matches its split lock "
        "data.test.lock.json (12 test samples); no test question found in the dev split "
        "data.dev.jsonl",
        "gate passed",
    ]
    bare = _results(tmp_path / "bare.jsonl", {"mrr": [1.0] * 3})
    code, out, _ = run_cli(capsys, "gate", str(bare), "--strict")
    assert code == 1
    assert out.splitlines()[-1] == "gate failed: 1 check missed"
