"""LlamaIndex adapter: capture retrievals in (`capture`), evaluators out (`evaluators`).

* **Source side** (`ragbridge.adapters.llamaindex.capture`): capture what query engines, chat
  engines and agents retrieve, run a query engine over samples, and wrap LlamaIndex LLMs and
  embedding models as ragbridge's `Judge` and `Embedder`.
* **Sink side** (`ragbridge.adapters.llamaindex.evaluators`): ragbridge metrics as LlamaIndex
  ``BaseEvaluator``s, and scoring of every query an engine answers as it happens.
* **Test sets** (`ragbridge.adapters.llamaindex.documents`): documents and nodes as the
  documents `ragbridge.core.testset.generate_testset` writes questions from.
* **Retrieval** (`ragbridge.adapters.llamaindex.retrieval`): LlamaIndex's ``RetrieverEvaluator``
  with its numbers computed by ragbridge's trec_eval-exact ranking measures.
* **Shadow scoring** (`ragbridge.adapters.llamaindex.shadow`): ``shadow(engine, metrics)``
  answers as the engine does, records every query and scores a sample in the background.

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
from .documents import source_documents  # noqa: E402
from .evaluators import (  # noqa: E402
    LLAMAINDEX_PASSING,
    LiveScoring,
    RagbridgeEvaluationResult,
    RagbridgeEvaluator,
    evaluators_for,
    score_queries,
)
from .retrieval import (  # noqa: E402
    LLAMAINDEX_METRICS,
    IdMismatchError,
    IdMismatchWarning,
    RagbridgeRetrievalEvalResult,
    RagbridgeRetrievalMetric,
    RagbridgeRetrieverEvaluator,
    evaluation_of,
    qa_samples,
)
from .shadow import SHADOW_TAG, ShadowQueryEngine, shadow  # noqa: E402

__all__ = [
    "INSTALL_HINT",
    "LLAMAINDEX_METRICS",
    "LLAMAINDEX_PASSING",
    "SHADOW_TAG",
    "CapturedQuery",
    "CapturedRetrieval",
    "IdMismatchError",
    "IdMismatchWarning",
    "LiveScoring",
    "LlamaIndexEmbedder",
    "LlamaIndexJudge",
    "RagbridgeEvaluationResult",
    "RagbridgeEvaluator",
    "RagbridgeRetrievalEvalResult",
    "RagbridgeRetrievalMetric",
    "RagbridgeRetrieverEvaluator",
    "RetrievalCapture",
    "ShadowQueryEngine",
    "arun_query_engine",
    "arun_retriever",
    "capture_retrievals",
    "engine_kind",
    "evaluation_of",
    "evaluators_for",
    "map_error",
    "node_to_context",
    "nodes_to_contexts",
    "qa_samples",
    "run_query_engine",
    "run_retriever",
    "score_queries",
    "shadow",
    "source_documents",
    "usage_of",
]
