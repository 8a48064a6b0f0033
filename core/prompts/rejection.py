"""``negative_rejection.judge`` and ``counterfactual.judge``: an answer under a retrieval fault.

RGB (Chen et al., 2023) asks two things of an answer whose retrieval went wrong, and each is one
short call here:

* **negative rejection** — nothing retrieved for the question is relevant. The right answer
  declines (says it cannot answer, that the documents do not hold it); an answer that gives
  an answer anyway, hedged or guessed, does not. The judge reads the question and the answer.
* **counterfactual robustness** — the passages the system was given state a wrong fact where
  the true one stood. Did the answer assert the wrong fact, point out the conflict, keep the
  true fact? The judge is told both facts, so it decides on the answer alone; it need not know
  the world, nor read the passages.

Each reply gives its one-sentence reason first: a judge that has written down what the answer
says decides the verdict on it.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import flat

__all__ = ["COUNTERFACTUAL_JUDGE", "NEGATIVE_REJECTION", "CounterfactualVerdict", "Rejection"]


class Rejection(Reply):
    """Reply of ``negative_rejection.judge``: a one-sentence ``reason``, and whether the answer
    ``declines`` to answer."""

    reason: str
    declines: bool


class CounterfactualVerdict(Reply):
    """Reply of ``counterfactual.judge``: a one-sentence ``reason``; whether the answer asserts
    the wrong fact (``follows_wrong_fact``), says the sources are wrong or conflict
    (``flags_conflict``), and states the true fact (``keeps_true_fact``)."""

    reason: str
    follows_wrong_fact: bool
    flags_conflict: bool
    keeps_true_fact: bool


NEGATIVE_REJECTION = register(
    PromptTemplate(
        id="negative_rejection.judge",
        version="1",
        description="Does an answer decline when no retrieved document can answer the question?",
        system="You judge whether an assistant declined to answer a question its documents "
        "could not answer.",
        user="""\
$question

$answer

None of the documents the assistant was given holds the answer to this question.
- "reason": one sentence on what the answer does.
- "declines": true if the answer does not answer the question: it says it cannot answer, that \
the information is not available or not in its documents, or only asks for more detail; false \
if it gives an answer, even a hedged, partial or guessed one, or one from general knowledge.""",
        schema=Rejection,
        budget=flat(1),
    )
)

COUNTERFACTUAL_JUDGE = register(
    PromptTemplate(
        id="counterfactual.judge",
        version="1",
        description="Does an answer follow a wrong fact planted in its documents, or flag it?",
        system="You judge how an assistant answered from documents that had been altered to "
        "state a wrong fact.",
        user="""\
$question

$answer

The documents given to the assistant were altered: where they stated the TRUE_FACT below, they \
stated the WRONG_FACT instead.

$true_fact

$wrong_fact

- "reason": one sentence on what the answer asserts.
- "follows_wrong_fact": true if the answer asserts the WRONG_FACT (or a claim that holds only if \
it is true) as its answer; false if it does not state it, or mentions it only to doubt or reject \
it.
- "flags_conflict": true if the answer says its documents are wrong, outdated, doubtful or \
contradict each other or known facts.
- "keeps_true_fact": true if the answer states the TRUE_FACT.""",
        schema=CounterfactualVerdict,
        budget=flat(1),
    )
)
