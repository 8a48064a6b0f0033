"""The offline provider: the RAG measures without an LLM, from embeddings and string checks.

No usable LLM runs offline on a laptop or in CI (see the integration notes), so the offline path
approximates each judge task with a sentence-embedding matcher plus exact checks where
embeddings are known to be blind (`matching`):

* **claim support** (faithfulness, hallucination, context recall): a sentence is supported when
  its best cosine similarity to a context sentence reaches ``similarity`` AND every number and
  name in it (`ragbridge.core.text.words.salient`) occurs in the contexts. Embeddings rate "paid
  1,200" and "paid 2,100" as near-identical; the exact check catches that.
* **relevance**: context precision by cosine similarity to the question; answer relevance by a
  fitted model of that cosine and the kind of answer the question asks for (`question_form`);
  context relevance by the mean of that cosine and the question words a context holds.

One module per measure; each registers its function as the measure's ``offline`` provider
(`ragbridge.core.registry`), and two measures exist only here (`AnswerSimilarity`,
`ContextUsage`). The thresholds are parameters; the defaults were calibrated on the FaithBench
dev sample (`benchmarks/offline_calibration.py`). What this provider is for, and what not:
``docs/how-to/offline.md``.
"""

from __future__ import annotations

from .answer_relevance import score_answer_relevance
from .answer_similarity import AnswerSimilarity
from .context_precision import score_context_precision
from .context_recall import score_context_recall
from .context_usage import ContextUsage
from .faithfulness import score_faithfulness, score_hallucination
from .matching import (
    DEFAULT_RELEVANCE,
    DEFAULT_SIMILARITY,
    OfflineSettings,
    Support,
    is_noncommittal,
    match_sentences,
    shortlist,
)
from .missed_retrieval import score_missed_retrieval
from .rejection import score_counterfactual_robustness, score_negative_rejection
from .relevance import DEFAULT_CONTEXT_RELEVANCE, score_context_relevance

__all__ = [
    "DEFAULT_CONTEXT_RELEVANCE",
    "DEFAULT_RELEVANCE",
    "DEFAULT_SIMILARITY",
    "AnswerSimilarity",
    "ContextUsage",
    "OfflineSettings",
    "Support",
    "is_noncommittal",
    "match_sentences",
    "score_answer_relevance",
    "score_context_precision",
    "score_context_recall",
    "score_context_relevance",
    "score_counterfactual_robustness",
    "score_faithfulness",
    "score_hallucination",
    "score_missed_retrieval",
    "score_negative_rejection",
    "shortlist",
]
