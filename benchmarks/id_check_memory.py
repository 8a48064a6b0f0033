"""Peak memory of the duplicate-id check a cluster run plans with, before and after the spill.

    python benchmarks/id_check_memory.py                 # 1M and 10M ids (~3 min on 2 cores)
    python benchmarks/id_check_memory.py --sizes 1000000 # one size
    python benchmarks/id_check_memory.py --spill-at 50000

Planning reads every sample id once and refuses a repeat before a judge is paid
(`ragbridge.core.scoring.partitions.plan_partitions`, and ``ragbridge eval``'s validating pass).

* **before**: the check as it was, a dictionary from each id to where it was read
  (``{id: (file, line)}``): it grows with the number of ids.
* **after**: `IdLedger` (`ragbridge.core.id_spill`): a dictionary up to ``--spill-at``
  ids, then sorted runs on disk merged at the end; exact, in memory bounded by the threshold.

Ids are 32 hex characters (the size of a UUID without dashes), made on the fly in a scrambled
order (a bijection of the counter, so all are distinct: the check has to read them all), so
the figure is the check's alone, not the cost of holding or parsing a file. Each (method, size)
runs in its own process; its peak is the growth of the resident set (``ru_maxrss``) over the
process's resident size just before the first id, so the interpreter and imports are not
counted. Time is wall time of the check, the merge included. Figures vary with the load
(``uptime`` is printed first).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MIX = 0x9E3779B97F4A7C15
"""An odd 64-bit multiplier: ``i * MIX mod 2**64`` is a bijection, so the ids are distinct."""


def _ids(n: int) -> object:
    mask = (1 << 64) - 1
    return (f"{(i * MIX) & mask:016x}{i:016x}" for i in range(n))


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure(method: str, n: int, spill_at: int | None) -> dict[str, float]:
    """One case, in this process: the check over ``n`` ids; its peak RSS growth and time."""
    from ragbridge.core.id_spill import IdLedger

    source = "traces.jsonl"
    base = _rss_bytes()
    start = time.perf_counter()
    runs = 0
    if method == "before":
        seen: dict[str, tuple[str, int]] = {}
        for number, sample_id in enumerate(_ids(n), start=1):  # type: ignore[call-overload]
            if sample_id in seen:
                raise AssertionError("a repeat among distinct ids")
            seen[sample_id] = (source, number)
    else:
        with IdLedger(spill_at) as ledger:
            for number, sample_id in enumerate(_ids(n), start=1):  # type: ignore[call-overload]
                if ledger.add(sample_id, (0, number)) is not None:
                    raise AssertionError("a repeat among distinct ids")
            if ledger.finish() is not None:
                raise AssertionError("a repeat among distinct ids")
            runs = ledger.runs
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"peak_mb": max(peak - base, 0) / 1e6, "seconds": elapsed, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated id counts")
    parser.add_argument("--spill-at", type=int, default=None, help="IdLedger threshold")
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child: one case, its figures as JSON on stdout
        print(json.dumps(_measure(args.one[0], int(args.one[1]), args.spill_at)))
        return 0
    from ragbridge.core.id_spill import SPILL_AT

    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    print(f"spill threshold: {args.spill_at or SPILL_AT:,} ids")
    print(f"{'ids':>12}  {'before MB':>10}  {'after MB':>9}  {'before s':>9}  {'after s':>8}  runs")
    for n in (int(s) for s in args.sizes.split(",")):
        figures = {}
        for method in ("before", "after"):
            child = [sys.executable, __file__, "--one", method, str(n)]
            if args.spill_at is not None:
                child += ["--spill-at", str(args.spill_at)]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            figures[method] = json.loads(done.stdout)
        b, a = figures["before"], figures["after"]
        print(
            f"{n:>12,}  {b['peak_mb']:>10.1f}  {a['peak_mb']:>9.1f}  {b['seconds']:>9.1f}  "
            f"{a['seconds']:>8.1f}  {int(a['runs'])}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
