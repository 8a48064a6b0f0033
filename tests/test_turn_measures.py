"""Turn measures (issue 31): the existing measures judge a conversation's turn with the
conversation so far, count a claim the conversation itself supports, skip the retrieval measures
on a turn that retrieved nothing, and flag a turn that needed documents (``missed_retrieval``).

Scripted judges here decide from what the prompt shows (a subject named in the question block,
a fact found in a numbered context), so a test fails when a turn is shown the wrong part of its
conversation: nothing of it, a later turn, or a source labelled with the wrong position.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import Context, Sample, estimate, evaluate
from ragbridge.core.conversation import Conversation
from ragbridge.core.criteria.inputs import sample_values
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.metrics import (
    ContextPrecision,
    ContextRecall,
    ContextRelevance,
    Faithfulness,
    Hallucination,
    Metric,
    MissedRetrieval,
    resolve,
)
from ragbridge.core.prompts.history import asked, render_history, user_side
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge
from ragbridge.core.turn import ToolCall, Turn

# ----------------------------------------------------------------- single-turn prompts unchanged
# The helpers between the two markers import only what ragbridge had before turns were judged,
# so the same code computed SINGLE_TURN_DIGEST on the tree before this change (git archive of
# HEAD 99b7428, the editable install's finder taken off sys.meta_path).

DIGEST_RUNS: tuple[tuple[str, ...], ...] = (
    (
        "faithfulness",
        "hallucination",
        "answer_relevance",
        "context_precision",
        "context_recall",
        "context_relevance",
        "context_relevance_ranked",
        "answer_correctness",
        "correctness",
        "helpfulness",
        "groundedness",
        "document_relevance",
    ),
    ("context_precision",),
    ("context_recall",),
    ("context_relevance",),
    ("context_precision", "context_recall"),
    ("context_precision", "context_relevance"),
    ("answer_correctness",),
)


def single_turn_samples(**extra: Any) -> list[Sample]:
    contexts = [
        Context(id="d1", text="The Eiffel Tower is a wrought-iron lattice tower in Paris."),
        Context(id="d2", text="It was completed in 1889 and is 330 metres tall."),
    ]
    return [
        Sample(
            id="with-reference",
            question="Tell me about the Eiffel Tower.",
            answer="The Eiffel Tower is a wrought-iron tower in Paris, completed in 1889.",
            contexts=contexts,
            reference="A wrought-iron tower in Paris, finished in 1889, 330 metres tall.",
            **extra,
        ),
        Sample(
            id="no-reference",
            question="How tall is the Eiffel Tower?",
            answer="It is 330 metres tall.",
            contexts=contexts[1:],
            **extra,
        ),
        Sample(
            id="no-contexts",
            question="Where is the Eiffel Tower?",
            answer="It is in Paris.",
            reference="In Paris.",
            **extra,
        ),
    ]


def prompt_digest(samples: list[Sample]) -> str:
    """sha256 of every prompt the LLM measures send for ``samples`` in `DIGEST_RUNS`."""
    from ragbridge.core import evaluate as run
    from ragbridge.core.testing import CountingJudge as Counting
    from ragbridge.core.testing import HashEmbedder as Hashing

    @dataclass
    class Recorder(Counting):
        prompts: list[str] = field(default_factory=list)

        async def generate(self, messages: Any, *, schema: Any = None) -> Any:
            self.prompts.append(json.dumps(list(messages), sort_keys=True))
            return await super().generate(messages, schema=schema)

    seen: list[str] = []
    for names in DIGEST_RUNS:
        judge = Recorder(list_length=2)
        run(samples, list(names), judge=judge, embedder=Hashing())
        seen.extend(sorted(judge.prompts))
    return hashlib.sha256("\x00".join(seen).encode()).hexdigest()


# ---------------------------------------------------------------------------- end of the helpers

SINGLE_TURN_DIGEST = "aff6a936de81f0c64baa5f6f70ea907a3e6fa124fc1b0948a1f48f3172ff4e10"
"""`prompt_digest` of `single_turn_samples` on the tree before turns were judged. A deliberate
change of a template (with its version bumped) changes it: recompute it then."""


def test_single_turn_prompts_are_byte_identical_to_before_turns_were_judged() -> None:
    assert prompt_digest(single_turn_samples()) == SINGLE_TURN_DIGEST


def test_the_first_question_of_a_conversation_sends_the_prompts_of_a_plain_sample() -> None:
    # history == [] is a conversation's first turn: nothing before it, so nothing changes
    assert prompt_digest(single_turn_samples(history=[])) == SINGLE_TURN_DIGEST


def test_a_criterion_reading_the_question_sees_the_conversation_so_far() -> None:
    plain = Sample(id="p", question="How tall is it?", answer="330 m.")
    assert sample_values(["question"], plain) == {"question": "How tall is it?"}
    turn = EIFFEL.turn_sample(3)
    shown = sample_values(["question", "answer"], turn)["question"]
    assert shown == asked(turn)
    assert "Tell me about the Eiffel Tower." in shown
    assert shown.endswith("How tall is it?")


# --------------------------------------------------------------------------------- conversations

EIFFEL_CONTEXTS = [
    Context(id="e", text="The Eiffel Tower is 330 metres tall."),
    Context(id="s", text="The Statue of Liberty is 93 metres tall."),
]


def subject_conversation(subject: str, cid: str) -> Conversation:
    """A follow-up whose "it" is ``subject``, named only in the first user turn; a later turn
    names the other subject, which the follow-up's judge must not see."""
    other = "Statue of Liberty" if subject == "Eiffel Tower" else "Eiffel Tower"
    return Conversation(
        id=cid,
        turns=[
            Turn(role="user", content=f"Tell me about the {subject}."),
            Turn(role="assistant", content="It is a famous landmark."),
            Turn(role="user", content="How tall is it?"),
            Turn(role="assistant", content="It is very tall.", contexts=EIFFEL_CONTEXTS),
            Turn(role="user", content=f"And the {other}?"),
            Turn(role="assistant", content="That one is shorter.", contexts=EIFFEL_CONTEXTS),
        ],
    )


EIFFEL = subject_conversation("Eiffel Tower", "eiffel")
LIBERTY = subject_conversation("Statue of Liberty", "liberty")

POLICY = Context(
    id="p1", text="Parental leave is 16 weeks for full-time staff and pro rata for part-time staff."
)
TWINS = Context(id="t1", text="Multiple births add 4 weeks of parental leave.")

LEAVE = Conversation(
    id="leave",
    turns=[
        Turn(role="user", content="I work 20 hours a week. How much parental leave do I get?"),
        Turn(role="assistant", content="Part-time staff get leave pro rata.", contexts=[POLICY]),
        Turn(role="user", content="And if I have twins?"),
        Turn(
            role="assistant",
            content="You work 20 hours a week. Twins add 4 weeks of leave.",
            contexts=[TWINS],
            reference="Twins add 4 weeks.",
        ),
        Turn(role="user", content="Thanks. Is full-time leave longer?"),
        Turn(role="assistant", content="Yes, full-time staff get 16 weeks of leave."),
    ],
)

# ------------------------------------------------------------------------ judges that read prompts

_BLOCK = r"<<<BEGIN {0}>>>\n(.*?)\n<<<END {0}>>>"
_CONTEXT = re.compile(r"<<<BEGIN CONTEXT (\d+)>>>\n(.*?)\n<<<END CONTEXT \1>>>", re.S)
_CLAIM = re.compile(r"<<<BEGIN CLAIM (\d+)>>> (.*?) <<<END CLAIM \1>>>", re.S)


def block(messages: Sequence[Message], label: str) -> str:
    found = re.search(_BLOCK.format(label), messages[-1]["content"], re.S)
    assert found is not None, f"no {label} block"
    return found.group(1)


def subject_relevance(messages: list[Message]) -> dict[str, Any]:
    """A context is relevant when it names a landmark the question block names."""
    question = block(messages, "QUESTION")
    named = {s for s in ("Eiffel Tower", "Statue of Liberty") if s in question}
    texts = [text for _, text in _CONTEXT.findall(messages[-1]["content"])]
    relevant = [any(s in text for s in named) for text in texts]
    return {"verdicts": [{"reason": "by subject", "relevant": r} for r in relevant]}


CLAIMS = {
    "You work 20 hours a week. Twins add 4 weeks of leave.": [
        "The user works 20 hours a week.",
        "Twins add 4 weeks of leave.",
    ],
    "Yes, full-time staff get 16 weeks of leave.": ["Full-time staff get 16 weeks of leave."],
}
EVIDENCE = {
    "The user works 20 hours a week.": "I work 20 hours a week",
    "Twins add 4 weeks of leave.": "add 4 weeks",
    "Full-time staff get 16 weeks of leave.": "16 weeks for full-time",
}


def analyze(messages: list[Message]) -> dict[str, Any]:
    claims = CLAIMS[block(messages, "ANSWER")]
    return {"claims": claims, "questions": ["q1", "q2", "q3"], "noncommittal": False}


def fact_check(messages: list[Message]) -> dict[str, Any]:
    """Each claim is supported by the first numbered context holding its evidence."""
    text = messages[-1]["content"]
    contexts = _CONTEXT.findall(text)
    verdicts = []
    for _, claim in _CLAIM.findall(text):
        number = next((int(n) for n, body in contexts if EVIDENCE[claim] in body), None)
        verdicts.append(
            {
                "reason": "found" if number else "not found",
                "verdict": "supported" if number else "unsupported",
                "context": number,
            }
        )
    return {"verdicts": verdicts}


def cell(result: Evaluation, sample_id: str, metric: str) -> Score:
    score = result.get(sample_id, metric)
    assert score is not None
    return score


# ------------------------------------------------------------------------------ the question shown


def test_asked_renders_the_turns_before_the_question_and_nothing_after() -> None:
    turn = EIFFEL.turn_sample(3)
    shown = asked(turn)
    assert shown.startswith(render_history(EIFFEL.turns[:2]))
    assert "user: Tell me about the Eiffel Tower." in shown
    assert "assistant: It is a famous landmark." in shown
    assert shown.endswith("\nHow tall is it?")
    assert "Statue of Liberty" not in shown  # turn 4 comes later
    assert asked(EIFFEL.turn_sample(1)) == "Tell me about the Eiffel Tower."  # history == []


def test_tool_turns_are_shown_short_and_calls_by_name() -> None:
    long_result = "row " * 200
    sample = Sample(
        id="t",
        question="And the total?",
        answer="42.",
        history=[
            Turn(role="user", content="Sum the rows."),
            Turn(role="assistant", tool_calls=[ToolCall(name="sql", args={"q": "x"}, id="c1")]),
            Turn(role="tool", content=long_result, tool_call_id="c1"),
        ],
    )
    shown = asked(sample)
    assert "assistant: [called sql]" in shown
    tool_line = next(line for line in shown.splitlines() if line.startswith("tool result:"))
    assert len(tool_line) < 220


def test_a_follow_up_is_judged_with_the_turn_that_names_its_subject() -> None:
    judge = ScriptedJudge({"context_relevance.judge": subject_relevance})
    samples = [
        EIFFEL.turn_sample(3),
        LIBERTY.turn_sample(3),
        Sample(id="bare", question="How tall is it?", answer="x", contexts=EIFFEL_CONTEXTS),
    ]
    result = evaluate(samples, ["context_relevance"], judge=judge)
    relevant = {
        sid: [c["relevant"] for c in cell(result, sid, "context_relevance").details["contexts"]]
        for sid in ("eiffel#3", "liberty#3", "bare")
    }
    assert relevant == {
        "eiffel#3": [True, False],  # "it" is the Eiffel Tower, from turn 0
        "liberty#3": [False, True],  # the same words after another first turn
        "bare": [False, False],  # nothing says what "it" is
    }


def test_every_judge_prompt_that_shows_the_question_shows_the_conversation() -> None:
    recorder = _Recorder()
    turn = EIFFEL.turn_sample(3).model_copy(update={"reference": "330 metres."})
    names = [*DIGEST_RUNS[0], "missed_retrieval"]
    evaluate([turn], names, judge=recorder, embedder=HashEmbedder())
    evaluate([turn], ["context_precision"], judge=recorder)
    evaluate([turn], ["context_recall"], judge=recorder)
    questions = [m for m in recorder.prompts if "<<<BEGIN QUESTION>>>" in m]
    assert len(questions) >= 8
    for prompt in questions:
        assert "Tell me about the Eiffel Tower." in prompt
        assert "Statue of Liberty" not in prompt.split("<<<END QUESTION>>>")[0]


def test_answer_relevance_compares_with_the_question_the_follow_up_stands_for() -> None:
    turn = EIFFEL.turn_sample(3)
    assert user_side(turn) == "Tell me about the Eiffel Tower. How tall is it?"
    questions = ["How tall is the Eiffel Tower?"] * 3
    generated = {"claims": ["x"], "questions": questions, "noncommittal": False}
    judge = ScriptedJudge({"answer.analyze": generated})
    bare = turn.model_copy(update={"history": None, "id": "bare"})
    result = evaluate([turn, bare], ["answer_relevance"], judge=judge, embedder=HashEmbedder())
    in_context = cell(result, "eiffel#3", "answer_relevance").value
    alone = cell(result, "bare", "answer_relevance").value
    assert in_context is not None
    assert alone is not None
    assert in_context > alone


# ------------------------------------------------------------------------- the cost of growing


@dataclass
class _Recorder(CountingJudge):
    prompts: list[str] = field(default_factory=list)

    async def generate(self, messages: Sequence[Message], *, schema: Any = None) -> JudgeReply:
        self.prompts.append("\n".join(m["content"] for m in messages))
        return await super().generate(messages, schema=schema)


TURN_METRICS = ["faithfulness", "answer_relevance", "context_precision", "context_recall"]


def turn_samples(conversation: Conversation) -> list[Sample]:
    return [conversation.turn_sample(t.position) for t in conversation.assistant_turns()]


@pytest.mark.parametrize("reuse_results", [True, False], ids=["kept-scores", "reply-cache"])
def test_growing_a_conversation_costs_only_the_new_turns_calls(
    tmp_path: Path, reuse_results: bool
) -> None:
    db = tmp_path / "cache.sqlite"
    short = Conversation(id="leave", turns=LEAVE.turns[:4])
    first = CountingJudge()
    opts: dict[str, Any] = {"embedder": HashEmbedder(), "reuse_results": reuse_results}
    evaluate(turn_samples(short), TURN_METRICS, judge=first, cache=db, **opts)
    assert first.calls > 0

    grown = Conversation(id="leave", turns=[*LEAVE.turns, *EIFFEL.turns[2:4]])  # 2 more turns
    again = CountingJudge()
    result = evaluate(turn_samples(grown), TURN_METRICS, judge=again, cache=db, **opts)

    alone = CountingJudge()
    new_turns = turn_samples(grown)[2:]
    evaluate(new_turns, TURN_METRICS, judge=alone, embedder=HashEmbedder())
    assert again.calls == alone.calls > 0
    assert again.by_task == alone.by_task
    assert len(list(result)) == 4 * len(TURN_METRICS)


def test_the_four_core_measures_cost_on_a_turn_what_they_cost_on_a_sample() -> None:
    turn = LEAVE.turn_sample(3)
    plain = turn.model_copy(update={"history": None, "id": "plain"})
    for sample in (turn, plain):
        judge = CountingJudge()
        evaluate([sample], TURN_METRICS, judge=judge, embedder=HashEmbedder())
        assert judge.by_task == {"answer.analyze": 1, "faithfulness.verify": 1, "context.assess": 1}


def test_a_turns_prompts_do_not_change_when_the_conversation_grows() -> None:
    before, after = _Recorder(), _Recorder()
    grown = Conversation(id="leave", turns=[*LEAVE.turns, *EIFFEL.turns[2:4]])
    evaluate([LEAVE.turn_sample(3)], TURN_METRICS, judge=before, embedder=HashEmbedder())
    evaluate([grown.turn_sample(3)], TURN_METRICS, judge=after, embedder=HashEmbedder())
    assert sorted(before.prompts) == sorted(after.prompts)


def test_the_estimate_is_exact_for_turns() -> None:
    samples = [*turn_samples(LEAVE), *turn_samples(EIFFEL)]
    names = [*TURN_METRICS, "context_relevance", "hallucination", "missed_retrieval"]
    for metrics in (names, ["faithfulness"], ["context_precision", "context_recall"]):
        judge = CountingJudge()
        evaluate(samples, metrics, judge=judge, embedder=HashEmbedder())
        planned = estimate(samples, metrics)
        assert planned.calls == judge.calls, metrics
        assert planned.by_template == {k: v for k, v in judge.by_task.items() if k}, metrics


# ------------------------------------------------------------------------- cross-turn support


def support_run(*metrics: Metric, sample: Sample) -> tuple[ScriptedJudge, list[Score]]:
    judge = ScriptedJudge({"answer.analyze": analyze, "faithfulness.verify": fact_check})
    result = evaluate([sample], list(metrics), judge=judge)
    return judge, [cell(result, sample.id, m.name) for m in metrics]


def test_a_fact_the_user_stated_two_turns_earlier_supports_the_claim_and_is_named() -> None:
    turn = LEAVE.turn_sample(3)  # the question is turn 2; the user said it in turn 0
    judge, (faithful, hallucinated) = support_run(Faithfulness(), Hallucination(), sample=turn)
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]  # still 2 calls
    assert faithful.value == 1.0
    assert hallucinated.value == 0.0
    user_fact, context_fact = faithful.details["claims"]
    assert user_fact["verdict"] == "supported"
    assert {k: user_fact[k] for k in ("source", "turn", "role", "context")} == {
        "source": "turn",
        "turn": 0,
        "role": "user",
        "context": None,
    }
    assert context_fact["context"] == 1
    assert context_fact["context_id"] == "t1"
    assert "source" not in context_fact  # the turn's own context, as for any sample
    assert "the contexts and the conversation" in (faithful.reason or "")


def test_support_turn_counts_only_the_turns_own_contexts() -> None:
    turn = LEAVE.turn_sample(3)
    _, (faithful, hallucinated) = support_run(
        Faithfulness(support="turn"), Hallucination(support="turn"), sample=turn
    )
    assert faithful.value == 0.5
    assert hallucinated.value == 0.5
    assert faithful.details["claims"][0]["verdict"] == "unsupported"
    assert "source" not in faithful.details["claims"][0]


def test_a_context_of_an_earlier_turn_supports_a_turn_that_retrieved_nothing() -> None:
    turn = LEAVE.turn_sample(5)
    assert turn.contexts == []
    judge, (faithful,) = support_run(Faithfulness(), sample=turn)
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
    assert faithful.value == 1.0
    (claim,) = faithful.details["claims"]
    assert (claim["source"], claim["turn"], claim["role"], claim["context_id"]) == (
        "turn",
        1,
        "assistant",
        "p1",
    )
    assert "this turn retrieved nothing" in (faithful.reason or "")
    # restricted to the turn, nothing backs it and no verify call is spent
    judge, (alone,) = support_run(Faithfulness(support="turn"), sample=turn)
    assert judge.tasks() == ["answer.analyze"]
    assert alone.value == 0.0


def test_support_is_checked_and_in_the_metrics_repr() -> None:
    with pytest.raises(ValueError, match="support must be one of"):
        Faithfulness(support="everything")
    assert "support='turn'" in repr(Hallucination(support="turn"))
    assert vars(Faithfulness())["support"] == "conversation"  # part of a kept Score's key


def test_the_offline_provider_counts_what_the_user_said_and_names_the_turn() -> None:
    turn = LEAVE.turn_sample(3)
    conv = resolve("faithfulness:offline")
    only_turn = Faithfulness("offline", support="turn")
    result = evaluate([turn], [conv], embedder=HashEmbedder())
    restricted = evaluate([turn], [only_turn], embedder=HashEmbedder())
    first = cell(result, "leave#3", "faithfulness").details["claims"][0]
    assert first["supported"] is True
    assert (first["source"], first["turn"], first["role"]) == ("turn", 0, "user")
    alone = cell(restricted, "leave#3", "faithfulness").details["claims"][0]
    assert alone["supported"] is False
    assert "source" not in alone


# ------------------------------------------------------------------------ turns with no retrieval


@pytest.mark.parametrize(
    "metric",
    [
        ContextPrecision(),
        ContextRecall(),
        ContextRelevance(),
        resolve("context_relevance_ranked"),
        ContextPrecision(provider="offline"),
        ContextRecall(provider="offline"),
    ],
    ids=lambda m: f"{m.name}:{m.provider}",
)
def test_a_turn_without_retrieval_skips_the_retrieval_measures(metric: Metric) -> None:
    turn = LEAVE.turn_sample(5)
    judge = CountingJudge()
    result = evaluate([turn], [metric], judge=judge, embedder=HashEmbedder())
    score = cell(result, "leave#5", metric.name)
    assert score.status == "skipped"
    assert "this turn retrieved nothing" in (score.reason or "")
    assert judge.calls == 0
    assert estimate([turn], [metric]).calls == 0
    # the same empty contexts on a plain sample keep their old policy (0.0 or missing_input)
    plain = turn.model_copy(update={"history": None})
    before = evaluate([plain], [metric], judge=CountingJudge(), embedder=HashEmbedder())
    assert cell(before, "leave#5", metric.name).status != "skipped"


def test_a_turn_with_contexts_is_still_judged() -> None:
    judge = CountingJudge()
    result = evaluate([LEAVE.turn_sample(3)], ["context_precision"], judge=judge)
    assert cell(result, "leave#3", "context_precision").status == "scored"
    assert judge.calls == 1


# ----------------------------------------------------------------------------- missed retrieval

HELP = Conversation(
    id="help",
    turns=[
        Turn(role="user", content="What is the parental leave policy?"),
        Turn(role="assistant", content="Full-time staff get 16 weeks.", contexts=[POLICY]),
        Turn(role="user", content="Thanks, that helps!"),
        Turn(role="assistant", content="You're welcome, glad to help."),
        Turn(role="user", content="When must I apply?"),
        Turn(role="assistant", content="Apply by 30 June through the Workday portal."),
    ],
)


def flags(result: Evaluation, conversation: Conversation) -> list[float | None]:
    return [
        cell(result, f"{conversation.id}#{t.position}", "missed_retrieval").value
        for t in conversation.assistant_turns()
    ]


def need_when_asked_to_apply(messages: list[Message]) -> dict[str, Any]:
    latest = block(messages, "QUESTION").rsplit("\n", 1)[-1]
    needed = "apply" in latest
    return {"new_facts": [], "reason": "deadline" if needed else "courtesy", "needed": needed}


def test_missed_retrieval_flags_exactly_the_turn_that_needed_documents() -> None:
    judge = ScriptedJudge({"missed_retrieval.judge": need_when_asked_to_apply})
    result = evaluate(turn_samples(HELP), [MissedRetrieval()], judge=judge)
    assert flags(result, HELP) == [0.0, 0.0, 1.0]
    assert judge.tasks() == ["missed_retrieval.judge"] * 2  # none for the turn that retrieved
    last = judge.calls[-1].messages[-1]["content"]
    assert "user: Thanks, that helps!" in last  # the judge reads the conversation so far
    assert cell(result, "help#1", "missed_retrieval").reason == "this turn retrieved 1 context"


def test_stated_facts_nobody_retrieved_are_a_missed_retrieval_even_if_not_needed() -> None:
    reply = {"new_facts": ["Apply by 30 June."], "reason": "a date", "needed": False}
    judge = ScriptedJudge({"missed_retrieval.judge": reply})
    result = evaluate([HELP.turn_sample(5)], [MissedRetrieval()], judge=judge)
    score = cell(result, "help#5", "missed_retrieval")
    assert score.value == 1.0
    assert score.details["new_facts"] == ["Apply by 30 June."]


def test_missed_retrieval_offline_flags_exactly_the_turn_that_needed_documents() -> None:
    result = evaluate(turn_samples(HELP), ["missed_retrieval:offline"])
    assert flags(result, HELP) == [0.0, 0.0, 1.0]
    found = cell(result, "help#5", "missed_retrieval").details
    assert {"30", "june", "workday"} <= set(found["new_names_numbers"])


def test_missed_retrieval_offline_reads_what_earlier_turns_retrieved() -> None:
    # "16 weeks" came from turn 1's context: a later turn repeating it needed no search
    repeat = Conversation(
        id="repeat",
        turns=[
            *HELP.turns[:2],
            Turn(role="user", content="Remind me, how long for full-time staff?"),
            Turn(role="assistant", content="Full-time staff get 16 weeks of parental leave."),
        ],
    )
    result = evaluate(turn_samples(repeat), ["missed_retrieval:offline"])
    assert flags(result, repeat) == [0.0, 0.0]


def test_missed_retrieval_reads_a_plain_sample_as_a_conversation_of_one_question() -> None:
    plain = Sample(id="p", question="When must I apply?", answer="By 30 June, via Workday.")
    result = evaluate([plain], ["missed_retrieval:offline"])
    assert cell(result, "p", "missed_retrieval").value == 1.0
    judge = CountingJudge()
    evaluate([plain], ["missed_retrieval"], judge=judge)
    assert judge.by_task == {"missed_retrieval.judge": 1}


def test_missed_retrieval_is_registered_with_both_providers() -> None:
    measure = REGISTRY.measure("missed_retrieval")
    assert measure.higher_is_better is False
    assert [p.name for p in REGISTRY.providers("missed_retrieval")] == ["llm", "offline"]
    assert isinstance(resolve("missed_retrieval"), MissedRetrieval)
    assert resolve("missed_retrieval:offline").needs_judge is False
