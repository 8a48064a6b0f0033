"""LlamaIndex documents and nodes as the documents a test set is written from.

`source_documents` turns LlamaIndex ``Document``s, nodes (``TextNode``, any ``BaseNode``) or
retrieved ``NodeWithScore``s into `ragbridge.core.testset.SourceDocument`s for
`ragbridge.core.testset.generate_testset`:

* the id is ``node.node_id`` (a ``Document``'s ``doc_id``), what a retriever over those very
  nodes returns with ``use_ref_doc_id=False``;
* a node split from a document keeps ``ref_doc_id`` as its parent, so ``relevance="document"``
  grades the id `ragbridge.adapters.llamaindex.node_to_context` reports by default;
* the text is the node's content without metadata (``MetadataMode.NONE``), the text a quote is
  checked against; the title is ``metadata[title_key]`` when it is a string.
"""

from __future__ import annotations

from collections.abc import Iterable

from ragbridge.adapters._metadata import jsonable_metadata
from ragbridge.core.testset.documents import SourceDocument

from ._framework import BaseNode, MetadataMode, NodeWithScore

__all__ = ["source_documents"]


def source_documents(
    nodes: Iterable[BaseNode | NodeWithScore], *, title_key: str = "title"
) -> list[SourceDocument]:
    """LlamaIndex documents or nodes as `SourceDocument`s (see the module for ids and text)."""
    out: list[SourceDocument] = []
    for i, item in enumerate(nodes):
        node = item.node if isinstance(item, NodeWithScore) else item
        if not isinstance(node, BaseNode):
            raise TypeError(f"nodes[{i}] is a {type(item).__name__}, not a LlamaIndex node")
        metadata = jsonable_metadata(node.metadata)
        title = metadata.get(title_key)
        ref = node.ref_doc_id
        out.append(
            SourceDocument(
                id=node.node_id,
                text=node.get_content(metadata_mode=MetadataMode.NONE),
                title=title if isinstance(title, str) and title.strip() else None,
                metadata=metadata,
                parent_id=ref if ref and ref != node.node_id else None,
            )
        )
    return out
