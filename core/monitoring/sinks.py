"""Where a live request's record goes: the `RequestSink` protocol, and `StoreSink` (the default).

A shadow-scoring wrapper hands every request's `RequestRecord` to its sinks twice: `request`
when the request has been served (timings, chunk counts, no scores yet), and `scored` when the
sampled request's scores are in (the same record with ``scores`` filled). The store keeps both;
an OpenTelemetry exporter turns them into spans; an alert monitor updates its rolling windows.
A sink must be quick and must not raise: it is called from the wrapper's worker, and a sink
that fails is counted and reported by the wrapper, never allowed to break serving.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .records import RequestRecord
from .store_api import ResultsStore

__all__ = ["RequestSink", "StoreSink"]


@runtime_checkable
class RequestSink(Protocol):
    def request(self, record: RequestRecord) -> None:
        """The request was served (called once per request, sampled or not)."""

    def scored(self, record: RequestRecord) -> None:
        """A sampled request's scores arrived (``record.scores`` is filled)."""


class StoreSink:
    """Writes every record to a results store (the local SQLite `MonitorStore` is every
    wrapper's default; a team's ``postgresql://`` store works alike)."""

    def __init__(self, store: ResultsStore) -> None:
        self.store = store

    def request(self, record: RequestRecord) -> None:
        self.store.add_request(record)

    def scored(self, record: RequestRecord) -> None:
        self.store.add_scores(record.request_id, record.scores)
