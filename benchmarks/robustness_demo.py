"""Robustness curves of the demo pipelines (LangChain, LlamaIndex), and a rerun that pays nothing.

    python benchmarks/robustness_demo.py                     # both pipelines, offline (~1-3 min)
    python benchmarks/robustness_demo.py --embedder hash     # no model: fast, retrieval is noise
    python benchmarks/robustness_demo.py --fake-judge        # score with a counting fake judge
    python benchmarks/robustness_demo.py --pipelines langchain --ratios 0,0.5

For each demo pipeline (`ragbridge.adapters.demo.pipelines`: the offline handbook pipelines with
an extractive answerer, no API key) it runs `ragbridge.core.robustness.run_robustness` on the 42
demo questions under every condition (the clean run, noise at each ratio, no relevant passage,
counterfactual passages) into a fresh SQLite cache, and prints the table per condition that
``ragbridge robustness`` prints: each measure's mean and 95% CI, the abstention rate, how often a
counterfactual answer follows the wrong fact or flags the conflict, errors, skips and why.

Then it runs the same thing again on the same cache and prints what the second run asked for:
pipeline calls counted by a wrapper around the pipeline (not by the harness) and judge calls
counted by the judge itself. Both must be 0: every pipeline answer and every judge reply is
read back from the cache. Offline scoring sends no judge call at all, so ``--fake-judge``
(ragbridge's `CountingJudge`, whose replies are minimal and whose scores mean nothing) is there
to show the judge side of the cache.

Retrieval uses the demo's embedder (``local``: all-MiniLM-L6-v2 in numpy; the ``local`` extra);
``--embedder hash`` needs no model but retrieves by hashed words. Not a test: the seconds depend
on the machine and what else runs on it (note ``uptime`` beside them).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ragbridge.adapters.cli.robustness_command import parse_ratios, result_lines
from ragbridge.adapters.demo.handbook import questions
from ragbridge.adapters.demo.pipelines import (
    default_embedder,
    langchain_pipeline,
    llamaindex_pipeline,
)
from ragbridge.adapters.robustness import robust_pipeline
from ragbridge.core.judging.judge import Embedder
from ragbridge.core.robustness.conditions import default_conditions
from ragbridge.core.robustness.harness import RobustnessResult, run_robustness
from ragbridge.core.robustness.types import Perturb, RobustPipeline
from ragbridge.core.sample import Sample
from ragbridge.core.testing import CountingJudge, HashEmbedder

BUILDERS = {"langchain": langchain_pipeline, "llamaindex": llamaindex_pipeline}


class CountedPipeline:
    """A `RobustPipeline` that counts the answers it is asked for, whoever asks."""

    def __init__(self, inner: RobustPipeline) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        self.calls += 1
        return await self.inner.answer(sample, perturb)


def run(
    name: str, embedder: Embedder, cache: Path, args: argparse.Namespace
) -> tuple[RobustnessResult, int, int, float]:
    """One robustness run of the demo pipeline ``name``: the result, the pipeline calls, the
    judge calls and the seconds it took."""
    pipeline = CountedPipeline(robust_pipeline(BUILDERS[name](embedder=embedder)))
    judge = CountingJudge() if args.fake_judge else None
    conditions = default_conditions(args.ratios)
    start = time.perf_counter()
    result = run_robustness(
        pipeline,
        questions(),
        conditions=conditions,
        seed=args.seed,
        judge=judge,
        embedder=embedder,
        cache=str(cache),
    )
    seconds = time.perf_counter() - start
    return result, pipeline.calls, judge.calls if judge is not None else 0, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", default="langchain,llamaindex")
    parser.add_argument("--ratios", type=parse_ratios, default=parse_ratios("0,0.2,0.4,0.6,0.8"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--fake-judge", action="store_true")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.pipelines.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BUILDERS))
    if unknown:
        parser.error(f"unknown pipelines {unknown}; expected {sorted(BUILDERS)}")
    embedder: Any = default_embedder() if args.embedder == "local" else HashEmbedder()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    if load is not None:
        print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("reproduce: python " + " ".join(["benchmarks/robustness_demo.py", *sys.argv[1:]]))
    scoring = "a counting fake judge" if args.fake_judge else "offline providers"
    print(f"{len(questions())} demo questions, embedder {args.embedder}, scoring: {scoring}\n")
    failed = False
    with tempfile.TemporaryDirectory(prefix="ragbridge-robustness-") as folder:
        for name in names:
            cache = Path(folder) / f"{name}.sqlite"
            result, calls, judged, seconds = run(name, embedder, cache, args)
            print(f"== {name}: first run, {seconds:.1f} s, {calls} pipeline calls, "
                  f"{judged} judge calls")  # fmt: skip
            for note in result.notes:
                print(f"note: {note}")
            print("\n".join(result_lines(result)))
            again, calls2, judged2, seconds2 = run(name, embedder, cache, args)
            same = [s.to_dict() for s in again.summary] == [s.to_dict() for s in result.summary]
            print(
                f"== {name}: rerun on the cache, {seconds2:.1f} s: {calls2} pipeline calls, "
                f"{judged2} judge calls, {again.answers_cached} answers from the cache; "
                f"the same figures: {'yes' if same else 'NO'}\n"
            )
            failed = failed or calls2 != 0 or judged2 != 0 or not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
