"""Production monitoring and run history: what live requests and evaluation runs recorded.

`records` holds the contract (`RequestRecord`, `RunRecord`, `ScoreCell`); `store` the local
SQLite file that keeps both (`MonitorStore`); `sinks` where a live request's record goes.
`shadow` scores a sample of live traffic off the request path (`ShadowScorer`; the framework
wrappers are ``ragbridge.adapters.langchain.shadow`` and ``ragbridge.adapters.llamaindex.shadow``),
`alerts` compares rolling windows with a baseline (`AlertMonitor`, `check`), `correlation` links
thumbs-down feedback to retrieval patterns (`feedback_report`), and `history` records evaluation
runs and finds the run that changed a metric (`record_run`, `run_history`). The OpenTelemetry
exporter is an adapter: ``ragbridge.adapters.otel.OpenTelemetrySink``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy_exports

if TYPE_CHECKING:
    from .alerts import Alert, AlertMonitor, Baseline, Rule, check
    from .correlation import FeedbackReport, feedback_report
    from .history import record_run, run_history
    from .records import RequestRecord, RunRecord, ScoreCell
    from .shadow import FinishedRequest, ShadowScorer
    from .sinks import RequestSink, StoreSink
    from .store import SCHEMA_VERSION, MonitorStore, StoreError
    from .store_api import ResultsStore, open_store

# Exported lazily (PEP 562), as `ragbridge.core` is: a reader of the store (``ragbridge
# history``, ``--history``) must not pay for importing the scorer, the metrics and the alert
# statistics it never uses.
_EXPORTS: dict[str, str] = {
    "SCHEMA_VERSION": "store",
    "Alert": "alerts",
    "AlertMonitor": "alerts",
    "Baseline": "alerts",
    "FeedbackReport": "correlation",
    "FinishedRequest": "shadow",
    "MonitorStore": "store",
    "RequestRecord": "records",
    "RequestSink": "sinks",
    "ResultsStore": "store_api",
    "Rule": "alerts",
    "RunRecord": "records",
    "ScoreCell": "records",
    "ShadowScorer": "shadow",
    "StoreError": "store",
    "StoreSink": "sinks",
    "check": "alerts",
    "feedback_report": "correlation",
    "open_store": "store_api",
    "record_run": "history",
    "run_history": "history",
}

__all__ = [
    "SCHEMA_VERSION",
    "Alert",
    "AlertMonitor",
    "Baseline",
    "FeedbackReport",
    "FinishedRequest",
    "MonitorStore",
    "RequestRecord",
    "RequestSink",
    "ResultsStore",
    "Rule",
    "RunRecord",
    "ScoreCell",
    "ShadowScorer",
    "StoreError",
    "StoreSink",
    "check",
    "feedback_report",
    "open_store",
    "record_run",
    "run_history",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
