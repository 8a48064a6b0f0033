"""``ragbridge eval DATA --dask [SCHEDULER]``: the same scoring, spread over a Dask cluster.

Everything but the scoring is ``eval``'s own (checks, ``--out``, ``--report``, ``--history``,
the summary and exit codes), so a cluster run's files and exit code are a local run's. The
judge, embedder and NLI model are passed to the workers as their flag values and built there.
Finished partitions are kept in ``--parts`` (default ``OUT.parts`` beside ``--out``, removed once
the run has completed; without ``--out``, a temporary folder): a run interrupted or stopped
early is resumed by running the same command again, and only unfinished partitions are scored.

``run`` and ``langsmith`` take ``--dask`` too: the pipeline runs (or the export is read) on this
machine, and the samples it yields are scored on the cluster from a JSONL file: ``--save-samples``
when given, else a temporary one (`samples_file`). ``--repeat N`` runs the N repeats one after
the other, each spread over the cluster (`repeat_on_cluster`); runs 2..N open no cache, so the
judge is asked afresh (and embeddings are computed again: deterministic, the same values).

What it prints on stderr is its own: Ctrl-C gives one line saying how many partitions (samples,
results) are kept and where; kept partitions that a rerun cannot reuse are named with what
changed, before they are paid for again; a worker lost mid-run is one line, and the summary's
judge calls then read "at least N". Dask's own log lines appear with ``--verbose``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
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
    from ragbridge.core.labels.repeatability import RepeatedEvaluation
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.sample import Sample
    from ragbridge.core.scoring.runner import OnResult

__all__ = [
    "add_cluster_options",
    "check_cluster",
    "repeat_on_cluster",
    "samples_file",
    "score_on_cluster",
]

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
    if args.cache == ":memory:":
        raise UserError("--cache :memory: cannot be shared by cluster workers; give a file or URL")


def _parts_folder(args: argparse.Namespace, repeat: int = 1) -> tuple[str | None, bool]:
    """The parts folder, and whether it is ours to remove once the run completes.

    Repeat ``k`` > 1 of ``--repeat`` keeps its partitions apart (``DIR/repeat-k``,
    ``OUT.repeat-k.parts``): they are scored without the cache and must never pass for run 1's.
    """
    if args.parts:
        return (args.parts if repeat == 1 else str(Path(args.parts) / f"repeat-{repeat}")), False
    if args.out:
        return (f"{args.out}.parts" if repeat == 1 else f"{args.out}.repeat-{repeat}.parts"), True
    return None, False


@contextlib.contextmanager
def samples_file(args: argparse.Namespace, samples: Sequence[Sample]) -> Iterator[Path | None]:
    """The JSONL file a cluster scores ``samples`` from (``run``, ``langsmith``), or None
    without ``--dask``.

    Partitions are cut from a file (their fingerprints are its bytes, so a rerun that yields
    the same samples reuses kept partitions): ``--save-samples`` when given (already written),
    else a temporary file removed once scored.
    """
    if getattr(args, "dask", None) is None:
        yield None
        return
    saved = getattr(args, "save_samples", None)
    if saved:
        yield Path(saved)
        return
    from ragbridge.core.sample import save_samples

    with tempfile.TemporaryDirectory(prefix="ragbridge-samples-") as folder:
        path = Path(folder) / "samples.jsonl"
        save_samples(samples, path)
        yield path


def repeat_on_cluster(
    args: argparse.Namespace,
    metrics: list[Metric],
    data: Path,
    total: int,
    *,
    renew: Callable[[], object] | None = None,
) -> RepeatedEvaluation:
    """``--repeat N --dask``: N cluster runs of ``data``, one after the other.

    Run 1 is an ordinary cluster run (cache, kept partitions). Runs 2..N open no cache and
    reuse no Score, as `ragbridge.core.labels.repeatability` asks; ``renew()`` is called
    before each of them (unfrozen criteria steps are written again). A run that stops early
    ends the repetition, as on one machine.
    """
    from ragbridge.core.labels.repeatability import RepeatedEvaluation

    runs: list[Evaluation] = []
    for run in range(1, args.repeat + 1):
        if run > 1 and renew is not None:
            renew()
        evaluation = score_on_cluster(args, metrics, data, total, on_result=None, repeat=run)
        evaluation.metadata["repeat"] = run
        runs.append(evaluation)
        if evaluation.metadata.get("aborted"):
            break
    return RepeatedEvaluation(runs, [m.name for m in metrics if m.needs_judge])


def score_on_cluster(
    args: argparse.Namespace,
    metrics: list[Metric],
    data: Path,
    total: int,
    *,
    on_result: OnResult | None,
    repeat: int = 1,
) -> Evaluation:
    """Score ``data`` on the cluster ``--dask`` names; cells go to ``on_result`` in order.

    ``repeat`` > 1 is a repeat of ``--repeat``: no cache, no reused Score, its own parts folder.
    """
    from ragbridge.adapters.dask import ClusterInterrupted, evaluate

    folder, ours = _parts_folder(args, repeat)
    client: Any = None if args.dask == LOCAL else args.dask
    where = f"a local cluster of {plural(args.workers, 'worker')}" if client is None else args.dask
    console.note(f"scoring on {where}, {plural(args.partition_size, 'sample')} per partition")
    label = "scoring" if getattr(args, "repeat", 1) == 1 else f"scoring run {repeat}"
    try:
        with progress(label, total) as advance:
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
                cache=args.cache if repeat == 1 else None,
                reuse_results=repeat == 1,
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
