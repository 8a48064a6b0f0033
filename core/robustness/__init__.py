"""Robustness the RGB way: re-run a pipeline under retrieval faults (noise at rising ratios, no
relevant passage, counterfactual passages) and score each condition.

The harness's names (`run_robustness`, the plan, the summary, the answer cache) are loaded on
first use: the harness imports the scorer, the scorer the measures, and a measure module of
this package (`measures`, registered by `ragbridge.core.metrics`) imports this package, so
importing the harness here would close an import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .conditions import CLEAN, DEFAULT_RATIOS, Condition, ConditionKind, default_conditions
from .counterfactual import (
    Counterfactual,
    CounterfactualAttempt,
    judge_counterfactual,
    judge_counterfactual_attempt,
    offline_counterfactual,
    offline_counterfactual_attempt,
    replace_fact,
    states_fact,
    user_counterfactual,
)
from .perturb import NoisePool, PoolTooSmall, noise_count, perturb
from .seeds import stable_seed
from .types import Perturb, RobustPipeline

if TYPE_CHECKING:
    from .answers import AnswerCache
    from .harness import RobustnessResult, arun_robustness, run_robustness
    from .plan import (
        DEFAULT_METRICS,
        OFFLINE_METRICS,
        RobustnessPlan,
        condition_metrics,
        plan_robustness,
    )
    from .summary import ConditionSummary, Skipped

_LAZY = {
    "AnswerCache": "answers",
    "RobustnessResult": "harness",
    "arun_robustness": "harness",
    "run_robustness": "harness",
    "DEFAULT_METRICS": "plan",
    "OFFLINE_METRICS": "plan",
    "RobustnessPlan": "plan",
    "condition_metrics": "plan",
    "plan_robustness": "plan",
    "ConditionSummary": "summary",
    "Skipped": "summary",
}


def __getattr__(name: str) -> Any:
    """The harness's names, imported on first use (see the module doc)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CLEAN",
    "DEFAULT_METRICS",
    "DEFAULT_RATIOS",
    "OFFLINE_METRICS",
    "AnswerCache",
    "Condition",
    "ConditionKind",
    "ConditionSummary",
    "Counterfactual",
    "CounterfactualAttempt",
    "NoisePool",
    "Perturb",
    "PoolTooSmall",
    "RobustPipeline",
    "RobustnessPlan",
    "RobustnessResult",
    "Skipped",
    "arun_robustness",
    "condition_metrics",
    "default_conditions",
    "judge_counterfactual",
    "judge_counterfactual_attempt",
    "noise_count",
    "offline_counterfactual",
    "offline_counterfactual_attempt",
    "perturb",
    "plan_robustness",
    "replace_fact",
    "run_robustness",
    "stable_seed",
    "states_fact",
    "user_counterfactual",
]
