"""``ragbridge split`` and the held-out check of ``eval`` and ``gate``, end to end in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main, split_command
from ragbridge.core import heldout
from ragbridge.core.heldout import read_lock
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Context, Sample, load_samples, save_samples

TOPICS = [
    "parental leave", "the travel budget", "remote work", "the dress code", "overtime pay",
    "the pension plan", "company laptops", "the parking garage", "the gym membership",
    "expense reports", "the bonus scheme", "jury duty",
]  # fmt: skip
METRICS = ("--metrics", "recall@5,mrr")


def _samples(n_answerable: int = 18, n_no_answer: int = 6) -> list[Sample]:
    out: list[Sample] = []
    for i in range(n_answerable + n_no_answer):
        no_answer = i >= n_answerable
        out.append(
            Sample(
                id=f"q{i}",
                question=f"Question {i}: what does the handbook say about "
                f"{TOPICS[i % len(TOPICS)]} in year {i}?",
                answer="Something.",
                contexts=[Context(text="A passage.", id=f"d{i}")],
                reference=None if no_answer else f"Answer {i}.",
                relevance={} if no_answer else {f"d{i}": 1},
            )
        )
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def split_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``data.jsonl`` split with seed 7: ``data.dev.jsonl``, ``data.test.jsonl`` and the lock."""
    save_samples(_samples(), tmp_path / "data.jsonl")
    code, _, err = run_cli(capsys, "split", str(tmp_path / "data.jsonl"), "--seed", "7")
    assert code == 0, err
    return tmp_path


def _rewrite(path: Path, change: Any) -> None:
    samples = list(load_samples(path))
    save_samples(change(samples), path)


# --------------------------------------------------------------------------- split


def test_split_writes_both_halves_and_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "data.jsonl"
    save_samples(_samples(), source)
    code, out, err = run_cli(capsys, "split", str(source), "--dev", "0.5", "--seed", "7")
    assert code == 0, err
    dev, test, lock = (tmp_path / n for n in ("data.dev.jsonl", "data.test.jsonl",
                                               "data.test.lock.json"))  # fmt: skip
    assert out.splitlines() == [
        f"split {source} with seed 7, dev share 0.5",
        "               dev  test",
        "  answerable     9     9",
        "  no-answer      3     3",
        "  total         12    12",
        f"wrote {dev}",
        f"wrote {test}",
        f"wrote {lock}: eval and gate check data.test.jsonl against it",
    ]
    dev_ids = {s.id for s in load_samples(dev)}
    test_ids = {s.id for s in load_samples(test)}
    assert dev_ids | test_ids == {s.id for s in _samples()}
    assert not dev_ids & test_ids
    saved = read_lock(lock)
    assert (saved.seed, saved.dev_share, saved.sizes) == (7, 0.5, {"dev": 12, "test": 12})
    assert (saved.source, saved.dev_file, saved.test_file) == (
        "data.jsonl", "data.dev.jsonl", "data.test.jsonl"
    )  # fmt: skip
    assert set(saved.test_samples) == test_ids


def test_split_into_another_folder_names_the_files_relative_to_the_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    save_samples(_samples(), tmp_path / "in" / "data.jsonl")
    code, _, err = run_cli(capsys, "split", str(tmp_path / "in" / "data.jsonl"),
                           "--out-dir", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, err
    saved = read_lock(tmp_path / "out" / "data.test.lock.json")
    assert (saved.source, saved.dev_file) == ("../in/data.jsonl", "data.dev.jsonl")


def test_split_refuses_to_replace_a_lock_without_force(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = split_dir / "data.test.lock.json"
    before = lock.read_text()
    code, out, err = run_cli(capsys, "split", str(split_dir / "data.jsonl"), "--seed", "8")
    assert code == 2
    assert out == ""
    assert err == (
        f"ragbridge: error: {lock} exists: replacing a split lock is how a held-out test set "
        "gets quietly swapped, so it is never done silently; give --force to split again\n"
    )
    assert lock.read_text() == before
    code, _, err = run_cli(capsys, "split", str(split_dir / "data.jsonl"), "--seed", "8",
                           "--force")  # fmt: skip
    assert code == 0
    assert err.startswith(f"ragbridge: warning: replaced the split lock {lock} (seed 7, 12 test")
    assert read_lock(lock).seed == 8


def test_split_refuses_to_overwrite_a_half_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_samples(_samples(), tmp_path / "data.jsonl")
    (tmp_path / "data.test.jsonl").write_text("{}\n")
    code, _, err = run_cli(capsys, "split", str(tmp_path / "data.jsonl"))
    assert code == 2
    assert "data.test.jsonl exists; give --force to overwrite it" in err
    assert not (tmp_path / "data.test.lock.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dev", "1"], "--dev must lie within (0, 1), got 1.0"),
        (["--dev", "nan"], "--dev must lie within (0, 1), got nan"),
        (["--near-duplicate", "0"], "--near-duplicate must lie within (0, 1], got 0.0"),
        (["--out-dir", "nowhere"], "--out-dir nowhere: no such folder"),
    ],
)
def test_split_refuses_bad_options_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    save_samples(_samples(), tmp_path / "data.jsonl")
    code, _, err = run_cli(capsys, "split", str(tmp_path / "data.jsonl"), *argv)
    assert code == 2
    assert err == f"ragbridge: error: {message}\n"


def test_a_file_too_small_to_split_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_samples(_samples(1, 0), tmp_path / "one.jsonl")
    code, _, err = run_cli(capsys, "split", str(tmp_path / "one.jsonl"))
    assert code == 2
    assert "1 sample is too few to split" in err


def test_the_cli_default_threshold_is_the_cores() -> None:
    assert split_command.NEAR_DUPLICATE == heldout.NEAR_DUPLICATE


# --------------------------------------------------------------------------- eval


def test_eval_on_an_untouched_test_split_says_it_matches_and_records_it(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test = split_dir / "data.test.jsonl"
    out_path = split_dir / "r.jsonl"
    code, _, err = run_cli(capsys, "eval", str(test), *METRICS, "--out", str(out_path))
    assert code == 0, err
    assert (
        f"ragbridge: {test} matches its split lock {split_dir / 'data.test.lock.json'} "
        f"(12 test samples); no test question found in the dev split "
        f"{split_dir / 'data.dev.jsonl'}\n"
    ) in err
    assert "warning" not in err
    record = Evaluation.from_jsonl(out_path).metadata["heldout"]
    assert record["ok"] is True
    assert record["counts"] == {"edited": 0, "added": 0, "removed": 0, "renamed": 0,
                                "dev_leaks": 0, "prompt_leaks": 0}  # fmt: skip
    assert record["seed"] == 7
    assert record["strict"] is False


def test_eval_on_a_file_without_a_lock_checks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    save_samples(_samples(), data)
    code, _, err = run_cli(capsys, "eval", str(data), *METRICS, "--out", str(tmp_path / "r.jsonl"))
    assert code == 0
    assert "lock" not in err
    assert "heldout" not in Evaluation.from_jsonl(tmp_path / "r.jsonl").metadata


def _tamper(split_dir: Path) -> Path:
    """Edit a reference, drop one sample, add one that copies a dev question."""
    dev_question = next(iter(load_samples(split_dir / "data.dev.jsonl"))).question
    test = split_dir / "data.test.jsonl"

    def change(samples: list[Sample]) -> list[Sample]:
        edited = samples[0].model_copy(update={"reference": "A friendlier reference."})
        added = Sample(
            id="easy",
            question=dev_question.lower(),
            contexts=[Context(text="x", id="d1")],
            relevance={"d1": 1},
        )
        return [edited, *samples[2:], added]

    _rewrite(test, change)
    return test


def test_eval_on_a_tampered_test_split_warns_and_scores(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test_ids = [s.id for s in load_samples(split_dir / "data.test.jsonl")]
    test = _tamper(split_dir)
    lock = split_dir / "data.test.lock.json"
    out_path = split_dir / "r.jsonl"
    code, out, err = run_cli(capsys, "eval", str(test), *METRICS, "--out", str(out_path))
    assert code == 0
    assert out.startswith("12 samples, 2 metrics")
    warnings = [line for line in err.splitlines() if "since the lock" in line or "also in" in line]
    dev_first = next(iter(load_samples(split_dir / "data.dev.jsonl"))).id
    assert warnings == [
        f"ragbridge: warning: 1 test sample edited since the lock {lock}: "
        f"{test_ids[0]} (reference)",
        f"ragbridge: warning: 1 test sample added since the lock {lock}: easy",
        f"ragbridge: warning: 1 test sample removed since the lock {lock}: {test_ids[1]}",
        f"ragbridge: warning: 1 test question also in the dev split "
        f"{split_dir / 'data.dev.jsonl'}: easy (exact: dev {dev_first})",
    ]
    assert "scoring anyway: these are not clean held-out scores (--strict refuses)" in err
    record = Evaluation.from_jsonl(out_path).metadata["heldout"]
    assert record["ok"] is False
    assert record["edited"] == [{"id": test_ids[0], "fields": ["reference"]}]
    assert record["removed"] == [{"id": test_ids[1]}]
    assert record["counts"]["dev_leaks"] == 1


def test_eval_strict_refuses_a_tampered_split_before_scoring(
    split_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragbridge.core.scoring.runner as runner

    scored: list[object] = []
    monkeypatch.setattr(runner, "evaluate", lambda *a, **k: scored.append(a))
    test_ids = [s.id for s in load_samples(split_dir / "data.test.jsonl")]
    test = _tamper(split_dir)
    out_path = split_dir / "r.jsonl"
    code, out, err = run_cli(
        capsys, "eval", str(test), *METRICS, "--out", str(out_path), "--strict",
        "--judge", "python:ragbridge.core.testing:CountingJudge",
    )  # fmt: skip
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"ragbridge: error: --strict: {test} differs from its split lock "
        f"{split_dir / 'data.test.lock.json'} (1 edited: {test_ids[0]} (reference); "
        f"1 added: easy; 1 removed: {test_ids[1]}) and 1 of its questions leaks "
        f"(dev split {split_dir / 'data.dev.jsonl'}: easy); nothing was scored"
    ]
    assert scored == []
    assert not out_path.exists()


def test_eval_strict_refuses_a_file_without_a_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.test.jsonl"
    save_samples(_samples(), data)
    code, _, err = run_cli(capsys, "eval", str(data), *METRICS, "--strict")
    assert code == 2
    assert err == (
        f"ragbridge: error: --strict: {data} has no split lock ({tmp_path / 'data.test.lock.json'}"
        " does not exist); make one with `ragbridge split` or name it with --lock\n"
    )


def test_eval_strict_passes_a_clean_split(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "eval", str(split_dir / "data.test.jsonl"), *METRICS,
                           "--strict")  # fmt: skip
    assert code == 0
    assert out.startswith("12 samples")


def test_eval_finds_a_test_question_in_a_prompt_file_and_takes_an_explicit_lock(
    split_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    test = moved / "held_out.jsonl"
    test.write_bytes((split_dir / "data.test.jsonl").read_bytes())
    first = next(iter(load_samples(test)))
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text(
        "system: Answer from the handbook.\nexamples:\n"
        f'  - question: "{first.question.replace("Question", "question")}"\n'
        "    answer: 30 days\n"
        "  - question: Where do I park my bike?\n",
        encoding="utf-8",
    )
    lock = split_dir / "data.test.lock.json"
    code, _, err = run_cli(capsys, "eval", str(test), *METRICS, "--lock", str(lock),
                           "--prompt-file", str(prompt))  # fmt: skip
    assert code == 0
    assert (
        f"ragbridge: warning: 1 test question also in the prompt file {prompt}: "
        f"{first.id} (exact: line 3)"
    ) in err.splitlines()
    assert "since the lock" not in err  # same content, checked against the named lock


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--lock", "--lock {path}: no such file"),
        ("--prompt-file", "--prompt-file {path}: no such file"),
    ],
)
def test_eval_names_a_missing_lock_or_prompt_file(
    split_dir: Path, capsys: pytest.CaptureFixture[str], flag: str, message: str
) -> None:
    missing = split_dir / "missing.json"
    code, _, err = run_cli(capsys, "eval", str(split_dir / "data.test.jsonl"), *METRICS,
                           flag, str(missing))  # fmt: skip
    assert code == 2
    assert err == f"ragbridge: error: {message.format(path=missing)}\n"


def test_eval_refuses_a_damaged_lock(split_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = split_dir / "data.test.lock.json"
    lock.write_text("{ not json")
    code, _, err = run_cli(capsys, "eval", str(split_dir / "data.test.jsonl"), *METRICS)
    assert code == 2
    assert err.startswith(f"ragbridge: error: {lock}: not a split lock (invalid JSON")


def test_eval_notes_a_missing_dev_file_and_still_checks_the_lock(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (split_dir / "data.dev.jsonl").unlink()
    code, _, err = run_cli(capsys, "eval", str(split_dir / "data.test.jsonl"), *METRICS)
    assert code == 0
    assert (
        f"ragbridge: the dev file {split_dir / 'data.dev.jsonl'} named by the lock is missing: "
        "the test questions were not checked against the dev split"
    ) in err.splitlines()
    assert "matches its split lock" in err


# --------------------------------------------------------------------------- gate


def _eval(split_dir: Path, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    out_path = split_dir / name
    code, _, err = run_cli(capsys, "eval", str(split_dir / "data.test.jsonl"), *METRICS,
                           "--out", str(out_path))  # fmt: skip
    assert code == 0, err
    return out_path


def test_gate_on_a_tampered_split_warns_and_with_strict_fails(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tamper(split_dir)
    results = _eval(split_dir, capsys, "r.jsonl")
    code, out, err = run_cli(capsys, "gate", str(results), "--threshold", "mrr=0")
    assert code == 0
    assert out.splitlines() == ["✓ mrr = 1.000, required >= 0.000", "gate passed"]
    assert "ragbridge: warning: held-out split (recorded by eval): 1 test sample edited" in err
    code, out, _ = run_cli(capsys, "gate", str(results), "--threshold", "mrr=0", "--strict")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("✗ held-out split (recorded by eval): 1 test sample edited since")
    assert sum(line.startswith("✗ held-out split") for line in lines) == 4
    assert lines[-1] == "gate failed: 4 checks missed"


def test_gate_strict_passes_a_clean_split_and_fails_results_without_a_check(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _eval(split_dir, capsys, "r.jsonl")
    code, out, _ = run_cli(capsys, "gate", str(results), "--strict")
    assert code == 0
    assert out.splitlines()[0].startswith(
        "✓ held-out split (recorded by eval): "
        f"{split_dir / 'data.test.jsonl'} matches its split lock"
    )
    unlocked = split_dir / "dev_results.jsonl"
    assert main(["eval", str(split_dir / "data.dev.jsonl"), *METRICS, "--out", str(unlocked)]) == 0
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "gate", str(unlocked), "--strict")
    assert code == 1
    assert out.splitlines()[0].startswith("✗ held-out split: the results record no held-out check")


def test_gate_data_checks_the_test_file_again_now(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _eval(split_dir, capsys, "r.jsonl")
    test = split_dir / "data.test.jsonl"
    _rewrite(test, lambda samples: samples[1:])  # edited after eval ran
    code, out, _ = run_cli(capsys, "gate", str(results), "--strict", "--data", str(test))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("✓ held-out split (recorded by eval)")
    assert lines[1].startswith("✗ held-out split (checked now): 1 test sample removed since")


def test_gate_notices_a_lock_replaced_after_eval(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _eval(split_dir, capsys, "r.jsonl")
    assert main(["split", str(split_dir / "data.jsonl"), "--seed", "8", "--force"]) == 0
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "gate", str(results), "--strict",
                           "--data", str(split_dir / "data.test.jsonl"))  # fmt: skip
    assert code == 1
    assert (
        "✗ held-out split (checked now): the split lock "
        f"{split_dir / 'data.test.lock.json'} is not the one eval checked (it was replaced or "
        "edited since)"
    ) in out.splitlines()


def test_the_results_header_record_is_plain_json(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _eval(split_dir, capsys, "r.jsonl")
    header = json.loads(results.read_text().splitlines()[0])
    assert header["metadata"]["heldout"]["lock"] == str(split_dir / "data.test.lock.json")


def test_run_strict_refuses_a_tampered_split_before_the_pipeline_is_imported(
    split_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test = _tamper(split_dir)
    # the pipeline module does not exist: reaching its import would be a different error
    code, _, err = run_cli(
        capsys, "run", "no_such_pipeline_module:chain", str(test), *METRICS, "--strict"
    )
    assert code == 2
    assert f"--strict: {test} differs from its split lock" in err
    assert "no_such_pipeline_module" not in err
