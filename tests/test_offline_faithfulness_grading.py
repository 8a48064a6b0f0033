"""`faithfulness:offline` graded within its verdict (`providers.offline.support`).

Before: a short answer's support was clipped to 0 below the verdict (236 of BEGIN's 430 dev
turns tied at exactly 0), a long answer's value was its share of supported sentences (every
supported sentence 1, however many words of its own it added), a persona sentence ("I love
dogs") was supported by any context about dogs, an opening "Well," counted as a word the
contexts lack, and a short answer was the mean of its sentences. Each test below fails on that
code.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import Context, FailureKind, Sample, Turn, evaluate
from ragbridge.core.metrics.providers.offline.support import (
    FUNCTION_WORD_WEIGHT,
    UNEXPLAINED_FACTOR,
    answer_support,
    says_nothing,
    shrink,
    unopened,
)
from ragbridge.core.results.stats import auroc
from ragbridge.core.testing import HashEmbedder
from ragbridge.core.text.words import content_words, words

TOWER = (
    "The Eiffel Tower opened in 1889 for the World's Fair. It was designed by the engineering "
    "firm of Gustave Eiffel. It is 330 metres tall."
)
DOGS = "Dogs are loyal animals that many people love."
BEGIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "begin_wow_dev"


def _score(answer: str, context: str = TOWER, question: str = "When did it open?") -> Any:
    sample = Sample(id="s", question=question, answer=answer, contexts=[Context(text=context)])
    result = evaluate(
        [sample], ["faithfulness:offline", "hallucination:offline"], embedder=HashEmbedder()
    )
    faithful = result.get("s", "faithfulness")
    hallucinated = result.get("s", "hallucination")
    assert faithful is not None
    assert hallucinated is not None
    if faithful.value is not None:
        assert 0.0 <= faithful.value <= 1.0
        assert not math.isnan(faithful.value)
        assert hallucinated.value == pytest.approx(1.0 - faithful.value)
    return faithful


def test_a_first_person_sentence_is_a_claim_the_contexts_must_make() -> None:
    """Before: 1.0 — "love" and "dogs" are in the context, the speaker was not looked at."""
    persona = _score("I love dogs.", DOGS, "Do you like dogs?")
    assert persona.value is not None
    assert persona.value < 0.5
    claim = persona.details["claims"][0]
    assert (claim["first_person"], claim["supported"]) == (True, False)
    assert "i" in claim["unexplained"]
    # the same words, not about the speaker, are supported
    assert _score("Many people love dogs.", DOGS, "Do you like dogs?").value == 1.0
    # a context that speaks in the first person can support it
    quoted = _score("I love dogs.", '"I love dogs," the author wrote.', "Does she like dogs?")
    assert quoted.details["claims"][0]["first_person"] is False
    # "we" speaks for the organisation whose documents are the contexts: not a persona
    refund = _score(
        "We offer a 30 day full refund at no extra cost.",
        "All customers are eligible for a 30 day full refund at no extra cost.",
        "What if these shoes don't fit?",
    )
    assert refund.details["claims"][0]["first_person"] is False


def test_a_user_speaking_in_the_first_person_does_not_support_the_answerer() -> None:
    """On a conversation's turn the user's words are sources (support="conversation"), but the
    user's "I" is the user: it never makes the answerer's "I love dogs" supported."""
    sample = Sample(
        id="s",
        question="Do you like dogs too?",
        answer="I love dogs.",
        contexts=[Context(text=DOGS)],
        history=[Turn(role="user", content="I love dogs, I have three.")],
    )
    result = evaluate([sample], ["faithfulness:offline"], embedder=HashEmbedder())
    score = result.get("s", "faithfulness")
    assert score is not None
    assert score.details["claims"][0]["first_person"] is True
    assert score.value is not None
    assert score.value < 0.5


def test_an_opening_discourse_marker_does_not_lower_support() -> None:
    """Before: "well" and "yeah" were words the contexts lack (support 0 for a copy)."""
    plain = _score("The Eiffel Tower opened in 1889.")
    assert plain.value == 1.0
    for opened in (
        "Well, the Eiffel Tower opened in 1889.",
        "Oh yes, the Eiffel Tower opened in 1889.",
        "Yeah the Eiffel Tower opened in 1889.",
        "Sure! The Eiffel Tower opened in 1889.",
    ):
        score = _score(opened)
        assert score.value == plain.value, opened
    assert unopened("No one knows.") == "No one knows."  # "no" is a marker only before a comma
    assert unopened("Well-known firms built it.") == "Well-known firms built it."
    assert says_nothing("Sure!")
    assert not says_nothing("Sure it opened.")
    bare = _score("Yes.")  # still a typed failure, never a made-up 0 or 1
    assert bare.value is None
    assert bare.failure.kind is FailureKind.NO_CLAIMS


def test_unsupported_short_answers_are_graded_not_tied_at_zero() -> None:
    """Before: both 0.0. A wrong year in the right sentence is closer to supported than an
    answer about something else."""
    wrong_year = _score("The Eiffel Tower opened in 1890.")
    elsewhere = _score("Bananas grow on tall plants in Peru.")
    assert wrong_year.value is not None
    assert elsewhere.value is not None
    assert 0.0 < elsewhere.value < wrong_year.value < 0.5
    assert wrong_year.details["claims"][0]["unexplained"] == ["1890"]


def test_a_short_answer_is_as_supported_as_its_weakest_sentence() -> None:
    """Before: the mean of its sentences (0.5 here: one right, one invented)."""
    both = _score("The Eiffel Tower opened in 1889. Picasso painted it blue.")
    supports = [c["support"] for c in both.details["claims"]]
    assert both.details["short_answer"] is True
    assert supports[0] == 1.0
    assert both.value == pytest.approx(min(supports), abs=1e-4)
    assert both.value is not None
    assert both.value < 0.1


def test_words_no_context_holds_grade_a_supported_long_answer() -> None:
    """Before: 1.0 for all three, each sentence supported. An added word keeps the sentence
    supported and the answer faithful, but it is no longer a copy; a function word ("can")
    counts half as much as a content word ("usually")."""
    museum = (
        "The museum opens at 9 am on weekdays. Entry costs 12 euros for adults. Children "
        "under twelve enter the museum free of charge with an adult."
    )
    copy = _score(museum, museum)
    usually = _score(museum.replace("twelve enter", "twelve usually enter"), museum)
    can = _score(museum.replace("twelve enter", "twelve can enter"), museum)
    assert copy.value == 1.0
    assert usually.details["short_answer"] is False
    claim = usually.details["claims"][2]
    assert (claim["supported"], claim["unexplained"]) == (True, ["usually"])
    assert claim["support"] == pytest.approx(0.5 + 0.5 * UNEXPLAINED_FACTOR)
    assert can.details["claims"][2]["unexplained_weight"] == FUNCTION_WORD_WEIGHT
    assert usually.value is not None
    assert can.value is not None
    assert 0.5 < usually.value < can.value < copy.value


def test_the_grading_never_crosses_the_verdict() -> None:
    for value in (0.0, 0.2, 0.5, 0.51, 0.8, 1.0):
        for factor in (0.0, 0.25, 1.0):
            moved = shrink(value, factor)
            assert (moved > 0.5) == (value > 0.5 and factor > 0)
            assert 0.0 <= moved <= 1.0
    # a long answer's verdict is its mean; its weakest claim only grades it
    assert answer_support([1.0, 1.0, 0.1], short=False) > 0.5
    assert answer_support([1.0, 0.1, 0.1], short=False) < 0.5
    assert answer_support([1.0, 0.1], short=True) == 0.1


def _lexical(response: str, knowledge: str) -> float:
    said = set(content_words(response))
    known = set(words(knowledge))
    return sum(w in known for w in said) / len(said) if said else 0.0


@pytest.mark.skipif(
    not (BEGIN / "begin_dev_wow.tsv").exists(),
    reason="BEGIN dev (CC BY 4.0, not shipped) not found in ../shared/data/begin_wow_dev",
)
def test_on_begin_dev_turns_the_provider_beats_the_lexical_baseline() -> None:
    """The issue's bar on the public dev split (the test split is held out and never read):
    before, 0.845 against the content-word share's 0.930; `benchmarks/offline_begin.py` has the
    cross-validated figures and the stronger, stop-words-kept baseline (0.948)."""
    pytest.importorskip("tokenizers", reason="needs the local extra")
    from ragbridge.adapters.local import LocalEmbedder

    with (BEGIN / "begin_dev_wow.tsv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    samples = [
        Sample(
            id=str(n),
            question=r["message"].strip() or "Reply.",
            answer=r["response"],
            contexts=[Context(text=r["knowledge"])],
        )
        for n, r in enumerate(rows)
    ]
    result = evaluate(samples, ["faithfulness:offline"], embedder=LocalEmbedder())
    labels = [int(r["begin_label"] == "Fully attributable") for r in rows]
    values = []
    for sample in samples:
        score = result.get(sample.id, "faithfulness")
        assert score is not None
        values.append(0.5 if score.value is None else score.value)
    baseline = [_lexical(r["response"], r["knowledge"]) for r in rows]
    assert auroc(labels, values) > auroc(labels, baseline) + 0.01
    assert auroc(labels, values) > 0.94
