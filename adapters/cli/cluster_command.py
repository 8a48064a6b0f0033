"""``ragbridge eval DATA --dask [SCHEDULER]``: the same scoring, spread over a Dask cluster.

Everything but the scoring is ``eval``'s own (checks, ``--out``, ``--report``, ``--history``,
the summary and exit codes), so a cluster run's files and exit code are a local run's. The
judge, embedder and NLI model are passed to the workers as their flag values and built there.
Finished partitions are kept in ``--parts`` (default ``OUT.parts`` beside ``--out``, removed once
the run has completed; without ``--out``, a temporary folder): a run interrupted or stopped
early is resumed by running the same command again, and only unfinished partitions are scored.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.errors import UserError
from ragbridge.adapters.cli.options import _positive_int, progress

if TYPE_CHECKING:
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results import Evaluation
    from ragbridge.core.runner import OnResult

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
        "--workers", type=_positive_int, default=2, metavar="N",
        help="worker processes of the local cluster (default 2)",
    )  # fmt: skip
    group.add_argument(
        "--partition-size", type=_positive_int, default=500, metavar="N",
        help="samples per cluster task (default 500)",
    )  # fmt: skip
    group.add_argument(
        "--parts",
        metavar="DIR",
        help="keep finished partitions here so a rerun skips them "
        "(default: OUT.parts beside --out, removed once the run completes)",
    )


def check_cluster(args: argparse.Namespace) -> None:
    """Refuse what a cluster run cannot do, before anything starts."""
    if getattr(args, "dask", None) is None:
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UserError('--dask needs Dask distributed: pip install "ragbridge[dask]"') from None
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
    from ragbridge.adapters.dask import evaluate

    folder, ours = _parts_folder(args)
    client: Any = None if args.dask == LOCAL else args.dask
    where = f"a local cluster of {args.workers} workers" if client is None else args.dask
    console.note(f"scoring on {where}, {args.partition_size} samples per partition")
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
            )
    except KeyboardInterrupt:
        if folder is not None:
            console.note(f"interrupted: finished partitions are kept in {folder}; run the same "
                         "command again to score only the rest")  # fmt: skip
        raise
    except OSError as exc:
        raise UserError(f"--dask {args.dask}: {exc}") from None
    cluster = evaluation.metadata.get("cluster", {})
    if cluster.get("partitions_reused"):
        console.note(
            f"{cluster['partitions_reused']} of {cluster['partitions']} partitions were "
            f"finished by an earlier run (kept in {folder}); not scored again"
        )
    if ours and folder is not None and not evaluation.metadata.get("aborted"):
        shutil.rmtree(folder, ignore_errors=True)
    return evaluation
