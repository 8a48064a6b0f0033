"""Throughput of ``ragbridge eval --out`` with six measures that call no model.

Writes seeded synthetic eval sets (each sample: a question, an answer with a number in it, a
reference, five ranked contexts drawn from a 10,000-passage corpus, so a context id always
names the same text, as retrieval from one corpus does, and a relevance label), runs

    ragbridge eval FILE --metrics recall@4,mrr,ndcg@4,token_f1,exact_match,context_usage --out R

in a fresh process, ``--repeat`` times per size, and prints the median wall time, the cells per
second (samples × 6 / wall, the process's start included), the same per second of CPU time
(user + system: what the run costs, less sensitive than wall time to other processes on a
shared machine) and the median peak RSS (the largest ``ru_maxrss`` of the run's processes,
read by a small wrapper process so that every measurement starts from zero). ``eval`` splits
such a run over one process per core (`ragbridge.core.scoring.cores`): the CPU time is then
every process's, and the peak RSS the largest one process reached (the machine holds about one
such peak per process). ``--processes 1`` measures the one-process run.

    python benchmarks/cheap_measures.py                      # 20,000 and 100,000 samples, 3 runs
    python benchmarks/cheap_measures.py --sizes 20000 --repeat 1
    python benchmarks/cheap_measures.py --source OLD_TREE    # the same runs on another checkout
    python benchmarks/cheap_measures.py --processes 1        # in one process, as before
    python benchmarks/cheap_measures.py --sizes 100000 --repeat 1 --floor

``--floor`` also times, in this process, the two costs every ``eval --out`` pays whatever its
measures: reading and validating the samples (the CLI's own reader, ``load_samples``) and
writing the cells (``ResultWriter.add``, on the cells the last run wrote). It prints each per
sample and per cell and the cells per second a run could reach if its measures cost nothing: a
ceiling that says how much of a target is reachable by making the measures faster, and how
much needs the reading and writing to change (or more cores).

``--source`` puts a folder holding ``ragbridge/core`` and ``ragbridge/adapters`` (for a checkout,
make one with two symlinks) first on ``PYTHONPATH``, to measure another version the same way.
The machine's load average is printed: on a shared machine, compare runs made side by side.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METRICS = "recall@4,mrr,ndcg@4,token_f1,exact_match,context_usage"

_WRAPPER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(done.returncode, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
sys.stderr.write(done.stderr.decode()[-2000:])
"""


def _passage(doc: int, rng: random.Random) -> str:
    return (
        f"Passage {doc}: employees in band {rng.randrange(1, 9)} get {rng.randrange(20, 30)} "
        f"days of paid leave a year, and {rng.randrange(2, 6)} more after five years."
    )


def write_samples(path: Path, n: int, seed: int = 0, corpus: int = 10_000) -> None:
    """``n`` samples; the relevant passage is ranked somewhere in the top 5, or missed."""
    rng = random.Random(seed)
    passages = [_passage(doc, rng) for doc in range(corpus)]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            relevant = rng.randrange(corpus)
            ranking = [rng.randrange(corpus) for _ in range(5)]
            if rng.random() < 0.7:
                ranking[rng.randrange(5)] = relevant
            days = rng.randrange(20, 30)
            row = {
                "id": f"q{i}",
                "question": f"How many days of leave does section {i} of the handbook give?",
                "answer": f"Section {i} gives employees {days} days of paid leave.",
                "reference": f"Employees get {rng.choice([days, days + 1])} days of leave.",
                "contexts": [{"id": f"doc-{d}", "text": passages[d]} for d in ranking],
                "relevance": {f"doc-{relevant}": 1},
            }
            fh.write(json.dumps(row) + "\n")


def measure(
    data: Path, out: Path, source: str | None, processes: int | None = None
) -> tuple[int, int, float, float, str]:
    """Exit code, peak RSS (KiB), wall time and CPU time (user + system) of one ``ragbridge
    eval`` in a fresh process (``--processes`` passed on when given)."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "ragbridge.adapters.cli", "eval", str(data),
        "--metrics", METRICS, "--out", str(out),
        *(["--processes", str(processes)] if processes else []),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *command],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    wall = time.perf_counter() - started
    code, peak, cpu = done.stdout.split()
    return int(code), int(peak), wall, float(cpu), done.stderr.strip()


def floor(data: Path, results: Path, cells_per_sample: int) -> str:
    """The read and write floor of ``eval --out`` on ``data`` (see the module docstring), with
    the garbage collector as the CLI sets it for a streamed run."""
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.writer import ResultWriter
    from ragbridge.core.sample import load_samples
    from ragbridge.core.scoring.collector import rare_full_collections

    with rare_full_collections():
        started = time.perf_counter()
        samples = sum(1 for _ in load_samples(data))
        read = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="ragbridge-floor-") as tmp, rare_full_collections():
        head = Path(tmp) / "head.jsonl"  # the header and the first 60,000 cells are enough
        with results.open(encoding="utf-8") as src, head.open("w", encoding="utf-8") as dst:
            dst.writelines(itertools.islice(src, 60_001))
        cells = list(Evaluation.from_jsonl(head))
        writer = ResultWriter(Path(tmp) / "floor.jsonl")
        started = time.perf_counter()
        for sample_id, metric, score in cells:
            writer.add(sample_id, metric, score)
        write = time.perf_counter() - started
        writer.close({})
    per_sample, per_cell = read / samples * 1e6, write / len(cells) * 1e6
    ceiling = cells_per_sample / (per_sample + cells_per_sample * per_cell) * 1e6
    return (
        f"   floor: read + validate {per_sample:.0f} us/sample, write {per_cell:.1f} us/cell "
        f"-> at most {ceiling:,.0f} cells/s with free measures (load {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000", help="comma-separated sample counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (the median counts)")
    parser.add_argument("--source", help="folder with ragbridge/{core,adapters} to measure")
    parser.add_argument(
        "--floor", action="store_true", help="also time reading and writing alone (in this process)"
    )
    parser.add_argument(
        "--processes", type=int, help="passed on to eval (default: eval's, one per core)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"$ python benchmarks/cheap_measures.py --sizes {args.sizes} --repeat {args.repeat}", end=""
    )
    print(
        (f" --source {args.source}" if args.source else "")
        + (f" --processes {args.processes}" if args.processes else "")
        + (" --floor" if args.floor else "")
    )
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    print(f"metrics: {METRICS}")
    print(
        f"{'samples':>8}  {'wall s':>7}  {'cells/s':>8}  {'CPU s':>6}  {'cells/CPU s':>11}  "
        f"{'peak RSS MB':>11}  load avg  exit"
    )
    with tempfile.TemporaryDirectory(prefix="ragbridge-cheap-") as tmp:
        for n in sizes:
            data = Path(tmp) / f"eval-{n}.jsonl"
            write_samples(data, n)
            runs = []
            for _ in range(args.repeat):
                load = os.getloadavg()[0]
                out = Path(tmp) / "results.jsonl"
                runs.append((*measure(data, out, args.source, args.processes), load))
            wall = statistics.median(r[2] for r in runs)
            cpu = statistics.median(r[3] for r in runs)
            peak = statistics.median(r[1] for r in runs) / 1024
            loads = "/".join(f"{r[5]:.1f}" for r in runs)
            codes = ",".join(str(r[0]) for r in runs)
            cells = n * len(METRICS.split(","))
            print(
                f"{n:>8,}  {wall:>7.1f}  {cells / wall:>8,.0f}  {cpu:>6.1f}  "
                f"{cells / cpu:>11,.0f}  {peak:>11.0f}  {loads}  {codes}"
            )
            bad = next((r for r in runs if r[0] != 0 and r[4]), None)
            if bad is not None:
                print("   stderr: " + bad[4].splitlines()[-1])
            elif args.floor:
                print(floor(data, Path(tmp) / "results.jsonl", len(METRICS.split(","))))


if __name__ == "__main__":
    main()
