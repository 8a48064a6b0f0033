"""``noise_sensitivity.judge``: which contexts back the reference, and which back each claim.

Noise sensitivity (RAGAS's ``NoiseSensitivity``) needs three relations: which retrieved contexts
are relevant (they support some statement of the reference), whether the reference supports each
claim of the answer, and which contexts support each claim. RAGAS asks them as one entailment
call per (context, statement list) pair plus the reference: 2k + 1 calls for k contexts, besides
splitting both texts into statements. Here the claims come from the shared ``answer.analyze``
call and all three relations come from this one call, whatever the number of contexts.

Contexts are named by their 1-based numbers; a number that was not shown is a reply that does not
fit the request (`_numbers_shown`), which the engine repairs or retries like an unparseable one.
Each claim's ``reason`` comes before its verdicts: a judge that justifies first decides after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field

from . import register
from .base import Facts, PromptTemplate, Reply
from .budget import OVERHEAD, VERDICT, bounded, items

__all__ = ["NOISE_SENSITIVITY", "ClaimSources", "NoiseJudgement"]

Number = Annotated[int, Field(ge=1)]
"""A context's 1-based number (below 1 fails parsing; above the count, `_numbers_shown`)."""


class ClaimSources(Reply):
    """One claim's verdicts: does the reference support it (``in_reference``), and the numbers
    of the contexts that support it (``contexts``; empty when none does)."""

    reason: str
    in_reference: bool
    contexts: list[Number]


class NoiseJudgement(Reply):
    """Reply of ``noise_sensitivity.judge``: the numbers of the contexts that support at least
    one statement of the reference, then one `ClaimSources` per claim, in claim order."""

    reference_contexts: list[Number]
    claims: list[ClaimSources] = Field(json_schema_extra={"aligned_with": "CLAIM"})


def _numbers_shown(reply: BaseModel, facts: Facts) -> str | None:
    """Every context number in the reply must name a context the prompt showed."""
    if not isinstance(reply, NoiseJudgement):
        return None
    shown = facts.get("CONTEXT", 0)
    lists = [("reference_contexts", reply.reference_contexts)]
    lists += [(f"claim {i}", c.contexts) for i, c in enumerate(reply.claims, start=1)]
    for where, numbers in lists:
        for n in numbers:
            if not 1 <= n <= shown:
                return f"{where} names context {n}, but only contexts 1..{shown} were given"
    return None


def _budget(values: Mapping[str, Any]) -> int:
    """A verdict per claim, plus a few tokens per context number each list may hold."""
    claims, contexts = items(values, "claims"), items(values, "contexts")
    return bounded(OVERHEAD + VERDICT * claims + 4 * contexts * (claims + 1))


NOISE_SENSITIVITY = register(
    PromptTemplate(
        id="noise_sensitivity.judge",
        version="1",
        description="Contexts backing the reference; per claim: reference and context support.",
        system="You are a strict fact checker: only the texts shown count, not your knowledge.",
        user="""\
$question

$reference

$claims

$contexts

A text supports a statement when it states it or directly implies it.
- "reference_contexts": the numbers of the contexts that support at least one statement of the \
reference; [] if none.
- "claims": per claim, in order: "reason" (one sentence) first, then "in_reference": true if the \
reference supports the claim, and "contexts": the numbers of every context that supports the \
claim ([] if none).""",
        schema=NoiseJudgement,
        extra_check=_numbers_shown,
        budget=_budget,
    )
)
