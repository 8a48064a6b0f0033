"""Agent trajectories captured from LangChain and LangGraph (`adapters/langchain/trajectories.py`).

Real frameworks, offline: LangGraph's prebuilt ReAct agent, LangChain's ``create_agent`` and the
classic ``AgentExecutor`` around langchain-core's fake chat model made to call tools from a plan
(keyed by the question, so replies do not depend on the order runs interleave), an
`InMemoryVectorStore` over a bag-of-words embedding (a query retrieves the one document sharing
its words, so each search's documents are known and differ), a retriever tool, a ``@tool`` that
calls a retriever, a calculator and a tool that raises. Each test fails on a wrong step: a
step's contexts taken from another step, steps in finishing order instead of the model's, a
failing tool's error lost, or the conversation form giving another trajectory back.
"""

from __future__ import annotations

import asyncio
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, create_retriever_tool, tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.prebuilt import ToolNode, create_react_agent
from pydantic import BaseModel, Field

from ragbridge.adapters.langchain import (
    acapture_trajectories,
    capture_trajectories,
    capture_trajectory_conversations,
    trajectory_conversation,
)
from ragbridge.core.conversation import Conversation, load_conversations, save_conversations
from ragbridge.core.sample import Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall, Turn

# --------------------------------------------------------------------------- fixtures

DOCS = {
    "vacation": "Full-time staff get 25 vacation days a year.",
    "part-time": "Part-time staff accrue holidays pro rata to their hours.",
    "parental": "Parental leave lasts 16 weeks.",
}
VOCAB = ("vacation", "days", "part", "time", "holidays", "parental", "leave", "weeks")

VACATION_Q = "vacation days"
PARENTAL_Q = "parental leave"
PART_TIME_Q = "part time holidays"
QUESTION = "How much time off do I get in total: vacation plus parental leave, in weeks?"
BROKEN = "Which benefits apply to contractors?"
PARENTAL = "How long is parental leave?"
PART_TIME = "What do part-timers get?"


class _Words(Embeddings):
    """A deterministic bag-of-words embedding over `VOCAB` (plus a constant, so no vector is
    zero): a query retrieves the document that shares its words."""

    def _vector(self, text: str) -> list[float]:
        words = re.findall(r"[a-z]+", text.lower())
        return [float(words.count(w)) for w in VOCAB] + [0.1]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(_Words())
    store.add_documents([Document(id=k, page_content=v) for k, v in DOCS.items()])
    return store


RETRIEVER = _store().as_retriever(search_kwargs={"k": 1})

search_policy = create_retriever_tool(
    RETRIEVER, "search_policy", "Search the HR policy for the query."
)


@tool
def lookup_policy(topic: str) -> str:
    """Look a topic up in the HR policy (slowly: it finishes after a quick tool started with it)."""
    time.sleep(0.05)
    return "\n".join(d.page_content for d in RETRIEVER.invoke(topic))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def contractor_rules(kind: str) -> str:
    """Look up the rules for a kind of contractor (always fails)."""
    raise ValueError(f"no rules for {kind}")


@tool(response_format="content_and_artifact")
def scan_policy(query: str) -> tuple[str, list[Document]]:
    """Search the policy store directly (no retriever run: the documents are the artifact)."""
    docs = _store().similarity_search(query, k=1)
    return "\n".join(d.page_content for d in docs), docs


TOOLS: list[BaseTool] = [search_policy, lookup_policy, add, contractor_rules, scan_policy]

# What the model asks for, by question: one list of calls per reply, then it answers.
PLANS: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {
    QUESTION: [
        [("search_policy", {"query": VACATION_Q})],
        [("lookup_policy", {"topic": PARENTAL_Q}), ("add", {"a": 25, "b": 16})],
    ],
    BROKEN: [[("search_policy", {"query": PART_TIME_Q})], [("contractor_rules", {"kind": "x"})]],
    PARENTAL: [[("search_policy", {"query": PARENTAL_Q})]],
    PART_TIME: [[("scan_policy", {"query": PART_TIME_Q})]],
}


class _Agent(GenericFakeChatModel):
    """langchain-core's fake chat model as a tool-calling agent model (no shipped fake supports
    ``bind_tools``): it makes the calls `PLANS` lists for the question, one reply at a time, then
    answers by quoting the tool results it was shown. Call ids name the question and the reply."""

    messages: Iterator[Any] = Field(default_factory=lambda: iter(()))
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen.append(list(messages))
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        question = str(messages[start].content)
        after = messages[start + 1 :]
        plan = PLANS.get(question, [])
        asked = sum(isinstance(m, AIMessage) for m in after)
        if asked < len(plan):
            tag = f"q{list(PLANS).index(question)}-r{asked}"
            calls = [
                {"name": name, "args": args, "id": f"{tag}-c{j}"}
                for j, (name, args) in enumerate(plan[asked])
            ]
            reply = AIMessage(content="", tool_calls=calls)
        else:
            found = [str(m.content) for m in after if isinstance(m, ToolMessage)]
            reply = AIMessage(content="answer: " + " | ".join(found))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _react(tools: Any = None) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # moved to langchain.agents; still shipped
        return create_react_agent(_Agent(), TOOLS if tools is None else tools)


def _create_agent() -> Any:
    agents = pytest.importorskip("langchain.agents")
    return agents.create_agent(_Agent(), TOOLS)


BUILDERS: dict[str, Callable[[], Any]] = {
    "create_react_agent": _react,
    "create_agent": _create_agent,
}


def _ids(step: Step) -> list[str | None]:
    return [c.id for c in step.contexts]


EXPECTED_CALLS = [
    ToolCall(name="search_policy", args={"query": VACATION_Q}, id="q0-r0-c0"),
    ToolCall(name="lookup_policy", args={"topic": PARENTAL_Q}, id="q0-r1-c0"),
    ToolCall(name="add", args={"a": 25, "b": 16}, id="q0-r1-c1"),
]


def _sample() -> Sample:
    return Sample(
        id="s1",
        question=QUESTION,
        reference="25 days and 16 weeks",
        reference_tool_calls=[c.model_copy(update={"id": None}) for c in EXPECTED_CALLS],
        relevance={"vacation": 1, "parental": 1},
        metadata={"source": "hr"},
    )


# --------------------------------------------------------------------------- the trajectory


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_two_retrievals_and_a_calculator_each_step_with_its_own_contexts(builder: str) -> None:
    (sample,) = capture_trajectories(BUILDERS[builder](), [_sample()])
    steps = sample.trajectory
    assert steps is not None
    # the calls in the order the model asked for them (the slow lookup finished after `add`)
    assert [s.call() for s in steps] == EXPECTED_CALLS
    # each retrieval step's contexts are its own retrieval's; the calculator has none
    assert [_ids(s) for s in steps] == [["vacation"], ["parental"], []]
    assert [s.contexts[0].text for s in steps[:2]] == [DOCS["vacation"], DOCS["parental"]]
    assert [s.output for s in steps] == [DOCS["vacation"], DOCS["parental"], "41"]
    assert [s.error for s in steps] == [None, None, None]
    assert all(s.latency_s is not None and s.latency_s >= 0 for s in steps)
    assert steps[1].latency_s is not None
    assert steps[1].latency_s >= 0.05
    assert [s.metadata.get("retrieval_queries") for s in steps] == [
        [VACATION_Q],
        [PARENTAL_Q],
        None,
    ]
    # the sample: the union of the retrieval steps' contexts, the answer, the input kept
    assert [c.id for c in sample.contexts] == ["vacation", "parental"]
    assert sample.answer == f"answer: {DOCS['vacation']} | {DOCS['parental']} | 41"
    assert sample.reference == "25 days and 16 weeks"
    assert sample.reference_tool_calls == _sample().reference_tool_calls
    assert sample.relevance == {"vacation": 1, "parental": 1}
    assert sample.metadata["source"] == "hr"
    assert sample.metadata["retrieval_queries"] == [VACATION_Q, PARENTAL_Q]
    assert "error" not in sample.metadata
    assert sample.metadata["latency_s"] > 0


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_a_failing_tool_is_the_step_that_records_the_error(builder: str) -> None:
    (sample,) = capture_trajectories(BUILDERS[builder](), [BROKEN])
    steps = sample.trajectory
    assert steps is not None
    assert [s.name for s in steps] == ["search_policy", "contractor_rules"]
    first, failed = steps
    assert (first.error, _ids(first), first.output) == (None, ["part-time"], DOCS["part-time"])
    assert failed.error == "ValueError: no rules for x"
    assert failed.output is None
    assert failed.contexts == []
    assert failed.latency_s is not None
    # the agent stopped on it: the run failed, the steps up to the failure are kept
    assert sample.metadata["error"] == "ValueError: no rules for x"
    assert sample.answer is None
    assert [c.id for c in sample.contexts] == ["part-time"]


def test_a_tool_error_the_agent_handles_is_recorded_and_the_agent_goes_on() -> None:
    agent = _react(ToolNode(TOOLS, handle_tool_errors=True))
    (sample,) = capture_trajectories(agent, [BROKEN])
    assert sample.trajectory is not None
    failed = sample.trajectory[1]
    assert failed.error == "ValueError: no rules for x"
    # the output is the error message the model was shown, and it answered from it
    assert failed.output is not None
    assert "no rules for x" in failed.output
    assert sample.answer == f"answer: {DOCS['part-time']} | {failed.output}"
    assert "error" not in sample.metadata


def test_concurrent_runs_keep_their_own_steps() -> None:
    questions = [PARENTAL, QUESTION, PART_TIME, PARENTAL]
    samples = [Sample(id=f"s{i}", question=q) for i, q in enumerate(questions)]
    out = asyncio.run(acapture_trajectories(_react(), samples, max_concurrency=4))
    assert [s.id for s in out] == ["s0", "s1", "s2", "s3"]
    traj = [[(st.name, _ids(st)) for st in s.trajectory or []] for s in out]
    assert traj == [
        [("search_policy", ["parental"])],
        [("search_policy", ["vacation"]), ("lookup_policy", ["parental"]), ("add", [])],
        [("scan_policy", ["part-time"])],  # from the tool message's artifact: no retriever ran
        [("search_policy", ["parental"])],
    ]


def test_retriever_name_keeps_only_the_named_retrievers_contexts() -> None:
    named, other = (
        capture_trajectories(_react(), [QUESTION], retriever_name=name)[0]
        for name in ("VectorStoreRetriever", "another-retriever")
    )
    assert named.trajectory is not None
    assert other.trajectory is not None
    assert [_ids(s) for s in named.trajectory] == [["vacation"], ["parental"], []]
    assert [_ids(s) for s in other.trajectory] == [[], [], []]
    assert other.contexts == []
    assert len(other.trajectory) == 3


def test_a_structured_output_reply_is_no_step() -> None:
    """``with_structured_output`` asks for a schema "tool" that nobody runs: not a call."""

    class Verdict(BaseModel):
        ok: bool

    class _Structured(_Agent):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self.bind(**kwargs)

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            call = {"name": "Verdict", "args": {"ok": True}, "id": "v1"}
            reply = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    judge = _Structured().with_structured_output(Verdict)
    chain = RunnableLambda(lambda q: str(judge.invoke(q)))
    (sample,) = capture_trajectories(chain, ["is it ok?"])
    assert sample.answer == "ok=True"
    assert sample.trajectory == []


def test_a_sample_history_reaches_the_graph_before_the_question() -> None:
    model = _Agent()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, TOOLS)
    history = [Turn(role="user", content="Hi"), Turn(role="assistant", content="Hello!")]
    (sample,) = capture_trajectories(agent, [Sample(id="h", question=PARENTAL, history=history)])
    assert [type(m).__name__ for m in model.seen[0]] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert [str(m.content) for m in model.seen[0]] == ["Hi", "Hello!", PARENTAL]
    assert sample.trajectory is not None
    assert [_ids(s) for s in sample.trajectory] == [["parental"]]


def test_tools_a_chain_runs_itself_are_steps_in_the_order_they_ran() -> None:
    """No model asked for these calls: each tool run is a step, named by its position."""

    def pipeline(question: str) -> str:
        total = add.invoke({"a": 2, "b": 3})
        found = search_policy.invoke({"query": PARENTAL_Q})
        return f"{total}: {found}"

    (sample,) = capture_trajectories(RunnableLambda(pipeline), ["q"])
    assert sample.trajectory is not None
    assert [s.call() for s in sample.trajectory] == [
        ToolCall(name="add", args={"a": 2, "b": 3}, id="call-0"),
        ToolCall(name="search_policy", args={"query": PARENTAL_Q}, id="call-1"),
    ]
    assert [_ids(s) for s in sample.trajectory] == [[], ["parental"]]
    assert sample.answer == f"5: {DOCS['parental']}"


def test_history_needs_a_key_outside_a_graph() -> None:
    history = [Turn(role="user", content="Hi")]
    with pytest.raises(ValueError, match="history_key"):
        capture_trajectories(RunnableLambda(str), [Sample(id="h", question="q", history=history)])


# --------------------------------------------------------------------------- classic executor


def test_classic_agent_executor_steps_match_calls_without_call_ids() -> None:
    """``AgentExecutor`` runs tools without passing the call id: each run finds its call by name
    and arguments, and the step keeps the model's id and order."""
    classic = pytest.importorskip("langchain_classic.agents")
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages(
        [("human", "{input}"), ("placeholder", "{agent_scratchpad}")]
    )
    model = _Agent(disable_streaming=True)  # the executor streams; the fake streams no tool calls
    executor = classic.AgentExecutor(
        agent=classic.create_tool_calling_agent(model, TOOLS, prompt), tools=TOOLS
    )
    (sample,) = capture_trajectories(executor, [_sample()], input_key="input")
    steps = sample.trajectory
    assert steps is not None
    assert [s.call() for s in steps] == EXPECTED_CALLS
    assert [_ids(s) for s in steps] == [["vacation"], ["parental"], []]
    assert [s.output for s in steps] == [DOCS["vacation"], DOCS["parental"], "41"]
    assert sample.answer == f"answer: {DOCS['vacation']} | {DOCS['parental']} | 41"


# --------------------------------------------------------------------------- conversation form


def _tool_turns(conversation: Conversation) -> list[Turn]:
    return [t for t in conversation.turns if t.role == "tool"]


@pytest.mark.parametrize("question", [QUESTION, BROKEN])
def test_the_conversation_form_gives_the_same_trajectory_back(question: str, tmp_path: Any) -> None:
    sample_in = _sample() if question == QUESTION else Sample(id="s2", question=BROKEN)
    (sample,) = capture_trajectories(_react(), [sample_in])
    conversation = trajectory_conversation(sample)
    roles = [t.role for t in conversation.turns]
    if question == QUESTION:  # one assistant turn per model reply, its calls answered after it
        assert roles == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
        assert [len(t.tool_calls) for t in conversation.turns if t.role == "assistant"] == [1, 2, 0]
        assert [[c.id for c in t.contexts] for t in _tool_turns(conversation)] == [
            ["vacation"],
            ["parental"],
            [],
        ]
    else:  # the failed call's tool turn is empty and carries the error
        failed = _tool_turns(conversation)[-1]
        assert (failed.content, failed.metadata["error"]) == ("", "ValueError: no rules for x")
    save_conversations([conversation], tmp_path / "c.jsonl")
    (loaded,) = load_conversations(tmp_path / "c.jsonl")
    for form in (conversation, loaded):
        back = form.turn_sample(len(form.turns) - 1)
        assert back.trajectory == sample.trajectory
        assert (back.question, back.answer, back.contexts) == (
            sample.question,
            sample.answer,
            sample.contexts,
        )
        assert back.reference_tool_calls == sample.reference_tool_calls
        assert back.reference == sample.reference


def test_capture_trajectory_conversations_is_the_conversation_form() -> None:
    (conversation,) = capture_trajectory_conversations(_react(), [_sample()])
    back = conversation.turn_sample(len(conversation.turns) - 1)
    assert back.trajectory is not None
    assert [s.call() for s in back.trajectory] == EXPECTED_CALLS
    assert [_ids(s) for s in back.trajectory] == [["vacation"], ["parental"], []]


def test_steps_without_call_ids_get_ids_in_the_conversation_form() -> None:
    steps = [Step(name="search", args={"q": "a"}, output="x"), Step(name="add", output="2")]
    sample = Sample(id="x", question="q", answer="a", trajectory=steps)
    conversation = trajectory_conversation(sample)
    assert [t.tool_call_id for t in _tool_turns(conversation)] == ["call-0", "call-1"]
    back = conversation.turn_sample(len(conversation.turns) - 1).trajectory
    assert back is not None
    assert [(s.name, s.output) for s in back] == [
        ("search", "x"),
        ("add", "2"),
    ]
