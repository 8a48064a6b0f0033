"""LangChain ``Document``s in ragbridge's terms: a retrieved document as a `Context`, a corpus as
the `SourceDocument`s a test set is written from.

Why one module: a context's id must be read the same way wherever a LangChain document turns up
(a retriever's result, a shadow-scored request, a corpus for `generate_testset`), or a generated
question's relevance would name ids no retrieval reports. ``Document`` has no score, so one is
taken from metadata when a retriever put one there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ragbridge.adapters._metadata import jsonable_metadata
from ragbridge.core.sample import Context

from ._framework import Document

if TYPE_CHECKING:
    from ragbridge.core.testset.documents import SourceDocument

__all__ = ["DEFAULT_ID_KEYS", "DEFAULT_SCORE_KEYS", "document_to_context", "source_documents"]

DEFAULT_ID_KEYS: tuple[str, ...] = ("id", "doc_id", "source")
"""Metadata keys tried, in order, for a context id when ``Document.id`` is empty."""

DEFAULT_SCORE_KEYS: tuple[str, ...] = ("score", "relevance_score", "similarity_score")
"""Metadata keys tried, in order, for a retriever score."""


def document_to_context(
    doc: Document,
    *,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
) -> Context:
    """A LangChain `Document` as a ragbridge `Context`.

    The id is ``metadata[id_key]`` when ``id_key`` is given and present (after chunking, the
    labelled *source* document id usually lives in metadata, not in ``Document.id``); otherwise
    ``Document.id``, then the first of `DEFAULT_ID_KEYS` present in metadata. The score is the
    first finite number among ``score_keys`` in metadata (a ``Document`` carries no score).
    """
    metadata = dict(doc.metadata or {})
    ctx_id: Any = None
    if id_key is not None:
        keys = (id_key,) if isinstance(id_key, str) else tuple(id_key)
        ctx_id = next((metadata[k] for k in keys if metadata.get(k) is not None), None)
    if ctx_id is None:
        ctx_id = doc.id
    if ctx_id is None:
        ctx_id = next((metadata[k] for k in DEFAULT_ID_KEYS if metadata.get(k) is not None), None)
    score: float | None = None
    for key in score_keys:
        value = metadata.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(float(value)):
            score = float(value)
            break
    return Context(
        text=doc.page_content,
        id=None if ctx_id is None else str(ctx_id),
        score=score,
        metadata=jsonable_metadata(metadata),
    )


def source_documents(
    docs: Iterable[Document],
    *,
    id_key: str | Sequence[str] | None = None,
    title_key: str = "title",
) -> list[SourceDocument]:
    """LangChain `Document`s as the documents `ragbridge.core.testset.generate_testset` writes
    questions from.

    The id is found as `document_to_context` finds a context's (``metadata[id_key]``, then
    ``Document.id``, then the first of `DEFAULT_ID_KEYS` in metadata), so a generated question's
    relevance names the id the same documents carry when a LangChain retriever returns them.
    The title is ``metadata[title_key]`` when it is a string; metadata is kept (JSON-safe).

    Documents sharing an id are pieces of one document (a splitter copies ``source`` into every
    chunk): they become ``id#1``, ``id#2``, ... in order, with the shared id as their parent,
    so ``relevance="document"`` grades the id a retriever read with ``id_key`` reports. A
    document with no id at all is refused, naming its position and the fix.
    """
    from ragbridge.core.testset.documents import SourceDocument

    found: list[tuple[str, Document]] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise TypeError(f"docs[{i}] is a {type(doc).__name__}, not a LangChain Document")
        doc_id = document_to_context(doc, id_key=id_key).id
        if doc_id is None or not doc_id.strip():
            keys = f"metadata[{id_key!r}], " if id_key is not None else ""
            raise ValueError(
                f"docs[{i}] has no id: set Document.id, or name the metadata key that holds one "
                f"with id_key= (looked in {keys}Document.id, metadata {list(DEFAULT_ID_KEYS)})"
            )
        found.append((doc_id, doc))
    counts: dict[str, int] = {}
    for doc_id, _ in found:
        counts[doc_id] = counts.get(doc_id, 0) + 1
    seen: dict[str, int] = {}
    out: list[SourceDocument] = []
    for doc_id, doc in found:
        metadata = jsonable_metadata(doc.metadata)
        title = metadata.get(title_key)
        parent: str | None = None
        own_id = doc_id
        if counts[doc_id] > 1:
            seen[doc_id] = seen.get(doc_id, 0) + 1
            own_id, parent = f"{doc_id}#{seen[doc_id]}", doc_id
        out.append(
            SourceDocument(
                id=own_id,
                text=doc.page_content,
                title=title if isinstance(title, str) and title.strip() else None,
                metadata=metadata,
                parent_id=parent,
            )
        )
    return out
