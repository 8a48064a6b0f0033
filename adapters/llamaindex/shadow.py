"""Shadow scoring for LlamaIndex query engines: `shadow(engine, metrics)` serves exactly as the
engine does and records every query, scoring a sample of them off the request path.

The wrapper only measures; recording, sampling and scoring are the core's `ShadowScorer`
(`ragbridge.core.monitoring.shadow`), the same one the LangChain wrapper uses, so a service
with both frameworks can share one scorer, one judge and one store.

Why it looks the way it does:

* **A query engine, not a proxy.** `ShadowQueryEngine` is a ``BaseQueryEngine``, so it goes
  wherever an engine goes (a ``QueryEngineTool``, a router). Its ``query``/``aquery`` call the
  wrapped engine's own ``query``/``aquery`` with no span or event of its own: what other
  instrumentation sees is what the engine emits, and the response returned is the engine's.
* **Measured through instrumentation.** Each call runs under ``instrument_tags`` carrying a
  token of its own (merged with the caller's tags), and the capture collects, for that token,
  retrieval start/end (retrieval time, the retrieved nodes) and LLM chat/completion start/end
  (generation time, the model's name), pairing each start with its end by span id. The events
  of concurrent queries never mix (tags are per task and thread), and a query's bucket is
  dropped when it returns, so the capture holds only the queries in flight.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.metrics.base import Metric
from ragbridge.core.monitoring.shadow import (
    FinishedRequest,
    ShadowOptions,
    ShadowScorer,
    busy_ms,
    shadow_scorer,
)
from ragbridge.core.sample import Context
from ragbridge.core.scoring.scorer import Scorer

from ._framework import (
    MODEL_CALL_ENDS,
    MODEL_CALL_STARTS,
    BaseEvent,
    BaseQueryEngine,
    PromptDictType,
    PromptMixinType,
    RetrievalEndEvent,
    RetrievalStartEvent,
    active_instrument_tags,
    instrument_tags,
)
from .capture import CapturedRetrieval, RetrievalCapture, engine_kind
from .defaults import model_aliases
from .reading import (
    Unscorable,
    answer_of,
    contexts_from,
    model_name,
    query_text,
    source_nodes,
)

__all__ = ["SHADOW_TAG", "ShadowQueryEngine", "shadow"]

SHADOW_TAG = "ragbridge_shadow"
"""The instrument tag that ties a query's events to its `ShadowQueryEngine` call."""


@dataclass
class _Bucket:
    """What one query did, as its events arrive."""

    retrieval_started: dict[str | None, float] = field(default_factory=dict)
    retrieval_spans: list[tuple[float, float]] = field(default_factory=list)
    retrievals: list[CapturedRetrieval] = field(default_factory=list)
    model_started: dict[str | None, float] = field(default_factory=dict)
    model_spans: list[tuple[float, float]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


class _ShadowCapture(RetrievalCapture):
    """Collects retrieval and model-call events per `SHADOW_TAG` token, for the calls in
    flight only."""

    def __init__(self, *, use_ref_doc_id: bool) -> None:
        super().__init__(use_ref_doc_id=use_ref_doc_id)
        self._buckets: dict[int, _Bucket] = {}

    def begin(self, token: int) -> None:
        with self._lock:
            self._buckets[token] = _Bucket()

    def end(self, token: int) -> _Bucket:
        with self._lock:
            return self._buckets.pop(token, None) or _Bucket()

    # no span bookkeeping: events carry the token
    def _span_enter(self, id_: str, parent_id: str | None) -> None:
        return None

    def _span_exit(self, id_: str) -> None:
        return None

    def _event(self, event: BaseEvent) -> None:
        token = event.tags.get(SHADOW_TAG)
        if token is None:
            return
        now = time.perf_counter()
        with self._lock:
            bucket = self._buckets.get(token)
            if bucket is None:
                return
            span = event.span_id
            if isinstance(event, RetrievalStartEvent):
                bucket.retrieval_started[span] = now
            elif isinstance(event, RetrievalEndEvent):
                started = bucket.retrieval_started.pop(span, None)
                if started is not None:
                    bucket.retrieval_spans.append((started, now))
                bucket.retrievals.append(
                    CapturedRetrieval.of_event(
                        event, root_span_id=None, tags={}, use_ref_doc_id=self.use_ref_doc_id
                    )
                )
            elif isinstance(event, MODEL_CALL_STARTS):
                bucket.model_started[span] = now
                name = model_name(event.model_dict)
                if name is not None:
                    bucket.models.append(name)
            elif isinstance(event, MODEL_CALL_ENDS):
                started = bucket.model_started.pop(span, None)
                if started is not None:
                    bucket.model_spans.append((started, now))


@dataclass
class _Call:
    token: int
    request_id: str
    id_from: str
    query: Any
    tags: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    timestamp: float = field(default_factory=time.time)


class ShadowQueryEngine(BaseQueryEngine):
    """A query engine that answers exactly as the one it wraps and shadow-scores its queries.

    Built by `shadow`. ``query``/``aquery`` return the wrapped engine's response and raise what
    it raises; ``retrieve``, ``synthesize``, prompts and any other attribute are the wrapped
    engine's. After each query its measurements go to the `ShadowScorer` (``self.scorer``).
    """

    def __init__(
        self,
        engine: Any,
        scorer: ShadowScorer,
        *,
        owns_scorer: bool,
        pipeline: str | None,
        request_id_tag: str,
        use_ref_doc_id: bool,
    ) -> None:
        self.engine = engine
        self.scorer = scorer
        self.owns_scorer = owns_scorer
        self.pipeline = pipeline if pipeline is not None else type(engine).__name__
        self.request_id_tag = request_id_tag
        self.use_ref_doc_id = use_ref_doc_id
        self._tokens = itertools.count(1)
        self._capture = _ShadowCapture(use_ref_doc_id=use_ref_doc_id)
        self._capture.open()
        super().__init__(callback_manager=getattr(engine, "callback_manager", None))

    def __getattr__(self, name: str) -> Any:
        engine = self.__dict__.get("engine")
        if engine is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(engine, name)

    def __repr__(self) -> str:
        return f"shadow({self.engine!r}, sample_rate={self.scorer.sample_rate})"

    # -- lifecycle
    def close(self, timeout: float | None = None) -> bool:
        """Stop measuring; close the scorer when this wrapper built it (a shared one is left to
        its owner). True when nothing was cut short."""
        self._capture.close()
        return self.scorer.close(timeout) if self.owns_scorer else True

    async def aclose(self, timeout: float | None = None) -> bool:
        import asyncio

        return await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> ShadowQueryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the wrapped engine's own surface
    def get_prompts(self) -> dict[str, Any]:
        return dict(self.engine.get_prompts())

    def update_prompts(self, prompts_dict: PromptDictType) -> None:
        self.engine.update_prompts(prompts_dict)

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def retrieve(self, query_bundle: Any) -> Any:
        return self.engine.retrieve(query_bundle)

    def synthesize(self, *args: Any, **kwargs: Any) -> Any:
        return self.engine.synthesize(*args, **kwargs)

    async def asynthesize(self, *args: Any, **kwargs: Any) -> Any:
        return await self.engine.asynthesize(*args, **kwargs)

    def _query(self, query_bundle: Any) -> Any:
        return self.query(query_bundle)

    async def _aquery(self, query_bundle: Any) -> Any:
        return await self.aquery(query_bundle)

    # -- the request path
    def _begin(self, query: Any) -> _Call:
        active = dict(active_instrument_tags.get())
        named = active.get(self.request_id_tag)
        if named is not None and str(named):
            request_id, id_from = str(named), "instrument_tags"
        else:
            request_id, id_from = str(uuid.uuid4()), "generated"
        token = next(self._tokens)
        self._capture.begin(token)
        return _Call(token, request_id, id_from, query, {**active, SHADOW_TAG: token})

    def _finish(
        self, call: _Call, *, response: Any = None, error: BaseException | None = None
    ) -> None:
        """Hand the query's measurements to the scorer; never raises."""
        try:
            latency = (time.perf_counter() - call.started) * 1000.0
            bucket = self._capture.end(call.token)
            answer: str | None = None
            unscorable: str | None = None
            if error is None:
                try:
                    answer = answer_of(response)
                except Unscorable as exc:
                    unscorable = str(exc)
                else:
                    if answer is None:
                        unscorable = "the response has no answer text"
            source = source_nodes(response)
            seen = bool(source or bucket.retrievals)
            self.scorer.record(
                FinishedRequest(
                    request_id=call.request_id,
                    question=_question(call.query),
                    answer=answer,
                    contexts=self._contexts_later(source, bucket.retrievals) if seen else None,
                    retrieval_ms=busy_ms(bucket.retrieval_spans),
                    generation_ms=busy_ms(bucket.model_spans),
                    latency_ms=latency,
                    error=None if error is None else f"{type(error).__name__}: {error}",
                    not_scorable=unscorable,
                    timestamp=call.timestamp,
                    pipeline=self.pipeline,
                    attributes=_attributes(call, bucket, from_source=bool(source)),
                )
            )
        except Exception as exc:  # serving must go on whatever happens here
            self.scorer.note_error(f"query {call.request_id!r}: {type(exc).__name__}: {exc}")

    def _contexts_later(self, source: list[Any], retrievals: list[CapturedRetrieval]) -> Any:
        """The response's source nodes (else the nodes retrieved under the query) as contexts,
        converted on the scorer's sink thread."""
        use_ref = self.use_ref_doc_id

        def contexts() -> list[Context]:
            return contexts_from(source, retrievals, use_ref_doc_id=use_ref)

        return contexts

    def query(self, str_or_query_bundle: Any) -> Any:
        call = self._begin(str_or_query_bundle)
        try:
            with instrument_tags(call.tags):
                response = self.engine.query(str_or_query_bundle)
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, response=response)
        return response

    async def aquery(self, str_or_query_bundle: Any) -> Any:
        call = self._begin(str_or_query_bundle)
        try:
            with instrument_tags(call.tags):
                response = await self.engine.aquery(str_or_query_bundle)
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, response=response)
        return response


def _question(query: Any) -> str | None:
    try:
        return query_text(query)
    except Exception:
        return None


def _attributes(call: _Call, bucket: _Bucket, *, from_source: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"request_id_from": call.id_from, "retrievals": len(bucket.retrievals)}
    if bucket.retrievals and not from_source:
        out["contexts_from"] = "instrumentation"
    if bucket.models:
        out["model"] = bucket.models[-1]
    return out


def shadow(
    engine: Any,
    metrics: ShadowScorer | Scorer | Iterable[Metric | str],
    *,
    pipeline: str | None = None,
    request_id_tag: str = "request_id",
    use_ref_doc_id: bool = True,
    llm: Any = None,
    embed_model: Any = None,
    **options: Unpack[ShadowOptions],
) -> ShadowQueryEngine:
    """Wrap a LlamaIndex query engine to record every query it answers and score a sample of
    them in the background (shadow scoring); the wrapper answers exactly as ``engine`` does.

    ``metrics`` are metric names or objects, scored by a new `ShadowScorer` built with
    ``options`` (``judge=``, ``sample_rate=`` (default 0.05), ``relevance_threshold=``,
    ``sinks=``, ``store=``, ``max_pending=``, ``max_queued=``, ``close_timeout=``, ...; see
    `ragbridge.core.monitoring.shadow.ShadowScorer`) and closed with the wrapper; or a
    `ShadowScorer` to share with other wrappers (a LangChain Runnable's too), which its owner
    closes. ``llm=``/``embed_model=`` are LlamaIndex's names for ``judge=``/``embedder=``. By
    default records go to ``ragbridge-monitor.sqlite`` in the working directory.

    Per query it measures the retrieval time and the generation time (retrieval and LLM
    chat/completion events; calls that overlap count once), the chunks (the response's source
    nodes, else the nodes retrieved under the query; named by document id unless
    ``use_ref_doc_id=False``; scores are the retriever's), the question and the answer
    (``str(response)``; a streaming response is recorded, not scored). The request id is the
    ``request_id_tag`` instrument tag active when ``query`` is called (``with
    instrument_tags({"request_id": ...}): engine.query(q)``), else a new UUID; sampling is
    decided by that id. ``pipeline`` names the records (default: the engine's class name).
    Only query engines (``query``/``aquery``) are wrapped; chat engines are refused.
    """
    if engine_kind(engine) != "query":
        raise TypeError(
            f"shadow wraps LlamaIndex query engines (query/aquery); {type(engine).__name__} "
            f"is a chat engine"
        )
    scorer, owns = shadow_scorer(metrics, model_aliases(options, llm, embed_model))
    return ShadowQueryEngine(
        engine,
        scorer,
        owns_scorer=owns,
        pipeline=pipeline,
        request_id_tag=request_id_tag,
        use_ref_doc_id=use_ref_doc_id,
    )
