"""Runs that stream their cells: to a callback, to a results file, and through ``eval --out``.

A streamed run keeps no cell, yet must say everything a kept run says: the same file, the same
summary and failure bar, the same cost and id warnings; and an interrupted run keeps what it
finished.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core import Context, Evaluation, Sample, evaluate
from ragbridge.core.judging.engine import Price
from ragbridge.core.results.evaluation import Score
from ragbridge.core.results.tally import Tally
from ragbridge.core.results.writer import ResultWriter
from ragbridge.core.sample import save_samples
from ragbridge.core.testing import CountingJudge, HashEmbedder


def _samples(n: int = 6) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"What is the leave allowance in year {i}?",
            answer=f"Employees get {20 + i} days of leave.",
            contexts=[
                Context(text=f"Employees get {20 + i} days of leave per year.", id=f"d{i}"),
                Context(text="The office opens at nine.", id="office"),
            ],
            reference=f"{20 + i} days.",
            relevance={f"d{i}": 1} if i % 3 else {},
        )
        for i in range(n)
    ]


METRICS = ["faithfulness", "answer_relevance", "recall@2", "mrr"]


def outcome(score: Score) -> tuple[Any, ...]:
    """A cell without its latency, which differs between two runs."""
    return (score.value, score.failure, score.reason, score.details, score.usage)


def test_a_streamed_run_keeps_nothing_and_says_everything(tmp_path: Path) -> None:
    kept = evaluate(_samples(), METRICS, judge=CountingJudge(), embedder=HashEmbedder())
    seen: list[tuple[str, str, Score]] = []
    streamed = evaluate(
        iter(_samples()),
        METRICS,
        judge=CountingJudge(),
        embedder=HashEmbedder(),
        price=Price(1.0, 2.0),
        on_result=lambda *cell: seen.append(cell),
        keep=False,
    )
    assert len(streamed) == 0
    assert streamed.metadata["cells_kept"] is False
    assert [(s, m) for s, m, _ in seen] == [(s, m) for s, m, _ in kept]  # input order
    assert Tally.of(seen).summary() == kept.summary()
    assert streamed.metadata["judge_stats"] == kept.metadata["judge_stats"]
    assert streamed.metadata["cost_usd"] > 0  # cost comes from the streamed usage


def test_id_warnings_do_not_need_the_cells() -> None:
    samples = [
        Sample(
            id=f"q{i}",
            question="q",
            contexts=[Context(text="t", id=str(uuid.UUID(int=i + 10**20)))],
            relevance={f"doc-{i}": 1},
        )
        for i in range(4)
    ]
    kept = evaluate(samples, ["recall@1"])
    streamed = evaluate(samples, ["recall@1"], keep=False, on_result=lambda *_: None)
    assert kept.metadata["warnings"]
    assert streamed.metadata["warnings"] == kept.metadata["warnings"]


def test_the_writer_gives_the_file_to_jsonl_gives(tmp_path: Path) -> None:
    kept = evaluate(_samples(), METRICS, judge=CountingJudge(), embedder=HashEmbedder())
    kept.to_jsonl(tmp_path / "kept.jsonl")
    with ResultWriter(tmp_path / "streamed.jsonl") as out:
        for sample_id, metric, score in kept:
            out.add(sample_id, metric, score)
        out.close(kept.metadata)
    assert (tmp_path / "streamed.jsonl").read_text() == (tmp_path / "kept.jsonl").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.jsonl", "streamed.jsonl"]


def test_a_writer_left_by_an_exception_keeps_the_finished_cells(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    score = Score(value=0.5)

    def crash() -> None:
        with ResultWriter(path) as out:
            out.add("q1", "m", score)
            raise RuntimeError("the caller crashed")

    with pytest.raises(RuntimeError):
        crash()
    back = Evaluation.from_jsonl(path)
    assert back.metadata == {"interrupted": True}
    assert back.get("q1", "m") == score
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


def test_a_discarded_writer_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("old\n")
    out = ResultWriter(path)
    out.add("q1", "m", Score(value=1.0))
    out.discard()
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(_samples(), path)
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_out_streams_the_same_file_and_summary_as_a_kept_run(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = "faithfulness:offline,recall@2,mrr,no_answer"
    monkeypatch.setattr(
        "ragbridge.adapters.cli.eval_command.embedder_for", lambda *a: HashEmbedder()
    )
    streamed = tmp_path / "streamed.jsonl"
    code, out_streamed, _ = _cli(
        capsys, "eval", str(data), "--metrics", metrics, "--out", str(streamed)
    )
    assert code == 0
    # with --report every cell is kept (the report needs them): the old path, for comparison
    kept = tmp_path / "kept.jsonl"
    report = tmp_path / "report.html"
    args = ["eval", str(data), "--metrics", metrics, "--out", str(kept), "--report", str(report)]
    code, out_kept, _ = _cli(capsys, *args)
    assert code == 0
    a, b = Evaluation.from_jsonl(streamed), Evaluation.from_jsonl(kept)
    assert [(s, m, outcome(x)) for s, m, x in a] == [(s, m, outcome(x)) for s, m, x in b]
    header = json.loads(streamed.read_text().splitlines()[0])
    assert header["metadata"]["cells_kept"] is False
    assert header["metadata"]["embedding_stats"]["calls"] >= 1
    table = [line for line in out_streamed.splitlines() if not line.startswith("wrote")]
    assert table == [line for line in out_kept.splitlines() if not line.startswith("wrote")]


def test_eval_out_interrupted_keeps_the_finished_results(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "results.jsonl"
    real_add = Tally.add
    calls = {"n": 0}

    def interrupting_add(self: Tally, *cell: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 5:  # two samples of two metrics done, then Ctrl-C
            raise KeyboardInterrupt
        real_add(self, *cell)

    monkeypatch.setattr(Tally, "add", interrupting_add)
    code, _, err = _cli(capsys, "eval", str(data), "--metrics", "recall@2,mrr", "--out", str(out))
    assert code == 130
    assert f"interrupted: wrote 4 finished results to {out}" in err
    back = Evaluation.from_jsonl(out)
    assert back.metadata == {"interrupted": True}
    assert len(back) == 4
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
