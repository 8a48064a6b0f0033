"""`OpenTelemetrySink`: spans, parent/child, times, attributes, evaluation events and metrics, as
the OpenTelemetry SDK's own in-memory exporter and reader see them. No global provider is set
and nothing leaves the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ragbridge.adapters.otel import EVALUATION_EVENT, OpenTelemetrySink
from ragbridge.core.monitoring import RequestRecord, RequestSink, ScoreCell

S = 1_000_000_000  # nanoseconds per second


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def sink(self, **kw: Any) -> OpenTelemetrySink:
        return OpenTelemetrySink(self.tracer_provider, self.meter_provider, **kw)

    def spans(self) -> dict[str, ReadableSpan]:
        return {s.name: s for s in self.exporter.get_finished_spans()}

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        assert data is not None
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out[metric.name] = list(metric.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.tracer_provider.shutdown()
    o.meter_provider.shutdown()


def served(**kw: Any) -> RequestRecord:
    base: dict[str, Any] = dict(
        request_id="req-1",
        timestamp=1000.0,
        pipeline="support-bot",
        question="How do I reset my password?",
        retrieval_ms=120.0,
        generation_ms=480.0,
        chunks_retrieved=5,
        chunks_used=2,
        retrieval_miss=False,
        answer_chars=80,
        abstained=False,
        sampled=True,
        attributes={
            "model": "gpt-4o-mini",
            "provider": "openai",
            "retriever": "faq-index",
            "latency_ms": 650.0,
            "context_ids": ["c7", "c2"],
            "nested": {"not": "sent"},
        },
    )
    base.update(kw)
    return RequestRecord(**base)


def test_the_sink_is_a_request_sink(otel: Otel) -> None:
    assert isinstance(otel.sink(), RequestSink)


def test_one_request_is_a_workflow_span_with_retrieval_and_generation_children(otel: Otel) -> None:
    otel.sink().request(served())
    spans = otel.spans()
    assert set(spans) == {"invoke_workflow support-bot", "retrieval faq-index", "chat gpt-4o-mini"}
    root = spans["invoke_workflow support-bot"]
    retrieval = spans["retrieval faq-index"]
    generation = spans["chat gpt-4o-mini"]

    assert root.parent is None
    assert root.context is not None
    assert retrieval.context is not None
    assert generation.context is not None
    for child in (retrieval, generation):
        assert child.parent is not None
        assert child.parent.span_id == root.context.span_id
        assert child.context is not None
        assert child.context.trace_id == root.context.trace_id
    assert (root.kind, retrieval.kind, generation.kind) == (
        SpanKind.INTERNAL,
        SpanKind.CLIENT,
        SpanKind.CLIENT,
    )
    # times come from the record, not from when the sink ran: start, + retrieval, + generation,
    # and the wrapper's end-to-end latency for the request
    assert (root.start_time, root.end_time) == (1000 * S, 1000 * S + 650_000_000)
    assert (retrieval.start_time, retrieval.end_time) == (1000 * S, 1000 * S + 120_000_000)
    assert (generation.start_time, generation.end_time) == (
        1000 * S + 120_000_000,
        1000 * S + 600_000_000,
    )

    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "support-bot",
        "ragbridge.request.id": "req-1",
        "ragbridge.sampled": True,
        "ragbridge.retrieval.duration_ms": 120.0,
        "ragbridge.generation.duration_ms": 480.0,
        "ragbridge.retrieval.chunks_retrieved": 5,
        "ragbridge.retrieval.chunks_used": 2,
        "ragbridge.retrieval.miss": False,
        "ragbridge.answer.chars": 80,
        "ragbridge.answer.abstained": False,
        "ragbridge.attributes.model": "gpt-4o-mini",
        "ragbridge.attributes.provider": "openai",
        "ragbridge.attributes.retriever": "faq-index",
        "ragbridge.attributes.latency_ms": 650.0,
        "ragbridge.attributes.context_ids": ("c7", "c2"),
    }
    assert dict(retrieval.attributes or {}) == {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": "faq-index",
        "ragbridge.retrieval.chunks_retrieved": 5,
        "ragbridge.retrieval.chunks_used": 2,
        "ragbridge.retrieval.miss": False,
    }
    assert dict(generation.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.provider.name": "openai",
        "ragbridge.answer.chars": 80,
        "ragbridge.answer.abstained": False,
    }
    assert root.status.status_code == StatusCode.UNSET


def test_unmeasured_fields_are_left_out_not_sent_as_zero(otel: Otel) -> None:
    otel.sink().request(RequestRecord(request_id="bare", timestamp=50.0))
    (span,) = otel.exporter.get_finished_spans()
    assert span.name == "invoke_workflow"
    assert (span.start_time, span.end_time) == (50 * S, 50 * S)
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_workflow",
        "ragbridge.request.id": "bare",
        "ragbridge.sampled": False,
    }


def test_the_question_is_sent_only_when_content_capture_is_on(otel: Otel) -> None:
    otel.sink().request(served(request_id="a"))
    otel.sink(capture_content=True).request(served(request_id="b"))
    texts = [
        (s.attributes or {}).get("gen_ai.retrieval.query.text")
        for s in otel.exporter.get_finished_spans()
        if s.name.startswith("retrieval")
    ]
    assert texts == [None, "How do I reset my password?"]


def test_a_failed_request_has_error_status_and_type(otel: Otel) -> None:
    otel.sink().request(
        served(error="TimeoutError: the retriever took too long", generation_ms=None)
    )
    spans = otel.spans()
    root = spans["invoke_workflow support-bot"]
    assert root.status.status_code == StatusCode.ERROR
    assert root.status.description == "TimeoutError: the retriever took too long"
    assert (root.attributes or {})["error.type"] == "TimeoutError"
    assert "chat gpt-4o-mini" not in spans  # generation was not timed: no span for it


def test_scores_are_evaluation_result_events_on_a_child_of_the_request_span(otel: Otel) -> None:
    sink = otel.sink(score_thresholds={"faithfulness": 0.7})
    record = served(attributes={"model": "m", "response_id": "chatcmpl-9"})
    sink.request(record)
    sink.scored(
        record.model_copy(
            update={
                "scores": {
                    "faithfulness": ScoreCell(value=0.9),
                    "answer_relevance": ScoreCell(failure="timeout"),
                    "context_precision": ScoreCell(skipped=True),
                }
            }
        )
    )
    spans = otel.spans()
    root = spans["invoke_workflow support-bot"]
    evaluation = spans["evaluate support-bot"]
    assert root.context is not None
    assert evaluation.context is not None
    assert evaluation.parent is not None
    assert evaluation.parent.span_id == root.context.span_id
    assert evaluation.context.trace_id == root.context.trace_id
    assert dict(evaluation.attributes or {}) == {
        "ragbridge.request.id": "req-1",
        "gen_ai.response.id": "chatcmpl-9",
        "gen_ai.workflow.name": "support-bot",
        "ragbridge.score.faithfulness": 0.9,
    }
    events = {e.attributes["gen_ai.evaluation.name"]: e for e in evaluation.events if e.attributes}
    assert {e.name for e in evaluation.events} == {EVALUATION_EVENT}
    assert dict(events["faithfulness"].attributes or {}) == {
        "gen_ai.evaluation.name": "faithfulness",
        "gen_ai.evaluation.score.value": 0.9,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.response.id": "chatcmpl-9",
    }
    assert dict(events["answer_relevance"].attributes or {}) == {
        "gen_ai.evaluation.name": "answer_relevance",
        "error.type": "timeout",
        "gen_ai.response.id": "chatcmpl-9",
    }
    assert (events["context_precision"].attributes or {})["ragbridge.evaluation.skipped"] is True
    assert "gen_ai.evaluation.score.value" not in (events["context_precision"].attributes or {})


def test_a_low_score_is_labelled_fail(otel: Otel) -> None:
    sink = otel.sink(score_thresholds={"faithfulness": 0.7})
    record = served()
    sink.request(record)
    sink.scored(record.model_copy(update={"scores": {"faithfulness": ScoreCell(value=0.4)}}))
    (event,) = otel.spans()["evaluate support-bot"].events
    assert (event.attributes or {})["gen_ai.evaluation.score.label"] == "fail"


def test_scores_for_a_request_the_sink_never_saw_start_a_root_evaluation_span(otel: Otel) -> None:
    sink = otel.sink(max_pending=1)
    first, second = served(request_id="r1"), served(request_id="r2")
    sink.request(first)
    sink.request(second)  # only one pending span context is kept: r1's is forgotten
    sink.scored(first.model_copy(update={"scores": {"faithfulness": ScoreCell(value=0.5)}}))
    sink.scored(second.model_copy(update={"scores": {"faithfulness": ScoreCell(value=0.6)}}))
    evaluations = [s for s in otel.exporter.get_finished_spans() if s.name.startswith("evaluate")]
    by_request = {(s.attributes or {})["ragbridge.request.id"]: s for s in evaluations}
    assert by_request["r1"].parent is None
    assert by_request["r2"].parent is not None
    assert sink.failures == 0


def test_metrics_through_the_in_memory_reader(otel: Otel) -> None:
    sink = otel.sink()
    sink.request(served(request_id="a"))
    sink.request(served(request_id="b", retrieval_miss=True, chunks_used=0, abstained=True))
    sink.request(served(request_id="c", pipeline=None, retrieval_ms=None, error="ValueError: x"))
    sink.scored(
        served(request_id="a").model_copy(
            update={
                "scores": {
                    "faithfulness": ScoreCell(value=0.25),
                    "answer_relevance": ScoreCell(failure="judge_error"),
                }
            }
        )
    )
    m = otel.metrics()
    requests = {
        (tuple(sorted(dict(p.attributes).items()))): p.value for p in m["ragbridge.requests"]
    }
    assert requests == {
        (("gen_ai.workflow.name", "support-bot"),): 2,
        (("error.type", "ValueError"),): 1,
    }
    (retrieval,) = m["ragbridge.retrieval.duration"]
    assert (retrieval.count, retrieval.sum) == (2, pytest.approx(0.24))
    generation = {
        dict(p.attributes).get("gen_ai.workflow.name"): p
        for p in m["ragbridge.generation.duration"]
    }
    assert generation["support-bot"].count == 2
    assert generation[None].count == 1
    (misses,) = m["ragbridge.retrieval.misses"]
    assert misses.value == 1
    (abstentions,) = m["ragbridge.abstentions"]
    assert abstentions.value == 1
    (score,) = m["ragbridge.evaluation.score"]
    assert dict(score.attributes)["gen_ai.evaluation.name"] == "faithfulness"
    assert (score.count, score.sum) == (1, 0.25)
    assert list(score.explicit_bounds)[:3] == [0.1, 0.2, 0.3]  # buckets for a [0, 1] score
    (failure,) = m["ragbridge.evaluation.failures"]
    assert dict(failure.attributes) == {
        "gen_ai.workflow.name": "support-bot",
        "gen_ai.evaluation.name": "answer_relevance",
        "error.type": "judge_error",
    }
    chunks = m["ragbridge.retrieval.chunks_used"]
    assert sum(p.count for p in chunks) == 3


def test_metrics_can_be_turned_off(otel: Otel) -> None:
    otel.sink(metrics=False).request(served())
    assert otel.reader.get_metrics_data() is None or otel.metrics() == {}
    assert len(otel.exporter.get_finished_spans()) == 3


def test_a_failing_exporter_path_is_counted_never_raised() -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("collector down")

    sink = OpenTelemetrySink(Broken(), metrics=False)  # type: ignore[arg-type]
    record = served()
    sink.request(record)
    sink.scored(record.model_copy(update={"scores": {"faithfulness": ScoreCell(value=1.0)}}))
    assert sink.failures == 2
    assert sink.last_failure is not None
    assert "collector down" in sink.last_failure


def test_attribute_names_are_the_installed_semantic_conventions() -> None:
    gen_ai = pytest.importorskip("opentelemetry.semconv._incubating.attributes.gen_ai_attributes")
    from opentelemetry.semconv.attributes import error_attributes

    from ragbridge.adapters import otel

    assert otel.OPERATION == gen_ai.GEN_AI_OPERATION_NAME
    assert otel.WORKFLOW == gen_ai.GEN_AI_WORKFLOW_NAME
    assert otel.DATA_SOURCE == gen_ai.GEN_AI_DATA_SOURCE_ID
    assert otel.QUERY_TEXT == gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT
    assert otel.REQUEST_MODEL == gen_ai.GEN_AI_REQUEST_MODEL
    assert otel.PROVIDER == gen_ai.GEN_AI_PROVIDER_NAME
    assert otel.RESPONSE_ID == gen_ai.GEN_AI_RESPONSE_ID
    assert otel.EVAL_NAME == gen_ai.GEN_AI_EVALUATION_NAME
    assert otel.EVAL_VALUE == gen_ai.GEN_AI_EVALUATION_SCORE_VALUE
    assert otel.EVAL_LABEL == gen_ai.GEN_AI_EVALUATION_SCORE_LABEL
    assert otel.ERROR_TYPE == error_attributes.ERROR_TYPE
    values = {v.value for v in gen_ai.GenAiOperationNameValues}
    assert {"invoke_workflow", "retrieval", "chat"} <= values


def test_import_without_opentelemetry_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # makes `import opentelemetry...` raise ImportError
        try:
            import ragbridge.adapters.otel
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install ".[otel]" (in your ragbridge clone)' in out.stdout
    assert "needs opentelemetry-api" in out.stdout
