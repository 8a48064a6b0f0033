"""What one ``ragas.evaluate`` run did, seen through RAGAS's own callbacks and its executor's log.

When a metric fails on a row RAGAS logs ``Exception raised in Job[i]: Class(message)`` and
writes NaN; its result can say no more. `watching` puts a `Recorder` among the run's callbacks
(which row and metric each chain is, the exception each chain raised, the ragbridge `Score`
behind each `RagbridgeMetric` cell) and a `JobLog` on RAGAS's executor logger (the fallback for
an error raised before a metric's chain started). `ragbridge.adapters.ragas.results` turns what
they saw into typed failures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager

from ragbridge.core.results.evaluation import Score

__all__ = ["JobLog", "Recorder", "recorder_in", "watching"]


class Recorder(BaseCallbackHandler):
    """Watches one ``ragas.evaluate`` run through RAGAS's own callbacks: which row and metric
    each chain is, the exception each chain raised, and the ragbridge `Score` behind each
    `RagbridgeMetric` cell. (RAGAS's executor logs only ``Class(message)`` and writes NaN.)"""

    run_inline = True
    raise_error = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.parents: dict[UUID, UUID | None] = {}
        self.names: dict[UUID, str] = {}
        self.rows: dict[UUID, int] = {}
        self.errors: dict[UUID, BaseException] = {}
        self.scores: dict[UUID, Score] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            self.parents[run_id] = parent_run_id
            self.names[run_id] = str((serialized or {}).get("name", ""))
            if metadata and isinstance(metadata.get("row_index"), int):
                self.rows[run_id] = metadata["row_index"]

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self.errors.setdefault(run_id, error)

    def scored(self, run_id: UUID | None, score: Score) -> None:
        if run_id is not None:
            with self._lock:
                self.scores[run_id] = score

    def cells(self) -> dict[tuple[int, str], UUID]:
        """(row, metric chain name) -> the metric's run id."""
        with self._lock:
            return {
                (self.rows[parent], self.names[run]): run
                for run, parent in self.parents.items()
                if parent is not None and parent in self.rows
            }

    def inner_errors(self, run_id: UUID) -> list[tuple[str, BaseException]]:
        """Errors raised by the chains below ``run_id`` (RAGAS's prompts), outermost first."""
        with self._lock:
            found: list[tuple[str, BaseException]] = []
            level = [run_id]
            while level:
                level = [run for run, parent in self.parents.items() if parent in level]
                found += [
                    (self.names[run], self.errors[run]) for run in level if run in self.errors
                ]
            return found


def recorder_in(callbacks: Any) -> Recorder | None:
    """The `Recorder` among a metric's callbacks (a RAGAS run `watching` set up), or None."""
    for handler in getattr(callbacks, "handlers", None) or []:
        if isinstance(handler, Recorder):
            return handler
    return None


class JobLog(logging.Filter):
    """Reads RAGAS's executor log lines ``Exception raised in Job[i]: Class(message)``: the
    fallback for an error raised before a metric's chain started (then no callback sees it).

    A filter that lets every record through, not a handler: the lines still reach the user's
    handlers, or Python's last-resort stderr output when there are none, as without ragbridge.
    """

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[int, tuple[str, str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 3
            and str(record.msg).startswith("Exception raised in Job[")
            and isinstance(args[0], int)
        ):
            self.jobs[args[0]] = (str(args[1]), str(args[2]))
        return True


@contextmanager
def watching(kwargs: dict[str, Any]) -> Iterator[tuple[Recorder, JobLog]]:
    """Add a `Recorder` to the callbacks in ``kwargs`` (``ragas.evaluate``'s keyword arguments,
    changed in place) and a `JobLog` to RAGAS's executor logger while the block runs."""
    if kwargs.get("return_executor"):
        raise ValueError(
            "return_executor=True hands the jobs to you, so no result is built; call "
            "ragas.evaluate for that"
        )
    recorder, jobs = Recorder(), JobLog()
    callbacks = kwargs.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.copy()
        callbacks.add_handler(recorder, inherit=True)
    else:
        callbacks = [*(callbacks or []), recorder]
    kwargs["callbacks"] = callbacks
    logger = logging.getLogger("ragas.executor")
    logger.addFilter(jobs)
    try:
        yield recorder, jobs
    finally:
        logger.removeFilter(jobs)
