"""Run history: every ``eval``/``gate`` run kept in the monitor store, and which run moved a metric.

A recorded run is a `RunRecord` (where it came from: command, input, git commit, settings; what
it found: each metric's mean, CI and counts) plus its per-sample cells, so two runs can be
compared sample by sample long after their results files are gone.

**Which run changed a metric.** Each run is set against the run before it *of the same source*
(the same input file: runs over different eval sets are not comparable), over the samples both
scored. The run changed the metric when the mean paired difference ``d = mean(b_i - a_i)`` is at
least ``min_effect`` in size *and* the paired sign-flip permutation test
(`ragbridge.core.results.stats.paired_permutation_test`) gives ``p < alpha`` — the rule of
``ragbridge gate --baseline``, applied to each step of the history. Small eval sets jitter, so an
effect alone is not enough; large ones make tiny shifts significant, so a p-value alone is not
either. The test is run only when the effect is large enough (otherwise the run cannot be flagged).
It is a per-step test at level ``alpha``: over many steps of pure noise about ``alpha`` of the
steps whose effect reaches ``min_effect`` are flagged by chance; a slow drift of many steps each
below ``min_effect`` is not flagged at all (compare the two runs directly with ``gate``).

**Streamed runs.** A run that streams its cells (``ragbridge eval`` without ``--report``) hands
them to a `RunCellWriter` as they are scored: they go to the store in batched transactions and
are not held, so memory stays flat however long the run; the run's row follows when the run is
done, so a reader never sees a run without its cells. A run that is interrupted is discarded.

The git commit is read from ``.git`` directly (``HEAD``, loose refs, ``packed-refs``,
worktrees), with ``git rev-parse`` as the fallback when git is installed. So is the branch
(``HEAD``'s ``ref: refs/heads/NAME``); a detached checkout (a CI job building a pull request)
names it through the CI's variables instead (`BRANCH_VARIABLES`).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import subprocess
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from typing_extensions import Self

from ..results.stats import paired_permutation_test
from .records import RunRecord, ScoreCell
from .sample_records import MAX_TEXT_CHARS, brief, sample_record
from .store_api import ResultsStore

if TYPE_CHECKING:
    from ..results.evaluation import Evaluation, Score
    from ..results.tally import Tally
    from ..sample import Sample

__all__ = [
    "BRANCH_VARIABLES",
    "DEFAULT_ALPHA",
    "DEFAULT_MIN_EFFECT",
    "RUN_ID_KEY",
    "HistoryRow",
    "MetricPoint",
    "RunCellWriter",
    "add_samples",
    "brief",
    "cell_of",
    "cells_of",
    "config_changes",
    "gate_runs",
    "git_branch",
    "git_commit",
    "git_dirty",
    "git_root",
    "higher_is_better",
    "metric_history",
    "new_run_id",
    "record_run",
    "run_history",
    "run_record",
    "short_ids",
    "source_name",
]

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.03
"""As ``ragbridge gate --max-drop``: a smaller move is not called a change."""

RUN_ID_KEY = "history_run_id"
"""The key of an evaluation's metadata (and so of its results file's header) that names the
run it was recorded as; ``gate`` follows it to the recorded run."""

_BATCH = 1000


# -- recording ----------------------------------------------------------------------------------


def new_run_id(now: float | None = None) -> str:
    """A run id that sorts by time and does not collide: 12 hex digits of the time in ms, then
    8 random ones (``0190a3f2c4e19b2d4f10``); a unique prefix of it names the run."""
    ms = int((time.time() if now is None else now) * 1000)
    return f"{ms:012x}{secrets.token_hex(4)}"


def cell_of(score: Score) -> ScoreCell:
    """A `Score` as the store keeps it: the value, or the failure kind, or skipped, with the
    reason and details (claims, verdicts) that explain it."""
    failure = score.failure.kind.value if score.failure is not None else None
    reason = score.reason
    if reason is None and score.failure is not None:
        reason = score.failure.message or None
    if reason is not None and len(reason) > MAX_TEXT_CHARS:
        reason = reason[: MAX_TEXT_CHARS - 1] + "…"
    return ScoreCell(
        value=score.value,
        failure=failure,
        skipped=score.status == "skipped",
        reason=reason,
        details=score.details,
    )


def cells_of(evaluation: Evaluation) -> Iterator[tuple[str, str, ScoreCell]]:
    """The ``(sample_id, metric, cell)`` cells of an evaluation, in its order."""
    for sample_id, metric, score in evaluation:
        yield sample_id, metric, cell_of(score)


def _summary(
    summaries: Mapping[str, Any], metadata: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    providers = metadata.get("metrics") or {}
    out: dict[str, dict[str, Any]] = {}
    for metric, summary in summaries.items():
        entry = summary.model_dump(mode="json", exclude={"metric"})
        provider = (
            providers.get(metric, {}).get("provider") if isinstance(providers, dict) else None
        )
        if provider is not None:
            entry["provider"] = provider
        out[metric] = entry
    return out


def run_record(
    evaluation: Evaluation,
    command: str,
    source: str | None = None,
    config: Mapping[str, Any] | None = None,
    commit: str | None = None,
    *,
    tally: Tally | None = None,
    run_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    timestamp: float | None = None,
    branch: str | None = None,
) -> RunRecord:
    """The `RunRecord` of a finished run.

    ``branch`` defaults to the branch of the working directory (`git_branch`: the checked-out
    branch, else the CI's branch variable), so runs from CI jobs and laptops alike can be set
    against the runs of ``main``.

    ``summary`` holds each metric's `MetricSummary` (mean, CI, counts, usage) and provider,
    from ``tally`` when the run streamed its cells instead of keeping them. ``metadata`` is the
    run's own, cut short by `brief`, updated with ``metadata``. The run id is ``run_id``, else
    the one the evaluation was promised (``metadata[RUN_ID_KEY]``), else a new one (of
    ``timestamp``, default now).
    """
    summaries = tally.summary() if tally is not None else evaluation.summary()
    meta = {k: v for k, v in evaluation.metadata.items() if k != RUN_ID_KEY}
    meta = brief({**meta, **(metadata or {})})
    when = time.time() if timestamp is None else timestamp
    chosen = run_id or evaluation.metadata.get(RUN_ID_KEY) or new_run_id(when)
    return RunRecord(
        run_id=str(chosen),
        timestamp=when,
        command=command,
        source=source,
        commit=commit,
        branch=branch if branch is not None else git_branch(),
        config=brief(dict(config or {})),
        summary=_summary(summaries, evaluation.metadata),
        metadata=meta,
    )


def record_run(
    store: ResultsStore,
    evaluation: Evaluation,
    command: str,
    source: str | None = None,
    config: Mapping[str, Any] | None = None,
    commit: str | None = None,
    *,
    samples: Iterable[Sample] | None = None,
    **options: Any,
) -> RunRecord:
    """Record ``evaluation`` (summary and every cell) in ``store``; return its `RunRecord`.

    ``samples``, when given, are kept beside the cells (`sample_record`: question, answer,
    reference, contexts, cut short), so ``ragbridge serve`` can show what was scored; they are
    written before the run's row, as streamed cells are, so a reader never sees a run without
    them. ``options`` are `run_record`'s. An evaluation that kept no cells (``evaluate(...,
    keep=False)``) is refused: its cells went elsewhere, stream them with `RunCellWriter`.
    """
    if evaluation.metadata.get("cells_kept") is False:
        raise ValueError(
            "the evaluation kept no cells (keep=False); record a streamed run with RunCellWriter"
        )
    run = run_record(evaluation, command, source, config, commit, **options)
    if samples is not None:
        if _recorded(store, run.run_id):  # as add_run says it, before any sample is written
            raise ValueError(f"run {run.run_id!r} is already recorded in {store.location}")
        try:
            add_samples(store, run.run_id, samples)
            store.add_run(run, cells_of(evaluation))
        except BaseException:
            if not _recorded(store, run.run_id):  # never touch a run recorded before
                store.delete_run_cells(run.run_id)  # the samples of a run that was not recorded
            raise
    else:
        store.add_run(run, cells_of(evaluation))
    return run


def _recorded(store: ResultsStore, run_id: str) -> bool:
    try:
        return store.run(run_id).run_id == run_id
    except KeyError:
        return False


def add_samples(store: ResultsStore, run_id: str, samples: Iterable[Sample]) -> int:
    """Write the records of ``samples`` for ``run_id`` in batches (one transaction each, at most
    one batch held, so a 100k-sample run stays flat in memory); return how many."""
    batch: list[tuple[str, dict[str, Any]]] = []
    count = 0
    for sample in samples:
        batch.append((sample.id, sample_record(sample)))
        count += 1
        if len(batch) >= _BATCH:
            store.add_run_samples(run_id, batch)
            batch = []
    if batch:
        store.add_run_samples(run_id, batch)
    return count


class RunCellWriter:
    """Streams a run's cells into the store as they are scored, then records the run.

    Cells go to the store in batches of ``batch`` (`ResultsStore.add_run_cells`, one short
    transaction each), so at most one batch is held; `finish` adds the run's row (which is what
    readers look for) once the summary is known, `discard` deletes the cells of a run that will
    not be recorded. Used as a context manager, leaving it without `finish` (an exception,
    Ctrl-C) discards.
    """

    def __init__(self, store: ResultsStore, run_id: str, *, batch: int | None = None) -> None:
        batch = _BATCH if batch is None else batch
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.store = store
        self.run_id = run_id
        self.cells = 0
        self.finished = False
        self._closed = False
        self._batch = batch
        self._pending: list[tuple[str, str, ScoreCell]] = []

    def add(self, sample_id: str, metric: str, score: Score) -> None:
        self._pending.append((sample_id, metric, cell_of(score)))
        self.cells += 1
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self) -> None:
        if self._closed:
            raise ValueError(f"run {self.run_id}: the cell writer is closed")
        if self._pending:
            self.store.add_run_cells(self.run_id, self._pending)
            self._pending.clear()

    def finish(self, run: RunRecord, samples: Iterable[Sample] | None = None) -> RunRecord:
        """Write the last cells, the records of ``samples`` when given (`add_samples`), and
        the run's row (its id must be this writer's)."""
        if run.run_id != self.run_id:
            raise ValueError(f"the writer streams run {self.run_id}, not {run.run_id}")
        self.flush()
        if samples is not None:
            add_samples(self.store, self.run_id, samples)
        self.store.add_run(run)
        self.finished = True
        self._closed = True
        return run

    def discard(self) -> None:
        """Forget the run: delete the cells written so far."""
        self._pending.clear()
        if self._closed:
            return
        self._closed = True
        self.store.delete_run_cells(self.run_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.finished:
            self.discard()


# -- git ----------------------------------------------------------------------------------------


def _git_dirs(start: Path) -> tuple[Path, Path, Path] | None:
    """(work tree root, git dir, common dir) of the repository holding ``start``."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        git_dir: Path | None = None
        if dot.is_dir():
            git_dir = dot
        elif dot.is_file():  # a worktree or submodule: "gitdir: <path>"
            try:
                text = dot.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            git_dir = (folder / text.removeprefix("gitdir:").strip()).resolve()
        if git_dir is None:
            continue
        common = git_dir
        try:
            pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
            common = (git_dir / pointer).resolve()
        except (OSError, UnicodeDecodeError):
            pass
        return folder, git_dir, common
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _read_ref(git_dir: Path, common: Path, ref: str, depth: int = 0) -> str | None:
    if depth > 5:
        return None
    for base in (git_dir, common):
        try:
            text = (base / ref).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.startswith("ref:"):
            return _read_ref(git_dir, common, text.removeprefix("ref:").strip(), depth + 1)
        return text if _is_sha(text) else None
    try:
        lines = (common / "packed-refs").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _is_sha(sha):
            return sha
    return None


def git_root(path: str | os.PathLike[str] = ".") -> Path | None:
    """The work tree root of the git repository holding ``path``, or None."""
    found = _git_dirs(Path(path).resolve())
    return None if found is None else found[0]


def git_commit(path: str | os.PathLike[str] = ".") -> str | None:
    """The commit checked out in the repository holding ``path``; None outside a repository
    or before its first commit. Read from ``.git`` (no subprocess); ``git rev-parse HEAD`` only
    when the files say nothing readable (e.g. a reftable repository) and git is installed."""
    found = _git_dirs(Path(path).resolve())
    if found is None:
        return None
    root, git_dir, common = found
    sha = _read_ref(git_dir, common, "HEAD")
    if sha is not None:
        return sha
    out = _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    return out.strip() if out is not None and _is_sha(out.strip()) else None


BRANCH_VARIABLES = ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME")
"""The CI variables that name the branch of a detached checkout, first non-empty wins: GitHub's
source branch of a pull request (its ``GITHUB_REF_NAME`` is ``123/merge``), GitHub's branch of a
push, GitLab's branch (or tag)."""


def git_branch(
    path: str | os.PathLike[str] = ".", *, environ: Mapping[str, str] | None = None
) -> str | None:
    """The branch checked out in the repository holding ``path``: read from ``HEAD`` (no
    subprocess); for a detached ``HEAD`` or no repository, the first `BRANCH_VARIABLES` set in
    ``environ`` (default the process's); None when neither says."""
    found = _git_dirs(Path(path).resolve())
    if found is not None:
        try:
            head = (found[1] / "HEAD").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            head = ""
        if head.startswith("ref:"):
            ref = head.removeprefix("ref:").strip()
            return ref.removeprefix("refs/heads/") or None
    env = os.environ if environ is None else environ
    return next((env[name].strip() for name in BRANCH_VARIABLES if env.get(name, "").strip()), None)


def git_dirty(path: str | os.PathLike[str] = ".", *, timeout: float = 3.0) -> bool | None:
    """Whether tracked files differ from the commit (``git status``; untracked files do not
    count); None when unknown: no repository, no git, or git took longer than ``timeout``."""
    root = git_root(path)
    if root is None:
        return None
    out = _git(root, "status", "--porcelain", "--untracked-files=no", timeout=timeout)
    return None if out is None else bool(out.strip())


def _git(root: Path, *args: str, timeout: float = 3.0) -> str | None:
    exe = shutil.which("git")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def source_name(path: str | os.PathLike[str]) -> str:
    """How a run's input file is named in the history: relative to the root of its git
    repository (the same on every checkout and machine), else its absolute path."""
    full = Path(os.path.abspath(path))
    root = git_root(full.parent)
    if root is not None:
        try:
            return full.relative_to(root).as_posix()
        except ValueError:
            pass
    return full.as_posix()


# -- reading ------------------------------------------------------------------------------------


def higher_is_better(metric: str) -> bool:
    """The metric's direction from the registry; unknown (custom) metrics: higher is better."""
    from ..metrics import by_name

    try:
        return by_name(metric).higher_is_better
    except (KeyError, ValueError):
        return True


class MetricPoint(BaseModel):
    """One run's value of one metric, and how it moved from the previous run of its source.

    ``mean``/``ci_low``/``ci_high``/counts are the run's own summary. ``previous_run_id`` is the
    run it is set against; ``mean_before``/``mean_after``/``diff`` are over the ``n_paired``
    samples both scored; ``p_value`` is None when the test was not run (no pairs, or an effect
    below ``min_effect``). ``change`` is ``"up"``/``"down"`` when the run changed the metric
    (see the module docstring), with ``worse`` saying whether that is bad for this metric.
    """

    model_config = ConfigDict(frozen=True)

    metric: str
    run_id: str
    timestamp: float
    command: str
    source: str | None
    commit: str | None
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_scored: int
    n_failed: int
    n_skipped: int
    previous_run_id: str | None = None
    previous_commit: str | None = None
    n_paired: int = 0
    mean_before: float | None = None
    mean_after: float | None = None
    diff: float | None = None
    p_value: float | None = None
    change: Literal["up", "down"] | None = None
    worse: bool | None = None


class HistoryRow(BaseModel):
    """A run and its points, one per metric it has."""

    model_config = ConfigDict(frozen=True)

    run: RunRecord
    points: dict[str, MetricPoint]


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _point(run: RunRecord, metric: str) -> MetricPoint:
    s = run.summary[metric]
    return MetricPoint(
        metric=metric,
        run_id=run.run_id,
        timestamp=run.timestamp,
        command=run.command,
        source=run.source,
        commit=run.commit,
        mean=_float(s.get("mean")),
        ci_low=_float(s.get("ci_low")),
        ci_high=_float(s.get("ci_high")),
        n_scored=_int(s.get("n_scored")),
        n_failed=_int(s.get("n_failed")),
        n_skipped=_int(s.get("n_skipped")),
    )


class _Cells:
    """Scored values by metric of the last few runs read (a history walks them in order)."""

    def __init__(self, store: ResultsStore, keep: int = 4) -> None:
        self.store = store
        self.keep = keep
        self._runs: OrderedDict[str, dict[str, dict[str, float]]] = OrderedDict()

    def of(self, run_id: str, metric: str) -> dict[str, float]:
        found = self._runs.get(run_id)
        if found is None:
            found = {}
            for sample_id, name, cell in self.store.run_cells(run_id):
                if cell.value is not None:
                    found.setdefault(name, {})[sample_id] = cell.value
            self._runs[run_id] = found
            while len(self._runs) > self.keep:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(run_id)
        return found.get(metric, {})


def _versus(
    point: MetricPoint,
    previous: RunRecord,
    cells: _Cells,
    *,
    alpha: float,
    min_effect: float,
    n_resamples: int,
    seed: int,
) -> MetricPoint:
    before = cells.of(previous.run_id, point.metric)
    after = cells.of(point.run_id, point.metric)
    common = [sid for sid in after if sid in before]
    update: dict[str, Any] = {
        "previous_run_id": previous.run_id,
        "previous_commit": previous.commit,
        "n_paired": len(common),
    }
    if common:
        a = np.fromiter((before[s] for s in common), dtype=np.float64, count=len(common))
        b = np.fromiter((after[s] for s in common), dtype=np.float64, count=len(common))
        diff = float(np.mean(b - a))
        update.update(mean_before=float(np.mean(a)), mean_after=float(np.mean(b)), diff=diff)
        if abs(diff) >= min_effect and len(common) >= 2:
            p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
            update["p_value"] = p
            if p < alpha:
                up = diff > 0
                update["change"] = "up" if up else "down"
                update["worse"] = up != higher_is_better(point.metric)
    return point.model_copy(update=update)


def gate_runs(runs: Iterable[RunRecord]) -> dict[str, list[RunRecord]]:
    """Gate runs that checked a recorded run, by the id of the run they checked."""
    out: dict[str, list[RunRecord]] = {}
    for run in runs:
        checked = run.metadata.get("results_run")
        if run.command == "gate" and isinstance(checked, str):
            out.setdefault(checked, []).append(run)
    return out


def run_history(
    store: ResultsStore,
    *,
    metrics: Sequence[str] | None = None,
    source: str | None = None,
    limit: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    n_resamples: int = 5000,
    seed: int = 0,
) -> list[HistoryRow]:
    """The recorded runs that measured ``metrics`` (or anything; oldest first, the last
    ``limit``), each with a `MetricPoint` per metric set against the previous run of the same
    source that measured it, even when that run is older than the ``limit`` shown."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie within (0, 1), got {alpha!r}")
    if not (math.isfinite(min_effect) and min_effect >= 0.0):
        raise ValueError(f"min_effect must be a finite number >= 0, got {min_effect!r}")
    runs = [
        r
        for r in store.runs(source=source)
        if r.summary and (metrics is None or any(m in r.summary for m in metrics))
    ]
    start = 0 if limit is None else max(0, len(runs) - limit)
    cells = _Cells(store)
    last: dict[tuple[str | None, str], RunRecord] = {}
    rows: list[HistoryRow] = []
    for index, run in enumerate(runs):
        points: dict[str, MetricPoint] = {}
        for metric in run.summary:
            if metrics is not None and metric not in metrics:
                continue
            point = _point(run, metric)
            previous = last.get((run.source, metric))
            if index >= start and previous is not None:
                point = _versus(
                    point,
                    previous,
                    cells,
                    alpha=alpha,
                    min_effect=min_effect,
                    n_resamples=n_resamples,
                    seed=seed,
                )
            if point.mean is not None:
                last[(run.source, metric)] = run
            points[metric] = point
        if index >= start:
            rows.append(HistoryRow(run=run, points=points))
    return rows


def metric_history(
    store: ResultsStore,
    metric: str,
    source: str | None = None,
    **options: Any,
) -> list[MetricPoint]:
    """``metric`` over the recorded runs (oldest first): each run's mean, CI and n, and whether
    it changed the metric against the previous run of its source. ``options`` are
    `run_history`'s (``alpha``, ``min_effect``, ``limit``, ``n_resamples``, ``seed``)."""
    rows = run_history(store, metrics=[metric], source=source, **options)
    return [row.points[metric] for row in rows if metric in row.points]


def short_ids(ids: Iterable[str], *, minimum: int = 8) -> dict[str, str]:
    """The shortest prefix (at least ``minimum`` characters) naming each id uniquely."""
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, run_id in enumerate(ordered):
        need = minimum
        for other in (
            ordered[i - 1] if i else None,
            ordered[i + 1] if i + 1 < len(ordered) else None,
        ):
            if other is None:
                continue
            same = 0
            while same < min(len(run_id), len(other)) and run_id[same] == other[same]:
                same += 1
            need = max(need, same + 1)
        out[run_id] = run_id[: min(need, len(run_id))]
    return out


def config_changes(
    before: RunRecord,
    after: RunRecord,
    metric: str | None = None,
    *,
    ignore: Iterable[str] = (),
) -> list[str]:
    """What differs between two runs' settings (``judge null → openai:gpt-4o``) but the keys
    in ``ignore``, and the provider of ``metric`` when that changed: the first suspects when a
    metric moved."""
    lines: list[str] = []
    skip = set(ignore)
    for key in sorted((set(before.config) | set(after.config)) - skip):
        a, b = before.config.get(key), after.config.get(key)
        if a != b:
            lines.append(f"{key} {_shown(a)} → {_shown(b)}")
    if metric is not None:
        a = before.summary.get(metric, {}).get("provider")
        b = after.summary.get(metric, {}).get("provider")
        if a != b:
            lines.append(f"{metric} provider {_shown(a)} → {_shown(b)}")
    return lines


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:59] + "…"
