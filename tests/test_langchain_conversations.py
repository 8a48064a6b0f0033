"""Conversations captured from LangChain and LangGraph (`adapters/langchain/conversations.py`).

Real frameworks, offline: an `InMemoryVectorStore` over a bag-of-words embedding (deterministic,
and a question retrieves the document sharing its words, so each turn's retrieval is known in
advance and differs from the other turns'), langchain-core's fake chat model made to record what
it was shown and to answer from it, and LangGraph's own agents and tool nodes around it. Each test
would fail on a wrong turn: contexts taken from another turn or accumulated over the
conversation, memory leaking between conversations or lost within one, expected values on the
wrong assistant turn.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import create_retriever_tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from pydantic import Field

from ragbridge.adapters.langchain import acapture_conversations, capture_conversations
from ragbridge.core.conversation import Conversation, load_conversations, save_conversations
from ragbridge.core.turn import ToolCall, Turn

# --------------------------------------------------------------------------- fixtures

DOCS = {
    "vacation": "Full-time staff get 25 vacation days a year.",
    "part-time": "Part-time staff accrue holidays pro rata to their hours.",
    "parental": "Parental leave lasts 16 weeks.",
}
VOCAB = ("vacation", "days", "part", "time", "timers", "holidays", "parental", "leave", "weeks")

VACATION = "How many vacation days do I get?"
PART_TIME = "And for part-timers?"
THANKS = "Thanks!"
PARENTAL = "How long is parental leave?"
BOTH = "Compare vacation days and parental leave."


class _Words(Embeddings):
    """A deterministic bag-of-words embedding over `VOCAB` (plus a constant, so no vector is
    zero): a question retrieves the document that shares its words."""

    def _vector(self, text: str) -> list[float]:
        words = re.findall(r"[a-z]+", text.lower())
        return [float(words.count(w)) for w in VOCAB] + [0.1]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _retriever() -> Any:
    store = InMemoryVectorStore(_Words())
    store.add_documents([Document(id=k, page_content=v) for k, v in DOCS.items()])
    return store.as_retriever(search_kwargs={"k": 1})


def test_the_retriever_returns_a_different_document_for_each_question() -> None:
    """The premise of every test below: turn by turn the retrievals differ."""
    retriever = _retriever()
    found = {q: [d.id for d in retriever.invoke(q)] for q in (VACATION, PART_TIME, PARENTAL)}
    assert found == {VACATION: ["vacation"], PART_TIME: ["part-time"], PARENTAL: ["parental"]}


class _Recorder(GenericFakeChatModel):
    """langchain-core's fake chat model, made to record every message list it is shown and to
    answer from it (so replies do not depend on the order conversations run in): a tool result
    is quoted, a question is echoed."""

    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            found = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                found.insert(0, str(message.content))
            return AIMessage(content="from the policy: " + " | ".join(found))
        return AIMessage(content=f"answer to: {last.content}")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def calls_for(self, question: str) -> list[list[BaseMessage]]:
        """The message lists whose last human message is ``question``."""
        return [m for m in self.seen if _last_human(m) == question]


class _ToolRecorder(_Recorder):
    """The recorder as a tool-calling agent model (no shipped fake supports ``bind_tools``):
    it searches for each question, twice for a comparison, and not at all to a thank-you."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage) or last.content == THANKS:
            return super()._reply(messages)
        queries = [VACATION, PARENTAL] if last.content == BOTH else [str(last.content)]
        calls = [
            {"name": "search_policy", "args": {"query": q}, "id": f"call-{uuid4().hex[:8]}"}
            for q in queries
        ]
        return AIMessage(content="", tool_calls=calls)


def _last_human(messages: Sequence[BaseMessage]) -> str | None:
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    return str(humans[-1].content) if humans else None


def _texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def _script(conv_id: str, *questions: str, expected: dict[int, Turn] | None = None) -> Conversation:
    turns: list[Turn] = []
    for i, question in enumerate(questions):
        turns.append(Turn(role="user", content=question))
        if expected and i in expected:
            turns.append(expected[i])
    return Conversation(id=conv_id, turns=turns)


def _ids(turn: Turn) -> list[str | None]:
    return [c.id for c in turn.contexts]


def _join(docs: list[Document]) -> str:
    return "\n".join(d.page_content for d in docs)


EXPECTED = {
    0: Turn(role="assistant", id="a1", reference="25 days", relevance={"vacation": 1}),
    1: Turn(role="assistant", id="a2", reference="pro rata", relevance={"part-time": 1}),
}


# ------------------------------------------------------------------ RunnableWithMessageHistory


def _memory() -> InMemoryChatMessageHistory:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in favour of LangGraph; still shipped
        return InMemoryChatMessageHistory()


def _history_chain(model: _Recorder, store: dict[str, InMemoryChatMessageHistory]) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from: {context}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    chain = (
        RunnablePassthrough.assign(context=itemgetter("question") | _retriever() | _join)
        | prompt
        | model
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in favour of LangGraph; still shipped
        return RunnableWithMessageHistory(
            chain,
            lambda session_id: store.setdefault(session_id, _memory()),
            input_messages_key="question",
            history_messages_key="history",
        )


def test_message_history_chain_turns_memory_and_references() -> None:
    model, store = _Recorder(), {}
    scripts = [
        _script("c1", VACATION, PART_TIME, expected=EXPECTED),
        _script("c2", PARENTAL),
    ]
    c1, c2 = capture_conversations(_history_chain(model, store), scripts)

    assert [t.role for t in c1.turns] == ["user", "assistant", "user", "assistant"]
    # each turn's contexts are its own retrieval's
    assert (_ids(c1.turns[1]), _ids(c1.turns[3]), _ids(c2.turns[1])) == (
        ["vacation"],
        ["part-time"],
        ["parental"],
    )
    assert c1.turns[3].contexts[0].text == DOCS["part-time"]
    assert c1.turns[1].content == f"answer to: {VACATION}"
    assert c1.turns[3].content == f"answer to: {PART_TIME}"
    # the script's expected values land on the assistant turn after their question
    assert (c1.turns[1].id, c1.turns[1].reference, c1.turns[1].relevance) == (
        "a1",
        "25 days",
        {"vacation": 1},
    )
    assert (c1.turns[3].id, c1.turns[3].reference, c1.turns[3].relevance) == (
        "a2",
        "pro rata",
        {"part-time": 1},
    )
    assert c2.turns[1].reference is None
    sample = c1.turn_sample(3)
    assert (sample.question, sample.reference, [c.id for c in sample.contexts]) == (
        PART_TIME,
        "pro rata",
        ["part-time"],
    )
    assert sample.history is not None
    assert _texts_of(sample.history) == [
        VACATION,
        f"answer to: {VACATION}",
    ]

    # memory carries within c1: its second question was asked after its first exchange
    (second,) = model.calls_for(PART_TIME)
    assert _texts(second)[1:] == [VACATION, f"answer to: {VACATION}", PART_TIME]
    assert isinstance(second[0], SystemMessage)
    assert DOCS["part-time"] in str(second[0].content)
    # and never into c2: its first question was asked with no history at all
    (first_of_c2,) = model.calls_for(PARENTAL)
    assert _texts(first_of_c2)[1:] == [PARENTAL]

    sessions = {c.id: c.metadata["capture"]["session_id"] for c in (c1, c2)}
    assert sessions["c1"] != sessions["c2"]
    assert {k: len(v.messages) for k, v in store.items()} == {
        sessions["c1"]: 4,
        sessions["c2"]: 2,
    }
    assert c1.metadata["capture"]["mode"] == "message_history"
    assert c1.turns[3].metadata["retrievals"] == 1
    assert c1.turns[3].metadata["retrieval_queries"] == [PART_TIME]


def _texts_of(turns: Sequence[Turn]) -> list[str | None]:
    return [t.content for t in turns]


def test_capturing_the_same_script_twice_starts_each_from_an_empty_memory() -> None:
    """Fresh session ids, not the conversation id: the user's store still holds the first run's
    sessions, and the second run must not read them."""
    model, store = _Recorder(), {}
    chain = _history_chain(model, store)
    first = capture_conversations(chain, [_script("c1", VACATION)])
    second = capture_conversations(chain, [_script("c1", VACATION)])
    assert [_texts(m)[1:] for m in model.calls_for(VACATION)] == [[VACATION], [VACATION]]
    assert first[0].metadata["capture"]["session_id"] != second[0].metadata["capture"]["session_id"]
    assert len(store) == 2


def test_message_history_around_a_bare_chat_model() -> None:
    """The simplest form: no input key, the model gets the session's messages then the question;
    the captured conversation saves and loads as it was."""
    model, store = _Recorder(), {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chat = RunnableWithMessageHistory(
            model, lambda session_id: store.setdefault(session_id, _memory())
        )
    (conv,) = capture_conversations(chat, [_script("c", VACATION, PART_TIME)])
    (second,) = model.calls_for(PART_TIME)
    assert _texts(second) == [VACATION, f"answer to: {VACATION}", PART_TIME]
    assert conv.turns[3].content == f"answer to: {PART_TIME}"
    assert conv.turns[3].contexts == []


def test_a_captured_conversation_saves_and_loads(tmp_path: Any) -> None:
    (conv,) = capture_conversations(
        _tool_graph(_ToolRecorder()), [_script("c", BOTH, THANKS, expected=EXPECTED)]
    )
    path = tmp_path / "convs.jsonl"
    save_conversations([conv], path)
    assert list(load_conversations(path)) == [conv]


def test_a_script_system_turn_opens_the_session() -> None:
    model, store = _Recorder(), {}
    script = Conversation(
        id="s",
        turns=[
            Turn(role="system", content="Be brief."),
            Turn(role="user", content=VACATION),
            Turn(role="user", content=PART_TIME),
        ],
    )
    (conv,) = capture_conversations(_history_chain(model, store), [script])
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "user", "assistant"]
    (second,) = model.calls_for(PART_TIME)
    assert _texts(second)[1:] == ["Be brief.", VACATION, f"answer to: {VACATION}", PART_TIME]


# --------------------------------------------------------------------------- history key


def _history_key_chain(model: _Recorder, retriever: Any | None = None) -> Runnable[Any, Any]:
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from: {context}"),
            MessagesPlaceholder("chat_history"),
            ("human", "{input}"),
        ]
    )
    search = retriever if retriever is not None else _retriever()
    return RunnablePassthrough.assign(context=itemgetter("input") | search | _join) | prompt | model


def test_history_key_chain_gets_the_conversation_so_far() -> None:
    model = _Recorder()
    scripts = [
        _script("c1", VACATION, PART_TIME, expected=EXPECTED),
        _script("c2", PARENTAL),
    ]
    c1, c2 = capture_conversations(
        _history_key_chain(model), scripts, history_key="chat_history", input_key="input"
    )
    assert (_ids(c1.turns[1]), _ids(c1.turns[3]), _ids(c2.turns[1])) == (
        ["vacation"],
        ["part-time"],
        ["parental"],
    )
    assert c1.turns[3].reference == "pro rata"
    (second,) = model.calls_for(PART_TIME)
    assert _texts(second)[1:] == [VACATION, f"answer to: {VACATION}", PART_TIME]
    (first_of_c2,) = model.calls_for(PARENTAL)
    assert _texts(first_of_c2)[1:] == [PARENTAL]
    assert c1.metadata["capture"] == {"adapter": "langchain", "mode": "history_key"}


def test_history_key_without_input_key_puts_the_question_last_in_the_messages() -> None:
    model = _Recorder()
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("messages")])
    (conv,) = capture_conversations(
        prompt | model, [_script("c", VACATION, PART_TIME)], history_key="messages"
    )
    (second,) = model.calls_for(PART_TIME)
    assert _texts(second) == [VACATION, f"answer to: {VACATION}", PART_TIME]
    assert conv.turns[3].content == f"answer to: {PART_TIME}"
    assert conv.turns[3].contexts == []  # nothing was retrieved


def test_retriever_name_keeps_only_the_named_retrievers_contexts() -> None:
    model = _Recorder()
    audit = RunnableLambda(
        lambda q: [Document(id="audit-log", page_content=q)], name="audit"
    )  # not a retriever: never captured
    named = _retriever().with_config(run_name="policy")
    other = _retriever().with_config(run_name="other")
    chain = (
        RunnablePassthrough.assign(
            context=itemgetter("input") | named | _join,
            more=(lambda x: PARENTAL) | other | _join,
            log=itemgetter("input") | audit,
        )
        | ChatPromptTemplate.from_messages([("human", "{input} {context} {more}")])
        | model
    )
    options: dict[str, Any] = {"history_key": "chat_history", "input_key": "input"}
    (everything,) = capture_conversations(chain, [_script("c", VACATION)], **options)
    (policy,) = capture_conversations(
        chain, [_script("c", VACATION)], retriever_name="policy", **options
    )
    assert sorted(_ids(everything.turns[1])) == ["parental", "vacation"]
    assert _ids(policy.turns[1]) == ["vacation"]


# --------------------------------------------------------------------------- LangGraph


def _tool() -> Any:
    return create_retriever_tool(_retriever(), "search_policy", "Search the staff policy.")


def _react_agent(model: _ToolRecorder) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moved to langchain.agents; still shipped
        return create_react_agent(model, [_tool()], checkpointer=InMemorySaver())


def _create_agent(model: _ToolRecorder) -> Any:
    """LangChain 1.x's agent (``langchain.agents.create_agent``), a LangGraph graph too."""
    agents = pytest.importorskip("langchain.agents")
    return agents.create_agent(model, [_tool()], checkpointer=InMemorySaver())


def _tool_graph(model: _ToolRecorder) -> Any:
    """A hand-built ``MessagesState`` graph with a ``ToolNode`` loop and no checkpointer."""
    tool = _tool()
    bound = model.bind_tools([tool])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def _call(query: str) -> tuple[str, dict[str, Any]]:
    return ("search_policy", {"query": query})


def _calls(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.args) for c in turn.tool_calls]


@pytest.mark.parametrize(
    "build", [_react_agent, _create_agent, _tool_graph], ids=["react_agent", "agent", "toolnode"]
)
def test_message_state_graph_turns_tools_and_memory(build: Any) -> None:
    model = _ToolRecorder()
    scripts = [
        _script("c1", VACATION, PART_TIME, THANKS, expected=EXPECTED),
        _script("c2", PARENTAL),
    ]
    c1, c2 = capture_conversations(build(model), scripts)

    assert [t.role for t in c1.turns] == ["user", "assistant"] * 3
    # each turn's retriever calls are that turn's contexts; a turn without one has none
    assert [_ids(c1.turns[i]) for i in (1, 3, 5)] == [["vacation"], ["part-time"], []]
    assert _ids(c2.turns[1]) == ["parental"]
    # tool calls are the assistant turn's
    assert [_calls(c1.turns[i]) for i in (1, 3, 5)] == [
        [_call(VACATION)],
        [_call(PART_TIME)],
        [],
    ]
    assert all(isinstance(c, ToolCall) and c.id for c in c1.turns[1].tool_calls)
    assert c1.turns[1].content == f"from the policy: {DOCS['vacation']}"
    assert c1.turns[5].content == f"answer to: {THANKS}"
    assert (c1.turns[1].reference, c1.turns[3].reference, c1.turns[5].reference) == (
        "25 days",
        "pro rata",
        None,
    )

    # memory: the graph's own messages of the first turn (tool result included) on the second
    asked_second = model.calls_for(PART_TIME)[0]
    assert _texts(asked_second)[0] == VACATION
    assert any(
        isinstance(m, ToolMessage) and DOCS["vacation"] in str(m.content) for m in asked_second
    )
    assert _texts(asked_second)[-1] == PART_TIME
    # and none of c1 in c2
    for seen in model.calls_for(PARENTAL):
        assert VACATION not in _texts(seen)
        assert DOCS["vacation"] not in " ".join(_texts(seen))
    assert _texts(model.calls_for(PARENTAL)[0]) == [PARENTAL]
    assert c1.metadata["capture"]["mode"] == "graph"


def test_react_agent_threads_are_fresh_per_conversation() -> None:
    agent = _react_agent(_ToolRecorder())
    c1, c2 = capture_conversations(agent, [_script("c1", VACATION), _script("c2", PARENTAL)])
    threads = [c.metadata["capture"]["thread_id"] for c in (c1, c2)]
    assert threads[0] != threads[1]
    # the checkpointer holds each conversation's messages in its own thread
    for conv, thread in zip((c1, c2), threads, strict=True):
        state = agent.get_state({"configurable": {"thread_id": thread}})
        humans = [m.content for m in state.values["messages"] if isinstance(m, HumanMessage)]
        assert humans == [conv.turns[0].content]


def test_two_searches_in_one_turn_are_both_its_contexts() -> None:
    model = _ToolRecorder()
    (conv,) = capture_conversations(_tool_graph(model), [_script("c", BOTH, THANKS)])
    # the tool node runs both calls at once: their retrievals start in no promised order
    assert sorted(_ids(conv.turns[1])) == ["parental", "vacation"]
    assert _calls(conv.turns[1]) == [_call(VACATION), _call(PARENTAL)]
    assert conv.turns[1].metadata["retrievals"] == 2
    assert _ids(conv.turns[3]) == []


def test_async_twin_matches_the_sync_capture_under_concurrency() -> None:
    scripts = [
        _script(f"c{i}", *([VACATION, PART_TIME] if i % 2 else [PARENTAL, VACATION]))
        for i in range(6)
    ]
    model = _ToolRecorder()
    done: list[tuple[int, int]] = []
    convs = asyncio.run(
        acapture_conversations(
            _react_agent(model),
            scripts,
            max_concurrency=3,
            progress=lambda d, t: done.append((d, t)),
        )
    )
    sync = capture_conversations(_react_agent(_ToolRecorder()), scripts)
    assert [c.id for c in convs] == [s.id for s in scripts]
    for a, b in zip(convs, sync, strict=True):
        assert [_ids(t) for t in a.turns] == [_ids(t) for t in b.turns]
        assert [t.content for t in a.turns] == [t.content for t in b.turns]
    assert [_ids(convs[1].turns[i]) for i in (1, 3)] == [["vacation"], ["part-time"]]
    assert [_ids(convs[0].turns[i]) for i in (1, 3)] == [["parental"], ["vacation"]]
    # every conversation's second question was asked after its own first exchange only
    for seen in model.calls_for(PART_TIME):
        assert [m for m in _texts(seen) if m in (PARENTAL, VACATION)] == [VACATION]
    assert done == [(i, 6) for i in range(1, 7)]


# --------------------------------------------------------------------------- failures, refusals


def test_a_failing_turn_ends_its_conversation_and_not_the_others() -> None:
    model = _Recorder()

    def maybe_fail(request: dict[str, Any]) -> dict[str, Any]:
        if request["input"] == "boom":
            raise RuntimeError("the chain broke")
        return request

    chain = RunnableLambda(maybe_fail) | _history_key_chain(model)
    bad, good = capture_conversations(
        chain,
        [_script("bad", VACATION, "boom", PART_TIME), _script("good", PARENTAL)],
        history_key="chat_history",
        input_key="input",
    )
    assert _ids(bad.turns[1]) == ["vacation"]
    assert bad.turns[3].content is None
    assert bad.turns[3].contexts == []
    assert bad.turns[3].metadata["error"] == "RuntimeError: the chain broke"
    assert bad.turns[5].content is None
    assert "turns[3] failed" in bad.turns[5].metadata["not_asked"]
    assert model.calls_for(PART_TIME) == []  # never asked after the failure
    assert good.turns[1].content == f"answer to: {PARENTAL}"


def test_a_runnable_with_no_known_history_is_refused() -> None:
    with pytest.raises(TypeError, match="history_key="):
        capture_conversations(RunnableLambda(lambda x: x), [_script("c", VACATION)])
    with pytest.raises(ValueError, match="neither"):
        capture_conversations(
            _history_chain(_Recorder(), {}), [_script("c", VACATION)], history_key="history"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = RunnableWithMessageHistory(_Recorder(), lambda session_id: _memory())
    with pytest.raises(ValueError, match="input_key="):
        capture_conversations(bare, [_script("c", VACATION)], extra_inputs={"tone": "dry"})


def test_the_module_imports_without_langgraph() -> None:
    """The adapter needs langchain-core only: a LangGraph graph is recognised without
    importing LangGraph."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["langgraph"] = None
        from ragbridge.adapters.langchain import capture_conversations
        print("langgraph" in sys.modules and sys.modules["langgraph"] is not None)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
