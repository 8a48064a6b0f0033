"""Conversation-level measures and the conversation run (`ragbridge.core.multiturn`).

The scripted judge here reads the numbered TURN blocks of the prompt the way a judge would and
answers with the turn numbers it saw, so each test checks what the measures make of a reply:
the turn positions named in details, the value, the call count. A judge that contradicts a
user's fact is named by its position in the conversation (tool and system turns included).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import Context, Conversation, Sample, ToolCall, Turn, evaluate
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import Message, ProviderUnusable
from ragbridge.core.metrics import MetricContext, resolve
from ragbridge.core.multiturn import (
    CONVERSATION_METRICS,
    LEVELS_KEY,
    conversation_record,
    estimate_conversations,
    evaluate_conversations,
)
from ragbridge.core.multiturn.measures import ConversationView
from ragbridge.core.scoring.runner import estimate
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge

TASK = "conversation.assess"

# 0 system, 1 user (states a fact), 2 assistant, 3 user, 4 assistant calling a tool, 5 tool,
# 6 assistant (contradicts the fact), 7 user, 8 assistant.
DINNER = Conversation(
    id="dinner",
    expected_outcome="The user has a quick vegetarian dinner to cook tonight.",
    turns=[
        Turn(role="system", content="You are a cooking assistant."),
        Turn(role="user", content="Hi! I am vegetarian and I cook for two."),
        Turn(role="assistant", content="Noted: vegetarian meals for two people."),
        Turn(role="user", content="Suggest a dinner for tonight."),
        Turn(
            role="assistant",
            tool_calls=[ToolCall(name="search_recipes", args={"q": "dinner"}, id="call-1")],
        ),
        Turn(role="tool", content="roast chicken; lentil curry", tool_call_id="call-1"),
        Turn(
            role="assistant",
            content="Try roast chicken with potatoes.",
            contexts=[Context(text="Roast chicken takes 90 minutes.", id="r1")],
        ),
        Turn(role="user", content="Something quicker, with the steps please?"),
        Turn(role="assistant", content="A tofu stir-fry is ready in 15 minutes."),
    ],
)

_BLOCK = re.compile(r"<<<BEGIN TURN (\d+)>>>\n(user|assistant): (.*?)\n<<<END TURN \1>>>", re.S)


def shown(messages: list[Message]) -> dict[int, tuple[str, str]]:
    """The TURN blocks of a ``conversation.assess`` prompt: number -> (role, text)."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    return {int(n): (role, text) for n, role, text in _BLOCK.findall(user)}


def number(turns: dict[int, tuple[str, str]], role: str, word: str) -> int:
    return next(n for n, (r, text) in turns.items() if r == role and word in text)


def dinner_judge(messages: list[Message]) -> dict[str, Any]:
    """What a careful judge says of DINNER (found by words, numbered as the prompt numbers)."""
    turns = shown(messages)
    user = next(m["content"] for m in messages if m["role"] == "user")
    has_outcome = "<<<BEGIN OUTCOME 1>>>" in user
    return {
        "facts": [
            {
                "fact": "The user is vegetarian.",
                "said_in": number(turns, "user", "vegetarian"),
                "reason": "Roast chicken is meat.",
                "verdict": "contradicted",
                "broken_in": number(turns, "assistant", "chicken"),
            },
            {
                "fact": "The user cooks for two.",
                "said_in": number(turns, "user", "for two"),
                "reason": "Nothing contradicts it.",
                "verdict": "kept",
                "broken_in": None,
            },
        ],
        "intentions": [
            {
                "intention": "a dinner idea for tonight",
                "asked_in": number(turns, "user", "Suggest"),
                "reason": "The stir-fry is one.",
                "verdict": "met",
                "met_in": number(turns, "assistant", "stir-fry"),
            },
            {
                "intention": "the steps of a quick recipe",
                "asked_in": number(turns, "user", "steps"),
                "reason": "No steps were given.",
                "verdict": "unmet",
                "met_in": None,
            },
        ],
        "outcome": (
            [
                {
                    "reason": "A quick vegetarian dish was offered.",
                    "verdict": "met",
                    "met_in": number(turns, "assistant", "stir-fry"),
                }
            ]
            if has_outcome
            else []
        ),
    }


def score(sample: Sample, name: str, judge: Any) -> Any:
    ctx = MetricContext(judge=JudgeEngine(judge, max_retries=1, timeout=None))
    return asyncio.run(resolve(name).score(sample, ctx))


# -- the record --------------------------------------------------------------------------------


def test_the_conversation_record_is_the_last_exchange_with_everything_before() -> None:
    record = conversation_record(DINNER)
    assert record.id == "dinner"
    assert record.question == "Something quicker, with the steps please?"
    assert record.answer == "A tofu stir-fry is ready in 15 minutes."
    assert record.history == DINNER.turns[:7]
    assert record.metadata["conversation"] == {
        "id": "dinner",
        "level": "conversation",
        "expected_outcome": DINNER.expected_outcome,
        "turn": 8,
    }


def test_a_conversation_ending_on_a_question_has_no_answer_and_one_without_a_question_fails() -> (
    None
):
    open_ended = Conversation(
        id="o", turns=[*DINNER.turns[:3], Turn(role="user", content="And for dessert?")]
    )
    record = conversation_record(open_ended)
    assert (record.question, record.answer) == ("And for dessert?", None)
    assert record.metadata["conversation"]["turn"] is None
    with pytest.raises(ValueError, match="no user turn"):
        conversation_record(Conversation(id="x", turns=[Turn(role="assistant", content="Hi")]))


def test_the_judge_sees_user_and_assistant_text_only_numbered_in_order() -> None:
    view = ConversationView.of(conversation_record(DINNER))
    # system (0), the tool-calling turn (4) and the tool's output (5) are not shown
    assert view.positions == (1, 2, 3, 6, 7, 8)
    assert [role for role, _ in view.turns] == ["user", "assistant"] * 3


# -- the measures ------------------------------------------------------------------------------


def test_knowledge_retention_names_the_turn_that_contradicts_the_user() -> None:
    judge = ScriptedJudge({TASK: dinner_judge})
    result = score(conversation_record(DINNER), "knowledge_retention", judge)
    assert result.failure is None, result.failure
    # assistant turns 2, 6 and 8 come after the first fact; turn 6 contradicts it
    assert result.details["turns_checked"] == [2, 6, 8]
    assert result.details["failing_turns"] == [6]
    assert result.value == pytest.approx(2 / 3)
    vegetarian = result.details["facts"][0]
    assert (vegetarian["turn"], vegetarian["verdict"], vegetarian["by_turn"]) == (
        1,
        "contradicted",
        6,
    )
    assert "turn 6 contradicted 'The user is vegetarian.' (said in turn 1)" in result.reason
    assert result.details["contradicted"] == 1
    assert result.details["kept"] == 1


def test_completeness_reads_the_expected_outcome() -> None:
    judge = ScriptedJudge({TASK: dinner_judge})
    with_outcome = score(conversation_record(DINNER), "conversation_completeness", judge)
    assert with_outcome.value == pytest.approx(2 / 3)  # 1 of 2 intentions + the outcome
    assert with_outcome.details["outcome"] == {
        "expected": DINNER.expected_outcome,
        "verdict": "met",
        "by_turn": 8,
        "reason": "A quick vegetarian dish was offered.",
    }
    steps = with_outcome.details["intentions"][1]
    assert (steps["turn"], steps["verdict"], steps["by_turn"]) == (7, "unmet", None)
    assert "unmet: 'the steps of a quick recipe' (asked in turn 7)" in with_outcome.reason
    prompt = judge.calls[0].messages[1]["content"]
    assert DINNER.expected_outcome in prompt

    no_outcome = DINNER.model_copy(update={"expected_outcome": None})
    judge = ScriptedJudge({TASK: dinner_judge})
    without = score(conversation_record(no_outcome), "conversation_completeness", judge)
    assert without.value == pytest.approx(1 / 2)
    assert without.details["outcome"] is None
    assert "<<<BEGIN OUTCOME" not in judge.calls[0].messages[1]["content"]


def test_a_record_without_history_fails_naming_history_before_any_call() -> None:
    judge = CountingJudge()
    plain = Sample(id="s", question="What is 2 + 2?", answer="4")
    for name in CONVERSATION_METRICS:
        result = evaluate([plain], [name], judge=judge).get("s", name)
        assert result is not None
        assert result.failure is not None
        assert result.failure.kind == "missing_input"
        assert "'history'" in result.failure.message
    assert judge.calls == 0


def test_a_reply_naming_an_assistant_turn_as_the_source_of_a_fact_is_asked_again() -> None:
    def wrong(messages: list[Message]) -> dict[str, Any]:
        reply = dinner_judge(messages)
        reply["facts"][0]["said_in"] = number(shown(messages), "assistant", "Noted")
        return reply

    judge = ScriptedJudge({TASK: [wrong, dinner_judge]})
    result = score(conversation_record(DINNER), "knowledge_retention", judge)
    assert len(judge.calls) == 2  # the first reply was refused, not scored
    assert result.details["facts"][0]["turn"] == 1
    assert "which is an assistant turn" in judge.calls[1].messages[-1]["content"]


def test_nothing_to_retain_or_to_meet_is_a_skip_not_a_perfect_score() -> None:
    empty = {"facts": [], "intentions": [], "outcome": []}
    plain = DINNER.model_copy(update={"expected_outcome": None})
    for name in CONVERSATION_METRICS:
        result = score(conversation_record(plain), name, ScriptedJudge({TASK: empty}))
        assert result.status == "skipped"
        assert "DeepEval: 1.0" in (result.reason or "")


# -- cost ----------------------------------------------------------------------------------------


def _conversations(n: int) -> list[Conversation]:
    """``n`` conversations like DINNER, each its own (identical prompts would share a call)."""
    out = []
    for i in range(n):
        opening = Turn(role="user", content=f"Hi! I am vegetarian and I cook for {i + 2}.")
        turns = [DINNER.turns[0], opening, *DINNER.turns[2:]]
        out.append(DINNER.model_copy(update={"id": f"c{i}", "turns": turns}))
    return out


def test_both_measures_cost_one_call_per_conversation_and_none_when_cached(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache.sqlite"
    judge = CountingJudge()
    first = evaluate_conversations(_conversations(3), [], judge=judge, cache=cache)
    assert judge.calls == 3
    assert judge.by_task == {TASK: 3}
    assert first.usage().calls == 3  # the first measure to ask owns the call
    assert set(first.sample_ids) == {"c0", "c1", "c2"}
    assert all(s.status == "scored" for _, _, s in first)

    again = CountingJudge()
    second = evaluate_conversations(_conversations(3), [], judge=again, cache=cache)
    assert again.calls == 0
    assert [(i, m, s.value, s.details) for i, m, s in second] == [
        (i, m, s.value, s.details) for i, m, s in first
    ]

    uncached = CountingJudge()
    evaluate_conversations(_conversations(3), [], judge=uncached)
    assert uncached.calls == 3  # shared within the record, not only through the cache

    records = [conversation_record(c) for c in _conversations(3)]
    assert estimate(records, list(CONVERSATION_METRICS)).calls == 3
    assert estimate_conversations(_conversations(3), []).calls == 3


# -- the run -------------------------------------------------------------------------------------

# a retrieval-only capture: the assistant turn holds contexts and no answer
RETRIEVAL_ONLY = Conversation(
    id="leave",
    turns=[
        Turn(role="user", content="How many days of leave do full-timers get?"),
        Turn(
            role="assistant",
            contexts=[Context(text="Full-time staff get 25 days.", id="h1")],
            reference="25 days.",
        ),
    ],
)


def test_one_run_scores_turns_with_turn_metrics_and_conversations_with_theirs() -> None:
    judge = CountingJudge()
    evaluation = evaluate_conversations(
        [DINNER, RETRIEVAL_ONLY], judge=judge, embedder=HashEmbedder()
    )
    turn_metrics = ["faithfulness", "answer_relevance", "context_precision", "context_recall"]
    rows = {
        sid: {m for m in evaluation.metrics if evaluation.get(sid, m)}
        for sid in evaluation.sample_ids
    }
    assert rows == {
        "dinner#2": set(turn_metrics),
        "dinner#6": set(turn_metrics),
        "dinner#8": set(turn_metrics),
        "dinner": set(CONVERSATION_METRICS),
        # no answer: only the measures that do not read one; no conversation row lacks an answer
        "leave#1": {"context_precision", "context_recall"},
        "leave": set(CONVERSATION_METRICS),
    }
    assert evaluation.metadata[LEVELS_KEY] == {
        **{m: "turn" for m in turn_metrics},
        **{m: "conversation" for m in CONVERSATION_METRICS},
    }
    # the judge calls the run records are the calls the judge answered, and the conversation
    # measures cost one call per conversation on top of the turns'
    assert evaluation.metadata["judge_stats"]["calls"] == judge.calls
    assert judge.by_task[TASK] == 2
    assert evaluation.usage().calls == judge.calls


def test_one_engine_serves_both_levels_so_an_unusable_judge_stops_the_whole_run() -> None:
    judge = ScriptedJudge({"*": ProviderUnusable("HTTP 401", cause="401 Unauthorized")})
    evaluation = evaluate_conversations(
        _conversations(40), ["faithfulness"], judge=judge, stop_after=2, max_concurrency=1
    )
    assert evaluation.metadata["aborted"].startswith("judge: 401 Unauthorized")
    assert len(judge.calls) == 2  # one breaker for the turn and the conversation measures
    assert all(s.value is None for _, _, s in evaluation)


def test_colliding_row_ids_and_a_measure_at_both_levels_are_refused() -> None:
    a = Conversation(id="a", turns=RETRIEVAL_ONLY.turns)
    clash = Conversation(id="a#1", turns=RETRIEVAL_ONLY.turns)
    # turn rows alone do not collide ('a#1' and 'a#1#1'); the conversation row 'a#1' does
    evaluate_conversations([a, clash], ["context_precision"], [], judge=CountingJudge())
    clashing = r"row id 'a#1' of conversation 'a#1' is also a row of conversation 'a'"
    with pytest.raises(ValueError, match=clashing):
        evaluate_conversations([a, clash], ["context_precision"], judge=CountingJudge())
    with pytest.raises(ValueError, match="both a turn and a conversation metric"):
        evaluate_conversations([a], ["faithfulness"], ["faithfulness"], judge=CountingJudge())
    with pytest.raises(TypeError, match="applies"):
        evaluate_conversations([a], applies=lambda s, m: True, judge=CountingJudge())


def test_a_scorer_keeps_two_conversations_with_different_expected_outcomes_apart() -> None:
    """The sink-side scorer keys a record by what its metrics read: a conversation's record
    carries its expected outcome in metadata, which completeness reads."""
    from ragbridge.core.multiturn import conversation_record
    from ragbridge.core.scoring.scorer import fingerprint

    base = Conversation(
        id="c",
        turns=[Turn(role="user", content="Book a table."), Turn(role="assistant", content="Done.")],
    )
    one = conversation_record(base.model_copy(update={"expected_outcome": "a table is booked"}))
    two = conversation_record(base.model_copy(update={"expected_outcome": "a taxi is booked"}))
    assert fingerprint(one) != fingerprint(two)
    plain = one.model_copy(update={"history": None, "metadata": {"x": 1}})
    assert fingerprint(plain) == fingerprint(plain.model_copy(update={"metadata": {}}))
