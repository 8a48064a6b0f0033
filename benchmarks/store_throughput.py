"""Write and read throughput of the results store: SQLite file vs PostgreSQL server.

For each backend: one writer records a run of ``--cells`` cells (default 100,000) the way
``ragbridge eval --history`` streams them (1,000-cell transactions, then the run's row), then
the run's cells are read back (``run_cells``, in sample, metric order); then ``--writers``
processes (default 8) each stream a run of ``cells / writers`` cells at the same moment, and
the store is checked to hold exactly every cell of every run, once. Printed per backend: cells
per second of wall time and of the client's CPU time (user + system of this process or of the
writer processes; the server's own CPU is not counted), and the exact counts.

    python benchmarks/store_throughput.py                       # starts a throwaway cluster
    python benchmarks/store_throughput.py --postgres postgresql://user@host/db   # a server of yours
    python benchmarks/store_throughput.py --cells 20000 --writers 4

Without ``--postgres`` a cluster is started as the tests start it (tests/postgres_server.py:
``initdb`` + ``pg_ctl`` on 127.0.0.1 in a temporary folder) with its durable settings (fsync
on), as the SQLite file is (WAL, synchronous=FULL). The machine's load average is printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WRITER = textwrap.dedent(
    """
    import resource, sys, time
    from ragbridge.core.monitoring import RunRecord, ScoreCell, open_store
    spec, run_id, n, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    cells = [(f"s{i // 8:07d}", f"m{i % 8}", ScoreCell(value=(i % 101) / 100)) for i in range(n)]
    with open_store(spec) as store:
        while time.time() < start_at:
            time.sleep(0.001)
        began = time.perf_counter()
        use = resource.getrusage(resource.RUSAGE_SELF)
        cpu = use.ru_utime + use.ru_stime
        for start in range(0, n, 1000):
            store.add_run_cells(run_id, cells[start:start + 1000])
        store.add_run(RunRecord(run_id=run_id, command="eval", source="bench.jsonl"))
        wall = time.perf_counter() - began
        use = resource.getrusage(resource.RUSAGE_SELF)
        print(wall, use.ru_utime + use.ru_stime - cpu)
    """
)


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _cells(n: int) -> list[tuple[str, str, object]]:
    from ragbridge.core.monitoring import ScoreCell

    return [(f"s{i // 8:07d}", f"m{i % 8}", ScoreCell(value=(i % 101) / 100)) for i in range(n)]


def one_writer(spec: str, n: int) -> dict[str, float]:
    """Stream one run of ``n`` cells, then read them back; seconds of wall and CPU each."""
    from ragbridge.core.monitoring import RunRecord, open_store

    cells = _cells(n)
    with open_store(spec) as store:
        wall, cpu = time.perf_counter(), _cpu()
        for start in range(0, n, 1000):
            store.add_run_cells("single", cells[start : start + 1000])  # type: ignore[arg-type]
        store.add_run(RunRecord(run_id="single", command="eval", source="bench.jsonl"))
        write = (time.perf_counter() - wall, _cpu() - cpu)
        wall, cpu = time.perf_counter(), _cpu()
        back = store.run_cells("single")
        read = (time.perf_counter() - wall, _cpu() - cpu)
    if len(back) != n or back[0][2] != cells[0][2]:
        raise SystemExit(f"{spec}: read back {len(back)} cells of {n}")
    return {
        "write_wall": write[0],
        "write_cpu": write[1],
        "read_wall": read[0],
        "read_cpu": read[1],
    }


def many_writers(spec: str, n: int, writers: int) -> dict[str, float]:
    """``writers`` processes stream ``n // writers`` cells each, starting together; checked."""
    from ragbridge.core.monitoring import open_store

    each = n // writers
    open_store(spec).close()
    start_at = time.time() + 3.0  # every process imported and connected before the start
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, spec, f"w{k}", str(each), str(start_at)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for k in range(writers)
    ]
    outputs = [p.communicate(timeout=1800)[0].split() for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise SystemExit(f"{spec}: a writer process failed")
    wall = max(float(o[0]) for o in outputs)  # from the common start to the last one done
    cpu = sum(float(o[1]) for o in outputs)
    with open_store(spec) as store:
        counts = [len(store.run_cells(f"w{k}")) for k in range(writers)]
        distinct = [len({(s, m) for s, m, _ in store.run_cells(f"w{k}")}) for k in range(writers)]
        recorded = sorted(r.run_id for r in store.runs() if r.run_id.startswith("w"))
    exact = counts == distinct == [each] * writers and recorded == [f"w{k}" for k in range(writers)]
    return {"wall": wall, "cpu": cpu, "cells": float(sum(counts)), "exact": float(exact)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--postgres", help="a database URL (default: a throwaway cluster)")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {os.cpu_count()} cpus")
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="store-bench-")))
        specs: dict[str, tuple[str, str]] = {}
        if args.only in (None, "sqlite"):
            specs["sqlite"] = (str(folder / "one.sqlite"), str(folder / "many.sqlite"))
        if args.only in (None, "postgres"):
            if args.postgres:
                specs["postgres"] = (args.postgres, args.postgres)
            else:
                sys.path.insert(0, str(ROOT / "tests"))
                from postgres_server import create_database, postgres_server

                server = stack.enter_context(postgres_server(durable=True))
                specs["postgres"] = (create_database(server), create_database(server))
        for name, (one, many) in specs.items():
            single = one_writer(one, args.cells)
            crowd = many_writers(many, args.cells, args.writers)
            n = args.cells
            print(
                f"{name:8s} write {n / single['write_wall']:>9,.0f} cells/s "
                f"({n / single['write_cpu']:>9,.0f}/CPU s)  read {n / single['read_wall']:>9,.0f} "
                f"cells/s ({n / single['read_cpu']:>9,.0f}/CPU s)  {args.writers} writers "
                f"{crowd['cells'] / crowd['wall']:>9,.0f} cells/s "
                f"({crowd['cells'] / crowd['cpu']:>9,.0f}/CPU s), {int(crowd['cells']):,} cells "
                f"{'exact' if crowd['exact'] else 'NOT EXACT'}"
            )
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
