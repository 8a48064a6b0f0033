"""Agent trajectories captured from LangChain and LangGraph: every tool call an agent made, in
order, with its result, its timing, its error and — for a retrieval tool — the documents it
retrieved as that step's contexts.

Why it is built this way:

* **Callbacks, not the agent's return value.** An agent whose tool raises returns nothing: the
  trajectory up to the failure (the failing step included) is only in the callback events. So
  the record comes from one callback handler (`_StepCapture`, a `RetrievalCapture`): the tool
  runs (name, arguments, call id, output or error, wall time), the retriever runs (the same
  events `run_pipeline` records) and what every chat model replied. It works the same for a
  LangGraph prebuilt agent (``create_react_agent``), LangChain's ``create_agent``, a classic
  ``AgentExecutor`` or a hand-written tool loop.
* **The order is the model's.** Parallel tool calls run on a thread pool and start in no fixed
  order; the model asked for them in one. Steps follow the calls in the replies the model made
  (in the order the replies came), each joined with the tool run that answered it by call id
  (by name and arguments for agents that run tools without passing the id, as
  ``AgentExecutor`` does). A tool run no reply asked for (a graph node calling a tool itself)
  is a step at the moment it started. A reply that was structured output
  (``with_structured_output`` calls a schema "tool" nobody runs) asks for nothing.
* **A step's contexts are its own retrieval's.** A retriever run belongs to the outermost tool
  run above it (a ``create_retriever_tool``, or a ``@tool`` that calls a retriever: LangChain
  passes the tool's run as the parent), so two searches with different queries give two steps
  with different contexts. A tool that returns its documents as a ``ToolMessage`` artifact
  (``response_format="content_and_artifact"``) without a retriever run has them as contexts.
  The sample's ``contexts`` are the union, each id once, in step order.
* **The conversation form is the same record.** `trajectory_conversation` writes a captured
  sample as the message list the agent had — the question, each model reply's tool calls, the
  tool turns answering them (with their contexts, ``latency_s`` and ``error``), the answer —
  and `Conversation.turn_sample` reads the same trajectory back from it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from typing_extensions import TypedDict, Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.record_fields import Context
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.trajectory import MESSAGE_KEY, Step, turns_of
from ragbridge.core.turn import ToolCall, Turn

from ._framework import AIMessage, BaseMessage, Document, HumanMessage, Runnable, RunnableConfig
from .capture import Retrieval, RetrievalCapture
from .conversations import (
    _fresh_id,
    _has_checkpointer,
    _is_langgraph,
    _message_calls,
    _retrieval_metadata,
    _turn_contexts,
    turn_messages,
)
from .documents import DEFAULT_SCORE_KEYS, document_to_context
from .models import message_text
from .pipelines import Progress, _run_one, answer_of

__all__ = [
    "TrajectoryOptions",
    "acapture_trajectories",
    "acapture_trajectory_conversations",
    "capture_trajectories",
    "capture_trajectory_conversations",
    "trajectory_conversation",
]

"""Step metadata: the index of the model reply that asked for the call (calls asked together
share it), so the conversation form groups them in one assistant turn."""


class TrajectoryOptions(TypedDict, total=False):
    """`acapture_trajectories`'s keyword arguments, which the other capture functions pass on."""

    messages_key: str | None
    input_key: str | None
    history_key: str | None
    answer_key: str | None
    extra_inputs: Mapping[str, Any] | None
    retriever_name: str | None
    id_key: str | Sequence[str] | None
    score_keys: Sequence[str]
    max_concurrency: int
    progress: Progress | None
    config: RunnableConfig | None


# --------------------------------------------------------------------------- the record


@dataclass
class _ToolRun:
    run_id: UUID
    name: str
    args: dict[str, Any]
    call_id: str | None
    seq: int
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None
    output: Any = None
    error: BaseException | None = None


@dataclass
class _Reply:
    """A chat model's reply: the calls it asked for, ``seq`` when it ended."""

    run_id: UUID
    seq: int
    calls: list[ToolCall]


@dataclass
class _Entry:
    """One step in the making: a call a reply asked for and/or the tool run that answered."""

    key: tuple[int, int]
    call: ToolCall | None = None
    message: int | None = None
    run: _ToolRun | None = None


class _StepCapture(RetrievalCapture):
    """`RetrievalCapture` that also records tool runs and what each chat model replied: the
    parent links it keeps place every retrieval under the tool run it belongs to."""

    def __init__(
        self,
        *,
        id_key: str | Sequence[str] | None = None,
        score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    ) -> None:
        super().__init__(id_key=id_key, score_keys=score_keys)
        self._order = itertools.count()
        self._tools: dict[UUID, _ToolRun] = {}
        self._replies: list[_Reply] = []
        self._structured: set[UUID] = set()

    def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        super().on_tool_start(serialized, input_str, run_id=run_id, **kwargs)
        inputs = kwargs.get("inputs")
        args = dict(inputs) if isinstance(inputs, Mapping) else {"input": input_str}
        name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
        call_id = kwargs.get("tool_call_id")
        call_id = None if call_id is None else str(call_id)
        with self._lock:
            self._tools[run_id] = _ToolRun(run_id, str(name), args, call_id, next(self._order))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            run = self._tools.get(run_id)
            if run is not None:
                run.ended, run.output = time.perf_counter(), output

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            run = self._tools.get(run_id)
            if run is not None:
                run.ended, run.error = time.perf_counter(), error

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        super().on_chat_model_start(serialized, messages, run_id=run_id, **kwargs)
        if (kwargs.get("options") or {}).get("ls_structured_output_format"):
            with self._lock:
                self._structured.add(run_id)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        generations = getattr(response, "generations", None) or [[]]
        first = generations[0][0] if generations and generations[0] else None
        calls = _message_calls(getattr(first, "message", None))
        if calls:
            with self._lock:
                self._replies.append(_Reply(run_id, next(self._order), calls))

    # -- reading --------------------------------------------------------------------------

    def _owner(self, run_id: UUID) -> UUID | None:
        """The outermost tool run above ``run_id`` (itself excluded), or None. Call locked."""
        owner, seen, current = None, {run_id}, self._parents.get(run_id)
        while current is not None and current not in seen:
            if current in self._tools:
                owner = current
            seen.add(current)
            current = self._parents.get(current)
        return owner

    def entries(self) -> tuple[list[_Entry], dict[UUID, list[Retrieval]], list[Retrieval]]:
        """The steps in order (calls joined with their runs), the retrievals of each tool run,
        and the retrievals that ran under no tool."""
        with self._lock:
            tools = [t for t in self._tools.values() if self._owner(t.run_id) is None]
            replies = [
                r
                for r in self._replies
                if r.run_id not in self._structured and self._owner(r.run_id) is None
            ]
            owned: dict[UUID, list[Retrieval]] = {}
            loose: list[Retrieval] = []
            for retrieval in self._retrievals.values():
                owner = self._owner(retrieval.run_id)
                (loose if owner is None else owned.setdefault(owner, [])).append(retrieval)
        entries = [
            _Entry((reply.seq, position), call, index)
            for index, reply in enumerate(replies)
            for position, call in enumerate(reply.calls)
        ]
        by_id = {e.call.id: e for e in entries if e.call is not None and e.call.id is not None}
        for run in tools:
            entry = by_id.get(run.call_id) if run.call_id is not None else None
            if entry is None and run.call_id is None:
                entry = _unanswered(entries, run)
            if entry is None or entry.run is not None:
                entries.append(_Entry((run.seq, 0), run=run))
            else:
                entry.run = run
        entries.sort(key=lambda e: e.key)
        return entries, owned, loose


def _unanswered(entries: list[_Entry], run: _ToolRun) -> _Entry | None:
    """The first call not yet answered with ``run``'s name and arguments (then name alone): how
    a tool run without a call id (``AgentExecutor``) finds the call it answers."""
    waiting = [e for e in entries if e.run is None and e.call is not None]
    same = [e for e in waiting if e.call is not None and e.call.name == run.name]
    exact = [e for e in same if e.call is not None and e.call.args == run.args]
    found = exact or same
    return found[0] if found else None


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _output_text(output: Any) -> str | None:
    if output is None:
        return None
    if isinstance(output, BaseMessage):
        return message_text(output)
    return output if isinstance(output, str) else str(output)


def _artifact_contexts(
    message: Any, id_key: str | Sequence[str] | None, score_keys: Sequence[str]
) -> list[Context]:
    """Documents a tool returned as its message's artifact (``content_and_artifact``)."""
    artifact = getattr(message, "artifact", None)
    if not isinstance(artifact, Sequence) or isinstance(artifact, (str, bytes)) or not artifact:
        return []
    if not all(isinstance(d, Document) for d in artifact):
        return []
    return [document_to_context(d, id_key=id_key, score_keys=score_keys) for d in artifact]


@dataclass(frozen=True)
class _Reading:
    """How steps are read: the retriever filter and how a document becomes a context."""

    retriever_name: str | None
    id_key: str | Sequence[str] | None
    score_keys: Sequence[str]


def _step(
    entry: _Entry,
    index: int,
    retrievals: list[Retrieval],
    answers: Mapping[str, Any],
    reading: _Reading,
) -> Step:
    """One step from a call and/or its tool run. Its output is the tool message the agent kept
    for the call (``answers``, by call id: what the model was shown, also when the tool raised
    and the agent handled it, or returned a ``Command``), else what the tool run returned."""
    call, run = entry.call, entry.run
    call_id = (call.id if call is not None else None) or (run.call_id if run else None)
    message = answers.get(call_id) if call_id is not None else None
    produced = message if message is not None or run is None else run.output
    error = None if run is None or run.error is None else _error_text(run.error)
    if error is None and getattr(produced, "status", None) == "error":
        error = _output_text(produced)
    contexts = _turn_contexts(retrievals, reading.retriever_name)
    if not retrievals:
        contexts = _artifact_contexts(produced, reading.id_key, reading.score_keys)
    metadata: dict[str, Any] = {} if entry.message is None else {MESSAGE_KEY: entry.message}
    if retrievals:
        metadata.update(_retrieval_metadata(retrievals, []))
    latency = None
    if run is not None and run.ended is not None:
        latency = max(0.0, run.ended - run.started)
    return Step(
        name=call.name if call is not None else run.name if run is not None else "tool",
        args=dict(call.args if call is not None else run.args if run is not None else {}),
        # A tool run no call named still gets an id: its tool turn must name the call it answers.
        id=call_id or f"call-{index}",
        output=_output_text(produced),
        contexts=contexts,
        latency_s=latency,
        error=error,
        metadata=metadata,
    )


def _union(steps: Sequence[Step]) -> list[Context]:
    """Every step's contexts in step order, each context id once (at its first occurrence)."""
    out: list[Context] = []
    seen: set[str] = set()
    for step in steps:
        for context in step.contexts:
            if context.id is not None:
                if context.id in seen:
                    continue
                seen.add(context.id)
            out.append(context)
    return out


# --------------------------------------------------------------------------- running


def _as_samples(items: Iterable[Sample | str]) -> list[Sample]:
    out = [Sample(id=str(i), question=x) if isinstance(x, str) else x for i, x in enumerate(items)]
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        raise ValueError("sample ids must be unique (a question given as a string gets its index)")
    return out


def _after_question(output: Any, key: str, message_id: str) -> list[Any] | None:
    """The messages a message-state graph added after the question (None: no message list)."""
    found = output.get(key) if isinstance(output, Mapping) else None
    if not isinstance(found, Sequence) or isinstance(found, (str, bytes)):
        return None
    messages = list(found)
    start = next((i for i, m in enumerate(messages) if getattr(m, "id", None) == message_id), None)
    if start is None:  # the graph rewrote its messages: the run follows the last question
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        start = humans[-1] if humans else -1
    return messages[start + 1 :]


def _graph_answer(added: Sequence[Any]) -> str | None:
    replies = [m for m in added if isinstance(m, AIMessage)]
    if not replies:
        return None
    text = message_text(replies[-1])
    return None if not text and replies[-1].tool_calls else text


async def acapture_trajectories(
    agent: Runnable[Any, Any],
    samples: Iterable[Sample | str],
    *,
    messages_key: str | None = None,
    input_key: str | None = None,
    history_key: str | None = None,
    answer_key: str | None = None,
    extra_inputs: Mapping[str, Any] | None = None,
    retriever_name: str | None = None,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    config: RunnableConfig | None = None,
) -> list[Sample]:
    """Async `capture_trajectories`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    items = _as_samples(samples)
    graph = messages_key is not None or _is_langgraph(agent)
    key = messages_key or "messages"
    if not graph and history_key is None and any(s.history for s in items):
        raise ValueError(
            "some samples have a history: name the agent's chat-history input with history_key= "
            "(a LangGraph agent takes it in its message list)"
        )
    checkpointed = graph and _has_checkpointer(agent)
    base: dict[str, Any] = dict(config or {})
    user_callbacks = base.pop("callbacks", None)
    configurable = dict(base.pop("configurable", None) or {})
    reading = _Reading(retriever_name, id_key, tuple(score_keys))
    sem = asyncio.Semaphore(max_concurrency)
    done = 0

    def request(sample: Sample, message_id: str) -> Any:
        history = turn_messages(sample.history or [])
        extra = dict(extra_inputs or {})
        if graph:
            return {**extra, key: [*history, HumanMessage(content=sample.question, id=message_id)]}
        if history_key is not None:
            extra[history_key] = history
        if input_key is None and not extra:
            return sample.question
        return {**extra, input_key or "input": sample.question}

    async def one(sample: Sample) -> Sample:
        nonlocal done
        run_id, message_id = uuid4(), f"ragbridge-{uuid4().hex}"
        cap = _StepCapture(id_key=id_key, score_keys=score_keys)
        callbacks: list[Any] = [cap, *(user_callbacks if isinstance(user_callbacks, list) else [])]
        capture: dict[str, Any] = {"adapter": "langchain", "mode": "graph" if graph else "runnable"}
        extra: dict[str, Any] = {}
        if checkpointed:  # a fresh thread: no earlier run's messages in this one
            extra["thread_id"] = capture["thread_id"] = _fresh_id(sample.id)
        run_config: RunnableConfig = {
            **base,  # type: ignore[typeddict-item]
            "callbacks": callbacks,
            "run_id": run_id,
            "configurable": {**configurable, **extra},
            "metadata": {**dict(base.get("metadata") or {}), "ragbridge_sample_id": sample.id},
        }
        metadata: dict[str, Any] = {**sample.metadata, "run_id": str(run_id)}
        asked = request(sample, message_id)
        async with sem:
            output = await _run_one(lambda: agent.ainvoke(asked, run_config), metadata, lambda o: o)
        added = _after_question(output, key, message_id) if graph and output is not None else None
        if graph and output is not None and added is None:
            metadata["answer_note"] = f"no {key!r} message list in the agent's output"
        answer = _graph_answer(added or []) if graph else answer_of(output, answer_key)
        answers = {str(m.tool_call_id): m for m in added or [] if getattr(m, "tool_call_id", None)}
        entries, owned, loose = cap.entries()
        steps = [
            _step(e, i, owned.get(e.run.run_id, []) if e.run else [], answers, reading)
            for i, e in enumerate(entries)
        ]
        metadata.update(_retrieval_metadata(cap.for_root(run_id), cap.models_for(run_id)))
        if loose:
            metadata["retrieval_note"] = (
                f"{len(loose)} retrieval(s) ran outside any tool call: not steps, and their "
                "contexts are not the sample's"
            )
        metadata["capture"] = capture
        done += 1
        if progress is not None:
            progress(done, len(items))
        return sample.model_copy(
            update={
                "answer": answer,
                "contexts": _union(steps),
                "trajectory": steps,
                "metadata": metadata,
            }
        )

    return list(await asyncio.gather(*(one(s) for s in items)))


def capture_trajectories(
    agent: Runnable[Any, Any],
    samples: Iterable[Sample | str],
    **options: Unpack[TrajectoryOptions],
) -> list[Sample]:
    """Run ``agent`` on each sample's question (or each question string, whose sample id is its
    index); return copies with the agent's ``trajectory``, ``answer`` and ``contexts``.

    Each step is one tool call: its name, arguments and call id, the tool's output (the
    ``ToolMessage`` text the model saw), ``latency_s``, the ``error`` the tool raised (a step
    whose tool raised records it, whether the agent handled the error or stopped on it), and for
    a retrieval tool the documents its retriever returned as ranked ``contexts`` (only the
    retrievers named ``retriever_name`` — run name or tag — when given). Steps are in the order
    the model asked for the calls. ``contexts`` is the union of the steps' contexts, each id once.
    The sample's reference, ``reference_tool_calls``, relevance and metadata are kept; metadata
    adds ``run_id``, ``latency_s``, ``error`` (the run failed: the steps up to the failure are
    kept), ``retrievals``, ``retrieval_queries``, ``generator_model`` and ``capture``.

    How the question is asked: a LangGraph graph (``create_react_agent``, ``create_agent``) or a
    runnable with ``messages_key=`` gets ``{messages_key: [*history, question]}`` (a sample's
    ``history`` as messages; a graph with a checkpointer gets a fresh ``thread_id`` per sample)
    and answers with its last AI message; any other runnable (an ``AgentExecutor``: pass
    ``input_key="input"``) gets ``{input_key: question}`` — with ``extra_inputs`` and the history
    under ``history_key`` — or the bare question, and answers as `run_pipeline` reads answers
    (``answer_key``). ``options`` are `TrajectoryOptions`; ``config`` is the `RunnableConfig`
    each run starts from (its callbacks are kept beside the capture).
    """
    return run_sync(acapture_trajectories(agent, samples, **options))


# --------------------------------------------------------------------------- conversation form


def trajectory_conversation(sample: Sample) -> Conversation:
    """A captured sample as the messages its agent had: the sample's history, the question, one
    assistant turn per model reply with its tool calls (steps sharing metadata ``message``; any
    other step alone), the tool turn answering each call (its output, the step's ``contexts``,
    ``latency_s`` and ``error`` in metadata), and the answer as the last assistant turn with the
    sample's contexts, reference, labels, ``reference_tool_calls`` and metadata.

    ``Conversation.turn_sample`` on the last turn gives the trajectory back. A step that
    produced no output has an empty tool turn with its ``error``; a step without a call id gets
    ``call-<position>``.
    """
    turns: list[Turn] = [*(sample.history or []), Turn(role="user", content=sample.question)]
    turns += turns_of(sample.trajectory or [])
    turns.append(
        Turn(
            role="assistant",
            content=sample.answer,
            contexts=list(sample.contexts),
            reference=sample.reference,
            reference_contexts=sample.reference_contexts,
            relevance=sample.relevance,
            reference_tool_calls=sample.reference_tool_calls,
            metadata=dict(sample.metadata),
        )
    )
    return Conversation(id=sample.id, turns=turns)


async def acapture_trajectory_conversations(
    agent: Runnable[Any, Any],
    samples: Iterable[Sample | str],
    **options: Unpack[TrajectoryOptions],
) -> list[Conversation]:
    """Async `capture_trajectory_conversations`."""
    captured = await acapture_trajectories(agent, samples, **options)
    return [trajectory_conversation(s) for s in captured]


def capture_trajectory_conversations(
    agent: Runnable[Any, Any],
    samples: Iterable[Sample | str],
    **options: Unpack[TrajectoryOptions],
) -> list[Conversation]:
    """`capture_trajectories` in the conversation form (`trajectory_conversation`): one
    conversation per sample, its tool turns carrying each retrieval step's contexts."""
    return run_sync(acapture_trajectory_conversations(agent, samples, **options))
