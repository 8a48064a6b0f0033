"""The Score of the context-relevance measures from one verdict per context, whoever judged.

The judge (`ragbridge.core.metrics.context_relevance`) and the offline provider
(`ragbridge.core.metrics.providers.offline.relevance`) both end here, so the two measures'
formulas, reasons and details are written once: the share of relevant contexts, or their
rank-weighted precision (`average_precision`, context precision's weighting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results.evaluation import Score
from ..sample import Sample
from ._shared import average_precision

__all__ = ["relevance_score"]


def relevance_score(
    sample: Sample,
    relevant: Sequence[bool],
    per_context: Sequence[dict[str, Any]],
    *,
    ranked: bool,
    extra: Mapping[str, Any] | None = None,
    **stamp: Any,
) -> Score:
    """``context_relevance`` (``ranked`` False) or ``context_relevance_ranked`` of ``sample``.

    ``per_context`` adds what the provider knows of each context (the judge's reason, the
    offline similarity) to the rank, id and verdict every provider reports; ``extra`` to the
    Score's details (the offline threshold); ``stamp`` is the Score's usage and prompt version.
    """
    n = len(relevant)
    hits = 0
    details: list[dict[str, Any]] = []
    for k, (context, r, known) in enumerate(
        zip(sample.contexts, relevant, per_context, strict=True), start=1
    ):
        hits += r
        row: dict[str, Any] = {"rank": k, "context_id": context.id, "relevant": r, **known}
        if ranked:
            row["precision_at_k"] = hits / k
        details.append(row)
    share = hits / n
    value = average_precision(list(relevant)) if ranked else share
    if not hits:
        reason = f"none of the {n} contexts is relevant to the question"
    elif ranked:
        reason = f"{hits} of {n} contexts relevant to the question; rank-weighted {value:.2f}"
    else:
        reason = f"{hits} of {n} contexts relevant to the question"
    return Score(
        value=value,
        reason=reason,
        details={
            "relevant": hits,
            "total": n,
            "share": share,
            "contexts": details,
            **(extra or {}),
        },
        **stamp,
    )
