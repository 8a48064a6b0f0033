"""The results store on PostgreSQL answers as the SQLite one: the store's behaviour tests run on
both backends (a real throwaway cluster, tests/postgres_server.py), plus what only a server
has: concurrent writer processes, an unreachable server, a password that is never shown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from ragbridge.core.monitoring import RequestRecord, RunRecord, ScoreCell, StoreError
from ragbridge.core.monitoring.store_api import ResultsStore, open_store, store_schemes

pytest_plugins = ["postgres_server"]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh store lives: an SQLite path, or a database of the test's own."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    pytest.importorskip("psycopg", reason='psycopg missing: pip install ".[postgres]"')
    url: str = request.getfixturevalue("postgres_url")
    return url


def test_the_entry_points_name_both_schemes() -> None:
    assert {"postgres", "postgresql"} <= set(store_schemes())


def test_requests_round_trip_with_scores_and_feedback(spec: str) -> None:
    with open_store(spec) as store:
        store.add_request(
            RequestRecord(
                request_id="r1", timestamp=10.0, pipeline="chain", retrieval_ms=12.5,
                chunks_retrieved=4, chunks_used=2, retrieval_miss=False, answer_chars=80,
                abstained=False, sampled=True, attributes={"top_ids": ["a", "b"]},
                scores={"faithfulness": ScoreCell(value=0.1)},
            )
        )  # fmt: skip
        store.add_request(RequestRecord(request_id="r2", timestamp=11.0, pipeline="chain"))
        store.add_scores("r1", {"faithfulness": ScoreCell(value=0.75)})  # replaces
        store.add_scores("r1", {"answer_relevance": ScoreCell(failure="timeout")})
        store.add_feedback("r1", 0.0)
        with pytest.raises(KeyError, match="no request 'nope'"):
            store.add_feedback("nope", 1.0)
        with pytest.raises(KeyError, match="no request 'nope'"):
            store.add_scores("nope", {"x": ScoreCell(value=1.0)})
    with open_store(spec) as again:
        first, second = again.requests()
        assert (first.retrieval_ms, first.feedback, first.retrieval_miss) == (12.5, 0.0, False)
        assert first.attributes == {"top_ids": ["a", "b"]}
        assert first.scores["faithfulness"].value == 0.75
        assert first.scores["answer_relevance"].failure == "timeout"
        assert (second.retrieval_ms, second.retrieval_miss, second.scores) == (None, None, {})
        assert [r.request_id for r in again.requests(since=10.5)] == ["r2"]
        assert [r.request_id for r in again.requests(until=10.5, pipeline="chain")] == ["r1"]
        assert again.count_requests() == 2


def test_runs_round_trip_in_time_order_by_prefix_and_in_byte_order(spec: str) -> None:
    with open_store(spec) as store:
        for i, ts in enumerate((30.0, 10.0, 20.0)):
            store.add_run(
                RunRecord(
                    run_id=f"run{i}-abcdef", timestamp=ts, command="eval", source="eval.jsonl",
                    branch="feature/x" if i else None, summary={"mrr": {"mean": i / 10}},
                ),
                # byte order, not a locale's: "B" < "a" < "é"
                [("é", "mrr", ScoreCell(value=i / 10)), ("a", "mrr", ScoreCell(skipped=True)),
                 ("B", "mrr", ScoreCell(failure="timeout")), ("a", "f1", ScoreCell(value=1.0))],
            )  # fmt: skip
        assert [r.run_id for r in store.runs()] == ["run1-abcdef", "run2-abcdef", "run0-abcdef"]
        assert [r.run_id for r in store.runs(limit=2)] == ["run2-abcdef", "run0-abcdef"]
        assert store.runs(source="other.jsonl") == []
        got = store.run("run2")
        assert (got.summary, got.branch, got.timestamp) == (
            {"mrr": {"mean": 0.2}},
            "feature/x",
            20.0,
        )
        assert store.run("run0-abcdef").branch is None
        cells = store.run_cells("run2-abcdef")
        assert [(s, m) for s, m, _ in cells] == [
            ("B", "mrr"),
            ("a", "f1"),
            ("a", "mrr"),
            ("é", "mrr"),
        ]
        assert cells[3][2] == ScoreCell(value=0.2)
        with pytest.raises(KeyError, match="ambiguous"):
            store.run("run")
        with pytest.raises(KeyError, match="no run"):
            store.run("RUN0")  # a prefix is compared as text: case counts
        with pytest.raises(KeyError, match="no run"):
            store.run("run_")  # and is not a LIKE pattern
        with pytest.raises(ValueError, match="already recorded"):
            store.add_run(RunRecord(run_id="run0-abcdef", command="eval"))
        assert len(store.run_cells("run0-abcdef")) == 4  # the refused run wrote nothing


def test_a_streamed_runs_cells_come_before_its_row_and_can_be_deleted(spec: str) -> None:
    with open_store(spec) as store:
        store.add_run_cells("r1", [("s1", "mrr", ScoreCell(value=1.0))])
        store.add_run_cells("r1", [("s2", "mrr", ScoreCell(value=0.5))])
        assert store.runs() == []
        store.add_run(RunRecord(run_id="r1", command="eval"))
        assert [c[0] for c in store.run_cells("r1")] == ["s1", "s2"]
        store.add_run_cells("r2", [("s1", "mrr", ScoreCell(value=0.0))])
        store.delete_run_cells("r2")
        assert store.run_cells("r2") == []


def test_writes_from_many_threads_all_land(spec: str) -> None:
    with open_store(spec) as store:

        def write(k: int) -> None:
            for i in range(50):
                store.add_request(RequestRecord(request_id=f"{k}-{i}", timestamp=float(i)))

        threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.count_requests() == 200
        assert isinstance(store, ResultsStore)


_WRITER = textwrap.dedent(
    """
    import sys
    from ragbridge.core.monitoring import RunRecord, ScoreCell, open_store
    spec, k, samples, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    run_id = f"writer-{k}"
    cells = [(f"s{i:05d}", f"m{j}", ScoreCell(value=(i * metrics + j) % 101 / 100))
             for i in range(samples) for j in range(metrics)]
    with open_store(spec) as store:
        for start in range(0, len(cells), 1000):  # as RunCellWriter streams them
            store.add_run_cells(run_id, cells[start:start + 1000])
        store.add_run(RunRecord(run_id=run_id, command="eval", source="s.jsonl"))
    """
)


def test_40050_cells_from_six_concurrent_writer_processes_all_land_exactly(spec: str) -> None:
    """Six processes stream a run each (6,675 cells in 1,000-cell transactions) at once:
    every cell of every run is there, once, and nothing else."""
    writers, samples, metrics = 6, 1335, 5
    open_store(spec).close()  # created once, so the writers race on rows, not on the schema
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, spec, str(k), str(samples), str(metrics)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for k in range(writers)
    ]
    errors = [err for p in procs if p.wait(timeout=300) != 0 for err in [p.communicate()[1]]]
    assert errors == []
    with open_store(spec) as store:
        runs = store.runs()
        assert sorted(r.run_id for r in runs) == [f"writer-{k}" for k in range(writers)]
        total = 0
        for k in range(writers):
            cells = store.run_cells(f"writer-{k}")
            assert len({(s, m) for s, m, _ in cells}) == len(cells) == samples * metrics
            assert cells[7] == ("s00001", "m2", ScoreCell(value=(1 * metrics + 2) % 101 / 100))
            total += len(cells)
        assert total == 40_050


def test_two_threads_recording_one_run_id_one_wins(spec: str) -> None:
    with open_store(spec) as store:
        outcomes: list[str] = []
        barrier = threading.Barrier(2)

        def record(k: int) -> None:
            barrier.wait()
            try:
                store.add_run(
                    RunRecord(run_id="same", command="eval"), [(f"s{k}", "m", ScoreCell())]
                )
                outcomes.append("ok")
            except ValueError:
                outcomes.append("refused")

        threads = [threading.Thread(target=record, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["ok", "refused"]
        assert len(store.run_cells("same")) == 1


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    pytest.importorskip("psycopg")
    from postgres_server import free_port

    url = f"postgresql://ci:hunter2-secret@127.0.0.1:{free_port()}/evals?connect_timeout=2"
    with pytest.raises(OSError, match="cannot connect") as caught:
        open_store(url)
    text = str(caught.value)
    assert "hunter2" not in text
    assert "\n" not in text
    assert text.startswith("store postgresql://ci:***@127.0.0.1:")
    assert "cannot connect" in text
    assert "PostgreSQL server running" in text


def test_a_wrong_password_is_refused_without_showing_it(postgres_server_url: str) -> None:
    url = postgres_server_url.replace(":s3cret-Pw-never-shown@", ":wrong-Pw-xyz@") + "/postgres"
    with pytest.raises(OSError, match="cannot connect") as caught:
        open_store(url)
    assert "wrong-Pw-xyz" not in str(caught.value)


def test_a_newer_schema_on_the_server_is_refused(postgres_url: str) -> None:
    import psycopg

    open_store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as raw:
        raw.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreError, match=r"newer ragbridge \(store schema 99") as caught:
        open_store(postgres_url)
    assert "s3cret" not in str(caught.value)


def test_every_history_command_works_on_postgres_and_never_prints_the_password(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``eval``, ``gate``, ``history`` and ``report`` take ``--history postgresql://...``: the
    runs land on the server, and no output ever shows the password."""
    from ragbridge.adapters.cli import main
    from ragbridge.core.sample import Context, Sample, save_samples

    data = tmp_path / "eval.jsonl"
    samples = [
        Sample(id=f"q{i}", question=f"fact {i}?", answer="blue",
               contexts=[Context(text="blue", id=d) for d in (f"d{i}", "x")],
               relevance={f"d{i}": 1})
        for i in range(4)
    ]  # fmt: skip
    save_samples(samples, data)
    out, page = tmp_path / "r.jsonl", tmp_path / "r.html"
    said = []
    for argv in (
        [
            "eval",
            str(data),
            "--metrics",
            "recall@1,mrr",
            "--out",
            str(out),
            "--history",
            postgres_url,
        ],
        ["gate", str(out), "--threshold", "mrr=0.1", "--history", postgres_url],
        ["history", postgres_url],
        ["history", postgres_url, "--json"],
        ["report", str(out), "--history", postgres_url, "--out", str(page)],
    ):
        code = main(argv)
        text = "".join(capsys.readouterr())
        assert code == 0, text
        assert "s3cret" not in text
        said.append(text)
    assert "***@127.0.0.1" in said[0]
    assert "s3cret" not in page.read_text()
    with open_store(postgres_url) as store:
        runs = store.runs()
        assert [r.command for r in runs] == ["eval", "gate"]
        assert runs[0].summary["mrr"]["mean"] == pytest.approx(1.0)
        assert len(store.run_cells(runs[0].run_id)) == 8
    assert runs[0].run_id[:8] in said[2]


def test_an_unreachable_history_is_one_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    from postgres_server import free_port

    from ragbridge.adapters.cli import main

    url = f"postgresql://ci:hunter2-secret@127.0.0.1:{free_port()}/evals?connect_timeout=2"
    assert main(["history", url]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err
    assert "postgresql://ci:***@127.0.0.1" in err
    assert "cannot connect" in err


def test_without_psycopg_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.adapters.cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "ragbridge.adapters.postgres_store", raising=False)
    with pytest.raises(ImportError, match=r'pip install "\.\[postgres\]"'):
        open_store("postgresql://ci:pw-x@127.0.0.1:1/evals")
    assert main(["history", "postgresql://ci:pw-x@127.0.0.1:1/evals"]) == 2
    err = capsys.readouterr().err
    assert "postgres]" in err
    assert "pw-x" not in err
