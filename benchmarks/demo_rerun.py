"""How much faster ``ragbridge demo`` is when rerun in the same folder.

    python benchmarks/demo_rerun.py              # two runs in a fresh temporary folder (~1.5 min)
    python benchmarks/demo_rerun.py --runs 3     # a second warm run, to see the spread

Runs ``ragbridge demo --out DIR`` as a subprocess ``--runs`` times in one temporary folder (the
first run is cold: empty folder, empty embedding cache; the others are warm: the cache in DIR
is full) and prints each wall time, with the process start-up included, since that is what a
user waits for. The child inherits this environment unchanged, so it measures what a user gets.
Not a test: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def ragbridge_command() -> list[str]:
    """The ``ragbridge`` console script next to this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("ragbridge")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "ragbridge.adapters.cli"]


def run_once(out: Path) -> float:
    """Seconds for one ``ragbridge demo --out out``; exits with its code if it fails."""
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
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs in the same folder (>= 2)")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2 (one cold, one warm)")
    print(f"$ python benchmarks/demo_rerun.py --runs {args.runs}")
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    folder = Path(tempfile.mkdtemp(prefix="ragbridge-demo-rerun-"))
    try:
        out = folder / "demo"
        times = [run_once(out) for _ in range(args.runs)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"cold (empty folder):  {times[0]:6.1f} s")
    for i, seconds in enumerate(times[1:], start=1):
        print(f"warm (rerun {i}):       {seconds:6.1f} s")
    best_warm = min(times[1:])
    print(f"rerun saves {times[0] - best_warm:.1f} s ({best_warm / times[0]:.0%} of cold)")


if __name__ == "__main__":
    main()
