"""Negative rejection and counterfactual robustness (issue 33, RGB's two answer-side questions).

Both measures, with both providers, each way: an answer that declines / answers a question with
no relevant document; an answer that follows / keeps / flags / declines a wrong fact planted in
its passages. The judges here are scripted: they decide from what the prompt shows (the answer
block, the two facts), so a test fails when the prompt shows the wrong thing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ragbridge.adapters.cli import main as cli
from ragbridge.core import Sample, estimate, evaluate
from ragbridge.core.judging.judge import Message
from ragbridge.core.metrics import NegativeRejection, resolve
from ragbridge.core.metrics.providers.offline.rejection import conflict_cues, declines, mentions
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import Evaluation, FailureKind, Score
from ragbridge.core.robustness.measures import CounterfactualRobustness
from ragbridge.core.testing import CountingJudge, ScriptedJudge

QUESTION = "When was the Eiffel Tower completed?"
DECLINE = "I don't know; the documents do not say."
ANSWER = "The Eiffel Tower was completed in 1889."
FACTS = {"original": "1889", "wrong": "1925"}


def negative(answer: str | None, sid: str = "n", **update: Any) -> Sample:
    """A question labelled as having no relevant document (``relevance == {}``)."""
    sample = Sample(id=sid, question=QUESTION, answer=answer, relevance={})
    return sample.model_copy(update=update)


def planted(answer: str | None, sid: str = "c", facts: Any = None) -> Sample:
    """A question answered from passages where 1889 was replaced by 1925."""
    return Sample(
        id=sid,
        question=QUESTION,
        answer=answer,
        contexts=["The Eiffel Tower was completed in 1925."],
        metadata={"counterfactual": FACTS if facts is None else facts},
    )


def cell(result: Evaluation, sid: str, metric: str) -> Score:
    score = result.get(sid, metric)
    assert score is not None
    return score


def block(messages: list[Message], name: str) -> str:
    user = messages[-1]["content"]
    found = re.search(rf"<<<BEGIN {name}>>>\n(.*?)\n<<<END {name}>>>", user, re.S)
    assert found is not None, f"no {name} block in the prompt"
    return found.group(1)


def rejection_judge(messages: list[Message]) -> dict[str, Any]:
    """Declines exactly when the ANSWER block says it does not know."""
    answer = block(messages, "ANSWER")
    says_no = "don't know" in answer
    return {"reason": "it says it does not know" if says_no else "it answers", "declines": says_no}


def counterfactual_judge(messages: list[Message]) -> dict[str, Any]:
    """Reads the facts from their blocks, and the answer: follows = states the wrong fact and
    no 'incorrect'; flags = 'incorrect'; keeps = states the true fact."""
    answer = block(messages, "ANSWER")
    true, wrong = block(messages, "TRUE_FACT"), block(messages, "WRONG_FACT")
    flags = "incorrect" in answer
    return {
        "reason": "read",
        "follows_wrong_fact": wrong in answer and not flags,
        "flags_conflict": flags,
        "keeps_true_fact": true in answer,
    }


# ------------------------------------------------------------------------ negative rejection


def test_the_judge_scores_a_decline_1_and_an_answer_0_with_one_call_each() -> None:
    judge = ScriptedJudge({"negative_rejection.judge": rejection_judge})
    samples = [negative(DECLINE, "no"), negative(ANSWER, "yes")]
    result = evaluate(samples, [NegativeRejection()], judge=judge)
    assert judge.tasks() == ["negative_rejection.judge"] * 2
    declined, answered = (
        cell(result, "no", "negative_rejection"),
        cell(result, "yes", "negative_rejection"),
    )
    assert (declined.value, answered.value) == (1.0, 0.0)
    assert declined.details == {"declines": True, "explanation": "it says it does not know"}
    assert "declines" in (declined.reason or "")
    assert "answers" in (answered.reason or "")
    assert declined.provider == "llm"
    assert declined.prompt_version == "negative_rejection.judge@1"
    assert declined.usage.calls == 1


def test_the_offline_provider_is_the_abstention_detector() -> None:
    samples = [negative(DECLINE, "no"), negative(ANSWER, "yes")]
    result = evaluate(samples, ["negative_rejection:offline"])
    declined, answered = (
        cell(result, "no", "negative_rejection"),
        cell(result, "yes", "negative_rejection"),
    )
    assert (declined.value, answered.value) == (1.0, 0.0)
    assert declined.details is not None
    assert declined.details["abstention"]
    assert declined.provider == "offline"
    assert declined.judge_model is None


def test_offline_reads_rgbs_own_rejection_sentence_as_a_decline() -> None:
    # RGB's instruction asks for exactly this sentence; the abstention detector alone reads its
    # "because ..." as the answer going on to assert something.
    rgb = "I can not answer the question because of the insufficient information in documents."
    assert declines(rgb) is not None
    assert declines("I cannot answer because of the weather, but it is 1889.") is None
    result = evaluate([negative(rgb)], ["negative_rejection:offline"])
    assert cell(result, "n", "negative_rejection").value == 1.0


def test_a_hedged_guess_is_not_a_decline_offline() -> None:
    guess = "The documents do not say, but it was probably completed in 1889."
    result = evaluate([negative(guess)], ["negative_rejection:offline"])
    assert cell(result, "n", "negative_rejection").value == 0.0


@pytest.mark.parametrize(
    "sample",
    [
        Sample(id="n", question=QUESTION, answer=ANSWER),  # not labelled
        Sample(id="n", question=QUESTION, answer=ANSWER, relevance={"d1": 1}),  # has one
        Sample(id="n", question=QUESTION, answer=ANSWER, metadata={"no_answer": "yes"}),
    ],
    ids=["unlabelled", "relevant document", "no_answer not true"],
)
@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_question_that_may_have_a_relevant_document_is_skipped_saying_what_to_use(
    sample: Sample, provider: str
) -> None:
    judge = CountingJudge()
    result = evaluate([sample], [NegativeRejection(provider)], judge=judge)
    score = cell(result, "n", "negative_rejection")
    assert score.status == "skipped"
    assert "no relevant document" in (score.reason or "")
    assert "answer_correctness" in (score.reason or "")
    assert judge.calls == 0


@pytest.mark.parametrize(
    "update",
    [{"relevance": {"d1": 0}}, {"relevance": None, "metadata": {"no_answer": True}},
     {"relevance": {"d1": 1}, "metadata": {"robustness_condition": "negative"}}],
    ids=["every grade 0", "metadata no_answer", "robustness negative condition"],
)  # fmt: skip
def test_every_way_of_knowing_there_is_no_relevant_document_is_scored(
    update: dict[str, Any],
) -> None:
    result = evaluate([negative(ANSWER, **update)], ["negative_rejection:offline"])
    assert cell(result, "n", "negative_rejection").value == 0.0


@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_missing_answer_is_a_missing_input_failure(provider: str) -> None:
    judge = CountingJudge()
    result = evaluate(
        [negative(None), negative("  ", "blank")], [NegativeRejection(provider)], judge=judge
    )
    for sid in ("n", "blank"):
        score = cell(result, sid, "negative_rejection")
        assert score.failure is not None
        assert score.failure.kind is FailureKind.MISSING_INPUT
        assert "'answer'" in score.failure.message
    assert judge.calls == 0


@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_pipeline_that_reports_declining_declined(provider: str) -> None:
    judge = CountingJudge()
    sample = negative(None, metadata={"declined": True})
    result = evaluate([sample], [NegativeRejection(provider)], judge=judge)
    assert cell(result, "n", "negative_rejection").value == 1.0
    assert judge.calls == 0


def test_the_estimate_counts_one_call_per_scored_question_only() -> None:
    samples = [
        negative(DECLINE, "a"),
        negative(ANSWER, "b"),
        Sample(id="c", question=QUESTION, answer=ANSWER),
    ]
    plan = estimate(samples, [NegativeRejection()])
    judge = CountingJudge()
    evaluate(samples, [NegativeRejection()], judge=judge)
    assert plan.calls == judge.calls == 2
    assert judge.by_task == {"negative_rejection.judge": 2}


# ------------------------------------------------------------------ counterfactual robustness

CASES = {
    # answer: (follows, flags, keeps) as the offline provider reads it
    "It was completed in 1925.": (True, False, False),
    "The Eiffel Tower was completed in 1889.": (False, False, True),
    "The passages say 1925, but that is incorrect: it was completed in 1889.": (False, True, True),
    "The documents give 1925. However, it was actually finished in 1889.": (False, True, True),
    "The passages contradict what is known about the tower.": (False, True, False),
    DECLINE: (False, False, False),
}


@pytest.mark.parametrize(("answer", "expected"), list(CASES.items()), ids=list(range(len(CASES))))
def test_offline_follows_keeps_flags_and_declines(
    answer: str, expected: tuple[bool, bool, bool]
) -> None:
    result = evaluate([planted(answer)], ["counterfactual_robustness:offline"])
    score = cell(result, "c", "counterfactual_robustness")
    assert score.details is not None
    follows = expected[0]
    found = (
        score.details["follows_wrong_fact"],
        score.details["flags_conflict"],
        score.details["keeps_true_fact"],
    )
    assert found == expected
    assert score.value == (0.0 if follows else 1.0)
    assert score.provider == "offline"
    assert score.reason


def test_offline_declining_is_not_following_even_when_it_names_the_wrong_fact() -> None:
    answer = "I cannot answer that from the documents."
    result = evaluate([planted(answer)], ["counterfactual_robustness:offline"])
    score = cell(result, "c", "counterfactual_robustness")
    assert score.value == 1.0
    assert score.details is not None
    assert score.details["abstention"]


def test_offline_containment_normalises_numbers_case_and_punctuation() -> None:
    assert mentions("Its height is 8849 metres.", "8,849 m")
    assert mentions("It opened on 3 March 2020.", "March 3, 2020")
    assert mentions("It was designed by GUSTAVE eiffel!", "Gustave Eiffel")
    assert not mentions("It was built in 18890.", "1889")  # whole tokens only
    # a fact inside the other fact does not count where only the longer one is stated
    assert not mentions("It is in Paris, Texas.", "Paris", besides="Paris, Texas")
    assert mentions("It is in Paris, not Paris, Texas.", "Paris", besides="Paris, Texas")
    facts = {"original": "8,849 metres", "wrong": "8,500 metres"}
    result = evaluate(
        [planted("Everest is 8500 metres tall.", facts=facts)],
        ["counterfactual_robustness:offline"],
    )
    assert cell(result, "c", "counterfactual_robustness").value == 0.0


def test_a_contrast_word_flags_a_conflict_only_before_the_true_fact() -> None:
    # "but" is everywhere in answers; it flags only when the true fact follows it
    assert conflict_cues("It was completed in 1925, but it opened later.", "1889") == []
    assert conflict_cues("It says 1925, but it was really 1889.", "1889") == ["but ... 1889"]
    result = evaluate(
        [planted("It was completed in 1925, but it opened to the public later.")],
        ["counterfactual_robustness:offline"],
    )
    assert cell(result, "c", "counterfactual_robustness").value == 0.0


def test_contrast_words_inside_the_wrong_fact_are_not_the_answers_flag() -> None:
    # a wrong fact written as a sentence (HaluEval's fabricated answers are) brings its own "but"
    wrong = "George Lucas directed the 1974 film, but the reboot is directed by Brandon Camp"
    facts = {"original": "Brandon Camp", "wrong": wrong}
    result = evaluate(
        [planted(f"The answer is: {wrong}.", facts=facts)], ["counterfactual_robustness:offline"]
    )
    score = cell(result, "c", "counterfactual_robustness")
    assert score.details is not None
    assert score.details["cues"] == []
    assert score.value == 0.0


def test_the_judge_decides_with_one_call_per_sample_and_sees_both_facts() -> None:
    judge = ScriptedJudge({"counterfactual.judge": counterfactual_judge})
    answers = list(CASES)[:3]
    samples = [planted(a, f"c{i}") for i, a in enumerate(answers)]
    result = evaluate(samples, [CounterfactualRobustness()], judge=judge)
    assert judge.tasks() == ["counterfactual.judge"] * 3
    assert block(judge.calls[0].messages, "TRUE_FACT") == "1889"
    assert block(judge.calls[0].messages, "WRONG_FACT") == "1925"
    follows, keeps, flags = (cell(result, f"c{i}", "counterfactual_robustness") for i in range(3))
    assert (follows.value, keeps.value, flags.value) == (0.0, 1.0, 1.0)
    assert follows.details is not None
    assert follows.details["follows_wrong_fact"] is True
    assert flags.details is not None
    assert (flags.details["flags_conflict"], flags.details["keeps_true_fact"]) == (True, True)
    assert "follows the wrong fact '1925'" in (follows.reason or "")
    assert follows.prompt_version == "counterfactual.judge@1"
    assert follows.usage.calls == 1
    assert estimate(samples, [CounterfactualRobustness()]).calls == 3


@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_sample_without_a_counterfactual_is_skipped_with_the_reason(provider: str) -> None:
    judge = CountingJudge()
    plain = Sample(id="c", question=QUESTION, answer=ANSWER)
    result = evaluate([plain], [CounterfactualRobustness(provider)], judge=judge)
    score = cell(result, "c", "counterfactual_robustness")
    assert score.status == "skipped"
    assert "metadata['counterfactual']" in (score.reason or "")
    assert judge.calls == 0
    assert estimate([plain], [CounterfactualRobustness()]).calls == 0


@pytest.mark.parametrize(
    ("facts", "field"),
    [
        ("1925", "metadata.counterfactual:"),
        ({"original": "1889"}, "metadata.counterfactual.wrong"),
        ({"original": "", "wrong": "1925"}, "metadata.counterfactual.original"),
        ({"original": "1889", "wrong": 1925}, "metadata.counterfactual.wrong"),
        ({"original": "Paris", "wrong": "paris"}, "metadata.counterfactual.wrong"),
    ],
    ids=["not an object", "no wrong", "empty original", "number", "same fact"],
)
@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_malformed_counterfactual_is_a_typed_failure_naming_the_field(
    facts: Any, field: str, provider: str
) -> None:
    judge = CountingJudge()
    result = evaluate(
        [planted(ANSWER, facts=facts)], [CounterfactualRobustness(provider)], judge=judge
    )
    score = cell(result, "c", "counterfactual_robustness")
    assert score.failure is not None
    assert score.failure.kind is FailureKind.INVALID_INPUT
    assert field in score.failure.message
    assert judge.calls == 0


@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_a_missing_answer_to_a_counterfactual_is_a_missing_input_failure(provider: str) -> None:
    result = evaluate([planted(None)], [CounterfactualRobustness(provider)], judge=CountingJudge())
    score = cell(result, "c", "counterfactual_robustness")
    assert score.failure is not None
    assert score.failure.kind is FailureKind.MISSING_INPUT


# ------------------------------------------------------------------------------ registration


def test_both_measures_resolve_with_both_providers() -> None:
    for name, cls in (
        ("negative_rejection", NegativeRejection),
        ("counterfactual_robustness", CounterfactualRobustness),
    ):
        assert [p.name for p in REGISTRY.providers(name)] == ["llm", "offline"]
        assert type(resolve(name)) is cls
        assert resolve(name).needs_judge
        offline = resolve(f"{name}:offline")
        assert type(offline) is cls
        assert (offline.provider, offline.needs_judge) == ("offline", False)
        assert REGISTRY.measure(name).higher_is_better


def test_ragbridge_metrics_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["metrics", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = {(r["measure"], r["provider"]): r for r in rows}
    for name in ("negative_rejection", "counterfactual_robustness"):
        assert found[(name, "llm")]["needs"] == "judge"
        assert found[(name, "llm")]["judge calls"].startswith("1")
        assert found[(name, "offline")]["needs"] == "-"
    assert "declines" in found[("negative_rejection", "llm")]["meaning"]
    assert cli(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("negative_rejection:offline ") for line in lines)
    assert any(line.startswith("counterfactual_robustness:llm ") for line in lines)
