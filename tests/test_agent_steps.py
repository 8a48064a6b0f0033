"""Retrieval-step measures of an agent's trajectory and faithfulness across its steps (issue 32).

The scripted judges decide from what each prompt shows (a query in a STEP block, a fact in a
numbered CONTEXT block), never by position alone, so a test fails when a step is shown under
the wrong number, a verdict is mapped back to the wrong step, or a claim is attributed to a step
that did not retrieve its passage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from ragbridge.core import Context, Sample, estimate, evaluate
from ragbridge.core.agent.retrieval_steps import (
    RedundantRetrievals,
    StepContextRelevance,
    StepQueryRelevance,
    StepsToRelevant,
    repeated,
)
from ragbridge.core.agent.steps import retrieval_steps, step_query
from ragbridge.core.cache.result_key import fields_read, sample_body
from ragbridge.core.judging.judge import Message
from ragbridge.core.metrics import Faithfulness, resolve
from ragbridge.core.metrics.turn_sources import own_steps, sources_for, step_sources
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge
from ragbridge.core.trajectory import Step

QUESTION = "Where was the director of Inception born?"
DIRECTOR = "Inception (2010) was written and directed by Christopher Nolan."
BORN = "Christopher Nolan was born in Westminster, London, in 1970."
WEATHER = "Paris weather today: light rain, 14 degrees."
FILM = "Inception stars Leonardo DiCaprio as a thief who steals secrets from dreams."


def trajectory() -> list[Step]:
    """Six steps: 0 an off-topic search, 1 a calculator (no retrieval), 2 the search that finds
    the director, 3 the one that finds the birthplace, 4 the same search again, 5 a search
    that found nothing (a retrieval step only when its tool is named as a retriever)."""
    return [
        Step(name="web_search", args={"query": "weather in Paris"}, contexts=[WEATHER]),
        Step(name="calculator", args={"expression": "2010 - 1970"}, output="40"),
        Step(
            name="search",
            args={"query": "Inception director"},
            contexts=[Context(id="film", text=FILM), Context(id="dir", text=DIRECTOR)],
        ),
        Step(
            name="search",
            args={"query": "Christopher Nolan birthplace"},
            contexts=[Context(id="born", text=BORN)],
        ),
        Step(
            name="search",
            args={"query": "christopher nolan  birthplace?"},
            contexts=[Context(id="born", text=BORN)],
        ),
        Step(name="kb_lookup", args={"q": "Nolan family"}),
    ]


def agent_sample(**update: Any) -> Sample:
    values: dict[str, Any] = {
        "id": "agent-1",
        "question": QUESTION,
        "answer": "He was born in London.",
        "trajectory": trajectory(),
    }
    values.update(update)
    return Sample(**values)


def _blocks(messages: Sequence[Message], label: str) -> list[str]:
    user = messages[-1]["content"] if messages[-1]["role"] == "user" else messages[1]["content"]
    found = re.findall(rf"<<<BEGIN {label} (\d+)>>>\n(.*?)\n<<<END {label} \1>>>", user, re.S)
    return [text for _, text in found]


def relevance_by_text(messages: list[Message]) -> dict[str, Any]:
    """context_relevance.judge: a context is relevant when it names Nolan's birth or the
    director (what the question needs)."""
    return {
        "verdicts": [
            {"reason": "judged from the text", "relevant": "born" in t or "directed" in t}
            for t in _blocks(messages, "CONTEXT")
        ]
    }


def queries_by_text(messages: list[Message]) -> dict[str, Any]:
    """agent.step_queries: a query is relevant unless it asks about the weather."""
    return {
        "verdicts": [
            {"reason": "judged from the query", "relevant": "weather" not in t}
            for t in _blocks(messages, "STEP")
        ]
    }


def judge() -> ScriptedJudge:
    return ScriptedJudge(
        {"context_relevance.judge": relevance_by_text, "agent.step_queries": queries_by_text}
    )


def rows(score: Score) -> dict[int, dict[str, Any]]:
    assert score.failure is None, score.failure
    return {row["step"]: row for row in score.details["steps"]}


# ----------------------------------------------------------------------------- the steps


def test_retrieval_steps_are_the_steps_with_contexts_or_a_named_retriever() -> None:
    sample = agent_sample()
    assert [s.index for s in retrieval_steps(sample)] == [0, 2, 3, 4]
    assert [s.index for s in retrieval_steps(sample, ["kb_lookup"])] == [0, 2, 3, 4, 5]
    assert [s.query for s in retrieval_steps(sample, ["kb_lookup"])][-1] == "Nolan family"
    assert step_query(Step(name="t", args={"k": 3, "topic": "Nolan"})) == "Nolan"
    assert step_query(Step(name="t", args={"a": "x", "b": "y"})) == '{"a": "x", "b": "y"}'


# ----------------------------------------------------------------------------- redundancy


def test_redundant_retrievals_names_the_step_that_repeats_and_the_one_it_repeats() -> None:
    score = evaluate([agent_sample()], [RedundantRetrievals()]).get(
        "agent-1", "redundant_retrievals"
    )
    by_step = rows(score)
    assert [s for s, r in by_step.items() if r["redundant"]] == [4]
    assert by_step[4]["repeats"] == 3
    assert by_step[4]["rule"] == "same query"
    assert score.value == pytest.approx(1 / 4)
    assert score.usage.calls == 0


def test_redundancy_rules() -> None:
    assert repeated("capital of France", "France's capital") == "same words"
    assert repeated("Christopher Nolan birthplace", "Christopher Nolan birthplcae") == (
        "similar text"
    )
    assert repeated("Nolan birthplace", "Nolan filmography") is None
    assert repeated("Eiffel Tower height", "Eiffel Tower height in metres") is None


def test_a_retry_after_a_failed_call_and_another_tool_are_not_redundant() -> None:
    steps = [
        Step(name="search", args={"query": "Nolan"}, error="timeout"),
        Step(name="search", args={"query": "Nolan"}, contexts=["Nolan is a director."]),
        Step(name="wiki", args={"query": "Nolan"}, contexts=["Nolan, born 1970."]),
        Step(name="wiki", args={"query": "nolan"}, contexts=["Nolan, born 1970."]),
    ]
    sample = agent_sample(trajectory=steps)
    score = evaluate([sample], [RedundantRetrievals(retrievers=["search"])]).get(
        "agent-1", "redundant_retrievals"
    )
    assert {s: r["redundant"] for s, r in rows(score).items()} == {
        0: False,
        1: False,
        2: False,
        3: True,
    }
    assert rows(score)[3]["repeats"] == 2


# ----------------------------------------------------------------------------- steps to relevant


def test_steps_to_relevant_from_labels_counts_the_second_retrieval_step() -> None:
    # labels: only the birthplace passage is relevant; it first came at trajectory step 3, the
    # third retrieval step (0, 2, 3): 1/3, no judge needed
    sample = agent_sample(relevance={"born": 1, "weather": 0})
    score = evaluate([sample], ["steps_to_relevant"]).get("agent-1", "steps_to_relevant")
    assert score.failure is None, score.failure
    assert score.value == pytest.approx(1 / 3)
    assert score.details["from"] == "labels"
    assert score.details["first_relevant_step"] == 3
    assert score.details["steps_taken"] == 3
    assert rows(score)[3]["relevant_ids"] == ["born"]
    assert rows(score)[2]["relevant"] is False
    assert estimate([sample], ["steps_to_relevant"]).calls == 0


def test_steps_to_relevant_judged_counts_the_step_whose_context_is_relevant() -> None:
    # judged: the director passage (step 2, second retrieval step) is relevant: 1/2
    j = judge()
    sample = agent_sample()
    metrics = [StepsToRelevant(), StepContextRelevance()]
    evaluation = evaluate([sample], metrics, judge=j)
    score = evaluation.get("agent-1", "steps_to_relevant")
    assert score.failure is None, score.failure
    assert score.value == pytest.approx(1 / 2)
    assert score.details["from"] == "judge"
    assert score.details["first_relevant_step"] == 2
    assert rows(score)[2]["relevant_ranks"] == [2]  # the director passage is ranked second
    assert rows(score)[0]["relevant"] is False
    # one call for both measures, each passage judged once (BORN retrieved twice)
    assert j.tasks() == ["context_relevance.judge"]
    assert _blocks(j.calls[0].messages, "CONTEXT") == [WEATHER, FILM, DIRECTOR, BORN]
    assert estimate([sample], metrics).calls == 1


def test_steps_to_relevant_with_nothing_relevant_is_zero_and_no_answer_is_skipped() -> None:
    sample = agent_sample(relevance={"other": 1})
    assert evaluate([sample], ["steps_to_relevant"]).get("agent-1", "steps_to_relevant").value == 0
    skipped = evaluate([agent_sample(relevance={})], ["steps_to_relevant"]).get(
        "agent-1", "steps_to_relevant"
    )
    assert skipped.value is None
    assert skipped.failure is None
    assert "no relevant document" in (skipped.reason or "")


# ----------------------------------------------------------------------------- context relevance


def test_step_context_relevance_averages_each_steps_share() -> None:
    j = judge()
    score = evaluate(
        [agent_sample()], [StepContextRelevance(retrievers=["kb_lookup"])], judge=j
    ).get("agent-1", "step_context_relevance")
    by_step = rows(score)
    assert {s: r["share"] for s, r in by_step.items()} == {0: 0.0, 2: 0.5, 3: 1.0, 4: 1.0, 5: 0.0}
    assert score.value == pytest.approx((0 + 0.5 + 1 + 1 + 0) / 5)
    assert [c["context_id"] for c in by_step[2]["contexts"]] == ["film", "dir"]
    assert [c["relevant"] for c in by_step[2]["contexts"]] == [False, True]
    assert by_step[5]["returned"] == 0
    assert score.usage.calls == 1


def test_step_context_relevance_shares_context_relevances_call_on_the_union() -> None:
    union = [WEATHER, FILM, DIRECTOR, BORN]
    sample = agent_sample(contexts=union)
    j = judge()
    evaluation = evaluate([sample], ["context_relevance", "step_context_relevance"], judge=j)
    assert j.tasks() == ["context_relevance.judge"]
    assert evaluation.get("agent-1", "context_relevance").value == pytest.approx(0.5)
    assert evaluation.get("agent-1", "step_context_relevance").failure is None
    assert estimate([sample], ["context_relevance", "step_context_relevance"]).calls == 1


# ----------------------------------------------------------------------------- query relevance


def test_step_query_relevance_maps_each_verdict_to_its_step() -> None:
    j = judge()
    score = evaluate([agent_sample()], [StepQueryRelevance()], judge=j).get(
        "agent-1", "step_query_relevance"
    )
    by_step = rows(score)
    assert {s: r["relevant"] for s, r in by_step.items()} == {
        0: False,
        2: True,
        3: True,
        4: True,
    }
    assert by_step[0]["query"] == "weather in Paris"
    assert by_step[0]["tool"] == "web_search"
    assert score.value == pytest.approx(3 / 4)
    assert j.tasks() == ["agent.step_queries"]
    shown = _blocks(j.calls[0].messages, "STEP")
    assert [s.splitlines()[1] for s in shown] == [
        "query: weather in Paris",
        "query: Inception director",
        "query: Christopher Nolan birthplace",
        "query: christopher nolan  birthplace?",
    ]
    assert "returned: " + FILM[:20] in shown[1]  # what a later step builds on
    assert estimate([agent_sample()], [StepQueryRelevance()]).calls == 1


def test_step_query_relevance_offline_counts_a_follow_up_on_what_an_earlier_step_found() -> None:
    steps = [
        Step(name="search", args={"query": "Inception director"}, contexts=[DIRECTOR]),
        Step(name="search", args={"query": "Christopher Nolan birthplace"}, contexts=[BORN]),
        Step(name="search", args={"query": "cheap flights Lisbon"}, contexts=[WEATHER]),
    ]
    metric = resolve("step_query_relevance:offline")
    score = evaluate([agent_sample(trajectory=steps)], [metric], embedder=HashEmbedder()).get(
        "agent-1", "step_query_relevance"
    )
    by_step = rows(score)
    assert [by_step[i]["relevant"] for i in range(3)] == [True, True, False]
    # "christopher" and "nolan" come from what step 0 returned, "birthplace" from nowhere
    assert by_step[1]["grounding"] == pytest.approx(2 / 3, abs=1e-4)
    assert score.usage.calls == 0


# ----------------------------------------------------------------------------- edges


@pytest.mark.parametrize(
    "name",
    ["step_query_relevance", "step_context_relevance", "redundant_retrievals", "steps_to_relevant"],
)
def test_no_trajectory_is_missing_input_and_no_retrieval_step_is_skipped(name: str) -> None:
    plain = Sample(id="plain", question=QUESTION, answer="London.", contexts=[BORN])
    j = CountingJudge()
    failed = evaluate([plain], [name], judge=j).get("plain", name)
    assert failed.failure is not None
    assert failed.failure.kind == FailureKind.MISSING_INPUT
    assert "'trajectory'" in failed.failure.message
    only_tools = agent_sample(trajectory=[Step(name="calculator", args={"x": "1"}, output="1")])
    skipped = evaluate([only_tools], [name], judge=j).get("agent-1", name)
    assert skipped.value is None
    assert skipped.failure is None
    assert "no retrieval step" in (skipped.reason or "")
    assert j.calls == 0
    assert estimate([plain, only_tools], [name]).calls == 0


# ----------------------------------------------------------------------------- faithfulness


CLAIM = "Nolan was born in London."


def verify_by_text(messages: list[Message]) -> dict[str, Any]:
    """faithfulness.verify: the claim is supported by the context block that mentions the
    birth, cited by its number."""
    contexts = _blocks(messages, "CONTEXT")
    number = next(i for i, text in enumerate(contexts, start=1) if "born in" in text)
    return {"verdicts": [{"reason": "stated", "verdict": "supported", "context": number}]}


def faithfulness_judge() -> ScriptedJudge:
    return ScriptedJudge(
        {
            "answer.analyze": {"claims": [CLAIM], "questions": ["q"], "noncommittal": False},
            "faithfulness.verify": verify_by_text,
        }
    )


@pytest.mark.parametrize(
    "contexts",
    [[], [FILM, DIRECTOR], [WEATHER, FILM, DIRECTOR, BORN]],
    ids=["no own contexts", "a subset", "the union"],
)
def test_a_claim_names_the_step_whose_passage_supports_it(contexts: list[str]) -> None:
    sample = agent_sample(contexts=contexts, answer=CLAIM)
    j = faithfulness_judge()
    score = evaluate([sample], [Faithfulness()], judge=j).get("agent-1", "faithfulness")
    assert score.failure is None, score.failure
    assert score.value == 1.0
    (claim,) = score.details["claims"]
    # BORN was retrieved by steps 3 and 4: it is step 3's (the first), not step 2's or 4's
    assert claim["source"] == "step"
    assert claim["step"] == 3
    assert claim["tool"] == "search"
    assert j.tasks() == ["answer.analyze", "faithfulness.verify"]
    shown = _blocks(j.calls[1].messages, "CONTEXT")
    assert sum(BORN in text for text in shown) == 1  # each passage once
    assert len(shown) == 4  # the union of what was retrieved, whatever the sample's own
    if BORN not in contexts:
        assert shown[-1].startswith("[Retrieved by the agent: step 3, tool search]")
    assert estimate([sample], [Faithfulness()]).calls == 2


def test_a_claim_supported_by_the_samples_own_context_no_step_returned_names_no_step() -> None:
    sample = agent_sample(contexts=["Nolan was born in London, says the studio."], answer=CLAIM)
    score = evaluate([sample], [Faithfulness()], judge=faithfulness_judge()).get(
        "agent-1", "faithfulness"
    )
    (claim,) = score.details["claims"]
    assert claim["context"] == 1
    assert "source" not in claim


def test_offline_faithfulness_names_the_step_too() -> None:
    sample = agent_sample(contexts=[], answer="Christopher Nolan was born in London in 1970.")
    metric = resolve("faithfulness:offline")
    score = evaluate([sample], [metric], embedder=HashEmbedder()).get("agent-1", "faithfulness")
    assert score.failure is None, score.failure
    (claim,) = score.details["claims"]
    assert claim["supported"] is True
    assert (claim["source"], claim["step"], claim["tool"]) == ("step", 3, "search")


def test_step_sources_and_own_steps() -> None:
    sample = agent_sample(contexts=[DIRECTOR])
    assert [(s.step, s.tool) for s in step_sources(sample)] == [
        (0, "web_search"),
        (2, "search"),
        (3, "search"),
    ]
    assert {n: s.step for n, s in own_steps(sample).items()} == {1: 2}
    both = sources_for(sample, "turn")
    assert [s.text for s in both] == [WEATHER, FILM, BORN]
    assert both.own_steps[1].tool == "search"
    assert step_sources(agent_sample(trajectory=None)) == []


def test_faithfulness_key_reads_the_trajectory_only_when_there_is_one() -> None:
    reads = fields_read(Faithfulness())
    assert reads is not None
    assert "trajectory" in reads
    plain = Sample(id="p", question=QUESTION, answer=CLAIM, contexts=[BORN])
    without = reads - {"trajectory"}
    # a sample that is no agent's keeps the key it had before faithfulness read trajectories
    assert sample_body(plain, reads) == sample_body(plain, without)
    agent = plain.model_copy(update={"trajectory": trajectory()})
    other = plain.model_copy(update={"trajectory": trajectory()[:3]})
    assert sample_body(agent, reads) != sample_body(other, reads)
