"""Which judge call answers the per-context measures of a sample, given who else runs.

Context precision, context recall and the two context-relevance measures read the same
numbered contexts, so a run asks one call per sample for as many of them as run together (LLM
providers):

* context_relevance and/or context_relevance_ranked: ``context_relevance.judge``;
* context_precision (against the reference) + context_recall: ``context.assess`` (`ASSESS_TAG`);
* a relevance measure + context_precision: ``context.relevant_useful.with_reference``, or
  ``.with_answer`` on a sample precision judges against the answer;
* a relevance measure + context_precision + context_recall: ``context.assess_relevance``, under
  the memo and plan key of ``context.assess``.

The two relevance measures share their call by its key alone (`relevance_key`): the same
prompt whoever asks. Sharing with precision changes the prompt, so it needs to know who runs,
and a metric learns that only from the run's share tags (`MetricContext.shared_tags`: the tags
that two or more metrics of the run declare). The tags here name a *pair*, a precision mode and
a relevance measure (`pair_tag`): a relevance measure declares its pair with each mode, a
precision metric its mode's pair with each relevance measure. So a tag is active only when a
precision metric and a relevance measure both run — the two relevance measures alone activate
none — and the active tag tells the relevance measure the precision's mode: whether usefulness
is judged against the reference, the answer, or the reference when the sample has one
(`precision_target`). Both sides then compute the same `JointCall` for each sample, with the
same memo key, and the first to ask pays (`usage_of`); the dry-run plan gives the call one
share key, so it is counted once.

With context recall in the run as well, ``context.assess`` is the call precision would make
with recall; `assess_template` makes that call carry relevance too, so the three measures cost
one call (recall learns of it from the same active pair tags, and reads the statements as
before). A sample precision judges against the answer (no reference) is not recall's: recall
needs the reference, so there the joint ``with_answer`` call serves precision and relevance.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ..judging.engine import JudgeCall
from ..prompts.base import PromptTemplate
from ..prompts.context_assess import CONTEXT_ASSESS
from ..prompts.context_relevance import (
    CONTEXT_ASSESS_RELEVANCE,
    CONTEXT_RELEVANCE,
    CONTEXT_RELEVANT_USEFUL_WITH_ANSWER,
    CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE,
)
from ..prompts.history import asked
from ..sample import Sample
from ._shared import ASSESS_TAG, plan_assess, planned
from .base import MetricContext, PlannedCall

__all__ = [
    "MODES",
    "RELEVANCE_MEASURES",
    "JointCall",
    "ask_joint",
    "assess_template",
    "joint_call",
    "mode_of",
    "pair_tag",
    "paired_mode",
    "plan_joint",
    "precision_paired",
    "precision_share_tags",
    "precision_target",
    "relevance_key",
    "relevance_share_tags",
]

RELEVANCE_MEASURES = ("context_relevance", "context_relevance_ranked")
"""The measures answered from a context-relevance verdict per context."""

MODES = ("auto", "reference", "answer")
"""What context precision judges usefulness against: ``use_reference`` None, True, False."""


def mode_of(use_reference: bool | None) -> str:
    return {None: "auto", True: "reference", False: "answer"}[use_reference]


def pair_tag(mode: str, measure: str) -> str:
    """The share tag of context precision in ``mode`` paired with relevance measure ``measure``."""
    return f"context.relevant_useful:{mode}:{measure}"


def relevance_share_tags(measure: str) -> frozenset[str]:
    """What a relevance measure declares: its pair with precision in every mode."""
    return frozenset(pair_tag(mode, measure) for mode in MODES)


def precision_share_tags(mode: str) -> frozenset[str]:
    """What context precision in ``mode`` declares: its pair with every relevance measure."""
    return frozenset(pair_tag(mode, measure) for measure in RELEVANCE_MEASURES)


def paired_mode(tags: frozenset[str], measure: str) -> str | None:
    """The mode of the context precision that relevance measure ``measure`` shares with in this
    run, or None (no precision runs; a precision of another provider declares no tags)."""
    return next((mode for mode in MODES if pair_tag(mode, measure) in tags), None)


def precision_paired(tags: frozenset[str], mode: str) -> bool:
    """Whether context precision in ``mode`` shares its call with a relevance measure."""
    return any(pair_tag(mode, measure) in tags for measure in RELEVANCE_MEASURES)


def assess_template(tags: frozenset[str]) -> PromptTemplate:
    """The template of the shared ``context.assess`` call: with relevance per context when a
    relevance measure runs with a precision that judges against the reference (its mode
    ``auto`` or ``reference``: the mode whose samples reach ``context.assess``)."""
    for mode in ("auto", "reference"):
        if precision_paired(tags, mode):
            return CONTEXT_ASSESS_RELEVANCE
    return CONTEXT_ASSESS


def precision_target(sample: Sample, mode: str) -> tuple[str, str] | None:
    """(``"reference"`` or ``"answer"``, its text): what precision in ``mode`` judges a
    context's usefulness for on this sample; None when the sample lacks it."""
    wanted = {"reference": ("reference",), "answer": ("answer",)}.get(mode, ("reference", "answer"))
    for name in wanted:
        text = getattr(sample, name)
        if text is not None and text.strip():
            return name, text
    return None


def relevance_key(sample: Sample) -> tuple[str, str, tuple[str, ...]]:
    """Memo and plan key of ``context_relevance.judge``: both relevance measures share it."""
    return (CONTEXT_RELEVANCE.id, asked(sample), tuple(c.text for c in sample.contexts))


@dataclass(frozen=True)
class JointCall:
    """The call context precision and a relevance measure share for one sample.

    ``assess``: answered by the shared ``context.assess`` call (`assess_template`), whose memo
    and plan key belong to `ragbridge.core.metrics._shared`; otherwise ``key`` is its own.
    """

    template: PromptTemplate
    against: str
    values: dict[str, Any]
    key: Hashable
    assess: bool = False


def joint_call(sample: Sample, tags: frozenset[str], mode: str) -> JointCall | None:
    """The call precision in ``mode`` and a relevance measure share for ``sample``; None when
    precision has nothing to judge against (it fails ``missing_input``; relevance asks alone).

    Precision and relevance both call this with the run's tags, so they agree on the call.
    """
    target = precision_target(sample, mode)
    if target is None:
        return None
    against, text = target
    contexts = [c.text for c in sample.contexts]
    question = asked(sample)
    values: dict[str, Any] = {"question": question, against: text, "contexts": contexts}
    if against == "reference" and ASSESS_TAG in tags:
        return JointCall(assess_template(tags), against, values, None, assess=True)
    template = (
        CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE
        if against == "reference"
        else CONTEXT_RELEVANT_USEFUL_WITH_ANSWER
    )
    key = (template.id, question, text, tuple(contexts))
    return JointCall(template, against, values, key)


async def ask_joint(joint: JointCall, ctx: MetricContext) -> tuple[JudgeCall[Any], bool]:
    """The shared call of a non-``assess`` `JointCall`, and whether this caller owns it."""
    assert not joint.assess
    return await ctx.shared(joint.key, lambda: ctx.ask(joint.template, **joint.values))


def plan_joint(sample: Sample, joint: JointCall) -> PlannedCall:
    """The dry-run estimate of a `JointCall`, under the key that counts it once."""
    if joint.assess:
        return plan_assess(sample, joint.template)
    return planned(joint.template, joint.key, **joint.values)
