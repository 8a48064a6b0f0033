"""``ragbridge testset``: end to end on the shipped handbook, the dry run, and every refusal.

The judge is the scripted one of tests/testset_judge.py, named on the command line as
``--judge python:testset_judge:handbook_judge`` (pytest puts tests/ on the import path; the
subprocess test runs from tests/, which the command adds to the path as a user's folder).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.adapters.cli import testset_command as command
from ragbridge.core import testset
from ragbridge.core.sample import load_samples
from ragbridge.core.testset import load_documents
from ragbridge.core.testset.plan import DEFAULT_MAX_ROUNDS, DEFAULT_SIZE, DEFAULT_TOP_K

TESTS = Path(__file__).parent
JUDGE = "python:testset_judge:handbook_judge"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _handbook(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "testset", "handbook", "--out", str(tmp_path / "eval.jsonl"), "--judge", JUDGE,
        "--embedder", "hash", *extra,
    ]  # fmt: skip


def test_the_handbook_gives_a_loadable_set_and_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, *_handbook(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("estimate: 55 judge calls for 50 questions")
    assert (
        "wrote 50 of 50 questions (single 23/23, multi 11/11, reasoning 11/11, no-answer 5/5)"
        in out
    )
    assert "no-answer share 10.0%" in out
    assert "passages: 46 verified in their source, 5 dropped (quote not found)" in out
    assert "near-duplicates dropped: 3 (cosine > 0.92 to a kept question)" in out
    assert "no-answer candidates: 6 checked against the corpus, 1 rejected" in out
    assert "judge: 65 calls sent (0 from the cache)" in out
    assert "estimate was 55 judge requests (at most 165 with top-ups); the run made 65" in out
    assert lines[-1] == f"wrote {tmp_path / 'eval.jsonl'}"
    samples = list(load_samples(tmp_path / "eval.jsonl"))
    assert len(samples) == 50
    assert all(s.answer is None and not s.contexts for s in samples)
    assert sum(s.relevance == {} for s in samples) == 5
    assert err == ""


def test_a_rerun_with_the_cache_sends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = str(tmp_path / "cache.sqlite")
    code, _first, _ = run_cli(capsys, *_handbook(tmp_path, "--size", "20", "--cache", cache))
    assert code == 0
    written = (tmp_path / "eval.jsonl").read_text()
    code, second, _ = run_cli(capsys, *_handbook(tmp_path, "--size", "20", "--cache", cache))
    assert code == 0
    assert "judge: 0 calls sent" in second
    assert (tmp_path / "eval.jsonl").read_text() == written


def test_the_dry_run_prints_the_estimate_and_sends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A judge spec that cannot even be built: the dry run must not try.
    code, out, err = run_cli(
        capsys, "testset", "handbook", "--dry-run", "--judge", "python:testset_judge:nothing",
        "--price-in", "0.15", "--price-out", "0.6", "--out", str(tmp_path / "eval.jsonl"),
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("estimate: 55 judge calls for 50 questions (single 23, reasoning 11,")
    assert "up to 165 if drops need top-up rounds" in out
    assert "~$0.00" in out
    assert "at 150 completion tokens per call" in out
    assert not (tmp_path / "eval.jsonl").exists()
    code, out, _ = run_cli(capsys, "testset", "handbook", "--dry-run", "--size", "10")
    assert code == 0
    assert out.startswith("estimate: 11 judge calls for 10 questions")


def test_without_a_judge_it_refuses_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "testset", "handbook", "--out", str(tmp_path / "e.jsonl"))
    assert code == 2
    assert "needs a judge to write the questions: pass --judge SPEC" in err
    assert "--dry-run" in err
    assert not (tmp_path / "e.jsonl").exists()


def test_a_bad_corpus_line_is_one_error_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"id": "a", "text": "Fine text."}) + "\n" + json.dumps({"id": "b"}) + "\n"
    )
    code, out, err = run_cli(
        capsys, "testset", str(corpus), "--out", str(tmp_path / "e.jsonl"), "--judge", JUDGE
    )
    assert code == 2
    assert err.strip() == (
        f"ragbridge: error: {corpus}:2: text: expected a non-empty string (missing)"
    )
    assert out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--styles", "single=1,essay=1"],
            "--styles: unknown style 'essay'; styles are single, multi, reasoning",
        ),
        (["--chunk-chars", "50"], "--chunk-chars must be at least 200, got 50"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, *_handbook(tmp_path), *argv)
    assert (code, err.strip()) == (2, f"ragbridge: error: {message}")
    assert not (tmp_path / "eval.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no-answer-share", "1.5"], "--no-answer-share: must lie within [0, 1], got 1.5"),
        (["--dedup-threshold", "0"], "--dedup-threshold: must lie within (0, 1], got 0"),
        (["--size", "0"], "--size: must be at least 1, got 0"),
        (["--price-in", "-1"], "--price-in: must be a finite number >= 0, got -1"),
    ],
)
def test_bad_numbers_are_refused_by_the_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*_handbook(tmp_path), *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_outputs_are_checked_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "testset", "handbook", "--judge", JUDGE)
    assert (code, err.strip()) == (2, "ragbridge: error: --out is required: name the file to "
                                      "write the test set to")  # fmt: skip
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "Some text " * 10}) + "\n")
    code, _, err = run_cli(capsys, "testset", str(corpus), "--out", str(corpus), "--judge", JUDGE)
    assert code == 2
    assert "is the input file" in err
    code, _, err = run_cli(
        capsys, *_handbook(tmp_path), "--out", str(tmp_path / "missing" / "e.jsonl")
    )
    assert code == 2
    assert "does not exist" in err
    code, _, err = run_cli(capsys, "testset", str(tmp_path / "nope.jsonl"), "--judge", JUDGE)
    assert code == 2
    assert "no such file or folder" in err


def test_an_unusable_judge_stops_the_run_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "testset", "handbook", "--out", str(tmp_path / "e.jsonl"), "--judge",
        "python:testset_judge:UnusableJudge", "--embedder", "hash",
    )  # fmt: skip
    assert code == 3
    assert "ragbridge: error: stopped early: judge: 401 Unauthorized" in err
    assert "wrote 0 of 50 questions" in out
    assert not (tmp_path / "e.jsonl").exists()


def test_a_run_where_nothing_survives_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "testset", "handbook", "--out", str(tmp_path / "e.jsonl"), "--size", "10",
        "--judge", "python:testset_judge:paraphrasing_judge", "--embedder", "hash",
    )  # fmt: skip
    assert code == 1
    assert "no question survived the checks" in err
    assert "passages: 0 verified" in out
    assert not (tmp_path / "e.jsonl").exists()


def test_a_shortfall_is_said_plainly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *_handbook(tmp_path, "--max-rounds", "1"))
    assert code == 0
    assert "wrote 43 of 50 questions (single 19/23, multi 11/11, reasoning 10/11, " in out
    assert err.splitlines() == [
        "ragbridge: warning: wrote 43 of 50 questions (missing: single 4, reasoning 1, "
        "no-answer 2) after 1 round; raise --max-rounds, or give more documents",
        "ragbridge: warning: the no-answer share is 7.0%, below the 10% asked for",
    ]
    assert len(list(load_samples(tmp_path / "eval.jsonl"))) == 43


def test_a_folder_of_long_documents_is_chunked_and_the_chunks_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.adapters.demo.handbook import documents

    docs = tmp_path / "docs"
    (docs / "leave").mkdir(parents=True)
    handbook = documents()
    for i in range(3):
        part = handbook[i * 8 : i * 8 + 8]
        text = "\n\n".join(f"## {d.title}\n\n{d.text}" for d in part)
        (docs / "leave" / f"part{i}.md").write_text(f"# Part {i}\n\n{text}\n", encoding="utf-8")
    chunks = tmp_path / "chunks.jsonl"
    code, _out, err = run_cli(
        capsys, "testset", str(docs), "--out", str(tmp_path / "e.jsonl"), "--size", "12",
        "--chunk-chars", "1200", "--chunks-out", str(chunks), "--judge", JUDGE,
        "--embedder", "hash",
    )  # fmt: skip
    assert code == 0, err
    assert "3 of 3 documents are longer than --chunk-chars 1200 and were split" in err
    assert f"index {chunks}" in err
    indexed = load_documents(chunks)  # the chunks file is itself a corpus
    ids = {d.id for d in indexed}
    assert all(i.startswith("leave/part") and "#" in i for i in ids)
    for sample in load_samples(tmp_path / "e.jsonl"):
        assert set(sample.relevance or {}) <= ids
        for quote, chunk_id in zip(
            sample.reference_contexts or [], sample.metadata["source"], strict=False
        ):
            assert quote in next(d.text for d in indexed if d.id == chunk_id)


def test_the_defaults_shown_in_help_are_the_cores() -> None:
    assert command.DEFAULT_SIZE == DEFAULT_SIZE
    assert command.DEFAULT_TOP_K == DEFAULT_TOP_K
    assert command.DEFAULT_MAX_ROUNDS == DEFAULT_MAX_ROUNDS
    assert command.DEFAULT_NO_ANSWER_SHARE == testset.DEFAULT_NO_ANSWER_SHARE
    assert command.DEFAULT_DEDUP_THRESHOLD == testset.DEFAULT_DEDUP_THRESHOLD
    assert command.DEFAULT_CHUNK_CHARS == testset.DEFAULT_CHUNK_CHARS
    assert testset.parse_styles(command.DEFAULT_STYLES) == dict(testset.DEFAULT_STYLES)


def test_the_console_script_writes_a_set_from_the_handbook(tmp_path: Path) -> None:
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None
    out = tmp_path / "eval.jsonl"
    done = subprocess.run(
        [exe, "testset", "handbook", "--out", str(out), "--size", "10", "--judge", JUDGE,
         "--embedder", "hash"],
        cwd=TESTS, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 10 of 10 questions" in done.stdout
    assert len(list(load_samples(out))) == 10
