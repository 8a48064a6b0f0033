"""ragbridge core: the framework-neutral domain (samples, measures, results, statistics).

Nothing under ``ragbridge.core`` imports a RAG framework, an HTTP client or torch. Names are
exported lazily (PEP 562): ``import ragbridge.core`` costs a few milliseconds, and a program pays
for pydantic and numpy only when it first touches a name that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exports import lazy_exports

if TYPE_CHECKING:
    from .cache.disk import Cache
    from .conversation import (
        Conversation,
        conversation_json_schema,
        load_conversations,
        save_conversations,
    )
    from .criteria.files import load_criteria
    from .criteria.spec import Aspect, Criterion, Rubric, criteria_metrics
    from .heldout import split_samples
    from .judging.embedding import EmbeddingEngine
    from .judging.engine import JudgeEngine, Price
    from .judging.judge import Embedder, Entailment, EntailmentModel, Judge, JudgeReply
    from .labels.agreement import judge_agreement
    from .labels.human import HumanLabel
    from .labels.repeatability import evaluate_repeated
    from .metrics.base import Metric, MetricContext
    from .multiturn.run import aevaluate_conversations, evaluate_conversations
    from .records import load_records
    from .results.evaluation import Evaluation, Failure, FailureKind, MetricSummary, Score, Usage
    from .results.stats import compare
    from .retrieval import (
        Measure,
        Qrels,
        Run,
        evaluate_run,
        score_ranking,
        score_samples,
    )
    from .retrieval import score_ranking as score_sample  # the former name: warns at run time
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
    from .scoring.runner import aevaluate, estimate, evaluate
    from .scoring.scorer import Scorer, explain
    from .settings import Settings
    from .testset import generate_testset
    from .turn import ToolCall, Turn

_EXPORTS: dict[str, str] = {
    "Cache": "cache.disk",
    "EmbeddingEngine": "judging.embedding",
    "JudgeEngine": "judging.engine",
    "Scorer": "scoring.scorer",
    "Settings": "settings",
    "explain": "scoring.scorer",
    "Price": "judging.engine",
    "aevaluate": "scoring.runner",
    "estimate": "scoring.runner",
    "evaluate": "scoring.runner",
    "Embedder": "judging.judge",
    "Entailment": "judging.judge",
    "EntailmentModel": "judging.judge",
    "Judge": "judging.judge",
    "JudgeReply": "judging.judge",
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
    "Conversation": "conversation",
    "Turn": "conversation",
    "ToolCall": "conversation",
    "conversation_json_schema": "conversation",
    "load_conversations": "conversation",
    "save_conversations": "conversation",
    "load_records": "records",
    "aevaluate_conversations": "multiturn.run",
    "evaluate_conversations": "multiturn.run",
    "Evaluation": "results.evaluation",
    "Failure": "results.evaluation",
    "FailureKind": "results.evaluation",
    "MetricSummary": "results.evaluation",
    "Score": "results.evaluation",
    "Usage": "results.evaluation",
    "compare": "results.stats",
    "Measure": "retrieval",
    "Qrels": "retrieval",
    "Run": "retrieval",
    "evaluate_run": "retrieval",
    "score_ranking": "retrieval",
    "score_sample": "retrieval",  # deprecated: resolves with a warning naming score_ranking
    "score_samples": "retrieval",
    "generate_testset": "testset",
    "split_samples": "heldout",
    "HumanLabel": "labels.human",
    "judge_agreement": "labels.agreement",
    "evaluate_repeated": "labels.repeatability",
    "Criterion": "criteria.spec",
    "Aspect": "criteria.spec",
    "Rubric": "criteria.spec",
    "criteria_metrics": "criteria.spec",
    "load_criteria": "criteria.files",
}

__all__ = [
    "Aspect",
    "Cache",
    "Context",
    "Conversation",
    "Criterion",
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
    "Rubric",
    "Run",
    "Sample",
    "SampleLoadReport",
    "SampleValidationError",
    "Score",
    "Scorer",
    "Settings",
    "ToolCall",
    "Turn",
    "Usage",
    "aevaluate",
    "aevaluate_conversations",
    "compare",
    "conversation_json_schema",
    "criteria_metrics",
    "estimate",
    "evaluate",
    "evaluate_conversations",
    "evaluate_repeated",
    "evaluate_run",
    "explain",
    "generate_testset",
    "iter_samples",
    "judge_agreement",
    "load_conversations",
    "load_criteria",
    "load_records",
    "load_samples",
    "sample_json_schema",
    "save_conversations",
    "save_samples",
    "score_ranking",
    "score_sample",
    "score_samples",
    "split_samples",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
