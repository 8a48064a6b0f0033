"""What the ``ragas`` and ``deepeval`` providers share: the fields each measure reads, and how
another framework's error becomes a typed failure instead of an exception or a NaN.

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragbridge.core.results.evaluation import Failure, FailureKind, Score, Usage
from ragbridge.core.sample import Sample

__all__ = ["INPUTS", "missing", "raised"]

INPUTS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("question", "answer", "contexts"),
    "answer_relevance": ("question", "answer"),
    "context_precision": ("question", "reference", "contexts"),
    "context_recall": ("question", "reference", "contexts"),
    "rouge_l": ("answer", "reference"),
    "bleu": ("answer", "reference"),
    "exact_match": ("answer", "reference"),
}
"""Sample fields the frameworks' implementation of each measure reads."""


def missing(sample: Sample, fields: Sequence[str], measure: str) -> Score | None:
    """A ``missing_input`` failure naming the first empty field, or None."""
    for name in fields:
        value = getattr(sample, name)
        if value is None or (isinstance(value, (str, list)) and not value):
            return Score.fail(
                FailureKind.MISSING_INPUT, f"{measure} needs the sample's {name!r}, which is empty"
            )
    return None


def raised(
    framework: str,
    measure: str,
    exc: BaseException,
    *,
    provider: str,
    usage: Usage | None = None,
    model: str | None = None,
) -> Score:
    """A framework's exception as a ``judge_error`` failure naming it (first line, clipped)."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return Score(
        failure=Failure(
            kind=FailureKind.JUDGE_ERROR,
            message=f"{framework} {measure} raised {type(exc).__name__}: {first}",
        ),
        provider=provider,
        usage=usage or Usage(),
        judge_model=model,
    )
