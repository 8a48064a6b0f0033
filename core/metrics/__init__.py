"""ragbridge metrics: one small class per measure, scored through a shared `MetricContext`.

LLM metrics (``provider="llm"``), with the judge calls each makes per sample:

=====================  ==============================================================  =====
metric                 judge tasks (template ids)                                      calls
=====================  ==============================================================  =====
`Faithfulness`         answer.analyze*, faithfulness.verify*                           2
`Hallucination`        answer.analyze*, faithfulness.verify*                           2
`AnswerRelevance`      answer.analyze* (+ one embedding batch)                         1
`ContextPrecision`     context_precision.with_reference | .with_answer | context.assess+ 1
`ContextRecall`        context_recall.attribute | context.assess+                      1
`AnswerCorrectness`    answer.analyze*, answer_correctness.classify                    2
`Correctness`          grader.correctness                                              1
`Helpfulness`          grader.helpfulness                                              1
`Groundedness`         grader.groundedness                                             1
`DocumentRelevance`    grader.document_relevance                                       1
=====================  ==============================================================  =====

``*`` calls are shared between the metrics of one sample. ``+``: when a run has both context
metrics (and precision is judged against the reference), one ``context.assess`` call serves
both. So Faithfulness + AnswerRelevance + ContextPrecision + ContextRecall cost 3 calls per
sample together in one run (4 when scored separately), at any number of contexts.
"""

from __future__ import annotations

from .answer_correctness import AnswerCorrectness
from .answer_relevance import AnswerRelevance
from .base import Metric, MetricContext, PlannedCall, snake_case
from .context_precision import ContextPrecision
from .context_recall import ContextRecall
from .faithfulness import Faithfulness, Hallucination
from .graders import Correctness, DocumentRelevance, Groundedness, Helpfulness
from .offline import AnswerSimilarity, ContextUsage

__all__ = [
    "ALL_LLM_METRICS",
    "OFFLINE_METRICS",
    "AnswerCorrectness",
    "AnswerRelevance",
    "AnswerSimilarity",
    "ContextPrecision",
    "ContextRecall",
    "ContextUsage",
    "Correctness",
    "DocumentRelevance",
    "Faithfulness",
    "Groundedness",
    "Hallucination",
    "Helpfulness",
    "Metric",
    "MetricContext",
    "PlannedCall",
    "by_name",
]

ALL_LLM_METRICS: tuple[type[Metric], ...] = (
    Faithfulness,
    Hallucination,
    AnswerRelevance,
    ContextPrecision,
    ContextRecall,
    AnswerCorrectness,
    Correctness,
    Helpfulness,
    Groundedness,
    DocumentRelevance,
)


def _normal(name: str) -> str:
    return snake_case(name.strip()).replace("-", "_").replace("__", "_").lower()


OFFLINE_METRICS: tuple[type[Metric], ...] = (AnswerSimilarity, ContextUsage)
"""Measures that exist only offline (the LLM measures also take ``provider="offline"``)."""


def by_name(name: str) -> Metric:
    """A default-configured metric by name: ``"faithfulness"``, ``"Context_Recall"``,
    ``"AnswerRelevance"`` (case-insensitive; snake_case or CamelCase), optionally with a
    provider: ``"faithfulness:offline"``, ``"hallucination:nli"``. KeyError lists the names."""
    base, _, provider = name.partition(":")
    wanted = _normal(base)
    for cls in (*ALL_LLM_METRICS, *OFFLINE_METRICS):
        if cls.name == wanted or cls.name.replace("_", "") == wanted.replace("_", ""):
            if not provider:
                return cls()
            provider = provider.strip()
            if provider not in cls.providers:
                known = ", ".join(cls.providers)
                raise KeyError(f"metric {cls.name!r} has no provider {provider!r}; use {known}")
            if cls.providers == (provider,):
                return cls()
            return cls(provider=provider)  # type: ignore[call-arg]
    known = ", ".join(cls.name for cls in (*ALL_LLM_METRICS, *OFFLINE_METRICS))
    raise KeyError(f"no metric named {name!r}; known: {known}")
