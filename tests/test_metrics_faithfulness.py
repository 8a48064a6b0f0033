"""Faithfulness and Hallucination on scripted judges: values, edge policy, shared-call usage."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import PermanentJudgeError
from ragbridge.core.metrics import Faithfulness, Hallucination, MetricContext
from ragbridge.core.prompts import get
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import ScriptedJudge

CLAIMS = [
    "The Eiffel Tower is made of wrought iron.",
    "The Eiffel Tower is in Paris.",
    "The Eiffel Tower was completed in 1889.",
    "The Eiffel Tower is 500 metres tall.",
]

SAMPLE = Sample(
    id="s1",
    question="Tell me about the Eiffel Tower.",
    answer="The Eiffel Tower is a wrought-iron tower in Paris. It was completed in 1889 and "
    "is 500 metres tall.",
    contexts=[
        Context(text="The Eiffel Tower is a wrought-iron lattice tower in Paris.", id="d1"),
        Context(text="The tower was completed in 1889 and is 330 metres tall.", id="d2"),
    ],
)

ANALYSIS = {
    "claims": CLAIMS,
    "questions": ["What is the Eiffel Tower?", "Where is it?", "When was it built?"],
    "noncommittal": False,
}


def verdict(v: str, context: int | None, reason: str = "because") -> dict[str, Any]:
    return {"reason": reason, "verdict": v, "context": context}


THREE_OF_FOUR = {
    "verdicts": [
        verdict("supported", 1),
        verdict("supported", 1),
        verdict("supported", 2),
        verdict("unsupported", None, "no context gives that height"),
    ]
}

MIXED = {
    "verdicts": [
        verdict("supported", 1),
        verdict("supported", 1),
        verdict("supported", 2),
        verdict("contradicted", 2, "context 2 says 330 metres"),
    ]
}


def make(script: dict[str, Any]) -> tuple[ScriptedJudge, MetricContext]:
    judge = ScriptedJudge(script)
    return judge, MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))


def score(metric: Faithfulness | Hallucination, sample: Sample, ctx: MetricContext) -> Score:
    return asyncio.run(metric.score(sample, ctx))


def both(sample: Sample, ctx: MetricContext) -> tuple[Score, Score]:
    async def run() -> tuple[Score, Score]:
        f = await Faithfulness().score(sample, ctx)
        h = await Hallucination().score(sample, ctx)
        return f, h

    return asyncio.run(run())


def test_three_of_four_claims_supported() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": THREE_OF_FOUR})
    s = score(Faithfulness(), SAMPLE, ctx)
    assert s.value == 0.75
    assert s.failure is None
    assert s.reason == "3 of 4 claims supported by the contexts (0 contradicted, 1 unsupported)"
    assert s.provider == "llm"
    assert s.judge_model == "scripted-judge"
    assert s.prompt_version == "answer.analyze@2+faithfulness.verify@2"
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
    assert s.usage.calls == 2


def test_details_list_each_claim_with_verdict_context_and_reason() -> None:
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": MIXED})
    s = score(Faithfulness(), SAMPLE, ctx)
    assert isinstance(s.details, dict)
    assert s.details["supported"] == 3
    assert s.details["contradicted"] == 1
    assert s.details["unsupported"] == 0
    assert s.details["total"] == 4
    assert s.details["claims"][3] == {
        "claim": "The Eiffel Tower is 500 metres tall.",
        "verdict": "contradicted",
        "context": 2,
        "context_id": "d2",
        "reason": "context 2 says 330 metres",
    }
    assert [c["context_id"] for c in s.details["claims"]] == ["d1", "d1", "d2", "d2"]


def test_verify_gets_every_claim_and_context_in_one_call() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": THREE_OF_FOUR})
    score(Faithfulness(), SAMPLE, ctx)
    verify = judge.calls[1]
    user = verify.messages[1]["content"]
    for i, claim in enumerate(CLAIMS, start=1):
        assert f"<<<BEGIN CLAIM {i}>>> {claim} <<<END CLAIM {i}>>>" in user
    for i, context in enumerate(SAMPLE.contexts, start=1):
        assert f"<<<BEGIN CONTEXT {i}>>>\n{context.text}\n<<<END CONTEXT {i}>>>" in user
    assert verify.schema is get("faithfulness.verify").schema


def test_hallucination_is_the_complement_on_the_same_verdicts() -> None:
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": MIXED})
    f, h = both(SAMPLE, ctx)
    assert f.value == 0.75
    assert h.value == 0.25
    assert h.reason == "1 of 4 claims not backed by the contexts (1 contradicted, 0 unsupported)"
    assert h.details == f.details


def test_hallucination_counts_contradicted_and_unsupported() -> None:
    verdicts = {
        "verdicts": [
            verdict("contradicted", 1),
            verdict("unsupported", None),
            verdict("unsupported", None),
            verdict("supported", 2),
        ]
    }
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": verdicts})
    assert score(Hallucination(), SAMPLE, ctx).value == 0.75


def test_shared_calls_are_made_once_and_paid_by_the_first_metric() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": THREE_OF_FOUR})
    f, h = both(SAMPLE, ctx)
    assert len(judge.calls) == 2
    assert f.usage.calls == 2
    assert f.usage.prompt_tokens > 0
    assert h.usage.calls == 0
    assert h.usage.prompt_tokens == 0
    assert h.value == 0.25


def test_shared_calls_under_gather_are_made_once() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": THREE_OF_FOUR})

    async def run() -> list[Score]:
        return list(
            await asyncio.gather(
                Faithfulness().score(SAMPLE, ctx), Hallucination().score(SAMPLE, ctx)
            )
        )

    f, h = asyncio.run(run())
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
    assert f.usage.calls + h.usage.calls == 2
    assert (f.value, h.value) == (0.75, 0.25)


def test_empty_answer_is_missing_input_without_a_call() -> None:
    judge, ctx = make({})
    for metric in (Faithfulness(), Hallucination()):
        for answer in (None, "   "):
            s = score(metric, SAMPLE.model_copy(update={"answer": answer}), ctx)
            assert s.failure is not None
            assert s.failure.kind is FailureKind.MISSING_INPUT
            assert "'answer'" in s.failure.message
    assert judge.calls == []


def test_no_claims_is_a_typed_failure_not_a_score() -> None:
    no_claims = {**ANALYSIS, "claims": []}
    judge, ctx = make({"answer.analyze": no_claims})
    f, h = both(SAMPLE, ctx)
    for s in (f, h):
        assert s.value is None
        assert s.failure is not None
        assert s.failure.kind is FailureKind.NO_CLAIMS
        assert "no factual claims" in s.failure.message
    assert judge.tasks() == ["answer.analyze"]
    assert f.usage.calls == 1
    assert h.usage.calls == 0


def test_no_contexts_scores_zero_without_a_verify_call() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS})
    bare = SAMPLE.model_copy(update={"contexts": []})
    f, h = both(bare, ctx)
    assert judge.tasks() == ["answer.analyze"]
    assert f.value == 0.0
    assert h.value == 1.0
    assert "no contexts were retrieved" in (f.reason or "")
    assert "no contexts were retrieved" in (h.reason or "")
    assert isinstance(f.details, dict)
    assert [c["verdict"] for c in f.details["claims"]] == ["unsupported"] * 4
    assert f.details["unsupported"] == 4
    assert f.usage.calls == 1


def test_misaligned_verdicts_are_a_parse_error() -> None:
    short = {"verdicts": THREE_OF_FOUR["verdicts"][:3]}
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": short})
    f, h = both(SAMPLE, ctx)
    for s in (f, h):
        assert s.failure is not None
        assert s.failure.kind is FailureKind.PARSE_ERROR
        assert "expected 4 verdicts" in s.failure.message
        assert "got 3" in s.failure.message
    assert f.usage.calls == 3  # analyze, verify and its repair re-ask (the engine validates)


def test_too_many_verdicts_are_a_parse_error() -> None:
    long = {"verdicts": [*THREE_OF_FOUR["verdicts"], verdict("supported", 1)]}
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": long})
    s = score(Faithfulness(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.message.startswith(
        "faithfulness.verify: expected 4 verdicts (one per claim), got 5; reply: "
    )


def test_citing_a_context_that_was_not_given_is_a_parse_error() -> None:
    bad = {"verdicts": [*THREE_OF_FOUR["verdicts"][:3], verdict("supported", 3)]}
    _, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": bad})
    s = score(Faithfulness(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.PARSE_ERROR
    assert "cites context 3" in s.failure.message


def test_judge_error_is_typed_and_keeps_usage() -> None:
    judge, ctx = make({"answer.analyze": PermanentJudgeError("bad request")})
    s = score(Faithfulness(), SAMPLE, ctx)
    assert s.failure is not None
    assert s.failure.kind is FailureKind.JUDGE_ERROR
    assert s.usage.calls == 1
    assert len(judge.calls) == 1


def test_no_judge_is_missing_input() -> None:
    s = score(Faithfulness(), SAMPLE, MetricContext())
    assert s.failure is not None
    assert s.failure.kind is FailureKind.MISSING_INPUT


def test_plan_lists_both_shared_calls_with_rendered_sizes() -> None:
    plan = Faithfulness().plan(SAMPLE)
    assert [c.template_id for c in plan] == ["answer.analyze", "faithfulness.verify"]
    assert all(c.share_key is not None for c in plan)
    analyze = get("answer.analyze").render(question=SAMPLE.question, answer=SAMPLE.answer)
    assert plan[0].prompt_chars == sum(len(m["content"]) for m in analyze)
    assert plan[1].prompt_chars > sum(len(c.text) for c in SAMPLE.contexts)
    assert Hallucination().plan(SAMPLE) == plan


@pytest.mark.parametrize(
    ("update", "expected"),
    [({"contexts": []}, ["answer.analyze"]), ({"answer": ""}, [])],
)
def test_plan_edge_cases(update: dict[str, Any], expected: list[str]) -> None:
    plan = Faithfulness().plan(SAMPLE.model_copy(update=update))
    assert [c.template_id for c in plan] == expected


# The README's pytest example: before, "I could not find that in the context." scored
# faithfulness 0 and hallucination 1, as one claim the contexts do not support.
ABSTENTIONS = [
    "I don't know.",
    "The context does not say.",
    "I could not find that in the context.",
    "There is no information about the tower's height in the provided documents.",
]


@pytest.mark.parametrize("answer", ABSTENTIONS)
def test_an_abstention_is_skipped_without_a_call(answer: str) -> None:
    # a judge that WOULD read the refusal as one unsupported claim
    judge, ctx = make(
        {
            "answer.analyze": {**ANALYSIS, "claims": [answer]},
            "faithfulness.verify": {"verdicts": [verdict("unsupported", None)]},
        }
    )
    sample = SAMPLE.model_copy(update={"answer": answer})
    f, h = both(sample, ctx)
    for s in (f, h):
        assert s.status == "skipped"
        assert s.reason == (
            f"the answer abstains ('{answer}'); abstentions are not claims — "
            "the no_answer measure scores them"
        )
    assert judge.calls == []
    assert Faithfulness().plan(sample) == []


def test_an_answer_that_abstains_on_one_point_only_is_scored() -> None:
    judge, ctx = make({"answer.analyze": ANALYSIS, "faithfulness.verify": THREE_OF_FOUR})
    partial = SAMPLE.model_copy(
        update={"answer": "I don't know its architect. " + (SAMPLE.answer or "")}
    )
    f, _ = both(partial, ctx)
    assert f.value == 0.75
    assert judge.tasks() == ["answer.analyze", "faithfulness.verify"]
