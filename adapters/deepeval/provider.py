"""DeepEval as a provider of ragbridge's measures: ``"faithfulness:deepeval"``, ...

`deepeval_score` runs one DeepEval RAG metric on one `Sample` with ragbridge's judge engine
behind a fresh `DeepEvalJudge` (so the usage on the Score is exactly what that call spent) and
returns a ragbridge `Score`; DeepEval's reason is kept, an exception or a missing score becomes
a typed failure. The registry (`register`, the ``ragbridge.providers`` entry point) runs it
after the measure's own checks; `ragbridge.adapters.compare` calls it directly.

DeepEval has no non-LLM implementation of these measures: its ``deepeval.scorer.Scorer`` has
ROUGE/BLEU/exact-match helpers, but they are not metrics, and its "BLEU" is one n-gram order's
precision, so no string provider is registered here.

Importing this module is cheap (the registry loads it to list the providers): DeepEval is imported
when a score is asked for, and a missing install then raises ImportError naming the extra.
"""

from __future__ import annotations

import math
from typing import Any

from ragbridge.adapters._framework_cells import INPUTS, missing, raised
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.registry import ProviderSpec, Registry
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Sample

__all__ = ["deepeval_score", "register"]

PROVIDER = "deepeval"

# measure -> (DeepEval class name, needs, judge calls per sample with its reason on (counted
# with a counting judge on a 3-context sample), note on how its definition differs)
_MEASURES: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "faithfulness": (
        "FaithfulnessMetric",
        ("judge",),
        "4",
        "DeepEval scores 1.0 for an answer with no claim (ragbridge: a no_claims failure)",
    ),
    "answer_relevance": (
        "AnswerRelevancyMetric",
        ("judge",),
        "3",
        "DeepEval scores the share of the answer's statements the judge finds relevant to the "
        "input — a different definition, expect weaker agreement",
    ),
    "context_precision": ("ContextualPrecisionMetric", ("judge", "reference"), "2", ""),
    "context_recall": ("ContextualRecallMetric", ("judge", "reference"), "2", ""),
}
_DEFINITIONS: dict[str, str] = {
    "faithfulness": "share of the answer's claims the contexts do not contradict (a claim they "
    "neither support nor contradict counts as faithful; no claim: 1.0)",
    "answer_relevance": "share of the answer's statements the judge finds relevant to the question",
}
"""DeepEval's own definition where it is not the measure's (`ProviderSpec.definition`)."""


async def deepeval_score(measure: str, sample: Sample, engine: JudgeEngine | None) -> Score:
    """DeepEval's implementation of ``measure`` on ``sample``, judged through ``engine``."""
    gap = missing(sample, INPUTS[measure], measure)
    if gap is not None:
        return gap.model_copy(update={"provider": PROVIDER})
    if engine is None:
        return Score.fail(
            FailureKind.MISSING_INPUT,
            f"{measure}:deepeval needs a judge (judge=...)",
            provider=PROVIDER,
        )
    from ._framework import deepeval_metrics  # raises naming the extra
    from .models import DeepEvalJudge, JudgeCallFailed
    from .test_cases import to_test_case

    model = DeepEvalJudge(engine)  # fresh: its usage is this call's
    cls: Any = getattr(deepeval_metrics, _MEASURES[measure][0])
    metric = cls(model=model, async_mode=True, include_reason=True)
    common: dict[str, Any] = {"provider": PROVIDER, "judge_model": model.engine.model}
    try:
        await metric.a_measure(to_test_case(sample), _show_indicator=False)
    except JudgeCallFailed as exc:
        return Score(failure=exc.failure, usage=model.usage, **common)
    except Exception as exc:
        return raised(
            "DeepEval", measure, exc, provider=PROVIDER, usage=model.usage, model=engine.model
        )
    common["usage"] = model.usage
    value = metric.score
    reason = metric.reason if isinstance(metric.reason, str) and metric.reason else None
    error = getattr(metric, "error", None)
    if error:
        return Score.fail(FailureKind.JUDGE_ERROR, f"DeepEval {measure}: {error}", **common)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"DeepEval {measure} returned no score (got {value!r})",
            **common,
        )
    if not 0.0 <= float(value) <= 1.0:
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"DeepEval {measure} returned {value!r}, outside [0, 1]",
            **common,
        )
    return Score(value=float(value), reason=reason, **common)


async def _compute(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await deepeval_score(metric.name, sample, ctx.judge)


def register(registry: Registry) -> None:
    """The ``ragbridge.providers`` entry point: DeepEval's RAG metrics as providers."""
    for measure, (name, needs, calls, note) in _MEASURES.items():
        registry.add_provider(
            ProviderSpec(
                measure=measure,
                name=PROVIDER,
                how=f"DeepEval {name}",
                needs=frozenset(needs),
                judge_calls=calls,
                compute=_compute,
                extra="deepeval",
                note=note,
                definition=_DEFINITIONS.get(measure, ""),
            )
        )
