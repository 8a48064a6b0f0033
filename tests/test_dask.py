"""`ragbridge.adapters.dask` on a real LocalCluster of 2 worker processes, offline.

The judge is `FakeOpenAI` on 127.0.0.1, built on each worker from its spec (``openai:…``), so
one server sees every call of every worker: it counts them, and the calls in flight at once,
which is how the cluster-wide cap is checked. Every result is compared with a local run of the
same samples (`ragbridge.core.evaluate`), cell by cell, failures included; only ``latency_s``
may differ.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')

import dask
import dask.bag
from distributed import Client, LocalCluster
from fake_openai import FakeOpenAI

from ragbridge.adapters.dask import evaluate
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Sample, SampleValidationError, load_samples
from ragbridge.core.scoring.partitions import PartStore
from ragbridge.core.scoring.runner import evaluate as local_evaluate
from ragbridge.core.testing import CountingJudge, HashEmbedder

pytest_plugins = ["redis_server"]  # redis_url: a real redis-server on 127.0.0.1 (or a skip)

METRICS = ["faithfulness", "answer_relevance", "context_precision", "recall@3", "mrr"]
JUDGE = "openai:gpt-fake"

# A dead worker's leases come back after the lease timeout (30 s by default): short here, so
# the kill test does not wait on it. Workers get the config from their nanny.
LEASES = {
    "distributed.scheduler.locks.lease-timeout": "2s",
    "distributed.scheduler.locks.lease-validation-interval": "0.2s",
}


def _sample(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"s{i:03d}",
        "question": f"What does clause {i} of the handbook say about leave?",
        "answer": f"Clause {i} grants {i % 7 + 1} days of leave after a year of service.",
        "contexts": [
            {"id": f"d{i}", "text": f"Clause {i}: staff get {i % 7 + 1} days of leave a year."},
            {"id": f"d{i + 1}", "text": "Unrelated text about the canteen opening hours."},
            {"id": f"x{i}", "text": f"Clause {i} was last revised in 20{i % 20:02d}."},
        ],
        "reference": f"{i % 7 + 1} days.",
        "relevance": {f"d{i}": 1, f"x{i}": 2} if i % 5 else {},
    }
    if i % 9 == 4:
        row["answer"] = None  # a typed failure (missing_input) the cluster must reproduce
    return row


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """60 samples in three shards of 20 (one with a blank line, as real files have)."""
    folder = tmp_path_factory.mktemp("shards")
    paths = []
    for n in range(3):
        path = folder / f"shard-{n}.jsonl"
        lines = [json.dumps(_sample(20 * n + i)) for i in range(20)]
        if n == 1:
            lines.insert(7, "")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def _samples(paths: list[Path]) -> list[Sample]:
    return [s for p in paths for s in load_samples(p)]


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """A LocalCluster of 2 worker processes (loopback only), shared by this module's tests."""
    with (
        dask.config.set(LEASES),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as connected,
    ):
        yield connected


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(delay=0.01) as fake:
        yield fake


def _cells(evaluation: Evaluation) -> list[tuple[str, str, dict[str, Any]]]:
    """Every cell with its whole Score, but the wall time it took."""
    out = []
    for sample_id, metric, score in evaluation:
        dumped = score.model_dump(mode="json")
        dumped.pop("latency_s")
        out.append((sample_id, metric, dumped))
    return out


def _local(paths: list[Path], server: FakeOpenAI) -> Evaluation:
    from ragbridge.adapters.openai import OpenAIJudge

    judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key=None)
    return local_evaluate(_samples(paths), METRICS, judge=judge, embedder=HashEmbedder())


def _cluster(paths: Any, server: FakeOpenAI, client: Client, **options: Any) -> Evaluation:
    return evaluate(
        paths,
        METRICS,
        judge=JUDGE,
        embedder="hash",
        base_url=server.base_url,
        client=client,
        **{"partition_size": 8, **options},
    )


def test_cluster_results_equal_the_local_run(
    shards: list[Path], server: FakeOpenAI, client: Client
) -> None:
    local = _local(shards, server)
    calls = server.count("chat")
    seen: list[tuple[str, str]] = []
    done: list[tuple[int, int | None]] = []
    clustered = _cluster(
        [str(shards[0]), str(shards[0].parent / "shard-[12].jsonl")],  # a path and a glob
        server,
        client,
        on_result=lambda s, m, _: seen.append((s, m)),
        progress=lambda d, t: done.append((d, t)),
    )
    assert _cells(clustered) == _cells(local)
    assert seen == [(s, m) for s, m, _ in local]  # on_result in input order
    failures = {c[2]["failure"]["kind"] for c in _cells(clustered) if c[2]["failure"]}
    assert "missing_input" in failures  # typed failures travel too, not only values
    assert server.count("chat") - calls == local.metadata["judge_stats"]["calls"]
    assert clustered.metadata["judge_stats"]["calls"] == local.metadata["judge_stats"]["calls"]
    assert clustered.metadata["cluster"]["partitions"] == 9  # 8 + 8 + 4 per shard of 20
    assert clustered.metadata["cluster"]["workers"] == 2
    assert done[-1] == (60, 60)
    assert [d for d, _ in done] == sorted(d for d, _ in done)


def test_a_bag_of_samples_gives_the_same_cells(
    shards: list[Path], server: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    local = _local(shards, server)
    rows = [json.loads(line) for p in shards for line in p.read_text().splitlines() if line]
    bag = dask.bag.from_sequence(rows, npartitions=4)
    clustered = _cluster(bag, server, client, parts=tmp_path)
    assert _cells(clustered) == _cells(local)
    calls = server.count("chat")
    again = _cluster(bag, server, client, parts=tmp_path)
    assert server.count("chat") == calls  # every bag partition was kept: nothing re-scored
    assert again.metadata["cluster"]["partitions_reused"] == 4
    assert _cells(again) == _cells(local)


def test_one_cap_holds_across_the_cluster(
    shards: list[Path], client: Client, tmp_path: Path
) -> None:
    with FakeOpenAI(delay=0.05) as slow:
        clustered = _cluster(shards, slow, client, max_concurrency=3)
        assert slow.max_in_flight == 3  # reached, and never passed, with 2 workers
        assert clustered.metadata["cluster"]["max_concurrency"] == 3
    with FakeOpenAI(delay=0.05) as slow:  # the control: per-process caps of 3 add up
        evaluate(
            shards,
            METRICS,
            judge=JUDGE,
            embedder="hash",
            base_url=slow.base_url,
            client=client,
            partition_size=8,
            max_concurrency=6,
        )
        assert slow.max_in_flight > 3


def test_a_cluster_made_for_the_run_scores_two_partitions_at_once_per_worker(
    shards: list[Path], client: Client
) -> None:
    """`run.WORKER_THREADS`: a worker of the cluster `evaluate` starts fills the slots one
    partition leaves empty (its last calls, the gap before the next) with a second partition's
    calls. The control is the module's cluster, one partition at a time per worker."""
    from ragbridge.adapters.dask.run import WORKER_THREADS

    assert WORKER_THREADS == 2
    options: dict[str, Any] = {"judge": JUDGE, "partition_size": 1, "max_concurrency": 64}
    with FakeOpenAI(delay=0.3) as slow:
        control = evaluate(
            [shards[0]], ["context_precision"], base_url=slow.base_url, client=client, **options
        )
        one_each = slow.max_in_flight  # 2 workers x one sample's calls
    with FakeOpenAI(delay=0.3) as slow:
        made = evaluate([shards[0]], ["context_precision"], base_url=slow.base_url, **options)
        two_each = slow.max_in_flight
    assert made.metadata["cluster"]["workers"] == 2
    assert two_each > one_each  # 1 thread per worker: never more than one_each
    assert two_each <= 2 * one_each
    assert _cells(made) == _cells(control)


def test_a_rerun_skips_finished_partitions_and_only_those(
    shards: list[Path], server: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    parts = tmp_path / "parts"
    first = _cluster(shards, server, client, parts=parts)
    files = sorted(parts.glob("part-*.jsonl"))
    assert len(files) == 9
    calls = server.count("chat")
    files[3].unlink()  # as if the run had died before this partition finished
    again = _cluster(shards, server, client, parts=parts)
    assert again.metadata["cluster"] == {
        "workers": 2,
        "partitions": 9,
        "partitions_reused": 8,
        "partitions_scored": 1,
        "max_concurrency": 8,
    }
    scored_ids = {s for s, _, _ in Evaluation.from_jsonl(files[3])}
    assert len(scored_ids) == 8
    assert _cells(again) == _cells(first)
    assert 0 < server.count("chat") - calls <= 8 * 3  # that partition's calls, no more

    calls = server.count("chat")
    other = evaluate(  # another judge model: a different config, every partition scored again
        shards,
        METRICS,
        judge="openai:gpt-other",
        embedder="hash",
        base_url=server.base_url,
        client=client,
        partition_size=8,
        parts=parts,
    )
    assert other.metadata["cluster"]["partitions_reused"] == 0
    assert server.count("chat") - calls == local_calls(first)


def local_calls(evaluation: Evaluation) -> int:
    stats: dict[str, int] = evaluation.metadata["judge_stats"]
    return stats["calls"]


def test_a_shared_cache_means_the_second_cluster_run_makes_no_judge_call(
    shards: list[Path], server: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    cache = tmp_path / "shared.sqlite"
    first = _cluster(shards, server, client, cache=cache)
    calls = server.count("chat")
    assert calls == local_calls(first) > 0
    second = _cluster(shards, server, client, cache=cache, reuse_results=False)
    assert server.count("chat") == calls  # every reply came from the cache the workers share
    assert second.metadata["judge_stats"]["calls"] == 0
    assert _cells(second)[0][2]["value"] == _cells(first)[0][2]["value"]


def test_a_redis_cache_is_shared_by_every_worker_of_two_cluster_runs(
    shards: list[Path], server: FakeOpenAI, client: Client, redis_url: str
) -> None:
    first = _cluster(shards, server, client, cache=redis_url)
    calls = server.count("chat")
    assert calls == local_calls(first) > 0
    second = _cluster(shards, server, client, cache=redis_url, reuse_results=False)
    assert server.count("chat") == calls  # replies paid by either worker, read by both
    assert second.metadata["judge_stats"]["calls"] == 0
    third = _cluster(shards, server, client, cache=redis_url, partition_size=5)
    assert server.count("chat") == calls  # other partitions, other workers: still nothing paid
    assert third.metadata["results_reused"]["hits"] > 0
    values = [(s, m, c["value"], c["failure"]) for s, m, c in _cells(first)]
    assert [(s, m, c["value"], c["failure"]) for s, m, c in _cells(third)] == values


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    shards: list[Path], tmp_path: Path
) -> None:
    with (
        dask.config.set(LEASES),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as own,
        FakeOpenAI(delay=0.02) as server,
    ):
        local = _local(shards, server)
        base = server.count("chat")
        pids = own.run(os.getpid)
        victim = sorted(pids.values())[0]
        killed = threading.Event()

        def kill_when_busy() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if server.count("chat") - base >= 40:  # mid-run: some partitions done
                    os.kill(victim, signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.005)

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        parts = tmp_path / "parts"
        clustered = _cluster(shards, server, own, parts=parts, max_concurrency=4)
        killer.join(5)
        assert killed.is_set()
        assert victim not in own.run(os.getpid).values()  # the nanny started a new process
        assert _cells(clustered) == _cells(local)
        ids = [s for s, m, _ in clustered if m == "mrr"]
        assert len(ids) == len(set(ids)) == 60
        store = PartStore(parts)
        assert sorted(p.name for p in parts.iterdir()) == [
            store.path(i).name for i in range(9)
        ]  # one file per partition, no leftovers of the killed attempt


def test_bad_input_is_refused_before_anything_is_scored(
    shards: list[Path], server: FakeOpenAI, client: Client, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_sample(1)) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(SampleValidationError, match=r"bad\.jsonl:2: invalid JSON"):
        _cluster([bad], server, client)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(json.dumps(_sample(3)) + "\n", encoding="utf-8")
    with pytest.raises(SampleValidationError, match=r"twice\.jsonl:1: id: duplicate .*'s003'"):
        _cluster([shards[0], twice], server, client)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        _cluster(str(tmp_path / "nothing-*.jsonl"), server, client)
    assert server.count() == 0
    with pytest.raises(TypeError, match="SQLite path or a cache URL"):
        _cluster(shards, server, client, cache=":memory:")
    with pytest.raises(TypeError, match="built on each worker"):
        evaluate(shards, METRICS, client=client, settings=_settings_with_judge())


def _settings_with_judge() -> Any:
    from ragbridge.core.settings import Settings

    return Settings(judge=CountingJudge())


def test_an_unusable_judge_stops_the_cluster_run(
    shards: list[Path], client: Client, tmp_path: Path
) -> None:
    with FakeOpenAI() as dead:
        dead.script("chat", "401")
        result = _cluster(shards, dead, client, parts=tmp_path)
        assert "401" in result.metadata["aborted"] or "key" in result.metadata["aborted"]
        assert result.metadata["cluster"]["stopped_early"] is True
        # no partition is submitted after the first abort: far fewer than 8 partitions' calls
        assert dead.count("chat") < 9 * 5


def test_a_picklable_judge_object_is_accepted(shards: list[Path], client: Client) -> None:
    clustered = evaluate(
        shards, ["faithfulness"], judge=CountingJudge(), embedder=HashEmbedder(), client=client
    )
    values = [score.value for _, _, score in clustered]
    assert len(values) == 60
    assert all(v is None or 0 <= v <= 1 for v in values)


# -- the command line ---------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from ragbridge.adapters.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _file_cells(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    return _cells(Evaluation.from_jsonl(path))


def test_eval_dask_writes_the_local_runs_results(
    shards: list[Path], server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "all.jsonl"
    data.write_text("".join(p.read_text() for p in shards), encoding="utf-8")
    common = [
        "eval", str(data), "--metrics", ",".join(METRICS), "--judge", JUDGE,
        "--base-url", server.base_url, "--embedder", "hash",
    ]  # fmt: skip
    code_local, out_local, _ = _cli(capsys, *common, "--out", str(tmp_path / "local.jsonl"))
    out_path = tmp_path / "cluster.jsonl"
    code, out, err = _cli(
        capsys, *common, "--out", str(out_path), "--dask", "--workers", "2",
        "--partition-size", "16", "--concurrency", "4",
    )  # fmt: skip
    assert code == code_local
    assert "scoring on a local cluster of 2 workers, 16 samples per partition" in err
    assert _file_cells(out_path) == _file_cells(tmp_path / "local.jsonl")
    assert out.splitlines()[1:-1] == out_local.splitlines()[1:-1]  # the same summary table
    header = Evaluation.from_jsonl(out_path).metadata
    assert header["cluster"]["partitions"] == 4
    assert header["cluster"]["max_concurrency"] == 4
    assert not Path(f"{out_path}.parts").exists()  # removed once the run completed


def test_eval_dask_keeps_parts_for_a_rerun(
    shards: list[Path], server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = tmp_path / "parts"
    argv = [
        "eval", str(shards[0]), "--metrics", "faithfulness,mrr", "--judge", JUDGE,
        "--base-url", server.base_url, "--dask", "--parts", str(parts),
        "--partition-size", "5", "--out", str(tmp_path / "r.jsonl"),
    ]  # fmt: skip
    first, _, _ = _cli(capsys, *argv)
    calls = server.count("chat")
    (parts / "part-000002.jsonl").unlink()
    code, _, err = _cli(capsys, *argv)
    assert code == first == 1  # faithfulness fails its bar: the samples with no answer
    assert "3 of 4 partitions were finished by an earlier run" in err
    assert 0 < server.count("chat") - calls <= 5 * 2
    assert len(list(parts.glob("part-*.jsonl"))) == 4  # --parts given: kept


def test_eval_dask_refuses_what_it_cannot_do(
    shards: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # --repeat with --dask runs on the cluster now (tests/test_cluster_cli.py)
    code, _, err = _cli(capsys, "eval", str(shards[0]), "--dask", "--cache", ":memory:")
    assert code == 2
    assert "cannot be shared by cluster workers" in err
