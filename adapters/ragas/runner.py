"""Running RAGAS: ``ragas.evaluate`` / ``ragas.aevaluate`` with the same arguments, returning
RAGAS's own result with the reasons next to it (`RagasResult`).

When a metric fails on a row RAGAS logs ``Exception raised in Job[i]: Class(message)`` and
writes NaN; `ragbridge.adapters.ragas.results.scores_from_ragas` on that result can say no more
than "RAGAS returned NaN". `evaluate` watches the run through RAGAS's callbacks
(`ragbridge.adapters.ragas.callbacks`) and returns ``failures[row][metric]`` with the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
import ragas
from ragas.dataset_schema import EvaluationResult

from .callbacks import watching
from .results import RagasResult, typed_result

__all__ = ["aevaluate", "evaluate"]


def _check_names(metrics: Sequence[Any] | None) -> None:
    names = [getattr(m, "name", None) for m in metrics or []]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    if twice:
        raise ValueError(
            f"metric name(s) {twice} given twice: RAGAS keys results by name, so one column "
            "would silently hold the other's scores; rename one (metric.name = '...')"
        )


def evaluate(dataset: Any, metrics: Sequence[Any] | None = None, **kwargs: Any) -> RagasResult:
    """``ragas.evaluate`` with the same arguments, returning its result with the typed failures
    next to it (`RagasResult`): ``result.failures[row][metric]`` says why a cell is NaN.

    Swap ``from ragas import evaluate`` for ``from ragbridge.adapters.ragas import evaluate``;
    everything else (``llm=``, ``embeddings=``, ``run_config=``, ``callbacks=``, ...) is RAGAS's.
    Refuses two metrics of one name, which RAGAS would let overwrite each other's column.
    """
    _check_names(metrics)
    with watching(kwargs) as (recorder, jobs):
        result = ragas.evaluate(dataset, metrics=metrics, **kwargs)
    assert isinstance(result, EvaluationResult)
    return typed_result(result, metrics, recorder, jobs.jobs)


async def aevaluate(
    dataset: Any, metrics: Sequence[Any] | None = None, **kwargs: Any
) -> RagasResult:
    """``ragas.aevaluate`` with the typed failures next to its result (see `evaluate`)."""
    _check_names(metrics)
    with watching(kwargs) as (recorder, jobs):
        result = await ragas.aevaluate(dataset, metrics=metrics, **kwargs)
    assert isinstance(result, EvaluationResult)
    return typed_result(result, metrics, recorder, jobs.jobs)
