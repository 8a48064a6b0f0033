"""Shadow scoring for LangChain Runnables: `shadow(runnable, metrics)` serves exactly as the
Runnable does and records every request, scoring a sample of them off the request path.

The wrapper only measures; recording, sampling and scoring are the core's `ShadowScorer`
(`ragbridge.core.monitoring.shadow`), the same one the LlamaIndex wrapper uses, so a service
with both frameworks can share one scorer, one judge and one store.

Why it looks the way it does: `ShadowRunnable` is a ``Runnable``, so it composes like one, and
its methods call the wrapped Runnable's own with one more callback handler. That handler
(`_RequestCapture`) is one per request, so its retrievals and model calls need no grouping,
and it is dropped with the request: the wrapper keeps nothing per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

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
    BaseMessage,
    HumanMessage,
    Runnable,
    RunnableConfig,
    get_config_list,
    merge_configs,
)
from .capture import Retrieval, RetrievalCapture, choose_retrieval
from .documents import DEFAULT_SCORE_KEYS
from .models import message_text
from .pipelines import answer_of

__all__ = ["ShadowRunnable", "shadow"]


class _RequestCapture(RetrievalCapture):
    """What one served request did: its retrievals (`RetrievalCapture`) and when each model
    call ran. One per request, so nothing needs grouping; it is dropped with the request."""

    def __init__(self, *, id_key: str | Sequence[str] | None, score_keys: Sequence[str]) -> None:
        super().__init__(id_key=id_key, score_keys=score_keys)
        self._model_started: dict[UUID, float] = {}
        self.model_spans: list[tuple[float, float]] = []

    def _model_start(self, run_id: UUID, kwargs: dict[str, Any]) -> None:
        super()._model_start(run_id, kwargs)
        with self._lock:
            self._model_started[run_id] = time.perf_counter()

    def _model_end(self, run_id: UUID) -> None:
        now = time.perf_counter()
        with self._lock:
            started = self._model_started.pop(run_id, None)
            if started is not None:
                self.model_spans.append((started, now))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_end(run_id)

    def retrieval_spans(self) -> list[tuple[float, float]]:
        with self._lock:
            return [(r.started, r.ended) for r in self._retrievals.values() if r.ended]

    def model_names(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(self._models.values()))


@dataclass
class _Call:
    """One request between `ShadowRunnable._begin` and `_finish`."""

    request_id: str
    id_from: str
    input: Any
    config: RunnableConfig
    capture: _RequestCapture
    started: float = field(default_factory=time.perf_counter)
    timestamp: float = field(default_factory=time.time)


_QUESTION_KEYS = ("question", "input", "query")


def _question_of(value: Any, input_key: str | None) -> str | None:
    """The user's question in a chain's input: a str, a dict's question/input/query (or
    ``input_key``), a message, or the last human message of a list."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in (input_key,) if input_key is not None else _QUESTION_KEYS:
            found = value.get(key)
            if isinstance(found, str):
                return found
        return None
    if isinstance(value, BaseMessage):
        return message_text(value)
    if isinstance(value, Sequence) and value and isinstance(value[-1], HumanMessage):
        return message_text(value[-1])
    return None


@dataclass
class _Outcome:
    """How one request ended, as `ShadowRunnable._finish` records it: its output, the error it
    raised, or why it cannot be scored. A stream's output is its chunks added up as LangChain
    adds them (``a + b``: strings, message chunks, dicts of a parallel step), so a streamed
    answer can be scored once the stream ends."""

    output: Any = None
    error: BaseException | None = None
    unscorable: str | None = None
    _empty: bool = True

    def add(self, chunk: Any) -> None:
        if self.unscorable is not None:
            return
        if self._empty:
            self.output, self._empty = chunk, False
            return
        try:
            self.output = self.output + chunk
        except TypeError:
            self.output = None
            self.unscorable = f"stream chunks of type {type(chunk).__name__} do not add up"


class ShadowRunnable(Runnable[Any, Any]):
    """A Runnable that serves exactly as the one it wraps and shadow-scores its requests.

    Built by `shadow`. ``invoke``, ``ainvoke``, ``batch``, ``abatch``, ``stream`` and ``astream``
    call the wrapped Runnable's own method with the same input and config (plus one callback
    handler) and return what it returns, raise what it raises. Composition (``|``,
    ``with_config``, ``astream_events``) works through these. After each request, its
    measurements go to the `ShadowScorer` (``self.scorer``), which records and samples off the
    request path.
    """

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        scorer: ShadowScorer,
        *,
        owns_scorer: bool,
        pipeline: str | None,
        request_id_key: str,
        answer_key: str | None,
        input_key: str | None,
        retriever_name: str | None,
        id_key: str | Sequence[str] | None,
        score_keys: Sequence[str],
    ) -> None:
        self.runnable = runnable
        self.scorer = scorer
        self.owns_scorer = owns_scorer
        self.name = runnable.get_name()
        self.pipeline = pipeline if pipeline is not None else self.name
        self.request_id_key = request_id_key
        self.answer_key = answer_key
        self.input_key = input_key
        self.retriever_name = retriever_name
        self.id_key = id_key
        self.score_keys = tuple(score_keys)

    def __repr__(self) -> str:
        return f"shadow({self.runnable!r}, sample_rate={self.scorer.sample_rate})"

    # -- what the wrapped runnable says about itself
    @property
    def InputType(self) -> Any:
        return self.runnable.InputType

    @property
    def OutputType(self) -> Any:
        return self.runnable.OutputType

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_output_schema(config)

    @property
    def config_specs(self) -> Any:
        return self.runnable.config_specs

    def get_graph(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_graph(config)

    # -- lifecycle
    def close(self, timeout: float | None = None) -> bool:
        """Close the scorer when this wrapper built it (see `ShadowScorer.close`); a shared
        scorer is left to its owner. True when nothing was cut short."""
        return self.scorer.close(timeout) if self.owns_scorer else True

    async def aclose(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> ShadowRunnable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the request path
    def _begin(self, input: Any, config: RunnableConfig | None) -> _Call:
        given = config or {}
        metadata = given.get("metadata") or {}
        named = metadata.get(self.request_id_key)
        run_id = given.get("run_id")
        capture = _RequestCapture(id_key=self.id_key, score_keys=self.score_keys)
        extra: RunnableConfig = {"callbacks": [capture]}
        if named is not None and str(named):
            request_id, id_from = str(named), "metadata"
        elif run_id is not None:
            request_id, id_from = str(run_id), "run_id"
        else:
            new = uuid4()
            request_id, id_from = str(new), "generated"
            extra["run_id"] = new  # the trace of the request carries its id
        patched = merge_configs(config, extra)
        return _Call(request_id, id_from, input, patched, capture)

    @contextlib.contextmanager
    def _serving(self, calls: list[_Call]) -> Iterator[list[_Outcome]]:
        """Around serving ``calls``: each is handed to the scorer once the block ends, with the
        outcome the block set for it; with the error the block raised (the caller got no
        output for any of them); or, when the caller stopped reading a stream before its end,
        as not scorable. The error is raised on, unchanged."""
        outcomes = [_Outcome() for _ in calls]
        try:
            yield outcomes
        except GeneratorExit:
            outcomes = [_Outcome(unscorable=_STOPPED) for _ in calls]
            raise
        except BaseException as exc:
            outcomes = [_Outcome(error=exc) for _ in calls]
            raise
        finally:
            for call, outcome in zip(calls, outcomes, strict=True):
                self._finish(call, outcome)

    def _finish(self, call: _Call, outcome: _Outcome) -> None:
        """Hand the request's measurements to the scorer; never raises."""
        try:
            latency = (time.perf_counter() - call.started) * 1000.0
            capture = call.capture
            answer: str | None = None
            error, output, unscorable = outcome.error, outcome.output, outcome.unscorable
            if error is None and unscorable is None:
                answer = answer_of(output, self.answer_key)
                if answer is None:
                    unscorable = f"no answer found in the output ({type(output).__name__})"
            chosen, info = choose_retrieval(capture.retrievals, self.retriever_name)
            question = _question_of(call.input, self.input_key)
            if question is None and chosen is not None:
                question = chosen.query
            self.scorer.record(
                FinishedRequest(
                    request_id=call.request_id,
                    question=question,
                    answer=answer,
                    contexts=None if not info["retrievals"] else _contexts_later(chosen),
                    retrieval_ms=busy_ms(capture.retrieval_spans()),
                    generation_ms=busy_ms(capture.model_spans),
                    latency_ms=latency,
                    error=None if error is None else f"{type(error).__name__}: {error}",
                    not_scorable=unscorable,
                    timestamp=call.timestamp,
                    pipeline=self.pipeline,
                    attributes=functools.partial(_attributes, call, info, question),
                )
            )
        except Exception as exc:  # serving must go on whatever happens here
            self.scorer.note_error(f"request {call.request_id!r}: {type(exc).__name__}: {exc}")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = self._begin(input, config)
        with self._serving([call]) as (outcome,):
            outcome.output = self.runnable.invoke(input, call.config, **kwargs)
        return outcome.output

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = self._begin(input, config)
        with self._serving([call]) as (outcome,):
            outcome.output = await self.runnable.ainvoke(input, call.config, **kwargs)
        return outcome.output

    def _begin_batch(
        self, inputs: list[Any], config: RunnableConfig | list[RunnableConfig] | None
    ) -> list[_Call]:
        configs = get_config_list(config, len(inputs)) if config is not None else None
        return [
            self._begin(one, None if configs is None else configs[i])
            for i, one in enumerate(inputs)
        ]

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """The wrapped Runnable's ``batch`` (its own batching kept), one request per input.
        When it raises (``return_exceptions=False``), every input's request is recorded with
        that error: the caller got no output for any of them."""
        if not inputs:
            return self.runnable.batch(inputs, config, return_exceptions=return_exceptions)
        calls = self._begin_batch(inputs, config)
        configs = [c.config for c in calls]
        with self._serving(calls) as outcomes:
            outputs = self.runnable.batch(
                inputs, configs, return_exceptions=return_exceptions, **kwargs
            )
            _batch_outcomes(outcomes, outputs)
        return outputs

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """Async `batch`."""
        if not inputs:
            return await self.runnable.abatch(inputs, config, return_exceptions=return_exceptions)
        calls = self._begin_batch(inputs, config)
        configs = [c.config for c in calls]
        with self._serving(calls) as outcomes:
            outputs = await self.runnable.abatch(
                inputs, configs, return_exceptions=return_exceptions, **kwargs
            )
            _batch_outcomes(outcomes, outputs)
        return outputs

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> Iterator[Any]:
        """The wrapped Runnable's ``stream``, chunk by chunk; the answer scored is the chunks
        added up. A stream the caller stops reading early is recorded, not scored."""
        call = self._begin(input, config)
        with self._serving([call]) as (outcome,):
            for chunk in self.runnable.stream(input, call.config, **kwargs):
                outcome.add(chunk)
                yield chunk

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> AsyncIterator[Any]:
        """Async `stream`."""
        call = self._begin(input, config)
        with self._serving([call]) as (outcome,):
            async for chunk in self.runnable.astream(input, call.config, **kwargs):
                outcome.add(chunk)
                yield chunk


def _batch_outcomes(outcomes: list[_Outcome], outputs: list[Any]) -> None:
    """A batch's outputs as its requests' outcomes: with ``return_exceptions=True`` an input
    that failed has its exception in place of an output."""
    for outcome, output in zip(outcomes, outputs, strict=True):
        if isinstance(output, Exception):
            outcome.error = output
        else:
            outcome.output = output


_STOPPED = "the caller stopped reading the stream before its end"


def _contexts_later(chosen: Retrieval | None) -> Callable[[], list[Context]]:
    """The chosen retrieval's documents as contexts, converted on the scorer's sink thread."""
    return (lambda: []) if chosen is None else chosen.contexts


def _attributes(call: _Call, info: dict[str, Any], question: str | None) -> dict[str, Any]:
    """What else a record keeps about a LangChain request (built on the sink thread)."""
    out: dict[str, Any] = {"request_id_from": call.id_from}
    for key in ("retrievals", "retriever", "retrieval_note", "retrieval_errors"):
        if info.get(key):
            out[key] = info[key]
    query = info.get("retrieval_query")
    if query is not None and query != question:
        out["retrieval_query"] = query
    models = call.capture.model_names()
    if models:
        out["model"] = models[-1]
    return out


def shadow(
    runnable: Runnable[Any, Any],
    metrics: ShadowScorer | Scorer | Iterable[Metric | str],
    *,
    pipeline: str | None = None,
    request_id_key: str = "request_id",
    answer_key: str | None = None,
    input_key: str | None = None,
    retriever_name: str | None = None,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    **options: Unpack[ShadowOptions],
) -> ShadowRunnable:
    """Wrap ``runnable`` to record every request it serves and score a sample of them in the
    background (shadow scoring); the wrapper serves exactly as ``runnable`` does.

    ``metrics`` are metric names or objects, scored by a new `ShadowScorer` built with
    ``options`` (``judge=``, ``sample_rate=`` (default 0.05), ``relevance_threshold=``,
    ``sinks=``, ``store=``, ``max_pending=``, ``max_queued=``, ``close_timeout=``, ...; see
    `ragbridge.core.monitoring.shadow.ShadowScorer`) and closed with the wrapper; or a
    `ShadowScorer` to share with other wrappers (a LlamaIndex engine's too), which its owner
    closes. By default records go to ``ragbridge-monitor.sqlite`` in the working directory.

    Per request it measures the retrieval time (retriever callbacks; calls that overlap count
    once), the generation time (chat model / LLM callbacks), the chunks the retrieval returned
    (the one named ``retriever_name`` when several ran, else the last to finish; ids and scores
    read as in `document_to_context` with ``id_key``/``score_keys``), the question (the input
    string, or its ``input_key``/question/input/query), and the answer (as `run_pipeline` reads
    it, ``answer_key``). The request id is ``config["metadata"][request_id_key]`` when given,
    else ``config["run_id"]``, else a new UUID that also becomes the run id of its trace;
    sampling is decided by that id. ``pipeline`` names the records (default: the Runnable's name).
    """
    scorer, owns = shadow_scorer(metrics, options)
    return ShadowRunnable(
        runnable,
        scorer,
        owns_scorer=owns,
        pipeline=pipeline,
        request_id_key=request_id_key,
        answer_key=answer_key,
        input_key=input_key,
        retriever_name=retriever_name,
        id_key=id_key,
        score_keys=score_keys,
    )
