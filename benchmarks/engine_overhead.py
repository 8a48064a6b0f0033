"""What the judge engine costs beyond the judge: CPU per call, wall vs the floor, cache, memory.

    python benchmarks/engine_overhead.py                 # every figure, full sizes (~2 minutes)
    python benchmarks/engine_overhead.py --quick         # small sizes, for development
    python benchmarks/engine_overhead.py --only cpu      # one section: cpu, wall, cache, memory

Faithfulness + AnswerRelevance + ContextPrecision + ContextRecall (AnswerRelevance embeds with
`HashEmbedder`) on seeded synthetic samples with 3 contexts each, against a judge that answers
every request with a minimal valid reply (`ragbridge.core.testing.minimal_reply`, memoised per
task and block counts so the fake judge itself costs next to nothing), instantly or after a fixed
latency. Nothing is sent anywhere.

* **cpu**: process CPU seconds of a whole `evaluate` run divided by the judge calls it made, at
  1k and 10k samples, instant judge. Flat means the per-call cost does not grow with run size.
  Twice: with every sample and result held in memory (the garbage collector rescans them, so
  its share grows with the run), and streamed as ``ragbridge eval`` runs (samples parsed from
  JSON lines as needed, their parsing time subtracted; results to a `Tally`, not kept).
* **wall**: wall time of 10k samples with a 50 ms judge at cap 16, against the floor
  ``calls x latency / cap`` (no engine can beat it).
* **cache**: a run of 1,000 samples into an SQLite cache file, then the same run again (every
  call a hit); the rerun's wall time as a fraction of the first run's.
* **memory**: bytes held by the returned `Evaluation` (tracemalloc, after a full collection) per
  kept result (cell).

Each figure is printed with the command line that reproduces it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragbridge.core import Context, Sample, Settings, evaluate
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.results.tally import Tally
from ragbridge.core.testing import HashEmbedder, block_counts, minimal_reply, task_of

METRICS = ("faithfulness", "answer_relevance", "context_precision", "context_recall")
CONTEXTS = 3
_WORDS = [
    "river",
    "harbour",
    "archive",
    "museum",
    "bridge",
    "orchestra",
    "garden",
    "library",
    "tower",
    "canal",
    "observatory",
    "market",
    "school",
    "railway",
    "mill",
    "abbey",
    "theatre",
    "fortress",
    "lighthouse",
    "vineyard",
    "quarry",
]
_NAMES = [
    "Alder",
    "Brook",
    "Cedar",
    "Dunmore",
    "Elling",
    "Farrow",
    "Glen",
    "Harlow",
    "Ives",
    "Juniper",
    "Kestrel",
]


def make_samples(n: int, seed: int = 13) -> list[Sample]:
    """``n`` distinct samples (so no two requests share a cache key), ``CONTEXTS`` contexts each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name = f"{rng.choice(_NAMES)} {rng.choice(_WORDS)} {i}"
        year = 1800 + rng.randrange(200)
        thing = rng.choice(_WORDS)
        answer = f"The {name} was founded in {year}. It is known for its {thing}."
        contexts = [
            Context(
                text=f"The {name} was founded in {year} by {rng.choice(_NAMES)}. "
                f"Its {thing} draws visitors every year.",
                id=f"s{i}-d0",
            )
        ] + [
            Context(
                text=f"The {rng.choice(_NAMES)} {rng.choice(_WORDS)} opened in "
                f"{1800 + rng.randrange(200)}. It has a {rng.choice(_WORDS)}.",
                id=f"s{i}-d{j}",
            )
            for j in range(1, CONTEXTS)
        ]
        out.append(
            Sample(
                id=f"s{i:05d}",
                question=f"When was the {name} founded and what is it known for?",
                answer=answer,
                contexts=contexts,
                reference=f"The {name} was founded in {year}; it is known for its {thing}.",
            )
        )
    return out


@dataclass
class FastJudge:
    """Minimal valid replies, memoised per (task, schema, block counts); optional fixed latency."""

    delay: float = 0.0
    model: str = "bench-judge"
    calls: int = 0
    _memo: dict[Any, str] = field(default_factory=dict)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        key = (task_of(messages), schema, tuple(sorted(block_counts(messages).items())))
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = minimal_reply(messages, schema)
        return JudgeReply(text=text, usage=Usage(prompt_tokens=100, completion_tokens=10))


class GcClock:
    """Seconds spent in the cyclic garbage collector (`gc.callbacks`), by generation."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._start

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


def _run(
    n: int,
    *,
    delay: float = 0.0,
    cap: int = 16,
    cache: Cache | None = None,
    reuse_results: bool = True,
) -> tuple[Any, FastJudge, float, float]:
    """One `evaluate` run; returns (evaluation, judge, wall seconds, process CPU seconds)."""
    samples = make_samples(n)
    judge = FastJudge(delay=delay)
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    settings = Settings(
        judge=judge,
        embedder=HashEmbedder(),
        cache=cache,
        max_concurrency=cap,
        max_retries=0,
        reuse_results=reuse_results,
    )
    evaluation = evaluate(samples, list(METRICS), settings=settings)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    failed = [r for r in evaluation if r[2].failure is not None]
    if failed:
        raise SystemExit(f"benchmark run had {len(failed)} failed cells, e.g. {failed[0]}")
    return evaluation, judge, wall, cpu


def _command(only: str, sizes: str = "") -> str:
    return f"python benchmarks/engine_overhead.py --only {only}{sizes}"


def _streamed(n: int) -> tuple[FastJudge, float, float]:
    """A run as ``ragbridge eval`` makes it: samples parsed as they are needed, cells streamed
    to a `Tally` and not kept. Returns (judge, CPU seconds less the parsing, GC seconds)."""
    lines = [s.model_dump_json() for s in make_samples(n)]  # str: nothing for the GC to scan
    gc.collect()
    parse0 = time.process_time()
    for line in lines:
        Sample.model_validate_json(line)
    parsing = time.process_time() - parse0
    judge, tally = FastJudge(), Tally()
    settings = Settings(judge=judge, embedder=HashEmbedder(), max_concurrency=16, max_retries=0)
    gc.collect()
    with GcClock() as clock:
        cpu0 = time.process_time()
        evaluate(
            (Sample.model_validate_json(line) for line in lines),
            list(METRICS),
            settings=settings,
            on_result=tally.add,
            keep=False,
        )
        cpu = time.process_time() - cpu0 - parsing
    return judge, cpu, sum(clock.seconds)


def section_cpu(sizes: Sequence[int]) -> None:
    print("CPU per judge call (instant judge, no cache)")
    for n in sizes:
        with GcClock() as clock:
            evaluation, judge, wall, cpu = _run(n)
        del evaluation  # held on, its cells would be rescanned in every later run's collections
        per_call = cpu / judge.calls * 1000
        in_gc = sum(clock.seconds) / judge.calls * 1000
        print(
            f"  {n:>6} samples, all kept: {judge.calls} calls, {cpu:.2f} s CPU, {wall:.2f} s wall"
            f" -> {per_call:.3f} ms CPU/call (of which {in_gc:.3f} ms in the garbage collector)"
        )
    for n in sizes:
        judge, cpu, in_gc = _streamed(n)
        print(
            f"  {n:>6} samples, streamed: {judge.calls} calls, {cpu:.2f} s CPU -> "
            f"{cpu / judge.calls * 1000:.3f} ms CPU/call (of which "
            f"{in_gc / judge.calls * 1000:.3f} ms in the garbage collector)"
        )
    joined = ",".join(str(n) for n in sizes)
    print(f"  $ {_command('cpu', f' --cpu-sizes {joined}')}")


def section_wall(n: int, latency: float, cap: int) -> None:
    print(f"Wall time vs the floor ({latency * 1000:g} ms judge, cap {cap})")
    _, judge, wall, cpu = _run(n, delay=latency, cap=cap)
    floor = judge.calls * latency / cap
    print(
        f"  {n} samples: {judge.calls} calls, wall {wall:.2f} s, floor {floor:.2f} s"
        f" -> {wall / floor:.3f}x the floor ({cpu:.2f} s CPU)"
    )
    print(f"  $ {_command('wall', f' --wall-samples {n}')}")


def _same_scores(a: Any, b: Any) -> bool:
    """Every cell equal in value, failure, reason and details (usage and latency may differ)."""

    def outcome(score: Any) -> tuple[Any, ...]:
        return (score.value, score.failure, score.reason, score.details, score.provider)

    return len(a) == len(b) and all(
        b.get(s, m) is not None and outcome(score) == outcome(b.get(s, m)) for s, m, score in a
    )


def section_cache(n: int) -> None:
    print("Fully cached rerun (instant judge, SQLite cache file)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        with Cache(path) as cache:
            first_ev, first_judge, first, first_cpu = _run(n, cache=cache)
        with Cache(path) as cache:
            again_ev, again_judge, again, again_cpu = _run(n, cache=cache)
        with Cache(path) as cache:
            replies_ev, _, replies, _ = _run(n, cache=cache, reuse_results=False)
    reused = again_ev.metadata.get("results_reused", {})
    print(
        f"  {n} samples: first {first:.2f} s ({first_cpu:.2f} s CPU, {first_judge.calls} calls),"
        f" rerun {again:.2f} s ({again_cpu:.2f} s CPU, {again_judge.calls} calls,"
        f" {reused.get('hits', 0)} of {len(again_ev)} cells reused, identical:"
        f" {_same_scores(first_ev, again_ev)}) -> {again / first:.3f}x wall,"
        f" {again_cpu / first_cpu:.3f}x CPU"
    )
    print(
        f"  from cached replies only (reuse_results=False): {replies:.2f} s -> "
        f"{replies / first:.3f}x wall (identical: {_same_scores(first_ev, replies_ev)})"
    )
    print(f"  $ {_command('cache', f' --cache-samples {n}')}")


def section_memory(n: int) -> None:
    print("Memory per kept result (tracemalloc: bytes the Evaluation holds / cells)")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    evaluation, *_ = _run(n)
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    held -= base
    peak -= base
    tracemalloc.stop()
    cells = len(evaluation)
    print(
        f"  {n} samples, {cells} cells: {held / cells / 1024:.2f} KiB per result kept"
        f" (peak during the run {peak / cells / 1024:.2f} KiB per result)"
    )
    print(f"  $ {_command('memory', f' --memory-samples {n}')}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (development)")
    parser.add_argument("--only", choices=("cpu", "wall", "cache", "memory"))
    parser.add_argument("--cpu-sizes", help="comma-separated sample counts (default 1000,10000)")
    parser.add_argument("--wall-samples", type=int)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--cache-samples", type=int)
    parser.add_argument("--memory-samples", type=int)
    args = parser.parse_args(argv)
    quick = args.quick
    cpu_sizes = (
        [int(x) for x in args.cpu_sizes.split(",")]
        if args.cpu_sizes
        else ([200, 2000] if quick else [1000, 10000])
    )
    print(f"python {sys.version.split()[0]}, {len(METRICS)} metrics, {CONTEXTS} contexts/sample")
    if args.only in (None, "cpu"):
        section_cpu(cpu_sizes)
    if args.only in (None, "wall"):
        section_wall(args.wall_samples or (1000 if quick else 10000), args.latency, args.cap)
    if args.only in (None, "cache"):
        section_cache(args.cache_samples or (200 if quick else 1000))
    if args.only in (None, "memory"):
        section_memory(args.memory_samples or (500 if quick else 2000))


if __name__ == "__main__":
    main()
