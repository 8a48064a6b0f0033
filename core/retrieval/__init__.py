"""Ranking measures (hit rate, MRR, nDCG, P/R/F1@k, AP, R-precision), trec_eval-exact.

* `evaluate_run` — a run against qrels, vectorised over queries; `read_qrels` / `read_run` for
  TREC files; `format_trec_lines` prints trec_eval's output.
* `score_samples` — the same measures per `Sample`, from ``contexts[i].id`` and ``relevance``;
  `score_ranking` for one sample (its former name, ``score_sample``, still imports with a
  DeprecationWarning: the name now belongs to nothing, since it read as the function that scores
  a record with every metric, which is `ragbridge.core.scoring.record.score_record`).
* `Measure` / `parse_measure` — the declarative names (``recall@5`` or ``recall_5``).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from .compute import RetrievalResult, evaluate_run
from .measures import (
    Measure,
    parse_measure,
    parse_measures,
    parse_trec_measures,
)
from .per_sample import score_ranking, score_samples
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
    "score_ranking",
    "score_sample",
    "score_samples",
    "trec_order",
]

if TYPE_CHECKING:  # for type checkers and the reference pages; at run time see `__getattr__`
    score_sample = score_ranking

#: Former names of this package, by their new name: they resolve on use, with a warning.
_RENAMED = {"score_sample": "score_ranking"}


def __getattr__(name: str) -> Any:
    """A former name (`_RENAMED`): the renamed function itself, with a DeprecationWarning.

    Resolved here rather than bound at import, so that only code still using the old name
    hears about it (``ragbridge.core.score_sample`` resolves through this too).
    """
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{name} is deprecated: use {new} (ragbridge.core.retrieval.{new}, also exported by "
        "ragbridge.core), which takes the same arguments and returns the same Scores",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
