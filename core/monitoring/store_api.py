"""What a results store must do, whatever keeps it: the contract of `--history` and the monitor.

`ragbridge.core.monitoring.store.MonitorStore` (one SQLite file) is the default and needs no
server; a team shares one store on a database server instead (``postgresql://...``, served by
`ragbridge.adapters.postgres_store`). Every reader and writer of history — ``ragbridge
history``/``gate``, the report's trends, the production monitor's sinks, ``ragbridge serve`` —
talks to a store through this protocol only, and a store is chosen by the spec a user gives
(`open_store`): a path is an SQLite file, ``SCHEME://...`` is looked up among the
``ragbridge.stores`` entry points, so the core imports no database client (the same rule as the
judge cache's `ragbridge.core.cache.backend`).

The promises of the SQLite store hold for every backend: each write is one transaction (a
process that dies loses at most the write it was making), a run id is recorded once, readers see
a run only once its row is written (`add_run` comes after its streamed `add_run_cells`), and one
object may be shared by the threads of a process. A store written by a newer ragbridge (a
higher schema version) is refused with `StoreError`, never read as if it were ours.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from typing_extensions import Self

from ..url_plugins import entry_point_for, is_url, schemes
from .records import RequestRecord, RunRecord, ScoreCell

__all__ = [
    "STORE_ENTRY_POINTS",
    "ResultsStore",
    "is_store_url",
    "open_store",
    "store_schemes",
]

STORE_ENTRY_POINTS = "ragbridge.stores"
"""Entry-point group of networked stores: name = URL scheme, value = ``open(url) -> store``."""


@runtime_checkable
class ResultsStore(Protocol):
    """The operations history, gates, the monitor and ``serve`` need from a store."""

    @property
    def location(self) -> str:
        """Where the store lives, for messages: a path, or a URL without its password."""
        ...

    # requests (production monitoring)
    def add_request(self, record: RequestRecord) -> None: ...

    def add_scores(self, request_id: str, scores: Mapping[str, ScoreCell]) -> None: ...

    def add_feedback(self, request_id: str, value: float) -> None: ...

    def requests(
        self,
        *,
        since: float | None = None,
        until: float | None = None,
        pipeline: str | None = None,
        limit: int | None = None,
    ) -> list[RequestRecord]: ...

    def count_requests(self) -> int: ...

    # runs (evaluation history)
    def add_run(self, run: RunRecord, cells: Iterable[tuple[str, str, ScoreCell]] = ()) -> None: ...

    def add_run_cells(self, run_id: str, cells: Iterable[tuple[str, str, ScoreCell]]) -> None: ...

    def delete_run_cells(self, run_id: str) -> None: ...

    def runs(
        self, *, command: str | None = None, source: str | None = None, limit: int | None = None
    ) -> list[RunRecord]: ...

    def run(self, run_id: str) -> RunRecord: ...

    def run_cells(self, run_id: str) -> list[tuple[str, str, ScoreCell]]: ...

    def add_run_samples(self, run_id: str, rows: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Keep ``(sample_id, record)`` rows of a run (`sample_records.sample_record`) in one
        transaction; like streamed cells, before the run's row is added."""
        ...

    def run_sample(self, run_id: str, sample_id: str) -> dict[str, Any] | None:
        """The kept record of one sample of a run; None when none was kept."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


def is_store_url(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` names a store on a server (``SCHEME://...``) rather than a file."""
    return is_url(spec)


def store_schemes() -> list[str]:
    """The URL schemes the installed ``ragbridge.stores`` entry points serve, sorted."""
    return schemes(STORE_ENTRY_POINTS)


def open_store(spec: str | os.PathLike[str] | ResultsStore) -> ResultsStore:
    """The store ``spec`` names: an open store as is, a path as an SQLite `MonitorStore`
    (created when missing), ``SCHEME://...`` through its scheme's entry point.

    An unknown scheme is a ValueError naming the known ones (the URL shown without its
    password); a known scheme whose extra is not installed raises the adapter's ImportError,
    which names the extra.
    """
    if not isinstance(spec, str | os.PathLike):
        return spec
    if not is_store_url(spec):
        from .store import MonitorStore  # the default needs nothing but the standard library

        return MonitorStore(spec)
    url = str(spec)
    opener = entry_point_for(
        STORE_ENTRY_POINTS,
        url,
        label="store",
        noun="results store",
        hint="; give an SQLite path or a URL of a known store",
    )
    store: ResultsStore = opener(url)
    return store
