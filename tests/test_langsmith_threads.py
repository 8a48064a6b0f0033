"""LangSmith threads become Conversations, and conversations are scored back as feedback.

Offline, against the real langsmith package: traces are live ``RunTree``s (a root chain per
user message, its retriever run nested two levels down under a ``retrieve`` sub-chain, an
``llm`` step), the same runs flattened into ``schemas.Run`` objects as ``list_runs`` yields
them, and a real ``langsmith.Client`` whose HTTP paging is replaced by recorded run dicts.

The scene: thread "A" (``session_id``) has two turns, thread "B" (``thread_id``) one, and one
root run carries no thread metadata. They are handed over out of order, so only the start times
put thread A's turns in order.
"""

from __future__ import annotations

import inspect
import uuid
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langsmith import Client
from langsmith.run_trees import RunTree
from langsmith.schemas import Run

from ragbridge.adapters.langsmith import (
    THREAD_KEYS,
    OfflineClient,
    ThreadEvaluator,
    UnthreadedRunsWarning,
    conversations_from_runs,
    offline_client,
    read_thread_runs,
    read_threads,
    thread_key,
)
from ragbridge.core.conversation import Conversation
from ragbridge.core.testing import ScriptedJudge

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)

DOCS = {
    "p1": "Full-time staff get 25 days of annual leave.",
    "p2": "Part-time staff get leave pro rata to their hours.",
    "p3": "Expense claims are paid within 30 days.",
    "x1": "Leave requests go through the HR portal.",
}


@pytest.fixture(autouse=True)
def _no_tracing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A traced call that tries to reach the API offline can delay exit by minutes.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")


# --------------------------------------------------------------------------- traces


def _turn(
    question: Any,
    answer: Any,
    doc_ids: list[str],
    metadata: dict[str, Any],
    minute: int,
    *,
    retrievers: int = 1,
) -> RunTree:
    """One traced exchange: root chain → retrieve (chain) → kb (retriever), then an llm step.

    ``question`` / ``answer`` are the root's inputs / outputs when they are dicts, else
    ``{"question": ...}`` / ``{"answer": ...}``. ``retrievers`` retrievals are made in order;
    the last returns ``doc_ids``, the ones before return ``x1``.
    """
    start = T0 + timedelta(minutes=minute)
    root = RunTree(
        name="chat",
        run_type="chain",
        inputs=question if isinstance(question, dict) else {"question": question},
        extra={"metadata": dict(metadata)},
        start_time=start,
        ls_client=offline_client(),
    )
    step = root.create_child(
        name="retrieve", run_type="chain", inputs={}, start_time=start + timedelta(seconds=1)
    )
    for n in range(retrievers):
        ids = doc_ids if n == retrievers - 1 else ["x1"]
        kb = step.create_child(
            name="kb",
            run_type="retriever",
            inputs={"query": "q"},
            start_time=start + timedelta(seconds=2 + n),
        )
        kb.end(outputs={"documents": [Document(id=i, page_content=DOCS[i]) for i in ids]})
    step.end(outputs={"n": len(doc_ids)})
    llm = root.create_child(
        name="model",
        run_type="llm",
        inputs={"prompt": "p"},
        extra={"metadata": {"ls_model_name": "tiny-chat"}},
        start_time=start + timedelta(seconds=10),
    )
    llm.end(outputs={"text": "t"})
    root.end(outputs=answer if isinstance(answer, dict) else {"answer": answer})
    return root


def _scene() -> dict[str, RunTree]:
    return {
        "a1": _turn("How much leave do I get?", "25 days.", ["p1"], {"session_id": "A"}, 1),
        "b1": _turn("When are expenses paid?", "Within 30 days.", ["p3"], {"thread_id": "B"}, 2),
        "a2": _turn("And for part-timers?", "Pro rata.", ["p2"], {"session_id": "A"}, 3),
        "lone": _turn("Hello?", "Hi.", ["p1"], {"user": "u7"}, 4),
    }


def _shuffled(scene: dict[str, RunTree]) -> list[RunTree]:
    return [scene["lone"], scene["a2"], scene["b1"], scene["a1"]]


def _flat(tree: RunTree) -> list[Run]:
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
            extra=tree.extra,
            parent_run_id=tree.parent_run_id,
            trace_id=tree.trace_id,
            dotted_order=tree.dotted_order,
        )
    ]
    for child in tree.child_runs:
        runs.extend(_flat(child))
    return runs


def _by_id(conversations: list[Conversation]) -> dict[str, Conversation]:
    return {c.id: c for c in conversations}


# --------------------------------------------------------------------------- grouping and turns


def test_threads_group_turns_in_start_order_with_each_turns_own_contexts() -> None:
    scene = _scene()
    read = read_thread_runs(_shuffled(scene))
    threads = _by_id(read.conversations)
    assert list(threads) == ["A", "B"]  # ordered by their first turn's start
    a = threads["A"]
    assert [(t.role, t.content) for t in a.turns] == [
        ("user", "How much leave do I get?"),
        ("assistant", "25 days."),
        ("user", "And for part-timers?"),
        ("assistant", "Pro rata."),
    ]
    # Turn 2's contexts are turn 2's retriever's (nested two levels down), not turn 1's.
    assert [c.id for c in a.turns[1].contexts] == ["p1"]
    assert [c.id for c in a.turns[3].contexts] == ["p2"]
    assert a.turns[3].id == str(scene["a2"].id)
    info = a.turns[3].metadata["langsmith"]
    assert info["thread_key"] == "session_id"
    assert info["retriever_runs"][0]["name"] == "kb"
    assert a.turns[3].metadata["generator_model"] == "tiny-chat"
    assert a.metadata["langsmith"]["run_ids"] == [str(scene["a1"].id), str(scene["a2"].id)]
    assert [(t.content, [c.id for c in t.contexts]) for t in threads["B"].turns] == [
        ("When are expenses paid?", []),
        ("Within 30 days.", ["p3"]),
    ]
    # The follow-up, scored as a sample, carries the first exchange as its history.
    sample = a.turn_sample(3)
    assert sample.question == "And for part-timers?"
    assert [t.content for t in sample.history or []] == ["How much leave do I get?", "25 days."]
    assert read.unthreaded == [str(scene["lone"].id)]


def test_flat_runs_read_as_the_same_threads_as_trees() -> None:
    scene = _scene()
    flat = [run for tree in _shuffled(scene) for run in _flat(tree)]
    assert read_thread_runs(flat) == read_thread_runs(_shuffled(scene))


def test_thread_key_precedence_is_session_then_conversation_then_thread_id() -> None:
    assert THREAD_KEYS == ("session_id", "conversation_id", "thread_id")
    both = {"extra": {"metadata": {"thread_id": "T", "conversation_id": "C", "session_id": "S"}}}
    assert thread_key(both) == ("session_id", "S")
    assert thread_key({"extra": {"metadata": {"thread_id": "T", "conversation_id": "C"}}}) == (
        "conversation_id",
        "C",
    )
    assert thread_key({"extra": {"metadata": {"thread_id": 7, "session_id": " "}}}) == (
        "thread_id",
        "7",
    )
    assert thread_key({"extra": {"metadata": {"user": "u"}}}) is None
    # The API's computed thread id, when a run has it, is LangSmith's own grouping.
    assert thread_key({"thread_id": "API", "extra": {"metadata": {"session_id": "S"}}}) == (
        "thread_id",
        "API",
    )
    # Two traces of one conversation: one tagged with session_id only, one with both keys.
    first = _turn("q1", "a1", ["p1"], {"session_id": "S"}, 1)
    second = _turn("q2", "a2", ["p2"], {"thread_id": "T", "session_id": "S"}, 2)
    (conversation,) = read_thread_runs([second, first]).conversations
    assert conversation.id == "S"
    assert [t.content for t in conversation.turns] == ["q1", "a1", "q2", "a2"]


def test_runs_without_thread_metadata_are_reported_not_dropped_silently() -> None:
    scene = _scene()
    with pytest.warns(UnthreadedRunsWarning, match=r"1 root run without thread metadata"):
        conversations = conversations_from_runs(_shuffled(scene))
    assert sorted(c.id for c in conversations) == ["A", "B"]
    only = read_thread_runs([scene["lone"]])
    assert (only.conversations, only.unthreaded) == ([], [str(scene["lone"].id)])
    assert "0 threads (0 turns); 1 root run without thread metadata" in only.report()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all threaded: no warning
        conversations_from_runs([scene["a1"], scene["b1"]])


def test_messages_in_the_inputs_give_the_new_user_message_as_the_question() -> None:
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I work 20 hours a week."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "How much leave do I get?"}]},
    ]
    first = _turn(
        {"messages": history[:2]},
        {"messages": [{"role": "assistant", "content": "Noted."}]},
        ["x1"],
        {"conversation_id": "M"},
        1,
    )
    second = _turn(
        {"messages": history},
        {"messages": [*history, AIMessage(content="Pro rata: about 13 days.")]},
        ["p2"],
        {"conversation_id": "M"},
        2,
    )
    live = _turn(
        {"messages": [HumanMessage(content="And expenses?")]},
        {"output": "Within 30 days."},
        ["p3"],
        {"conversation_id": "M"},
        3,
    )
    calling = AIMessage(content="", tool_calls=[{"name": "book", "args": {}, "id": "c1"}])
    tool_only = _turn(  # outputs repeat the conversation; this turn added only a tool call
        {"messages": [*history, {"role": "user", "content": "Book it."}]},
        {"messages": [*history, {"role": "user", "content": "Book it."}, calling]},
        ["x1"],
        {"conversation_id": "M"},
        4,
    )
    (conversation,) = read_thread_runs([live, tool_only, second, first]).conversations
    assert [t.content for t in conversation.turns] == [
        "I work 20 hours a week.",
        "Noted.",
        "How much leave do I get?",
        "Pro rata: about 13 days.",
        "And expenses?",
        "Within 30 days.",
        "Book it.",
        None,  # not an earlier turn's answer
    ]
    assert conversation.turns[3].metadata["langsmith"]["messages_in"] == 4
    # question_key overrides the messages rule
    keyed = _turn({"q": "typed", "messages": history}, "a", ["p1"], {"session_id": "K"}, 1)
    (explicit,) = read_thread_runs([keyed], question_key="q").conversations
    assert explicit.turns[0].content == "typed"


def test_retrievals_last_by_default_all_on_request_and_none_is_an_empty_turn() -> None:
    twice = _turn("q", "a", ["p2"], {"session_id": "R"}, 1, retrievers=2)
    (last,) = read_thread_runs([twice]).conversations
    assert [c.id for c in last.turns[1].contexts] == ["p2"]
    assert len(last.turns[1].metadata["langsmith"]["other_retriever_runs"]) == 1
    (both,) = read_thread_runs([twice], retrievals="all").conversations
    assert [c.id for c in both.turns[1].contexts] == ["x1", "p2"]
    bare = RunTree(
        name="chat",
        run_type="chain",
        inputs={"question": "thanks!"},
        extra={"metadata": {"session_id": "R"}},
        start_time=T0 + timedelta(minutes=5),
        ls_client=offline_client(),
    )
    bare.end(outputs={"answer": "You're welcome."})
    (conversation,) = read_thread_runs([bare, twice]).conversations
    assert conversation.turns[3].content == "You're welcome."
    assert conversation.turns[3].contexts == []
    with pytest.raises(ValueError, match=r"no run named 'kb_typo' in any turn of 1 thread"):
        read_thread_runs([twice], retriever="kb_typo")
    with pytest.raises(ValueError, match="retrievals must be"):
        read_thread_runs([twice], retrievals="first")  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match="sample_id"):
        read_thread_runs([twice], sample_id="x")  # type: ignore[call-arg]


# --------------------------------------------------------------------------- the real Client


class ServingClient(OfflineClient):
    """A real `langsmith.Client` whose ``/runs/query`` pages come from recorded run dicts, so
    ``list_runs`` (its arguments, its body, its Run objects) is langsmith's own."""

    def __init__(self, runs: list[Run]) -> None:
        super().__init__()
        self.project_id = uuid.uuid4()
        self.records = [
            r.model_dump(mode="json", exclude={"child_runs", "attachments"}) for r in runs
        ]
        self.bodies: list[dict[str, Any]] = []

    def read_project(self, *args: Any, **kwargs: Any) -> Any:
        assert kwargs.get("project_name") == "support-bot"
        return type("Project", (), {"id": self.project_id})()

    def _get_cursor_paginated_list(self, path: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        body = kwargs["body"]
        self.bodies.append(body)
        assert path == "/runs/query"
        assert body["session"] == [self.project_id]
        for record in self.records:
            if body.get("is_root") and record["parent_run_id"] is not None:
                continue
            if "trace" in body and record["trace_id"] != str(body["trace"]):
                continue
            wanted, thread = body.get("filter"), thread_key(record)
            if wanted is not None and (thread is None or f'"{thread[1]}"' not in wanted):
                continue  # the server's eq(thread_id, ...) on its computed thread id
            yield record


def test_read_threads_lists_runs_with_the_real_client() -> None:
    scene = _scene()
    client = ServingClient([run for tree in _shuffled(scene) for run in _flat(tree)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # list_runs is deprecated in 0.14
        read = read_threads(client, project_name="support-bot")
    assert read == read_thread_runs(_shuffled(scene))
    roots, *traces = client.bodies
    assert roots["is_root"] is True
    assert "filter" not in roots
    # one trace fetched per threaded root; the unthreaded root's children are not fetched
    assert sorted(str(b["trace"]) for b in traces) == sorted(
        str(scene[k].id) for k in ("a1", "a2", "b1")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        only_a = read_threads(client, project_name="support-bot", thread_ids=["A"], limit=10)
    assert [c.id for c in only_a.conversations] == ["A"]
    assert client.bodies[len(traces) + 1]["filter"] == 'eq(thread_id, "A")'
    assert client.bodies[len(traces) + 1]["limit"] == 10


# --------------------------------------------------------------------------- thread evaluators

EVIDENCE = {  # each answer, and the passage text only its own turn's retrieval holds
    "25 days.": "25 days of annual leave",
    "Pro rata.": "pro rata to their hours",
    "Within 30 days.": "paid within 30 days",
}


def _grounded(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The groundedness grader: grounded when the answer's evidence is among the passages shown."""
    prompt = "\n".join(m["content"] for m in messages)
    answer = next(a for a in EVIDENCE if a in prompt)
    found = EVIDENCE[answer] in prompt
    return {"explanation": f"evidence for {answer!r} shown: {found}", "verdict": found}


def _assessed(messages: list[dict[str, str]]) -> dict[str, Any]:
    """conversation.assess: one intention, met by the conversation's last assistant turn."""
    prompt = "\n".join(m["content"] for m in messages)
    last = prompt.count("<<<BEGIN TURN")
    outcome = (
        [{"reason": "reached", "verdict": "met", "met_in": last}]
        if "<<<BEGIN OUTCOME" in prompt
        else []
    )
    return {
        "facts": [],
        "intentions": [
            {
                "intention": "know the leave",
                "asked_in": 1,
                "reason": "answered",
                "verdict": "met",
                "met_in": last,
            }
        ],
        "outcome": outcome,
    }


def _judge() -> ScriptedJudge:
    return ScriptedJudge(
        {
            "grader.groundedness": _grounded,
            "grader.helpfulness": {"explanation": "on topic", "verdict": True},
            "conversation.assess": _assessed,
        }
    )


def test_thread_feedback_goes_to_each_turns_run_and_the_conversation_to_the_last() -> None:
    scene = _scene()
    conversations = read_thread_runs(_shuffled(scene)).conversations
    judge = _judge()
    evaluator = ThreadEvaluator(["groundedness"], ["conversation_completeness"], judge=judge)
    results = evaluator.feedback(conversations)
    got = {(r.key, str(r.target_run_id)): r.score for r in results}
    a1, a2, b1 = (str(scene[k].id) for k in ("a1", "a2", "b1"))
    # Each turn is judged against its own retrieval (the follow-up against p2, not p1) and its
    # feedback goes to its own run; the conversation's to the thread's last run.
    assert got == {
        ("groundedness", a1): 1.0,
        ("groundedness", a2): 1.0,
        ("groundedness", b1): 1.0,
        ("conversation_completeness", a2): 1.0,
        ("conversation_completeness", b1): 1.0,
    }
    assert sorted(judge.tasks()) == ["conversation.assess"] * 2 + ["grader.groundedness"] * 3
    follow_up = next(r for r in results if str(r.target_run_id) == a2 and r.key == "groundedness")
    assert follow_up.evaluator_info["turn"] == 3
    assert follow_up.evaluator_info["thread_id"] == "A"
    assert follow_up.feedback_config == {"type": "continuous", "min": 0, "max": 1}


def test_a_turn_judged_against_another_turns_contexts_scores_zero() -> None:
    """The scripted grader is not lenient: the follow-up's answer with the first turn's passages
    is ungrounded, so the test above would catch contexts routed to the wrong turn."""
    (a, _) = read_thread_runs(_shuffled(_scene())).conversations
    swapped = a.model_copy(
        update={
            "turns": [*a.turns[:3], a.turns[3].model_copy(update={"contexts": a.turns[1].contexts})]
        }
    )
    evaluator = ThreadEvaluator(["groundedness"], [], judge=_judge())
    evaluation = evaluator.score([swapped])
    assert evaluation.get("A#3", "groundedness").value == 0.0  # type: ignore[union-attr]
    assert evaluation.get("A#1", "groundedness").value == 1.0  # type: ignore[union-attr]


def test_openevals_trajectory_shape_one_result_per_measure_for_the_thread() -> None:
    (a, _) = read_thread_runs(_shuffled(_scene())).conversations
    evaluator = ThreadEvaluator(["groundedness"], ["conversation_completeness"], judge=_judge())
    results = {r["key"]: r for r in evaluator(outputs=a, reference_outputs="leave explained")}
    assert set(results) == {"groundedness", "conversation_completeness"}
    assert results["groundedness"]["score"] == 1.0
    assert [t["turn"] for t in results["groundedness"]["metadata"]["turns"]] == [1, 3]
    assert results["groundedness"]["metadata"]["rollup"]["first_failing_turn"] is None
    completeness = results["conversation_completeness"]
    assert completeness["metadata"]["status"] == "scored"
    assert "expected outcome was reached" in completeness["comment"]


def test_openevals_multiturn_simulation_calls_the_thread_evaluator() -> None:
    simulators = pytest.importorskip("openevals.simulators")
    replies = iter(["25 days.", "Pro rata."])

    def app(inputs: dict[str, Any], **kwargs: Any) -> dict[str, str]:
        return {"role": "assistant", "content": next(replies)}

    judge = _judge()
    evaluator = ThreadEvaluator(["helpfulness"], ["conversation_completeness"], judge=judge)
    result = simulators.run_multiturn_simulation(
        app=app,
        user=["How much leave do I get?", "And for part-timers?"],
        max_turns=2,
        trajectory_evaluators=[evaluator],
        reference_outputs={"expected_outcome": "leave explained"},
    )
    by_key = {r["key"]: r for r in result["evaluator_results"]}
    assert by_key["helpfulness"]["score"] == 1.0
    assert [t["turn"] for t in by_key["helpfulness"]["metadata"]["turns"]] == [1, 3]
    assert by_key["conversation_completeness"]["score"] == 1.0
    assessed = next(c for c in judge.calls if c.task == "conversation.assess")
    assert "leave explained" in "\n".join(m["content"] for m in assessed.messages)


def test_feedback_is_posted_with_the_real_client_signature() -> None:
    scene = _scene()
    posted: list[dict[str, Any]] = []
    signature = inspect.signature(Client.create_feedback)

    class Recording(OfflineClient):
        def create_feedback(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            signature.bind(self, *args, **kwargs)  # the real method accepts these arguments
            posted.append(kwargs)

    evaluator = ThreadEvaluator(
        ["groundedness"], [], judge=_judge(), keys={"groundedness": "grounded"}
    )
    results = evaluator.evaluate([run for k in ("a1", "a2") for run in _flat(scene[k])])
    assert ThreadEvaluator.log(Recording(), results["results"]) == 2
    assert [(p["run_id"], p["key"], p["score"]) for p in posted] == [
        (str(scene["a1"].id), "grounded", 1.0),
        (str(scene["a2"].id), "grounded", 1.0),
    ]
    with pytest.raises(ValueError, match="one thread"):
        evaluator.evaluate([scene["a1"], scene["b1"]])
