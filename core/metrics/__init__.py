"""ragbridge metrics: one small class per measure, scored through a shared `MetricContext`.

Every measure and each of its providers is in the registry (`ragbridge.core.registry`);
`resolve` builds a metric from a name, and ``ragbridge metrics`` prints the whole table (what
each provider needs, its judge calls per sample, the one-line definition). The core's providers
other than the judge (``offline``, ``nli``) live in one home, `ragbridge.core.metrics.providers`.

LLM metrics (``provider="llm"``), with the judge calls each makes per sample:

=====================  ==============================================================  =====
metric                 judge tasks (template ids)                                      calls
=====================  ==============================================================  =====
`Faithfulness`         answer.analyze*, faithfulness.verify*                           2
`Hallucination`        answer.analyze*, faithfulness.verify*                           2
`AnswerRelevance`      answer.analyze* (+ one embedding batch)                         1
`ContextPrecision`     context_precision.with_reference | .with_answer | context.assess+ 1
`ContextRecall`        context_recall.attribute | context.assess+                      1
`ContextRelevance`     context_relevance.judge* | context.relevant_useful+             1
`AnswerCorrectness`    answer.analyze*, answer_correctness.classify                    2
`Correctness`          grader.correctness                                              1
`Helpfulness`          grader.helpfulness                                              1
`Groundedness`         grader.groundedness                                             1
`DocumentRelevance`    grader.document_relevance                                       1
`MissedRetrieval`      missed_retrieval.judge (none when the turn retrieved)           1
`NegativeRejection`    negative_rejection.judge (questions with no relevant document)  1
`NoiseSensitivity`     answer.analyze*, noise_sensitivity.judge                        2
`CitationRecall`       citations.judge* (none when nothing is cited)                   1
`CitationPrecision`    citations.judge* (none when nothing is cited)                   1
=====================  ==============================================================  =====

``*`` calls are shared between the metrics of one sample. ``+``: when a run has both context
metrics (and precision is judged against the reference), one ``context.assess`` call serves
both; with a context-relevance measure (`ContextRelevance`, `ContextRelevanceRanked`: the same
call) one ``context.relevant_useful`` call serves it and precision, and one
``context.assess_relevance`` call all three. So Faithfulness + AnswerRelevance + ContextPrecision
+ ContextRecall cost 3 calls per sample together in one run (4 when scored separately), at any
number of contexts.
"""

from __future__ import annotations

# isort: off
# The import order is the order `ragbridge metrics` lists the measures in.
from ..registry import REGISTRY, UnknownMeasureError
from .base import Metric, MetricContext, PlannedCall, snake_case  # noqa: F401
from .faithfulness import Faithfulness, Hallucination
from .answer_relevance import AnswerRelevance
from .context_precision import ContextPrecision
from .context_recall import ContextRecall
from .context_relevance import ContextRelevance, ContextRelevanceRanked
from .answer_correctness import AnswerCorrectness
from .graders import Correctness, DocumentRelevance, Groundedness, Helpfulness
from .missed_retrieval import MissedRetrieval
from .noise_sensitivity import NoiseSensitivity
from .negative_rejection import NegativeRejection
from ..robustness import measures as _robustness_measures  # noqa: F401  (registers)
from ..citations import measures as _citation_measures  # noqa: F401  (registers)
from .providers.offline import AnswerSimilarity, ContextUsage
from .ranking_metric import RankingMetric
from . import providers  # noqa: F401  (registers the offline and nli providers)

# The offline providers of measures declared outside this package's first lines: imported after
# the measures, so a provider never declares its measure ahead of the list's order.
from .providers.offline import citations as _citations_offline  # noqa: F401
from .providers.offline import noise_sensitivity as _noise_offline  # noqa: F401
from ..multiturn import measures as _conversation_measures  # noqa: F401  (registers them)
from ..agent import tool_calls as _tool_calls, trajectory_match as _trajectory_match  # noqa: F401
from ..agent import retrieval_steps as _retrieval_steps, goal as _goal  # noqa: F401  (registers)

# isort: on

__all__ = [
    "ALL_LLM_METRICS",
    "OFFLINE_METRICS",
    "AnswerCorrectness",
    "AnswerRelevance",
    "AnswerSimilarity",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevance",
    "ContextRelevanceRanked",
    "ContextUsage",
    "Correctness",
    "DocumentRelevance",
    "Faithfulness",
    "Groundedness",
    "Hallucination",
    "Helpfulness",
    "Metric",
    "MetricContext",
    "MissedRetrieval",
    "NegativeRejection",
    "NoiseSensitivity",
    "PlannedCall",
    "RankingMetric",
    "UnknownMeasureError",
    "by_name",
    "resolve",
]

ALL_LLM_METRICS: tuple[type[Metric], ...] = (
    Faithfulness,
    Hallucination,
    AnswerRelevance,
    ContextPrecision,
    ContextRecall,
    ContextRelevance,
    ContextRelevanceRanked,
    AnswerCorrectness,
    Correctness,
    Helpfulness,
    Groundedness,
    DocumentRelevance,
    MissedRetrieval,
    NoiseSensitivity,
)
"""The measures whose default provider is the judge."""

OFFLINE_METRICS: tuple[type[Metric], ...] = (AnswerSimilarity, ContextUsage)
"""Measures that exist only offline (the LLM measures also take ``provider="offline"``)."""


def resolve(name: str) -> Metric:
    """The metric ``name`` names, default-configured: ``"faithfulness"`` (its default provider),
    ``"faithfulness:offline"``, ``"faithfulness:ragas"``, ``"exact_match"``, ``"recall@5"``,
    ``"mrr"``. Case and separators are free (``"Context-Recall"``, ``"AnswerRelevance"``).

    Providers of adapters and of other packages come from the ``ragbridge.providers`` entry
    points, loaded the first time a name is not found. An unknown name raises
    `UnknownMeasureError` (a KeyError and a ValueError) with the closest names.
    """
    text = name.strip()
    base = text.partition(":")[0]
    if "@" in base:
        return _ranking(text)
    try:
        return REGISTRY.build(text)
    except UnknownMeasureError as exc:
        if "has no provider" in str(exc):
            raise
        try:
            return RankingMetric(text)
        except ValueError:
            raise exc from None


def _ranking(text: str) -> Metric:
    try:
        return RankingMetric(text)
    except ValueError as exc:
        if "count, not a per-sample score" in str(exc):
            raise
        raise UnknownMeasureError(REGISTRY.unknown_message(text)) from None


by_name = resolve
"""The name `resolve` had before the registry; kept for code written against it."""
