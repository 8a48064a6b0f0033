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
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..sample import Context, Sample
from .human import HumanLabel, numbered_lines

__all__ = [
    "DATASETS",
    "FABRICATED",
    "FAITHBENCH_FILE",
    "SHORT_ANSWER_FILE",
    "LabelledSet",
    "LabelledSetError",
    "load_faithbench",
    "load_labelled_set",
    "load_short_answer",
]

FAITHBENCH_FILE = "faithbench.jsonl"
SHORT_ANSWER_FILE = "qa_pairs.jsonl"
DATASETS = ("faithbench", "short-answer")

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


def _file(path: str | os.PathLike[str], name: str) -> Path:
    """``path`` itself, or ``path/name`` when ``path`` is the set's folder."""
    given = Path(path)
    target = given / name if given.is_dir() else given
    if not target.is_file():
        where = f"{given} (looked for {target})" if given.is_dir() else str(given)
        raise LabelledSetError(f"{where}: no such file")
    return target


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


def load_labelled_set(
    name: str, path: str | os.PathLike[str], *, fabricated: Fabricated = "one_turn"
) -> LabelledSet:
    """``faithbench`` or ``short-answer`` from ``path`` (the file or its folder)."""
    if name == "faithbench":
        return load_faithbench(path)
    if name == "short-answer":
        return load_short_answer(path, fabricated=fabricated)
    raise ValueError(f"unknown labelled set {name!r}; known: {', '.join(DATASETS)}")
