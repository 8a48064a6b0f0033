"""LangSmith trace trees become agent trajectories, and agentevals' evaluators are scored by
ragbridge.

Offline, against the real langsmith package: an agent's trace is a live ``RunTree`` (a root
chain with a ``messages`` input, ``llm`` steps, LangGraph-style ``tools`` chains holding
``tool`` runs, a retriever tool's ``retriever`` run nested one and two levels below its tool
run, a plain tool, a tool that fails), the same runs flattened into ``schemas.Run`` objects as
``list_runs`` yields them, an export written to JSONL, and a real LangGraph ReAct agent (with a
fake chat model) traced into an offline client. The evaluators are compared with agentevals'
own on the same inputs.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
import warnings
from copy import deepcopy
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

import langsmith
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langsmith.run_trees import RunTree
from langsmith.schemas import Example, Run

from ragbridge.adapters.langsmith import (
    TRAJECTORY_ACCURACY_PROMPT,
    conversation_from_trace,
    create_async_trajectory_llm_as_judge,
    create_async_trajectory_match_evaluator,
    create_trajectory_llm_as_judge,
    create_trajectory_match_evaluator,
    load_runs,
    offline_client,
    sample_from_trace,
    samples_from_traces,
    trajectory_from_run,
)
from ragbridge.core.testing import ScriptedJudge
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)

DOCS = {
    "p1": "Full-time staff get 25 days of annual leave.",
    "p2": "Part-time staff get leave pro rata to their hours.",
    "x1": "Leave requests go through the HR portal.",
}
QUESTION = "How much leave do part-timers get compared with full-timers?"
ANSWER = "Full-timers get 25 days; part-timers get leave pro rata."


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A traced call that tries to reach the API offline can delay exit by minutes.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")


# --------------------------------------------------------------------------- the trace


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _docs(*ids: str) -> dict[str, Any]:
    return {"documents": [Document(id=i, page_content=DOCS[i]) for i in ids]}


def _agent_trace() -> RunTree:
    """An agent that searched twice and called two other tools, traced as LangGraph does.

    agent (chain, messages in and out)
    ├─ model (llm)                                   t=1
    ├─ tools (chain)                                 t=2
    │  └─ search_policies (tool, call c1)            t=2.1 .. 2.6
    │     └─ kb (retriever: p1, x1)                  t=2.2 .. 2.4
    ├─ model (llm)                                   t=3
    ├─ tools (chain)                                 t=4
    │  ├─ branch (chain)                             t=4.05 (starts before calculator ...)
    │  │  └─ search_policies (tool, call c3)         t=4.2 .. 4.9 (... its tool after it)
    │  │     └─ rerank (chain)
    │  │        └─ kb (retriever: p2, p1)            t=4.4
    │  │           └─ kb_inner (retriever: x1)       t=4.5 (inside the outer search: no step)
    │  └─ calculator (tool, call c2)                 t=4.1 .. 4.15
    ├─ lookup_employee (tool, fails)                 t=5 .. 5.25
    └─ model (llm)                                   t=6
    """
    root = RunTree(
        name="agent",
        run_type="chain",
        inputs={"messages": [{"role": "user", "content": QUESTION}]},
        start_time=T0,
        ls_client=offline_client(),
    )
    root.create_child(name="model", run_type="llm", inputs={}, start_time=_at(1)).end(
        outputs={"text": "calls search"}, end_time=_at(1.5)
    )
    tools = root.create_child(name="tools", run_type="chain", inputs={}, start_time=_at(2))
    first = tools.create_child(
        name="search_policies",
        run_type="tool",
        inputs={"query": "annual leave"},
        extra={"tool_call_id": "c1"},
        start_time=_at(2.1),
    )
    kb = first.create_child(
        name="kb", run_type="retriever", inputs={"query": "annual leave"}, start_time=_at(2.2)
    )
    kb.end(outputs=_docs("p1", "x1"), end_time=_at(2.4))
    first.end(
        outputs={"output": ToolMessage(content=f"{DOCS['p1']}\n{DOCS['x1']}", tool_call_id="c1")},
        end_time=_at(2.6),
    )
    tools.end(outputs={}, end_time=_at(2.7))
    root.create_child(name="model", run_type="llm", inputs={}, start_time=_at(3)).end(
        outputs={"text": "calls two tools"}, end_time=_at(3.5)
    )
    tools2 = root.create_child(name="tools", run_type="chain", inputs={}, start_time=_at(4))
    branch = tools2.create_child(name="branch", run_type="chain", inputs={}, start_time=_at(4.05))
    second = branch.create_child(
        name="search_policies",
        run_type="tool",
        inputs={"query": "part-time leave"},
        extra={"tool_call_id": "c3"},
        start_time=_at(4.2),
    )
    rerank = second.create_child(name="rerank", run_type="chain", inputs={}, start_time=_at(4.3))
    outer = rerank.create_child(
        name="kb", run_type="retriever", inputs={"query": "part-time leave"}, start_time=_at(4.4)
    )
    inner = outer.create_child(
        name="kb_inner", run_type="retriever", inputs={"query": "x"}, start_time=_at(4.5)
    )
    inner.end(outputs=_docs("x1"), end_time=_at(4.55))
    outer.end(outputs=_docs("p2", "p1"), end_time=_at(4.6))
    rerank.end(outputs={}, end_time=_at(4.7))
    second.end(outputs={"output": f"{DOCS['p2']}\n{DOCS['p1']}"}, end_time=_at(4.9))
    branch.end(outputs={}, end_time=_at(4.95))
    calc = tools2.create_child(
        name="calculator",
        run_type="tool",
        inputs={"expression": "25 * 0.5"},
        extra={"tool_call_id": "c2"},
        start_time=_at(4.1),
    )
    calc.end(outputs={"output": "12.5"}, end_time=_at(4.15))
    tools2.end(outputs={}, end_time=_at(5))
    failed = root.create_child(
        name="lookup_employee", run_type="tool", inputs={"name": "Ada"}, start_time=_at(5)
    )
    failed.end(
        error="KeyError('Ada')Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'Ada'",
        end_time=_at(5.25),
    )
    root.create_child(name="model", run_type="llm", inputs={}, start_time=_at(6)).end(
        outputs={"text": ANSWER}, end_time=_at(6.5)
    )
    root.end(
        outputs={
            "messages": [
                HumanMessage(QUESTION),
                AIMessage(
                    "",
                    tool_calls=[{"name": "search_policies", "args": {"query": "x"}, "id": "c1"}],
                ),
                ToolMessage("...", tool_call_id="c1"),
                AIMessage(ANSWER),
            ]
        },
        end_time=_at(7),
    )
    return root


EXPECTED = [
    ("search_policies", {"query": "annual leave"}, "c1", ["p1", "x1"], None),
    ("calculator", {"expression": "25 * 0.5"}, "c2", [], None),
    ("search_policies", {"query": "part-time leave"}, "c3", ["p2", "p1"], None),
    ("lookup_employee", {"name": "Ada"}, None, [], "KeyError('Ada')"),
]


def _shape(steps: list[Step]) -> list[tuple[Any, ...]]:
    return [(s.name, s.args, s.id, [c.id for c in s.contexts], s.error) for s in steps]


def _flat(tree: Any) -> list[Run]:
    """A run tree as flat ``schemas.Run``s linked by ``parent_run_id`` (as list_runs gives)."""
    runs = [
        Run(
            id=tree.id,
            name=tree.name,
            run_type=tree.run_type,
            start_time=tree.start_time,
            end_time=tree.end_time,
            inputs=tree.inputs,
            outputs=tree.outputs,
            error=tree.error,
            extra=tree.extra,
            parent_run_id=tree.parent_run_id,
            trace_id=tree.trace_id,
            dotted_order=tree.dotted_order,
        )
    ]
    for child in tree.child_runs:
        runs.extend(_flat(child))
    return runs


# --------------------------------------------------------------------------- trajectories


def test_tool_and_retriever_runs_at_any_depth_are_steps_in_execution_order() -> None:
    steps = trajectory_from_run(_agent_trace())
    assert _shape(steps) == EXPECTED
    search, calc, search2, failed = steps
    assert search.output == f"{DOCS['p1']}\n{DOCS['x1']}"  # the ToolMessage's content
    assert search.contexts[0].text == DOCS["p1"]
    assert calc.output == "12.5"
    assert search2.output == f"{DOCS['p2']}\n{DOCS['p1']}"
    assert failed.output is None
    assert [s.latency_s for s in steps] == pytest.approx([0.5, 0.05, 0.7, 0.25])
    info = search2.metadata["langsmith"]
    assert info["run_type"] == "tool"
    assert [r["name"] for r in info["retriever_runs"]] == ["kb"]  # kb_inner is inside kb


def test_a_trace_as_an_agent_sample() -> None:
    sample = sample_from_trace(_agent_trace())
    assert sample.question == QUESTION
    assert sample.answer == ANSWER
    assert sample.trajectory is not None
    assert _shape(sample.trajectory) == EXPECTED
    # every retrieval of the trajectory, each passage once, in step then rank order
    assert [c.id for c in sample.contexts] == ["p1", "x1", "p2"]
    assert sample.reference_tool_calls is None
    assert len(sample.metadata["langsmith"]["step_runs"]) == 4


def test_flat_runs_and_an_export_read_as_the_live_tree() -> None:
    tree = _agent_trace()
    runs = _flat(tree)
    live = sample_from_trace(tree)
    (flat,) = samples_from_traces(list(reversed(runs)))
    assert flat.trajectory == live.trajectory
    assert flat.contexts == live.contexts


def test_an_exported_jsonl_with_serialised_messages(tmp_path: Path) -> None:
    def record(run: Run) -> dict[str, Any]:
        data = json.loads(run.model_dump_json())
        data.pop("child_runs", None)
        return data

    records = [record(r) for r in _flat(_agent_trace())]
    for data in records:  # the tool message in LangChain's serialised-constructor form
        output = (data.get("outputs") or {}).get("output")
        if isinstance(output, dict) and output.get("type") == "tool":
            data["outputs"]["output"] = {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "ToolMessage"],
                "kwargs": {"content": output["content"], "tool_call_id": "c1"},
            }
            data["extra"] = {}  # the call id is then only in the message
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    (sample,) = samples_from_traces(load_runs(path))
    assert sample.trajectory is not None
    assert _shape(sample.trajectory) == EXPECTED
    assert sample.trajectory[0].output == f"{DOCS['p1']}\n{DOCS['x1']}"


def test_a_retriever_outside_any_tool_is_a_step_of_its_own() -> None:
    root = RunTree(
        name="rag",
        run_type="chain",
        inputs={"question": "q?"},
        start_time=T0,
        ls_client=offline_client(),
    )
    kb = root.create_child(
        name="kb", run_type="retriever", inputs={"query": "q"}, start_time=_at(1)
    )
    kb.end(outputs=_docs("p2"), end_time=_at(2))
    broken = root.create_child(
        name="kb", run_type="retriever", inputs={"query": "r"}, start_time=_at(3)
    )
    broken.end(error="TimeoutError()", end_time=_at(4))
    root.end(outputs={"answer": "a"}, end_time=_at(5))
    sample = sample_from_trace(root)
    assert sample.trajectory is not None
    first, second = sample.trajectory
    assert (first.name, first.args, first.output, [c.id for c in first.contexts]) == (
        "kb",
        {"query": "q"},
        None,
        ["p2"],
    )
    assert (second.contexts, second.error) == ([], "TimeoutError()")
    assert second.metadata["langsmith"]["failed_retriever_runs"][0]["error"] == "TimeoutError()"
    assert [c.id for c in sample.contexts] == ["p2"]
    assert sample.answer == "a"


def test_selectors_pick_the_steps() -> None:
    tree = _agent_trace()
    only_search = trajectory_from_run(tree, tool="search_policies")
    assert [s.id for s in only_search] == ["c1", "c3"]
    # a tool whose own outputs are the documents: picked as both tool and retriever
    root = RunTree(
        name="agent", run_type="chain", inputs={"question": QUESTION}, ls_client=offline_client()
    )
    docs_tool = root.create_child(name="find_docs", run_type="tool", inputs={"query": "leave"})
    docs_tool.end(outputs={"output": [{"page_content": DOCS["p2"], "metadata": {"id": "p2"}}]})
    root.end(outputs={"answer": ANSWER})
    (plain,) = trajectory_from_run(root)
    (as_docs,) = trajectory_from_run(root, retriever="find_docs")
    assert (plain.contexts, plain.output is not None) == ([], True)
    assert [c.id for c in as_docs.contexts] == ["p2"]
    with pytest.raises(ValueError, match="tool='serch' names no run"):
        samples_from_traces([tree], tool="serch")
    with pytest.raises(TypeError, match="unexpected keyword"):
        samples_from_traces([tree], sample_id="x")  # type: ignore[call-arg]


def test_an_example_gives_the_reference_calls_and_outcome() -> None:
    tree = _agent_trace()
    reference = {
        "id": str(uuid.uuid4()),
        "outputs": {
            "messages": [
                {"role": "user", "content": QUESTION},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "r1",
                            "type": "function",
                            "function": {
                                "name": "search_policies",
                                "arguments": json.dumps({"query": "annual leave"}),
                            },
                        }
                    ],
                },
                {"role": "tool", "content": "...", "tool_call_id": "r1"},
                {"role": "assistant", "content": ANSWER},
            ]
        },
    }
    sample = sample_from_trace(tree, reference)
    assert sample.id == reference["id"]
    assert sample.reference_tool_calls == [
        ToolCall(name="search_policies", args={"query": "annual leave"}, id="r1")
    ]
    assert sample.reference == ANSWER
    explicit = {"outputs": {"reference_tool_calls": [], "answer": "25 days"}}
    other = sample_from_trace(tree, explicit)
    assert (other.reference_tool_calls, other.reference) == ([], "25 days")


def test_the_conversation_form_gives_back_the_trajectory() -> None:
    tree = _agent_trace()
    conversation = conversation_from_trace(tree)
    roles = [t.role for t in conversation.turns]
    assert roles == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    last = conversation.turn_sample(len(conversation.turns) - 1)
    steps = sample_from_trace(tree).trajectory
    assert steps is not None
    assert last.trajectory is not None
    # the failed step had no call id: the conversation names it by its run id
    assert last.trajectory[:3] == steps[:3]
    assert last.trajectory[3] == steps[3].model_copy(
        update={"id": steps[3].metadata["langsmith"]["run_id"]}
    )
    assert conversation.turns[8].metadata["error"] == "KeyError('Ada')"
    assert last.answer == ANSWER


# --------------------------------------------------------------------------- a real agent


@pytest.fixture
def langgraph_trace() -> list[dict[str, Any]]:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import tool
    from langchain_core.tracers.langchain import LangChainTracer

    class ToolCallingFake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    found = {"annual leave": ["p1"], "part-time leave": ["p2", "p1"]}

    class Handbook(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> Any:
            return [Document(id=i, page_content=DOCS[i]) for i in found[query]]

    handbook = Handbook()

    @tool
    def search_policies(query: str) -> str:
        """Search the staff handbook."""
        return "\n".join(d.page_content for d in handbook.invoke(query))

    model = ToolCallingFake(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "search_policies", "args": {"query": "annual leave"}, "id": "c1"}
                    ],
                ),
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "search_policies",
                            "args": {"query": "part-time leave"},
                            "id": "c2",
                        }
                    ],
                ),
                AIMessage(ANSWER),
            ]
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(model, [search_policies])
    client = offline_client()
    tracer = LangChainTracer(client=client, project_name="agents")
    agent.invoke(
        {"messages": [{"role": "user", "content": QUESTION}]}, config={"callbacks": [tracer]}
    )
    tracer.wait_for_futures()
    return client.recorded_runs()


def test_a_langgraph_agent_traced_offline(langgraph_trace: list[dict[str, Any]]) -> None:
    (sample,) = samples_from_traces(langgraph_trace)
    assert sample.question == QUESTION
    assert sample.answer == ANSWER
    assert sample.trajectory is not None
    assert [(s.name, s.args, s.id) for s in sample.trajectory] == [
        ("search_policies", {"query": "annual leave"}, "c1"),
        ("search_policies", {"query": "part-time leave"}, "c2"),
    ]
    assert [[c.id for c in s.contexts] for s in sample.trajectory] == [["p1"], ["p2", "p1"]]
    assert sample.trajectory[1].output == f"{DOCS['p2']}\n{DOCS['p1']}"
    assert [c.id for c in sample.contexts] == ["p1", "p2"]


# --------------------------------------------------------------------------- agentevals' evaluators

MODES = ("strict", "unordered", "subset", "superset")
ARG_MODES = ("exact", "ignore", "subset", "superset")
TOOLS = ("search_policies", "calculator", "lookup_employee")


def _openai_call(name: str, args: dict[str, Any], call_id: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    if call_id is not None:
        call["id"] = call_id
    return call


def _as_messages(groups: list[list[tuple[str, dict[str, Any]]]], style: str, rng: Any) -> Any:
    """Call groups (one assistant message each, answered by tool messages) as a trajectory in
    one of the shapes agentevals takes: OpenAI dicts, LangChain messages, {"messages": [...]}."""
    n = 0
    openai: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    lc: list[Any] = [HumanMessage(QUESTION)]
    for group in groups:
        ids = [f"call_{n + i}" for i in range(len(group))]
        n += len(group)
        with_ids = rng.random() < 0.8
        openai.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _openai_call(t, a, i if with_ids else None)
                    for (t, a), i in zip(group, ids, strict=True)
                ],
            }
        )
        lc.append(
            AIMessage(
                "",
                tool_calls=[
                    {"name": t, "args": a, "id": i} for (t, a), i in zip(group, ids, strict=True)
                ],
            )
        )
        for (tool_name, _), i in zip(group, ids, strict=True):
            tool_msg: dict[str, Any] = {"role": "tool", "content": f"{tool_name} ok"}
            if with_ids:
                tool_msg["tool_call_id"] = i
            openai.append(tool_msg)
            lc.append(ToolMessage(f"{tool_name} ok", tool_call_id=i))
    openai.append({"role": "assistant", "content": ANSWER})
    lc.append(AIMessage(ANSWER))
    if style == "langchain":
        return lc
    if style == "dict":
        return {"messages": openai}
    return openai


def _random_args(rng: Any) -> dict[str, Any]:
    keys = rng.sample(["query", "k", "filters", "flag"], rng.randint(0, 3))
    values: dict[str, Any] = {
        "query": rng.choice(["annual leave", "part-time leave", "expenses"]),
        "k": rng.choice([1, 3, 1.0, True]),
        "filters": rng.choice([{"year": 2025}, {"year": 2024, "team": "hr"}, [1, 2]]),
        "flag": rng.choice([False, None, "yes"]),
    }
    return {key: values[key] for key in keys}


def _perturbed(
    groups: list[list[tuple[str, dict[str, Any]]]], rng: Any
) -> list[list[tuple[str, dict[str, Any]]]]:
    """A reference near ``groups``: a call dropped, added, changed, groups merged or swapped."""
    out = [list(g) for g in groups]
    for _ in range(rng.randint(0, 2)):
        what = rng.randrange(6)
        flat = [(i, j) for i, g in enumerate(out) for j in range(len(g))]
        if what == 0 and flat:
            i, j = rng.choice(flat)
            del out[i][j]
            out = [g for g in out if g]
        elif what == 1:
            out.insert(rng.randint(0, len(out)), [(rng.choice(TOOLS), _random_args(rng))])
        elif what == 2 and flat:
            i, j = rng.choice(flat)
            name, args = out[i][j]
            changed = dict(args)
            if changed and rng.random() < 0.5:
                changed.pop(rng.choice(sorted(changed)))
            else:
                changed["query"] = rng.choice(["annual leave", "bonus"])
            out[i][j] = (name, changed)
        elif what == 3 and len(out) > 1:
            i = rng.randrange(len(out) - 1)
            out[i : i + 2] = [out[i] + out[i + 1]]
        elif what == 4 and len(out) > 1:
            i, j = rng.sample(range(len(out)), 2)
            out[i], out[j] = out[j], out[i]
        elif what == 5 and flat:
            i, j = rng.choice(flat)
            out[i][j] = (rng.choice(TOOLS), out[i][j][1])
    return out


def _trajectory_pairs(count: int, seed: int) -> list[tuple[Any, Any]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        groups = [
            [(rng.choice(TOOLS), _random_args(rng)) for _ in range(rng.choice([1, 1, 1, 2]))]
            for _ in range(rng.randint(0, 3))
        ]
        reference = _perturbed(groups, rng)
        pairs.append(
            (
                _as_messages(groups, rng.choice(["openai", "langchain", "dict"]), rng),
                _as_messages(reference, rng.choice(["openai", "langchain", "dict"]), rng),
            )
        )
    return pairs


def _query_only(args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
    return bool(args.get("query") == reference_args.get("query"))


OVERRIDES: list[Any] = [
    None,
    {"search_policies": "ignore"},
    {"calculator": ["k", "filters.year"], "lookup_employee": "superset"},
    {"search_policies": _query_only},
]


@pytest.mark.parametrize("overrides", range(len(OVERRIDES)))
def test_match_evaluators_equal_agentevals(overrides: int) -> None:
    agentevals = pytest.importorskip("agentevals.trajectory.match")
    pairs = _trajectory_pairs(40, seed=32 + overrides)
    seen: set[Any] = set()
    for mode in MODES:
        for arg_mode in ARG_MODES:
            kwargs: dict[str, Any] = {
                "trajectory_match_mode": mode,
                "tool_args_match_mode": arg_mode,
                "tool_args_match_overrides": OVERRIDES[overrides],
            }
            ours = create_trajectory_match_evaluator(**kwargs)
            theirs = agentevals.create_trajectory_match_evaluator(**kwargs)
            for outputs, reference in pairs:
                mine = ours(outputs=outputs, reference_outputs=reference)
                # agentevals writes into the dicts it is given: hand it copies
                peer = theirs(outputs=deepcopy(outputs), reference_outputs=deepcopy(reference))
                assert (mine["key"], mine["score"], mine["comment"]) == (
                    peer["key"],
                    peer["score"],
                    peer["comment"],
                ), (mode, arg_mode, outputs, reference)
                seen.add((mode, mine["score"]))
    assert {(m, s) for m in MODES for s in (True, False)} <= seen  # both outcomes, every mode


def test_a_wrong_step_fails_the_match_and_says_where() -> None:
    reference = [
        [("search_policies", {"query": "annual leave"})],
        [("search_policies", {"query": "part-time leave"}), ("calculator", {"k": 2})],
    ]
    rng = random.Random(0)
    good = _as_messages(reference, "langchain", rng)
    wrong = [list(g) for g in reference]
    wrong[1][0] = ("search_policies", {"query": "expenses"})
    bad = _as_messages(wrong, "openai", rng)
    ref = _as_messages(reference, "openai", rng)
    strict = create_trajectory_match_evaluator()
    assert strict(outputs=good, reference_outputs=ref)["score"] is True
    result = strict(outputs=bad, reference_outputs=ref)
    assert result["score"] is False
    assert result["metadata"] is not None
    assert result["metadata"]["message"] == 3  # user, assistant, tool, then the wrong message
    # the same calls one per message: strict (message by message) no longer matches
    split = _as_messages([[c] for g in reference for c in g], "openai", rng)
    assert strict(outputs=split, reference_outputs=ref)["score"] is False
    unordered = create_trajectory_match_evaluator(trajectory_match_mode="unordered")
    assert unordered(outputs=split, reference_outputs=ref)["score"] is True
    loose = create_trajectory_match_evaluator(
        trajectory_match_mode="unordered",
        tool_args_match_overrides={"search_policies": "ignore"},
    )
    assert loose(outputs=bad, reference_outputs=ref)["score"] is True


def test_the_ragbridge_compat_finds_a_pairing_agentevals_misses() -> None:
    # the first expected call takes the first call made greedily and leaves the second unpaired
    made = [[("search_policies", {"query": "q", "k": 1}), ("search_policies", {"query": "q"})]]
    expected = [
        [("search_policies", {"query": "q"})],
        [("search_policies", {"query": "q", "k": 1})],
    ]
    rng = random.Random(1)
    outputs, reference = _as_messages(made, "openai", rng), _as_messages(expected, "openai", rng)
    kwargs: dict[str, Any] = {
        "trajectory_match_mode": "superset",
        "tool_args_match_mode": "superset",
    }
    agentevals = pytest.importorskip("agentevals.trajectory.match")
    peer = agentevals.create_trajectory_match_evaluator(**kwargs)
    copies = json.loads(json.dumps([outputs, reference]))  # agentevals writes into its inputs
    assert peer(outputs=copies[0], reference_outputs=copies[1])["score"] is False
    drop_in = create_trajectory_match_evaluator(**kwargs)
    assert drop_in(outputs=outputs, reference_outputs=reference)["score"] is False
    fixed = create_trajectory_match_evaluator(**kwargs, compat="ragbridge")
    assert fixed(outputs=outputs, reference_outputs=reference)["score"] is True


def test_match_evaluator_arguments_are_checked_and_it_runs_in_langsmith_evaluate() -> None:
    with pytest.raises(ValueError, match="trajectory match type"):
        create_trajectory_match_evaluator(trajectory_match_mode="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool args match mode"):
        create_trajectory_match_evaluator(tool_args_match_mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'messages' list"):
        create_trajectory_match_evaluator()(outputs={"answer": "x"}, reference_outputs=[])
    rng = random.Random(2)
    reference = _as_messages([[("search_policies", {"query": "annual leave"})]], "openai", rng)
    made = _as_messages([[("search_policies", {"query": "annual leave"})]], "langchain", rng)

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"messages": made}

    superset = create_trajectory_match_evaluator(trajectory_match_mode="superset")
    results = langsmith.evaluate(
        target,
        data=[
            Example(
                id=uuid.UUID(int=1), inputs={"question": QUESTION}, outputs={"messages": reference}
            )
        ],
        evaluators=[superset],
        upload_results=False,
        client=offline_client(),
    )
    results.wait()
    (row,) = list(results)
    (result,) = row["evaluation_results"]["results"]
    assert (result.key, result.score) == ("trajectory_superset_match", True)
    later = create_async_trajectory_match_evaluator(trajectory_match_mode="subset")
    assert later.__name__ == "trajectory_subset_match"
    got = asyncio.run(later(outputs=made, reference_outputs=[]))
    assert got["score"] is False


# --------------------------------------------------------------------------- the trajectory judge


def _trajectory_block(messages: Any, name: str) -> str:
    user = messages[-1]["content"]
    return user.split(f"<<<BEGIN {name}>>>\n", 1)[1].split(f"\n<<<END {name}>>>", 1)[0]


def test_the_trajectory_judge_reads_the_calls_and_returns_agentevals_shape() -> None:

    def verdict(messages: Any) -> dict[str, Any]:
        shown = _trajectory_block(messages, "ANSWER")
        ok = 'calls search_policies with {"query": "annual leave"}' in shown
        return {"reason": "searches the handbook" if ok else "wrong search", "verdict": ok}

    judge = ScriptedJudge({"criteria.aspect": verdict})
    evaluator = create_trajectory_llm_as_judge(judge=judge)
    assert evaluator.__name__ == "llm_as_trajectory_accuracy_judge"
    rng = random.Random(3)
    reference = _as_messages([[("search_policies", {"query": "annual leave"})]], "openai", rng)
    good = _as_messages([[("search_policies", {"query": "annual leave"})]], "langchain", rng)
    bad = _as_messages([[("search_policies", {"query": "expenses"})]], "dict", rng)
    yes = evaluator(outputs=good, reference_outputs=reference)
    no = evaluator(outputs=bad, reference_outputs=reference)
    assert set(yes) == {"key", "score", "comment", "metadata"}
    assert (yes["key"], yes["score"], yes["comment"]) == (
        "trajectory_accuracy",
        True,
        "searches the handbook",
    )
    assert (no["score"], no["comment"]) == (False, "wrong search")
    call = judge.calls[0].messages
    assert "search_policies returns: search_policies ok" in _trajectory_block(call, "ANSWER")
    assert "annual leave" in _trajectory_block(call, "REFERENCE")
    assert f"user: {QUESTION}" in _trajectory_block(call, "ANSWER")

    # the default prompt compares with a reference: without one, no call and a named reason
    missing = evaluator(outputs=good)
    assert missing["score"] is None
    assert missing["comment"] is not None
    assert "reference_outputs=" in missing["comment"]
    assert len(judge.calls) == 2
    alone = create_trajectory_llm_as_judge(prompt=TRAJECTORY_ACCURACY_PROMPT, judge=judge)
    assert alone(outputs=good)["score"] is True


def test_a_continuous_trajectory_judge_scores_in_0_1() -> None:
    judge = ScriptedJudge({"criteria.score": {"reason": "mostly sensible", "score": 8}})
    evaluator = create_async_trajectory_llm_as_judge(
        judge=judge, continuous=True, evaluation_steps=["Follow the calls."], feedback_key="traj"
    )
    assert evaluator.__name__ == "llm_as_traj_judge"
    messages = _as_messages([[("calculator", {"k": 1})]], "openai", random.Random(4))
    result = asyncio.run(evaluator(outputs=messages, reference_outputs=messages))
    assert (result["key"], result["score"], result["comment"]) == ("traj", 0.8, "mostly sensible")
