"""`MonitorStore`: requests and runs survive a reopen, unmeasured fields stay None, bad files and
newer schemas are refused by name."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ragbridge.core.monitoring import (
    MonitorStore,
    RequestRecord,
    RunRecord,
    ScoreCell,
    StoreError,
)


def test_requests_round_trip_with_scores_and_feedback(tmp_path: Path) -> None:
    path = tmp_path / "m" / "monitor.sqlite"
    with MonitorStore(path) as store:
        store.add_request(
            RequestRecord(
                request_id="r1", timestamp=10.0, pipeline="chain", retrieval_ms=12.5,
                chunks_retrieved=4, chunks_used=2, retrieval_miss=False, answer_chars=80,
                abstained=False, sampled=True, attributes={"top_ids": ["a", "b"]},
            )
        )  # fmt: skip
        store.add_request(RequestRecord(request_id="r2", timestamp=11.0, pipeline="chain"))
        store.add_scores("r1", {"faithfulness": ScoreCell(value=0.75)})
        store.add_scores("r1", {"answer_relevance": ScoreCell(failure="timeout")})
        store.add_feedback("r1", 0.0)
        with pytest.raises(KeyError, match="no request 'nope'"):
            store.add_feedback("nope", 1.0)
        with pytest.raises(ValueError, match="feedback"):
            store.add_feedback("r1", 2.0)
    with MonitorStore(path) as again:
        first, second = again.requests()
        assert first.retrieval_ms == 12.5
        assert first.feedback == 0.0
        assert first.attributes == {"top_ids": ["a", "b"]}
        assert first.scores["faithfulness"].value == 0.75
        assert first.scores["answer_relevance"].failure == "timeout"
        # what was not measured stays None, not 0 or False
        assert second.retrieval_ms is None
        assert second.retrieval_miss is None
        assert second.scores == {}
        assert [r.request_id for r in again.requests(since=10.5)] == ["r2"]
        assert again.count_requests() == 2


def test_runs_round_trip_in_time_order_and_by_prefix(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "h.sqlite") as store:
        for i, ts in enumerate((30.0, 10.0, 20.0)):
            store.add_run(
                RunRecord(
                    run_id=f"run{i}-abcdef", timestamp=ts, command="eval", source="eval.jsonl",
                    summary={"mrr": {"mean": i / 10}},
                ),
                [("s1", "mrr", ScoreCell(value=i / 10)), ("s2", "mrr", ScoreCell(skipped=True))],
            )  # fmt: skip
        assert [r.run_id for r in store.runs()] == ["run1-abcdef", "run2-abcdef", "run0-abcdef"]
        assert [r.run_id for r in store.runs(limit=2)] == ["run2-abcdef", "run0-abcdef"]
        assert store.run("run2").summary == {"mrr": {"mean": 0.2}}
        cells = store.run_cells("run2-abcdef")
        assert cells[0] == ("s1", "mrr", ScoreCell(value=0.2))
        assert cells[1][2].skipped
        with pytest.raises(KeyError, match="ambiguous"):
            store.run("run")
        with pytest.raises(ValueError, match="already recorded"):
            store.add_run(RunRecord(run_id="run0-abcdef", command="eval"))


def test_writes_from_many_threads_all_land(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "t.sqlite") as store:

        def write(k: int) -> None:
            for i in range(50):
                store.add_request(RequestRecord(request_id=f"{k}-{i}", timestamp=float(i)))

        threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.count_requests() == 200


def test_a_file_that_is_not_a_store_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is not a database, it is a text file with enough bytes " * 20)
    with pytest.raises(StoreError, match=r"notes\.sqlite: not a ragbridge monitor store"):
        MonitorStore(bad)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    MonitorStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StoreError, match="newer ragbridge"):
        MonitorStore(path)


def test_a_score_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="less than or equal to 1"):
        ScoreCell(value=1.5)


def test_a_streamed_runs_cells_come_before_its_row_and_can_be_deleted(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "s.sqlite") as store:
        store.add_run_cells("r1", [("s1", "mrr", ScoreCell(value=1.0))])
        store.add_run_cells("r1", [("s2", "mrr", ScoreCell(value=0.5))])
        assert store.runs() == []  # readers look for the row: no half run is shown
        store.add_run(RunRecord(run_id="r1", command="eval"))
        assert [c[0] for c in store.run_cells("r1")] == ["s1", "s2"]
        store.add_run_cells("r2", [("s1", "mrr", ScoreCell(value=0.0))])
        store.delete_run_cells("r2")
        assert store.run_cells("r2") == []
        assert len(store.run_cells("r1")) == 2


def test_reading_the_store_does_not_import_the_scorer_or_the_alerts() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ragbridge.core.monitoring as m; m.MonitorStore, m.RunRecord; "
        "print(sorted(n for n in ('ragbridge.core.monitoring.shadow', 'ragbridge.core.scoring', "
        "'ragbridge.core.monitoring.alerts', 'ragbridge.core.metrics') if n in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_lazy_export_resolves() -> None:
    import ragbridge.core.monitoring as monitoring

    assert set(monitoring.__all__) == set(monitoring._EXPORTS)
    for name in monitoring.__all__:
        assert getattr(monitoring, name) is not None
