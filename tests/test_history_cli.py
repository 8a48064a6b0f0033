"""``--history`` on eval/run/gate and the ``ragbridge history`` command."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.monitoring import MonitorStore
from ragbridge.core.monitoring.history import RUN_ID_KEY, record_run
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.tally import Tally
from ragbridge.core.sample import Context, Sample, save_samples


def _samples(n: int = 6, *, labelled: bool = True) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            question=f"What is fact number {i}?",
            answer=f"Fact {i} is that the sky is blue.",
            contexts=[
                Context(text=f"Fact {i}: the sky is blue.", id=d) for d in (f"d{i}", "x1", "x2")
            ],
            relevance={f"d{i}": 1} if labelled else None,
        )
        for i in range(n)
    ]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(_samples(), path)
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _cells(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM run_scores").fetchone()[0])


# -- eval / run / gate record -------------------------------------------------------------------


def test_streamed_eval_records_the_run_and_every_cell(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "h.sqlite"
    out = tmp_path / "r.jsonl"
    code, stdout, _ = cli(capsys, "eval", str(data), "--metrics", "recall@1,mrr",
                          "--out", str(out), "--history", str(store_path))  # fmt: skip
    assert code == 0
    results = Evaluation.from_jsonl(out)
    run_id = results.metadata[RUN_ID_KEY]
    assert f"recorded run {run_id} in {store_path}" in stdout
    with MonitorStore(store_path) as store:
        (run,) = store.runs()
        cells = store.run_cells(run.run_id)
    assert run.run_id == run_id
    assert run.command == "eval"
    assert run.source == data.as_posix()  # outside a git repository: the absolute path
    assert run.metadata["outcome"] == "passed"
    assert run.metadata["exit_code"] == 0
    assert run.metadata["n_samples"] == 6
    assert run.metadata["cells_kept"] is False  # the streamed path
    assert run.config["metrics"] == "recall@1,mrr"
    assert "out" not in run.config
    assert "history" not in run.config
    summary = results.summary()
    assert {m: s["mean"] for m, s in run.summary.items()} == {m: s.mean for m, s in summary.items()}
    assert len(cells) == 12
    assert {(s, m, c.value) for s, m, c in cells} == {
        (s, m, score.value) for s, m, score in results
    }


def test_streamed_eval_writes_cells_while_it_scores_one_batch_at_a_time(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store_path = tmp_path / "h.sqlite"
    save_samples(_samples(40), data)
    monkeypatch.setattr("ragbridge.core.monitoring.history._BATCH", 8)
    seen: list[int] = []
    real_add = Tally.add

    def add(self: Tally, *cell: Any) -> None:
        real_add(self, *cell)
        if store_path.exists():
            seen.append(_cells(store_path))

    monkeypatch.setattr(Tally, "add", add)
    code, _, _ = cli(capsys, "eval", str(data), "--metrics", "recall@1,mrr",
                     "--history", str(store_path))  # fmt: skip
    assert code == 0
    assert len(seen) == 80
    # the k-th cell is seen by the tally before the writer: at most one batch is pending
    assert all(k - 8 <= stored <= k for k, stored in enumerate(seen))
    assert seen[-1] == 72
    assert _cells(store_path) == 80


def test_eval_interrupted_records_nothing(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store_path = tmp_path / "h.sqlite"
    monkeypatch.setattr("ragbridge.core.monitoring.history._BATCH", 2)
    real_add = Tally.add
    calls = {"n": 0}

    def interrupting_add(self: Tally, *cell: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        real_add(self, *cell)

    monkeypatch.setattr(Tally, "add", interrupting_add)
    code, _, _ = cli(capsys, "eval", str(data), "--metrics", "recall@1,mrr",
                     "--history", str(store_path))  # fmt: skip
    assert code == 130
    with MonitorStore(store_path) as store:
        assert store.runs() == []
    assert _cells(store_path) == 0


def test_eval_that_fails_its_bar_is_recorded_with_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "unlabelled.jsonl"
    save_samples(_samples(labelled=False), data)
    store_path = tmp_path / "h.sqlite"
    code, _, err = cli(capsys, "eval", str(data), "--metrics", "mrr", "--report",
                       str(tmp_path / "r.html"), "--history", str(store_path))  # fmt: skip
    assert code == 1
    assert "mrr: 6 of 6 cells failed" in err
    with MonitorStore(store_path) as store:
        (run,) = store.runs()
        cells = store.run_cells(run.run_id)
    assert run.metadata["outcome"] == "failed"
    assert run.metadata["exit_code"] == 1
    assert run.summary["mrr"]["n_failed"] == 6
    assert {c.failure for _, _, c in cells} == {"missing_input"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics", "recal@5"], "recal@5"),
        (["--history", "{data}"], "--history {data} is the input file"),
        (["--out", "{store}"], "--out and --history name the same file"),
        (["--history", "{cache}"], "an SQLite file but not a ragbridge monitor store"),
        (["--history", "{text}"], "not a ragbridge monitor store (not an SQLite file)"),
    ],
)
def test_usage_errors_record_nothing_and_touch_no_store(
    argv: list[str], message: str, data: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    store_path = tmp_path / "h.sqlite"
    cache = tmp_path / "cache.sqlite"
    with sqlite3.connect(cache) as conn:
        conn.execute("CREATE TABLE replies (key TEXT)")
    conn.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n")
    names = {"data": str(data), "store": str(store_path), "cache": str(cache), "text": str(text)}
    extra = [a.format(**names) for a in argv]
    if "--history" not in extra:
        extra += ["--history", str(store_path)]
    code, _out, err = cli(capsys, "eval", str(data), "--metrics", "mrr", *extra)
    assert code == 2
    assert message.format(**names) in err
    assert len(err.strip().splitlines()) == 1
    assert not store_path.exists()
    with sqlite3.connect(cache) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"replies"}  # nothing was added to the other file
    assert text.read_text() == "not a store\n"


def test_run_records_the_pipeline_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "history_pipeline.py").write_text(
        textwrap.dedent(
            """
            from langchain_core.runnables import RunnableLambda

            def build():
                return RunnableLambda(lambda q: {"answer": "The sky is blue."})
            """
        )
    )
    questions = tmp_path / "questions.jsonl"
    save_samples([s.model_copy(update={"answer": None, "contexts": []}) for s in _samples()],
                 questions)  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "run", "history_pipeline:build", str(questions), "--metrics",
                       "exact_match", "--history", "h.sqlite")  # fmt: skip
    assert code in (0, 1), out
    with MonitorStore(tmp_path / "h.sqlite") as store:
        (run,) = store.runs()
        assert len(store.run_cells(run.run_id)) == 6
    assert run.command == "run"
    assert run.config["pipeline"] == "history_pipeline:build"
    assert run.metadata["exit_code"] == code


def test_gate_records_its_verdict_against_the_recorded_run(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "h.sqlite"
    results = tmp_path / "r.jsonl"
    cli(capsys, "eval", str(data), "--metrics", "mrr", "--out", str(results),
        "--history", str(store_path))  # fmt: skip
    code, out, _ = cli(capsys, "gate", str(results), "--threshold", "mrr=0.99",
                       "--history", str(store_path))  # fmt: skip
    assert code == 0
    with MonitorStore(store_path) as store:
        evaluated, gated = store.runs()
        assert store.run_cells(gated.run_id) == []
    assert f"recorded the check of run {evaluated.run_id} as run {gated.run_id}" in out
    assert gated.command == "gate"
    assert gated.metadata["results_run"] == evaluated.run_id
    assert gated.metadata["outcome"] == "passed"
    assert gated.metadata["checks"] == ["✓ mrr = 1.000, required >= 0.990"]
    assert gated.source == evaluated.source
    assert gated.summary == {}
    code, _, _ = cli(capsys, "gate", str(results), "--threshold", "mrr=1.0",
                     "--history", str(store_path))  # fmt: skip
    code, out, _ = cli(capsys, "history", str(store_path))
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith(evaluated.run_id[:8])]
    assert len(rows) == 1  # gate checks are shown on the run they checked
    assert "passed, gate ✓, gate ✓" in rows[0]


def test_gate_on_unrecorded_results_records_them_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = Evaluation()
    for i in range(5):
        ev.add(f"q{i}", "mrr", Score(value=0.5))
    results = tmp_path / "r.jsonl"
    ev.to_jsonl(results)
    store_path = tmp_path / "h.sqlite"
    code, _, err = cli(capsys, "gate", str(results), "--threshold", "mrr=0.9",
                       "--history", str(store_path))  # fmt: skip
    assert code == 1, err
    with MonitorStore(store_path) as store:
        (run,) = store.runs()
        assert len(store.run_cells(run.run_id)) == 5
    assert run.command == "gate"
    assert run.source == results.as_posix()
    assert run.summary["mrr"]["mean"] == 0.5
    assert run.metadata["outcome"] == "failed"
    assert run.metadata["failed_checks"] == 1
    assert "results_run" not in run.metadata


def test_gate_usage_error_records_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_path = tmp_path / "h.sqlite"
    code, _, err = cli(capsys, "gate", str(tmp_path / "missing.jsonl"), "--threshold", "mrr=0.5",
                       "--history", str(store_path))  # fmt: skip
    assert code == 2
    assert "no such file" in err
    assert not store_path.exists()


# -- ragbridge history --------------------------------------------------------------------------


def _store_with_a_drop(path: Path) -> list[str]:
    rng = np.random.default_rng(3)
    base = rng.uniform(0.7, 1.0, 40)
    columns = [base, np.clip(base + rng.normal(0, 0.02, 40), 0, 1), base - 0.25]
    ids = []
    with MonitorStore(path) as store:
        for k, column in enumerate(columns):
            ev = Evaluation(metadata={"metrics": {"faithfulness": {"provider": "llm"}}})
            for i, value in enumerate(column):
                ev.add(f"s{i}", "faithfulness", Score(value=float(value)))
                ev.add(f"s{i}", "mrr", Score(value=1.0))
            run = record_run(
                store, ev, "eval", "data/eval.jsonl",
                {"judge": "openai:big" if k < 2 else "openai:small", "concurrency": 8},
                f"{k}abc{k}def" * 5, timestamp=1_700_000_000.0 + 3600 * k,
                metadata={"outcome": "passed", "exit_code": 0, "n_samples": 40},
            )  # fmt: skip
            ids.append(run.run_id)
    return ids


def test_history_table_marks_the_run_that_dropped_a_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.sqlite"
    ids = _store_with_a_drop(path)
    code, out, err = cli(capsys, "history", str(path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{path}: 3 runs of data/eval.jsonl, oldest first"
    assert lines[1].split() == ["run", "time", "commit", "command", "outcome", "n",
                                "faithfulness", "mrr"]  # fmt: skip
    rows = {line.split()[0]: line for line in lines[2:5]}
    marked = [r for r in rows.values() if "▼" in r or "▲" in r]
    assert len(marked) == 1
    assert marked[0].startswith(ids[2][:8])
    assert "2abc2de" in marked[0]  # the commit, 7 characters
    (change,) = [line for line in lines if line.startswith("▼ run")]
    assert f"run {ids[2][:8]}" in change
    assert "dropped faithfulness" in change
    assert re.search(
        r"0\.8\d\d → 0\.5\d\d \(-0\.2\d\d, worse; p<0\.001, 40 samples in both\)", change
    )
    assert "changed: judge openai:big → openai:small" in change
    assert "concurrency" not in change


def test_history_limit_metric_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    ids = _store_with_a_drop(path)
    code, out, _ = cli(capsys, "history", str(path), "--limit", "1", "--metric", "faithfulness")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{path}: the last 1 of 3 runs of data/eval.jsonl, oldest first"
    assert lines[1].split()[-1] == "faithfulness"
    assert "▼" in lines[2]  # still set against the run before the window
    code, out, _ = cli(capsys, "history", str(path), "--json", "--source", "data/eval.jsonl")
    assert code == 0
    doc = json.loads(out)
    assert doc["metrics"] == ["faithfulness", "mrr"]
    assert [r["run_id"] for r in doc["runs"]] == ids
    last = doc["runs"][2]["metrics"]["faithfulness"]
    assert last["change"] == "down"
    assert last["worse"] is True
    assert last["previous_run_id"] == ids[1]
    assert last["n_paired"] == 40
    assert doc["runs"][2]["metrics"]["mrr"]["change"] is None
    assert doc["runs"][0]["metrics"]["faithfulness"]["previous_run_id"] is None


def test_history_show_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    ids = _store_with_a_drop(path)
    code, out, _ = cli(capsys, "history", str(path), "--show", ids[2][:10])
    assert code == 0
    assert out.splitlines()[0] == f"run {ids[2]}"
    assert "judge: openai:small" in out
    assert any(line.startswith("faithfulness") and "llm" in line for line in out.splitlines())
    code, out, _ = cli(capsys, "history", str(path), "--show", ids[0], "--json")
    assert json.loads(out)["run_id"] == ids[0]
    code, _, err = cli(capsys, "history", str(path), "--show", "zzz")
    assert code == 2
    assert err.strip() == f"ragbridge: error: no run 'zzz' in {path}"


def test_history_of_an_empty_store_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.sqlite"
    MonitorStore(path).close()
    code, out, _ = cli(capsys, "history", str(path))
    assert code == 0
    assert out.startswith(f"no runs recorded in {path} yet")
    code, out, _ = cli(capsys, "history", str(path), "--json")
    assert json.loads(out)["runs"] == []


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        ("missing", [], "no such file"),
        ("text", [], "not a ragbridge monitor store (not an SQLite file)"),
        ("garbage", [], "not a ragbridge monitor store"),
        ("cache", [], "an SQLite file but not a ragbridge monitor store"),
        ("store", ["--metric", "faithfulnes"], "--metric faithfulnes: no recorded run has it"),
        ("store", ["--source", "other.jsonl"], "recorded sources: data/eval.jsonl"),
        ("store", ["--alpha", "0"], "--alpha must lie within (0, 1)"),
    ],
)
def test_history_bad_store_or_arguments_is_one_line_exit_2(
    setup: str, argv: list[str], message: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = tmp_path / "h.sqlite"
    if setup == "text":
        path.write_text("hello\n")
    elif setup == "garbage":
        path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    elif setup == "cache":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE replies (key TEXT)")
        conn.close()
    elif setup == "store":
        _store_with_a_drop(path)
    code, out, err = cli(capsys, "history", str(path), *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("ragbridge: error: ")
    if setup == "missing":
        assert not path.exists()


def test_the_report_gets_the_history_of_its_source_and_the_input_name(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragbridge.adapters.report as report

    seen: list[dict[str, Any]] = []

    def spy(evaluation: Any, **kw: Any) -> str:
        seen.append(kw)
        return "<html></html>"

    store_path = tmp_path / "h.sqlite"
    argv = ["eval", str(data), "--metrics", "mrr", "--report", str(tmp_path / "r.html")]
    monkeypatch.setattr(report, "render_report", spy)
    assert cli(capsys, *argv)[0] == 0  # no --history: no trend charts
    assert cli(capsys, *argv, "--history", str(store_path))[0] == 0
    assert cli(capsys, *argv, "--history", str(store_path))[0] == 0
    with MonitorStore(store_path) as store:
        first, second = store.runs()
    assert seen[0]["history"] is None
    assert seen[0]["source"] == str(data)
    assert [r.run_id for r in seen[1]["history"]] == [first.run_id]  # this run, not yet recorded
    assert [r.run_id for r in seen[2]["history"]] == [first.run_id, second.run_id]
    assert seen[2]["history"][-1].summary["mrr"]["mean"] == 1.0
