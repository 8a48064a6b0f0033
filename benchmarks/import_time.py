"""How long ``import ragbridge.core`` takes in fresh interpreters (the architecture's 150 ms bound).

    python benchmarks/import_time.py [--runs 15]

Prints the median and min over fresh subprocesses of: the bare import (names are exported lazily),
first use of `Sample` (pydantic), and every core module (pydantic + numpy + our code), with the
interpreter's own start-up subtracted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CASES = {
    "python -c pass (baseline)": "pass",
    "import ragbridge.core": "import ragbridge.core",
    "from ragbridge.core import Sample": "from ragbridge.core import Sample",
    "all core modules": (
        "import ragbridge.core as c\nfor n in c.__all__: getattr(c, n)\n"
        "import ragbridge.core.retrieval, ragbridge.core.stats"
    ),
}

TIMER = "import time; t = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"


def measure(code: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", TIMER.format(code=code)],
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(float(done.stdout.strip().splitlines()[-1]) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"# python benchmarks/import_time.py --runs {args.runs}")
    print(f"# {sys.version.split()[0]}, times in ms measured inside the child interpreter")
    print(f"{'what':<36} {'median':>8} {'min':>8}")
    for label, code in CASES.items():
        times = measure(code, args.runs)
        print(f"{label:<36} {statistics.median(times):8.1f} {min(times):8.1f}")


if __name__ == "__main__":
    main()
