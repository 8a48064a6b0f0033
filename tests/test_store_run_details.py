"""Store schema 3: each cell keeps the judge's reason and details (claims, verdicts), and a run
keeps its samples' question, answer, reference and contexts (cut short, saying so), so
``ragbridge serve`` can show a sample's details. A schema-2 store is upgraded and reads back;
both backends round-trip the new fields; recording a run with or without its samples."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragbridge.core.monitoring import MonitorStore, RunRecord, ScoreCell
from ragbridge.core.monitoring.history import RunCellWriter, cell_of, record_run
from ragbridge.core.monitoring.migrations import SCHEMA_VERSION
from ragbridge.core.monitoring.sample_records import (
    MAX_CONTEXT_CHARS,
    MAX_CONTEXTS,
    sample_record,
)
from ragbridge.core.monitoring.store_api import open_store
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Sample

pytest_plugins = ["postgres_server"]

# The tables exactly as ragbridge's schema-2 store had them: schema 1's, then step 2 (copied
# from core/monitoring/store.py and migrations.py before schema 3; never edit).
SCHEMA_2_SQLITE = """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY, ts REAL NOT NULL, pipeline TEXT, question TEXT,
    retrieval_ms REAL, generation_ms REAL, chunks_retrieved INTEGER, chunks_used INTEGER,
    retrieval_miss INTEGER, answer_chars INTEGER, abstained INTEGER, sampled INTEGER NOT NULL,
    error TEXT, feedback REAL, attributes TEXT NOT NULL
);
CREATE INDEX requests_ts ON requests (ts);
CREATE TABLE request_scores (
    request_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL, failure TEXT,
    skipped INTEGER NOT NULL, PRIMARY KEY (request_id, metric)
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, ts REAL NOT NULL, command TEXT NOT NULL, source TEXT,
    git_commit TEXT, config TEXT NOT NULL, summary TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX runs_ts ON runs (ts);
CREATE TABLE run_scores (
    run_id TEXT NOT NULL, sample_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL,
    failure TEXT, skipped INTEGER NOT NULL, PRIMARY KEY (run_id, sample_id, metric)
);
ALTER TABLE runs ADD COLUMN branch TEXT;
CREATE INDEX runs_branch_ts ON runs (branch, ts);
CREATE INDEX runs_source_ts ON runs (source, ts);
INSERT INTO meta VALUES ('schema', '2');"""

SCHEMA_2_POSTGRES = """CREATE TABLE meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE requests (
    request_id TEXT COLLATE "C" PRIMARY KEY, ts DOUBLE PRECISION NOT NULL,
    pipeline TEXT COLLATE "C", question TEXT, retrieval_ms DOUBLE PRECISION,
    generation_ms DOUBLE PRECISION, chunks_retrieved BIGINT, chunks_used BIGINT,
    retrieval_miss INTEGER, answer_chars BIGINT, abstained INTEGER, sampled INTEGER NOT NULL,
    error TEXT, feedback DOUBLE PRECISION, attributes TEXT NOT NULL
);
CREATE INDEX requests_ts ON requests (ts);
CREATE TABLE request_scores (
    request_id TEXT COLLATE "C" NOT NULL, metric TEXT COLLATE "C" NOT NULL,
    value DOUBLE PRECISION, failure TEXT, skipped INTEGER NOT NULL,
    PRIMARY KEY (request_id, metric)
);
CREATE TABLE runs (
    run_id TEXT COLLATE "C" PRIMARY KEY, ts DOUBLE PRECISION NOT NULL,
    command TEXT COLLATE "C" NOT NULL, source TEXT COLLATE "C", git_commit TEXT,
    config TEXT NOT NULL, summary TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX runs_ts ON runs (ts);
CREATE TABLE run_scores (
    run_id TEXT COLLATE "C" NOT NULL, sample_id TEXT COLLATE "C" NOT NULL,
    metric TEXT COLLATE "C" NOT NULL, value DOUBLE PRECISION, failure TEXT,
    skipped INTEGER NOT NULL, PRIMARY KEY (run_id, sample_id, metric)
);
ALTER TABLE runs ADD COLUMN branch TEXT;
CREATE INDEX runs_branch_ts ON runs (branch, ts);
CREATE INDEX runs_source_ts ON runs (source, ts);
INSERT INTO meta VALUES ('schema', '2')"""

_RUN = ("0190a3f2c4e19b2d4f10", 1700000000.5, "eval", "eval.jsonl", "a" * 40, "{}",
        '{"mrr": {"mean": 0.25}}', "{}", "main")  # fmt: skip
_CELLS = [(_RUN[0], "q2", "mrr", 0.25, None, 0), (_RUN[0], "q1", "mrr", None, "timeout", 0),
          (_RUN[0], "q1", "f1", None, None, 1)]  # fmt: skip
_OLD_CELLS = [
    ("q1", "f1", ScoreCell(skipped=True)),
    ("q1", "mrr", ScoreCell(failure="timeout")),
    ("q2", "mrr", ScoreCell(value=0.25)),
]
DETAILS = {"claims": [{"claim": "Paris is in France.", "verdict": "supported"}], "n": 1}


def _sample(sid: str = "q1", contexts: int = 2, chars: int = 10) -> Sample:
    return Sample(
        id=sid,
        question="Where is Paris?",
        answer="In France.",
        reference="France",
        contexts=[{"id": f"c{k}", "text": "x" * chars} for k in range(contexts)],
    )


def _new_fields_round_trip(spec: str) -> None:
    """Write a run with reasons, details and samples; read it all back."""
    cells = [
        ("q1", "faithfulness", ScoreCell(value=0.5, reason="one of two claims", details=DETAILS)),
        ("q1", "mrr", ScoreCell(value=1.0)),
        ("q2", "faithfulness", ScoreCell(failure="timeout", reason="no answer in 30 s")),
        ("q2", "mrr", ScoreCell(value=0.0, details=[{"rank": 1, "relevant": False}])),
    ]
    record = sample_record(_sample())
    with open_store(spec) as store:
        store.add_run_samples("r1", [("q1", record)])
        store.add_run(RunRecord(run_id="r1", timestamp=1.0, command="eval"), cells)
        assert store.run_cells("r1") == cells
        assert store.run_sample("r1", "q1") == record
        assert store.run_sample("r1", "q2") is None
        assert store.run_sample("nope", "q1") is None


def test_a_schema_2_file_is_upgraded_to_3_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as raw:
        raw.executescript(SCHEMA_2_SQLITE)
        raw.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", _RUN)
        raw.executemany("INSERT INTO run_scores VALUES (?, ?, ?, ?, ?, ?)", _CELLS)
    raw.close()
    with MonitorStore(path) as store:
        (run,) = store.runs()
        assert (run.run_id, run.branch, run.summary) == (_RUN[0], "main", {"mrr": {"mean": 0.25}})
        assert store.run_cells(_RUN[0]) == _OLD_CELLS  # no reason, no details: None
        assert store.run_sample(_RUN[0], "q1") is None
    assert SCHEMA_VERSION == 3
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("3",)
    raw.close()
    _new_fields_round_trip(str(path))


def test_a_schema_2_database_is_upgraded_to_3_and_reads_back(postgres_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(postgres_url, autocommit=True) as raw:
        for statement in SCHEMA_2_POSTGRES.split(";"):
            raw.execute(statement)
        raw.execute("INSERT INTO runs VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", _RUN)
        with raw.cursor() as cursor:
            cursor.executemany("INSERT INTO run_scores VALUES (%s, %s, %s, %s, %s, %s)", _CELLS)
    with open_store(postgres_url) as store:
        (run,) = store.runs()
        assert (run.run_id, run.branch) == (_RUN[0], "main")
        assert store.run_cells(_RUN[0]) == _OLD_CELLS
        assert store.run_sample(_RUN[0], "q1") is None
    with psycopg.connect(postgres_url) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("3",)
    _new_fields_round_trip(postgres_url)


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    pytest.importorskip("psycopg", reason='psycopg missing: pip install ".[postgres]"')
    url: str = request.getfixturevalue("postgres_url")
    return url


def test_reasons_details_and_samples_round_trip(spec: str) -> None:
    _new_fields_round_trip(spec)


def test_recorded_and_streamed_runs_keep_their_samples(spec: str) -> None:
    ev = Evaluation()
    ev.add("q1", "faithfulness", Score(value=0.5, reason="half", details=DETAILS))
    ev.add("q2", "faithfulness", Score.fail("timeout", "the judge did not answer"))
    samples = [_sample("q1"), _sample("q2", contexts=0)]
    with open_store(spec) as store:
        run = record_run(store, ev, "eval", samples=samples, run_id="kept", branch="b")
        assert store.run_sample("kept", "q2") == sample_record(samples[1])
        cells = dict(((s, m), c) for s, m, c in store.run_cells(run.run_id))
        assert cells[("q1", "faithfulness")] == ScoreCell(value=0.5, reason="half", details=DETAILS)
        assert cells[("q2", "faithfulness")].reason == "the judge did not answer"
        # a caller without samples records as before: cells, no sample records
        record_run(store, ev, "eval", run_id="bare", branch="b")
        assert store.run_sample("bare", "q1") is None
        # recording an id again is refused and leaves the recorded run's samples alone
        with pytest.raises(ValueError, match="already recorded"):
            record_run(store, ev, "eval", samples=samples[:1], run_id="kept", branch="b")
        assert store.run_sample("kept", "q1") == sample_record(samples[0])
        # the streamed path: cells in batches, then the samples, then the row
        with RunCellWriter(store, "streamed", batch=1) as writer:
            for sid, metric, score in ev:
                writer.add(sid, metric, score)
            writer.finish(
                RunRecord(run_id="streamed", timestamp=2.0, command="eval"), iter(samples)
            )
        assert store.run_sample("streamed", "q1") == sample_record(samples[0])

        # an interrupted stream leaves neither cells nor samples behind
        def interrupted() -> None:
            with RunCellWriter(store, "lost") as writer:
                writer.add("q1", "faithfulness", Score(value=0.5))
                writer.flush()
                store.add_run_samples("lost", [("q1", sample_record(samples[0]))])
                raise RuntimeError("interrupted")

        with pytest.raises(RuntimeError):
            interrupted()
        assert store.run_cells("lost") == []
        assert store.run_sample("lost", "q1") is None


def test_a_sample_record_is_cut_and_says_so() -> None:
    small = sample_record(_sample(contexts=2, chars=10))
    assert small == {
        "question": "Where is Paris?",
        "answer": "In France.",
        "reference": "France",
        "contexts": [{"id": "c0", "text": "x" * 10}, {"id": "c1", "text": "x" * 10}],
    }
    big = sample_record(_sample(contexts=MAX_CONTEXTS + 5, chars=MAX_CONTEXT_CHARS + 1))
    assert big["cut"] is True
    assert big["contexts_total"] == MAX_CONTEXTS + 5
    assert len(big["contexts"]) == MAX_CONTEXTS
    assert all(len(c["text"]) == MAX_CONTEXT_CHARS for c in big["contexts"])
    long_text = sample_record(_sample(contexts=1, chars=MAX_CONTEXT_CHARS + 1))
    assert long_text["cut"] is True
    assert "contexts_total" not in long_text


def test_cell_of_keeps_the_reason_and_details() -> None:
    assert cell_of(Score(value=0.5, reason="why", details=DETAILS)) == ScoreCell(
        value=0.5, reason="why", details=DETAILS
    )
    assert cell_of(Score(value=1.0)) == ScoreCell(value=1.0)  # nothing to keep: None


@pytest.mark.parametrize("report", [False, True], ids=["streamed", "kept"])
def test_eval_with_history_keeps_each_samples_texts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: bool
) -> None:
    from ragbridge.adapters.cli import main
    from ragbridge.core.sample import save_samples

    samples = [_sample(f"q{i}", contexts=3) for i in range(4)]
    data = tmp_path / "eval.jsonl"
    save_samples(samples, data)
    store_path = tmp_path / "h.sqlite"
    argv = ["eval", str(data), "--metrics", "token_f1", "--history", str(store_path)]
    if report:  # every cell kept: the run is recorded by record_run
        argv += ["--report", str(tmp_path / "r.html")]
    assert main(argv) == 0, capsys.readouterr()
    with MonitorStore(store_path) as store:
        (run,) = store.runs()
        assert len(store.run_cells(run.run_id)) == 4
        for sample in samples:
            assert store.run_sample(run.run_id, sample.id) == sample_record(sample)
