"""Ranking measures (hit rate, MRR, nDCG, P/R/F1@k, AP, R-precision), trec_eval-exact.

* `evaluate_run` — a run against qrels, vectorised over queries; `read_qrels` / `read_run` for
  TREC files; `format_trec_lines` prints trec_eval's output.
* `score_samples` — the same measures per `Sample`, from ``contexts[i].id`` and ``relevance``.
* `Measure` / `parse_measure` — the declarative names (``recall@5`` or ``recall_5``).
"""

from .compute import RetrievalResult, evaluate_run
from .measures import (
    Measure,
    parse_measure,
    parse_measures,
    parse_trec_measures,
)
from .per_sample import score_sample, score_samples
from .ranking import GradeMatrix, Qrels, Run, trec_order
from .trec_files import read_qrels, read_run, read_run_scores
from .trec_output import format_trec_lines

__all__ = [
    "GradeMatrix",
    "Measure",
    "Qrels",
    "RetrievalResult",
    "Run",
    "evaluate_run",
    "format_trec_lines",
    "parse_measure",
    "parse_measures",
    "parse_trec_measures",
    "read_qrels",
    "read_run",
    "read_run_scores",
    "score_sample",
    "score_samples",
    "trec_order",
]
