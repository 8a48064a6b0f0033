"""Human annotation: which results people are asked about, and how far those people agree.

The round trip is: `select_tasks` picks a sample of an eval set (optionally stratified by a judge
score) and turns each chosen sample into an `AnnotationTask`; an adapter renders the tasks as a
form; people fill it in and each saves a labels file (`ragbridge.core.labels.human.HumanLabel`
lines); `merge_labels` checks those files against the tasks and merges them; `annotator_agreement`
says per question how far the annotators agree with each other. How far a *judge* agrees with them
is a separate question, answered from the same labels by ``ragbridge agreement``.

**Selection is by hash, not by a random stream.** A sample's draw is
``sha256(f"{seed}:{sample_id}")``: the same seed picks the same samples on every machine and
Python version (``random.shuffle``'s algorithm is not guaranteed across versions), whatever the
order of the file, and adding samples to the file never reshuffles the ones already there.

**Stratified by a judge score when results are given.** A uniform sample of a good pipeline is
almost all high scores, and agreement measured on it says little about the low ones — where a
judge's verdict matters most. With a score column the samples fall into three fixed bins of
``[0, 1]`` (low < 1/3 ≤ mid < 2/3 ≤ high) and the tasks are drawn round-robin from them, so each
bin gets an equal share until it runs out; samples without a value (a judge failure, a missing
cell) only fill what the bins cannot. Each task records its ``stratum``: the sample is balanced,
not representative, and a reader who wants population estimates reweights by it. The tasks are
then put in a second hash order so the bins do not show in the sequence of the form.

**A team's own criteria can be asked as themselves.** Given criteria (``ragbridge.core.criteria``
specs), every task carries them (`AskedCriterion`: the name, the criterion in words, its scale or
yes/no, a rubric's level descriptions), the form asks them instead of the four default questions,
and the labels answer them in ``HumanLabel.criteria`` — checked against the task's criteria and
scales when merged. So a team calibrates its criterion on the very words the judge is given.

**Judge scores travel with the tasks but are not shown.** A person who sees "faithfulness 0.92"
next to the answer anchors on it, and the labels then measure agreement with the judge by
construction. The scores are kept in the tasks file (for analysis) and the form leaves them out
unless asked to show them.

Agreement statistics (per question, over the samples labelled by two or more people):

* Krippendorff's alpha, ``alpha = 1 - D_o / D_e`` from the coincidence matrix (Krippendorff,
  *Content Analysis*, 2004, ch. 11; "Computing Krippendorff's Alpha-Reliability", 2011). It
  takes any number of annotators and missing labels. The 1–5 questions and grounded
  (no < partly < yes) use the ordinal metric: a 4 against a 5 is a smaller disagreement than a
  1 against a 5, but the steps of the scale need not be equal.
* Mean pairwise Cohen's kappa, quadratic weights (Cohen 1968; ordinal positions), over the pairs
  of annotators who share at least two samples — the figure most papers report.
* Raw agreement: the share of pairs of labels on the same sample that are identical. Without
  chance correction, so it is high when everyone says 5; read it next to alpha.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..files import atomic_write
from ..results.evaluation import Evaluation
from ..results.stats import cohen_kappa, sorted_scale
from ..sample import Sample
from .human import (
    CRITERION_NAME,
    QUESTIONS,
    HumanLabel,
    LabelQuestion,
    criterion_question,
    first_label_at,
    line_problem,
    load_labels,
    numbered_lines,
)

__all__ = [
    "STRATA",
    "AnnotationError",
    "AnnotationTask",
    "AskedCriterion",
    "QuestionAgreement",
    "Selection",
    "TaskContext",
    "annotator_agreement",
    "asked_criterion",
    "default_stratify_metric",
    "form_id",
    "krippendorff_alpha",
    "label_counts",
    "labels_with_lines",
    "load_tasks",
    "merge_labels",
    "question_agreement",
    "save_tasks",
    "select_tasks",
    "tasks_criteria",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]

STRATA: tuple[str, ...] = ("low", "mid", "high")
"""The score bins of a stratified selection: [0, 1/3), [1/3, 2/3), [2/3, 1]."""
UNSCORED = "unscored"

ORDINAL_SCALES: dict[str, tuple[str, ...]] = {
    "relevance": ("1", "2", "3", "4", "5"),
    "accuracy": ("1", "2", "3", "4", "5"),
    "grounded": ("no", "partly", "yes"),
    "helpfulness": ("1", "2", "3", "4", "5"),
}
"""Each question's answers from worst to best: the order the ordinal statistics use."""


class AnnotationError(ValueError):
    """A labels or tasks file does not fit the tasks; the message starts ``file:line:``."""


# ---------------------------------------------------------------------------------- tasks


class TaskContext(BaseModel):
    """One retrieved passage as the annotator sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    id: str | None = None


class AskedCriterion(BaseModel):
    """A team's criterion as people are asked it: ``text`` is the criterion in words (a scored
    criterion's ``criteria``, an aspect's ``definition``, a rubric's meaning), ``scale`` its
    inclusive integer scale (None: yes/no), ``levels`` a rubric's description per level."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=CRITERION_NAME.pattern)
    text: str = Field(min_length=1)
    scale: tuple[int, int] | None = None
    levels: dict[int, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _scale(self) -> AskedCriterion:
        if self.scale is not None and not self.scale[0] < self.scale[1]:
            raise ValueError(f"scale must be two integers, low < high, got {list(self.scale)}")
        outside = [
            k for k in self.levels if self.scale is None or not self.scale[0] <= k <= self.scale[1]
        ]
        if outside:
            raise ValueError(f"levels {outside} lie outside the scale")
        return self

    def question(self) -> LabelQuestion:
        """The label question whose answers are this criterion's (`criterion_question`)."""
        return criterion_question(self.name, self.scale)


def asked_criterion(spec: Any) -> AskedCriterion:
    """A criterion spec (``ragbridge.core.criteria``: Criterion, Aspect or Rubric) as people are
    asked it. Read by attribute, so the labels need not import the criteria package."""
    kind = getattr(spec, "kind", None)
    name = str(getattr(spec, "name", ""))
    if kind == "criterion":
        return AskedCriterion(name=name, text=str(spec.criteria), scale=spec.scale)
    if kind == "aspect":
        return AskedCriterion(name=name, text=str(spec.definition))
    if kind == "rubric":
        levels = dict(spec.rubrics)
        return AskedCriterion(name=name, text=str(spec.meaning), scale=spec.scale, levels=levels)
    raise ValueError(f"not a criterion spec (Criterion, Aspect or Rubric): {spec!r}")


class AnnotationTask(BaseModel):
    """One sample put in front of people: what was asked, retrieved, answered and expected.

    ``scores`` are the judge's values at export time (failed cells left out), kept for analysis
    and hidden from annotators by default; ``stratum`` is the score bin the sample was drawn
    from (None when the selection was not stratified).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    task_id: str = Field(min_length=1)
    sample_id: str = Field(min_length=1)
    question: str
    contexts: list[TaskContext] = Field(default_factory=list)
    answer: str
    reference: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    stratum: str | None = None
    criteria: list[AskedCriterion] = Field(default_factory=list)
    """The team's criteria people are asked instead of the four default questions (none: the
    four)."""

    def dumped(self) -> dict[str, object]:
        """The task as JSON data; no ``criteria`` key when none are asked, so tasks (and form
        ids) written before criteria existed stay the same bytes."""
        data = self.model_dump(mode="json")
        if not self.criteria:
            data.pop("criteria")
        return data


def load_tasks(path: str | os.PathLike[str]) -> list[AnnotationTask]:
    """Read a tasks file; a bad line or a repeated task id raises `AnnotationError`."""
    source = os.fspath(path)
    tasks: list[AnnotationTask] = []
    seen: dict[str, int] = {}
    for number, line in numbered_lines(path):
        try:
            task = AnnotationTask.model_validate_json(line)
        except ValidationError as exc:
            raise AnnotationError(f"{source}:{number}: {line_problem(exc)}") from None
        if task.task_id in seen:
            raise AnnotationError(
                f"{source}:{number}: task_id: duplicate task id {task.task_id!r} "
                f"(first on line {seen[task.task_id]})"
            )
        seen[task.task_id] = number
        tasks.append(task)
    if not tasks:
        raise AnnotationError(f"{source}: holds no tasks")
    return tasks


def save_tasks(tasks: Iterable[AnnotationTask], path: str | os.PathLike[str]) -> int:
    """Write tasks as JSONL atomically; returns the count."""
    count = 0
    with atomic_write(Path(path)) as handle:
        for task in tasks:
            handle.write(json.dumps(task.dumped(), ensure_ascii=False) + "\n")
            count += 1
    return count


def form_id(tasks: Sequence[AnnotationTask]) -> str:
    """A short digest of the tasks' content: the form's identity (its browser storage key).

    Two forms of the same tasks share saved answers; a form of other tasks never sees them.
    """
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(json.dumps(task.dumped(), sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------ selection


@dataclass(frozen=True)
class Selection:
    """What `select_tasks` chose and from what: the CLI prints it, the tests check it."""

    tasks: list[AnnotationTask]
    stratify_by: str | None
    available: dict[str, int]
    """Samples available per stratum (or ``{"all": n}`` unstratified)."""
    chosen: dict[str, int]
    """Tasks drawn per stratum."""
    without_answer: list[str] = field(default_factory=list)
    """Ids of samples left out because they have no answer to judge."""


def _draw(seed: int, purpose: str, sample_id: str) -> str:
    return hashlib.sha256(f"{seed}:{purpose}:{sample_id}".encode()).hexdigest()


def _stratum(value: float | None) -> str:
    if value is None:
        return UNSCORED
    if value < 1 / 3:
        return "low"
    if value < 2 / 3:
        return "mid"
    return "high"


def default_stratify_metric(evaluation: Evaluation) -> str | None:
    """The metric to stratify by when none is named: the first one a form question checks
    (faithfulness, answer relevance, correctness, ...), else the first with any value."""
    from .human import question_for

    with_values = [m for m in evaluation.metrics if evaluation.values(m)[0]]
    for metric in with_values:
        if question_for(metric) is not None:
            return metric
    return with_values[0] if with_values else None


def select_tasks(
    samples: Sequence[Sample],
    n: int,
    *,
    seed: int = 7,
    evaluation: Evaluation | None = None,
    stratify_by: str | None = None,
    criteria: Sequence[AskedCriterion] = (),
) -> Selection:
    """Pick ``n`` samples with an answer and turn them into tasks (see the module docstring).

    ``stratify_by`` names a metric of ``evaluation`` to draw evenly across its score bins; None
    draws uniformly. Every scored metric of the sample is copied into ``AnnotationTask.scores``.
    ``criteria`` are asked in every task instead of the four default questions.
    Fewer than ``n`` answered samples gives them all. Raises ValueError for ``n < 1``, for a
    ``stratify_by`` without an evaluation, or for a metric the evaluation does not hold.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    names = [c.name for c in criteria]
    if len(set(names)) != len(names):
        raise ValueError(f"criteria: a name is given twice: {', '.join(names)}")
    _check_stratify_by(evaluation, stratify_by)
    answered = [s for s in samples if s.answer is not None and s.answer.strip()]
    kept = {s.id for s in answered}
    bins, order = _bins(answered, evaluation, stratify_by, seed)
    picked = _round_robin(bins, order, n)
    picked.sort(key=lambda pair: _draw(seed, "order", pair[0].id))
    width = len(str(len(picked)))
    tasks = [
        _task(f"t{i:0{width}d}", sample, evaluation, None if name == "all" else name, criteria)
        for i, (sample, name) in enumerate(picked, start=1)
    ]
    return Selection(
        tasks=tasks,
        stratify_by=stratify_by,
        available={name: len(bins.get(name, [])) for name in order if bins.get(name)},
        chosen=dict(Counter(name for _, name in picked)),
        without_answer=[s.id for s in samples if s.id not in kept],
    )


def _check_stratify_by(evaluation: Evaluation | None, stratify_by: str | None) -> None:
    """A metric to stratify by needs the results that hold it."""
    if stratify_by is None:
        return
    if evaluation is None:
        raise ValueError("stratify_by needs an evaluation (the results to stratify by)")
    if stratify_by not in evaluation.metrics:
        held = ", ".join(evaluation.metrics) or "none"
        raise ValueError(f"stratify_by: no metric {stratify_by!r} in the results (has: {held})")


def _bins(
    answered: Sequence[Sample], evaluation: Evaluation | None, metric: str | None, seed: int
) -> tuple[dict[str, list[Sample]], list[str]]:
    """The samples by score bin of ``metric`` (one bin, ``all``, without a metric), each bin in
    the seed's draw order, and the bins' order."""
    bins: dict[str, list[Sample]] = defaultdict(list)
    if metric is None or evaluation is None:
        bins["all"] = list(answered)
        order = ["all"]
    else:
        for sample in answered:
            score = evaluation.get(sample.id, metric)
            bins[_stratum(score.value if score is not None else None)].append(sample)
        order = [*STRATA, UNSCORED]
    for members in bins.values():
        members.sort(key=lambda s: _draw(seed, "select", s.id))
    return bins, order


def _round_robin(
    bins: Mapping[str, list[Sample]], order: Sequence[str], n: int
) -> list[tuple[Sample, str]]:
    """Up to ``n`` samples drawn in turn from each score bin; the unscored only fill what the
    bins cannot."""
    picked: list[tuple[Sample, str]] = []
    queues = {name: list(bins.get(name, [])) for name in order}
    rounds = [name for name in order if name != UNSCORED]
    while len(picked) < n and any(queues[name] for name in rounds):
        for name in rounds:
            if queues[name] and len(picked) < n:
                picked.append((queues[name].pop(0), name))
    while len(picked) < n and queues.get(UNSCORED):
        picked.append((queues[UNSCORED].pop(0), UNSCORED))
    return picked


def _task(
    task_id: str,
    sample: Sample,
    evaluation: Evaluation | None,
    stratum: str | None,
    criteria: Sequence[AskedCriterion] = (),
) -> AnnotationTask:
    scores: dict[str, float] = {}
    if evaluation is not None:
        for metric in evaluation.metrics:
            score = evaluation.get(sample.id, metric)
            if score is not None and score.value is not None:
                scores[metric] = score.value
    assert sample.answer is not None
    return AnnotationTask(
        task_id=task_id,
        sample_id=sample.id,
        question=sample.question,
        contexts=[TaskContext(text=c.text, id=c.id) for c in sample.contexts],
        answer=sample.answer,
        reference=sample.reference,
        scores=scores,
        stratum=stratum,
        criteria=list(criteria),
    )


# ---------------------------------------------------------------------------------- merge


def labels_with_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, HumanLabel]]:
    """``("file:line", label)`` for each label of a file, parsed by `load_labels`.

    The location is what `merge_labels` names in its errors: `load_labels` reads the same
    numbered lines (`numbered_lines`).
    """
    source = os.fspath(path)
    numbers = [number for number, _ in numbered_lines(path)]
    for number, label in zip(numbers, load_labels(path), strict=True):
        yield f"{source}:{number}", label


def merge_labels(
    labelled: Iterable[tuple[str, HumanLabel]],
    tasks: Sequence[AnnotationTask],
    *,
    tasks_name: str = "the tasks",
) -> list[HumanLabel]:
    """Check located labels against the tasks and merge them, in task order then annotator.

    Refused, naming ``file:line:field``: a sample id that is not one of the tasks (labels of
    another form), a task id that is unknown or shows another sample, and one annotator
    labelling one sample twice — across files too (the same person saving twice: pass only the
    latest file). A label without a task id gets the task's when the sample has exactly one.
    """
    by_task = {task.task_id: task for task in tasks}
    tasks_of: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        tasks_of[task.sample_id].append(task.task_id)
    seen: dict[tuple[str, str], str] = {}
    merged: list[HumanLabel] = []
    for where, label in labelled:
        if label.sample_id not in tasks_of:
            raise AnnotationError(
                f"{where}: sample_id: {label.sample_id!r} is not one of {tasks_name} "
                "(labels of another form?)"
            )
        if label.task_id is not None:
            shown = by_task.get(label.task_id)
            if shown is None:
                raise AnnotationError(
                    f"{where}: task_id: {label.task_id!r} is not one of {tasks_name}"
                )
            if shown.sample_id != label.sample_id:
                raise AnnotationError(
                    f"{where}: task_id: task {label.task_id!r} shows sample "
                    f"{shown.sample_id!r}, not {label.sample_id!r} (labels of another form?)"
                )
        elif len(tasks_of[label.sample_id]) == 1:
            label = label.model_copy(update={"task_id": tasks_of[label.sample_id][0]})
        shown_tasks = (
            [by_task[label.task_id]]
            if label.task_id is not None
            else [by_task[t] for t in tasks_of[label.sample_id]]
        )
        _check_criteria(where, label, shown_tasks)
        first = first_label_at(seen, label, where)
        if first is not None:
            raise AnnotationError(
                f"{where}: annotator: {label.annotator!r} labelled sample {label.sample_id!r} "
                f"twice (also at {first}); keep one of the two files or lines"
            )
        merged.append(label)
    position = {task.task_id: i for i, task in enumerate(tasks)}
    merged.sort(key=lambda lab: (position.get(lab.task_id or "", len(position)), lab.annotator))
    return merged


def _check_criteria(where: str, label: HumanLabel, shown: Sequence[AnnotationTask]) -> None:
    """A label answers only the criteria its task asked, each on the criterion's scale."""
    if not label.criteria:
        return
    asked = {c.name: c for task in shown for c in task.criteria}
    for name, answer in label.criteria.items():
        criterion = asked.get(name)
        if criterion is None:
            known = ", ".join(sorted(asked)) or "none"
            raise AnnotationError(
                f"{where}: criteria.{name}: not a criterion the task asked (it asked: {known})"
            )
        if not criterion.question().on_scale(answer):
            scale = (
                "true or false"
                if criterion.scale is None
                else (f"{criterion.scale[0]}-{criterion.scale[1]}")
            )
            raise AnnotationError(f"{where}: criteria.{name}: {answer!r} is off its scale {scale}")


def tasks_criteria(tasks: Iterable[AnnotationTask]) -> dict[str, LabelQuestion]:
    """The label question of every criterion the tasks ask (for `annotator_agreement`)."""
    return {c.name: c.question() for task in tasks for c in task.criteria}


# ------------------------------------------------------------------------------ agreement


def krippendorff_alpha(
    units: Iterable[Iterable[Hashable | None]],
    *,
    level: Level = "nominal",
    values: Sequence[Hashable] | None = None,
) -> float:
    """Krippendorff's alpha over units, each the list of values its annotators gave.

    ``alpha = 1 - (n - 1) * sum(o_ck * d2_ck) / sum(n_c * n_k * d2_ck)``, with ``o`` the
    coincidence matrix (each unit with ``m >= 2`` values adds every ordered pair of its values
    with weight ``1 / (m - 1)``), ``n_c`` its row sums and ``n`` their total (Krippendorff 2011,
    "Computing Krippendorff's Alpha-Reliability", eqs. for D_o and D_e). ``d2`` is the level's
    difference: nominal ``c != k``; ordinal ``(sum_{g=c..k} n_g - (n_c + n_k) / 2) ** 2`` over
    the ranks of ``values`` (default: the values sorted); interval ``(c - k) ** 2``; ratio
    ``((c - k) / (c + k)) ** 2`` (these two need numbers).

    Missing labels are absent or None. Units with fewer than two values carry no pair and are
    ignored. Raises ValueError when no unit has two values, or when every pairable value is the
    same (expected disagreement is zero: alpha is 0/0).
    """
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, got {level!r}")
    rows = [[v for v in unit if v is not None] for unit in units]
    rows = [row for row in rows if len(row) >= 2]
    if not rows:
        raise ValueError("krippendorff_alpha needs at least one unit with two or more values")
    present = list(dict.fromkeys(v for row in rows for v in row))
    if values is not None:
        unknown = [v for v in present if v not in values]
        if unknown:
            raise ValueError(f"values not on the scale {list(values)!r}: {unknown!r}")
        scale = list(values)
    else:
        scale = sorted_scale(present, "values cannot be sorted; pass values=")
    index = {v: i for i, v in enumerate(scale)}
    k = len(scale)
    coincidence = np.zeros((k, k), dtype=np.float64)
    for row in rows:
        counts = np.bincount([index[v] for v in row], minlength=k).astype(np.float64)
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (len(row) - 1)
    marginals = coincidence.sum(axis=1)
    total = float(marginals.sum())
    d2 = _difference(level, scale, marginals)
    expected = float(np.sum(np.outer(marginals, marginals) * d2))
    if expected <= 0.0:
        raise ValueError(
            "krippendorff_alpha is undefined when every label is the same "
            "(no expected disagreement)"
        )
    return 1.0 - (total - 1.0) * float(np.sum(coincidence * d2)) / expected


def _difference(
    level: Level, scale: Sequence[object], marginals: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    k = len(scale)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "ordinal":
        cumulative = np.concatenate(([0.0], np.cumsum(marginals)))
        low = np.minimum.outer(np.arange(k), np.arange(k))
        high = np.maximum.outer(np.arange(k), np.arange(k))
        between = cumulative[high + 1] - cumulative[low]
        d: npt.NDArray[np.float64] = (
            between - (marginals[:, None] + marginals[None, :]) / 2.0
        ) ** 2
        np.fill_diagonal(d, 0.0)
        return d
    try:
        numbers = np.array([float(v) for v in scale], dtype=np.float64)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"the {level} level needs numeric values, got {list(scale)!r}") from None
    diff = numbers[:, None] - numbers[None, :]
    if level == "interval":
        result: npt.NDArray[np.float64] = diff**2
        return result
    sums = numbers[:, None] + numbers[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sums == 0.0, 0.0, diff / np.where(sums == 0.0, 1.0, sums))
    result = ratio**2
    return result


@dataclass(frozen=True)
class QuestionAgreement:
    """How far annotators agree on one question of the form.

    ``alpha`` is Krippendorff's ordinal alpha; ``kappa`` the mean quadratic-weighted Cohen's
    kappa over ``kappa_pairs`` pairs of annotators; ``percent_agreement`` the share of
    identical pairs of labels. A statistic that cannot be computed is None and ``note`` says why.
    """

    question: str
    labels: int
    items: int
    items_multi: int
    """Samples with two or more labels: the ones every statistic here is computed from."""
    annotators: int
    alpha: float | None
    kappa: float | None
    kappa_pairs: int
    percent_agreement: float | None
    note: str | None = None


def _answers(
    labels: Iterable[HumanLabel], question: LabelQuestion
) -> tuple[dict[str, dict[str, str]], int]:
    """sample id → annotator → answer (as the scale's string) for the answered labels, and how
    many answers fell between two points of the scale (means, which no point stands for)."""
    table: dict[str, dict[str, str]] = defaultdict(dict)
    between = 0
    for label in labels:
        answer = question.answer(label)
        if answer is None:
            continue
        point = question.point(answer)
        if point is None:
            between += 1
        else:
            table[label.sample_id][label.annotator] = point
    return table, between


def question_agreement(question: LabelQuestion, labels: Sequence[HumanLabel]) -> QuestionAgreement:
    """How far the annotators of ``labels`` agree on ``question`` (see the module docstring)."""
    scale = ORDINAL_SCALES.get(question.name) if not question.criterion else None
    scale = scale or question.scale
    rank = {value: i for i, value in enumerate(scale)}
    table, between = _answers(labels, question)
    annotators = sorted({a for answers in table.values() for a in answers})
    multi = [answers for answers in table.values() if len(answers) >= 2]
    notes: list[str] = []
    if between:
        notes.append(f"{between} answer(s) between two points of the scale left out")
    alpha: float | None = None
    agreement: float | None = None
    if multi:
        try:
            alpha = krippendorff_alpha(
                (list(a.values()) for a in multi), level="ordinal", values=scale
            )
        except ValueError:
            notes.append("alpha undefined: every label is the same")
        agreement = _percent_agreement(multi)
    else:
        notes.append("no sample has two labels" if table else "nobody answered this question")
    kappas = _pairwise_kappas(table, annotators, rank)
    if multi and not kappas:
        notes.append("kappa undefined: no two annotators share two samples with varied labels")
    return QuestionAgreement(
        question=question.name,
        labels=sum(len(answers) for answers in table.values()),
        items=len(table),
        items_multi=len(multi),
        annotators=len(annotators),
        alpha=alpha,
        kappa=sum(kappas) / len(kappas) if kappas else None,
        kappa_pairs=len(kappas),
        percent_agreement=agreement,
        note="; ".join(notes) or None,
    )


def _percent_agreement(multi: Sequence[Mapping[str, Any]]) -> float:
    """The share of annotator pairs, over samples with two or more labels, that answered alike."""
    same = total = 0
    for answers in multi:
        counts = Counter(answers.values())
        m = len(answers)
        total += m * (m - 1) // 2
        same += sum(c * (c - 1) // 2 for c in counts.values())
    return same / total


def _pairwise_kappas(
    table: Mapping[str, Mapping[str, Any]], annotators: Sequence[str], rank: Mapping[Any, int]
) -> list[float]:
    """Quadratic-weighted Cohen's kappa of every annotator pair sharing two or more samples
    (a pair whose labels do not vary has none)."""
    kappas: list[float] = []
    for a, b in combinations(annotators, 2):
        shared = [s for s, answers in table.items() if a in answers and b in answers]
        if len(shared) < 2:
            continue
        try:
            kappas.append(
                cohen_kappa(
                    [rank[table[s][a]] for s in shared],
                    [rank[table[s][b]] for s in shared],
                    weights="quadratic",
                )
            )
        except ValueError:
            continue
    return kappas


def annotator_agreement(
    labels: Iterable[HumanLabel], *, criteria: Mapping[str, LabelQuestion] | None = None
) -> dict[str, QuestionAgreement]:
    """Inter-annotator agreement per question: the form's four (`QUESTIONS` order), then every
    criterion the labels answer, keyed by its name (``criteria.<name>`` when the name is also one
    of the four). ``criteria`` gives the criteria's scales; a criterion missing from it has its
    scale read from the labels (`criteria_labels.criterion_questions`)."""
    from .criteria_labels import criterion_questions

    kept = list(labels)
    out = {question: question_agreement(QUESTIONS[question], kept) for question in QUESTIONS}
    asked, _ = criterion_questions(kept, given=criteria)
    for name, question in asked.items():
        key = f"criteria.{name}" if name in out else name
        out[key] = question_agreement(question, kept)
    return out


def label_counts(labels: Iterable[HumanLabel]) -> Mapping[str, int]:
    """Labels per annotator, for the import summary."""
    return dict(sorted(Counter(label.annotator for label in labels).items()))
