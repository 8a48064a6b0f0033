"""LlamaIndex adapter, source side: whole conversations from chat engines.

A chat engine's answer to a follow-up depends on the turns before it, so it is evaluated over
scripted sessions: `capture_chat_sessions` asks an engine every user turn of each script in
order (``engine.chat``; `acapture_chat_sessions` uses ``engine.achat``) and records, per
assistant turn, the answer and the contexts retrieved *for that turn*. The walk through the
script — where the expected answers, ids and relevance labels go — is `ragbridge.core.replay`'s;
this module only says how to ask a LlamaIndex engine.

Why it looks the way it does:

* **The engine's memory is the conversation.** A chat engine keeps its own history, so each
  turn is sent as the bare message and the memory carries the turns before it. Between
  conversations the memory is cleared (``engine.reset()``), and the capture checks that it is
  empty afterwards: an engine whose reset kept its history would answer one conversation in the
  light of another, and nothing in its answers would say so. A factory that builds a fresh
  engine per conversation is accepted too (the only way to run conversations concurrently).
* **A script's system turns are refused.** An engine's system prompt is fixed when it is built
  (``system_prompt=``); sending a script's system turn as a message would replay a different
  conversation from the one recorded.
* **Contexts are the response's source nodes**, named as the rest of the adapter names nodes
  (`ragbridge.adapters.llamaindex.reading`: document ids survive chunking, scores and metadata
  kept). The condense-question engine answers through a query engine; its response's source
  nodes are that query's. An engine that reports no sources falls back on the retrievals
  captured under that turn's call (``metadata["contexts_from"] = "instrumentation"``).
* **What was retrieved with is recorded.** A condensing engine (condense-question,
  condense-plus-context) retrieves with a standalone question rewritten from the history, not
  with the user's follow-up; ``metadata["condensed_question"]`` keeps it on every turn, which is
  what explains a follow-up's contexts. ``metadata["retrieval_query"]`` is set, as in
  `ragbridge.adapters.llamaindex.run_query_engine`, when the retriever was asked something
  else again (a query transform inside the query engine).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

from ragbridge.core.conversation import Conversation
from ragbridge.core.replay import Reply, areplay, replay
from ragbridge.core.turn import Turn

from ._framework import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    active_instrument_tags,
    instrument_tags,
)
from .capture import RetrievalCapture, capture_retrievals, note_rewritten_query
from .reading import answer_of, contexts_from, source_nodes

__all__ = [
    "ChatTurnError",
    "acapture_chat_sessions",
    "capture_chat_sessions",
    "condensed_question",
]

RUN_TAG = "ragbridge_chat_run"
CONVERSATION_TAG = "ragbridge_conversation"
TURN_TAG = "ragbridge_turn"

Script: TypeAlias = "Conversation | Sequence[str]"
"""A script: a `Conversation` whose user turns are asked (its assistant turns may hold the
expected values), or just the user messages in order (the conversation's id is its position)."""


class ChatTurnError(RuntimeError):
    """The engine failed on one turn of a conversation.

    The capture stops there: a later turn would answer a conversation that never happened. The
    engine's own exception is the ``__cause__``; ``conversation_id`` and ``turn`` (the user turn
    asked, counted from 0) say where it happened.
    """

    def __init__(self, conversation_id: str, turn: int, cause: BaseException) -> None:
        super().__init__(
            f"conversation {conversation_id!r}, user turn {turn}: the chat engine raised "
            f"{type(cause).__name__}: {cause}"
        )
        self.conversation_id = conversation_id
        self.turn = turn


def condensed_question(engine: Any, response: Any) -> str | None:
    """The standalone question a condensing engine retrieved with, as its response reports it.

    The condense-question engine names it as its query-engine tool's ``raw_input["query"]``,
    condense-plus-context as its retriever tool's ``raw_input["message"]``. Other engines
    (``ContextChatEngine`` retrieves with the message itself) condense nothing: None.
    """
    if not isinstance(engine, (CondenseQuestionChatEngine, CondensePlusContextChatEngine)):
        return None
    key = "query" if isinstance(engine, CondenseQuestionChatEngine) else "message"
    for source in getattr(response, "sources", None) or ():
        raw = getattr(source, "raw_input", None)
        if isinstance(raw, dict) and isinstance(raw.get(key), str):
            return str(raw[key])
    return None


# --------------------------------------------------------------------------- engines


def _has(obj: Any, method: str) -> bool:
    return callable(getattr(obj, method, None))


def _engine_source(engine: Any, method: str) -> tuple[Callable[[], Any], bool]:
    """How to get each conversation's engine, and whether it is one shared engine."""
    if _has(engine, method):
        if not callable(getattr(engine, "reset", None)):
            raise TypeError(
                f"{type(engine).__name__} has no reset(): its memory could not be cleared "
                "between conversations; pass a factory that builds a fresh engine instead"
            )
        return (lambda: engine), True
    if callable(engine) and not _has(engine, "aquery"):

        def build() -> Any:
            built = engine()
            if not _has(built, method):
                raise TypeError(
                    f"the engine factory returned a {type(built).__name__}, not a LlamaIndex "
                    f"chat engine ({method})"
                )
            return built

        return build, False
    raise TypeError(
        f"capture_chat_sessions needs a LlamaIndex chat engine ({method}) or a function that "
        f"builds one, got {type(engine).__name__}"
        + (" (a query engine: use run_query_engine)" if _has(engine, "aquery") else "")
    )


def _fresh(engine: Any, conversation_id: str) -> None:
    """Clear the engine's memory and check that it is empty."""
    reset = getattr(engine, "reset", None)
    if callable(reset):
        reset()
    left = getattr(engine, "chat_history", None)
    if left:
        raise RuntimeError(
            f"{type(engine).__name__} still holds {len(left)} messages after reset(): "
            f"conversation {conversation_id!r} would start from another conversation's history"
        )


# --------------------------------------------------------------------------- scripts


def _as_scripts(scripts: Iterable[Script]) -> list[Conversation]:
    out: list[Conversation] = []
    for i, item in enumerate(scripts):
        if isinstance(item, Conversation):
            script = item
        elif (
            isinstance(item, Sequence)
            and not isinstance(item, str)
            and all(isinstance(m, str) for m in item)
        ):
            script = Conversation(id=str(i), turns=[Turn(role="user", content=m) for m in item])
        else:
            raise TypeError(
                f"scripts[{i}] is a {type(item).__name__}: give a Conversation or a list of "
                "user messages"
            )
        for index, turn in enumerate(script.turns):
            if turn.role == "system":
                raise ValueError(
                    f"script {script.id!r}: turns[{index}] is a system turn; a chat engine's "
                    "system prompt is set when it is built (system_prompt=...), so build the "
                    "engine with it and leave it out of the script"
                )
        out.append(script)
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        raise ValueError("script ids must be unique")
    return out


# --------------------------------------------------------------------------- one turn


class _Turns:
    """The bookkeeping one conversation's turns share: the engine, the capture, the tags that
    pick this conversation's retrievals out of it."""

    def __init__(
        self,
        engine: Any,
        cap: RetrievalCapture,
        run_id: str,
        conversation_id: str,
        use_ref_doc_id: bool,
    ) -> None:
        self.engine = engine
        self.cap = cap
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.use_ref_doc_id = use_ref_doc_id
        self.asked = 0

    def tags(self) -> dict[str, Any]:
        # Merged with the caller's tags: instrument_tags replaces, it does not add.
        return {
            **active_instrument_tags.get(),
            RUN_TAG: self.run_id,
            CONVERSATION_TAG: self.conversation_id,
            TURN_TAG: self.asked,
        }

    def failed(self, exc: Exception) -> ChatTurnError:
        return ChatTurnError(self.conversation_id, self.asked, exc)

    def reply(self, question: str, response: Any, started: float) -> Reply:
        latency = round(time.perf_counter() - started, 6)
        mine = {RUN_TAG: self.run_id, CONVERSATION_TAG: self.conversation_id, TURN_TAG: self.asked}
        self.asked += 1
        captured = self.cap.with_tags(**mine)
        meta: dict[str, Any] = {
            "engine": type(self.engine).__name__,
            "latency_s": latency,
            "retrievals": len(captured),
        }
        condensed = condensed_question(self.engine, response)
        if condensed is not None:
            meta["condensed_question"] = condensed
        note_rewritten_query(meta, captured, question)
        if condensed is not None and meta.get("retrieval_query") == condensed:
            del meta["retrieval_query"]  # the condensed question says it already
        models = self.cap.models_with_tags(**mine)
        if models:  # the last LLM wrote the answer; `ragbridge eval` warns if it also judges
            meta["generator_model"] = models[-1]
        source = source_nodes(response)
        contexts = contexts_from(source, captured, use_ref_doc_id=self.use_ref_doc_id)
        if not source and captured:
            meta["contexts_from"] = "instrumentation"
        return Reply(answer_of(response), contexts, (), meta)


# --------------------------------------------------------------------------- capture


def capture_chat_sessions(
    engine: Any, scripts: Iterable[Script], *, use_ref_doc_id: bool = True
) -> list[Conversation]:
    """Each script replayed through a LlamaIndex chat engine, one conversation after another.

    ``engine`` is a chat engine (``index.as_chat_engine(chat_mode="condense_question")``,
    ``"context"``, ``"condense_plus_context"``, any ``BaseChatEngine``), reset before each
    conversation, or a function with no arguments that builds a fresh one per conversation.
    Each user turn is sent with ``engine.chat(message)``; the engine's memory carries the turns
    before it. Each assistant turn gets the answer, the contexts of that turn's response (ids as
    `ragbridge.adapters.llamaindex.node_to_context` names them: document ids unless
    ``use_ref_doc_id=False``), the script's expected values for that turn, and metadata
    (``engine``, ``latency_s``, ``retrievals``, ``condensed_question`` for condensing engines,
    ``retrieval_query``, ``generator_model``).

    ``scripts`` are `Conversation`s (their user turns are asked; see `ragbridge.core.replay`)
    or lists of user messages. Raises `ChatTurnError` when the engine fails on a turn,
    ValueError for a script with a system turn or duplicate script ids, RuntimeError when an
    engine's memory is not empty after its reset. A shared engine is left holding the last
    conversation.
    """
    todo = _as_scripts(scripts)
    next_engine, _ = _engine_source(engine, "chat")
    run_id = uuid.uuid4().hex
    out: list[Conversation] = []
    with capture_retrievals(use_ref_doc_id=use_ref_doc_id) as cap:
        for script in todo:
            chat_engine = next_engine()
            _fresh(chat_engine, script.id)
            turns = _Turns(chat_engine, cap, run_id, script.id, use_ref_doc_id)

            def respond(history: Sequence[Turn], question: str, turns: _Turns = turns) -> Reply:
                started = time.perf_counter()
                try:
                    with instrument_tags(turns.tags()):
                        response = turns.engine.chat(question)
                except Exception as exc:
                    raise turns.failed(exc) from exc
                return turns.reply(question, response, started)

            out.append(replay(script, respond))
    return out


async def acapture_chat_sessions(
    engine: Any,
    scripts: Iterable[Script],
    *,
    use_ref_doc_id: bool = True,
    max_concurrency: int = 1,
) -> list[Conversation]:
    """`capture_chat_sessions` with ``await engine.achat(message)``.

    With a factory, up to ``max_concurrency`` conversations run at once, each on its own
    engine; a single shared engine has one memory, so its conversations always run one after
    another (``max_concurrency`` above 1 is refused for it). Conversations come back in the
    order of ``scripts``. When one conversation fails, the others still running are cancelled
    and its `ChatTurnError` is raised.
    """
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    todo = _as_scripts(scripts)
    next_engine, shared = _engine_source(engine, "achat")
    if shared and max_concurrency > 1:
        raise ValueError(
            "one chat engine has one memory: its conversations cannot run concurrently; pass "
            "a factory that builds an engine per conversation to use max_concurrency"
        )
    run_id = uuid.uuid4().hex
    gate = asyncio.Semaphore(max_concurrency)

    async def one(script: Conversation, cap: RetrievalCapture) -> Conversation:
        async with gate:
            chat_engine = next_engine()
            _fresh(chat_engine, script.id)
            turns = _Turns(chat_engine, cap, run_id, script.id, use_ref_doc_id)

            async def respond(history: Sequence[Turn], question: str) -> Reply:
                started = time.perf_counter()
                try:
                    with instrument_tags(turns.tags()):
                        response = await turns.engine.achat(question)
                except Exception as exc:
                    raise turns.failed(exc) from exc
                return turns.reply(question, response, started)

            return await areplay(script, respond)

    with capture_retrievals(use_ref_doc_id=use_ref_doc_id) as cap:
        tasks = [asyncio.ensure_future(one(s, cap)) for s in todo]
        return await _all_or_none(tasks)


async def _all_or_none(tasks: Sequence[asyncio.Future[Conversation]]) -> list[Conversation]:
    """Every task's result in order; on the first failure the rest are cancelled (and waited
    for, so nothing runs on after the capture has closed) and the failure is raised."""
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
