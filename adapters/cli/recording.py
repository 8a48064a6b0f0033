"""A scoring run recorded in the ``--history`` monitor store, and read back for the report.

``eval``, ``run`` and ``langsmith`` record a finished run (`record_history`): its summary, the
settings that change how it scores (`history_config`: never its paths, never a cache URL's
password), the git commit and, in the metadata, its exit code and outcome; a streamed run's
cells were handed to the store as they were scored (`ragbridge.core.monitoring.history
.RunCellWriter`). The id the run will get goes into the results header first
(`history_metadata`), so ``gate --history`` can name the run it checked. With ``--report``
the recorded runs over the same input, then this one, become the report's trend charts
(`report_history`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console, history_command
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_OK, EXIT_USAGE, UserError
from ragbridge.adapters.cli.outputs import write_failure_code

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds the parsers without them
    from ragbridge.core.monitoring import RunRecord
    from ragbridge.core.monitoring.history import RunCellWriter
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.tally import Tally
    from ragbridge.core.sample import Sample

__all__ = ["history_config", "history_metadata", "record_history", "report_history", "source_of"]

_OUTCOMES = {EXIT_OK: "passed", EXIT_FAILED: "failed", EXIT_USAGE: "error", EXIT_ABORTED: "aborted"}
_NOT_CONFIG = frozenset(
    {"handler", "command", "data", "runs", "out", "report", "history", "save_samples", "parts"}
)


def history_config(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of a run as the history keeps them: the flags that change how it scores
    (metrics, judge, embedder, cache, limits, ...), not its input and output paths."""
    from ragbridge.core.cache.backend import redact_url

    config = {
        key: value
        for key, value in sorted(vars(args).items())
        if key not in _NOT_CONFIG
        and (value is None or isinstance(value, (str, int, float, bool, list)))
    }
    cache = config.get("cache")
    if isinstance(cache, str):  # a cache URL's password stays out of the history
        config["cache"] = redact_url(cache)
    return config


def source_of(args: argparse.Namespace) -> str | None:
    """The input file of the run as the history names it (``data`` or ``runs``)."""
    from ragbridge.core.monitoring.history import source_name

    path = getattr(args, "data", None) or getattr(args, "runs", None)
    return source_name(path) if path else None


def _history_metadata(code: int, n_samples: int) -> dict[str, Any]:
    from ragbridge.core.monitoring.history import git_dirty

    return {
        "exit_code": code,
        "outcome": _OUTCOMES.get(code, f"exit {code}"),
        "n_samples": n_samples,
        "git_dirty": git_dirty(),
    }


def record_history(
    args: argparse.Namespace,
    evaluation: Evaluation,
    *,
    command: str,
    code: int,
    n_samples: int,
    tally: Tally | None,
    cells: RunCellWriter | None,
    samples: Callable[[], Iterable[Any]] | None = None,
) -> int:
    """Record the finished run; a store that cannot take it is an error line (exit 2).

    ``samples`` (read again, as ``--report`` does, so a streamed run holds none) are kept
    beside the cells for ``ragbridge serve``'s sample page; records that are not `Sample`s
    are left out.
    """
    import sqlite3

    from ragbridge.core.monitoring.history import git_commit, record_run, run_record

    options: dict[str, Any] = {
        "command": command,
        "source": source_of(args),
        "config": history_config(args),
        "commit": git_commit(),
        "metadata": _history_metadata(code, n_samples),
    }
    try:
        kept = None if samples is None else _only_samples(samples())
        if cells is not None:
            run = cells.finish(run_record(evaluation, tally=tally, **options), kept)
        else:
            with history_command.open_store(args.history) as store:
                run = record_run(store, evaluation, samples=kept, **options)
    except (OSError, ValueError, sqlite3.Error) as exc:
        where = history_command.store_name(args.history)
        console.error(f"--history {where}: the run was not recorded: {exc}")
        return code if code == EXIT_ABORTED else write_failure_code(evaluation)
    console.say(f"recorded run {run.run_id} in {history_command.store_name(args.history)}")
    return code


def _only_samples(records: Iterable[Any]) -> Iterator[Sample]:
    from ragbridge.core.sample import Sample

    return (record for record in records if isinstance(record, Sample))


def history_metadata(args: argparse.Namespace) -> dict[str, Any]:
    """With ``--history``: the id the run will be recorded under, for the results header."""
    from ragbridge.core.monitoring.history import RUN_ID_KEY, new_run_id

    return {RUN_ID_KEY: new_run_id()} if getattr(args, "history", None) else {}


def report_history(
    args: argparse.Namespace, evaluation: Evaluation, command: str
) -> list[RunRecord] | None:
    """The report's trend charts when ``--history`` is given: the runs recorded over the same
    input, then this run (its outcome is not known yet)."""
    import sqlite3

    from ragbridge.core.monitoring.history import git_commit, run_record

    if not getattr(args, "history", None):
        return None
    source = source_of(args)
    try:
        with history_command.open_store(args.history) as store:
            runs: list[RunRecord] = store.runs(source=source)
    except (UserError, sqlite3.Error) as exc:
        raise ValueError(f"cannot read --history: {exc}") from None
    current = run_record(evaluation, command, source, history_config(args), git_commit())
    return [*runs, current]
