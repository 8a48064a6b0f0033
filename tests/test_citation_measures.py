"""citation_recall and citation_precision (ALCE), with the judge and offline providers: fully
supported answers, a statement citing a distractor, an unneeded extra citation, an uncited
statement; one judge call per answer for both measures; the edges."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ragbridge.core import estimate, evaluate
from ragbridge.core.judging.judge import Message
from ragbridge.core.metrics import resolve
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, ScriptedJudge

CONTEXTS = [
    Context(text="The Eiffel Tower stands in Paris, the capital of France.", id="paris"),
    Context(text="The Eiffel Tower was completed in 1889 for the World's Fair.", id="built"),
    Context(text="Bananas are rich in potassium and grow in tropical regions.", id="bananas"),
]
QUESTION = "Where is the Eiffel Tower and when was it completed?"

_BLOCK = re.compile(r"<<<BEGIN (CONTEXT|STATEMENT) (\d+)>>>\s*(.*?)\s*<<<END \1 \2>>>", re.S)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4}


def oracle(messages: list[Message]) -> dict[str, Any]:
    """A judge that reads ``citations.judge``'s prompt: a set of contexts supports a statement
    when together they hold every word of four letters or more of it."""
    user = messages[-1]["content"]
    contexts: dict[int, str] = {}
    statements: list[tuple[str, list[int]]] = []
    for kind, n, text in _BLOCK.findall(user):
        if kind == "CONTEXT":
            contexts[int(n)] = text
        else:
            said, cited = re.fullmatch(r"(.*) \(cites: ([\d, ]+)\)", text, re.S).groups()  # type: ignore[union-attr]
            statements.append((said, [int(x) for x in cited.split(",")]))

    def supports(said: str, numbers: list[int]) -> bool:
        held = set().union(*(_words(contexts[k]) for k in numbers)) if numbers else set()
        return _words(said) <= held

    verdicts = []
    for said, cited in statements:
        verdicts.append(
            {
                "reason": "checked word by word",
                "supported": supports(said, cited),
                "alone": [k for k in cited if supports(said, [k])],
                "redundant": [
                    k
                    for k in cited
                    if len(cited) > 1 and supports(said, [m for m in cited if m != k])
                ],
            }
        )
    return {"statements": verdicts}


def sample(answer: str, contexts: list[Context] = CONTEXTS) -> Sample:
    return Sample(id="s", question=QUESTION, answer=answer, contexts=contexts)


def scores(s: Sample, provider: str) -> tuple[Score, Score, ScriptedJudge | None]:
    judge = ScriptedJudge({"citations.judge": oracle}) if provider == "llm" else None
    metrics = [resolve(f"citation_recall:{provider}"), resolve(f"citation_precision:{provider}")]
    result = evaluate([s], metrics, judge=judge) if judge else evaluate([s], metrics)
    cells = {c.metric: c.score for c in result}
    return cells["citation_recall"], cells["citation_precision"], judge


PROVIDERS = ["llm", "offline"]

SUPPORTED = "The Eiffel Tower stands in Paris [1]. The Eiffel Tower was completed in 1889 [2]."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_fully_supported_answer_scores_one(provider: str) -> None:
    recall, precision, _ = scores(sample(SUPPORTED), provider)
    assert (recall.value, precision.value) == (1.0, 1.0)
    assert recall.provider == provider
    assert recall.details is not None
    rows = recall.details["statements"]
    assert [(r["cited"], r["supported"]) for r in rows] == [(["1"], True), (["2"], True)]
    assert [r["context_ids"] for r in rows] == [["paris"], ["built"]]
    assert precision.details is not None
    assert [
        (c["key"], c["context"], c["alone"], c["needed"]) for c in precision.details["citations"]
    ] == [
        ("1", 0, True, True),
        ("2", 1, True, True),
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_statement_citing_a_distractor(provider: str) -> None:
    answer = "The Eiffel Tower stands in Paris [3]. The Eiffel Tower was completed in 1889 [2]."
    recall, precision, _ = scores(sample(answer), provider)
    assert recall.value == 0.5
    assert precision.value == 0.5  # the distractor's citation is irrelevant (ALCE)
    assert precision.details is not None
    bad = precision.details["citations"][0]
    assert (bad["context_id"], bad["alone"], bad["relevant"]) == ("bananas", False, False)
    assert "1 cite a statement its citations do not support" in (precision.reason or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_extra_citation_that_is_not_needed(provider: str) -> None:
    answer = "The Eiffel Tower stands in Paris [1]. The Eiffel Tower was completed in 1889 [2][3]."
    recall, precision, _ = scores(sample(answer), provider)
    assert recall.value == 1.0  # [2] and [3] together support it
    assert precision.value == pytest.approx(2 / 3)
    assert precision.details is not None
    extra = precision.details["citations"][2]
    assert (extra["key"], extra["alone"], extra["needed"], extra["relevant"]) == (
        "3",
        False,
        False,
        False,
    )
    assert "1 are not needed" in (precision.reason or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_uncited_statement_counts_against_recall_only(provider: str) -> None:
    answer = "The Eiffel Tower stands in Paris [1]. The Eiffel Tower was completed in 1889."
    recall, precision, _ = scores(sample(answer), provider)
    assert recall.value == 0.5
    assert "1 cite nothing" in (recall.reason or "")
    assert precision.value == 1.0


def test_two_citations_needed_together_are_both_relevant() -> None:
    # neither supports the statement alone, each is needed: ALCE keeps both; the third is not
    answer = "The Eiffel Tower stands in Paris and was completed in 1889 [1][2][3]."
    recall, precision, _ = scores(sample(answer), "llm")
    assert recall.value == 1.0
    assert precision.details is not None
    assert [(c["alone"], c["needed"]) for c in precision.details["citations"]] == [
        (False, True),
        (False, True),
        (False, False),
    ]
    assert precision.value == pytest.approx(2 / 3)


def test_one_judge_call_serves_both_measures_and_the_estimate_counts_one() -> None:
    s = sample("The Eiffel Tower stands in Paris [1]. It was completed in 1889 [2][3].")
    recall, precision, judge = scores(s, "llm")
    assert judge is not None
    assert judge.tasks() == ["citations.judge"]
    assert recall.status == precision.status == "scored"
    assert recall.usage.calls + precision.usage.calls == 1
    assert recall.prompt_version == "citations.judge@1"
    metrics = [resolve("citation_recall"), resolve("citation_precision")]
    plan = estimate([s], metrics)
    assert (plan.calls, plan.by_template) == (1, {"citations.judge": 1})
    counting = CountingJudge()
    evaluate([s, s.model_copy(update={"id": "t"})], metrics, judge=counting)
    assert counting.by_task == {"citations.judge": 2}  # one per answer


def test_the_judge_sees_only_the_cited_contexts_numbered_anew() -> None:
    s = sample("The Eiffel Tower was completed in 1889 [2]. Bananas are rich in potassium [3].")
    recall, _, judge = scores(s, "llm")
    assert judge is not None
    user = judge.calls[0].messages[-1]["content"]
    assert "<<<BEGIN CONTEXT 3>>>" not in user
    assert "Bananas are rich in potassium and grow" in user  # the third context, shown as 2
    assert "Bananas are rich in potassium. (cites: 2)" in user
    assert "The Eiffel Tower stands in Paris" not in user  # cited by nobody
    assert recall.value == 1.0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unresolved_citation_is_a_typed_failure_naming_it(provider: str) -> None:
    recall, precision, judge = scores(sample("It stands in Paris [7]."), provider)
    for score in (recall, precision):
        assert score.failure is not None
        assert score.failure.kind == "invalid_input"
        assert score.failure.message == "citation [7] names no context (the sample has 3 contexts)"
    assert judge is None or judge.calls == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_citing_nothing(provider: str) -> None:
    recall, precision, judge = scores(sample("The Eiffel Tower stands in Paris."), provider)
    assert recall.value == 0.0
    assert recall.reason == "no statement cites a context"
    assert precision.status == "skipped"
    assert "no citation to be precise about" in (precision.reason or "")
    assert judge is None or judge.calls == []
    assert estimate([sample("No citation here.")], [resolve("citation_recall")]).calls == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_answer_or_no_contexts_is_missing_input(provider: str) -> None:
    for s in (sample(""), sample("It is in Paris [1].", contexts=[])):
        recall, precision, _ = scores(s, provider)
        assert recall.failure is not None
        assert recall.failure.kind == "missing_input"
        assert precision.failure is not None
        assert precision.failure.kind == "missing_input"


def test_offline_leaves_a_statement_without_terms_out() -> None:
    answer = "Yes [1]. The Eiffel Tower was completed in 1889 [2]."
    recall, precision, _ = scores(sample(answer), "offline")
    assert recall.value == 1.0
    assert recall.details is not None
    assert recall.details["statements"][0]["checkable"] is False
    assert precision.details is not None
    assert len(precision.details["citations"]) == 1


def test_a_judge_failure_is_typed_for_both() -> None:
    judge = ScriptedJudge({"citations.judge": "not json at all"})
    metrics = [resolve("citation_recall"), resolve("citation_precision")]
    result = evaluate([sample(SUPPORTED)], metrics, judge=judge, max_retries=0)
    assert all(c.score.failure is not None for c in result)


def test_both_measures_are_registered_with_a_judge_and_an_offline_provider() -> None:
    from ragbridge.core.registry import REGISTRY

    for name in ("citation_recall", "citation_precision"):
        assert [p.name for p in REGISTRY.providers(name)] == ["llm", "offline"]
        assert resolve(name).provider == "llm"
        assert not resolve(f"{name}:offline").needs_judge


def test_a_lone_citation_of_a_supported_statement_is_always_needed() -> None:
    # nothing else cites the statement, whatever the reply's "redundant" list says
    reply = {"statements": [{"reason": "r", "supported": True, "alone": [], "redundant": [1]}]}
    judge = ScriptedJudge({"citations.judge": reply})
    metrics = [resolve("citation_precision")]
    result = evaluate([sample("The Eiffel Tower stands in Paris [1].")], metrics, judge=judge)
    (cell,) = list(result)
    assert cell.score.value == 1.0
