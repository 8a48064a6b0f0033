"""Templates of context precision: was each retrieved context useful, judged in one call?

Two variants share one reply schema and differ in what a context must be useful *for*:

* ``context_precision.with_reference`` — for arriving at the reference answer. This is the
  definition of the RAGAS documentation ("Context Precision", docs.ragas.io), which builds on the
  context-relevance idea of Es et al. 2023; it judges retrieval against ground truth.
* ``context_precision.with_answer`` — for the answer the pipeline actually gave, when no reference
  exists (RAGAS calls this variant "without reference"). It measures whether what was ranked
  high is what the generator used, which is weaker: a wrong answer can make a wrong context look
  useful.

Two templates rather than one with a neutral "target" block, because the instruction itself
changes ("needed to reach the reference" vs "used by the answer") and the variant must be
visible in the cache key and in ``Score.prompt_version``. Every context is judged in the same
call, so the cost is one call whatever the number of contexts; the verdict list is positional.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from . import register
from .base import PromptTemplate

__all__ = [
    "CONTEXT_PRECISION_WITH_ANSWER",
    "CONTEXT_PRECISION_WITH_REFERENCE",
    "ContextUsefulness",
    "ContextUsefulnessVerdicts",
]


class ContextUsefulness(BaseModel):
    """One context's verdict."""

    reason: str = Field(description="One sentence explaining the verdict.")
    useful: bool


class ContextUsefulnessVerdicts(BaseModel):
    """Reply of both context-precision templates: one verdict per context, in context order."""

    verdicts: list[ContextUsefulness] = Field(
        description="Exactly one verdict per context, in context order.",
        json_schema_extra={"aligned_with": "CONTEXT"},
    )


_SYSTEM = (
    "You assess the passages a search system retrieved for a question. You judge each passage "
    "on its own merits, in the order given, and you do not reward passages for being on-topic "
    "when they do not help."
)

_RULES = """\
Judge each context separately, in order. Write the reason (one sentence) before the "useful" \
flag. Return exactly one verdict per context, in context order: the list must have as many \
entries as there are contexts."""

CONTEXT_PRECISION_WITH_REFERENCE = register(
    PromptTemplate(
        id="context_precision.with_reference",
        version="1",
        description="Usefulness of each retrieved context for reaching the reference answer.",
        system=_SYSTEM,
        user=f"""\
For each numbered context, decide whether it was useful for arriving at the reference answer \
to the question.

$question

$reference

Contexts:
$contexts

A context is useful when it holds information that the reference answer states or that \
directly helps to derive it. It is not useful when it is off-topic, or related to the subject \
but silent on what the reference answer says.
{_RULES}""",
        schema=ContextUsefulnessVerdicts,
    )
)

CONTEXT_PRECISION_WITH_ANSWER = register(
    PromptTemplate(
        id="context_precision.with_answer",
        version="1",
        description="Usefulness of each retrieved context for the answer that was given.",
        system=_SYSTEM,
        user=f"""\
For each numbered context, decide whether it was useful for producing the answer below to the \
question.

$question

$answer

Contexts:
$contexts

A context is useful when it holds information that the answer states or relies on. It is not \
useful when it is off-topic, or related to the subject but contributes nothing the answer uses.
{_RULES}""",
        schema=ContextUsefulnessVerdicts,
    )
)
