"""OpenTelemetry export of live requests: `OpenTelemetrySink` turns `RequestRecord`s into spans,
span events and metrics, so Phoenix, Langfuse, Grafana (Tempo/Mimir) or any OTLP backend shows
what shadow scoring measured, next to the application's own traces.

Why a sink and not instrumentation: the shadow-scoring wrappers already time retrieval and
generation and count chunks; the sink re-emits those measurements with their real start and end
times (``record.timestamp`` is taken as the moment the request started; retrieval runs first,
generation after it), and the scores, which arrive seconds later from the background scorer,
are attached to the same trace.

**Spans.** One trace per request:

* ``invoke_workflow {pipeline}`` (INTERNAL) — the request, from ``timestamp`` for
  ``attributes["latency_ms"]`` (the wrappers' end-to-end time) or else the timed retrieval plus
  generation (a zero-length span when nothing was timed); status ERROR with ``error.type`` when
  the pipeline raised;
* ``retrieval {data source}`` (CLIENT, child) — when retrieval was timed;
* ``{operation} {model}`` (CLIENT, child; ``chat`` unless ``attributes["operation"]`` says
  otherwise) — when generation was timed;
* ``evaluate {pipeline}`` (INTERNAL, child of the request span, starting when the scores
  arrive) — one ``gen_ai.evaluation.result`` event per metric, as the GenAI conventions define
  that event (name required; score value, label and ``error.type`` when applicable). The
  conventions want the event parented to the evaluated operation's span; that span has already
  ended when scores arrive, so the events sit on a child span of it. The sink remembers the span
  context of up to ``max_pending`` sampled requests; scores for a request it never saw (another
  process served it) start a root evaluation span carrying ``ragbridge.request.id`` and, when
  known, ``gen_ai.response.id`` (the conventions' correlation key when no span is available).

**Attributes.** GenAI semantic-convention names where they exist (``gen_ai.*``, development
status; tests/test_otel.py checks them against the installed opentelemetry-semantic-conventions),
``ragbridge.*`` for the rest:

| attribute                            | span                | value
| ------------------------------------ | ------------------- | -----
| gen_ai.operation.name                | all but evaluate    | invoke_workflow; retrieval; chat [1]
| gen_ai.workflow.name                 | request, evaluate   | record.pipeline
| gen_ai.data_source.id                | retrieval           | attributes data_source or retriever
| gen_ai.retrieval.query.text          | retrieval           | the question (capture_content=True)
| gen_ai.request.model                 | generation          | attributes['model']
| gen_ai.provider.name                 | generation          | attributes['provider']
| gen_ai.response.id                   | evaluate, events    | attributes['response_id']
| error.type                           | request, events     | exception class; failure kind
| ragbridge.request.id                 | request, evaluate   | record.request_id
| ragbridge.retrieval.duration_ms      | request             | retrieval_ms
| ragbridge.generation.duration_ms     | request             | generation_ms
| ragbridge.retrieval.chunks_retrieved | request, retrieval  | chunks_retrieved
| ragbridge.retrieval.chunks_used      | request, retrieval  | chunks_used (above the threshold)
| ragbridge.retrieval.miss             | request, retrieval  | retrieval_miss
| ragbridge.answer.chars               | request, generation | answer_chars
| ragbridge.answer.abstained           | request, generation | abstained
| ragbridge.sampled                    | request             | chosen for scoring
| ragbridge.feedback                   | request             | feedback, when already known
| ragbridge.attributes.<key>           | request             | other record.attributes [2]
| ragbridge.score.<metric>             | evaluate            | each metric's value
| gen_ai.evaluation.name               | event               | the metric
| gen_ai.evaluation.score.value        | event               | the value in [0, 1]
| gen_ai.evaluation.score.label        | event               | pass / fail against score_thresholds
| ragbridge.evaluation.skipped         | event               | true when the metric did not apply

[1] the generation span's operation is ``attributes["operation"]`` when set, else ``chat``.
[2] scalars and lists of scalars; the shadow wrappers add ``latency_ms`` and ``context_ids``.

A field that was not measured is left out, never sent as 0. The question text is sent only with
``capture_content=True`` (the conventions make content opt-in).

**Metrics** (through ``meter_provider``, or the global one): histograms
``ragbridge.retrieval.duration`` and ``ragbridge.generation.duration`` (s),
``ragbridge.retrieval.chunks_used`` ({chunk}) and ``ragbridge.evaluation.score`` (1, by
``gen_ai.evaluation.name``); counters ``ragbridge.requests``, ``ragbridge.retrieval.misses``,
``ragbridge.abstentions``, ``ragbridge.evaluation.failures`` (by ``gen_ai.evaluation.name`` and
``error.type``). Every metric carries ``gen_ai.workflow.name`` when the pipeline is named.

A sink never raises into its caller: an export that fails is counted (``failures``,
``last_failure``). Without a provider the global ones are used (no-ops until configured).
Importing this module without OpenTelemetry raises ImportError naming the extra:
``pip install ".[otel]"`` in your ragbridge clone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ragbridge.adapters._extras import install_hint, missing_extra
from ragbridge.core.monitoring.records import RequestRecord

INSTALL_HINT = install_hint("otel")
"""What to run when the ``otel`` extra is missing."""

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ragbridge.adapters.otel", "opentelemetry-api", "otel", exc) from exc

__all__ = ["EVALUATION_EVENT", "INSTALL_HINT", "OpenTelemetrySink"]

log = logging.getLogger(__name__)

EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The GenAI conventions' event for one evaluation result."""

# GenAI semantic-convention names (strings, so a moved constant in the semconv package cannot
# break the import; tests/test_otel.py checks them against the installed package).
OPERATION = "gen_ai.operation.name"
WORKFLOW = "gen_ai.workflow.name"
DATA_SOURCE = "gen_ai.data_source.id"
QUERY_TEXT = "gen_ai.retrieval.query.text"
REQUEST_MODEL = "gen_ai.request.model"
PROVIDER = "gen_ai.provider.name"
RESPONSE_ID = "gen_ai.response.id"
EVAL_NAME = "gen_ai.evaluation.name"
EVAL_VALUE = "gen_ai.evaluation.score.value"
EVAL_LABEL = "gen_ai.evaluation.score.label"
ERROR_TYPE = "error.type"

_SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_SECOND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CHUNK_BUCKETS = (0, 1, 2, 3, 4, 5, 8, 10, 20, 50)

_INSTRUMENTS: dict[str, tuple[str, str, str, tuple[float, ...] | None]] = {
    # key: (name, unit, description, histogram buckets; None for a counter)
    "requests": ("ragbridge.requests", "{request}", "Requests served.", None),
    "retrieval_s": (
        "ragbridge.retrieval.duration",
        "s",
        "Retrieval time of a request.",
        _SECOND_BUCKETS,
    ),
    "generation_s": (
        "ragbridge.generation.duration",
        "s",
        "Generation time of a request.",
        _SECOND_BUCKETS,
    ),
    "chunks_used": (
        "ragbridge.retrieval.chunks_used",
        "{chunk}",
        "Retrieved chunks above the relevance threshold.",
        _CHUNK_BUCKETS,
    ),
    "misses": (
        "ragbridge.retrieval.misses",
        "{request}",
        "Requests where no chunk reached the relevance threshold.",
        None,
    ),
    "abstentions": ("ragbridge.abstentions", "{request}", "Answers that declined.", None),
    "scores": (
        "ragbridge.evaluation.score",
        "1",
        "Sampled evaluation scores in [0, 1], by metric.",
        _SCORE_BUCKETS,
    ),
    "score_failures": (
        "ragbridge.evaluation.failures",
        "{score}",
        "Sampled scores that failed, by metric and failure kind.",
        None,
    ),
}
"""The sink's metric instruments, created once per sink by key (one table, so adding one is a
row, not a method body)."""


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ragbridge")
    except Exception:  # not installed as a distribution (a source checkout)
        return "0"


def _attribute(value: Any) -> AttributeValue | None:
    """An OpenTelemetry attribute value (scalar or homogeneous list of scalars), or None."""
    if isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {bool, str, int, float}:
            return list(value)
        if kinds <= {int, float}:
            return [float(v) for v in value]
    return None


def _error_type(error: str) -> str:
    """A low-cardinality ``error.type`` from "ValueError: message" (the class name)."""
    head = error.split(":", 1)[0].strip()
    return head if head and " " not in head and len(head) <= 80 else "_OTHER"


class OpenTelemetrySink:
    """A `RequestSink` that emits each request as OpenTelemetry spans, events and metrics.

    ``tracer_provider`` / ``meter_provider`` default to the global providers; ``metrics=False``
    emits spans only. ``score_thresholds`` (metric -> pass mark) adds ``pass``/``fail`` labels to
    evaluation events. ``capture_content`` sends the question text. ``attribute_prefix`` names
    the namespace of other ``record.attributes`` (None: not sent).

    Usage::

        sink = OpenTelemetrySink(tracer_provider=provider)
        wrapper = shadow(chain, sinks=[StoreSink(store), sink])   # the shadow-scoring wrapper
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
        *,
        metrics: bool = True,
        score_thresholds: Mapping[str, float] | None = None,
        capture_content: bool = False,
        attribute_prefix: str | None = "ragbridge.attributes.",
        max_pending: int = 10_000,
    ) -> None:
        version = _version()
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("ragbridge", version)
        self.score_thresholds = dict(score_thresholds or {})
        self.capture_content = capture_content
        self.attribute_prefix = attribute_prefix
        self.max_pending = max_pending
        self.failures = 0
        self.last_failure: str | None = None
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, SpanContext] = OrderedDict()
        self._metrics = metrics
        self._counters: dict[str, otel_metrics.Counter] = {}
        self._histograms: dict[str, otel_metrics.Histogram] = {}
        if metrics:
            meter = (meter_provider or otel_metrics.get_meter_provider()).get_meter(
                "ragbridge", version
            )
            for key, (name, unit, description, buckets) in _INSTRUMENTS.items():
                if buckets is None:
                    self._counters[key] = meter.create_counter(
                        name, unit=unit, description=description
                    )
                else:
                    self._histograms[key] = meter.create_histogram(
                        name,
                        unit=unit,
                        description=description,
                        explicit_bucket_boundaries_advisory=buckets,
                    )

    def __repr__(self) -> str:
        return f"OpenTelemetrySink(failures={self.failures}, pending={len(self._pending)})"

    # -- the sink protocol ------------------------------------------------------------------

    def request(self, record: RequestRecord) -> None:
        try:
            self._request(record)
        except Exception as exc:  # a sink must never break serving
            self._failed("request", record, exc)

    def scored(self, record: RequestRecord) -> None:
        try:
            self._scored(record)
        except Exception as exc:
            self._failed("scored", record, exc)

    def _failed(self, where: str, record: RequestRecord, exc: Exception) -> None:
        with self._lock:
            self.failures += 1
            self.last_failure = f"{where} {record.request_id}: {type(exc).__name__}: {exc}"
        log.debug("OpenTelemetrySink.%s failed", where, exc_info=True)

    # -- spans ------------------------------------------------------------------------------

    def _request(self, record: RequestRecord) -> None:
        start = _ns(record.timestamp)
        retrieval_end = start + _ns((record.retrieval_ms or 0.0) / 1000)
        generation_end = retrieval_end + _ns((record.generation_ms or 0.0) / 1000)
        end = generation_end
        latency = record.attributes.get("latency_ms")
        if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency >= 0:
            end = max(end, start + _ns(latency / 1000))
        workflow = record.pipeline
        attrs = self._request_attributes(record)
        name = f"invoke_workflow {workflow}" if workflow else "invoke_workflow"
        root = self._tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attrs, start_time=start
        )
        try:
            parent = trace.set_span_in_context(root)
            if record.retrieval_ms is not None:
                self._retrieval_span(record, parent, start, retrieval_end)
            if record.generation_ms is not None:
                self._generation_span(record, parent, retrieval_end, generation_end)
            if record.error is not None:
                root.set_status(Status(StatusCode.ERROR, record.error))
        finally:
            root.end(end_time=end)
        if record.sampled:
            with self._lock:
                self._pending[record.request_id] = root.get_span_context()
                self._pending.move_to_end(record.request_id)
                while len(self._pending) > self.max_pending:
                    self._pending.popitem(last=False)
        if self._metrics:
            self._record_metrics(record)

    def _request_attributes(self, record: RequestRecord) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            OPERATION: "invoke_workflow",
            "ragbridge.request.id": record.request_id,
            "ragbridge.sampled": record.sampled,
        }
        optional: dict[str, Any] = {
            WORKFLOW: record.pipeline,
            "ragbridge.retrieval.duration_ms": record.retrieval_ms,
            "ragbridge.generation.duration_ms": record.generation_ms,
            "ragbridge.retrieval.chunks_retrieved": record.chunks_retrieved,
            "ragbridge.retrieval.chunks_used": record.chunks_used,
            "ragbridge.retrieval.miss": record.retrieval_miss,
            "ragbridge.answer.chars": record.answer_chars,
            "ragbridge.answer.abstained": record.abstained,
            "ragbridge.feedback": record.feedback,
            ERROR_TYPE: None if record.error is None else _error_type(record.error),
        }
        attrs.update({k: v for k, v in optional.items() if v is not None})
        if self.attribute_prefix is not None:
            for key, value in record.attributes.items():
                converted = _attribute(value)
                if converted is not None:
                    attrs[f"{self.attribute_prefix}{key}"] = converted
        return attrs

    def _retrieval_span(self, record: RequestRecord, parent: Any, start: int, end: int) -> None:
        source = record.attributes.get("data_source") or record.attributes.get("retriever")
        attrs: dict[str, Any] = {
            OPERATION: "retrieval",
            DATA_SOURCE: None if source is None else str(source),
            QUERY_TEXT: record.question if self.capture_content else None,
            "ragbridge.retrieval.chunks_retrieved": record.chunks_retrieved,
            "ragbridge.retrieval.chunks_used": record.chunks_used,
            "ragbridge.retrieval.miss": record.retrieval_miss,
        }
        name = f"retrieval {source}" if source is not None else "retrieval"
        self._client_span(name, parent, attrs, start, end)

    def _generation_span(self, record: RequestRecord, parent: Any, start: int, end: int) -> None:
        operation = str(record.attributes.get("operation") or "chat")
        model = record.attributes.get("model")
        attrs: dict[str, Any] = {
            OPERATION: operation,
            REQUEST_MODEL: None if model is None else str(model),
            PROVIDER: record.attributes.get("provider"),
            "ragbridge.answer.chars": record.answer_chars,
            "ragbridge.answer.abstained": record.abstained,
        }
        name = f"{operation} {model}" if model is not None else operation
        self._client_span(name, parent, attrs, start, end)

    def _client_span(
        self, name: str, parent: Any, attrs: Mapping[str, Any], start: int, end: int
    ) -> None:
        """A finished CLIENT span under ``parent``, with the attributes that have a value."""
        span = self._tracer.start_span(
            name,
            context=parent,
            kind=SpanKind.CLIENT,
            attributes={k: v for k, v in attrs.items() if v is not None},
            start_time=start,
        )
        span.end(end_time=end)

    def _scored(self, record: RequestRecord) -> None:
        if not record.scores:
            return
        with self._lock:
            parent_context = self._pending.pop(record.request_id, None)
        now = time.time_ns()
        response_id = record.attributes.get("response_id")
        attrs: dict[str, AttributeValue] = {"ragbridge.request.id": record.request_id}
        if response_id is not None:
            attrs[RESPONSE_ID] = str(response_id)
        if record.pipeline:
            attrs[WORKFLOW] = record.pipeline
        for metric, cell in record.scores.items():
            if cell.value is not None:
                attrs[f"ragbridge.score.{metric}"] = cell.value
        name = f"evaluate {record.pipeline}" if record.pipeline else "evaluate"
        if parent_context is not None:
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent_context))
        else:
            context = trace.set_span_in_context(trace.INVALID_SPAN)  # a root, not the caller's
        span = self._tracer.start_span(
            name,
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=now,
        )
        try:
            for metric, cell in record.scores.items():
                event: dict[str, AttributeValue] = {EVAL_NAME: metric}
                if response_id is not None:
                    event[RESPONSE_ID] = str(response_id)
                if cell.value is not None:
                    event[EVAL_VALUE] = cell.value
                    threshold = self.score_thresholds.get(metric)
                    if threshold is not None:
                        event[EVAL_LABEL] = "pass" if cell.value >= threshold else "fail"
                if cell.failure is not None:
                    event[ERROR_TYPE] = cell.failure
                if cell.skipped:
                    event["ragbridge.evaluation.skipped"] = True
                span.add_event(EVALUATION_EVENT, attributes=event, timestamp=now)
        finally:
            span.end(end_time=now)
        if self._metrics:
            labels: dict[str, AttributeValue] = (
                {WORKFLOW: record.pipeline} if record.pipeline else {}
            )
            for metric, cell in record.scores.items():
                if cell.value is not None:
                    self._histograms["scores"].record(cell.value, {**labels, EVAL_NAME: metric})
                elif cell.failure is not None:
                    self._counters["score_failures"].add(
                        1, {**labels, EVAL_NAME: metric, ERROR_TYPE: cell.failure}
                    )

    # -- metrics ----------------------------------------------------------------------------

    def _record_metrics(self, record: RequestRecord) -> None:
        labels: dict[str, AttributeValue] = {WORKFLOW: record.pipeline} if record.pipeline else {}
        request_labels = dict(labels)
        if record.error is not None:
            request_labels[ERROR_TYPE] = _error_type(record.error)
        self._counters["requests"].add(1, request_labels)
        if record.retrieval_ms is not None:
            self._histograms["retrieval_s"].record(record.retrieval_ms / 1000, labels)
        if record.generation_ms is not None:
            self._histograms["generation_s"].record(record.generation_ms / 1000, labels)
        if record.chunks_used is not None:
            self._histograms["chunks_used"].record(record.chunks_used, labels)
        if record.retrieval_miss:
            self._counters["misses"].add(1, labels)
        if record.abstained:
            self._counters["abstentions"].add(1, labels)
