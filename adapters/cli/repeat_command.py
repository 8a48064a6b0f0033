"""``ragbridge eval --repeat N``: score every sample N times and say how repeatable the judge is.

With ``--dask`` each run is spread over the cluster, one run after the other
(`cluster_command.repeat_on_cluster`); there runs 2..N open no cache at all, so embeddings are
computed again too (deterministic models: the same values, some time).

Run 1 is the ordinary run: it reads and writes the cache, and it is what ``--out``, ``--report``
and the exit code describe, so a repeated run gates exactly like a single one. Runs 2..N bypass
the cache for judge replies (`ragbridge.core.labels.repeatability`); that is printed before they
start, because a repeat that silently read run 1's cached replies would show perfect agreement. The
repeatability figures go to stdout as a table and into the results header (``repeatability``).

A criterion whose evaluation steps are not frozen has them written again in each run (the judge
is asked everything afresh, the steps included), so its flip rate shows what steps that move
between runs cost; frozen steps (``ragbridge criteria freeze``) are the same in every run.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import cluster_command, console
from ragbridge.adapters.cli.argtypes import whole_number
from ragbridge.adapters.cli.plural import plural
from ragbridge.adapters.cli.tables import aligned

if TYPE_CHECKING:
    from ragbridge.adapters.cli.eval_command import Plan
    from ragbridge.core.labels.repeatability import MetricRepeatability, RepeatedEvaluation
    from ragbridge.core.sample import Sample

__all__ = ["add_repeat_option", "repeat_lines", "run_repeated"]


_repeats = whole_number(lambda n: 1 <= n <= 100, "must lie within 1..100, got {value}")


def add_repeat_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat",
        type=_repeats,
        default=1,
        metavar="N",
        help="score every sample N times and report per-sample variance, the share of "
        "verdicts that flip and the CI of the mean over repeats; repeats 2..N bypass the "
        "cache for judge replies (run 1 is what --out, --report and the exit code describe)",
    )


def run_repeated(
    args: argparse.Namespace, plan: Plan, data: Path, count: int, metadata: dict[str, Any]
) -> int:
    from ragbridge.adapters.cli.criteria_command import renew_steps, written_steps
    from ragbridge.adapters.cli.options import progress, settings_from
    from ragbridge.core.labels.repeatability import evaluate_repeated
    from ragbridge.core.sample import load_samples

    judged = [m.name for m in plan.metrics if m.needs_judge]
    if plan.note:
        console.note(plan.note)
    if judged:
        console.note(
            f"--repeat {args.repeat}: run 1 uses the cache as usual; runs 2..{args.repeat} "
            f"bypass it for judge replies ({', '.join(judged)}), so they are paid again"
        )
    else:
        console.note(
            f"--repeat {args.repeat}: no metric calls a judge; offline providers are "
            "deterministic, so the repeats can only agree"
        )
    unpinned = [source.spec.name for source in written_steps(plan.metrics)]
    if unpinned:
        console.note(
            f"the steps of {', '.join(unpinned)} are not frozen: each run has the judge write "
            "them again (`ragbridge criteria freeze` pins them)"
        )
    total = count * args.repeat
    if getattr(args, "dask", None) is not None:
        console.note(
            f"--repeat {args.repeat} --dask: the runs go over the cluster one after the other; "
            f"runs 2..{args.repeat} open no cache (embeddings are computed again)"
        )
        repeated = cluster_command.repeat_on_cluster(
            args, plan.metrics, data, count, renew=lambda: renew_steps(plan.metrics)
        )
        return _finish(args, repeated, judged, data, count, metadata)
    started = [0]

    def samples() -> Iterable[Sample]:
        """The file read afresh for each run; from run 2 on, unpinned steps are written anew
        (a repeat asks the judge everything again, the steps included)."""
        started[0] += 1
        if started[0] > 1:
            renew_steps(plan.metrics)
        return load_samples(data)

    with progress(f"scoring {plural(args.repeat, 'run')}", total) as advance:

        def step(run: int, done: int, _: int | None) -> None:
            advance((run - 1) * count + done, total)

        repeated = evaluate_repeated(
            samples,
            plan.metrics,
            repeats=args.repeat,
            **settings_from(args, judge=plan.judge, embedder=plan.embedder, nli=plan.nli),
            progress=step,
        )
    return _finish(args, repeated, judged, data, count, metadata)


def _finish(
    args: argparse.Namespace,
    repeated: RepeatedEvaluation,
    judged: list[str],
    data: Path,
    count: int,
    metadata: dict[str, Any],
) -> int:
    """Print the repeatability table, keep it in run 1's header, and finish run 1's files."""
    from ragbridge.adapters.cli.eval_command import finish_file

    figures = repeated.summary()
    first = repeated.runs[0]
    first.metadata.update(metadata)
    first.metadata["repeatability"] = {
        "runs": len(repeated.runs),
        "cache": "run 1 only; judge replies of runs 2..N were not read from or written to it",
        "metrics": {name: f.as_dict() for name, f in figures.items()},
    }
    aborted = repeated.aborted
    if aborted and not first.metadata.get("aborted"):
        first.metadata["aborted"] = f"in run {len(repeated.runs)}: {aborted}"
    calls = [int((run.metadata.get("judge_stats") or {}).get("calls", 0)) for run in repeated.runs]
    lines = repeat_lines(figures.values(), len(repeated.runs))
    if judged:
        lines.insert(
            1, f"judge calls: {sum(calls)} (run 1: {calls[0]}, runs 2..: {sum(calls[1:])})"
        )
    console.say(
        *lines, f"run 1 of {len(repeated.runs)} (what --out, --report and the exit code describe):"
    )
    return finish_file(args, first, data, count)


def repeat_lines(figures: Iterable[MetricRepeatability], runs: int) -> list[str]:
    """The repeatability table: one line per metric."""
    rows: list[tuple[str, ...]] = [
        (
            "metric",
            "mean",
            "95% CI",
            "run means",
            "var/sample",
            "max var",
            "flipped",
            "incomplete",
        )
    ]
    figures = list(figures)
    rows += [_row(f) for f in figures]
    lines = [f"repeatability over {plural(runs, 'run')} (verdict: yes when score > 0.5)"]
    lines += aligned(rows)
    for f in figures:
        if f.flipped:
            shown = ", ".join(f.flipped[:5]) + (" …" if len(f.flipped) > 5 else "")
            lines.append(f"  {f.metric} flipped on: {shown}")
        if not f.judged:
            lines.append(f"  {f.metric}: deterministic provider (no judge), repeats agree")
    return lines


def _row(f: MetricRepeatability) -> tuple[str, ...]:
    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    ci = "—" if f.ci_low is None else f"[{f.ci_low:.3f}, {f.ci_high:.3f}]"
    flipped = "—" if f.flip_share is None else f"{len(f.flipped)}/{f.n_samples}"
    if f.flip_share is not None:
        flipped += f" ({f.flip_share:.0%})"
    return (
        f.metric,
        num(f.mean),
        ci,
        " ".join(f"{m:.3f}" for m in f.run_means) or "—",
        num(f.mean_variance),
        num(f.max_variance),
        flipped,
        str(len(f.incomplete)),
    )
