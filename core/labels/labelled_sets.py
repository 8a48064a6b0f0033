"""Public labelled sets as samples plus human labels, for judge agreement before trusting a judge.

``ragbridge agreement --dataset NAME PATH`` scores these samples with the user's judge and
compares it with the labels, so anyone can see what a judge is worth on data labelled by people
before relying on it. The data are read from a path the user gives; nothing is shipped with
ragbridge (FaithBench is CC BY-NC-SA 4.0: non-commercial, share-alike).

* **FaithBench** (Bao et al., NAACL 2025): LLM summaries of news sources, labelled by human
  experts at span level. Sample: question "Summarize the source.", answer = summary, one context
  = the source. Label (one per summary, annotator ``faithbench:worst``): the sample-level
  ``worst_label`` over all annotators, read as grounded **yes** (Consistent, Benign: nothing
  unsupported, or unsupported but harmless), **partly** (Questionable) or **no** (Unwanted). The
  binary view (grounded = yes) is then exactly ``hallucinated_worst_QU == 0``, the definition
  upstream's ``binarize.py`` uses by default and `benchmarks/offline_calibration.py` reports
  first; the three levels give Spearman the Questionable/Unwanted distinction (the
  ``hallucinated_worst_U`` view) for free.

  Why not one label per annotator from ``annotations``: an annotator appears there only with a
  span they marked. One who read a summary and marked nothing is absent, so a majority over the
  visible annotators would be biased towards "hallucinated" (upstream's ``best_label`` shows such
  silent annotators exist). The worst label is what the published labels define.
* **Short-answer dev** (HaluEval QA generation, MIT; questions and right answers from HotpotQA):
  per question the knowledge, the right answer and LLM-fabricated answers. Two samples per row:
  the right answer (grounded yes, accuracy 5) and a fabricated one (grounded no, accuracy 1);
  context = the knowledge, reference = the right answer. The labels come from how the data were
  made (annotator ``halueval:construction``), not from people reading each answer: a few
  fabricated answers may happen to be vague or true.
* **SummEval** (Fabbri et al., TACL 2021; annotations MIT, articles from CNN/DailyMail):
  summaries by 16 systems of 100 CNN/DailyMail news articles, each rated 1–5 by three experts
  for coherence, consistency, fluency and relevance — the benchmark of the G-Eval paper. Sample:
  question "Summarize the source.", answer = the system's summary, one context = the article,
  reference = the article's first reference summary (its CNN/DailyMail highlights). Labels: one
  per expert (annotators ``summeval:expert1``..``3``) answering the four criteria
  (``HumanLabel.criteria``), so agreement's consensus is the experts' mean, as the papers use
  it; the crowd ratings the file also holds are not used (SummEval's own analysis rests on the
  experts). The samples come in groups — the summaries of one article — for the per-document
  Spearman those papers report. Read from SummEval's paired file
  (``model_annotations.aligned.paired.jsonl``: the released annotations joined with the
  articles by SummEval's ``pair_data.py``) or from the G-Eval authors' ``summeval.json`` (the
  experts' means only). The criteria judged are `summeval_criteria`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..sample import Context, Sample
from .human import HumanLabel, LabelQuestion, criterion_question, numbered_lines

__all__ = [
    "DATASETS",
    "FABRICATED",
    "FAITHBENCH_FILE",
    "SHORT_ANSWER_FILE",
    "SUMMEVAL_CRITERIA",
    "SUMMEVAL_FILES",
    "LabelledSet",
    "LabelledSetError",
    "load_faithbench",
    "load_labelled_set",
    "load_short_answer",
    "load_summeval",
]

FAITHBENCH_FILE = "faithbench.jsonl"
SHORT_ANSWER_FILE = "qa_pairs.jsonl"
SUMMEVAL_FILES = ("model_annotations.aligned.paired.jsonl", "summeval.json")
"""What a SummEval folder is searched for: SummEval's paired file, then G-Eval's JSON."""
SUMMEVAL_CRITERIA = ("coherence", "consistency", "fluency", "relevance")
"""SummEval's four rated dimensions, each on 1–5."""
DATASETS = ("faithbench", "short-answer", "summeval")

Fabricated = Literal["one_turn", "multi_turn", "both"]
FABRICATED: tuple[str, ...] = ("one_turn", "multi_turn", "both")

SUMMARIZE = "Summarize the source."

_GROUNDED_BY_WORST: dict[str, Literal["yes", "partly", "no"]] = {
    "Consistent": "yes",
    "Benign": "yes",
    "Questionable": "partly",
    "Unwanted": "no",
}


class LabelledSetError(ValueError):
    """A public set's file is missing or has a bad line; starts ``file:line:`` and names the
    field."""


@dataclass(frozen=True)
class LabelledSet:
    """Samples to score and the human labels to compare the scores with."""

    name: str
    path: Path
    samples: list[Sample]
    labels: list[HumanLabel]
    description: str
    notes: list[str] = field(default_factory=list)
    criteria: dict[str, LabelQuestion] = field(default_factory=dict)
    """The criteria the labels answer (``HumanLabel.criteria``), with their scales."""
    groups: dict[str, str] | None = None
    """Sample id -> its group (SummEval: the article summarised), for per-group Spearman."""


def _file(path: str | os.PathLike[str], name: str, *others: str) -> Path:
    """``path`` itself, or ``path/name`` (else the first of ``others`` there) when ``path`` is
    the set's folder."""
    given = Path(path)
    if given.is_dir():
        for candidate in (name, *others):
            if (given / candidate).is_file():
                return given / candidate
        looked = " or ".join(str(given / c) for c in (name, *others))
        raise LabelledSetError(f"{given} (looked for {looked}): no such file")
    if not given.is_file():
        raise LabelledSetError(f"{given}: no such file")
    return given


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in numbered_lines(path):
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise LabelledSetError(f"{path}:{number}: invalid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise LabelledSetError(f"{path}:{number}: expected a JSON object")
        yield number, row


def _text(row: dict[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise LabelledSetError(f"{where}: {key}: missing or not a non-empty string")
    return value.strip()


def load_faithbench(path: str | os.PathLike[str]) -> LabelledSet:
    """FaithBench rows (``faithbench.jsonl`` or its folder) as samples and grounded labels.

    ``worst_label`` must agree with ``hallucinated_worst_QU`` where both are present; a row where
    they disagree is refused (which one would be the label?).
    """
    source = _file(path, FAITHBENCH_FILE)
    samples: list[Sample] = []
    labels: list[HumanLabel] = []
    seen: dict[str, int] = {}
    for number, row in _rows(source):
        where = f"{source}:{number}"
        sample_id = _text(row, "id", where)
        if sample_id in seen:
            raise LabelledSetError(f"{where}: id: {sample_id!r} already on line {seen[sample_id]}")
        seen[sample_id] = number
        worst = row.get("worst_label")
        if worst not in _GROUNDED_BY_WORST:
            raise LabelledSetError(
                f"{where}: worst_label: expected one of {', '.join(_GROUNDED_BY_WORST)}, "
                f"got {worst!r}"
            )
        grounded = _GROUNDED_BY_WORST[worst]
        flag = row.get("hallucinated_worst_QU")
        if flag is not None and bool(flag) != (grounded != "yes"):
            raise LabelledSetError(
                f"{where}: hallucinated_worst_QU: {flag!r} disagrees with worst_label {worst!r}"
            )
        samples.append(
            Sample(
                id=sample_id,
                question=SUMMARIZE,
                answer=_text(row, "summary", where),
                contexts=[Context(text=_text(row, "source", where))],
                metadata={
                    "dataset": "faithbench",
                    "worst_label": worst,
                    "summarizer": str(row.get("summarizer") or ""),
                    "source_key": str(row.get("source_key") or ""),
                },
            )
        )
        labels.append(
            HumanLabel(
                sample_id=sample_id,
                annotator="faithbench:worst",
                grounded=grounded,
                comment=f"worst label {worst}",
            )
        )
    if not samples:
        raise LabelledSetError(f"{source}: holds no rows")
    return LabelledSet(
        name="faithbench",
        path=source,
        samples=samples,
        labels=labels,
        description=(
            "FaithBench (Bao et al., NAACL 2025; CC BY-NC-SA 4.0): summaries of a source; "
            "grounded = worst human label over all annotators: Consistent/Benign yes, "
            "Questionable partly, Unwanted no (binary = not hallucinated_worst_QU)"
        ),
        notes=[
            "the rows were selected to be hard (detectors disagreed on them); published "
            "detectors reach a balanced accuracy near 0.5 on them"
        ],
    )


def load_short_answer(
    path: str | os.PathLike[str], *, fabricated: Fabricated = "one_turn"
) -> LabelledSet:
    """Short-answer dev rows (``qa_pairs.jsonl`` or its folder): right vs fabricated answers.

    ``fabricated`` picks the fabricated answer of each row: ``one_turn`` (the default: mostly
    a name or a phrase, the short-answer regime the set exists for), ``multi_turn`` (a
    sentence) or ``both`` (three samples per row). Ids are ``<seed_index>:right`` and
    ``<seed_index>:one_turn`` / ``:multi_turn``.
    """
    if fabricated not in FABRICATED:
        raise ValueError(f"fabricated must be one of {', '.join(FABRICATED)}, got {fabricated!r}")
    styles = ("one_turn", "multi_turn") if fabricated == "both" else (fabricated,)
    source = _file(path, SHORT_ANSWER_FILE)
    samples: list[Sample] = []
    labels: list[HumanLabel] = []
    seen: dict[str, int] = {}
    for number, row in _rows(source):
        where = f"{source}:{number}"
        index = row.get("seed_index")
        if isinstance(index, bool) or not isinstance(index, (int, str)) or str(index) == "":
            raise LabelledSetError(f"{where}: seed_index: missing or not an integer")
        key = str(index)
        if key in seen:
            raise LabelledSetError(f"{where}: seed_index: {key} already on line {seen[key]}")
        seen[key] = number
        question = _text(row, "question", where)
        knowledge = _text(row, "knowledge", where)
        right = _text(row, "right_answer", where)
        answers = [("right", right, True)]
        answers += [(s, _text(row, f"hallucinated_answer_{s}", where), False) for s in styles]
        for kind, answer, faithful in answers:
            sample_id = f"{key}:{kind}"
            samples.append(
                Sample(
                    id=sample_id,
                    question=question,
                    answer=answer,
                    contexts=[Context(text=knowledge)],
                    reference=right,
                    metadata={"dataset": "short-answer", "answer_kind": kind},
                )
            )
            labels.append(
                HumanLabel(
                    sample_id=sample_id,
                    annotator="halueval:construction",
                    grounded="yes" if faithful else "no",
                    accuracy=5 if faithful else 1,
                )
            )
    if not samples:
        raise LabelledSetError(f"{source}: holds no rows")
    return LabelledSet(
        name="short-answer",
        path=source,
        samples=samples,
        labels=labels,
        description=(
            "short-answer dev (HaluEval QA generation, MIT; HotpotQA questions): the right "
            f"answer (grounded yes, accuracy 5) vs the {'/'.join(styles)} fabricated answer "
            "(grounded no, accuracy 1); context = the knowledge, reference = the right answer"
        ),
        notes=[
            "labels come from how the answers were made, not from people reading each one: "
            "a few fabricated answers may happen to be vague or true"
        ],
    )


_SUMMEVAL_NOTE = (
    "SummEval rates 16 systems' summaries of each article: compare the per-document Spearman "
    "(the mean over articles, in each row's notes) with the G-Eval paper's summary-level "
    "figures; the pooled Spearman also ranks articles against each other"
)


def _experts(value: Any, where: str) -> list[dict[str, int]]:
    """The experts' ratings of one summary: a list of {criterion: 1..5} with all four."""
    if not isinstance(value, list) or not value:
        raise LabelledSetError(f"{where}: expert_annotations: missing or not a non-empty list")
    out: list[dict[str, int]] = []
    for k, rating in enumerate(value):
        if not isinstance(rating, dict):
            raise LabelledSetError(f"{where}: expert_annotations[{k}]: expected a JSON object")
        out.append(
            {
                name: _rating(rating.get(name), f"{where}: expert_annotations[{k}].{name}")
                for name in SUMMEVAL_CRITERIA
            }
        )
    return out


def _rating(value: Any, where: str) -> int:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not float(value).is_integer() or not 1 <= value <= 5:
        raise LabelledSetError(f"{where}: expected an integer from 1 to 5, got {value!r}")
    return int(value)


def _mean(value: Any, where: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 1.0 <= float(value) <= 5.0:
        raise LabelledSetError(f"{where}: expected a number from 1 to 5, got {value!r}")
    return float(value)


def _summeval_rows(source: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of SummEval's paired JSONL, or of G-Eval's JSON array (``.json``)."""
    if source.suffix != ".json":
        for number, row in _rows(source):
            yield f"{source}:{number}", row
        return
    try:
        rows = json.loads(source.read_text(encoding="utf-8-sig"))
    except ValueError as exc:
        raise LabelledSetError(f"{source}: invalid JSON: {exc}") from None
    if not isinstance(rows, list):
        raise LabelledSetError(f"{source}: expected a JSON array of rated summaries")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise LabelledSetError(f"{source}: [{index}]: expected a JSON object")
        yield f"{source}: [{index}]", row


def load_summeval(path: str | os.PathLike[str]) -> LabelledSet:
    """SummEval's expert ratings (the paired JSONL, G-Eval's ``summeval.json``, or their folder)
    as summaries of their article and one label per expert answering the four criteria.

    A summary rated twice (the same article and system) is refused naming both places; so is an
    unpaired row without its article (``text``), with how to pair it.
    """
    source = _file(path, *SUMMEVAL_FILES)
    geval = source.suffix == ".json"
    samples: list[Sample] = []
    labels: list[HumanLabel] = []
    groups: dict[str, str] = {}
    seen: dict[str, str] = {}
    for where, row in _summeval_rows(source):
        if geval:
            doc, system = _text(row, "doc_id", where), _text(row, "system_id", where)
            article, summary = _text(row, "source", where), _text(row, "system_output", where)
            reference = row.get("reference")
        else:
            doc, system = _text(row, "id", where), _text(row, "model_id", where)
            summary = _text(row, "decoded", where)
            if "text" not in row:
                raise LabelledSetError(
                    f"{where}: text: missing: the annotations are not paired with their "
                    "articles yet (SummEval's data_processing/pair_data.py does it, from the "
                    "CNN/DailyMail stories)"
                )
            article = _text(row, "text", where)
            references = row.get("references")
            reference = references[0] if isinstance(references, list) and references else None
        sample_id = f"{doc}:{system}"
        if sample_id in seen:
            raise LabelledSetError(
                f"{where}: {sample_id!r}: the same article and system again (first at "
                f"{seen[sample_id]})"
            )
        seen[sample_id] = where
        groups[sample_id] = doc
        samples.append(
            Sample(
                id=sample_id,
                question=SUMMARIZE,
                answer=summary,
                contexts=[Context(text=article)],
                reference=reference.strip()
                if isinstance(reference, str) and reference.strip()
                else None,
                metadata={"dataset": "summeval", "doc_id": doc, "system": system},
            )
        )
        if geval:
            scores = row.get("scores")
            if not isinstance(scores, dict):
                raise LabelledSetError(f"{where}: scores: missing or not a JSON object")
            means = {n: _mean(scores.get(n), f"{where}: scores.{n}") for n in SUMMEVAL_CRITERIA}
            labels.append(
                HumanLabel(
                    sample_id=sample_id,
                    annotator="summeval:expert-mean",
                    criteria=dict(means),
                    comment="mean of the experts' ratings",
                )
            )
            continue
        for k, rating in enumerate(_experts(row.get("expert_annotations"), where), start=1):
            labels.append(
                HumanLabel(
                    sample_id=sample_id, annotator=f"summeval:expert{k}", criteria=dict(rating)
                )
            )
    if not samples:
        raise LabelledSetError(f"{source}: holds no rows")
    form = "the experts' mean per summary" if geval else "one per expert"
    return LabelledSet(
        name="summeval",
        path=source,
        samples=samples,
        labels=labels,
        description=(
            "SummEval (Fabbri et al., TACL 2021; annotations MIT, articles CNN/DailyMail): "
            f"{len(samples)} summaries of {len(set(groups.values()))} news articles, rated 1-5 "
            f"for coherence, consistency, fluency and relevance by experts; labels: {form}"
        ),
        notes=[_SUMMEVAL_NOTE],
        criteria={name: criterion_question(name, (1, 5)) for name in SUMMEVAL_CRITERIA},
        groups=groups,
    )


def load_labelled_set(
    name: str, path: str | os.PathLike[str], *, fabricated: Fabricated = "one_turn"
) -> LabelledSet:
    """``faithbench``, ``short-answer`` or ``summeval`` from ``path`` (the file or its folder)."""
    if name == "faithbench":
        return load_faithbench(path)
    if name == "short-answer":
        return load_short_answer(path, fabricated=fabricated)
    if name == "summeval":
        return load_summeval(path)
    raise ValueError(f"unknown labelled set {name!r}; known: {', '.join(DATASETS)}")
