"""Human labels: what one annotator said about one scored sample, and which measures it checks.

This is the contract between the annotation round trip (export a form, import what people filled
in) and judge agreement (how far a judge metric agrees with people). One `HumanLabel` per
annotator per sample; a sample labelled by three people has three. The four questions are the
ones the annotation form asks; each maps to the judge measures whose verdict it can confirm or
refute (`QUESTIONS`), so ``ragbridge agreement`` knows what to compare with what.

Why a fixed, small set of questions rather than free-form label columns: agreement needs to know
a label's scale (ordinal 1–5, or yes/partly/no) and its direction (grounded "no" agrees with a
*high* hallucination score). A label file of any other shape is refused by line and field, as
samples files are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..files import atomic_write

__all__ = [
    "GROUNDED_VALUES",
    "QUESTIONS",
    "HumanLabel",
    "LabelFileError",
    "LabelQuestion",
    "load_labels",
    "question_for",
    "save_labels",
]

Grounded = Literal["yes", "partly", "no"]
GROUNDED_VALUES: dict[str, float] = {"yes": 1.0, "partly": 0.5, "no": 0.0}
"""Grounded answers on [0, 1]: "partly" sits halfway for rank correlation."""


class HumanLabel(BaseModel):
    """One annotator's answers for one sample. Unanswered questions are None."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sample_id: str = Field(min_length=1)
    annotator: str = Field(min_length=1)
    relevance: int | None = Field(default=None, ge=1, le=5)
    """Does the answer address the question? 1 (not at all) – 5 (fully)."""
    accuracy: int | None = Field(default=None, ge=1, le=5)
    """Is the answer correct, against the reference where there is one? 1 – 5."""
    grounded: Grounded | None = None
    """Is every statement of the answer backed by the retrieved contexts?"""
    helpfulness: int | None = Field(default=None, ge=1, le=5)
    """Would the answer help the person who asked? 1 – 5."""
    comment: str = ""
    task_id: str | None = None
    """The annotation task this came from (several tasks may show the same sample)."""


@dataclass(frozen=True)
class LabelQuestion:
    """A question of the form: its scale and the measures it checks.

    ``graded`` maps an answer onto [0, 1] (for Spearman and AUROC); ``positive`` says which
    answers count as "yes" for the binary view (Cohen's kappa, the confusion matrix).
    ``measures`` are base metric names; ``inverted`` the ones where a *high* score means the
    human's "no" (hallucination is the share of unsupported claims).
    """

    name: str
    scale: tuple[str, ...]
    measures: tuple[str, ...]
    inverted: tuple[str, ...] = ()

    def graded(self, answer: int | str) -> float:
        if self.name == "grounded":
            return GROUNDED_VALUES[str(answer)]
        return (int(answer) - 1) / 4.0

    def positive(self, answer: int | str) -> bool:
        if self.name == "grounded":
            return answer == "yes"
        return int(answer) >= 4


_FIVE = ("1", "2", "3", "4", "5")

QUESTIONS: dict[str, LabelQuestion] = {
    "relevance": LabelQuestion("relevance", _FIVE, ("answer_relevance",)),
    "accuracy": LabelQuestion("accuracy", _FIVE, ("answer_correctness", "correctness")),
    "grounded": LabelQuestion(
        "grounded",
        ("yes", "partly", "no"),
        ("faithfulness", "groundedness", "hallucination"),
        inverted=("hallucination",),
    ),
    "helpfulness": LabelQuestion("helpfulness", _FIVE, ("helpfulness",)),
}
"""The form's questions by field name of `HumanLabel`."""


def question_for(metric: str) -> LabelQuestion | None:
    """The question whose answers check ``metric`` (``"faithfulness"`` or
    ``"faithfulness:offline"``), or None when people are not asked about it."""
    base = metric.split(":", 1)[0]
    for question in QUESTIONS.values():
        if base in question.measures:
            return question
    return None


class LabelFileError(ValueError):
    """A labels file has a bad line; the message starts ``file:line:`` and names the field."""


def line_problem(exc: ValidationError) -> str:
    """The first thing wrong with a file's line, as ``field.path: message`` (the ``file:line:``
    before it is the caller's)."""
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "<line>"
    return f"{where}: {err['msg']}"


def numbered_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each non-blank line of a JSON-lines file, a leading BOM dropped.

    How every labels, tasks and labelled-set file is read, so their errors count lines alike.
    """
    with Path(path).open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


W = TypeVar("W")


def first_label_at(seen: dict[tuple[str, str], W], label: HumanLabel, where: W) -> W | None:
    """Where ``label``'s annotator already labelled its sample, or None (and ``where`` is
    remembered as that place): one label per annotator and sample, in a file or over files."""
    key = (label.sample_id, label.annotator)
    if key in seen:
        return seen[key]
    seen[key] = where
    return None


def load_labels(path: str | os.PathLike[str]) -> Iterator[HumanLabel]:
    """Stream `HumanLabel`s from a JSONL file; a bad line raises `LabelFileError` naming it.

    One annotator labelling one sample twice is refused (which label would count?), naming both
    lines.
    """
    source = str(path)
    seen: dict[tuple[str, str], int] = {}
    for number, line in numbered_lines(path):
        try:
            label = HumanLabel.model_validate_json(line)
        except ValidationError as exc:
            raise LabelFileError(f"{source}:{number}: {line_problem(exc)}") from None
        first = first_label_at(seen, label, number)
        if first is not None:
            raise LabelFileError(
                f"{source}:{number}: annotator {label.annotator!r} labelled sample "
                f"{label.sample_id!r} twice (first on line {first})"
            )
        yield label


def save_labels(labels: Iterable[HumanLabel], path: str | os.PathLike[str]) -> int:
    """Write labels as JSONL atomically; returns the count. Unanswered questions are omitted."""
    count = 0
    with atomic_write(Path(path)) as handle:
        for label in labels:
            handle.write(json.dumps(label.model_dump(exclude_none=True), ensure_ascii=False))
            handle.write("\n")
            count += 1
    return count
