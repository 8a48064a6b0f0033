"""ragbridge core: the framework-neutral domain (samples, measures, results, statistics).

Nothing under ``ragbridge.core`` imports a RAG framework, an HTTP client or torch. Names are
exported lazily (PEP 562): ``import ragbridge.core`` costs a few milliseconds, and a program pays
for pydantic and numpy only when it first touches a name that needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agreement import judge_agreement
    from .cache import Cache
    from .engine import EmbeddingEngine, JudgeEngine, Price
    from .heldout import split_samples
    from .judge import Embedder, Entailment, EntailmentModel, Judge, JudgeReply
    from .labels import HumanLabel
    from .metrics.base import Metric, MetricContext
    from .repeatability import evaluate_repeated
    from .results import Evaluation, Failure, FailureKind, MetricSummary, Score, Usage
    from .retrieval import Measure, Qrels, Run, evaluate_run, score_sample, score_samples
    from .runner import aevaluate, estimate, evaluate
    from .sample import (
        Context,
        Sample,
        SampleLoadReport,
        SampleValidationError,
        iter_samples,
        load_samples,
        sample_json_schema,
        save_samples,
    )
    from .scoring import Scorer, explain
    from .settings import Settings
    from .stats import compare
    from .testset import generate_testset

_EXPORTS: dict[str, str] = {
    "Cache": "cache",
    "EmbeddingEngine": "engine",
    "JudgeEngine": "engine",
    "Scorer": "scoring",
    "Settings": "settings",
    "explain": "scoring",
    "Price": "engine",
    "aevaluate": "runner",
    "estimate": "runner",
    "evaluate": "runner",
    "Embedder": "judge",
    "Entailment": "judge",
    "EntailmentModel": "judge",
    "Judge": "judge",
    "JudgeReply": "judge",
    "Metric": "metrics.base",
    "MetricContext": "metrics.base",
    "Context": "sample",
    "Sample": "sample",
    "SampleLoadReport": "sample",
    "SampleValidationError": "sample",
    "iter_samples": "sample",
    "load_samples": "sample",
    "sample_json_schema": "sample",
    "save_samples": "sample",
    "Evaluation": "results",
    "Failure": "results",
    "FailureKind": "results",
    "MetricSummary": "results",
    "Score": "results",
    "Usage": "results",
    "compare": "stats",
    "Measure": "retrieval",
    "Qrels": "retrieval",
    "Run": "retrieval",
    "evaluate_run": "retrieval",
    "score_sample": "retrieval",
    "score_samples": "retrieval",
    "generate_testset": "testset",
    "split_samples": "heldout",
    "HumanLabel": "labels",
    "judge_agreement": "agreement",
    "evaluate_repeated": "repeatability",
}

__all__ = [
    "Cache",
    "Context",
    "Embedder",
    "EmbeddingEngine",
    "Entailment",
    "EntailmentModel",
    "Evaluation",
    "Failure",
    "FailureKind",
    "HumanLabel",
    "Judge",
    "JudgeEngine",
    "JudgeReply",
    "Measure",
    "Metric",
    "MetricContext",
    "MetricSummary",
    "Price",
    "Qrels",
    "Run",
    "Sample",
    "SampleLoadReport",
    "SampleValidationError",
    "Score",
    "Scorer",
    "Settings",
    "Usage",
    "aevaluate",
    "compare",
    "estimate",
    "evaluate",
    "evaluate_repeated",
    "evaluate_run",
    "explain",
    "generate_testset",
    "iter_samples",
    "judge_agreement",
    "load_samples",
    "sample_json_schema",
    "save_samples",
    "score_sample",
    "score_samples",
    "split_samples",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragbridge.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
