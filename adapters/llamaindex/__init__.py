"""LlamaIndex adapter: capture retrievals in (`capture`), evaluators out (`evaluators`).

* **Source side** (`ragbridge.adapters.llamaindex.capture`): capture what query engines, chat
  engines and agents retrieve, and run a query engine over samples; nodes become contexts as
  `ragbridge.adapters.llamaindex.reading` reads them.
* **Models** (`ragbridge.adapters.llamaindex.models`): LlamaIndex LLMs and embedding models as
  ragbridge's `Judge` and `Embedder` (`ragbridge.adapters.llamaindex.defaults` reads LlamaIndex's
  ``Settings.llm`` / ``Settings.embed_model`` where a model is needed and none was given).
* **Sink side** (`ragbridge.adapters.llamaindex.evaluators`): ragbridge metrics as LlamaIndex
  ``BaseEvaluator``s, and scoring of every query an engine answers as it happens; a team's own
  guidelines as ``GuidelineEvaluator`` (`ragbridge.adapters.llamaindex.criteria`).
* **Test sets** (`ragbridge.adapters.llamaindex.documents`): documents and nodes as the
  documents `ragbridge.core.testset.generate_testset` writes questions from.
* **Retrieval** (`ragbridge.adapters.llamaindex.retrieval`): LlamaIndex's ``RetrieverEvaluator``
  with its numbers computed by ragbridge's trec_eval-exact ranking measures.
* **Conversations** (`ragbridge.adapters.llamaindex.conversations`): scripted sessions replayed
  through a chat engine, each turn with its own contexts and the engine's memory reset between
  conversations (`capture_chat_sessions`).
* **Agents** (`ragbridge.adapters.llamaindex.trajectories`): ``FunctionAgent``, ``ReActAgent``
  and ``AgentWorkflow`` runs as samples with a ``trajectory`` (every tool call, its result, the
  contexts a retrieval step returned) or as conversations (`capture_agent_runs`).
* **Citations** (`ragbridge.adapters.llamaindex.citations`): a ``CitationQueryEngine``'s
  answers as samples whose ``[N]`` markers name their "Source N" chunks, each chunk named after
  the node it was cut from (`run_citation_engine`, `capture_citations`).
* **Shadow scoring** (`ragbridge.adapters.llamaindex.shadow`): ``shadow(engine, metrics)``
  answers as the engine does, records every query and scores a sample in the background.

Importing it without llama-index-core raises ImportError naming the extra (`INSTALL_HINT`):
``pip install ".[llamaindex]"`` in your ragbridge clone.
"""

from __future__ import annotations

from .capture import (
    INSTALL_HINT,
    CapturedQuery,
    CapturedRetrieval,
    RetrievalCapture,
    arun_query_engine,
    arun_retriever,
    capture_retrievals,
    engine_kind,
    run_query_engine,
    run_retriever,
)
from .citations import arun_citation_engine, capture_citations, run_citation_engine
from .conversations import ChatTurnError, acapture_chat_sessions, capture_chat_sessions
from .criteria import GuidelineEvaluator, guideline_aspect
from .documents import source_documents
from .evaluators import (
    LLAMAINDEX_PASSING,
    LiveScoring,
    RagbridgeEvaluationResult,
    RagbridgeEvaluator,
    evaluators_for,
    score_queries,
)
from .models import LlamaIndexEmbedder, LlamaIndexJudge, map_error, usage_of
from .reading import node_to_context, nodes_to_contexts
from .retrieval import (
    LLAMAINDEX_METRICS,
    IdMismatchError,
    IdMismatchWarning,
    RagbridgeRetrievalEvalResult,
    RagbridgeRetrievalMetric,
    RagbridgeRetrieverEvaluator,
    evaluation_of,
    qa_samples,
)
from .shadow import SHADOW_TAG, ShadowQueryEngine, shadow
from .trajectories import (
    AgentRunOptions,
    acapture_agent_conversations,
    acapture_agent_runs,
    capture_agent_conversations,
    capture_agent_runs,
)

__all__ = [
    "INSTALL_HINT",
    "LLAMAINDEX_METRICS",
    "LLAMAINDEX_PASSING",
    "SHADOW_TAG",
    "AgentRunOptions",
    "CapturedQuery",
    "CapturedRetrieval",
    "ChatTurnError",
    "GuidelineEvaluator",
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
    "acapture_agent_conversations",
    "acapture_agent_runs",
    "acapture_chat_sessions",
    "arun_citation_engine",
    "arun_query_engine",
    "arun_retriever",
    "capture_agent_conversations",
    "capture_agent_runs",
    "capture_chat_sessions",
    "capture_citations",
    "capture_retrievals",
    "engine_kind",
    "evaluation_of",
    "evaluators_for",
    "guideline_aspect",
    "map_error",
    "node_to_context",
    "nodes_to_contexts",
    "qa_samples",
    "run_citation_engine",
    "run_query_engine",
    "run_retriever",
    "score_queries",
    "shadow",
    "source_documents",
    "usage_of",
]
