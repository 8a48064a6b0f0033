"""Production monitoring and run history: what live requests and evaluation runs recorded.

`records` holds the contract (`RequestRecord`, `RunRecord`, `ScoreCell`); `store` the local
SQLite file that keeps both (`MonitorStore`). Shadow scoring, telemetry exporters, alerts, the
``ragbridge history`` command and the report's trend charts build on these.
"""

from __future__ import annotations

from .records import RequestRecord, RunRecord, ScoreCell
from .sinks import RequestSink, StoreSink
from .store import SCHEMA_VERSION, MonitorStore, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "MonitorStore",
    "RequestRecord",
    "RequestSink",
    "RunRecord",
    "ScoreCell",
    "StoreError",
    "StoreSink",
]
