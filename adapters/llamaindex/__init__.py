"""LlamaIndex adapter: capture retrievals in (`capture`), evaluators out (`evaluators`).

* **Source side** (`ragbridge.adapters.llamaindex.capture`): capture what query engines, chat
  engines and agents retrieve, run a query engine over samples, and wrap LlamaIndex LLMs and
  embedding models as ragbridge's `Judge` and `Embedder`.
* **Sink side** (`ragbridge.adapters.llamaindex.evaluators`): ragbridge metrics as LlamaIndex
  ``BaseEvaluator``s, and scoring of every query an engine answers as it happens.

Importing it without llama-index-core raises ImportError naming the extra:
``pip install "ragbridge[llamaindex]"``.
"""

from __future__ import annotations

from ragbridge.adapters._frameworks import quiet_frameworks

quiet_frameworks()  # before the modules below import llama_index

from .capture import (  # noqa: E402
    INSTALL_HINT,
    CapturedQuery,
    CapturedRetrieval,
    LlamaIndexEmbedder,
    LlamaIndexJudge,
    RetrievalCapture,
    arun_query_engine,
    arun_retriever,
    capture_retrievals,
    engine_kind,
    map_error,
    node_to_context,
    nodes_to_contexts,
    run_query_engine,
    run_retriever,
    usage_of,
)
from .evaluators import (  # noqa: E402
    LLAMAINDEX_PASSING,
    LiveScoring,
    RagbridgeEvaluationResult,
    RagbridgeEvaluator,
    evaluators_for,
    score_queries,
)

__all__ = [
    "INSTALL_HINT",
    "LLAMAINDEX_PASSING",
    "CapturedQuery",
    "CapturedRetrieval",
    "LiveScoring",
    "LlamaIndexEmbedder",
    "LlamaIndexJudge",
    "RagbridgeEvaluationResult",
    "RagbridgeEvaluator",
    "RetrievalCapture",
    "arun_query_engine",
    "arun_retriever",
    "capture_retrievals",
    "engine_kind",
    "evaluators_for",
    "map_error",
    "node_to_context",
    "nodes_to_contexts",
    "run_query_engine",
    "run_retriever",
    "score_queries",
    "usage_of",
]
