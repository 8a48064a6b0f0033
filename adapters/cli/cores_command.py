"""``ragbridge eval --processes N``: a run of model-free measures on every core.

A streamed ``eval`` whose every measure calls no model (ranking and string measures) is bound by
one core; by default it is split over one process per core (at most one per
`MIN_SAMPLES_PER_PROCESS` samples) by `ragbridge.core.scoring.cores`, which says why and how.
This module decides when (`processes`), runs it, and hands the other processes' ranges to the
streamed run's own bookkeeping (``take``: the tally, and ``--out`` in input order). A run with
``--history`` stays in one process: the store takes its cells one at a time as they are scored.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import positive_int
from ragbridge.adapters.cli.errors import UserError
from ragbridge.adapters.cli.options import progress, settings_from
from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:
    from ragbridge.core.results.evaluation import Evaluation, Score
    from ragbridge.core.scoring.cores import Share

    from .eval_command import Plan


def add_processes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--processes", type=positive_int, metavar="N",
        help="local processes that score a run whose every measure needs no model (ranking, "
        "token_f1, exact_match, context_usage): by default one per core, for files of 2,000 "
        "samples a process or more; 1 keeps the run in this process",
    )  # fmt: skip


def processes(args: argparse.Namespace, plan: Plan, count: int) -> int:
    """How many processes score this ``eval`` of ``count`` samples: 1 unless it may be split.

    An explicit ``--processes N`` (N > 1) that cannot be honoured is a usage error, said before
    anything is scored, rather than a silent one-process run.
    """
    from ragbridge.core.scoring.cores import processes_for, splittable

    asked: int | None = getattr(args, "processes", None)
    alone = [
        flag
        for flag, given in (
            ("--dask", getattr(args, "dask", None) is not None),
            ("--history", bool(args.history)),
            ("--report", bool(args.report)),
            ("--repeat", getattr(args, "repeat", 1) > 1),
        )
        if given
    ]
    if asked is not None and asked > 1:
        if alone:
            raise UserError(
                f"--processes: a run with {alone[0]} is scored in one process (--dask: the "
                "cluster's workers are the processes; --history, --report, --repeat: they "
                "take every cell as it is scored)"
            )
        if not splittable(plan.metrics):
            modelled = [
                m.name for m in plan.metrics if m.needs_judge or m.needs_embedder or m.needs_nli
            ]
            raise UserError(
                f"--processes: only a run whose every measure needs no model is split over "
                f"processes, and these need one: {', '.join(modelled) or '?'} (a judge's rate "
                "limit, or the embedder's own threads, bound such a run)"
            )
    if alone:
        return 1
    return processes_for(plan.metrics, count, asked)


def score_on_cores(
    args: argparse.Namespace,
    plan: Plan,
    data: Path,
    count: int,
    n: int,
    keep: Callable[[str, str, Score], None],
    take: Callable[[Share], None],
    *,
    spool_dir: Path | None,
    metadata: dict[str, Any],
) -> Evaluation:
    """Score ``data`` on ``n`` processes: this one's cells go to ``keep`` as they are scored,
    then each other range's `Share` to ``take``, in input order."""
    from ragbridge.core.scoring.cores import evaluate_on_cores

    if plan.note:
        console.note(plan.note)
    console.note(
        f"scoring on {plural(n, 'process', 'processes')} (measures that need no model: one "
        "process per core; --processes 1 keeps one)"
    )
    run = evaluate_on_cores(
        data,
        plan.metrics,
        n,
        on_result=keep,
        progress=lambda: progress("scoring", count),
        spool_dir=spool_dir,
        **settings_from(args, judge=plan.judge, embedder=plan.embedder, nli=plan.nli),
    )
    taken = 0
    try:
        for share in run.shares:
            take(share)  # the results file's writer keeps its spool from now on
            taken += 1
    finally:
        for share in run.shares[taken:]:
            share.discard()
    for line in run.rescored:
        console.note(f"a scoring process failed ({line}): its samples were scored again here")
    run.evaluation.metadata.update(metadata)
    return run.evaluation
