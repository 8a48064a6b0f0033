"""``ragbridge run`` and ``ragbridge langsmith`` with ``--dask``, ``--repeat`` on the cluster, and
the duplicate-id check at scale (`IdLedger`: ids spill to sorted runs on disk past a threshold).

The cluster is a LocalCluster of 2 worker processes on loopback, started once for the module as
``tests/test_dask.py`` starts it; the commands reach it by its scheduler address (``--dask
tcp://127.0.0.1:…``). The judge is `FakeOpenAI` on 127.0.0.1: it answers deterministically and
counts every call of every worker, so a cluster run is compared with the local run of the same
command cell by cell (all but ``latency_s``), and "nothing paid" is a count of 0.
"""

from __future__ import annotations

import json
import random
import textwrap
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')

import dask.bag
from distributed import Client, LocalCluster
from fake_openai import FakeOpenAI

from ragbridge.adapters.cli import main
from ragbridge.adapters.dask import evaluate
from ragbridge.core import id_spill
from ragbridge.core.id_spill import IdLedger
from ragbridge.core.records import load_records
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import SampleValidationError
from ragbridge.core.scoring.partitions import plan_partitions

DATA = Path(__file__).parent / "data"
JUDGE = "openai:gpt-fake"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Client, str]]:
    """A LocalCluster of 2 worker processes (loopback only), and its scheduler's address."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as local,
        Client(local) as client,
    ):
        yield client, local.scheduler_address


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(delay=0.005) as fake:
        yield fake


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _cells(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for sample_id, metric, score in Evaluation.from_jsonl(path):
        dumped = score.model_dump(mode="json")
        dumped.pop("latency_s")
        out.append((sample_id, metric, dumped))
    return out


def _rows(n: int, *, repeat: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """``n`` samples; ``repeat`` maps a row to the earlier row whose id it takes."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"s{(repeat or {}).get(i, i):04d}",
                "question": f"What does clause {i} of the handbook say about leave?",
                "answer": f"Clause {i} grants {i % 7 + 1} days of leave after a year.",
                "contexts": [
                    {"id": f"d{i}", "text": f"Clause {i}: staff get {i % 7 + 1} days of leave."},
                    {"id": f"x{i}", "text": "Unrelated text about the canteen."},
                ],
                "reference": f"{i % 7 + 1} days.",
                "relevance": {f"d{i}": 1},
            }
        )
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _same_summary(out: str, local: str) -> None:
    """The summary tables agree (the first line names the run's files, the last its time)."""
    assert out.splitlines()[1:-1] == local.splitlines()[1:-1]


# -- run and langsmith on the cluster -----------------------------------------------------------


PIPELINE = """
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

DOCS = {f"d{i}": f"Clause {i}: staff get {i % 7 + 1} days of leave." for i in range(40)}

class Lookup(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        n = int(query.split("clause ")[1].split(" ")[0])
        return [Document(page_content=DOCS[f"d{n}"], id=f"d{n}"),
                Document(page_content="Unrelated text.", id=f"x{n}")]

def build():
    retriever = Lookup()
    return RunnableLambda(
        lambda q: {"answer": "Leave: " + retriever.invoke(q)[0].page_content}
    )
"""


def test_run_dask_writes_the_local_runs_results(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "leave_pipeline.py").write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    questions = [{k: r[k] for k in ("id", "question", "reference", "relevance")} for r in _rows(24)]
    data = _write(tmp_path / "questions.jsonl", questions)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    common = [
        "run", "leave_pipeline:build", str(data), "--metrics", "faithfulness,recall@1,mrr",
        "--judge", JUDGE, "--base-url", server.base_url, "--embedder", "hash",
    ]  # fmt: skip
    code_local, out_local, _ = _cli(capsys, *common, "--out", "local.jsonl")
    local_calls = server.count("chat")
    assert local_calls > 0
    code, out, err = _cli(
        capsys, *common, "--out", "cluster.jsonl", "--dask", cluster[1], "--partition-size", "5"
    )  # fmt: skip
    assert code == code_local
    assert f"scoring on {cluster[1]}, 5 samples per partition" in err
    assert _cells(tmp_path / "cluster.jsonl") == _cells(tmp_path / "local.jsonl")
    _same_summary(out, out_local)
    assert server.count("chat") == 2 * local_calls  # the same calls, made by the workers
    header = Evaluation.from_jsonl(tmp_path / "cluster.jsonl").metadata
    assert header["cluster"]["partitions"] == 5  # 24 samples by 5
    assert not Path("cluster.jsonl.parts").exists()


def test_run_dask_scores_the_saved_samples_file(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "leave_pipeline2.py").write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    questions = [{k: r[k] for k in ("id", "question", "relevance")} for r in _rows(6)]
    data = _write(tmp_path / "questions.jsonl", questions)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    parts = tmp_path / "parts"
    argv = [
        "run", "leave_pipeline2:build", str(data), "--metrics", "recall@1", "--save-samples",
        "captured.jsonl", "--dask", cluster[1], "--parts", str(parts), "--partition-size", "4",
    ]  # fmt: skip
    code, out, _ = _cli(capsys, *argv)
    assert code == 0, out
    assert "recall@1  1.000" in out
    assert len(list(parts.glob("part-*.jsonl"))) == 2
    code, _, err = _cli(capsys, *argv)  # the pipeline ran again: its samples carry new latencies
    assert code == 0
    assert "2 kept partitions not reused: their samples changed" in err


def test_langsmith_dask_writes_the_local_runs_results(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("langsmith")
    common = [
        "langsmith", str(DATA / "langsmith_runs.jsonl"), "--judge", JUDGE,
        "--base-url", server.base_url, "--embedder", "hash",
    ]  # fmt: skip
    local = tmp_path / "local.jsonl"
    code_local, out_local, _ = _cli(capsys, *common, "--out", str(local))
    clustered = tmp_path / "cluster.jsonl"
    code, out, err = _cli(
        capsys, *common, "--out", str(clustered), "--dask", cluster[1], "--partition-size", "1"
    )  # fmt: skip
    assert code == code_local
    assert "scoring on" in err
    cells = _cells(clustered)
    assert cells == _cells(local)
    assert {m for _, m, _ in cells} == {"faithfulness", "answer_relevance"}
    _same_summary(out, out_local)
    assert Evaluation.from_jsonl(clustered).metadata["cluster"]["partitions"] == len(
        {s for s, _, _ in cells}
    )


def test_repeat_runs_on_the_cluster_as_on_one_machine(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _write(tmp_path / "data.jsonl", _rows(12))
    common = [
        "eval", str(data), "--metrics", "faithfulness,mrr", "--judge", JUDGE,
        "--base-url", server.base_url, "--repeat", "3",
    ]  # fmt: skip
    local = tmp_path / "local.jsonl"
    code_local, out_local, _ = _cli(
        capsys, *common, "--out", str(local), "--cache", str(tmp_path / "local.db")
    )
    local_calls = server.count("chat")
    clustered = tmp_path / "cluster.jsonl"
    code, out, err = _cli(
        capsys, *common, "--out", str(clustered), "--cache", str(tmp_path / "cluster.db"),
        "--dask", cluster[1], "--partition-size", "5",
    )  # fmt: skip
    assert code == code_local
    assert "--repeat 3 --dask" in err
    assert server.count("chat") - local_calls == local_calls  # runs 2..3 paid again, as locally
    assert _cells(clustered) == _cells(local)  # run 1: what --out describes
    _same_summary(out, out_local)  # the repeatability table and the judge-call line
    assert "repeatability over 3 runs" in out
    header = Evaluation.from_jsonl(clustered).metadata
    assert header["repeatability"] == Evaluation.from_jsonl(local).metadata["repeatability"]
    assert header["cluster"]["partitions"] == 3
    assert not list(tmp_path.glob("cluster.jsonl*.parts"))  # every run's folder removed


# -- the duplicate-id check at scale -----------------------------------------------------------


def test_a_duplicate_past_the_spill_is_refused_with_its_line_before_a_call(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _write(tmp_path / "data.jsonl", _rows(60, repeat={47: 3}))
    writes: list[int] = []
    spill = IdLedger._write_run

    def counted(self: IdLedger, records: list[Any]) -> None:
        writes.append(len(records))
        spill(self, records)

    monkeypatch.setattr(id_spill, "SPILL_AT", 8)
    monkeypatch.setattr(IdLedger, "_write_run", counted)
    code, _, err = _cli(
        capsys, "eval", str(data), "--metrics", "faithfulness", "--judge", JUDGE,
        "--base-url", server.base_url, "--dask", cluster[1],
    )  # fmt: skip
    assert code == 2
    # the validating pass (`load_records(..., spill_ids=True)`) meets it first, as today
    assert f"{data}:48: id: duplicate record id 's0003' (first on line 4)" in err
    assert len(writes) >= 60 // 8  # the ids went to disk: 8 at most were held
    assert max(writes) <= 8
    assert server.count() == 0


def _pass_error(shards: list[str], spill_at: int | None) -> str | None:
    """The error of the planning pass over ``shards``, and of the validating pass over each
    shard (`load_records` with ``spill_ids``), ids spilling past ``spill_at``."""
    errors = []
    try:
        for _ in plan_partitions(shards, 3, "config", spill_at=spill_at):
            pass
    except SampleValidationError as exc:
        errors.append(str(exc))
    with pytest.MonkeyPatch.context() as patch:
        if spill_at is not None:
            patch.setattr(id_spill, "SPILL_AT", spill_at)
        for shard in shards:
            try:
                for _ in load_records(shard, spill_ids=True):
                    pass
            except SampleValidationError as exc:
                errors.append(str(exc))
    return " | ".join(errors) or None


def test_the_spilled_check_says_what_the_in_memory_check_says(tmp_path: Path) -> None:
    rng = random.Random(34)
    for trial in range(40):
        shards = []
        for n in range(rng.randint(1, 3)):
            lines = [
                json.dumps({"id": f"i{rng.randrange(120)}", "question": "q"})
                for _ in range(rng.randint(1, 30))
            ]
            if rng.random() < 0.3:
                lines.insert(rng.randrange(len(lines) + 1), "{not json")
            if rng.random() < 0.2:
                lines.insert(rng.randrange(len(lines) + 1), "")
            shards.append(str(_write_lines(tmp_path / f"t{trial}-{n}.jsonl", lines)))
        expected = _pass_error(shards, spill_at=10**9)  # never spills: today's dictionary
        for spill_at in (1, 2, 5):
            assert _pass_error(shards, spill_at) == expected, (trial, spill_at)
    assert (
        _pass_error(
            [
                str(
                    _write_lines(
                        tmp_path / "ok.jsonl",
                        ['{"id": 1, "question": "q"}', '{"id": "2", "question": "q"}'],
                    )
                )
            ],
            1,
        )
        is None
    )


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_json_error_after_a_spilled_duplicate_reports_the_duplicate(tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"k{i}", "question": "q"}) for i in range(20)]
    lines[15] = json.dumps({"id": "k2", "question": "q"})
    lines.append("{not json")
    path = str(_write_lines(tmp_path / "d.jsonl", lines))
    error = _pass_error([path], spill_at=4)
    assert error == (
        f"{path}:16: id: duplicate sample id 'k2' (first in {path}:3) | "
        f"{path}:16: id: duplicate record id 'k2' (first on line 3)"
    )
    lines[15] = json.dumps({"id": "k15", "question": "q"})
    path = str(_write_lines(tmp_path / "e.jsonl", lines))
    assert (_pass_error([path], spill_at=4) or "").startswith(f"{path}:21: invalid JSON")


def test_memory_of_the_check_is_bounded_by_the_spill_threshold() -> None:
    n = 60_000

    def peak(add: Any) -> int:
        tracemalloc.start()
        try:
            add()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def dictionary() -> None:
        seen: dict[str, tuple[int, int]] = {}
        for i in range(n):
            seen[f"sample-{i:012d}"] = (0, i + 1)

    def ledger() -> None:
        with IdLedger(spill_at=2_000) as ids:
            for i in range(n):
                assert ids.add(f"sample-{i:012d}", (0, i + 1)) is None
            assert ids.finish() is None
            assert ids.spilled

    before, after = peak(dictionary), peak(ledger)
    assert after < before / 5, (before, after)


def test_a_bag_with_a_repeated_id_is_refused_before_a_judge_call(
    cluster: tuple[Client, str],
    server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = _rows(30, repeat={26: 5})
    monkeypatch.setattr(id_spill, "SPILL_AT", 4)  # the client-side ledger spills
    bag = dask.bag.from_sequence(rows, npartitions=5)  # 6 items per partition
    with pytest.raises(ValueError, match="duplicate sample id") as refused:
        evaluate(bag, ["faithfulness"], judge=JUDGE, base_url=server.base_url, client=cluster[0])
    assert str(refused.value).startswith(
        "bag partition 4, item 2: id: duplicate sample id 's0005' (first in partition 0, item 5)"
    )
    assert server.count() == 0
    no_id = dask.bag.from_sequence([{"question": "q"}], npartitions=1)
    with pytest.raises(ValueError, match=r"bag partition 0, item 0: id: a non-empty string"):
        evaluate(no_id, ["faithfulness"], judge=JUDGE, base_url=server.base_url, client=cluster[0])
    assert server.count() == 0


def _first_repeat(pairs: list[tuple[str, tuple[int, int]]]) -> tuple[Any, ...] | None:
    """What one pass with a dictionary stops at: the id, where first read, where again."""
    seen: dict[str, tuple[int, int]] = {}
    for sample_id, where in pairs:
        if sample_id in seen:
            return sample_id, seen[sample_id], where
        seen[sample_id] = where
    return None


def test_the_ledger_is_exact_for_any_id_and_any_number_of_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(id_spill, "MERGE_FAN_IN", 3)  # runs merged into longer runs first
    rng = random.Random(7)
    pieces = ["a\tb", "x\ny", "\n", 'q"', "é", "\\", "\\n", "\x01", "\ud800", "ÿ", "", "a"]
    for _ in range(50):
        pool = rng.randint(1, 600)
        pairs = [
            (rng.choice(pieces) + rng.choice(pieces) + str(rng.randrange(pool)), (k // 40, k % 40))
            for k in range(rng.randint(1, 250))
        ]
        for spill_at in (1, 3, 8, 10_000):
            with IdLedger(spill_at) as ledger:
                found = ledger.add_all(pairs) or ledger.finish()
            got = None if found is None else (found.sample_id, found.first, found.again)
            assert got == _first_repeat(pairs), spill_at
