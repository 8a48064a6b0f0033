"""RAGAS's names for ragbridge's measures: the one table the RAGAS side reads.

Code written for RAGAS reads its results by RAGAS's metric names (``result["answer_relevancy"]``,
``df["bleu_score"]``), so a ragbridge measure shown to RAGAS is named as RAGAS names its
counterpart unless asked otherwise (`ragbridge.adapters.ragas.RagbridgeMetric`, ``names=``), as
LangSmith's evaluators take its tutorial's keys. The names are RAGAS 0.4.3's, read from the
installed package (``Metric().name`` of each class, legacy and collections):

* ``faithfulness`` → ``faithfulness`` (Faithfulness)
* ``answer_relevance`` → ``answer_relevancy`` (AnswerRelevancy, ResponseRelevancy)
* ``context_precision`` → ``context_precision`` (collections ContextPrecision; the legacy
  ``context_precision`` instance)
* ``context_recall`` → ``context_recall`` (ContextRecall, LLMContextRecall)
* ``answer_correctness`` → ``answer_correctness`` (AnswerCorrectness)
* ``answer_similarity`` → ``answer_similarity`` (the legacy ``answer_similarity`` instance)
* ``rouge_l`` → ``rouge_score`` (RougeScore: rougeL, fmeasure)
* ``bleu`` → ``bleu_score`` (BleuScore)
* ``exact_match`` → ``exact_match`` (ExactMatch)
* ``context_precision:ragas_non_llm`` → ``non_llm_context_precision_with_reference``
  (NonLLMContextPrecisionWithReference)
* ``context_recall:ragas_non_llm`` → ``non_llm_context_recall`` (NonLLMContextRecall)

A measure with no RAGAS counterpart (``hallucination``, ``recall@5``, ``token_f1``) keeps its
own name. RAGAS's other names for the same measures (`RAGAS_ALIASES`: ``factual_correctness``,
``semantic_similarity``, ``llm_context_precision_with_reference``) are accepted as input.

Imports nothing optional: the table is data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

__all__ = [
    "RAGAS_ALIASES",
    "RAGAS_METRIC_NAMES",
    "RAGAS_NAMES",
    "Names",
    "measure_of",
    "ragas_name",
]

Names = Literal["ragas", "ragbridge"]
"""Whose names a ragbridge measure goes by on the RAGAS side: RAGAS's (default) or ragbridge's."""

RAGAS_METRIC_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "faithfulness": "faithfulness",
        "answer_relevance": "answer_relevancy",
        "context_precision": "context_precision",
        "context_recall": "context_recall",
        "answer_correctness": "answer_correctness",
        "answer_similarity": "answer_similarity",
        "rouge_l": "rouge_score",
        "bleu": "bleu_score",
        "exact_match": "exact_match",
        "context_precision:ragas_non_llm": "non_llm_context_precision_with_reference",
        "context_recall:ragas_non_llm": "non_llm_context_recall",
    }
)
"""ragbridge measure (or ``measure:provider`` where the provider is a RAGAS metric of its own
name) → the name RAGAS gives its counterpart."""

RAGAS_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "factual_correctness": "answer_correctness",
        "semantic_similarity": "answer_similarity",
        "llm_context_precision_with_reference": "context_precision",
        "context_precision_with_reference": "context_precision",
    }
)
"""Other RAGAS names of the same measures (classes RAGAS names differently), accepted as
input; the output name is still the table's."""

RAGAS_NAMES: dict[str, str] = {
    **{ragas: ours for ours, ragas in RAGAS_METRIC_NAMES.items() if ragas != ours},
    **RAGAS_ALIASES,
}
"""RAGAS metric names accepted for the ragbridge measure of the same meaning (the column keeps
the RAGAS name): `RAGAS_METRIC_NAMES` read backwards, and RAGAS's other names for them."""


def measure_of(name: str) -> str | None:
    """The ragbridge spelling (``"answer_relevance"``, ``"context_recall:ragas_non_llm"``) of a
    RAGAS metric name, or None when ``name`` is not one that differs from ragbridge's."""
    for measure, ragas in RAGAS_METRIC_NAMES.items():
        if ragas == name and measure != name:
            return measure
    return RAGAS_ALIASES.get(name)


def ragas_name(
    measure: str, provider: str, default_provider: str, *, names: Names = "ragas"
) -> str:
    """The name a ragbridge ``measure`` computed by ``provider`` gets on the RAGAS side: RAGAS's
    name for its counterpart (the table), or with ``names="ragbridge"`` the measure's own;
    ``:provider`` is appended when that is not the measure's default (two providers of one
    measure in one run must not share a column) unless the table names that provider."""
    if names not in ("ragas", "ragbridge"):
        raise ValueError(f"names must be 'ragas' or 'ragbridge', got {names!r}")
    if names == "ragas":
        exact = RAGAS_METRIC_NAMES.get(f"{measure}:{provider}")
        if exact is not None:
            return exact
        measure = RAGAS_METRIC_NAMES.get(measure, measure)
    same = provider in (default_provider, "retrieval")
    return measure if same else f"{measure}:{provider}"
