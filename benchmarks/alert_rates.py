"""False alarms and detections of the monitoring alert rule, on seeded synthetic streams.

    python benchmarks/alert_rates.py             # 200 streams per case (about 20 s on 2 cores)
    python benchmarks/alert_rates.py --seeds 40  # quick run

An `AlertMonitor` with the default `Rule` watches a faithfulness mean (per-request scores drawn
from a Beta distribution with mean 0.85 and concentration 5, sd about 0.15) and a retrieval-miss
rate (5%), against a baseline of 200 scores / 1,000 requests drawn from the same distributions.

* **Noise**: streams of 2,000 requests that never change; every alert is a false alarm. The rule
  bounds them by ``alpha`` per signal per window length (2,000 requests = 20 window lengths of
  100, so at most ``alpha * 20 * streams`` alerts).
* **Drops**: 300 requests as before, then 300 after a change; a stream counts as caught when an
  alert fires after the change, and the delay is the number of requests from the change to it.

The figures quoted in ``docs/how-to/production.md`` come from this script at its defaults.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragbridge.core.monitoring import RequestRecord, ScoreCell
from ragbridge.core.monitoring.alerts import (
    RETRIEVAL_MISS,
    AlertMonitor,
    Baseline,
    Rule,
    Signal,
)

FloatArray = npt.NDArray[np.float64]
CONCENTRATION = 5.0


def beta(rng: np.random.Generator, mean: float, n: int) -> FloatArray:
    """Per-request scores with the given mean (Beta, concentration 5)."""
    return rng.beta(mean * CONCENTRATION, (1 - mean) * CONCENTRATION, n)


def feed(
    monitor: AlertMonitor, scores: Sequence[float], misses: Sequence[bool] | None = None
) -> None:
    for i, value in enumerate(scores):
        record = RequestRecord(
            request_id=f"r{i}",
            timestamp=float(i),
            sampled=True,
            retrieval_miss=None if misses is None else bool(misses[i]),
            scores={"faithfulness": ScoreCell(value=float(value))},
        )
        monitor.request(record)
        monitor.scored(record)


def score_monitor(rng: np.random.Generator, rule: Rule) -> AlertMonitor:
    baseline = Baseline({"faithfulness": beta(rng, 0.85, 200)})
    return AlertMonitor(baseline, rule=rule, signals=[Signal.score("faithfulness")])


def miss_monitor(rng: np.random.Generator, rule: Rule) -> AlertMonitor:
    baseline = Baseline({"retrieval_miss": (rng.random(1000) < 0.05).astype(float)})
    return AlertMonitor(baseline, rule=rule, signals=[RETRIEVAL_MISS])


def firings(monitor: AlertMonitor, after: float = -1.0) -> list[float]:
    return [a.timestamp for a in monitor.alerts if a.state == "firing" and a.timestamp >= after]


def noise(seeds: range, rule: Rule, n: int = 2000) -> tuple[int, int]:
    scores = misses = 0
    for seed in seeds:
        rng = np.random.default_rng(seed)
        monitor = score_monitor(rng, rule)
        feed(monitor, beta(rng, 0.85, n).tolist())
        scores += len(firings(monitor))
        rng = np.random.default_rng(seed)
        monitor = miss_monitor(rng, rule)
        feed(monitor, [0.8] * n, (rng.random(n) < 0.05).tolist())
        misses += len(firings(monitor))
    return scores, misses


def detected(delays: list[float], seeds: range) -> str:
    if not delays:
        return f"0/{len(seeds)}"
    return (
        f"{len(delays)}/{len(seeds)}, delay median {np.median(delays):.0f}, "
        f"max {max(delays):.0f} requests"
    )


def score_drop(to: float, seeds: range, rule: Rule, pre: int = 300, post: int = 300) -> str:
    delays = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        monitor = score_monitor(rng, rule)
        feed(monitor, np.concatenate([beta(rng, 0.85, pre), beta(rng, to, post)]).tolist())
        after = firings(monitor, after=pre)
        if after:
            delays.append(after[0] - pre)
    return detected(delays, seeds)


def miss_rise(to: float, seeds: range, rule: Rule, pre: int = 300, post: int = 300) -> str:
    delays = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        monitor = miss_monitor(rng, rule)
        misses = np.concatenate([rng.random(pre) < 0.05, rng.random(post) < to]).tolist()
        feed(monitor, [0.8] * (pre + post), misses)
        after = firings(monitor, after=pre)
        if after:
            delays.append(after[0] - pre)
    return detected(delays, seeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="streams per case (default 200)")
    args = parser.parse_args()
    seeds = range(args.seeds)
    started = time.perf_counter()
    print(f"# python benchmarks/alert_rates.py --seeds {args.seeds}")
    for alpha in (0.01, 0.05):
        rule = Rule(alpha=alpha)
        bound = alpha * 20 * len(seeds)
        scores, misses = noise(seeds, rule)
        print(
            f"noise, alpha {alpha}: {scores} false alarms on faithfulness, {misses} on the miss "
            f"rate, over {20 * len(seeds)} window lengths each (bound {bound:.0f})"
        )
    rule = Rule()
    for to in (0.70, 0.75, 0.78, 0.80):
        print(f"faithfulness 0.85 -> {to:.2f}: caught {score_drop(to, seeds, rule)}")
    for to in (0.20, 0.12, 0.10):
        print(f"retrieval miss 5% -> {to:.0%}: caught {miss_rise(to, seeds, rule)}")
    print(f"# {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
