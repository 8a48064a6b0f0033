"""DeepEval conversations (issue 31, DeepEval part): ``ConversationalTestCase`` <-> `Conversation`
exactly, the Turn* / KnowledgeRetention / ConversationCompleteness drop-ins (DeepEval's names,
arguments and outcome fields; a wrong turn lowers the score and is named), ``deepeval.evaluate``
offline, and the cost the issue promises (3 calls a turn, 1 per conversation). Every judge is
scripted or counting; nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepeval")

import deepeval
import deepeval.metrics as deepeval_metrics
from deepeval.dataset import EvaluationDataset
from deepeval.errors import MissingTestCaseParamsError
from deepeval.metrics.utils import copy_metrics
from deepeval.test_case import ConversationalTestCase, LLMTestCase, ToolCall
from deepeval.test_case import Turn as DeepEvalTurn
from deepeval.test_case.llm_test_case import RetrievedContextData
from test_dropin_deepeval import lexical_reply

from ragbridge.adapters.deepeval import (
    ConversationCompletenessMetric,
    DeepEvalConversationalMetric,
    DeepEvalJudge,
    KnowledgeRetentionMetric,
    TurnContextualPrecisionMetric,
    TurnContextualRecallMetric,
    TurnContextualRelevancyMetric,
    TurnFaithfulnessMetric,
    TurnRelevancyMetric,
    from_conversational_test_case,
    from_conversational_test_cases,
    from_dataset,
    from_test_case,
    to_conversational_test_case,
    to_conversational_test_cases,
)
from ragbridge.core import Scorer
from ragbridge.core.conversation import Conversation, Turn
from ragbridge.core.judging.judge import Message
from ragbridge.core.multiturn import CONVERSATION_METRICS, TURN_METRICS
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge, task_of

ROOT = Path(__file__).resolve().parents[1]
BANNER = "DeepEval's latest"

DROP_INS: list[type[DeepEvalConversationalMetric]] = [
    TurnFaithfulnessMetric,
    TurnRelevancyMetric,
    TurnContextualPrecisionMetric,
    TurnContextualRecallMetric,
    TurnContextualRelevancyMetric,
    KnowledgeRetentionMetric,
    ConversationCompletenessMetric,
]
IDS = [cls.__name__ for cls in DROP_INS]


@pytest.fixture(autouse=True)
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


# --------------------------------------------------------------------------- scripted judge

JUNK = "JUNK"
"""A context holding this word is useless and irrelevant to the scripted judge."""


def _blocks(text: str, label: str) -> list[str]:
    return re.findall(rf"<<<BEGIN {label} \d+>>>\n(.*?)\n<<<END {label}", text, re.DOTALL)


def _block(text: str, label: str) -> str:
    found = re.search(rf"<<<BEGIN {label}>>>\n?(.*?)\n?<<<END {label}>>>", text, re.DOTALL)
    return found.group(1).strip() if found else ""


def _context_reply(task: str, text: str) -> dict[str, Any]:
    """Context templates: a context is useful and relevant unless it says JUNK; each reference
    statement is attributed when some context is not junk."""
    good = [JUNK not in context for context in _blocks(text, "CONTEXT")]
    first = next((i for i, g in enumerate(good, 1) if g), None)
    sentences = [s.strip() + "." for s in _block(text, "REFERENCE").split(".") if s.strip()]
    statements = [
        {"statement": s, "reason": "r", "attributed": first is not None, "context": first}
        for s in sentences
    ]
    useful = [{"reason": "r", "useful": g} for g in good]
    relevant = [{"reason": "r", "relevant": g} for g in good]
    both = [{"reason": "r", "relevant": g, "useful": g} for g in good]
    return {
        "context_precision.with_reference": {"verdicts": useful},
        "context_precision.with_answer": {"verdicts": useful},
        "context_relevance.judge": {"verdicts": relevant},
        "context.relevant_useful.with_reference": {"verdicts": both},
        "context.relevant_useful.with_answer": {"verdicts": both},
        "context_recall.attribute": {"statements": statements},
        "context.assess": {"contexts": useful, "statements": statements},
        "context.assess_relevance": {"contexts": both, "statements": statements},
    }[task]


def scripted_judge(assessment: dict[str, Any] | None = None) -> ScriptedJudge:
    """Answers ragbridge's prompts: claims lexically (`lexical_reply`), an answer saying "cannot
    help" as noncommittal, contexts by `_context_reply`, ``conversation.assess`` with
    ``assessment`` (an outcome verdict added when the prompt shows an OUTCOME block)."""

    def reply(messages: list[Message]) -> dict[str, Any]:
        task = task_of(messages)
        assert task is not None
        text = "\n".join(m["content"] for m in messages[1:])
        if task in ("answer.analyze", "faithfulness.verify"):
            found = lexical_reply(task, text)
            if task == "answer.analyze" and "cannot help" in _block(text, "ANSWER"):
                found["noncommittal"] = True
            return found
        if task == "conversation.assess":
            script = dict(assessment or {"facts": [], "intentions": [], "outcome": []})
            if "<<<BEGIN OUTCOME 1>>>" in text and not script.get("outcome"):
                script["outcome"] = [{"reason": "r", "verdict": "met", "met_in": 2}]
            return script
        return _context_reply(task, text)

    return ScriptedJudge({"*": reply})


# --------------------------------------------------------------------------- conversations


def refund_case(
    *,
    second: str = "Sale items can be refunded within 14 days.",
    second_contexts: tuple[str, ...] = ("Sale items can be refunded within 14 days.",),
    expected_outcome: str | None = "The user learns the refund rules.",
) -> ConversationalTestCase:
    """Three exchanges, one passage each; ``second`` is the second answer."""
    return ConversationalTestCase(
        name="refunds",
        expected_outcome=expected_outcome,
        turns=[
            DeepEvalTurn(role="user", content="What is the refund window?"),
            DeepEvalTurn(
                role="assistant",
                content="The refund window is 30 days.",
                retrieval_context=["The refund window is 30 days for all customers."],
            ),
            DeepEvalTurn(role="user", content="Do sale items count?"),
            DeepEvalTurn(role="assistant", content=second, retrieval_context=list(second_contexts)),
            DeepEvalTurn(role="user", content="What about gift cards?"),
            DeepEvalTurn(
                role="assistant",
                content="Gift cards are not refundable.",
                retrieval_context=["Gift cards are not refundable."],
            ),
        ],
    )


def full_conversation() -> Conversation:
    """Everything a ragbridge conversation can hold: system and tool turns, ids, contexts with
    ids, scores and metadata, labels, tool calls, DeepEval's own fields in metadata."""
    return Conversation(
        id="hr-7",
        expected_outcome="The user knows their leave.",
        metadata={"team": "hr", "deepeval": {"scenario": "Leave question", "tags": ["leave"]}},
        turns=[
            Turn(role="system", content="You answer HR questions."),
            Turn(role="user", content="How many days of leave do I get?", id="u1"),
            Turn(
                role="assistant",
                content=None,
                tool_calls=[{"name": "search", "args": {"q": "leave"}, "id": "call-1"}],
            ),
            Turn(role="tool", content="Staff get 25 days.", tool_call_id="call-1"),
            Turn(
                role="assistant",
                id="a1",
                content="You get 25 days.",
                contexts=[
                    {"text": "Staff get 25 days.", "id": "d1", "score": 0.9, "metadata": {"p": 3}},
                    "Leave is booked in the portal.",
                ],
                reference="25 days.",
                reference_contexts=["Staff get 25 days."],
                relevance={"d1": 2},
                metadata={"deepeval": {"latency_ms": 12.5, "user_id": "bot"}, "k": 1},
            ),
            Turn(role="user", content="And part-timers?"),
            Turn(role="assistant", content="", contexts=["Part-timers get it pro rata."]),
            Turn(role="system", content="Conversation closed."),
        ],
    )


# --------------------------------------------------------------------------- 1. round trips


def test_a_conversation_goes_out_to_deepeval_and_comes_back_equal() -> None:
    conversation = full_conversation()
    case = to_conversational_test_case(conversation)
    assert from_conversational_test_case(case) == conversation
    # DeepEval sees user and assistant turns only, in DeepEval's own fields
    assert [t.role for t in case.turns] == ["user", "assistant", "assistant", "user", "assistant"]
    assert case.name == "hr-7"
    assert case.scenario == "Leave question"
    assert case.tags == ["leave"]
    assert case.expected_outcome == "The user knows their leave."
    assert case.metadata is not None
    assert case.metadata["team"] == "hr"
    answer = case.turns[2]
    assert answer.retrieval_context == ["Staff get 25 days.", "Leave is booked in the portal."]
    assert (answer.latency_ms, answer.user_id) == (12.5, "bot")
    (call,) = case.turns[1].tools_called or []
    assert (call.name, call.input_parameters) == ("search", {"q": "leave"})
    assert call.output == "Staff get 25 days."  # the tool turn's result, where DeepEval reads it
    assert case.turns[1].content == ""  # a turn that only calls tools


def test_a_conversation_survives_deepevals_own_copy_and_serialisation() -> None:
    conversation = full_conversation()
    case = to_conversational_test_case(conversation)
    again = ConversationalTestCase.model_validate(case.model_dump())
    assert from_conversational_test_case(again) == conversation
    assert to_conversational_test_cases([conversation]) == [case]


def test_a_hand_built_test_case_reads_and_goes_back_with_every_deepeval_field() -> None:
    case = ConversationalTestCase(
        scenario="A customer asks about refunds.",
        expected_outcome="The customer learns the policy.",
        chatbot_role="a polite support agent",
        user_description="Ann, a returning customer",
        context=["The shop sells shoes."],
        comments="from production",
        tags=["refunds"],
        metadata={"source": "prod"},
        turns=[
            DeepEvalTurn(role="user", content="Can I return shoes?", user_id="ann"),
            DeepEvalTurn(
                role="assistant",
                content="Yes, within 30 days.",
                retrieval_context=[
                    "Returns are accepted within 30 days.",
                    RetrievedContextData(context="Shoes must be unworn.", source="faq.md"),
                ],
                tools_called=[
                    ToolCall(
                        name="policy_lookup",
                        input_parameters={"topic": "returns"},
                        output={"days": 30},
                        reasoning="the user asks about returns",
                    )
                ],
                latency_ms=420.0,
            ),
            DeepEvalTurn(role="user", content="Thanks, book it."),
            DeepEvalTurn(role="assistant", content="", tools_called=[ToolCall(name="book_return")]),
        ],
    )
    conversation = from_conversational_test_case(case)
    assert conversation.turns[3].content is None  # DeepEval's "": a turn that only calls tools
    assert conversation.id.startswith("deepeval-")
    assert conversation.id == from_conversational_test_case(case).id  # deterministic
    assert conversation.expected_outcome == "The customer learns the policy."
    assert conversation.metadata == {
        "source": "prod",
        "deepeval": {
            "scenario": "A customer asks about refunds.",
            "context": ["The shop sells shoes."],
            "user_description": "Ann, a returning customer",
            "chatbot_role": "a polite support agent",
            "comments": "from production",
            "tags": ["refunds"],
        },
    }
    answer = conversation.turns[1]
    assert [c.text for c in answer.contexts] == [
        "Returns are accepted within 30 days.",
        "Shoes must be unworn.",
    ]
    assert answer.contexts[1].metadata == {"source": "faq.md"}
    assert answer.tool_calls[0].name == "policy_lookup"
    assert answer.tool_calls[0].args == {"topic": "returns"}
    assert answer.metadata["deepeval"] == {
        "latency_ms": 420.0,
        "tools_called": [{"reasoning": "the user asks about returns", "output": {"days": 30}}],
    }
    back = to_conversational_test_case(conversation)
    fields = ("scenario", "expected_outcome", "chatbot_role", "user_description", "context")
    for name in (*fields, "comments", "tags"):
        assert getattr(back, name) == getattr(case, name), name
    assert back.metadata is not None
    assert back.metadata["source"] == "prod"
    for ours, theirs in zip(back.turns, case.turns, strict=True):
        assert (ours.role, ours.content, ours.user_id, ours.latency_ms) == (
            theirs.role,
            theirs.content,
            theirs.user_id,
            theirs.latency_ms,
        )
        assert ours.tools_called == theirs.tools_called
    assert back.turns[1].retrieval_context == [
        "Returns are accepted within 30 days.",
        "Shoes must be unworn.",
    ]
    assert from_conversational_test_case(back) == conversation


def test_conversion_errors_name_the_test_case_and_the_turn() -> None:
    misplaced = ConversationalTestCase(
        name="bad",
        turns=[DeepEvalTurn(role="user", content="hi", retrieval_context=["a passage"])],
    )
    with pytest.raises(
        ValueError, match=r"name='bad'.*turns\[0\].*contexts belong to the assistant"
    ):
        from_conversational_test_case(misplaced)
    only_system = Conversation(id="s", turns=[Turn(role="system", content="be nice")])
    with pytest.raises(ValueError, match="no user or assistant turn"):
        to_conversational_test_case(only_system)
    reserved = Conversation(
        id="r", turns=[Turn(role="user", content="hi")], metadata={"ragbridge": 1}
    )
    with pytest.raises(ValueError, match="reserved"):
        to_conversational_test_case(reserved)
    with pytest.raises(TypeError, match=r"Conversation\.from_sample"):
        to_conversational_test_case(from_test_case(LLMTestCase(input="q", actual_output="a")))  # type: ignore[arg-type]
    twice = [refund_case(), refund_case()]
    with pytest.raises(ValueError, match=r"test_cases\[1\]: duplicate conversation id 'refunds'"):
        from_conversational_test_cases(twice)


def test_the_single_turn_readers_point_at_the_conversation_reader() -> None:
    with pytest.raises(TypeError, match="from_conversational_test_case"):
        from_test_case(refund_case())  # type: ignore[arg-type]
    dataset = EvaluationDataset()
    dataset.add_test_case(refund_case())
    with pytest.raises(ValueError, match="from_conversational_test_case"):
        from_dataset(dataset)


# --------------------------------------------------------------------------- 2. names, arguments


def deepevals_own(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(deepeval_metrics, name)(model=DeepEvalJudge(CountingJudge()))


def _drop_in(cls: type[DeepEvalConversationalMetric], **kwargs: Any) -> Any:
    kwargs.setdefault("model", CountingJudge())
    if cls is TurnRelevancyMetric:
        kwargs.setdefault("embedder", HashEmbedder())
    return cls(**kwargs)


@pytest.mark.parametrize("cls", DROP_INS, ids=IDS)
def test_drop_ins_have_deepevals_name_arguments_and_order(
    cls: type[DeepEvalConversationalMetric],
) -> None:
    theirs_cls = getattr(deepeval_metrics, cls.__name__)
    theirs = inspect.signature(theirs_cls.__init__).parameters
    ours = inspect.signature(cls.__init__).parameters
    assert list(ours)[: len(theirs)] == list(theirs)  # positionally the same
    for name, param in theirs.items():
        if name not in ("self", "evaluation_template"):
            assert ours[name].default == param.default, name
    metric = _drop_in(cls)
    assert metric.__name__ == deepevals_own(cls.__name__).__name__
    assert isinstance(metric, deepeval_metrics.BaseConversationalMetric)
    assert metric.evaluation_model == "counting-judge"


def test_deepevals_judge_modes_and_templates_are_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="System One"):
        TurnFaithfulnessMetric(model=CountingJudge(), system_one_model="jev")
    with pytest.raises(ValueError, match="'llm' mode only"):
        TurnFaithfulnessMetric(model=CountingJudge(), eval_mode="system_one")
    with pytest.raises(ValueError, match="replaces DeepEval's prompts"):
        KnowledgeRetentionMetric(model=CountingJudge(), evaluation_template=object)
    with pytest.raises(TypeError, match="both name the judge"):
        TurnFaithfulnessMetric(model=CountingJudge(), judge=CountingJudge())


# --------------------------------------------------------------------------- 3. a wrong turn


def test_turn_faithfulness_drops_when_exactly_one_turn_is_unsupported() -> None:
    good = TurnFaithfulnessMetric(threshold=0.7, model=scripted_judge())
    assert good.measure(refund_case()) == 1.0
    assert good.success is True
    bad = TurnFaithfulnessMetric(threshold=0.7, model=scripted_judge())
    value = bad.measure(refund_case(second="Sale items can be refunded within 60 days."))
    assert value == pytest.approx(2 / 3)
    assert bad.success is False
    assert bad.error is None
    assert {at: s.value for at, s in bad.turn_scores.items()} == {1: 1.0, 3: 0.0, 5: 1.0}
    assert bad.reason is not None
    assert bad.reason.startswith("0.67 = mean faithfulness over 3 turns; lowest turns[3] 0.00")
    assert "contradicted" in bad.reason


def test_turn_faithfulness_counts_what_the_conversation_said_unless_told_not_to() -> None:
    # The third answer repeats the first turn's passage, not its own.
    case = refund_case()
    case.turns[5] = DeepEvalTurn(
        role="assistant",
        content="The refund window is 30 days.",
        retrieval_context=["Gift cards are not refundable."],
    )
    conversation_wide = TurnFaithfulnessMetric(model=scripted_judge())
    assert conversation_wide.measure(case) == 1.0
    claim = conversation_wide.turn_scores[5].details["claims"][0]  # type: ignore[index]
    assert claim["source"] == "turn"
    assert claim["turn"] == 1
    turn_only = TurnFaithfulnessMetric(model=scripted_judge(), support="turn")
    assert turn_only.measure(case) == pytest.approx(2 / 3)
    (copy,) = copy_metrics([turn_only])
    assert copy.support == "turn"
    assert copy.metric.support == "turn"


def test_turn_relevancy_drops_on_the_noncommittal_turn() -> None:
    good = TurnRelevancyMetric(model=scripted_judge(), embedder=HashEmbedder())
    fine = good.measure(refund_case())
    assert fine is not None
    assert fine > 0.0
    assert all((s.value or 0) > 0 for s in good.turn_scores.values())
    bad = TurnRelevancyMetric(model=scripted_judge(), embedder=HashEmbedder())
    value = bad.measure(refund_case(second="Sorry, I cannot help with that."))
    assert bad.turn_scores[3].value == 0.0
    assert value == pytest.approx(sum(s.value or 0 for s in bad.turn_scores.values()) / 3)
    assert value is not None
    assert value < fine


@pytest.mark.parametrize(
    "cls",
    [TurnContextualPrecisionMetric, TurnContextualRecallMetric, TurnContextualRelevancyMetric],
    ids=["precision", "recall", "relevancy"],
)
def test_context_turn_metrics_drop_on_the_turn_that_retrieved_junk(
    cls: type[DeepEvalConversationalMetric],
) -> None:
    good = cls(model=scripted_judge())
    assert good.measure(refund_case()) == 1.0
    bad = cls(model=scripted_judge())
    junk = ("JUNK about shipping times.",)
    assert bad.measure(refund_case(second_contexts=junk)) == pytest.approx(2 / 3)
    assert {at: s.value for at, s in bad.turn_scores.items()} == {1: 1.0, 3: 0.0, 5: 1.0}
    assert bad.reason is not None
    assert "lowest turns[3] 0.00" in bad.reason


def test_a_turn_that_retrieved_nothing_is_left_out_of_the_mean_and_named() -> None:
    metric = TurnContextualPrecisionMetric(model=scripted_judge())
    assert metric.measure(refund_case(second_contexts=())) == 1.0
    assert sorted(metric.turn_scores) == [1, 3, 5]
    assert metric.turn_scores[3].value is None  # skipped, with its reason
    assert metric.reason is not None
    assert "not in the mean:" in metric.reason
    assert "turns[3]: skipped" in metric.reason


def test_strict_mode_counts_each_imperfect_turn_as_zero_as_deepeval_does() -> None:
    case = refund_case(second="Sale items can be refunded within 14 days. They cost 5 euros.")
    lenient = TurnFaithfulnessMetric(model=scripted_judge())
    assert lenient.measure(case) == pytest.approx((1 + 0.5 + 1) / 3)
    strict = TurnFaithfulnessMetric(model=scripted_judge(), strict_mode=True)
    assert strict.threshold == 1.0
    assert strict.measure(case) == pytest.approx(2 / 3)
    assert strict.success is False


def test_a_failed_turn_is_an_error_never_a_low_score() -> None:
    def reply(messages: list[Message]) -> Any:
        text = "\n".join(m["content"] for m in messages)
        if "60 days" in _block(text, "ANSWER"):  # that turn's own answer, not its history
            return "not json at all"
        return scripted_judge().script["*"](messages)  # type: ignore[operator]

    metric = TurnFaithfulnessMetric(model=ScriptedJudge({"*": reply}), max_retries=0)
    value = metric.measure(refund_case(second="Sale items can be refunded within 60 days."))
    assert value is None
    assert metric.score is None
    assert metric.success is False
    assert metric.error is not None
    assert metric.error.startswith("1 of 3 turns failed")
    assert "turns[3]" in metric.error


def test_contextual_precision_needs_an_expected_outcome_as_deepevals_does() -> None:
    case = refund_case(expected_outcome=None)
    theirs = deepevals_own("TurnContextualPrecisionMetric")
    with pytest.raises(MissingTestCaseParamsError) as want:
        theirs.measure(case, _show_indicator=False)
    ours = TurnContextualPrecisionMetric(model=scripted_judge())
    with pytest.raises(MissingTestCaseParamsError) as got:
        ours.measure(case)
    assert str(got.value) == str(want.value)
    assert ours.error == str(want.value)
    # a turn's own reference (kept through DeepEval by ragbridge) makes it unnecessary
    conversation = from_conversational_test_case(case)
    turns = [
        t.model_copy(update={"reference": t.content}) if t.role == "assistant" else t
        for t in conversation.turns
    ]
    labelled = to_conversational_test_case(conversation.model_copy(update={"turns": turns}))
    assert ours.measure(labelled) == 1.0


def test_a_single_turn_test_case_is_refused_with_deepevals_message() -> None:
    metric = TurnFaithfulnessMetric(model=CountingJudge())
    with pytest.raises(ValueError, match=r"not of type 'ConversationalTestCase'.*'Turn Faith"):
        metric.measure(LLMTestCase(input="q", actual_output="a"))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- 4. conversation level

FORGOT = {
    "facts": [
        {"fact": "refunds for sale items", "said_in": 3, "reason": "r", "verdict": "kept",
         "broken_in": None},
        {"fact": "the window is asked for", "said_in": 1, "reason": "r",
         "verdict": "contradicted", "broken_in": 4},
    ],
    "intentions": [
        {"intention": "refund window", "asked_in": 1, "reason": "r", "verdict": "met",
         "met_in": 2},
        {"intention": "gift cards", "asked_in": 5, "reason": "r", "verdict": "unmet",
         "met_in": None},
    ],
    "outcome": [],
}  # fmt: skip


def test_knowledge_retention_drops_on_the_turn_that_contradicted_the_user() -> None:
    metric = KnowledgeRetentionMetric(model=scripted_judge(FORGOT))
    assert metric.measure(refund_case()) == pytest.approx(2 / 3)
    assert metric.last_score is not None
    assert metric.last_score.details["failing_turns"] == [3]  # type: ignore[index]
    assert metric.reason is not None
    assert "turn 3 contradicted" in metric.reason
    kept = {**FORGOT, "facts": [FORGOT["facts"][0]]}
    assert KnowledgeRetentionMetric(model=scripted_judge(kept)).measure(refund_case()) == 1.0


def test_conversation_completeness_drops_on_the_unmet_intention() -> None:
    metric = ConversationCompletenessMetric(model=scripted_judge(FORGOT))
    case = refund_case(expected_outcome=None)
    assert metric.measure(case) == pytest.approx(1 / 2)
    assert metric.reason is not None
    assert "'gift cards' (asked in turn 4)" in metric.reason
    # the expected outcome, when given, counts as one more intention (met here)
    assert metric.measure(refund_case()) == pytest.approx(2 / 3)


def test_a_conversation_with_nothing_to_check_is_an_error_not_a_perfect_score() -> None:
    metric = KnowledgeRetentionMetric(model=scripted_judge())
    assert metric.measure(refund_case()) is None
    assert metric.error is not None
    assert metric.error.startswith("skipped: the user stated no fact")
    assert metric.success is False


def test_both_conversation_metrics_on_one_scorer_make_one_call_per_conversation() -> None:
    judge = scripted_judge(FORGOT)
    scorer = Scorer(["knowledge_retention", "conversation_completeness"], judge=judge)
    retention = KnowledgeRetentionMetric(scorer=scorer)
    completeness = ConversationCompletenessMetric(scorer=scorer)
    case = refund_case()
    assert retention.measure(case) == pytest.approx(2 / 3)
    assert completeness.measure(case) == pytest.approx(2 / 3)
    assert [c.task for c in judge.calls] == ["conversation.assess"]
    assert retention.input_tokens
    assert not completeness.input_tokens


def test_two_conversations_with_the_same_turns_and_different_outcomes_are_not_confused() -> None:
    def reply(messages: list[Message]) -> dict[str, Any]:
        text = messages[-1]["content"]
        verdict = "met" if "refund rules" in text else "unmet"
        return {**FORGOT, "outcome": [{"reason": "r", "verdict": verdict, "met_in": None}]}

    # on a scorer that keeps the record for its other metric, as a shared one does
    scorer = Scorer(
        ["knowledge_retention", "conversation_completeness"], judge=ScriptedJudge({"*": reply})
    )
    metric = ConversationCompletenessMetric(scorer=scorer)
    assert metric.measure(refund_case()) == pytest.approx(2 / 3)
    other = refund_case(expected_outcome="The user buys a gift card.")
    assert metric.measure(other) == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- 5. deepeval.evaluate

# DeepEval's own example for its Turn* RAG metrics (deepeval.com/docs/metrics-turn-contextual-
# recall and its precision and relevancy pages), read as it is written there.
DOCS_CASE = ConversationalTestCase(
    turns=[
        DeepEvalTurn(role="user", content="What if these shoes don't fit?"),
        DeepEvalTurn(
            role="assistant",
            content="We offer a 30-day full refund at no extra cost.",
            retrieval_context=[
                "All customers are eligible for a 30 day full refund at no extra cost."
            ],
        ),
    ],
    expected_outcome="The chatbot must explain the store policies like refunds, discounts, ..etc.",
)


def test_deepevals_docs_example_reads_as_is_and_scores() -> None:
    conversation = from_conversational_test_case(DOCS_CASE)
    assert [t.role for t in conversation.turns] == ["user", "assistant"]
    assert conversation.turns[1].contexts[0].text.startswith("All customers are eligible")
    metric = TurnContextualRecallMetric(threshold=0.5, model=scripted_judge())
    assert metric.measure(DOCS_CASE) == 1.0
    assert metric.success is True
    # the expected outcome served as the turn's reference, as in DeepEval's metric
    statements = metric.turn_scores[1].details["statements"]  # type: ignore[index]
    assert statements[0]["statement"].startswith("The chatbot must explain the store policies")


def test_deepeval_evaluate_runs_every_drop_in_offline_with_deepevals_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    judge = scripted_judge(FORGOT)
    metrics = [_drop_in(cls, model=judge) for cls in DROP_INS]
    result = deepeval.evaluate(test_cases=[DOCS_CASE, refund_case()], metrics=metrics)
    out = capsys.readouterr()
    assert BANNER not in out.out + out.err
    names = [deepevals_own(cls.__name__).__name__ for cls in DROP_INS]
    by_name = {r.name: r for r in result.test_results}
    assert len(by_name) == 2
    for test_result in result.test_results:
        assert test_result.metrics_data is not None
        assert [m.name for m in test_result.metrics_data] == names
    refunds = next(r for r in result.test_results if "refund window" in str(r.turns))
    assert refunds.metrics_data is not None
    scores = {m.name: m.score for m in refunds.metrics_data}
    assert scores["Turn Faithfulness"] == 1.0
    assert scores["Knowledge Retention"] == pytest.approx(2 / 3)
    for data in refunds.metrics_data:
        assert data.error is None, (data.name, data.error)
        assert data.score is not None
        assert 0.0 <= data.score <= 1.0


def test_deepevals_copies_share_the_scorer_and_keep_the_configuration() -> None:
    metric = TurnContextualRecallMetric(0.6, CountingJudge(), strict_mode=True, window_size=4)
    (copy,) = copy_metrics([metric])
    assert type(copy) is TurnContextualRecallMetric
    assert copy is not metric
    assert copy.scorer is metric.scorer
    assert (copy.threshold, copy.strict_mode, copy.window_size) == (1.0, True, 4)


def test_assert_test_names_the_failed_conversational_metric_by_deepevals_name() -> None:
    metric = TurnFaithfulnessMetric(threshold=0.7, model=scripted_judge())
    deepeval.assert_test(refund_case(), [metric])
    bad = refund_case(second="Sale items can be refunded within 60 days.")
    with pytest.raises(
        AssertionError, match=r"Turn Faithfulness \(score: 0\.6\d*, threshold: 0\.7"
    ):
        deepeval.assert_test(bad, [metric])


def test_a_measure_runs_on_the_callers_event_loop() -> None:
    metric = TurnFaithfulnessMetric(model=scripted_judge())
    assert asyncio.run(metric.a_measure(refund_case())) == 1.0
    assert metric.success is True


# --------------------------------------------------------------------------- 6. cost


def _benchmark() -> Any:
    path = ROOT / "benchmarks" / "conversation_cost.py"
    spec = importlib.util.spec_from_file_location("conversation_cost", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_the_cost_benchmark_pins_three_calls_a_turn_and_one_a_conversation() -> None:
    bench = _benchmark()
    conversations = bench.make_conversations(4)
    turns = sum(len(c.assistant_turns()) for c in conversations)
    assert turns == 16
    judge, evaluation = bench.run_ours(conversations, TURN_METRICS, CONVERSATION_METRICS)
    assert judge.calls == 3 * turns + len(conversations)
    grouped = bench.calls_by_contexts(evaluation, conversations)
    assert sorted(grouped) == [3, 4, 5]  # at any number of contexts
    assert all(calls == [3] * len(calls) for calls in grouped.values())
    with_relevance, _ = bench.run_ours(conversations, bench.WITH_RELEVANCE, ())
    assert with_relevance.calls == 3 * turns
    # the drop-ins, sharing one scorer, cost the same through deepeval.evaluate
    counting = CountingJudge()
    scorer = Scorer([*TURN_METRICS, *CONVERSATION_METRICS], judge=counting, embedder=HashEmbedder())
    drop_ins = [cls(scorer=scorer) for cls in DROP_INS if cls is not TurnContextualRelevancyMetric]
    cases = [to_conversational_test_case(c) for c in conversations]
    deepeval.evaluate(test_cases=cases, metrics=drop_ins)
    assert counting.calls == 3 * turns + len(conversations)
