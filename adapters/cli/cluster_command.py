"""``ragbridge eval DATA --dask [SCHEDULER]``: the same scoring, spread over a Dask cluster.

Everything but the scoring is ``eval``'s own (checks, ``--out``, ``--report``, ``--history``,
the summary and exit codes), so a cluster run's files and exit code are a local run's. The
judge, embedder and NLI model are passed to the workers as their flag values and built there.
Finished partitions are kept in ``--parts`` (default ``OUT.parts`` beside ``--out``, removed once
the run has completed; without ``--out``, a temporary folder): a run interrupted or stopped
early is resumed by running the same command again, and only unfinished partitions are scored.

What it prints on stderr is its own: Ctrl-C gives one line saying how many partitions (samples,
results) are kept and where; kept partitions that a rerun cannot reuse are named with what
changed, before they are paid for again; a worker lost mid-run is one line, and the summary's
judge calls then read "at least N". Dask's own log lines appear with ``--verbose``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters._extras import install_hint
from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import positive_int
from ragbridge.adapters.cli.errors import UserError
from ragbridge.adapters.cli.options import progress
from ragbridge.adapters.cli.plural import noun, plural

if TYPE_CHECKING:
    from ragbridge.adapters.dask import ClusterInterrupted
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.scoring.runner import OnResult

__all__ = ["add_cluster_options", "check_cluster", "score_on_cluster"]

LOCAL = "local"
"""``--dask`` with no address: a LocalCluster of ``--workers`` processes on this machine."""


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster (the dask extra)")
    group.add_argument(
        "--dask",
        nargs="?",
        const=LOCAL,
        metavar="SCHEDULER",
        help="score on a Dask distributed cluster: the scheduler's address "
        "(tcp://host:8786), or none for a local cluster of --workers processes; "
        "--concurrency is then the cap for the whole cluster",
    )
    group.add_argument(
        "--workers", type=positive_int, default=2, metavar="N",
        help="worker processes of the local cluster (default 2)",
    )  # fmt: skip
    group.add_argument(
        "--partition-size", type=positive_int, default=500, metavar="N",
        help="samples per cluster task (default 500)",
    )  # fmt: skip
    group.add_argument(
        "--parts",
        metavar="DIR",
        help="keep finished partitions here so a rerun skips them "
        "(default: OUT.parts beside --out, removed once the run completes)",
    )
    group.add_argument(
        "-v", "--verbose", action="store_true",
        help="show Dask's own log lines (scheduler, nanny, workers) on stderr",
    )  # fmt: skip


def check_cluster(args: argparse.Namespace) -> None:
    """Refuse what a cluster run cannot do, before anything starts."""
    if getattr(args, "dask", None) is None:
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UserError(f"--dask needs Dask distributed: {install_hint('dask')}") from None
    if getattr(args, "repeat", 1) > 1:
        raise UserError("--repeat and --dask: give one (repeats run on this machine)")
    if args.cache == ":memory:":
        raise UserError("--cache :memory: cannot be shared by cluster workers; give a file or URL")


def _parts_folder(args: argparse.Namespace) -> tuple[str | None, bool]:
    """The parts folder, and whether it is ours to remove once the run completes."""
    if args.parts:
        return args.parts, False
    if args.out:
        return f"{args.out}.parts", True
    return None, False


def score_on_cluster(
    args: argparse.Namespace,
    metrics: list[Metric],
    data: Path,
    total: int,
    *,
    on_result: OnResult | None,
) -> Evaluation:
    """Score ``data`` on the cluster ``--dask`` names; cells go to ``on_result`` in order."""
    from ragbridge.adapters.dask import ClusterInterrupted, evaluate

    folder, ours = _parts_folder(args)
    client: Any = None if args.dask == LOCAL else args.dask
    where = f"a local cluster of {plural(args.workers, 'worker')}" if client is None else args.dask
    console.note(f"scoring on {where}, {plural(args.partition_size, 'sample')} per partition")
    try:
        with progress("scoring", total) as advance:
            evaluation = evaluate(
                str(data),
                metrics,
                judge=args.judge,
                embedder=args.embedder,
                nli=args.nli,
                base_url=args.base_url,
                client=client,
                workers=args.workers,
                partition_size=args.partition_size,
                parts=folder,
                progress=advance,
                on_result=on_result,
                keep=on_result is None,
                cache=args.cache,
                max_concurrency=args.concurrency,
                timeout=args.timeout,
                max_retries=args.max_retries,
                on_note=console.note,
                verbose=args.verbose,
            )
    except ClusterInterrupted as stop:
        console.note(interrupted_line(stop))
        raise
    except OSError as exc:
        raise UserError(f"--dask {args.dask}: {exc}") from None
    cluster = evaluation.metadata.get("cluster", {})
    reused = int(cluster.get("partitions_reused") or 0)
    if reused:
        console.note(
            f"{reused} of {plural(cluster['partitions'], 'partition')} "
            f"{noun(reused, 'was', 'were')} "
            f"finished by an earlier run (kept in {folder}); not scored again"
        )
    lost = cluster.get("lost")
    if lost:
        console.note(lost_line(lost))
    if ours and folder is not None and not evaluation.metadata.get("aborted"):
        shutil.rmtree(folder, ignore_errors=True)
    return evaluation


def interrupted_line(stop: ClusterInterrupted) -> str:
    """The one line Ctrl-C leaves: what was finished, where it is kept, how to go on."""
    done = (
        f"{stop.finished} of {plural(stop.partitions, 'partition')} finished "
        f"({plural(stop.samples, 'sample')}, {plural(stop.cells, 'result')})"
    )
    if not stop.partitions:
        return "interrupted before any partition was scored"
    if stop.folder is None:
        return (
            f"interrupted: {done}, not kept: give --out or --parts DIR to keep finished "
            "partitions for a rerun"
        )
    if not stop.finished:
        return f"interrupted: none of {plural(stop.partitions, 'partition')} had finished"
    return (
        f"interrupted: {done}, kept in {stop.folder}; run the same command again to score "
        "only the rest"
    )


def lost_line(lost: dict[str, Any]) -> str:
    """Why the summary's judge calls read "at least": partition attempts that never returned."""
    attempts = int(lost["attempts"])
    return (
        f"{plural(attempts, 'partition attempt')} did not return (a worker lost mid-run, or a "
        f"partition cancelled); the judge calls include the {lost['judge_calls']} "
        f"{noun(attempts, 'it', 'they')} made, a lower bound: a call on the wire when its worker "
        "died is not seen"
    )
