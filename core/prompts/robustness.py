"""``robustness.counterfactual``: the fact a counterfactual passage set will get wrong.

RGB's counterfactual condition (Chen et al., 2023) gives a pipeline its own relevant passages
with the fact the question turns on replaced by a wrong one, and asks whether the answer follows
the passages or notices the conflict. The judge reads the question, the reference answer and the
passages retrieved in the clean run, and names that fact twice: ``original``, copied exactly as
one passage writes it (so the harness can find and replace it there), and ``wrong``, a believable
value of the same kind (another year for a year, another person for a person) that is not true.
`ragbridge.core.robustness.counterfactual.judge_counterfactual` checks that ``original`` is in a
passage before using it; an empty ``original`` says no passage states the answer.
"""

from __future__ import annotations

from . import register
from .base import PromptTemplate, Reply
from .budget import flat

__all__ = ["COUNTERFACTUAL", "CounterfactualFact"]


class CounterfactualFact(Reply):
    """Reply of ``robustness.counterfactual``: the passages' words for the answer's key fact
    (``original``, "" when no passage states it) and a plausible false replacement (``wrong``)."""

    original: str
    wrong: str


COUNTERFACTUAL = register(
    PromptTemplate(
        id="robustness.counterfactual",
        version="1",
        description="Name the key fact of the reference as the passages write it, and a "
        "plausible wrong value to put in its place.",
        system="You prepare a test of whether a question-answering system trusts its sources: "
        "one fact in its documents will be changed to a false one.",
        user="""\
$question

$reference

$contexts

Find the fact the reference answer rests on (a number, a date, a name, a place) that the \
passages also state.
- "original": that fact copied character for character from one passage, as short as it can \
be while still naming the fact (a few words at most, no sentence); "" when no passage states \
the reference answer's fact.
- "wrong": a different value of the same kind and form that a reader could believe (a nearby \
year for a year, a similar amount for an amount, another person, place or organisation for a \
name) and that is false for this question; "" when "original" is "".""",
        schema=CounterfactualFact,
        budget=flat(1),
    )
)
