"""Readers for TREC qrels and run files, with trec_eval's parsing rules and clear errors.

qrels: ``qid iter docno grade`` (exactly four fields). run: ``qid iter docno rank score tag``
(six or more fields; the rank column is ignored, the tag of the last line is the run id, as in
trec_eval's ``get_trec_results.c``). Blank lines and lines starting with ``#`` are skipped.
A malformed line raises ``ValueError("run.txt:12: ...")``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .ranking import Qrels, Run, trec_order

__all__ = ["read_qrels", "read_run", "read_run_scores"]


def _lines(path: str | os.PathLike[str]) -> list[tuple[int, list[str]]]:
    out = []
    with Path(path).open("r", encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            fields = raw.split()
            if not fields or fields[0].startswith("#"):
                continue
            out.append((number, fields))
    return out


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read a qrels file. A document judged twice for one query is an error (as in trec_eval)."""
    data: dict[str, dict[str, int]] = {}
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise ValueError(
                f"{path}:{number}: expected 4 fields 'qid iter docno grade', got {len(fields)}"
            )
        qid, _, doc, grade_text = fields
        try:
            grade = int(grade_text)
        except ValueError:
            raise ValueError(f"{path}:{number}: grade {grade_text!r} is not an integer") from None
        judged = data.setdefault(qid, {})
        if doc in judged:
            raise ValueError(f"{path}:{number}: document {doc!r} judged twice for query {qid!r}")
        judged[doc] = grade
    return Qrels(data)


def read_run_scores(path: str | os.PathLike[str]) -> tuple[dict[str, dict[str, float]], str | None]:
    """Read a run file as ``{qid: {doc: score}}`` plus its run id (the last line's tag)."""
    data: dict[str, dict[str, float]] = {}
    run_id: str | None = None
    for number, fields in _lines(path):
        if len(fields) < 6:
            raise ValueError(
                f"{path}:{number}: expected 6 fields 'qid Q0 docno rank score tag', "
                f"got {len(fields)}"
            )
        qid, _, doc, _, score_text, run_id = fields[:6]
        try:
            score = float(score_text)
        except ValueError:
            raise ValueError(f"{path}:{number}: score {score_text!r} is not a number") from None
        if math.isnan(score):
            raise ValueError(f"{path}:{number}: score is NaN")
        docs = data.setdefault(qid, {})
        if doc in docs:
            raise ValueError(f"{path}:{number}: document {doc!r} retrieved twice for query {qid!r}")
        docs[doc] = score
    return data, run_id


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a run file, ranked as trec_eval ranks (score descending, ties by docno descending)."""
    scores, run_id = read_run_scores(path)
    return Run({qid: trec_order(docs) for qid, docs in scores.items()}, run_id=run_id)
