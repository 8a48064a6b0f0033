"""The pieces a `Sample` and a conversation's `Turn` share: a retrieved `Context`, a graded
relevance label, and how ids and bare passage strings are read.

They live apart from both records so that a sample can carry the turns before its question
(``Sample.history``) and a turn can carry contexts, without the two modules importing each
other.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

__all__ = ["MAX_GRADE", "MIN_GRADE", "Context", "Grade"]


MIN_GRADE = -10
"""Lowest relevance grade accepted. trec_eval collections use small negative grades (-1, -2)
for junk or spam documents; anything lower is almost certainly a data error."""
MAX_GRADE = 1000
"""Highest relevance grade accepted. Graded qrels use 0-3 or 0-4; a 0-100 scale still fits. A
grade like 10**30 is a data error that would otherwise overflow inside nDCG."""


def _short_int(value: int) -> str:
    text = str(value)
    return text if len(text) <= 12 else f"{text[:6]}…({len(text)} digits)"


def _check_grade(grade: Any) -> Any:
    if isinstance(grade, bool) or not isinstance(grade, int):
        raise ValueError(f"a grade must be an integer, got {grade!r}")
    if not MIN_GRADE <= grade <= MAX_GRADE:
        raise ValueError(
            f"grade {_short_int(grade)} is out of range: grades must lie within "
            f"[{MIN_GRADE}, {MAX_GRADE}] (qrels grades are small integers, e.g. 0-3)"
        )
    return grade


Grade = Annotated[int, Field(ge=MIN_GRADE, le=MAX_GRADE), BeforeValidator(_check_grade)]
"""A relevance grade: an integer within [MIN_GRADE, MAX_GRADE]; booleans are refused."""


def _id_to_str(value: Any) -> Any:
    # Ids often arrive as integers from spreadsheets and dataframes; they are names, not numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _texts_as_contexts(value: Any) -> Any:
    # The commonest hand-written form is a list of passage strings; accept it as such.
    if isinstance(value, list):
        return [{"text": v} if isinstance(v, str) else v for v in value]
    return value


class Context(BaseModel):
    """One retrieved passage; ``id`` links it to ``Sample.relevance``, ``score`` is the retriever's
    own (kept for thresholds and reports; the list order is the ranking)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    text: str = Field(strict=True)
    id: str | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _coerce_id(cls, value: Any) -> Any:
        return _id_to_str(value)
