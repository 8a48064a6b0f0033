"""Agent trajectories captured from real LlamaIndex agents and workflows, offline.

A real `VectorStoreIndex` over four one-topic documents, embedded by the suite's word-hashing
`HashEmbedding` so each query retrieves its own topic's document, and scripted models:
LlamaIndex's own ``MockFunctionCallingLLM`` driven by a script of replies (tool calls, then an
answer) for ``FunctionAgent`` and ``AgentWorkflow``, and a ``MockLLM`` writing ReAct text for
``ReActAgent``. Since every tool call's query names one country, a step holding another step's
contexts names the wrong country: the checks below fail on a wrong step, a wrong order or a
lost error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import FunctionTool, QueryEngineTool, RetrieverTool
from llamaindex_fakes import HashEmbedding
from pydantic import PrivateAttr

from ragbridge.adapters.llamaindex import (
    acapture_agent_runs,
    capture_agent_conversations,
    capture_agent_runs,
)
from ragbridge.core import Sample, Turn
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
}

# Building any agent workflow walks its members with inspect.getmembers, which touches pydantic's
# deprecated attributes: LlamaIndex's warnings, not this code's.
# ReActAgent asks ``ctx.is_running`` inside its own step, which workflows now deprecates.
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect"),
    pytest.mark.filterwarnings("ignore:is_running called from within a step:DeprecationWarning"),
]

Call = tuple[str, dict[str, Any], str]  # tool name, arguments, call id
Reply = list[Call] | str  # tool calls, or the final answer


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [Document(text=body, id_=doc_id) for doc_id, body in TOPICS.items()]
    return VectorStoreIndex.from_documents(documents, embed_model=HashEmbedding(model_name="h"))


def scripted_llm(scripts: dict[str, Sequence[Reply]]) -> MockFunctionCallingLLM:
    """A function-calling model that answers each question (the last user message) with its
    script: the k-th reply once it has made k of its own tool-call replies. Stateless, so
    concurrent runs do not disturb each other; a reply ``"RAISE"`` raises."""
    own_ids = {
        call[2]
        for script in scripts.values()
        for reply in script
        if not isinstance(reply, str)
        for call in reply
    }

    def reply(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        question = next(m.content for m in reversed(messages) if m.role == "user")
        script = next(s for q, s in scripts.items() if q in (question or ""))
        made = sum(
            1
            for m in messages
            if m.role == "assistant"
            and any(isinstance(b, ToolCallBlock) and b.tool_call_id in own_ids for b in m.blocks)
        )
        item = script[made]
        if item == "RAISE":
            raise RuntimeError("model unavailable")
        if isinstance(item, str):
            return ChatMessage(role="assistant", content=item)
        blocks = [ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=a) for n, a, i in item]
        return ChatMessage(role="assistant", blocks=blocks)

    return MockFunctionCallingLLM(response_generator=reply)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def explode(text: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot handle {text}")


def tools(index: VectorStoreIndex) -> list[Any]:
    retriever = index.as_retriever(similarity_top_k=1)

    def lookup(topic: str) -> str:
        """Look a topic up and return the passage's text (the nodes are not returned)."""
        return "\n".join(n.get_content() for n in retriever.retrieve(topic))

    async def slow_lookup(topic: str, delay: float) -> str:
        """Look a topic up after ``delay`` seconds."""
        await asyncio.sleep(delay)
        return "\n".join(n.get_content() for n in await retriever.aretrieve(topic))

    return [
        RetrieverTool.from_defaults(retriever, name="search", description="Search the documents."),
        FunctionTool.from_defaults(lookup),
        FunctionTool.from_defaults(async_fn=slow_lookup, name="slow_lookup"),
        FunctionTool.from_defaults(add),
        FunctionTool.from_defaults(explode),
    ]


def ids(contexts: Sequence[Any]) -> list[str | None]:
    return [c.id for c in contexts]


def untimed(steps: Sequence[Step]) -> list[Step]:
    """Steps without their wall times: what two runs of one script agree on."""
    return [s.model_copy(update={"latency_s": None}) for s in steps]


TWO_SEARCHES: list[Reply] = [
    [("search", {"input": "capital of France Paris"}, "c1")],
    [("search", {"input": "capital of Germany Berlin"}, "c2"), ("add", {"a": 2, "b": 3}, "c3")],
    "Paris and Berlin; 5.",
]


def test_function_agent_two_retrievals_and_a_tool_each_step_its_own(index: Any) -> None:
    question = "Which capitals, and what is 2 + 3?"
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: TWO_SEARCHES}))
    expected = [ToolCall(name="search", args={"input": "capital of France Paris"})]
    given = Sample(id="q1", question=question, reference="Paris, Berlin, 5")
    given = given.model_copy(update={"reference_tool_calls": expected})

    [sample] = capture_agent_runs(agent, [given])

    steps = sample.trajectory
    assert steps is not None
    assert [(s.name, s.args, s.id) for s in steps] == [
        ("search", {"input": "capital of France Paris"}, "c1"),
        ("search", {"input": "capital of Germany Berlin"}, "c2"),
        ("add", {"a": 2, "b": 3}, "c3"),
    ]
    assert [ids(s.contexts) for s in steps] == [["france"], ["germany"], []]
    assert "Paris" in (steps[0].output or "")
    assert "Berlin" in (steps[1].output or "")
    assert steps[2].output == "5"
    assert all(s.error is None for s in steps)
    assert all(s.latency_s is not None and s.latency_s >= 0 for s in steps)
    assert steps[0].metadata["agent"] == "Agent"
    assert steps[0].contexts[0].metadata["node_id"]  # node ids kept beside document ids
    # The sample: every retrieval's contexts once, the answer, the inputs' labels kept.
    assert ids(sample.contexts) == ["france", "germany"]
    assert sample.answer == "Paris and Berlin; 5."
    assert sample.reference == "Paris, Berlin, 5"
    assert sample.reference_tool_calls == expected
    assert sample.metadata["steps"] == 3
    assert "error" not in sample.metadata


def test_a_function_calling_a_retriever_gets_the_nodes_retrieved_under_its_own_call(
    index: Any,
) -> None:
    # Two lookups in one reply, and two questions run at once with the SAME call ids: each
    # step's contexts must come from its own call's span, not from a call id or from timing.
    scripts: dict[str, Sequence[Reply]] = {
        "first question": [
            [
                ("lookup", {"topic": "Rome Italy"}, "c1"),
                ("lookup", {"topic": "Madrid Spain"}, "c2"),
            ],
            "Rome and Madrid.",
        ],
        "second question": [
            [
                ("lookup", {"topic": "Berlin Germany"}, "c1"),
                ("lookup", {"topic": "Paris France"}, "c2"),
            ],
            "Berlin and Paris.",
        ],
    }
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm(scripts))

    first, second = capture_agent_runs(
        agent, ["first question", "second question"], max_concurrency=2
    )

    assert first.trajectory is not None
    assert second.trajectory is not None
    assert [ids(s.contexts) for s in first.trajectory] == [["italy"], ["spain"]]
    assert [ids(s.contexts) for s in second.trajectory] == [["germany"], ["france"]]
    assert first.trajectory[0].metadata["retrievals"] == 1
    assert first.trajectory[0].metadata["retrieval_query"] == "Rome Italy"
    assert ids(second.contexts) == ["germany", "france"]
    assert (first.id, second.id) == ("0", "1")


def test_parallel_calls_finishing_out_of_order_keep_the_models_order(index: Any) -> None:
    # The first call of one reply finishes last: its result comes second in the stream, yet it
    # stays the first step, with its own output, contexts and (longer) time.
    question = "Slow first, fast second."
    reply: list[Call] = [
        ("slow_lookup", {"topic": "Paris France", "delay": 0.3}, "s1"),
        ("slow_lookup", {"topic": "Madrid Spain", "delay": 0.0}, "s2"),
    ]
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: [reply, "ok"]}))

    [sample] = capture_agent_runs(agent, [question])

    steps = sample.trajectory
    assert steps is not None
    assert [(s.id, ids(s.contexts)) for s in steps] == [("s1", ["france"]), ("s2", ["spain"])]
    assert "Paris" in (steps[0].output or "")
    assert "Madrid" in (steps[1].output or "")
    assert steps[0].latency_s is not None
    assert steps[1].latency_s is not None
    assert steps[0].latency_s >= 0.3 > steps[1].latency_s


def test_a_passage_retrieved_twice_is_one_context_of_the_sample(index: Any) -> None:
    question = "Search France twice."
    script: list[Reply] = [
        [("search", {"input": "Paris France"}, "d1")],
        [("lookup", {"topic": "Eiffel tower Paris"}, "d2")],
        "Paris.",
    ]
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: script}))

    [sample] = capture_agent_runs(agent, [question])

    assert sample.trajectory is not None
    assert [ids(s.contexts) for s in sample.trajectory] == [["france"], ["france"]]
    assert ids(sample.contexts) == ["france"]


def test_errors_are_kept_per_step_and_the_run_goes_on(index: Any) -> None:
    question = "Try the broken tools."
    script: list[Reply] = [
        [("explode", {"text": "this"}, "e1")],
        [("missing_tool", {}, "e2")],
        [("search", {"input": "capital of Spain Madrid"}, "e3")],
        "Madrid.",
    ]
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: script}))

    [sample] = capture_agent_runs(agent, [question])

    steps = sample.trajectory
    assert steps is not None
    assert [s.name for s in steps] == ["explode", "missing_tool", "search"]
    assert steps[0].error == "ValueError: cannot handle this"
    assert steps[1].error is not None
    assert "missing_tool not found" in steps[1].error
    assert steps[2].error is None
    assert ids(steps[2].contexts) == ["spain"]
    assert sample.answer == "Madrid."
    assert "error" not in sample.metadata


def test_a_run_that_fails_keeps_the_steps_made_before_it(index: Any) -> None:
    question = "The model breaks after one search."
    script: list[Reply] = [[("search", {"input": "capital of Italy Rome"}, "f1")], "RAISE"]
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: script}))

    [sample] = capture_agent_runs(agent, [question])

    assert sample.answer is None
    assert "model unavailable" in sample.metadata["error"]
    assert sample.trajectory is not None
    assert [(s.name, ids(s.contexts)) for s in sample.trajectory] == [("search", ["italy"])]


def test_max_iterations_reaches_the_agent_and_progress_is_reported(index: Any) -> None:
    question = "Which capitals, and what is 2 + 3?"
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: TWO_SEARCHES}))
    ticks: list[tuple[int, int]] = []

    [sample] = capture_agent_runs(
        agent, [question], max_iterations=2, progress=lambda d, n: ticks.append((d, n))
    )

    assert "Max iterations of 2 reached" in sample.metadata["error"]
    assert sample.trajectory is not None
    # The second reply's calls were asked for, then the run stopped before making them.
    assert [(s.id, s.output is None) for s in sample.trajectory] == [
        ("c1", False),
        ("c2", True),
        ("c3", True),
    ]
    assert ids(sample.contexts) == ["france"]
    assert ticks == [(1, 1)]
    [conversation] = capture_agent_conversations(agent, [question], max_iterations=2)
    roles = ["user", "assistant", "tool", "assistant", "assistant"]
    assert [t.role for t in conversation.turns] == roles
    back = conversation.turn_sample(4).trajectory
    assert back is not None
    assert untimed(back) == untimed(sample.trajectory)


class ReActScript(MockLLM):
    """A completion model writing ReAct text: the k-th reply once k observations are in the
    prompt (beyond those the ReAct instructions themselves show, counted on the first call)."""

    _replies: list[str] = PrivateAttr(default_factory=list)
    _base: int | None = PrivateAttr(default=None)

    @classmethod
    def make(cls, *replies: str) -> ReActScript:
        llm = cls()
        llm._replies = list(replies)
        return llm

    def _next(self, prompt: str) -> str:
        seen = prompt.count("Observation:")
        if self._base is None:
            self._base = seen
        return self._replies[seen - self._base]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._next(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        text = self._next(prompt)

        def gen() -> Any:
            yield CompletionResponse(text=text, delta=text)

        return gen()


def test_react_agent_steps_from_its_text(index: Any) -> None:
    llm = ReActScript.make(
        'Thought: I need the documents.\nAction: search\nAction Input: {"input": "Madrid"}',
        'Thought: Now Italy.\nAction: lookup\nAction Input: {"topic": "Rome Italy capital"}',
        "Thought: I can answer without more tools.\nAnswer: Madrid and Rome.",
    )
    agent = ReActAgent(tools=tools(index), llm=llm)

    [conversation] = capture_agent_conversations(agent, ["Capitals of Spain and Italy?"])
    [sample] = capture_agent_runs(agent, ["Capitals of Spain and Italy?"])

    steps = sample.trajectory
    assert steps is not None
    assert [(s.name, s.args, ids(s.contexts)) for s in steps] == [
        ("search", {"input": "Madrid"}, ["spain"]),
        ("lookup", {"topic": "Rome Italy capital"}, ["italy"]),
    ]
    assert all(s.id for s in steps)
    assert steps[0].id != steps[1].id
    assert sample.answer == "Madrid and Rome."
    roles = [t.role for t in conversation.turns]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert (conversation.turns[1].content or "").startswith("Thought: I need the documents.")


def test_agent_workflow_handoff_then_retrieval(index: Any) -> None:
    question = "Route me to the capital of Germany."
    router = FunctionAgent(
        name="router",
        description="Routes questions.",
        tools=[add],
        llm=scripted_llm(
            {question: [[("handoff", {"to_agent": "researcher", "reason": "docs"}, "h1")], "-"]}
        ),
        can_handoff_to=["researcher"],
    )
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=1)
    researcher = FunctionAgent(
        name="researcher",
        description="Reads the documents.",
        tools=[QueryEngineTool.from_defaults(engine, name="ask_docs", description="Ask.")],
        llm=scripted_llm(
            {question: [[("ask_docs", {"input": "Berlin capital Germany"}, "r1")], "Berlin."]}
        ),
    )
    workflow = AgentWorkflow(agents=[router, researcher], root_agent="router")

    [sample] = capture_agent_runs(workflow, [question])

    steps = sample.trajectory
    assert steps is not None
    assert [(s.name, s.metadata["agent"], ids(s.contexts)) for s in steps] == [
        ("handoff", "router", []),
        ("ask_docs", "researcher", ["germany"]),
    ]
    assert sample.answer == "Berlin."
    assert sample.metadata["agents"] == ["router", "researcher"]
    assert ids(sample.contexts) == ["germany"]


def test_conversation_form_gives_the_same_trajectory_back(index: Any) -> None:
    question = "Which capitals, and what is 2 + 3?"
    agent = FunctionAgent(tools=tools(index), llm=scripted_llm({question: TWO_SEARCHES}))
    expected = [ToolCall(name="add", args={"a": 2, "b": 3})]
    given = Sample(id="q1", question=question, reference="Paris", reference_tool_calls=expected)

    [conversation] = capture_agent_conversations(agent, [given])
    [sample] = capture_agent_runs(agent, [given])

    turns = conversation.turns
    roles = ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert [t.role for t in turns] == roles
    assert [c.id for c in turns[3].tool_calls] == ["c2", "c3"]  # one reply, two calls
    assert ids(turns[2].contexts) == ["france"]
    assert ids(turns[4].contexts) == ["germany"]
    assert turns[2].metadata["latency_s"] >= 0
    last = conversation.turn_sample(len(turns) - 1)
    assert last.trajectory is not None
    assert sample.trajectory is not None
    # The same steps as the sample form (timings differ between the two runs: compared apart).
    assert untimed(last.trajectory) == untimed(sample.trajectory)
    assert [s.latency_s for s in last.trajectory] == [
        turns[i].metadata["latency_s"] for i in (2, 4, 5)
    ]
    assert last.reference_tool_calls == expected
    assert last.reference == "Paris"
    assert last.answer == sample.answer
    assert ids(last.contexts) == ids(sample.contexts)


def test_a_samples_history_is_the_agents_chat_history(index: Any) -> None:
    seen: list[list[str]] = []

    def reply(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append([f"{m.role.value}: {m.content}" for m in messages])
        return ChatMessage(role="assistant", content="It is Berlin.")

    history = [
        Turn(role="user", content="Let us talk about Germany."),
        Turn(role="assistant", content="Gladly."),
    ]
    given = Sample(id="h", question="What is its capital?", history=history)
    agent = FunctionAgent(tools=[add], llm=MockFunctionCallingLLM(response_generator=reply))

    [conversation] = capture_agent_conversations(agent, [given])

    assert seen == [
        [
            "user: Let us talk about Germany.",
            "assistant: Gladly.",
            "user: What is its capital?",
        ]
    ]
    assert conversation.turns[:2] == history
    assert conversation.turn_sample(3).answer == "It is Berlin."
    [sample] = capture_agent_runs(agent, [given])
    assert sample.trajectory == []  # an agent's sample, with no steps (None: no agent's)


def test_nodes_a_function_returns_are_its_contexts(index: Any) -> None:
    def passages(topic: str) -> list[NodeWithScore]:
        """Return nodes directly."""
        return [NodeWithScore(node=TextNode(text=f"About {topic}.", id_=f"n-{topic}"), score=0.5)]

    question = "Give me nodes."
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(passages)],
        llm=scripted_llm({question: [[("passages", {"topic": "x"}, "p1")], "done"]}),
    )

    [sample] = asyncio.run(acapture_agent_runs(agent, [question]))

    assert sample.trajectory is not None
    [step] = sample.trajectory
    assert [(c.id, c.text, c.score) for c in step.contexts] == [("n-x", "About x.", 0.5)]


def test_what_is_not_an_agent_is_refused_before_running(index: Any) -> None:
    with pytest.raises(TypeError, match="run_query_engine"):
        capture_agent_runs(index.as_query_engine(llm=MockLLM()), ["q"])
    with pytest.raises(ValueError, match="max_concurrency"):
        capture_agent_runs(
            FunctionAgent(tools=[add], llm=scripted_llm({})), ["q"], max_concurrency=0
        )
