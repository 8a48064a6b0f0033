"""Peak memory of ``ragbridge eval`` as the input file grows: the command streams its input.

Writes seeded synthetic eval sets (each sample: a question, an answer, five ranked contexts with
ids, relevance labels) of each size, runs ``ragbridge eval FILE --metrics recall@5,mrr`` on each
in a fresh process, and prints the file size, the wall time and the peak RSS (the child's
``ru_maxrss``, read by a small wrapper process so that every measurement starts from zero).

    python benchmarks/cli_memory.py                       # 10,000 and 100,000 samples
    python benchmarks/cli_memory.py --sizes 1000,10000    # quicker
    python benchmarks/cli_memory.py --source OLD_TREE     # the same run on another checkout

``--source`` puts a folder holding ``ragbridge/core`` and ``ragbridge/adapters`` (for a checkout,
make one with two symlinks) first on ``PYTHONPATH``, to measure another version the same way.
``--out`` also writes every result. Without ``--report`` the command holds no result either: each
streams to ``--out`` as it is scored and the summary is kept as a tally (8 bytes a value). What
still grows with size is ~0.13 KB per sample: the ids seen, for the duplicate check and for
counting each sample once in the ranking measures' id check.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WRAPPER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(done.returncode, peak_kib)
sys.stderr.write(done.stderr.decode()[-2000:])
"""


def write_samples(path: Path, n: int, seed: int = 0) -> None:
    """``n`` samples; the relevant document is ranked somewhere in the top 5, or missed."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            relevant = f"doc-{rng.randrange(10_000)}"
            ranking = [f"doc-{rng.randrange(10_000)}" for _ in range(5)]
            if rng.random() < 0.7:
                ranking[rng.randrange(5)] = relevant
            row = {
                "id": f"q{i}",
                "question": f"What does section {i} of the handbook say about leave?",
                "answer": f"Section {i} says employees get {rng.randrange(20, 30)} days of leave.",
                "contexts": [
                    {"id": doc, "text": f"Passage {doc}: policy text about topic {i}."}
                    for doc in ranking
                ],
                "relevance": {relevant: 1},
            }
            fh.write(json.dumps(row) + "\n")


def measure(data: Path, source: str | None, out: Path | None = None) -> tuple[int, int, float, str]:
    """Exit code, peak RSS (KiB) and wall time of one ``ragbridge eval`` in a fresh process."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "ragbridge.adapters.cli", "eval", str(data),
        "--metrics", "recall@5,mrr",
    ]  # fmt: skip
    if out is not None:
        command += ["--out", str(out)]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *command],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    wall = time.perf_counter() - started
    code, peak = (int(x) for x in done.stdout.split())
    return code, peak, wall, done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated sample counts")
    parser.add_argument("--source", help="folder with ragbridge/{core,adapters} to measure")
    parser.add_argument("--out", action="store_true", help="also write the results (--out)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"$ python benchmarks/cli_memory.py --sizes {args.sizes}", end="")
    print(" --out" if args.out else "", end="")
    print(f" --source {args.source}" if args.source else "")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    print(f"{'samples':>8}  {'file MB':>8}  {'peak RSS MB':>11}  {'wall s':>7}  exit")
    with tempfile.TemporaryDirectory(prefix="ragbridge-cli-memory-") as tmp:
        for n in sizes:
            data = Path(tmp) / f"eval-{n}.jsonl"
            write_samples(data, n)
            out = Path(tmp) / f"results-{n}.jsonl" if args.out else None
            code, peak_kib, wall, err = measure(data, args.source, out)
            size_mb = data.stat().st_size / 1e6
            print(f"{n:>8,}  {size_mb:>8.1f}  {peak_kib / 1024:>11.0f}  {wall:>7.1f}  {code}")
            if code != 0 and err:
                print("   stderr: " + err.splitlines()[-1])


if __name__ == "__main__":
    main()
