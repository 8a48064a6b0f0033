"""Where a Dask cluster pays off, and where the plain asyncio engine stays faster.

    python benchmarks/cluster_throughput.py                  # both sections, full sizes (~5 min)
    python benchmarks/cluster_throughput.py --only judge     # 20,000 samples, 50 ms fake judge
    python benchmarks/cluster_throughput.py --only offline   # CPU-bound offline providers
    python benchmarks/cluster_throughput.py --quick          # small sizes, for development

* **judge**: 20,000 seeded synthetic samples scored with ContextPrecision (one judge call per
  sample) against `CountingJudge(delay=0.05)`, a judge that answers every call after 50 ms, at
  the same in-flight cap: the local asyncio engine (`ragbridge.core.evaluate` over the JSONL
  file, as ``ragbridge eval`` streams it) against `ragbridge.adapters.dask.evaluate` on a
  LocalCluster of 1 and 2 worker processes. The floor is ``calls x 50 ms / cap``: no engine can
  beat it, and a real endpoint's rate limit sets the cap.
* **offline**: faithfulness:offline + answer_relevance:offline + context_precision:offline with
  the bundled all-MiniLM-L6-v2 (onnx) embedder, no judge at all: CPU-bound. The local engine,
  then a LocalCluster of 1 and of 2 worker processes (each loads its own model once).

Cluster figures include starting the cluster and its workers (and, offline, loading the model in
each worker), since a one-off ``ragbridge eval --dask`` pays them too; the start is also printed
on its own. Every cluster run is checked to give the local run's values, cell for cell.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = [
    "leave",
    "policy",
    "staff",
    "annual",
    "days",
    "service",
    "contract",
    "clause",
    "manager",
    "approval",
    "notice",
    "weeks",
    "salary",
    "holiday",
    "request",
    "office",
    "remote",
    "travel",
    "expense",
    "budget",
    "report",
    "review",
    "team",
    "project",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_samples(path: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            row = {
                "id": f"s{i:06d}",
                "question": _text(rng, 10)[:-1] + "?",
                "answer": _text(rng, 18),
                "reference": _text(rng, 12),
                "contexts": [{"id": f"d{i}-{k}", "text": _text(rng, 40)} for k in range(3)],
            }
            out.write(json.dumps(row) + "\n")


def _values(evaluation: Any) -> dict[tuple[str, str], Any]:
    return {(s, m): (score.value, score.failure) for s, m, score in evaluation}


def _cluster(workers: int) -> tuple[Any, Any, float]:
    from distributed import Client, LocalCluster

    start = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address="127.0.0.1:0",
        host="127.0.0.1",
    )
    client = Client(cluster)
    return cluster, client, time.perf_counter() - start


def _run_both(
    data: Path, metrics: list[str], local_kwargs: dict[str, Any], cluster_kwargs: dict[str, Any],
    workers: tuple[int, ...], label: str, floor: float | None,
) -> None:  # fmt: skip
    from ragbridge.adapters.dask import evaluate as cluster_evaluate
    from ragbridge.core.sample import load_samples
    from ragbridge.core.scoring.runner import evaluate

    start = time.perf_counter()
    local = evaluate(load_samples(data), metrics, **local_kwargs)
    local_s = time.perf_counter() - start
    n = len(local.sample_ids)
    line = f"  local asyncio engine      {local_s:7.2f} s   {n / local_s:8.0f} samples/s"
    if floor:
        line += f"   ({local_s / floor:.2f}x the floor of {floor:.1f} s)"
    print(line, flush=True)
    expected = _values(local)
    for count in workers:
        cluster, client, started = _cluster(count)
        try:
            begin = time.perf_counter()
            result = cluster_evaluate(str(data), metrics, client=client, **cluster_kwargs)
            run_s = time.perf_counter() - begin
        finally:
            client.close()
            cluster.close()
        same = _values(result) == expected
        total = run_s + started
        line = (
            f"  cluster, {count} worker{'s' if count > 1 else ' '}       {total:7.2f} s   "
            f"{n / total:8.0f} samples/s   (start {started:.1f} s, scoring {run_s:.2f} s, "
            f"{n / run_s / count:.0f} samples/s per worker; same values: {same})"
        )
        print(line, flush=True)
        if not same:
            sys.exit(f"{label}: the cluster's values differ from the local run's")


def judge_section(n: int, cap: int, folder: Path) -> None:
    from ragbridge.core.testing import CountingJudge

    data = folder / "judge.jsonl"
    write_samples(data, n)
    calls = n  # ContextPrecision: one call per sample
    floor = calls * 0.05 / cap
    print(f"\njudge-bound: {n:,} samples, context_precision, 50 ms judge, cap {cap}")
    judge = CountingJudge(delay=0.05)
    _run_both(
        data,
        ["context_precision"],
        {"judge": judge, "max_concurrency": cap},
        {"judge": CountingJudge(delay=0.05), "max_concurrency": cap, "partition_size": 500},
        (1, 2),
        "judge",
        floor,
    )


def offline_section(n: int, folder: Path) -> None:
    from ragbridge.adapters.local import LocalEmbedder

    data = folder / "offline.jsonl"
    write_samples(data, n)
    metrics = ["faithfulness:offline", "answer_relevance:offline", "context_precision:offline"]
    print(f"\nCPU-bound: {n:,} samples, {', '.join(metrics)}, all-MiniLM-L6-v2 (onnx)")
    _run_both(
        data,
        metrics,
        {"embedder": LocalEmbedder()},
        {"embedder": "local", "partition_size": max(50, n // 8)},
        (1, 2),
        "offline",
        None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["judge", "offline"])
    parser.add_argument("--quick", action="store_true", help="small sizes, for development")
    parser.add_argument("--cap", type=int, default=64, help="in-flight cap (default 64)")
    args = parser.parse_args()
    print("$ python benchmarks/cluster_throughput.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.only in (None, "judge"):
            judge_section(2_000 if args.quick else 20_000, args.cap, folder)
        if args.only in (None, "offline"):
            offline_section(200 if args.quick else 2_000, folder)


if __name__ == "__main__":  # spawned workers import this module again: run nothing then
    main()
