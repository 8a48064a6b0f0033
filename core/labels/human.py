"""Human labels: what one annotator said about one scored sample, and which measures it checks.

This is the contract between the annotation round trip (export a form, import what people filled
in) and judge agreement (how far a judge metric agrees with people). One `HumanLabel` per
annotator per sample; a sample labelled by three people has three. The four questions are the
ones the annotation form asks by default; each maps to the judge measures whose verdict it can
confirm or refute (`QUESTIONS`), so ``ragbridge agreement`` knows what to compare with what.

A team's own criterion (``ragbridge.core.criteria``) is asked as itself: its answers sit in
``HumanLabel.criteria`` under the criterion's name, on the criterion's own scale (an integer
from its scale, a mean of such, or yes/no as true/false), and they check the metric of the same
name (`criterion_question`). One mechanism for every criterion, no field per name.

Why a fixed, small set of questions rather than free-form label columns: agreement needs to know
a label's scale (ordinal 1–5, or yes/partly/no) and its direction (grounded "no" agrees with a
*high* hallucination score). A criterion brings both with it (its scale; higher is better), so
its answers may be keyed by name. A label file of any other shape is refused by line and field,
as samples files are.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from ..files import atomic_write

__all__ = [
    "CRITERION_NAME",
    "GROUNDED_VALUES",
    "QUESTIONS",
    "CriterionAnswer",
    "HumanLabel",
    "LabelFileError",
    "LabelQuestion",
    "criterion_question",
    "load_labels",
    "question_for",
    "save_labels",
]

Grounded = Literal["yes", "partly", "no"]
GROUNDED_VALUES: dict[str, float] = {"yes": 1.0, "partly": 0.5, "no": 0.0}
"""Grounded answers on [0, 1]: "partly" sits halfway for rank correlation."""

CriterionAnswer = bool | int | float
"""One answer to a criterion: yes/no (true/false), a point of its scale, or a mean of points."""

CRITERION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
"""A criterion's name, as ``ragbridge.core.criteria`` requires it (the measure's name)."""


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
    criteria: dict[str, StrictBool | StrictInt | StrictFloat] | None = None
    """Answers to a team's own criteria by criterion name, each on that criterion's scale
    (true/false for a yes/no one). Absent in label files written before criteria existed."""
    comment: str = ""
    task_id: str | None = None
    """The annotation task this came from (several tasks may show the same sample)."""

    @field_validator("criteria", mode="before")
    @classmethod
    def _criteria(cls, value: object) -> object:
        """Names a criterion can have; answers that are true/false or finite numbers (a string
        "4" is refused, not read as 4: it is usually a form or spreadsheet bug; a NaN would
        sort anywhere)."""
        if not isinstance(value, dict):
            return value
        for name, answer in value.items():
            if not isinstance(name, str) or not CRITERION_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a criterion name (a letter, then letters, digits or _)"
                )
            if isinstance(answer, bool):
                continue
            if not isinstance(answer, (int, float)):
                raise ValueError(f"{name}: {answer!r} is neither a number nor true/false")
            if not math.isfinite(answer):
                raise ValueError(f"{name}: {answer!r} is not a finite number")
        return value or None


Answer = int | float | str | bool


@dataclass(frozen=True)
class LabelQuestion:
    """A question people answer: its scale and the measures it checks.

    ``graded`` maps an answer onto [0, 1] (for Spearman and AUROC): its position between the
    scale's ends (grounded: `GROUNDED_VALUES`). ``positive`` says which answers count as "yes"
    for the binary view (Cohen's kappa, the confusion matrix): those above the middle of the
    scale — 4 and 5 of 1–5, grounded yes, a criterion's "yes" — the same cut as a judge's
    default threshold of 0.5 on its normalised score. ``measures`` are base metric names;
    ``inverted`` the ones where a *high* score means the human's "no" (hallucination is the
    share of unsupported claims). ``criterion`` marks a team's own criterion, whose answers sit
    in ``HumanLabel.criteria`` under ``name`` (`criterion_question`).
    """

    name: str
    scale: tuple[str, ...]
    measures: tuple[str, ...]
    inverted: tuple[str, ...] = ()
    criterion: bool = False

    @property
    def binary(self) -> bool:
        """A yes/no criterion (an aspect)."""
        return self.criterion and self.scale == ("no", "yes")

    def answer(self, label: HumanLabel) -> Answer | None:
        """What ``label`` answered to this question, or None."""
        if self.criterion:
            return None if label.criteria is None else label.criteria.get(self.name)
        value: Answer | None = getattr(label, self.name)
        return value

    def graded(self, answer: Answer) -> float:
        if self.binary:
            return 1.0 if answer is True or answer == "yes" else 0.0
        if self.name == "grounded" and not self.criterion:
            return GROUNDED_VALUES[str(answer)]
        low, high = float(self.scale[0]), float(self.scale[-1])
        return (float(answer) - low) / (high - low)

    def positive(self, answer: Answer) -> bool:
        return self.graded(answer) > 0.5

    def on_scale(self, answer: Answer) -> bool:
        """Whether ``answer`` lies on this question's scale (between its ends, for numbers)."""
        if self.binary:
            return isinstance(answer, bool)
        if isinstance(answer, bool) or not isinstance(answer, (int, float)):
            return isinstance(answer, str) and answer in self.scale
        return float(self.scale[0]) <= float(answer) <= float(self.scale[-1])

    def point(self, answer: Answer) -> str | None:
        """``answer`` as one of ``scale``'s strings (``True`` -> ``"yes"``, ``4.0`` -> ``"4"``),
        or None for an answer between two points (a mean of several people's)."""
        if isinstance(answer, bool):
            text = "yes" if answer else "no"
        elif isinstance(answer, float):
            text = str(int(answer)) if answer.is_integer() else ""
        else:
            text = str(answer)
        return text if text in self.scale else None


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


def criterion_question(name: str, scale: tuple[int, int] | None) -> LabelQuestion:
    """The question that asks people criterion ``name`` itself: ``scale`` its inclusive integer
    scale (a scored criterion, a rubric's levels), None for a yes/no one (an aspect). Its answers
    check the metric of the same name; higher is better, as for every criterion."""
    if not CRITERION_NAME.match(name):
        raise ValueError(f"{name!r} is not a criterion name (a letter, then letters, digits or _)")
    if scale is None:
        return LabelQuestion(name, ("no", "yes"), (name,), criterion=True)
    low, high = scale
    if isinstance(low, bool) or isinstance(high, bool) or not low < high:
        raise ValueError(f"{name}: scale must be two integers, low < high, got {scale!r}")
    return LabelQuestion(
        name, tuple(str(i) for i in range(int(low), int(high) + 1)), (name,), criterion=True
    )


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
