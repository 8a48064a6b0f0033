"""Benchmark ragbridge's ranking measures against pytrec_eval and ranx.

What it measures
    MAP, nDCG@10, P@10 and reciprocal rank, per query, computed by three implementations from the
    same in-memory Python dicts ``qrels = {qid: {doc: grade}}`` and ``run = {qid: {doc: score}}``:

    * ragbridge   -- ``ragbridge.core.retrieval.evaluate_run(qrels, run, measures)``; its phases
                     (ranking by score, grade-matrix building, measure computing, aggregation)
                     are timed separately as well;
    * pytrec_eval -- ``RelevanceEvaluator(qrels, measures).evaluate(run)`` (construction included);
    * ranx        -- ``Qrels(qrels)``, ``Run(run)`` (conversion) then ``evaluate(...,
                     return_mean=False)`` (compute); numba's JIT warm-up is timed separately, both
                     cold (fresh ``NUMBA_CACHE_DIR``) and from the on-disk cache.

    Data are synthetic and seeded: every query ranks ``--docs`` documents (float64 scores, a few
    ties) and has about 100 graded judgments (0..3, skewed to 0), some of them on documents the run
    did not retrieve. Each implementation runs in a fresh subprocess (``--only NAME``), so its
    peak RSS is its own: the peak is reset after the data are built, and the table shows the peak
    above the RSS at that point. ``tracemalloc`` peaks come from one extra, untimed pass (they see
    Python/numpy allocations only, not C++ or numba-runtime memory). Wall times are the best of
    ``--repeat`` runs. Per-query values of the three are then compared (tolerance 1e-6).

How to reproduce
    python benchmarks/retrieval_bench.py                     # 10,000 queries x 1,000 docs
    python benchmarks/retrieval_bench.py --queries 1000      # quick run
    python benchmarks/retrieval_bench.py --profile           # cProfile of ragbridge only

This is a benchmark, not a test: it prints numbers and exits non-zero only if an implementation
fails to run.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

IMPLEMENTATIONS = ("ragbridge", "pytrec_eval", "ranx")
# Canonical (trec_eval) column name -> each implementation's spelling.
MEASURES = ("map", "ndcg_cut_10", "P_10", "recip_rank")
PYTREC_MEASURES = {
    "map": "map",
    "ndcg_cut_10": "ndcg_cut.10",
    "P_10": "P.10",
    "recip_rank": "recip_rank",
}
RANX_MEASURES = {
    "map": "map",
    "ndcg_cut_10": "ndcg@10",
    "P_10": "precision@10",
    "recip_rank": "mrr",
}
TOLERANCE = 1e-6
MIB = 1024.0 * 1024.0
GRADE_PROBS = (0.55, 0.25, 0.13, 0.07)  # grades 0..3

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Values = dict[str, "np.ndarray[Any, np.dtype[np.float64]]"]


# ---------------------------------------------------------------------------------------- data
@dataclass
class Data:
    qrels: Qrels
    run: Run
    tied64: set[str]  # queries with exactly equal float64 scores
    tied32: set[str]  # distinct float64 scores equal as float32 (pytrec_eval's old trec_eval)


def generate(
    n_queries: int,
    n_docs: int,
    seed: int,
    *,
    judged: int = 100,
    tie_rate: float = 1e-4,
    float32_scores: bool = False,
) -> Data:
    """Seeded synthetic qrels and run, and which queries have tied scores.

    Per query: ``n_docs`` distinct doc ids ``dNNNNNNN`` out of 10^7; ~``judged`` judged documents,
    ~70 % of them retrieved, grades drawn with `GRADE_PROBS`; scores are N(0, 1) plus 0.6 x grade
    so relevant documents lean to the top. A fraction ``tie_rate`` of documents copy the score of
    another document of the same query (exact float64 ties). ``float32_scores`` rounds scores to
    float32 values (still stored as Python floats). Doc id strings are distinct objects in qrels
    and run, as they would be after reading two files.
    """
    rng = np.random.default_rng(seed)
    width = len(str(max(n_queries - 1, 0)))
    data = Data({}, {}, set(), set())
    for q in range(n_queries):
        qid = f"q{q:0{width}d}"
        n_judged = int(rng.integers(judged // 2, judged + judged // 2 + 1))
        n_in = min(int(rng.binomial(n_judged, 0.7)), n_docs)
        n_out = n_judged - n_in
        nums = rng.choice(10_000_000, size=n_docs + n_out, replace=False)
        grades = rng.choice(4, size=n_judged, p=GRADE_PROBS)
        in_pos = rng.choice(n_docs, size=n_in, replace=False)
        scores = rng.standard_normal(n_docs)
        scores[in_pos] += 0.6 * grades[:n_in]
        ties = np.flatnonzero(rng.random(n_docs) < tie_rate)
        if ties.size:
            scores[ties] = scores[rng.integers(0, n_docs, size=ties.size)]
        if float32_scores:
            scores = scores.astype(np.float32).astype(np.float64)
        distinct = np.unique(scores).size
        if distinct < n_docs:
            data.tied64.add(qid)
        if np.unique(scores.astype(np.float32)).size < distinct:
            data.tied32.add(qid)
        run_ids = [f"d{x:07d}" for x in nums[:n_docs].tolist()]
        data.run[qid] = dict(zip(run_ids, scores.tolist(), strict=True))
        judged_nums = np.concatenate([nums[in_pos], nums[n_docs:]])
        judged_ids = [f"d{x:07d}" for x in judged_nums.tolist()]
        data.qrels[qid] = dict(zip(judged_ids, grades.tolist(), strict=True))
    return data


def _generate(args: argparse.Namespace) -> Data:
    return generate(
        args.queries,
        args.docs,
        args.seed,
        tie_rate=args.tie_rate,
        float32_scores=args.float32_scores,
    )


# ------------------------------------------------------------------------------ memory probes
def _proc_status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_mib() -> float:
    kib = _proc_status_kib("VmRSS")
    if kib is None:  # no /proc: fall back to the high-water mark
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024.0


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (Linux >= 4.0); also resets ru_maxrss."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------------- implementations
@dataclass
class Outcome:
    """What one implementation's subprocess reports back."""

    name: str
    qids: list[str] = field(default_factory=list)
    values: Values = field(default_factory=dict)
    phases: dict[str, list[float]] = field(default_factory=dict)  # phase -> seconds per repeat
    extra_phases: dict[str, list[float]] = field(default_factory=dict)  # untimed breakdowns
    notes: dict[str, Any] = field(default_factory=dict)

    def add(self, phase: str, seconds: float, *, extra: bool = False) -> None:
        (self.extra_phases if extra else self.phases).setdefault(phase, []).append(seconds)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_ragbridge(qrels: Qrels, run: Run, out: Outcome, *, record: bool = True) -> None:
    """Headline: one `evaluate_run` call from the raw dicts."""
    from ragbridge.core.retrieval import evaluate_run

    res, t = _timed(lambda: evaluate_run(qrels, run, list(MEASURES)))
    if record:
        out.add("evaluate_run", t)
        out.qids = list(res.qids)
        out.values = {m: np.asarray(res[m], dtype=np.float64) for m in MEASURES}
        agg = {m.trec_name: v for m, v in res.aggregate().items()}
        out.notes["aggregate"] = agg


def ragbridge_phases(qrels: Qrels, run: Run, out: Outcome) -> None:
    """Time evaluate_run's two internal phases: building grade matrices and computing measures."""
    from ragbridge.core.retrieval import GradeMatrix, evaluate_run, parse_measures
    from ragbridge.core.retrieval import Qrels as RQrels
    from ragbridge.core.retrieval.compute import compute_block
    from ragbridge.core.retrieval.ranking import iter_blocks

    wanted = tuple(parse_measures(MEASURES))
    q = RQrels(qrels)
    qids = sorted(qid for qid in run if qid in q)
    t_build = t_compute = 0.0
    for block in iter_blocks(qids, 1024):
        matrix, t = _timed(lambda block=block: GradeMatrix.from_scores(block, q, run))  # type: ignore[misc]
        t_build += t
        _, t = _timed(lambda matrix=matrix: compute_block(matrix, wanted, 1))  # type: ignore[misc]
        t_compute += t
    out.add("1 GradeMatrix.from_scores (rank + look up)", t_build, extra=True)
    out.add("2 compute_block (measures)", t_compute, extra=True)
    res, t = _timed(lambda: evaluate_run(q, run, list(MEASURES)))
    _, t = _timed(res.aggregate)
    out.add("3 RetrievalResult.aggregate", t, extra=True)
    _, t = _timed(lambda: [res.per_query(m) for m in MEASURES])
    out.add("4 per_query dicts (4 measures)", t, extra=True)


def run_pytrec_eval(qrels: Qrels, run: Run, out: Outcome, *, record: bool = True) -> None:
    import pytrec_eval

    names = set(PYTREC_MEASURES.values())
    evaluator, t_init = _timed(lambda: pytrec_eval.RelevanceEvaluator(qrels, names))
    res, t_eval = _timed(lambda: evaluator.evaluate(run))
    if record:
        out.add("RelevanceEvaluator()", t_init)
        out.add("evaluate()", t_eval)
        out.qids = sorted(res)
        out.values = {
            m: np.array([res[q][m] for q in out.qids], dtype=np.float64) for m in MEASURES
        }


def ranx_warmup(qrels: Qrels, run: Run) -> float:
    """Compile (or load from numba's cache) every kernel the big run uses, on a tiny input.

    The input is a slice of the real data: ranx builds ``<U{max_len}`` doc-id arrays, and numba
    compiles anew for each string width, so a warm-up on other ids would leave JIT in the timing.
    """
    from ranx import Qrels as XQrels
    from ranx import Run as XRun
    from ranx import evaluate

    t0 = time.perf_counter()
    qids = list(run)[:12]
    tq = {q: qrels[q] for q in qids}
    tr = {q: run[q] for q in qids}
    evaluate(
        XQrels(tq),
        XRun(tr),
        list(RANX_MEASURES.values()),
        return_mean=False,
        save_results_in_run=False,
    )
    return time.perf_counter() - t0


def run_ranx(qrels: Qrels, run: Run, out: Outcome, *, record: bool = True, threads: int) -> None:
    from ranx import Qrels as XQrels
    from ranx import Run as XRun
    from ranx import evaluate

    xq, t_q = _timed(lambda: XQrels(qrels))
    xr, t_r = _timed(lambda: XRun(run))
    # threads must be explicit: a ranx evaluate() on < 10 queries (our warm-up) sets numba's
    # thread count to 1 for the rest of the process, and threads=0 does not restore it.
    res, t_eval = _timed(
        lambda: evaluate(
            xq,
            xr,
            list(RANX_MEASURES.values()),
            return_mean=False,
            threads=threads,
            save_results_in_run=False,
        )
    )
    if record:
        out.add("Qrels()", t_q)
        out.add("Run()", t_r)
        out.add("evaluate()", t_eval)
        out.qids = list(xr.get_query_ids())
        out.values = {m: np.asarray(res[RANX_MEASURES[m]], dtype=np.float64) for m in MEASURES}


# ------------------------------------------------------------------------------ child process
def child(args: argparse.Namespace) -> None:
    """Run one implementation in this (fresh) process and write its results to ``--out``."""
    name = args.only
    out = Outcome(name)
    # ranx's AP kernel casts uint64 -> int64 (harmless here); keep the output readable.
    warnings.filterwarnings("ignore", message="unsafe cast from uint64 to int64")
    if name == "ranx_jit_cached":  # only the warm-up, with the cache a previous child filled
        small = generate(12, 20, args.seed)
        out.notes["jit_s"] = ranx_warmup(small.qrels, small.run)
        _write(args.out, out)
        return
    t0 = time.perf_counter()
    data = _generate(args)
    qrels, run = data.qrels, data.run
    out.notes["generate_s"] = time.perf_counter() - t0
    threads = args.ranx_threads or (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    if name == "ranx":
        out.notes["jit_s"] = ranx_warmup(qrels, run)
        out.notes["threads"] = threads
        import numba

        out.notes["numba_threads"] = numba.get_num_threads()
    else:
        out.notes["threads"] = 1
    impls: dict[str, Callable[..., None]] = {
        "ragbridge": run_ragbridge,
        "pytrec_eval": run_pytrec_eval,
        "ranx": lambda q, r, o, record=True: run_ranx(q, r, o, record=record, threads=threads),
    }
    impl = impls[name]
    gc.collect()
    base = current_rss_mib()
    out.notes["rss_base_mib"] = base
    out.notes["peak_reset"] = reset_peak_rss()
    if not out.notes["peak_reset"]:
        base = peak_rss_mib()  # best effort: delta above the peak so far
    for _ in range(args.repeat):
        impl(qrels, run, out)
        gc.collect()
    out.notes["rss_peak_delta_mib"] = peak_rss_mib() - base
    if name == "ragbridge":
        for _ in range(args.repeat):
            ragbridge_phases(qrels, run, out)
            gc.collect()
    if not args.no_tracemalloc:
        tracemalloc.start()
        impl(qrels, run, out, record=False)
        out.notes["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
    out.notes["tied64"] = [q in data.tied64 for q in out.qids]
    out.notes["tied32"] = [q in data.tied32 for q in out.qids]
    _write(args.out, out)


def _write(path: str, out: Outcome) -> None:
    arrays = {f"v_{m}": v for m, v in out.values.items()}
    np.savez(path, qids=np.array(out.qids, dtype=str), **arrays)  # type: ignore[arg-type]
    meta = {"phases": out.phases, "extra_phases": out.extra_phases, "notes": out.notes}
    Path(path + ".json").write_text(json.dumps(meta))


def _read(path: str, name: str) -> Outcome:
    meta = json.loads(Path(path + ".json").read_text())
    out = Outcome(name, notes=meta["notes"])
    out.phases, out.extra_phases = meta["phases"], meta["extra_phases"]
    if Path(path).exists():
        with np.load(path) as data:
            out.qids = data["qids"].tolist()
            out.values = {m: data[f"v_{m}"] for m in MEASURES if f"v_{m}" in data}
    return out


def spawn(args: argparse.Namespace, name: str, out: str, env: dict[str, str]) -> None:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--only",
        name,
        "--out",
        out,
        *_common_flags(args),
    ]
    subprocess.run(cmd, check=True, env=env)


def _common_flags(args: argparse.Namespace) -> list[str]:
    flags = [
        "--queries",
        str(args.queries),
        "--docs",
        str(args.docs),
        "--seed",
        str(args.seed),
        "--repeat",
        str(args.repeat),
        "--tie-rate",
        str(args.tie_rate),
    ]
    if args.ranx_threads:
        flags += ["--ranx-threads", str(args.ranx_threads)]
    if args.float32_scores:
        flags.append("--float32-scores")
    if args.no_tracemalloc:
        flags.append("--no-tracemalloc")
    return flags


# ------------------------------------------------------------------------------------ reports
def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "?"


def header(args: argparse.Namespace) -> None:
    cmd = ["python", "benchmarks/retrieval_bench.py", *_common_flags(args)]
    print("reproduce: " + shlex.join(cmd))
    try:
        rev = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            check=False,
        ).stdout.strip()
    except OSError:
        rev = "?"
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    print(
        f"machine: {platform.machine()} {platform.system()} {platform.release()}, "
        f"{cores} cores ({usable} usable), {platform.processor() or platform.machine()}"
    )
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"pytrec_eval-terrier {_version('pytrec-eval-terrier')}, ranx {_version('ranx')}, "
        f"numba {_version('numba')}, ragbridge git {rev or '?'}"
    )
    print(
        f"data: {args.queries} queries x {args.docs} ranked docs, ~100 judged/query "
        f"(grades 0..3 p={GRADE_PROBS}), tie rate {args.tie_rate}, seed {args.seed}; "
        f"best of {args.repeat}"
    )
    print()


def _best(xs: list[float]) -> float:
    return min(xs) if xs else float("nan")


def report(outcomes: dict[str, Outcome], jit_cached: float | None) -> None:
    print(
        f"{'implementation':<14} | {'wall s (best)':>13} | {'peak RSS MiB':>12} | "
        f"{'tracemalloc MiB':>15} | {'threads':>7} | breakdown (best of each phase, s)"
    )
    print("-" * 110)
    for name, o in outcomes.items():
        # best total = best of per-repeat sums, not sum of per-phase bests
        totals = [sum(ts) for ts in zip(*o.phases.values(), strict=True)]
        parts = ", ".join(f"{p} {_best(ts):.2f}" for p, ts in o.phases.items())
        if name == "ranx":
            parts += f"; JIT warm-up {o.notes['jit_s']:.2f} cold"
            if jit_cached is not None:
                parts += f" / {jit_cached:.2f} cached"
        tm = o.notes.get("tracemalloc_peak_mib")
        tm_s = f"{tm:15.1f}" if tm is not None else f"{'-':>15}"
        print(
            f"{name:<14} | {_best(totals):13.2f} | {o.notes['rss_peak_delta_mib']:12.1f} | "
            f"{tm_s} | {o.notes.get('threads', 1):>7} | {parts}"
        )
    gen = next(iter(outcomes.values())).notes.get("generate_s")
    base = {n: o.notes.get("rss_base_mib", 0.0) for n, o in outcomes.items()}
    print(
        f"(data generation {gen:.1f} s; RSS with data loaded, before each run: "
        + ", ".join(f"{n} {b:.0f} MiB" for n, b in base.items())
        + ")"
    )
    rb = outcomes.get("ragbridge")
    if rb and rb.extra_phases:
        print("\nragbridge phases (best of --repeat):")
        for p, ts in rb.extra_phases.items():
            print(f"  {p:<34} {_best(ts):8.3f} s")
    print()


def agreement(outcomes: dict[str, Outcome]) -> None:
    names = [n for n in IMPLEMENTATIONS if n in outcomes]
    ref = outcomes[names[0]]
    index = {q: i for i, q in enumerate(ref.qids)}
    n_q = len(ref.qids)
    tied64 = np.asarray(ref.notes.get("tied64", [False] * n_q), dtype=bool)
    tied32 = np.asarray(ref.notes.get("tied32", [False] * n_q), dtype=bool)
    aligned: dict[str, Values] = {}
    for n in names:
        o = outcomes[n]
        if sorted(o.qids) != sorted(ref.qids):
            print(f"!! {n} evaluated a different query set ({len(o.qids)} vs {n_q})")
            return
        order = np.array([index[q] for q in o.qids], dtype=np.int64)
        aligned[n] = {}
        for m in MEASURES:
            v = np.empty(n_q)
            v[order] = o.values[m]
            aligned[n][m] = v
    print("means:")
    for n in names:
        print(f"  {n:<12}" + "".join(f"  {m} {aligned[n][m].mean():.6f}" for m in MEASURES))
    print(
        f"agreement: max |difference| per query, tolerance {TOLERANCE:g}. Of {n_q} queries, "
        f"{int(tied64.sum())} have exactly tied float64 scores (T64), {int(tied32.sum())} have "
        "distinct float64 scores that are equal as float32 (T32)."
    )
    print(
        f"  {'pair':<26} {'measure':<12} {'max |diff|':>10} {'>tol':>5} "
        f"{'>1e-12':>7} {'of which T64':>12} {'T32':>5} {'other':>5}"
    )
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for m in MEASURES:
                diff = np.abs(aligned[a][m] - aligned[b][m])
                bad = diff > 1e-12
                print(
                    f"  {a + ' vs ' + b:<26} {m:<12} {diff.max():10.1e} "
                    f"{int((diff > TOLERANCE).sum()):5d} {int(bad.sum()):7d} "
                    f"{int((bad & tied64).sum()):12d} {int((bad & tied32).sum()):5d} "
                    f"{int((bad & ~tied64 & ~tied32).sum()):5d}"
                )
    print(
        "  (>tol, >1e-12: queries differing by more than that; T64/T32/other: how many of the "
        ">1e-12 ones have tied float64 scores / distinct float64 scores equal as float32 / "
        "neither. pytrec_eval's vendored trec_eval (< 10.0) stores scores as C float and breaks "
        "ties by doc id descending; ragbridge does so on float64 scores, as trec_eval 10.0; ranx "
        "sorts float64 "
        "scores with an unstable argsort, so tied documents come in arbitrary order.)"
    )


def profile(args: argparse.Namespace) -> None:
    """cProfile one ragbridge evaluate_run from dicts; print the top functions."""
    from ragbridge.core.retrieval import evaluate_run

    data = _generate(args)
    qrels, run = data.qrels, data.run
    prof = cProfile.Profile()
    prof.enable()
    evaluate_run(qrels, run, list(MEASURES))
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(15)
    stats.sort_stats("cumulative").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--queries", type=int, default=10_000)
    p.add_argument("--docs", type=int, default=1_000, help="ranked documents per query")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="timed runs; the best is reported")
    p.add_argument(
        "--tie-rate",
        type=float,
        default=1e-4,
        help="fraction of documents whose score copies another's (0 = no ties)",
    )
    p.add_argument(
        "--float32-scores",
        action="store_true",
        help="round scores to float32 values, as pytrec_eval's trec_eval (< 10.0) stores them",
    )
    p.add_argument("--ranx-threads", type=int, default=0, help="0 = all usable cores")
    p.add_argument(
        "--impls",
        default=",".join(IMPLEMENTATIONS),
        help="comma-separated subset of " + ",".join(IMPLEMENTATIONS),
    )
    p.add_argument("--no-tracemalloc", action="store_true", help="skip the tracemalloc pass")
    p.add_argument("--profile", action="store_true", help="cProfile ragbridge in-process and exit")
    p.add_argument("--only", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.only:
        child(args)
        return 0
    if args.profile:
        profile(args)
        return 0
    header(args)
    impls = [n.strip() for n in args.impls.split(",") if n.strip()]
    unknown = set(impls) - set(IMPLEMENTATIONS)
    if unknown:
        p.error(f"unknown implementation(s): {', '.join(sorted(unknown))}")
    outcomes: dict[str, Outcome] = {}
    jit_cached: float | None = None
    with tempfile.TemporaryDirectory(prefix="retrieval_bench_") as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba_cache"))
        for name in impls:
            path = os.path.join(tmp, f"{name}.npz")
            print(f"running {name} ...", file=sys.stderr, flush=True)
            spawn(args, name, path, env)
            outcomes[name] = _read(path, name)
        if "ranx" in outcomes:
            path = os.path.join(tmp, "ranx_jit.npz")
            spawn(args, "ranx_jit_cached", path, env)
            jit_cached = _read(path, "ranx_jit_cached").notes["jit_s"]
    report(outcomes, jit_cached)
    if len(outcomes) > 1:
        agreement(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
