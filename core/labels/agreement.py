"""Judge agreement: how far each judge metric agrees with the people who labelled the samples.

A judge metric is only worth trusting as far as it agrees with people on data like the user's.
This module pairs each scored metric of an `Evaluation` with the human labels of the same
samples (`ragbridge.core.labels.human`: the form question that checks the metric, `question_for`)
and reports, per metric:

* **Cohen's kappa** of the judge's yes/no verdict against the people's, at the default threshold
  (0.5: the registry states no other verdict rule; it is the offline providers' documented
  verdict, and any threshold in (0, 1) reads the binary graders' 0/1 the same) and at the
  threshold that agrees best with people on these samples;
* **Spearman's rho** of the score against the graded consensus (1–5 or yes/partly/no on [0, 1]);
* **AUROC** of the score for the people's binary verdict, with a bootstrap CI;
* the **confusion matrix** at both thresholds, "positive" being the people's "yes" side of the
  question (grounded = yes; relevance, accuracy, helpfulness >= 4).

Direction: for a measure of harm (hallucination: a *high* score means "not grounded"), the score
is read as ``1 - score`` for rank statistics, and the judge's verdict is "yes" when the score is
*below* the threshold. So +1 always means agreement, and the verdict rule is the provider's own
(offline: faithful when faithfulness > 0.5, hallucinated when hallucination >= 0.5).

Several annotators per sample are reduced to one consensus (`consensus`): the mean of their
graded answers (for Spearman) and the majority of their yes/no (for kappa, AUROC, confusion). A
tie has no majority: the sample is left out of the binary statistics and counted as a tie, never
resolved by a coin or a convention that would invent a label. How many samples and labels were
used is reported with every row; so are the labelled samples whose cell failed, was skipped or is
missing (never dropped silently).

The best threshold maximises Cohen's kappa over a grid of the observed score values (every
distinct way of cutting these samples; cuts where the judge says one thing for all are left
out). Kappa rather than balanced accuracy, because kappa is the agreement the table reports and
it rewards matching the people's own rate of "yes", which is what "best matches people" means;
balanced accuracy at that threshold is reported next to it. Ties go to the cut closest to the
default. The maximum is in-sample: on a hundred samples it flatters the judge; read it as "the
threshold to try", and the kappa at the default as the honest figure.

A team's own criterion is compared like a form question: people answered the criterion itself
(``HumanLabel.criteria``), and the metric of the same name is checked against them — the
people's yes being the upper half of the criterion's scale (`human.LabelQuestion.positive`),
its scale coming from the criteria, the results or the labels (`criteria_labels`).

For a set whose samples come in groups (SummEval: 16 summaries of each document), every row also
carries the mean per-group Spearman (`per_group`), the "summary-level" figure summarization papers
report, beside the pooled one.

When some samples have two or more annotators, the table also carries how far those people
agree with each other (`people_agreement`, computed by `ragbridge.core.labels.annotation`): the
ceiling a judge can hardly exceed.

An undefined statistic is a `Statistic` with a reason (one class of people's labels, a constant
score, fewer than two samples), never a 0 or a NaN that reads as a result.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, model_validator

from ..results.evaluation import Evaluation
from ..results.stats import auroc, cohen_kappa, spearman
from .annotation import question_agreement
from .criteria_labels import criteria_in, criterion_questions
from .human import QUESTIONS, HumanLabel, LabelQuestion, question_for
from .per_group import per_group_spearman
from .thresholds import DEFAULT_THRESHOLD, best_threshold
from .thresholds import _kappa_2x2 as _kappa_2x2  # the tests check it here

__all__ = [
    "DEFAULT_THRESHOLD",
    "AgreementError",
    "AgreementTable",
    "Confusion",
    "Consensus",
    "MetricAgreement",
    "PeopleAgreement",
    "Statistic",
    "ThresholdAgreement",
    "consensus",
    "judge_agreement",
    "people_agreement",
]

_MIN_VALID_RESAMPLES = 0.9
"""A bootstrap CI needs the statistic defined on at least this share of the resamples."""

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class AgreementError(ValueError):
    """Nothing can be compared: no label, no shared sample id, no metric people were asked
    about. The message says which, with a few ids or names from each side."""


class Statistic(BaseModel):
    """A value (with its CI when one was computed) or the reason it is undefined; never both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None = None
    undefined: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_note: str | None = None
    """Why there is no CI (e.g. too few resamples had both classes), when one was asked for."""

    @model_validator(mode="after")
    def _one(self) -> Statistic:
        if (self.value is None) == (self.undefined is None):
            raise ValueError("a Statistic has either a value or an undefined reason")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(f"a Statistic value must be finite, got {self.value!r}")
        return self

    @classmethod
    def of(cls, value: float) -> Statistic:
        return cls(value=float(value))

    @classmethod
    def missing(cls, reason: str) -> Statistic:
        return cls(undefined=reason)

    def text(self, digits: int = 2) -> str:
        """``0.41`` or ``undefined``: the table cell."""
        return "undefined" if self.value is None else f"{self.value:.{digits}f}"


class Confusion(BaseModel):
    """Judge verdict × people's verdict. ``positive`` names the people's "yes" side."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    positive: str
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    def text(self) -> str:
        return f"{self.tp}/{self.fp}/{self.fn}/{self.tn}"


class ThresholdAgreement(BaseModel):
    """The judge's verdict at one threshold, against the people's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: float
    rule: str
    """``faithfulness > 0.5 means grounded = yes``."""
    kappa: Statistic
    balanced_accuracy: Statistic
    confusion: Confusion


class MetricAgreement(BaseModel):
    """One metric of the results against the people's answers to the question that checks it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    """The metric's key in the results (``faithfulness``, or ``faithfulness:offline``)."""
    label: str
    """``measure:provider`` when the provider is known: the row's name in the table."""
    provider: str | None
    question: str
    inverted: bool
    positive: str
    """The people's "yes" side: ``grounded = yes``, ``accuracy >= 4``."""
    n: int
    """Samples both scored and labelled (Spearman's n)."""
    n_binary: int
    """Of those, the ones with a majority verdict (kappa's, AUROC's and the confusion's n)."""
    n_ties: int
    n_labels: int
    """Annotator labels over the ``n`` samples."""
    n_people_yes: int
    n_failed: int
    n_skipped: int
    n_missing: int
    """Labelled samples with no cell for this metric in the results."""
    n_unlabelled: int
    """Scored samples nobody labelled (not used)."""
    failures_by_kind: dict[str, int]
    default: ThresholdAgreement | None
    best: ThresholdAgreement | None
    best_undefined: str | None
    spearman: Statistic
    auroc: Statistic
    notes: list[str]
    spearman_per_group: Statistic | None = None
    """Mean per-group Spearman (groups: documents), when the samples come in groups."""
    groups: int = 0
    """Groups with a defined per-group rho: that mean's n."""

    @property
    def compared(self) -> bool:
        return self.n > 0


class PeopleAgreement(BaseModel):
    """How far the annotators agree among themselves on one question: the ceiling a judge can
    reasonably be asked to reach. Computed by `ragbridge.core.labels.annotation.annotator_agreement`
    (one implementation for the annotation import and this table): Krippendorff's ordinal
    alpha and the mean quadratic-weighted Cohen's kappa over annotator pairs, on the question's
    own scale (1–5, no < partly < yes) — not the yes/no view the judge's kappa uses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    question: str
    samples: int
    """Samples with at least two annotators."""
    annotators: int
    alpha: Statistic
    kappa: Statistic
    scale: str = ""
    """The question's scale as people saw it (``1-5``, ``yes/partly/no``, ``no/yes``): what the
    kappa is weighted on. Empty in tables saved before it was recorded."""
    kappa_pairs: int


class AgreementTable(BaseModel):
    """Everything ``ragbridge agreement`` prints and the report's agreement section shows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: list[MetricAgreement]
    not_compared: dict[str, str]
    """Metrics of the results no form question checks, with the reason."""
    labelled_samples: int
    labels: int
    annotators: int
    people: list[PeopleAgreement]
    default_threshold: float
    best_by: str
    ties: str
    confidence: float
    n_resamples: int
    seed: int
    source: dict[str, str]
    """Where results and labels came from (files, a public set), for the reader."""
    notes: list[str]

    @property
    def compared(self) -> list[MetricAgreement]:
        return [row for row in self.rows if row.compared]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


# --------------------------------------------------------------------------- consensus


@dataclass(frozen=True)
class Consensus:
    """What the annotators of one sample said on one question, reduced to one verdict.

    ``graded`` is the mean of their answers on [0, 1]; ``positive`` the majority of their
    yes/no verdicts, None on a tie (no majority).
    """

    sample_id: str
    graded: float
    positive: bool | None
    n_labels: int


def consensus(labels: Iterable[HumanLabel], question: LabelQuestion) -> dict[str, Consensus]:
    """Per sample id, the consensus of the labels that answer ``question``; others are ignored."""
    answers: dict[str, list[int | float | str | bool]] = defaultdict(list)
    for label in labels:
        value = question.answer(label)
        if value is not None:
            answers[label.sample_id].append(value)
    out: dict[str, Consensus] = {}
    for sample_id, given in answers.items():
        yes = sum(question.positive(a) for a in given)
        no = len(given) - yes
        positive = None if yes == no else yes > no
        graded = sum(question.graded(a) for a in given) / len(given)
        out[sample_id] = Consensus(sample_id, graded, positive, len(given))
    return out


def people_agreement(labels: Sequence[HumanLabel], question: LabelQuestion) -> PeopleAgreement:
    """The annotators' agreement with each other on ``question`` (`question_agreement`)."""
    found = question_agreement(question, labels)
    why = found.note or "undefined"

    def stat(value: float | None, name: str) -> Statistic:
        if value is not None:
            return Statistic.of(value)
        parts = [n for n in why.split("; ") if n.startswith(name)] or [why]
        return Statistic.missing(parts[0])

    return PeopleAgreement(
        question=question.name,
        samples=found.items_multi,
        annotators=found.annotators,
        alpha=stat(found.alpha, "alpha"),
        kappa=stat(found.kappa, "kappa"),
        kappa_pairs=found.kappa_pairs,
        scale=scale_text(question.scale),
    )


def scale_text(scale: Sequence[str]) -> str:
    """A question's scale in a few characters: ``1-5`` for consecutive integers, else its
    answers joined by ``/`` (``yes/partly/no``, ``yes/no``), as people read them."""
    if len(scale) > 1 and all(a.lstrip("-").isdigit() for a in scale):
        return f"{scale[0]}-{scale[-1]}"
    return "yes/no" if set(scale) == {"no", "yes"} else "/".join(scale)


# --------------------------------------------------------------------------- thresholds


def positive_side(question: LabelQuestion) -> str:
    """``grounded = yes`` / ``accuracy >= 4``: what "positive" means for this question (a
    criterion: ``cites_policy = yes``, ``coherence > 3`` — its answers may be means)."""
    if question.binary or (question.name == "grounded" and not question.criterion):
        return f"{question.name} = yes"
    if question.criterion:
        middle = (float(question.scale[0]) + float(question.scale[-1])) / 2.0
        return f"{question.name} > {middle:g}"
    return f"{question.name} >= 4"


def verdict_rule(metric: str, threshold: float, question: LabelQuestion, inverted: bool) -> str:
    side = positive_side(question)
    sign = "<" if inverted else ">"
    return f"{metric} {sign} {threshold:g} means {side}"


def judge_says_yes(scores: FloatArray, threshold: float, inverted: bool) -> BoolArray:
    """The judge's verdict: yes above the threshold, or below it for a measure of harm."""
    result: BoolArray = scores < threshold if inverted else scores > threshold
    return result


def _at(
    scores: FloatArray,
    people: BoolArray,
    threshold: float,
    *,
    metric: str,
    question: LabelQuestion,
    inverted: bool,
) -> ThresholdAgreement:
    judge = judge_says_yes(scores, threshold, inverted)
    tp = int(np.sum(judge & people))
    fp = int(np.sum(judge & ~people))
    fn = int(np.sum(~judge & people))
    tn = int(np.sum(~judge & ~people))
    side = positive_side(question)
    n_pos, n_neg = tp + fn, fp + tn
    if n_pos == 0 or n_neg == 0:
        answer = "yes" if n_neg == 0 else "no"
        reason = f"people answered {answer} ({side}) on all {n_pos + n_neg} samples: one class"
        kappa = balanced = Statistic.missing(reason)
    else:
        balanced = Statistic.of((tp / n_pos + tn / n_neg) / 2.0)
        if tp + fp == 0 or fn + tn == 0:
            said = "yes" if fn + tn == 0 else "no"
            kappa = Statistic.missing(
                f"the judge says {said} on all {n_pos + n_neg} samples at {threshold:g} "
                "(kappa is 0 by construction)"
            )
        else:
            kappa = Statistic.of(cohen_kappa(judge.tolist(), people.tolist()))
    return ThresholdAgreement(
        threshold=float(threshold),
        rule=verdict_rule(metric, threshold, question, inverted),
        kappa=kappa,
        balanced_accuracy=balanced,
        confusion=Confusion(positive=side, tp=tp, fp=fp, fn=fn, tn=tn),
    )


# --------------------------------------------------------------------------- bootstrap


def _bootstrap(
    statistic: Any,
    n: int,
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float] | str:
    """Percentile bootstrap over the paired samples (Efron & Tibshirani 1993, ch. 13).

    ``statistic(indices)`` raises ValueError where undefined (a resample with one class); those
    resamples are dropped, and when more than a tenth are, no interval is claimed.
    """
    rng = np.random.default_rng(seed)
    values: list[float] = []
    for _ in range(n_resamples):
        try:
            values.append(float(statistic(rng.integers(0, n, size=n))))
        except ValueError:
            continue
    if len(values) < _MIN_VALID_RESAMPLES * n_resamples:
        return (
            f"undefined on {n_resamples - len(values)} of {n_resamples} bootstrap resamples "
            "(too few samples of one class)"
        )
    alpha = 1.0 - confidence
    low, high = np.quantile(np.asarray(values), [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _with_ci(stat: Statistic, ci: tuple[float, float] | str) -> Statistic:
    if stat.value is None:
        return stat
    if isinstance(ci, str):
        return stat.model_copy(update={"ci_note": ci})
    return stat.model_copy(update={"ci_low": ci[0], "ci_high": ci[1]})


# --------------------------------------------------------------------------- per metric


@dataclass
class _Cells:
    ids: list[str]
    scores: list[float]
    failed: int = 0
    skipped: int = 0
    missing: int = 0
    unlabelled: int = 0
    providers: tuple[str, ...] = ()
    failures: dict[str, int] | None = None


def _cells(evaluation: Evaluation, metric: str, labelled: Mapping[str, Consensus]) -> _Cells:
    column = evaluation.column(metric)
    out = _Cells(ids=[], scores=[], failures={})
    assert out.failures is not None
    providers: dict[str, None] = {}
    for sample_id in labelled:
        score = column.get(sample_id)
        if score is None:
            out.missing += 1
        elif score.failure is not None:
            out.failed += 1
            kind = score.failure.kind.value
            out.failures[kind] = out.failures.get(kind, 0) + 1
        elif score.value is None:
            out.skipped += 1
        else:
            out.ids.append(sample_id)
            out.scores.append(score.value)
            if score.provider:
                providers.setdefault(score.provider, None)
    out.unlabelled = sum(
        1 for sid, s in column.items() if s.value is not None and sid not in labelled
    )
    out.providers = tuple(providers)
    return out


def _label(metric: str, providers: Sequence[str]) -> str:
    if ":" in metric or not providers:
        return metric
    return f"{metric}:{'+'.join(providers)}"


def _metric_row(
    evaluation: Evaluation,
    metric: str,
    question: LabelQuestion,
    labelled: Mapping[str, Consensus],
    *,
    threshold: float,
    confidence: float,
    n_resamples: int,
    seed: int,
    groups: Mapping[str, str] | None = None,
) -> MetricAgreement:
    inverted = metric.split(":", 1)[0] in question.inverted
    cells = _cells(evaluation, metric, labelled)
    label = _label(metric, cells.providers)
    side = positive_side(question)
    notes: list[str] = []
    n = len(cells.ids)
    scores = np.asarray(cells.scores, dtype=np.float64)
    oriented = 1.0 - scores if inverted else scores
    graded = np.asarray([labelled[s].graded for s in cells.ids], dtype=np.float64)
    verdicts = [labelled[s].positive for s in cells.ids]
    binary = np.asarray([v is not None for v in verdicts], dtype=bool)
    people = np.asarray([bool(v) for v in verdicts], dtype=bool)[binary]
    b_scores, b_oriented = scores[binary], oriented[binary]
    n_binary = int(binary.sum())
    n_ties = n - n_binary
    if inverted:
        notes.append(f"{metric.split(':', 1)[0]} is a measure of harm: read as 1 - score")
    if n_ties:
        notes.append(
            f"{n_ties} sample(s) with tied annotators (no majority): left out of kappa, AUROC "
            "and the confusion matrix, kept in Spearman (mean answer)"
        )
    why_none = _why_nothing(cells, len(labelled), question)
    if why_none:
        notes.append(why_none)

    # Spearman: graded consensus against the oriented score.
    if n < 2:
        rho = Statistic.missing(f"{n} paired sample(s); Spearman needs two")
    elif np.all(graded == graded[0]):
        rho = Statistic.missing("people gave every sample the same answer")
    elif np.all(scores == scores[0]):
        rho = Statistic.missing(f"the judge gave every sample the same score ({scores[0]:g})")
    else:
        rho = Statistic.of(spearman(graded, oriented))

    default: ThresholdAgreement | None = None
    best: ThresholdAgreement | None = None
    best_undefined: str | None = None
    if n_binary == 0:
        area = Statistic.missing("no sample with a majority verdict")
        best_undefined = area.undefined
    else:
        default = _at(
            b_scores, people, threshold, metric=label, question=question, inverted=inverted
        )
        if people.all() or not people.any():
            answer = "yes" if people.all() else "no"
            area = Statistic.missing(f"people answered {answer} ({side}) on every sample")
        elif np.all(b_scores == b_scores[0]):
            area = Statistic.missing(
                f"the judge gave every sample the same score ({b_scores[0]:g})"
            )
        else:
            area = Statistic.of(auroc(people.astype(int), b_oriented))
            area = _with_ci(
                area,
                _bootstrap(
                    lambda i: auroc(people[i].astype(int), b_oriented[i]),
                    n_binary,
                    confidence=confidence,
                    n_resamples=n_resamples,
                    seed=seed,
                ),
            )
        if default.kappa.value is not None:
            judge = judge_says_yes(b_scores, threshold, inverted)
            kappa_ci = _bootstrap(
                lambda i: cohen_kappa(judge[i].tolist(), people[i].tolist()),
                n_binary,
                confidence=confidence,
                n_resamples=n_resamples,
                seed=seed,
            )
            default = default.model_copy(update={"kappa": _with_ci(default.kappa, kappa_ci)})
        cut = best_threshold(b_scores, people, inverted=inverted, default=threshold)
        if isinstance(cut, str):
            best_undefined = cut
        else:
            best = _at(b_scores, people, cut, metric=label, question=question, inverted=inverted)
    return MetricAgreement(
        metric=metric,
        label=label,
        provider="+".join(cells.providers) or None,
        question=question.name,
        inverted=inverted,
        positive=side,
        n=n,
        n_binary=n_binary,
        n_ties=n_ties,
        n_labels=sum(labelled[s].n_labels for s in cells.ids),
        n_people_yes=int(people.sum()),
        n_failed=cells.failed,
        n_skipped=cells.skipped,
        n_missing=cells.missing,
        n_unlabelled=cells.unlabelled,
        failures_by_kind=dict(sorted((cells.failures or {}).items())),
        default=default,
        best=best,
        best_undefined=best_undefined,
        spearman=rho,
        auroc=area,
        notes=notes,
        **_grouped(cells.ids, graded, oriented, groups, notes),
    )


def _grouped(
    ids: Sequence[str],
    graded: FloatArray,
    oriented: FloatArray,
    groups: Mapping[str, str] | None,
    notes: list[str],
) -> dict[str, Any]:
    """The row's per-group Spearman fields (`per_group`), and a note saying what it is."""
    if groups is None:
        return {}
    found = per_group_spearman(ids, graded.tolist(), oriented.tolist(), groups)
    if found.value is None:
        notes.append(f"per-document Spearman undefined: {found.reason}")
        return {"spearman_per_group": Statistic.missing(found.reason or "undefined")}
    skipped = f", {found.left_out} left out (one score throughout)" if found.left_out else ""
    notes.append(
        f"per-document Spearman {found.value:.3f}: mean over {found.groups} documents"
        f"{skipped} (summary-level, as the G-Eval paper reports)"
    )
    return {"spearman_per_group": Statistic.of(found.value), "groups": found.groups}


def _why_nothing(cells: _Cells, labelled: int, question: LabelQuestion) -> str | None:
    """One line saying why a labelled sample was not paired, when some were not."""
    if labelled == 0:
        return f"no labelled sample answers {question.name!r}"
    lost = cells.failed + cells.skipped + cells.missing
    if not lost:
        return None
    parts = []
    if cells.failed:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted((cells.failures or {}).items()))
        parts.append(f"{cells.failed} failed ({kinds})")
    if cells.skipped:
        parts.append(f"{cells.skipped} skipped")
    if cells.missing:
        parts.append(f"{cells.missing} not in the results")
    return f"{lost} of {labelled} labelled samples not compared: {', '.join(parts)}"


# --------------------------------------------------------------------------- the table


def _few(ids: Iterable[str], k: int = 3) -> str:
    shown = sorted(ids)
    text = ", ".join(repr(s) for s in shown[:k])
    return text + (f" … ({len(shown)} in all)" if len(shown) > k else "")


def judge_agreement(
    evaluation: Evaluation,
    labels: Iterable[HumanLabel],
    *,
    metrics: Sequence[str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    source: Mapping[str, str] | None = None,
    criteria: Mapping[str, LabelQuestion] | None = None,
    groups: Mapping[str, str] | None = None,
) -> AgreementTable:
    """Agreement of every judge metric of ``evaluation`` with the human ``labels``.

    ``metrics`` restricts the rows (names as in the results: ``faithfulness``); by default every
    metric some form question or labelled criterion checks. ``criteria`` gives the criteria's
    questions (`human.criterion_question`: their scales); a criterion not in it takes its
    scale from the results or the labels (`criteria_labels`). ``groups`` (sample id -> group,
    e.g. the document summarised) adds each row's mean per-group Spearman.

    Raises `AgreementError` when nothing can be compared: no labels, no sample id shared by the
    results and the labels (naming a few of each), no metric of the results that people were
    asked about, or a criterion answer off its scale. A metric that *can* be compared but has
    no pair (every labelled cell failed) gets a row with n = 0 and its reasons.
    """
    _check_options(threshold, confidence, n_resamples)
    all_labels = list(labels)
    if not all_labels:
        raise AgreementError("no human labels were given")
    labelled_ids = {label.sample_id for label in all_labels}
    scored_ids = set(evaluation.sample_ids)
    if not labelled_ids & scored_ids:
        raise AgreementError(
            "no labelled sample is in the results: the sample ids never match "
            f"(labels: {_few(labelled_ids)}; results: {_few(scored_ids) or 'no sample'})"
        )
    chosen = list(evaluation.metrics) if metrics is None else list(metrics)
    try:
        asked, notes = criterion_questions(
            all_labels,
            given=criteria,
            evaluation=evaluation,
            metrics=[m for m in chosen if m in evaluation.metrics],
            only={m.split(":", 1)[0] for m in chosen},
        )
    except ValueError as exc:
        raise AgreementError(str(exc)) from None
    checked, not_compared = _metrics_asked_about(
        evaluation, metrics, asked, criteria_in(all_labels)
    )
    per_question: dict[tuple[bool, str], dict[str, Consensus]] = {}
    questions: dict[tuple[bool, str], LabelQuestion] = {}
    rows: list[MetricAgreement] = []
    for metric, question in checked:
        key = (question.criterion, question.name)
        if key not in per_question:
            per_question[key] = consensus(all_labels, question)
            questions[key] = question
        rows.append(
            _metric_row(
                evaluation,
                metric,
                question,
                per_question[key],
                threshold=threshold,
                confidence=confidence,
                n_resamples=n_resamples,
                seed=seed,
                groups=groups,
            )
        )
    outside = labelled_ids - scored_ids
    if outside:
        notes.append(
            f"{len(outside)} of {len(labelled_ids)} labelled samples are not in the results "
            f"(e.g. {_few(outside)})"
        )
    people = [
        people_agreement(all_labels, questions[key])
        for key in per_question
        if any(c.n_labels > 1 for c in per_question[key].values())
    ]
    return AgreementTable(
        rows=rows,
        not_compared=not_compared,
        labelled_samples=len(labelled_ids),
        labels=len(all_labels),
        annotators=len({label.annotator for label in all_labels}),
        people=people,
        default_threshold=threshold,
        best_by="Cohen's kappa over the observed score values (in-sample)",
        ties="an even split of annotators has no majority: left out of the binary statistics",
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        source=dict(source or {}),
        notes=notes,
    )


def _check_options(threshold: float, confidence: float, n_resamples: int) -> None:
    """Refuse options no statistic here can be computed with."""
    if not 0.0 <= threshold <= 1.0 or not math.isfinite(threshold):
        raise ValueError(f"threshold must lie within [0, 1], got {threshold!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _metrics_asked_about(
    evaluation: Evaluation,
    metrics: Sequence[str] | None,
    criteria: Mapping[str, LabelQuestion],
    labelled_criteria: Sequence[str] = (),
) -> tuple[list[tuple[str, LabelQuestion]], dict[str, str]]:
    """The chosen metrics a form question or a labelled criterion (by the metric's name) checks,
    with their question, and why the others are not compared. Raises `AgreementError` for a
    metric not in the results, or when no chosen metric is one people were asked about."""
    chosen = list(evaluation.metrics) if metrics is None else list(metrics)
    unknown = [m for m in chosen if m not in evaluation.metrics]
    if unknown:
        raise AgreementError(
            f"not in the results: {', '.join(unknown)} (the results have "
            f"{', '.join(evaluation.metrics) or 'no metric'})"
        )
    not_compared: dict[str, str] = {}
    checked: list[tuple[str, LabelQuestion]] = []
    for metric in chosen:
        question = criteria.get(metric.split(":", 1)[0]) or question_for(metric)
        if question is None:
            not_compared[metric] = "no form question checks it"
        else:
            checked.append((metric, question))
    if not checked:
        asked = sorted({m for q in QUESTIONS.values() for m in q.measures} | {*labelled_criteria})
        raise AgreementError(
            f"no metric of the results is one people were asked about: the results have "
            f"{', '.join(chosen) or 'no metric'}; the labels check {', '.join(asked)}"
        )
    return checked, not_compared
