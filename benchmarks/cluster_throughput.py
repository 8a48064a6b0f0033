"""Where a Dask cluster pays off, and where the plain asyncio engine stays faster.

    python benchmarks/cluster_throughput.py                  # both sections, full sizes (~5 min)
    python benchmarks/cluster_throughput.py --only judge     # 20,000 samples, 50 ms fake judge
    python benchmarks/cluster_throughput.py --only offline   # CPU-bound offline providers
    python benchmarks/cluster_throughput.py --quick          # small sizes, for development
    python benchmarks/cluster_throughput.py --only judge --scale --repeat 3   # + 4 workers, 4x cap

* **judge**: 20,000 seeded synthetic samples scored with ContextPrecision (one judge call per
  sample) against `CountingJudge(delay=0.05)`, a judge that answers every call after 50 ms, at
  the same in-flight cap: the local asyncio engine (`ragbridge.core.evaluate` over the JSONL
  file, as ``ragbridge eval`` streams it) against `ragbridge.adapters.dask.evaluate` on a
  LocalCluster of 1 and 2 worker processes. The floor is ``calls x 50 ms / cap``: no engine can
  beat it, and a real endpoint's rate limit sets the cap. ``--scale`` adds 4 worker processes
  at 4x the cap (its own floor). The judge on the workers records each call's start and end on
  the machine's monotonic clock; the most calls that overlapped, across every worker, is printed
  against the cap (the global bound, counted where the calls are answered).
* **offline**: faithfulness:offline + answer_relevance:offline + context_precision:offline with
  the bundled all-MiniLM-L6-v2 (onnx) embedder, no judge at all: CPU-bound. The local engine,
  then a LocalCluster of 1 and of 2 worker processes (each loads its own model once).

Cluster figures include starting the cluster and its workers (and, offline, loading the model in
each worker), since a one-off ``ragbridge eval --dask`` pays them too; the start is also printed
on its own, and so is the scoring time alone (``run x``: local time over scoring time). Every
cluster run is checked to give the local run's values, cell for cell. ``--repeat N`` runs each
row N times and prints the median (and every run's figure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass
class TimedJudge:
    """`CountingJudge(delay)` that appends each call's (start, end) to a file per process.

    Built on each worker by its factory (``functools.partial(TimedJudge, folder, delay)``);
    CLOCK_MONOTONIC is the machine's, so the files of every worker can be swept together.
    """

    folder: str
    delay: float = 0.05

    def __post_init__(self) -> None:
        from ragbridge.core.testing import CountingJudge

        self.inner = CountingJudge(delay=self.delay)
        self.model = self.inner.model
        self._out = open(  # noqa: SIM115 - kept open for the worker's life, flushed per call
            Path(self.folder) / f"calls-{os.getpid()}-{id(self)}.txt", "a", encoding="utf-8"
        )

    async def generate(self, messages: Any, *, schema: Any = None) -> Any:
        start = time.monotonic()
        try:
            return await self.inner.generate(messages, schema=schema)
        finally:
            self._out.write(f"{start!r} {time.monotonic()!r}\n")
            self._out.flush()


def most_in_flight(folder: Path) -> tuple[int, int]:
    """(calls recorded, the most that overlapped) over every worker's interval file."""
    events: list[tuple[float, int]] = []
    for path in folder.glob("calls-*.txt"):
        for line in path.read_text(encoding="utf-8").splitlines():
            start, end = (float(x) for x in line.split())
            events += [(start, 1), (end, -1)]
    events.sort()  # at a tie an end (-1) sorts first: a call that ended frees its slot
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return len(events) // 2, peak


def _cluster(workers: int) -> tuple[Any, Any, float]:
    import dask
    from distributed import Client, LocalCluster

    from ragbridge.adapters.dask import run

    start = time.perf_counter()
    settings = getattr(run, "WORKER_CONFIG", {})  # an older ragbridge (before/after runs): none
    with dask.config.set(settings):  # the workers `evaluate`'s own LocalCluster would have
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=getattr(run, "WORKER_THREADS", 1),  # as `evaluate`'s own
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        )
    client = Client(cluster)
    client.run(_warm)
    return cluster, client, time.perf_counter() - start


def _warm() -> None:
    """Import what a partition runs, as the workers of `evaluate`'s own LocalCluster do at
    their start (its preload, `ragbridge.adapters.dask.quiet`, imports the package): a
    cluster given to `evaluate` would otherwise import ragbridge inside the first partition."""
    import ragbridge.adapters.dask.worker
    import ragbridge.core.testing  # noqa: F401


def _cpu() -> float:
    """This process's CPU seconds (user + system, every thread)."""
    return time.process_time()


def _profile_start() -> None:
    """Profile the calling thread: run on a worker's (or the scheduler's) event-loop thread.

    The profiler is kept on ``sys``: these functions travel pickled by value (from
    ``__main__``), so each call has globals of its own.
    """
    import cProfile

    profiler = cProfile.Profile(time.thread_time)  # CPU, not wall: the machine is shared
    sys._cluster_throughput_profiler = profiler  # type: ignore[attr-defined]
    profiler.enable()


def _profile_stop(path: str) -> str:
    """Stop `_profile_start`'s profiler and dump it to ``path`` (pid appended)."""
    profiler = sys._cluster_throughput_profiler  # type: ignore[attr-defined]
    profiler.disable()
    out = f"{path}-{os.getpid()}.prof"
    profiler.dump_stats(out)
    return out


def _cpu_line(client: Any, before: dict[str, float], calls: int) -> tuple[str, dict[str, float]]:
    """CPU seconds per 1,000 calls per process since ``before`` (client+scheduler, workers)."""
    after = {"client+scheduler": _cpu(), **client.run(_cpu)}
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    shown = [f"{1000 * spent['client+scheduler'] / calls:.2f} client+scheduler"]
    workers = sorted(v for k, v in spent.items() if k != "client+scheduler")
    shown += [f"{1000 * v / calls:.2f}" for v in workers]
    total = sum(spent.values())
    return (
        f"      CPU s per 1,000 calls: {', '.join(shown[:1])}; workers {' '.join(shown[1:])}; "
        f"all {1000 * total / calls:.2f} ({total:.1f} CPU s)",
        spent,
    )


def _median(runs: Sequence[float]) -> str:
    shown = ", ".join(f"{r:.2f}" for r in runs)
    return f"{statistics.median(runs):.2f} s" + (f" [{shown}]" if len(runs) > 1 else "")


Row = tuple[int, dict[str, Any], float | None]
"""One cluster row: its worker processes, `evaluate`'s keywords, its floor (None: no floor)."""


def _run_both(
    data: Path, metrics: list[str], local_kwargs: dict[str, Any], rows: list[Row], label: str,
    floor: float | None, repeat: int = 1, timed: Path | None = None,
    profile: Path | None = None,
) -> None:  # fmt: skip
    """The local run, then each cluster row, ``repeat`` times each (medians printed)."""
    from ragbridge.adapters.dask import evaluate as cluster_evaluate
    from ragbridge.core.sample import load_samples
    from ragbridge.core.scoring.collector import rare_full_collections
    from ragbridge.core.scoring.runner import evaluate

    local_runs, local_cpu = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), _cpu()
        with rare_full_collections():  # as `ragbridge eval` and the workers score
            local = evaluate(load_samples(data), metrics, **local_kwargs)
        local_runs.append(time.perf_counter() - start)
        local_cpu.append(_cpu() - cpu)
    local_s = statistics.median(local_runs)
    n = len(local.sample_ids)
    line = f"  local asyncio engine      {_median(local_runs)}   {n / local_s:8.0f} samples/s"
    if floor:
        line += f"   ({local_s / floor:.2f}x the floor of {floor:.1f} s)"
    print(line, flush=True)
    print(f"      CPU s per 1,000 samples: {1000 * statistics.median(local_cpu) / n:.2f}")
    expected = _values(local)
    for count, kwargs, row_floor in rows:
        totals, scoring, starts, peaks = [], [], [], []
        for _ in range(repeat):
            for old in timed.glob("calls-*.txt") if timed is not None else ():
                old.unlink()
            cluster, client, started = _cluster(count)
            try:
                before = {"client+scheduler": _cpu(), **client.run(_cpu)}
                if profile is not None:
                    client.run(_profile_start)
                    client.run_on_scheduler(_profile_start)
                begin = time.perf_counter()
                result = cluster_evaluate(str(data), metrics, client=client, **kwargs)
                run_s = time.perf_counter() - begin
                cpu_line, _ = _cpu_line(client, before, n)
                if profile is not None:
                    where = str(profile / f"w{count}")
                    dumped = [*client.run(_profile_stop, where).values()]
                    dumped.append(client.run_on_scheduler(_profile_stop, where + "-sched"))
                    cpu_line += "\n      profiles: " + " ".join(dumped)
            finally:
                client.close()
                cluster.close()
            if _values(result) != expected:
                sys.exit(f"{label}: the cluster's values differ from the local run's")
            totals.append(run_s + started)
            scoring.append(run_s)
            starts.append(started)
            if timed is not None:
                peaks.append(most_in_flight(timed))
        total, run_s = statistics.median(totals), statistics.median(scoring)
        cap = kwargs.get("max_concurrency")
        line = (
            f"  cluster, {count} worker{'s' if count > 1 else ' '}"
            f"{f', cap {cap}' if cap else ''}   {_median(totals)}   {n / total:8.0f} samples/s"
            f"   (start {statistics.median(starts):.1f} s; scoring {_median(scoring)}, "
            f"{n / run_s:.0f} samples/s, local/scoring {local_s / run_s:.2f}x"
        )
        if row_floor:
            line += f", {run_s / row_floor:.2f}x its floor of {row_floor:.1f} s"
        if peaks:
            calls = "/".join(str(c) for c in sorted({c for c, _ in peaks}))
            line += f"; {calls} calls, most in flight {max(p for _, p in peaks)}"
        print(line + "; same values: True)", flush=True)
        print(cpu_line, flush=True)  # the last run's


def judge_section(
    n: int, cap: int, folder: Path, repeat: int, scale: bool,
    workers: Sequence[int] = (1, 2), profile: Path | None = None,
) -> None:  # fmt: skip
    import functools

    from ragbridge.core.testing import CountingJudge

    data = folder / "judge.jsonl"
    write_samples(data, n)
    calls = n  # ContextPrecision: one call per sample
    floor = calls * 0.05 / cap
    timed = folder / "calls"
    timed.mkdir(exist_ok=True)
    print(f"\njudge-bound: {n:,} samples, context_precision, 50 ms judge, cap {cap}")
    judge = functools.partial(TimedJudge, str(timed), 0.05)
    rows: list[Row] = [
        (w, {"judge": judge, "max_concurrency": cap, "partition_size": 500}, floor) for w in workers
    ]
    if scale:
        big = {"judge": judge, "max_concurrency": 4 * cap, "partition_size": 500}
        rows.append((4, big, floor / 4))
    _run_both(
        data,
        ["context_precision"],
        {"judge": CountingJudge(delay=0.05), "max_concurrency": cap},
        rows,
        "judge",
        floor,
        repeat,
        timed,
        profile,
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
        [(w, {"embedder": "local", "partition_size": max(50, n // 8)}, None) for w in (1, 2)],
        "offline",
        None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["judge", "offline"])
    parser.add_argument("--quick", action="store_true", help="small sizes, for development")
    parser.add_argument("--cap", type=int, default=64, help="in-flight cap (default 64)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the median is shown")
    parser.add_argument("--scale", action="store_true", help="judge: add 4 workers at 4x the cap")
    parser.add_argument(
        "--samples", type=int, help="judge: samples (default 20,000; --quick 2,000)"
    )
    parser.add_argument(
        "--workers", default="1,2", help="judge: the cluster rows' worker processes (default 1,2)"
    )
    parser.add_argument(
        "--profile", type=Path, help="judge: cProfile each worker's and the scheduler's loop here"
    )
    args = parser.parse_args()
    print("$ python benchmarks/cluster_throughput.py " + " ".join(sys.argv[1:]))
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.only in (None, "judge"):
            judge_section(
                args.samples or (2_000 if args.quick else 20_000),
                args.cap,
                folder,
                args.repeat,
                args.scale,
                [int(w) for w in args.workers.split(",") if w],
                args.profile,
            )
        if args.only in (None, "offline"):
            offline_section(200 if args.quick else 2_000, folder)


if __name__ == "__main__":  # spawned workers import this module again: run nothing then
    main()
