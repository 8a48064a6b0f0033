"""LlamaIndex adapter, agents: run a ``FunctionAgent``, ``ReActAgent`` or ``AgentWorkflow`` over
samples and keep its trajectory — every tool call, its result, the contexts a retrieval step
returned, its time and its error — as a `Sample` (``trajectory``) or a `Conversation`.

Why it looks the way it does:

* **The workflow's own event stream is the record.** LlamaIndex agents are workflows; the stream
  every caller can read says which tools the model asked for, in which order (``AgentOutput``'s
  ``tool_calls``: one batch per model reply, the order a message list would show), and what each
  call returned (``ToolCallResult``, with the tool's ``ToolOutput``: its text, its raw value and
  whether it failed). Steps follow the model's order, not the order parallel calls finished in.
* **Contexts come from what the tool returned, else from what it retrieved.** A
  ``RetrieverTool`` returns its nodes and a ``QueryEngineTool`` a response with
  ``source_nodes``: those are the step's contexts (after the tool's postprocessors: what the agent
  read). A ``FunctionTool`` that calls a retriever and returns text shows no nodes, so the
  retrievals made *under that call* are used, found through the instrumentation spans: the
  workflow runs each tool call in a ``call_tool`` span whose result is the very
  ``ToolCallResult`` the stream carries, and a retrieval belongs to the call whose span it ran
  under. Parallel calls and concurrent samples never mix, and the same span gives the call's
  wall time.
* **One run, two shapes.** A `Sample` holds the steps flat, for the trajectory measures; the
  `Conversation` form holds them as the assistant's tool-call turns and the tool turns answering
  them (each retrieval's contexts on its tool turn), and ``Conversation.turn_sample`` on its last
  turn gives the sample's trajectory back, because both are built from the same run record.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict, Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import Turn

from ._framework import (
    AgentOutput,
    BaseEvent,
    ChatMessage,
    NodeWithScore,
    RetrievalEndEvent,
    ToolCallResult,
    active_instrument_tags,
    instrument_tags,
)
from .capture import RUN_TAG, SAMPLE_TAG, CapturedRetrieval, RetrievalCapture, as_samples
from .reading import contexts_from, source_nodes

__all__ = [
    "AgentRunOptions",
    "acapture_agent_conversations",
    "acapture_agent_runs",
    "capture_agent_conversations",
    "capture_agent_runs",
]

Progress = Callable[[int, int], Any]


class AgentRunOptions(TypedDict, total=False):
    """`acapture_agent_runs`' keyword arguments, which the other capture functions pass on."""

    max_concurrency: int
    max_iterations: int | None
    progress: Progress | None
    use_ref_doc_id: bool


# --------------------------------------------------------------------------- instrumentation


@dataclass(frozen=True)
class _ToolSpan:
    """One ``call_tool`` span that closed with a ``ToolCallResult``."""

    span_id: str
    result: Any  # the ToolCallResult itself: the stream carries the same object
    tags: dict[str, Any]
    latency_s: float | None


class _AgentCapture(RetrievalCapture):
    """A `RetrievalCapture` that also knows, for each retrieval, the spans it ran under, and
    for each tool call its span and wall time."""

    def __init__(self, *, use_ref_doc_id: bool) -> None:
        super().__init__(use_ref_doc_id=use_ref_doc_id)
        self._parents: dict[str, str | None] = {}  # open span -> its parent
        self._started: dict[str, float] = {}  # open span -> perf_counter at entry
        self._below: dict[str, list[CapturedRetrieval]] = {}  # span -> retrievals inside it
        self._tool_spans: list[_ToolSpan] = []
        self._by_result: dict[int, _ToolSpan] = {}  # id of the ToolCallResult (kept alive)

    def _span_enter(self, id_: str, parent_id: str | None) -> None:
        super()._span_enter(id_, parent_id)
        with self._lock:
            if self._active:
                self._parents[id_] = parent_id
                self._started[id_] = time.perf_counter()

    def _span_result(self, id_: str, bound_args: Any, instance: Any, result: Any) -> None:
        if not isinstance(result, ToolCallResult):
            return
        ended = time.perf_counter()
        tags = dict(active_instrument_tags.get())  # the step's own tags, ours among them
        with self._lock:
            if not self._active:
                return
            started = self._started.get(id_)
            latency = round(ended - started, 6) if started is not None else None
            span = _ToolSpan(id_, result, tags, latency)
            self._tool_spans.append(span)
            self._by_result[id(result)] = span

    def _span_exit(self, id_: str) -> None:
        super()._span_exit(id_)
        with self._lock:
            self._parents.pop(id_, None)
            self._started.pop(id_, None)

    def _event(self, event: BaseEvent) -> None:
        if not isinstance(event, RetrievalEndEvent):
            super()._event(event)
            return
        with self._lock:  # as the base class records it, plus every open span it ran under
            if not self._active:
                return
            retrieval = CapturedRetrieval.of_event(
                event,
                root_span_id=self._root_of(event.span_id),
                tags=dict(event.tags),
                use_ref_doc_id=self.use_ref_doc_id,
            )
            self.retrievals.append(retrieval)
            for span_id in self._ancestors(event.span_id):
                self._below.setdefault(span_id, []).append(retrieval)

    def _ancestors(self, span_id: str | None) -> list[str]:
        chain: list[str] = []
        while span_id is not None and span_id not in chain:
            chain.append(span_id)
            span_id = self._parents.get(span_id)
        return chain

    def close(self) -> None:
        super().close()
        with self._lock:
            self._parents.clear()
            self._started.clear()

    # -- reading, after a run
    def tool_span(self, result: Any, used: set[str], **tags: Any) -> _ToolSpan | None:
        """The span of the call that produced ``result`` (a ``ToolCallResult`` read from the
        stream): the span whose result is that very object, else (a runtime that copies
        events) the first unused span under ``tags`` with the same tool id and name."""
        with self._lock:
            span = self._by_result.get(id(result))
            if span is not None and span.result is result and span.span_id not in used:
                return span
            spans = list(self._tool_spans)
        for span in spans:
            if (
                span.span_id not in used
                and all(span.tags.get(k) == v for k, v in tags.items())
                and span.result.tool_id == result.tool_id
                and span.result.tool_name == result.tool_name
            ):
                return span
        return None

    def retrievals_under(self, span_id: str) -> list[CapturedRetrieval]:
        """The retrievals made inside span ``span_id``, in the order they ended."""
        with self._lock:
            return list(self._below.get(span_id, ()))


# --------------------------------------------------------------------------- one run


@dataclass
class _Batch:
    """One model reply that asked for tools: who replied, its text, the steps it asked for."""

    agent: str | None
    text: str | None
    calls: list[Any]  # ToolSelection-like: tool_id, tool_name, tool_kwargs
    steps: list[Step] = field(default_factory=list)


@dataclass
class _Run:
    """What one agent run produced, read from its event stream."""

    batches: list[_Batch] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)  # ToolCallResult, stream order
    answer: str | None = None
    error: str | None = None
    agents: list[str] = field(default_factory=list)

    def read(self, event: Any) -> None:
        if isinstance(event, AgentOutput):
            name = event.current_agent_name
            if name and name not in self.agents:
                self.agents.append(name)
            # The final output's list later gains the run's ToolCallResults: keep only requests.
            calls = [c for c in event.tool_calls if not isinstance(c, ToolCallResult)]
            if calls:
                self.batches.append(_Batch(name or None, _text(event.response), calls))
        elif isinstance(event, ToolCallResult):
            self.results.append(event)


def _text(message: Any) -> str | None:
    content = getattr(message, "content", None)
    return content if isinstance(content, str) and content.strip() else None


def _error_of(output: Any) -> str | None:
    if not getattr(output, "is_error", False):
        return None
    exc = getattr(output, "exception", None)
    if isinstance(exc, BaseException):
        return f"{type(exc).__name__}: {exc}"
    return str(getattr(output, "content", "") or "tool call failed")


def _returned_nodes(raw: Any) -> list[Any]:
    """The nodes a tool returned: a retriever tool's list, a query engine's source nodes."""
    if isinstance(raw, list) and raw and all(isinstance(n, NodeWithScore) for n in raw):
        return list(raw)
    return source_nodes(raw)


def _steps(
    run: _Run, cap: _AgentCapture, tags: dict[str, Any], *, use_ref_doc_id: bool
) -> list[_Batch]:
    """The run's batches with their steps filled in, each call paired with its result (by tool
    id, else by name, in order); results no batch announced come last, one batch each."""
    pending = list(run.results)
    used_spans: set[str] = set()
    ids: set[str] = set()
    batches = list(run.batches)

    def take(call: Any) -> Any:
        for i, result in enumerate(pending):
            if call.tool_id and result.tool_id == call.tool_id:
                return pending.pop(i)
        for i, result in enumerate(pending):  # ids missing on one side: the next of that name
            if (not call.tool_id or not result.tool_id) and result.tool_name == call.tool_name:
                return pending.pop(i)
        return None

    def step(call: Any, result: Any, agent: str | None, index: int) -> Step:
        call_id = str(call.tool_id) if call.tool_id else ""
        if not call_id or call_id in ids:  # a step needs an id of its own in a conversation
            call_id = f"call_{index}"
        ids.add(call_id)
        if result is None:  # asked for, never made: as a call with no answer reads anywhere
            return Step(name=call.tool_name, args=dict(call.tool_kwargs), id=call_id)
        meta: dict[str, Any] = {"agent": agent} if agent else {}
        span = cap.tool_span(result, used_spans, **tags)
        retrievals: list[CapturedRetrieval] = []
        if span is not None:
            used_spans.add(span.span_id)
            retrievals = cap.retrievals_under(span.span_id)
        if retrievals:
            meta["retrievals"] = len(retrievals)
            meta["retrieval_query"] = retrievals[-1].query
        output = result.tool_output
        contexts = contexts_from(
            _returned_nodes(output.raw_output), retrievals, use_ref_doc_id=use_ref_doc_id
        )
        return Step(
            name=call.tool_name,
            args=dict(call.tool_kwargs),
            id=call_id,
            output=output.content,
            contexts=contexts,
            latency_s=span.latency_s if span is not None else None,
            error=_error_of(output),
            metadata=meta,
        )

    count = 0
    for batch in batches:
        for call in batch.calls:
            batch.steps.append(step(call, take(call), batch.agent, count))
            count += 1
    for result in pending:  # answered, never announced: a custom agent's own calls
        batches.append(_Batch(None, None, [result]))
        batches[-1].steps.append(step(result, result, None, count))
        count += 1
    return batches


def _union(steps: Iterable[Step]) -> list[Context]:
    """Every context of every step, each passage once (its first retrieval), in step order."""
    seen: set[tuple[Any, ...]] = set()
    out: list[Context] = []
    for step in steps:
        for ctx in step.contexts:
            node = ctx.metadata.get("node_id")
            key = ("node", node) if node is not None else ("ctx", ctx.id, ctx.text)
            if key not in seen:
                seen.add(key)
                out.append(ctx)
    return out


def _chat_history(sample: Sample) -> list[Any] | None:
    """The sample's history as LlamaIndex messages (turns with text; tool turns are left out:
    a replayed call would need its request too)."""
    if not sample.history:
        return None
    return [
        ChatMessage(role=turn.role, content=turn.content)
        for turn in sample.history
        if turn.role in ("user", "assistant", "system") and turn.content
    ]


@dataclass
class _Captured:
    """One sample's run, ready to be given as a `Sample` or as a `Conversation`."""

    sample: Sample
    batches: list[_Batch]
    answer: str | None
    contexts: list[Context]
    metadata: dict[str, Any]

    def as_sample(self) -> Sample:
        data = self.sample.model_dump()
        data.update(
            answer=self.answer,
            contexts=[c.model_dump() for c in self.contexts],
            trajectory=[s.model_dump() for b in self.batches for s in b.steps],
            metadata=self.metadata,
        )
        return Sample.model_validate(data)

    def as_conversation(self) -> Conversation:
        s = self.sample
        turns: list[Turn] = [*(s.history or []), Turn(role="user", content=s.question)]
        for batch in self.batches:
            turns.append(
                Turn(
                    role="assistant", content=batch.text, tool_calls=[x.call() for x in batch.steps]
                )
            )
            for x in batch.steps:
                if x.output is None:
                    continue  # never answered: the call stays, with no tool turn
                meta = dict(x.metadata)
                if x.latency_s is not None:
                    meta["latency_s"] = x.latency_s
                if x.error is not None:
                    meta["error"] = x.error
                turns.append(
                    Turn(
                        role="tool",
                        content=x.output,
                        tool_call_id=x.id,
                        contexts=list(x.contexts),
                        metadata=meta,
                    )
                )
        turns.append(
            Turn(
                role="assistant",
                content=self.answer,
                contexts=list(self.contexts),
                reference=s.reference,
                reference_contexts=s.reference_contexts,
                relevance=s.relevance,
                reference_tool_calls=s.reference_tool_calls,
            )
        )
        return Conversation(id=s.id, turns=turns, metadata=dict(self.metadata))


async def _capture(
    agent: Any,
    samples: Iterable[Sample | str],
    *,
    max_concurrency: int = 4,
    max_iterations: int | None = None,
    progress: Progress | None = None,
    use_ref_doc_id: bool = True,
) -> list[_Captured]:
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    _check_agent(agent)
    todo = as_samples(samples)
    run_id = uuid.uuid4().hex
    gate = asyncio.Semaphore(max_concurrency)
    done = 0

    async def one(sample: Sample, cap: _AgentCapture) -> _Captured:
        nonlocal done
        tags = {RUN_TAG: run_id, SAMPLE_TAG: sample.id}
        run = _Run()
        async with gate:
            start = time.perf_counter()
            kwargs: dict[str, Any] = {"user_msg": sample.question}
            history = _chat_history(sample)
            if history:
                kwargs["chat_history"] = history
            if max_iterations is not None:
                kwargs["max_iterations"] = max_iterations
            handler: Any = None
            try:
                # Merged with the caller's tags: instrument_tags replaces, it does not add.
                with instrument_tags({**active_instrument_tags.get(), **tags}):
                    handler = agent.run(**kwargs)
                    async for event in handler.stream_events():
                        run.read(event)
                    result = await handler
                run.answer = _answer(result)
            except Exception as exc:  # one failing run must not stop the others
                run.error = f"{type(exc).__name__}: {exc}"
                await _settle(handler)
            latency = round(time.perf_counter() - start, 6)
        batches = _steps(run, cap, tags, use_ref_doc_id=use_ref_doc_id)
        steps = [s for b in batches for s in b.steps]
        meta: dict[str, Any] = {**sample.metadata, "latency_s": latency, "steps": len(steps)}
        if len(run.agents) > 1:
            meta["agents"] = list(run.agents)
        models = cap.models_with_tags(**tags)
        if models:
            meta["generator_model"] = models[-1]
        if run.error is not None:
            meta["error"] = run.error
        done += 1
        if progress is not None:
            progress(done, len(todo))
        return _Captured(sample, batches, run.answer, _union(steps), meta)

    cap = _AgentCapture(use_ref_doc_id=use_ref_doc_id)
    with cap:
        return list(await asyncio.gather(*(one(s, cap) for s in todo)))


async def _settle(handler: Any) -> None:
    """After a failure, leave no run behind: stop one still going, and collect the error of
    one that ended (so asyncio does not report it as never retrieved)."""
    if handler is None:
        return
    is_done = getattr(handler, "is_done", None)
    if callable(is_done) and not is_done():
        await handler.cancel_run()
        return
    with contextlib.suppress(Exception):  # the run's error is already recorded
        await handler


def _answer(result: Any) -> str | None:
    if result is None:
        return None
    if isinstance(result, AgentOutput):
        return result.response.content
    return str(result)


def _check_agent(agent: Any) -> None:
    if not callable(getattr(agent, "run", None)) or callable(getattr(agent, "aquery", None)):
        raise TypeError(
            "capture_agent_runs needs a LlamaIndex agent or agent workflow (FunctionAgent, "
            f"ReActAgent, AgentWorkflow: something with run(user_msg=...)), got "
            f"{type(agent).__name__}"
            + (" (a query engine: use run_query_engine)" if hasattr(agent, "aquery") else "")
        )


# --------------------------------------------------------------------------- public API


async def acapture_agent_runs(
    agent: Any, samples: Iterable[Sample | str], **options: Unpack[AgentRunOptions]
) -> list[Sample]:
    """Async form of `capture_agent_runs`."""
    return [c.as_sample() for c in await _capture(agent, samples, **options)]


def capture_agent_runs(
    agent: Any, samples: Iterable[Sample | str], **options: Unpack[AgentRunOptions]
) -> list[Sample]:
    """Ask a LlamaIndex agent (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``, any agent
    workflow run with ``agent.run(user_msg=...)``) every sample's question; return the samples
    with the agent's trajectory.

    Each result keeps the input's id, reference, labels and ``reference_tool_calls``, and gets
    ``answer`` (the final ``AgentOutput``'s text), ``trajectory`` (one `Step` per tool call, in
    the order the model asked for them: name, args, the tool's text output, the contexts a
    retrieval step returned, its wall time, its error) and ``contexts`` (every step's contexts,
    each passage once). A step's contexts are the nodes its tool returned (``RetrieverTool``, a
    ``QueryEngineTool``'s source nodes, a function returning nodes), else those retrieved under
    that call (a function that calls a retriever and returns text); its metadata names the
    ``agent`` that made it, and ``retrievals``/``retrieval_query`` when it retrieved. A tool
    that raised gives a step with ``error`` (the agent sees the message and goes on); a run
    that raised gets ``metadata["error"]``, no answer, and the steps made before it failed; an
    agent that called no tool gets ``trajectory=[]`` (an agent's sample without steps).
    Metadata also gets ``latency_s``, ``steps``, ``generator_model`` and, for a workflow of
    several agents, ``agents``.

    Every question starts a fresh run (fresh memory); a sample's ``history`` is passed as
    ``chat_history`` (its turns with text). Bare strings are accepted as questions (ids
    ``"0"``, ...). Works inside a running event loop too (the run then uses a worker thread).
    ``options`` are `AgentRunOptions` (``max_concurrency=4`` runs at once,
    ``max_iterations=None`` for the agent's own limit, ``progress=None``,
    ``use_ref_doc_id=True``: contexts named by source document id).
    """
    _check_agent(agent)
    return run_sync(acapture_agent_runs(agent, samples, **options))


async def acapture_agent_conversations(
    agent: Any, samples: Iterable[Sample | str], **options: Unpack[AgentRunOptions]
) -> list[Conversation]:
    """Async form of `capture_agent_conversations`."""
    return [c.as_conversation() for c in await _capture(agent, samples, **options)]


def capture_agent_conversations(
    agent: Any, samples: Iterable[Sample | str], **options: Unpack[AgentRunOptions]
) -> list[Conversation]:
    """`capture_agent_runs` in the conversation form: per sample, a `Conversation` (its id the
    sample's) of the sample's history, the question, one assistant turn per model reply that
    called tools (its text, e.g. a ReAct thought, and its ``tool_calls``), a tool turn answering
    each call (its output, the contexts it retrieved, ``metadata["latency_s"]``/``["error"]``)
    and the final assistant turn (the answer, every step's contexts, the sample's reference and
    ``reference_tool_calls``). ``conversation.turn_sample(len(turns) - 1)`` has the same
    trajectory as `capture_agent_runs` gives. A call never answered (the run stopped first)
    keeps its request and has no tool turn; in either form it is a step with no output.
    """
    _check_agent(agent)
    return run_sync(acapture_agent_conversations(agent, samples, **options))
