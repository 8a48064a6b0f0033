"""How much faster ``ragbridge demo`` is when rerun in the same folder, and whether its cache grows.

    python benchmarks/demo_rerun.py              # two runs in a fresh temporary folder (~1 min)
    python benchmarks/demo_rerun.py --runs 3     # a second warm run, to see the spread

Runs ``ragbridge demo --out DIR`` as a subprocess ``--runs`` times in one temporary folder (the
first run is cold: empty folder, empty cache; the others are warm: the cache in DIR is full)
and prints each wall time, with the process start-up included, since that is what a user waits
for, and the rows of each table of ``DIR/cache.sqlite`` after each run. A rerun that changed
nothing should reuse every kept Score, vector and reply, so it adds no row: the growth per
rerun is printed, and it is 0 when the result keys cover only what decides a Score (a sample's
volatile ``metadata["latency_s"]`` must not be part of them). What the last rerun read back
instead of computing (LlamaIndex's chunks, the RAGAS comparison: the ``ragbridge: reused``
lines of its stderr) is printed after the table.

The summary line gives the rerun's time as a share of the cold run (the goal is <= 0.5x) and
what it saved as a share of the cold run: saved / cold, so the two add up to 100%.

The child inherits this environment unchanged, so it measures what a user gets. Not a test:
the figures depend on the machine and on what else runs on it (note ``uptime`` beside them).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TABLES = ("results", "replies", "embeddings")
"""Tables of the SQLite cache counted after each run (kept Scores, judge replies, vectors)."""


def ragbridge_command() -> list[str]:
    """The ``ragbridge`` console script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("ragbridge")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "ragbridge.adapters.cli"]


def run_once(out: Path) -> tuple[float, str]:
    """Seconds for one ``ragbridge demo --out out``, and its stderr; exits with its code if it
    fails."""
    start = time.perf_counter()
    done = subprocess.run(
        [*ragbridge_command(), "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        sys.exit(f"ragbridge demo exited {done.returncode}")
    return seconds, done.stderr


def cache_rows(path: Path) -> dict[str, int]:
    """Rows of each of `TABLES` in the SQLite cache at ``path`` (0 for a missing table)."""
    counts = dict.fromkeys(TABLES, 0)
    if not path.exists():
        return counts
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        for table in TABLES:
            if table in names:
                counts[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return counts


def summary(times: list[float]) -> str:
    """``rerun 4.1 s = 0.27x cold; saves 11.1 s (73% of cold)``, from the best warm run."""
    cold, warm = times[0], min(times[1:])
    saved = cold - warm
    return (
        f"rerun {warm:.1f} s = {warm / cold:.2f}x cold (goal <= 0.5x); "
        f"saves {saved:.1f} s ({saved / cold:.0%} of cold)"
    )


def growth(rows: list[dict[str, int]]) -> str:
    """``+0 results, +0 replies, +0 embeddings``: the largest growth of any rerun, per table."""
    parts = []
    for table in TABLES:
        most = max(after[table] - before[table] for before, after in itertools.pairwise(rows))
        parts.append(f"{most:+d} {table}")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs in the same folder (>= 2)")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2 (one cold, one warm)")
    print(f"$ python benchmarks/demo_rerun.py --runs {args.runs}")
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    folder = Path(tempfile.mkdtemp(prefix="ragbridge-demo-rerun-"))
    times: list[float] = []
    rows: list[dict[str, int]] = []
    stderr = ""
    try:
        out = folder / "demo"
        for _ in range(args.runs):
            seconds, stderr = run_once(out)
            times.append(seconds)
            rows.append(cache_rows(out / "cache.sqlite"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for i, (seconds, counts) in enumerate(zip(times, rows, strict=True)):
        label = "cold (empty folder):" if i == 0 else f"warm (rerun {i}):"
        table = ", ".join(f"{counts[t]} {t}" for t in TABLES)
        print(f"{label:<22}{seconds:6.1f} s   cache rows: {table}")
    print(summary(times))
    print(f"cache growth per rerun (largest): {growth(rows)}")
    for line in stderr.splitlines():
        if line.startswith("ragbridge: reused"):
            print("last rerun " + line.removeprefix("ragbridge: "))


if __name__ == "__main__":
    main()
