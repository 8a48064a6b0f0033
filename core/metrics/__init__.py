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

__all__ = [
    "ALL_LLM_METRICS",
    "AnswerCorrectness",
    "AnswerRelevance",
    "ContextPrecision",
    "ContextRecall",
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


def by_name(name: str) -> Metric:
    """A default-configured metric by name: ``"faithfulness"``, ``"Context_Recall"``,
    ``"AnswerRelevance"`` (case-insensitive; snake_case or CamelCase). KeyError lists the names."""
    wanted = _normal(name)
    for cls in ALL_LLM_METRICS:
        if cls.name == wanted or cls.name.replace("_", "") == wanted.replace("_", ""):
            return cls()
    known = ", ".join(cls.name for cls in ALL_LLM_METRICS)
    raise KeyError(f"no metric named {name!r}; known: {known}")
