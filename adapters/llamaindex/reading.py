"""Reading LlamaIndex objects as ragbridge values: nodes as `Context`s, a query as text, a
response's answer and contexts, an LLM event's model name.

Why a module of its own: every part of the adapter reads the same objects — the capture and
`run_query_engine` (`ragbridge.adapters.llamaindex.capture`), the evaluators and live scoring
(`ragbridge.adapters.llamaindex.evaluators`), the shadow wrapper
(`ragbridge.adapters.llamaindex.shadow`) — and must read them alike: a context named by the same
id whichever path it took, a streaming response never consumed behind the caller's back.

**Document ids survive chunking.** Relevance is labelled on the user's documents, but a splitter
turns each into several nodes with fresh ids; ``node.ref_doc_id`` keeps the document id, so
contexts use it by default (``use_ref_doc_id=False`` gives node ids). Several chunks of one
document are deduplicated by the core's ranking measures, not here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ragbridge.core.sample import Context

from ._framework import (
    AsyncStreamingResponse,
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    StreamingAgentChatResponse,
    StreamingResponse,
)

__all__ = [
    "Unscorable",
    "answer_of",
    "contexts_from",
    "contexts_of",
    "model_name",
    "node_to_context",
    "nodes_to_contexts",
    "query_text",
    "source_nodes",
]


def _finite(value: Any) -> float | None:
    # Context refuses NaN/inf; a retriever score of None or NaN just means "no score".
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def node_to_context(item: NodeWithScore, *, use_ref_doc_id: bool = True) -> Context:
    """One retrieved node as a `Context`; ``id`` is the source document id when it has one, so
    relevance labelled on documents still matches after chunking."""
    node = item.node
    ref = node.ref_doc_id
    metadata: dict[str, Any] = dict(node.metadata or {})
    metadata["node_id"] = node.node_id
    if ref is not None:
        metadata["ref_doc_id"] = ref
    return Context(
        text=node.get_content(metadata_mode=MetadataMode.NONE),
        id=(ref or node.node_id) if use_ref_doc_id else node.node_id,
        score=_finite(item.score),
        metadata=metadata,
    )


def nodes_to_contexts(
    nodes: Iterable[NodeWithScore], *, use_ref_doc_id: bool = True
) -> list[Context]:
    """Ranked contexts from nodes, order kept (it is the ranking)."""
    return [node_to_context(n, use_ref_doc_id=use_ref_doc_id) for n in nodes]


class _Retrieved(Protocol):
    """What `contexts_of` reads of a retrieval (`CapturedRetrieval` is one)."""

    @property
    def nodes(self) -> Sequence[NodeWithScore]: ...


def contexts_of(retrievals: Iterable[_Retrieved], *, use_ref_doc_id: bool) -> list[Context]:
    """The contexts of several retrievals in order, each node once (its first occurrence)."""
    seen: set[str] = set()
    out: list[Context] = []
    for r in retrievals:
        for item in r.nodes:
            if item.node.node_id in seen:
                continue
            seen.add(item.node.node_id)
            out.append(node_to_context(item, use_ref_doc_id=use_ref_doc_id))
    return out


def source_nodes(response: Any) -> list[Any]:
    """A response's ``source_nodes`` (none for a response without any, or no response)."""
    return list(getattr(response, "source_nodes", None) or [])


def contexts_from(
    source: Sequence[NodeWithScore],
    retrievals: Iterable[_Retrieved],
    *,
    use_ref_doc_id: bool,
) -> list[Context]:
    """The contexts an answer was written from: the response's source nodes, else (an engine
    that reports none, e.g. a custom one) the nodes retrieved under its call."""
    if source:
        return nodes_to_contexts(source, use_ref_doc_id=use_ref_doc_id)
    return contexts_of(retrievals, use_ref_doc_id=use_ref_doc_id)


def query_text(query: Any) -> str:
    """The text of a query: a ``QueryBundle``'s ``query_str``, else the query as a string."""
    if isinstance(query, QueryBundle):
        return query.query_str
    return str(query)


def model_name(model_dict: Any) -> str | None:
    """The model an LLM event names (``model``/``model_name`` of the LLM's fields), or None."""
    if not isinstance(model_dict, dict):
        return None
    for key in ("model", "model_name", "model_id"):
        value = model_dict.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class Unscorable(Exception):
    """A response whose answer cannot be read without changing it (an unconsumed stream)."""


def answer_of(response: Any) -> str | None:
    """The answer text of a query-engine response, without consuming a stream."""
    if response is None or isinstance(response, str):
        return response
    if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
        if response.response_txt is None:
            raise Unscorable(
                "streaming response: its text is not known when the query ends, and reading "
                "the stream here would take it from the caller"
            )
        return response.response_txt
    if isinstance(response, StreamingAgentChatResponse):
        raise Unscorable(
            "streaming chat response: its text is not known when the chat call returns, and "
            "reading the stream here would take it from the caller"
        )
    text = getattr(response, "response", None)
    if isinstance(text, str):
        return text
    if text is None and hasattr(response, "source_nodes"):
        return None  # Response(response=None): no answer
    return str(response)
