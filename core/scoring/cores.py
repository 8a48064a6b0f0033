"""Score a JSONL file's model-free measures on several local processes, one per core.

Why. A measure that calls no model (``recall@4``, ``mrr``, ``ndcg@4``, ``token_f1``,
``exact_match``, ``context_usage``) is Python arithmetic, so a run of only such measures is
bound by one core: 100,000 samples × 6 of them took ~21 s of one core on a 2-core machine while
the other core idled. Processes, not threads, because the work holds the GIL. A run with a
judge gains nothing here (it waits on the provider, whose rate limit is shared however many
processes send), nor does one with the offline embedder (the model already uses every core), so
only a run whose every metric is scored a chunk at a time without a model
(`Batched.everything`) is split, and only where ``fork`` exists (Linux, macOS): a forked child
starts with the metrics and settings already built, where a spawned one would import and build
everything again (~1 s a process).

How. `cut_lines` cuts the file into consecutive ranges of whole lines, about equal in bytes.
This process scores the first range itself, streaming its cells to the caller's ``on_result``
as a one-process run does; a forked child scores each other range, writes its cells (the very
lines `ResultWriter.add` writes) to a spool file beside the results, and sends back what the
summary needs: its `Tally`, its `IdCheck` and its run metadata (`Share`). The caller appends the
spools in order (`ResultWriter.append_cells`) and merges the tallies (`Tally.merge`), so:

* the results file has the one-process run's cells in its order, byte for byte except
  ``latency_s``;
* the summary is the same: the tally holds the same values in the same order, so the seeded
  bootstrap gives the same interval; the id warning counts the whole file (the ranges' checks
  merged in order, `IdCheck.merge`), not one line per range;
* memory stays flat: each process streams its range a chunk at a time.

Children are forked before the progress bar (a thread) starts, and report progress through
a shared array of counts. A child that dies or raises has its range scored again here when the
first range is done: these measures cost nothing to score again, and an error in the input then
surfaces with its ``file:line`` as in a one-process run. Ctrl-C (or any error here) stops the
children and removes their spools; what this process finished is kept by the caller, a prefix
of the input, as an interrupted one-process run keeps.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from ..metrics.base import Metric
from ..results.cell_json import cell_json
from ..results.evaluation import Evaluation, Score
from ..results.id_check import IdCheck, drop_id_warnings, note_id_warnings
from ..results.tally import Tally
from ..sample import parse_sample_lines
from ..settings import SettingsOptions
from .batched import Batched
from .partitions import combine_metadata

__all__ = [
    "MIN_SAMPLES_PER_PROCESS",
    "LineRange",
    "Share",
    "cut_lines",
    "evaluate_on_cores",
    "processes_for",
    "splittable",
    "usable_cores",
]

MIN_SAMPLES_PER_PROCESS = 2_000
"""Fewer samples than this per process are not worth a process: a fork, a pipe and a spool cost
milliseconds, and 2,000 samples of six cheap measures take ~0.4 s of one core."""

OnResult = Callable[[str, str, Score], None]
Progress = Callable[[int, int | None], None]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def splittable(metrics: Sequence[Metric]) -> bool:
    """Whether a run of ``metrics`` may be split over processes: every metric is scored a chunk
    at a time with no model (`Batched.everything`), and this platform can fork."""
    batched = Batched.of(list(metrics))
    return (
        batched is not None
        and batched.everything
        and "fork" in multiprocessing.get_all_start_methods()  # not on Windows
    )


def processes_for(metrics: Sequence[Metric], samples: int, asked: int | None = None) -> int:
    """How many processes score a file of ``samples`` samples with ``metrics``.

    ``asked`` (``--processes``) is taken as given, capped at one process per sample; by default
    one per usable core, at most one per `MIN_SAMPLES_PER_PROCESS` samples. Always 1 when the
    run is not `splittable`.
    """
    if not splittable(metrics):
        return 1
    if asked is not None:
        return max(1, min(asked, samples))
    return max(1, min(usable_cores(), samples // MIN_SAMPLES_PER_PROCESS))


@dataclass(frozen=True)
class LineRange:
    """Bytes ``[start, end)`` of a file, whole lines, the first of which is line ``first_line``."""

    start: int
    end: int
    first_line: int

    def lines(self, path: Path) -> Iterator[tuple[int, bytes]]:
        """The range's lines, numbered as in the file, read as they are consumed."""
        with open(path, "rb") as handle:
            handle.seek(self.start)
            at, number = self.start, self.first_line
            while at < self.end:
                line = handle.readline()
                if not line:
                    return
                yield number, line
                at += len(line)
                number += 1


def cut_lines(path: str | os.PathLike[str], parts: int) -> list[LineRange]:
    """``path`` cut into at most ``parts`` consecutive ranges of whole lines, about equal in
    bytes (equal in samples when the lines are alike), with each range's first line number.
    Empty ranges are dropped, so a short file may give fewer."""
    size = os.path.getsize(path)
    cuts = [0]
    with open(path, "rb") as handle:
        for k in range(1, parts):
            target = max(size * k // parts, cuts[-1])
            if target >= size:
                break
            handle.seek(max(0, target - 1))
            if target > 0 and handle.read(1) != b"\n":
                handle.readline()  # finish the line the target fell in
            cuts.append(handle.tell())
        cuts.append(size)
        firsts = [1]
        for start, end in itertools.pairwise(cuts[:-1]):
            firsts.append(firsts[-1] + _newlines(handle, start, end))
    ranges = [
        LineRange(start, end, first)
        for start, end, first in zip(cuts, cuts[1:], firsts, strict=False)
    ]
    return [r for r in ranges if r.end > r.start]


def _newlines(handle: Any, start: int, end: int) -> int:
    handle.seek(start)
    count, left = 0, end - start
    while left > 0:
        block = handle.read(min(left, 1 << 20))
        if not block:
            break
        count += block.count(b"\n")
        left -= len(block)
    return count


@dataclass
class Share:
    """What the process that scored one range sends back: its cells' count and spool file (the
    lines to append, None when the run writes no results file), tally, id check and metadata
    (id warnings left out: they are said once for the whole file)."""

    cells: int
    spool: str | None
    tally: Tally
    ids: IdCheck
    metadata: dict[str, Any] = field(default_factory=dict)

    def discard(self) -> None:
        """Remove the spool file."""
        if self.spool is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.spool)


class _Spool:
    """A child's ``on_result``: each cell counted in a tally and written to the spool (when
    the run writes a results file) as `ResultWriter.add` writes it."""

    def __init__(self, out: Any, tally: Tally) -> None:
        self.out = out
        self.tally = tally
        self.cells = 0

    def __call__(self, sample_id: str, metric: str, score: Score) -> None:
        self.tally.add(sample_id, metric, score)
        if self.out is not None:
            self.out.write(cell_json(sample_id, metric, score))
        self.cells += 1


def _score_range(
    path: Path,
    piece: LineRange,
    metrics: Sequence[Metric],
    settings: SettingsOptions,
    spool: str | None,
    progress: Progress | None,
) -> Share:
    """Score one range with its cells going to ``spool`` and a tally (in a child, or here
    after a child failed)."""
    tally, ids = Tally(), IdCheck()
    with open(spool, "w", encoding="utf-8") if spool else contextlib.nullcontext() as out:
        cells = _Spool(out, tally)
        evaluation = _evaluate_range(path, piece, metrics, cells, ids, progress, settings)
    drop_id_warnings(evaluation.metadata, ids.lines())
    return Share(cells.cells, spool, tally, ids, evaluation.metadata)


def _counter(counts: Any, slot: int) -> Progress:
    """A progress callback that keeps a range's count of samples done in ``counts[slot]``."""

    def progress(done: int, _total: int | None) -> None:
        counts[slot] = done

    return progress


def _child(
    conn: Any,
    path: Path,
    piece: LineRange,
    metrics: Sequence[Metric],
    settings: SettingsOptions,
    spool: str | None,
    counts: Any,
    slot: int,
) -> None:
    """A forked child's body: score ``piece``, send the `Share` (or why it failed) and exit."""

    try:
        share = _score_range(path, piece, metrics, settings, spool, _counter(counts, slot))
        conn.send(("ok", share))
    except BaseException as exc:  # anything, Ctrl-C included: the parent scores it again
        with contextlib.suppress(Exception):
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


@dataclass
class CoreRun:
    """A file scored on several processes: the whole run's `Evaluation` (its cells, when the
    caller kept them, are those of the first range only) and the other ranges' `Share`s in
    input order. ``rescored`` says which ranges this process scored again, and why."""

    evaluation: Evaluation
    shares: list[Share]
    rescored: list[str] = field(default_factory=list)


def evaluate_on_cores(
    path: str | os.PathLike[str],
    metrics: Sequence[Metric],
    processes: int,
    *,
    on_result: OnResult | None = None,
    progress: Callable[[], contextlib.AbstractContextManager[Progress]] | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    **settings: Unpack[SettingsOptions],
) -> CoreRun:
    """Score the samples of ``path`` with ``metrics`` (a `splittable` run) on ``processes``
    processes; see the module docs.

    ``on_result`` sees the first range's cells as they are scored (keep=False: they are not
    held); the other ranges come back as `Share`s whose spools (in ``spool_dir``, when given:
    None writes no cells, only the tallies) the caller appends in order and then discards.
    ``progress`` opens the progress bar (entered after the children are forked: a bar may
    start a thread) and yields ``advance(done, total)``, fed the samples done across processes.
    """
    source = Path(path)
    ranges = cut_lines(source, max(1, processes))
    context = multiprocessing.get_context("fork")
    counts = context.Array("q", len(ranges), lock=False)
    spools = [
        _spool(spool_dir, source, k) if spool_dir is not None else None
        for k in range(1, len(ranges))
    ]
    children: list[tuple[Any, Any]] = []
    shares: list[Share] = []
    rescored: list[str] = []
    for stream in (sys.stdout, sys.stderr):  # or a child's exit would write their buffers again
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        for k, (piece, spool) in enumerate(zip(ranges[1:], spools, strict=True), start=1):
            mine, theirs = context.Pipe(duplex=False)
            child = context.Process(
                target=_child,
                args=(theirs, source, piece, metrics, settings, spool, counts, k),
                name=f"ragbridge-score-{k}",
                daemon=True,
            )
            child.start()
            theirs.close()  # the child's end: closed here, so a dead child reads as EOF
            children.append((child, mine))
        with progress() if progress is not None else contextlib.nullcontext() as advance:
            first = ranges[0]

            def show() -> None:
                if advance is not None:
                    advance(sum(counts), None)

            def tick(done: int, _total: int | None) -> None:
                counts[0] = done
                if not done % 64:  # a bar needs no update per sample
                    show()

            ids = IdCheck()
            evaluation = _evaluate_range(source, first, metrics, on_result, ids, tick, settings)
            for k, (child, conn) in enumerate(children, start=1):
                share, why = _collect(child, conn, show)
                if share is None:
                    rescored.append(f"lines from {ranges[k].first_line}: {why}")
                    share = _score_range(
                        source, ranges[k], metrics, settings, spools[k - 1], _counter(counts, k)
                    )
                shares.append(share)
            show()  # every range is done: the bar's last count is the whole file's
        drop_id_warnings(evaluation.metadata, ids.lines())  # said once, for the whole file
        parts = [evaluation.metadata] + [s.metadata for s in shares]
        for share in shares:
            ids.merge(share.ids)
        combined = Evaluation(metadata=combine_metadata(parts))
        combined.metadata["processes"] = len(ranges)
        note_id_warnings(combined, ids)
        return CoreRun(combined, shares, rescored)
    except BaseException:
        for share in shares:
            share.discard()
        for spool in spools:
            if spool is not None:
                with contextlib.suppress(OSError):
                    os.unlink(spool)
        raise
    finally:
        for child, conn in children:
            if child.is_alive():
                child.terminate()
            child.join()
            conn.close()


def _evaluate_range(
    path: Path,
    piece: LineRange,
    metrics: Sequence[Metric],
    on_result: OnResult | None,
    ids: IdCheck,
    progress: Progress | None,
    settings: SettingsOptions,
) -> Evaluation:
    """Score ``piece`` of ``path`` in this process, its cells streamed to ``on_result`` and its
    ids counted in ``ids``."""
    from .runner import evaluate

    return evaluate(
        parse_sample_lines(str(path), piece.lines(path)),
        metrics,
        on_result=on_result,
        keep=False,
        progress=progress,
        id_check=ids,
        **settings,
    )


def _collect(child: Any, conn: Any, tick: Callable[[], None]) -> tuple[Share | None, str]:
    """Wait for a child's `Share`, feeding the progress bar; (None, why) when it failed."""
    while not conn.poll(0.2):
        tick()
        if not child.is_alive() and not conn.poll(0):
            return None, f"its process ended with exit code {child.exitcode}"
    try:
        status, value = conn.recv()
    except Exception:  # EOF, or a reply cut short: the process died while sending it
        child.join()
        return None, f"its process ended with exit code {child.exitcode}"
    if status == "ok" and isinstance(value, Share):
        return value, ""
    return None, str(value)


def _spool(folder: str | os.PathLike[str], source: Path, k: int) -> str:
    """A hidden file in ``folder`` for range ``k``'s cells (beside the results: one file
    system, so appending it is a plain copy)."""
    handle, name = tempfile.mkstemp(prefix=f".{source.name}.part{k}.", suffix=".cells", dir=folder)
    os.close(handle)
    return name
