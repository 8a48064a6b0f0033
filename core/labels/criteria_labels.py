"""People's answers to a team's own criteria: which questions they are, on which scale.

A criterion's answers sit in ``HumanLabel.criteria`` under its name (`human.criterion_question`).
Agreement needs each one's scale — the middle of the scale is the people's yes/no cut, as 0.5 is
the judge's — and takes it from, in this order:

1. the criteria themselves, when the caller has them (a criteria file, the tasks of an
   annotation round, a labelled set's own criteria);
2. the scored results: a criterion metric's cells say ``details["scale"]`` (and
   ``details["kind"] == "aspect"`` for a yes/no one);
3. the labels: all true/false is a yes/no criterion; numbers span the smallest to the largest
   whole point given — said in a note, since a scale nobody used the top of would be cut short.

An answer off its criterion's scale is refused with the label that gave it, never clipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..results.evaluation import Evaluation
from .human import HumanLabel, LabelQuestion, criterion_question

__all__ = [
    "CriterionScaleError",
    "check_answers",
    "criteria_in",
    "criterion_questions",
    "scale_in_results",
]


class CriterionScaleError(ValueError):
    """A label answers a criterion off its scale; the message names the sample and annotator."""


def criteria_in(labels: Iterable[HumanLabel]) -> list[str]:
    """The criterion names the labels answer, in order of first appearance."""
    seen: dict[str, None] = {}
    for label in labels:
        for name in label.criteria or {}:
            seen.setdefault(name, None)
    return list(seen)


def scale_in_results(evaluation: Evaluation, metric: str) -> tuple[int, int] | str | None:
    """The scale a criterion metric's cells report: ``(low, high)``, None for a yes/no aspect,
    or ``"unknown"`` when no cell says (not a criterion metric, or every cell failed)."""
    for score in evaluation.column(metric).values():
        details = score.details
        if not isinstance(details, dict):
            continue
        if details.get("kind") == "aspect":
            return None
        scale = details.get("scale")
        if (
            isinstance(scale, (list, tuple))
            and len(scale) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
            and scale[0] < scale[1]
        ):
            return int(scale[0]), int(scale[1])
    return "unknown"


def _inferred(name: str, answers: Sequence[bool | int | float]) -> tuple[LabelQuestion, str]:
    if all(isinstance(a, bool) for a in answers):
        return criterion_question(name, None), f"{name}: read as yes/no (the labels are true/false)"
    numbers = [float(a) for a in answers if not isinstance(a, bool)]
    low, high = math.floor(min(numbers)), math.ceil(max(numbers))
    if low == high:
        low, high = low - 1, high
    note = (
        f"{name}: scale {low}-{high} inferred from the labels (no criterion says it): "
        "give the criteria to fix it"
    )
    return criterion_question(name, (low, high)), note


def criterion_questions(
    labels: Sequence[HumanLabel],
    *,
    given: Mapping[str, LabelQuestion] | None = None,
    evaluation: Evaluation | None = None,
    metrics: Iterable[str] = (),
    only: Iterable[str] | None = None,
) -> tuple[dict[str, LabelQuestion], list[str]]:
    """The question of every criterion the labels answer (of those named in ``only``, when
    given), and notes on scales that were guessed.

    ``given`` wins; then the scale the results' cells of ``metrics`` report (``name`` or
    ``name:provider``); then the labels (see the module docstring). Every answer is checked
    against its question's scale (`check_answers`).
    """
    keep = None if only is None else set(only)
    questions = {k: q for k, q in (given or {}).items() if keep is None or k in keep}
    notes: list[str] = []
    if evaluation is not None:
        for metric in metrics:
            base = metric.split(":", 1)[0]
            if base in questions or not any(base in (lab.criteria or {}) for lab in labels):
                continue
            scale = scale_in_results(evaluation, metric)
            if scale != "unknown":
                assert not isinstance(scale, str)
                questions[base] = criterion_question(base, scale)
    for name in criteria_in(labels):
        if name in questions or (keep is not None and name not in keep):
            continue
        answers = [a for lab in labels if (a := (lab.criteria or {}).get(name)) is not None]
        questions[name], note = _inferred(name, answers)
        notes.append(note)
    for question in questions.values():
        check_answers(labels, question)
    return questions, notes


def check_answers(labels: Iterable[HumanLabel], question: LabelQuestion) -> None:
    """Refuse the first label whose answer to ``question`` is off its scale."""
    for label in labels:
        answer = question.answer(label)
        if answer is not None and not question.on_scale(answer):
            scale = "true/false" if question.binary else f"{question.scale[0]}-{question.scale[-1]}"
            raise CriterionScaleError(
                f"criteria.{question.name}: {answer!r} (sample {label.sample_id!r}, annotator "
                f"{label.annotator!r}) is off the criterion's scale {scale}"
            )
