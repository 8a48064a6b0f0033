"""Conversations captured from LangChain and LangGraph: a scripted user side replayed through a
chat chain or a message-state graph, each turn's retrievals recorded as that turn's contexts.

Why it is built this way:

* **The walk is core's.** `ragbridge.core.replay.areplay` goes through a script's user turns and
  puts the scripted expected values (references, relevance, ids) on the right assistant turns;
  this module only says how to ask LangChain one question after the conversation so far
  (`respond`), for the three ways a LangChain chat pipeline holds its conversation:

  - a ``RunnableWithMessageHistory`` keeps it in the user's own session store: each
    conversation gets a **fresh** session id, so memory carries across the turns of one
    conversation and never into another (not even into a later capture of the same script);
  - a runnable that takes the chat history in its input (``history_key=``): the history is the
    conversation so far, as the user saw it (system, user and assistant messages);
  - a LangGraph graph whose state is a message list (``MessagesState``, ``create_react_agent``,
    a ``ToolNode`` loop): with a checkpointer, each conversation gets a fresh ``thread_id`` and
    each turn sends only the new question; without one, each turn sends the messages the graph
    returned last time plus the question, so its tool exchanges stay in its history as they
    would in an app.

* **A turn's contexts are what was retrieved during that turn only.** Each turn is its own
  top-level invocation with its own run id, recorded by the same callback capture as
  `run_pipeline` (`RetrievalCapture`); the turn's contexts are every retrieval under that run
  (an agent may search twice in one turn), in the order they started, each context id once.
  A turn that retrieved nothing has no contexts, whatever the turn before it retrieved.

* **Tool calls are the turn's**: every tool call an AI message of that turn asked for.

* **A failing turn stops its conversation.** Its error goes to the turn's metadata (as in
  `run_pipeline`); the turns after it are not asked (``metadata["not_asked"]``), since their
  answers would belong to a conversation nobody had. Other conversations go on.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from typing_extensions import TypedDict, Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.record_fields import Context
from ragbridge.core.replay import Reply, areplay
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.turn import ToolCall, Turn

from ._framework import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    Runnable,
    RunnableConfig,
    RunnableWithMessageHistory,
    SystemMessage,
)
from .capture import Retrieval, RetrievalCapture
from .documents import DEFAULT_SCORE_KEYS
from .models import message_text
from .pipelines import Progress, answer_of

__all__ = [
    "ConversationOptions",
    "acapture_conversations",
    "capture_conversations",
    "turn_messages",
]


class ConversationOptions(TypedDict, total=False):
    """`acapture_conversations`'s keyword arguments, which `capture_conversations` passes on."""

    history_key: str | None
    messages_key: str | None
    input_key: str | None
    answer_key: str | None
    session_key: str | None
    extra_inputs: Mapping[str, Any] | None
    retriever_name: str | None
    id_key: str | Sequence[str] | None
    score_keys: Sequence[str]
    max_concurrency: int
    progress: Progress | None
    config: RunnableConfig | None


def turn_messages(turns: Iterable[Turn]) -> list[BaseMessage]:
    """The conversation so far as LangChain messages, as the user saw it.

    System, user and assistant turns become ``SystemMessage``/``HumanMessage``/``AIMessage``
    with their text. An assistant turn's tool calls and tool turns are left out: they are the
    pipeline's own exchanges inside a turn, and an AI message that calls tools without the tool
    messages answering it is refused by chat models. An assistant turn with no answer (it
    failed, or only called tools) is left out too.
    """
    out: list[BaseMessage] = []
    for turn in turns:
        if turn.content is None or turn.role == "tool":
            continue
        if turn.role == "system":
            out.append(SystemMessage(content=turn.content))
        elif turn.role == "user":
            out.append(HumanMessage(content=turn.content))
        else:
            out.append(AIMessage(content=turn.content))
    return out


def _message_calls(message: Any) -> list[ToolCall]:
    if not isinstance(message, AIMessage):
        return []
    return [
        ToolCall(name=call["name"], args=dict(call.get("args") or {}), id=call.get("id"))
        for call in message.tool_calls
    ]


@dataclass
class _Asked:
    """One turn's request: what to invoke the runnable with and what to add to its config."""

    input: Any
    configurable: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Read:
    answer: str | None
    tool_calls: list[ToolCall]
    note: str | None = None


class _Session:
    """How one conversation is asked of the runnable (one instance per conversation)."""

    mode = ""

    def metadata(self) -> dict[str, Any]:
        return {"adapter": "langchain", "mode": self.mode}

    async def ask(self, history: Sequence[Turn], question: str, message_id: str) -> _Asked:
        raise NotImplementedError

    def read(self, output: Any, message_id: str) -> _Read:
        raise NotImplementedError

    def answered(self, output: Any) -> None:
        """Called after a turn that did not fail (a stateless graph keeps its messages)."""


def _chain_read(output: Any, answer_key: str | None) -> _Read:
    """A chain's answer (`answer_of`) and the tool calls of the message it returned."""
    answer = answer_of(output, answer_key)
    message = output
    if isinstance(output, Mapping):
        keys = (answer_key,) if answer_key else ("answer", "output", "result")
        message = next((output[k] for k in keys if k in output), None)
    note = None
    if answer is None:
        note = f"no answer found in chain output of type {type(output).__name__}"
    return _Read(answer, _message_calls(message), note)


@dataclass
class _Options:
    input_key: str | None
    answer_key: str | None
    extra_inputs: dict[str, Any]


class _MessageHistory(_Session):
    """A ``RunnableWithMessageHistory``: the conversation lives in the user's session store,
    under a session id made for this conversation."""

    mode = "message_history"

    def __init__(
        self, runnable: Any, options: _Options, key: str, base: Mapping[str, Any], name: str
    ) -> None:
        self.runnable = runnable
        self.options = options
        self.key = key
        self.session_id = _fresh_id(name)
        self.configurable = {**base, key: self.session_id}
        self.seeded = False

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "session_id": self.session_id}

    async def ask(self, history: Sequence[Turn], question: str, message_id: str) -> _Asked:
        if not self.seeded:
            self.seeded = True
            system = turn_messages(t for t in history if t.role == "system")
            if system:  # the script's system turns configure the assistant: they open the session
                await self._history().aadd_messages(system)
        key = self.options.input_key or self.runnable.input_messages_key
        if key is None:  # its input is the message itself (`_session_maker` refused extra inputs)
            message = HumanMessage(content=question, id=message_id)
            return _Asked(message, {self.key: self.session_id})
        return _Asked({**self.options.extra_inputs, key: question}, {self.key: self.session_id})

    def _history(self) -> Any:
        """The session's history object, got from the user's factory as
        ``RunnableWithMessageHistory`` gets it (one field: positionally; several: by name)."""
        specs = list(self.runnable.history_factory_config)
        factory = self.runnable.get_session_history
        values = {spec.id: self.configurable.get(spec.id, spec.default) for spec in specs}
        if len(specs) == 1:
            takes = inspect.signature(factory).parameters
            return factory(values[specs[0].id]) if takes else factory()
        return factory(**values)

    def read(self, output: Any, message_id: str) -> _Read:
        return _chain_read(output, self.options.answer_key or self.runnable.output_messages_key)


class _HistoryInInput(_Session):
    """A runnable that takes the chat history in its input under ``history_key``."""

    mode = "history_key"

    def __init__(self, history_key: str, options: _Options) -> None:
        self.history_key = history_key
        self.options = options

    async def ask(self, history: Sequence[Turn], question: str, message_id: str) -> _Asked:
        messages = turn_messages(history)
        request: dict[str, Any] = dict(self.options.extra_inputs)
        if self.options.input_key is None:  # the question is the history's last message
            request[self.history_key] = [*messages, HumanMessage(content=question, id=message_id)]
        else:
            request[self.history_key] = messages
            request[self.options.input_key] = question
        return _Asked(request)

    def read(self, output: Any, message_id: str) -> _Read:
        return _chain_read(output, self.options.answer_key)


class _MessageGraph(_Session):
    """A LangGraph graph (or any runnable) whose state holds the messages under
    ``messages_key``, with a checkpointer (``persistent``: a fresh thread per conversation) or
    without (each turn resends the messages the graph returned last)."""

    mode = "graph"

    def __init__(self, messages_key: str, persistent: bool, options: _Options, name: str) -> None:
        self.key = messages_key
        self.persistent = persistent
        self.options = options
        self.thread_id = _fresh_id(name) if persistent else None
        self.started = False
        self.messages: list[BaseMessage] = []  # what a stateless graph returned last

    def metadata(self) -> dict[str, Any]:
        out = super().metadata()
        if self.thread_id is not None:
            out["thread_id"] = self.thread_id
        return out

    async def ask(self, history: Sequence[Turn], question: str, message_id: str) -> _Asked:
        message = HumanMessage(content=question, id=message_id)
        if not self.started:  # first turn: the script's system turns open the conversation
            self.started = True
            before = turn_messages(t for t in history if t.role == "system")
        else:
            before = [] if self.persistent else self.messages
        request = {**self.options.extra_inputs, self.key: [*before, message]}
        return _Asked(request, {"thread_id": self.thread_id} if self.persistent else {})

    def answered(self, output: Any) -> None:
        if not self.persistent:
            found = output.get(self.key) if isinstance(output, Mapping) else None
            self.messages = list(found) if isinstance(found, Sequence) else []

    def read(self, output: Any, message_id: str) -> _Read:
        found = output.get(self.key) if isinstance(output, Mapping) else None
        if not isinstance(found, Sequence):
            note = f"no {self.key!r} message list in the graph's output ({type(output).__name__})"
            return _Read(None, [], note)
        messages = list(found)
        start = next(
            (i for i, m in enumerate(messages) if getattr(m, "id", None) == message_id), None
        )
        if start is None:  # the graph rewrote its messages: the turn follows the last question
            humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
            start = humans[-1] if humans else -1
        replies = [m for m in messages[start + 1 :] if isinstance(m, AIMessage)]
        calls = [call for m in replies for call in _message_calls(m)]
        if not replies:
            return _Read(None, calls, "the graph added no AI message on this turn")
        last = replies[-1]
        text = message_text(last)
        return _Read(None if not text and last.tool_calls else text, calls)


def _fresh_id(name: str) -> str:
    """A session or thread id no store has seen: the conversation's id (to find it there) and a
    random part (so capturing the same script twice starts from an empty memory twice)."""
    return f"{name}:{uuid4().hex[:16]}"


def _is_langgraph(runnable: Any) -> bool:
    """A LangGraph graph, told without importing LangGraph (a graph exists only if it is loaded)."""
    module = sys.modules.get("langgraph.pregel")
    pregel = getattr(module, "Pregel", None)
    return isinstance(pregel, type) and isinstance(_unwrapped(runnable), pregel)


def _unwrapped(runnable: Any) -> Any:
    """The runnable under ``with_config``/``bind`` wrappers (``RunnableBinding.bound``), or the
    first ``RunnableWithMessageHistory`` among them (itself such a wrapper)."""
    for _ in range(16):
        if isinstance(runnable, RunnableWithMessageHistory) or not hasattr(runnable, "bound"):
            break
        runnable = runnable.bound
    return runnable


def _has_checkpointer(runnable: Any) -> bool:
    saver = getattr(_unwrapped(runnable), "checkpointer", None)
    return saver is not None and not isinstance(saver, bool)


def _session_key(runnable: RunnableWithMessageHistory, session_key: str | None) -> str:
    fields = [spec.id for spec in runnable.history_factory_config]
    if session_key is not None:
        if session_key not in fields:
            raise ValueError(
                f"session_key={session_key!r} is not one of this RunnableWithMessageHistory's "
                f"history fields {fields}"
            )
        return session_key
    if "session_id" in fields:
        return "session_id"
    if len(fields) == 1:
        return fields[0]
    raise ValueError(
        f"this RunnableWithMessageHistory's history has several fields {fields}: name the one "
        "that identifies a conversation with session_key= (the others go in "
        "config={'configurable': {...}})"
    )


def _session_maker(
    runnable: Runnable[Any, Any],
    *,
    history_key: str | None,
    messages_key: str | None,
    session_key: str | None,
    options: _Options,
    configurable: Mapping[str, Any],
) -> Callable[[str], _Session]:
    """How to start one conversation's session (given its id), from what the runnable is and
    what was said."""
    inner = _unwrapped(runnable)
    if isinstance(inner, RunnableWithMessageHistory):
        if history_key is not None or messages_key is not None:
            raise ValueError(
                "a RunnableWithMessageHistory keeps the conversation itself: pass neither "
                "history_key nor messages_key"
            )
        key = _session_key(inner, session_key)
        if options.extra_inputs and (options.input_key or inner.input_messages_key) is None:
            raise ValueError(
                "extra_inputs need a dict input: this RunnableWithMessageHistory has no "
                "input_messages_key (name the question's key with input_key=)"
            )
        return lambda name: _MessageHistory(inner, options, key, configurable, name)
    if history_key is not None:
        if messages_key is not None:
            raise ValueError("pass history_key or messages_key, not both")
        return lambda name: _HistoryInInput(history_key, options)
    if messages_key is not None or _is_langgraph(runnable):
        persistent = _has_checkpointer(runnable)
        return lambda name: _MessageGraph(messages_key or "messages", persistent, options, name)
    raise TypeError(
        f"cannot tell how this {type(runnable).__name__} takes the conversation so far: wrap it "
        "in RunnableWithMessageHistory, name the input key that holds the chat history "
        "(history_key=), or pass a LangGraph graph whose state is a message list "
        "(messages_key= for another message-state runnable)"
    )


def _turn_contexts(retrievals: Sequence[Retrieval], retriever_name: str | None) -> list[Context]:
    """Every context retrieved during one turn, in the order the retrievals started, each id
    once (at its first occurrence); only the retrievals named ``retriever_name`` when given."""
    out: list[Context] = []
    seen: set[str] = set()
    for retrieval in retrievals:
        if retriever_name is not None and not retrieval.matches(retriever_name):
            continue
        for context in retrieval.contexts():
            if context.id is not None:
                if context.id in seen:
                    continue
                seen.add(context.id)
            out.append(context)
    return out


def _retrieval_metadata(retrievals: Sequence[Retrieval], models: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"retrievals": len(retrievals)}
    if retrievals:
        out["retrieval_queries"] = [r.query for r in retrievals]
    failed = [r for r in retrievals if r.error is not None]
    if failed:
        out["retrieval_errors"] = [f"{type(r.error).__name__}: {r.error}" for r in failed]
    if models:  # the last model to run wrote the answer; ragbridge eval warns if it judges
        out["generator_model"] = models[-1]
    return out


async def acapture_conversations(
    runnable: Runnable[Any, Any],
    scripts: Iterable[Conversation],
    *,
    history_key: str | None = None,
    messages_key: str | None = None,
    input_key: str | None = None,
    answer_key: str | None = None,
    session_key: str | None = None,
    extra_inputs: Mapping[str, Any] | None = None,
    retriever_name: str | None = None,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    config: RunnableConfig | None = None,
) -> list[Conversation]:
    """Async `capture_conversations`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    items = list(scripts)
    base: dict[str, Any] = dict(config or {})
    user_callbacks = base.pop("callbacks", None)
    configurable = dict(base.pop("configurable", None) or {})
    options = _Options(input_key, answer_key, dict(extra_inputs or {}))
    start_session = _session_maker(
        runnable,
        history_key=history_key,
        messages_key=messages_key,
        session_key=session_key,
        options=options,
        configurable=configurable,
    )
    sem = asyncio.Semaphore(max_concurrency)
    done = 0

    async def invoke(
        request: Any,
        run_id: UUID,
        cap: RetrievalCapture,
        extra: dict[str, Any],
        script: Conversation,
        position: int,
    ) -> Any:
        callbacks: list[Any] = [cap]
        if isinstance(user_callbacks, list):
            callbacks.extend(user_callbacks)
        run_config: RunnableConfig = {
            **base,  # type: ignore[typeddict-item]
            "callbacks": callbacks,
            "run_id": run_id,
            "configurable": {**configurable, **extra},
            "metadata": {
                **dict(base.get("metadata") or {}),
                "ragbridge_conversation_id": script.id,
                "ragbridge_turn": position,
            },
        }
        return await runnable.ainvoke(request, run_config)

    async def one(script: Conversation) -> Conversation:
        nonlocal done
        session = start_session(script.id)
        failed: list[str] = []

        async def respond(history: Sequence[Turn], question: str) -> Reply:
            position = len(history) + 1  # where the assistant turn goes
            if failed:
                return Reply(None, metadata={"not_asked": failed[0]})
            run_id, message_id = uuid4(), f"ragbridge-{uuid4().hex}"
            cap = RetrievalCapture(id_key=id_key, score_keys=score_keys)
            metadata: dict[str, Any] = {"run_id": str(run_id)}
            started = time.perf_counter()
            read = _Read(None, [])
            try:
                asked = await session.ask(history, question, message_id)
                output = await invoke(
                    asked.input, run_id, cap, asked.configurable, script, position
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metadata["error"] = f"{type(exc).__name__}: {exc}"
                failed.append(f"turns[{position}] failed: {metadata['error']}")
            else:
                session.answered(output)
                read = session.read(output, message_id)
                if read.note is not None:
                    metadata["answer_note"] = read.note
            metadata["latency_s"] = time.perf_counter() - started
            retrievals = cap.for_root(run_id)
            metadata.update(_retrieval_metadata(retrievals, cap.models_for(run_id)))
            contexts = _turn_contexts(retrievals, retriever_name)
            return Reply(read.answer, contexts, read.tool_calls, metadata)

        async with sem:
            replayed = await areplay(script, respond)
        done += 1
        if progress is not None:
            progress(done, len(items))
        return replayed.model_copy(
            update={"metadata": {**replayed.metadata, "capture": session.metadata()}}
        )

    return list(await asyncio.gather(*(one(s) for s in items)))


def capture_conversations(
    runnable: Runnable[Any, Any],
    scripts: Iterable[Conversation],
    **options: Unpack[ConversationOptions],
) -> list[Conversation]:
    """Replay each script's user turns through ``runnable``; return the conversations it had.

    ``scripts`` are conversations whose user turns are fixed (`ragbridge.core.replay`): an
    assistant turn after a user turn may hold what is expected there (reference, relevance,
    reference contexts, id), which the captured turn keeps. Each assistant turn is the
    runnable's answer, with the contexts retrieved during that turn (every retriever run
    under it, tool calls of an agent included; only those named ``retriever_name`` — run name
    or tag — when given) and the tool calls its AI messages made. How the conversation so far
    reaches the runnable:

    * a ``RunnableWithMessageHistory``: a fresh session id per conversation (under
      ``session_key``, default ``session_id``; other history fields come from
      ``config["configurable"]``), the session store being the user's; the question goes
      under ``input_key`` (default: its ``input_messages_key``);
    * ``history_key=``: the input is ``{history_key: [messages so far], input_key: question}``,
      or with no ``input_key`` the question is the last message of that list;
    * a LangGraph graph whose state is a message list (``messages_key``, default
      ``messages``): with a checkpointer, a fresh ``thread_id`` per conversation and only the
      new question each turn; without one, the messages it returned last plus the question.

    ``extra_inputs`` are added to every dict input (a prompt's other variables). The answer is
    read as `run_pipeline` reads it (``answer_key``; for a graph, its last AI message). Turn
    metadata holds ``latency_s``, ``run_id``, ``retrievals``, ``retrieval_queries`` and
    ``generator_model``; a failing turn's ``error`` ends its conversation (the turns after it
    say ``not_asked``). Conversation metadata ``capture`` names the mode and the session or
    thread id. Up to ``max_concurrency`` conversations run at once (default 8), turns of one
    conversation in order; ``progress(done, total)`` after each conversation. ``options`` are
    `ConversationOptions`; ``config`` is the `RunnableConfig` every turn starts from (its
    callbacks are kept next to the capture).
    """
    return run_sync(acapture_conversations(runnable, scripts, **options))
