"""LlamaIndex's classes, events and dispatcher as this adapter uses them, imported once.

``llama_index.core`` is a large package: the adapter subclasses a few of its classes (query
engine, evaluators, event and span handlers), reads its instrumentation events and tags, and
reads its global ``Settings``. All of it is imported here, after `quiet_frameworks` has set
LlamaIndex's telemetry switches, and a missing or broken llama-index-core fails with
`ragbridge.adapters._extras.missing_extra`'s sentence naming the ``llamaindex`` extra. The
event groups the capture and the shadow wrapper both test for are named here as well.
"""

from __future__ import annotations

from ragbridge.adapters._extras import missing_extra
from ragbridge.adapters._frameworks import quiet_frameworks

quiet_frameworks()  # before llama_index is imported

try:  # every name at once: a LlamaIndex too old or broken to have one also names the extra
    from llama_index.core import Settings as LlamaSettings
    from llama_index.core.agent.workflow import AgentOutput, ToolCallResult
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
    from llama_index.core.chat_engine import (
        CondensePlusContextChatEngine,
        CondenseQuestionChatEngine,
    )
    from llama_index.core.chat_engine.types import BaseChatEngine, StreamingAgentChatResponse
    from llama_index.core.evaluation import BaseEvaluator, EvaluationResult, RetrieverEvaluator
    from llama_index.core.evaluation.guideline import DEFAULT_GUIDELINES
    from llama_index.core.evaluation.retrieval.base import (
        RetrievalEvalMode,
        RetrievalEvalResult,
    )
    from llama_index.core.evaluation.retrieval.metrics_base import (
        BaseRetrievalMetric,
        RetrievalMetricResult,
    )
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.instrumentation.events.llm import (
        LLMChatEndEvent,
        LLMChatStartEvent,
        LLMCompletionEndEvent,
        LLMCompletionStartEvent,
    )
    from llama_index.core.instrumentation.events.query import QueryEndEvent
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
    from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )

    # llama-index-core re-exports these from its own dependency without declaring them (so
    # strict type checkers reject the re-export); import them where they are defined.
    from llama_index_instrumentation import get_dispatcher
    from llama_index_instrumentation.dispatcher import active_instrument_tags, instrument_tags
except ImportError as exc:
    raise missing_extra(
        "ragbridge.adapters.llamaindex", "llama-index-core", "llamaindex", exc
    ) from exc

MODEL_CALL_STARTS = (LLMChatStartEvent, LLMCompletionStartEvent)
"""The events that open an LLM call (chat or completion); they name the model."""

MODEL_CALL_ENDS = (LLMChatEndEvent, LLMCompletionEndEvent)
"""The events that close an LLM call."""

__all__ = [
    "DEFAULT_GUIDELINES",
    "MODEL_CALL_ENDS",
    "MODEL_CALL_STARTS",
    "AgentOutput",
    "AsyncStreamingResponse",
    "BaseChatEngine",
    "BaseEvaluator",
    "BaseEvent",
    "BaseEventHandler",
    "BaseNode",
    "BaseQueryEngine",
    "BaseRetrievalMetric",
    "BaseRetriever",
    "BaseSpanHandler",
    "ChatMessage",
    "CondensePlusContextChatEngine",
    "CondenseQuestionChatEngine",
    "EvaluationResult",
    "LlamaSettings",
    "MessageRole",
    "MetadataMode",
    "NodeRelationship",
    "NodeWithScore",
    "PromptDictType",
    "PromptMixinType",
    "QueryBundle",
    "QueryEndEvent",
    "RelatedNodeInfo",
    "RetrievalEndEvent",
    "RetrievalEvalMode",
    "RetrievalEvalResult",
    "RetrievalMetricResult",
    "RetrievalStartEvent",
    "RetrieverEvaluator",
    "StreamingAgentChatResponse",
    "StreamingResponse",
    "TextNode",
    "ToolCallResult",
    "active_instrument_tags",
    "get_dispatcher",
    "instrument_tags",
]
