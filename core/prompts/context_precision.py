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

from pydantic import Field

from . import register
from .base import PromptTemplate, Reply
from .budget import per_item

__all__ = [
    "CONTEXT_PRECISION_WITH_ANSWER",
    "CONTEXT_PRECISION_WITH_REFERENCE",
    "ContextUsefulness",
    "ContextUsefulnessVerdicts",
]


class ContextUsefulness(Reply):
    """One context's verdict: the reason (one sentence), then whether it was useful."""

    reason: str
    useful: bool


class ContextUsefulnessVerdicts(Reply):
    """Reply of both context-precision templates: one verdict per context, in context order."""

    verdicts: list[ContextUsefulness] = Field(json_schema_extra={"aligned_with": "CONTEXT"})


_SYSTEM = (
    "You judge each passage a search system retrieved on its own merits; being on-topic is not "
    "enough to be useful."
)

_RULES = """\
For each context, in order: "reason" (one sentence) first, then "useful". One verdict per \
context."""

CONTEXT_PRECISION_WITH_REFERENCE = register(
    PromptTemplate(
        id="context_precision.with_reference",
        version="2",
        description="Usefulness of each retrieved context for reaching the reference answer.",
        system=_SYSTEM,
        user=f"""\
$question

$reference

$contexts

Was each context useful for arriving at the reference answer? Useful: it holds information the \
reference states or that directly helps derive it; not useful: off-topic, or on the subject but \
silent on what the reference says.
{_RULES}""",
        schema=ContextUsefulnessVerdicts,
        budget=per_item("contexts"),
    )
)

CONTEXT_PRECISION_WITH_ANSWER = register(
    PromptTemplate(
        id="context_precision.with_answer",
        version="2",
        description="Usefulness of each retrieved context for the answer that was given.",
        system=_SYSTEM,
        user=f"""\
$question

$answer

$contexts

Was each context useful for producing the answer? Useful: it holds information the answer \
states or relies on; not useful: off-topic, or on the subject but contributing nothing the \
answer uses.
{_RULES}""",
        schema=ContextUsefulnessVerdicts,
        budget=per_item("contexts"),
    )
)
