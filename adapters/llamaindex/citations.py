"""LlamaIndex's ``CitationQueryEngine`` as samples whose citations can be checked.

``CitationQueryEngine`` retrieves nodes, cuts each into chunks and relabels every chunk
``"Source N:\\n<chunk>"`` (N counting over all chunks of the query), and asks its LLM to answer
citing ``[N]``. The response's ``source_nodes`` are those chunks, in Source order: the contexts
the ``[N]`` markers name. `ragbridge.core.citations.parse.parse_citations` reads such contexts by
their label, so this module keeps their text as the LLM saw it and the answer as written.

What a plain `run_query_engine` loses, and this module restores: the engine gives every chunk a
*fresh* node id (it drops the retrieved node's id when it copies the node), so a context's id
would be a random uuid unless the node had a source document. Each chunk is therefore matched
back to the retrieved node it was cut from (its text is contained in that node's), and named as
the rest of the adapter names contexts (`ragbridge.adapters.llamaindex.reading`): the document
id (``ref_doc_id``) by default, the retrieved node's id with ``use_ref_doc_id=False``. Each
context's metadata says which Source it is (``citation_source``), the retrieved node's id
(``node_id``) and the chunk's own (``citation_node_id``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync

from ._framework import MetadataMode, NodeWithScore, active_instrument_tags, instrument_tags
from .capture import (
    SAMPLE_TAG,
    QueryRunOptions,
    arun_query_engine,
    as_samples,
    capture_retrievals,
)
from .reading import answer_of, nodes_to_contexts, source_nodes

__all__ = [
    "CITATION_TAG",
    "arun_citation_engine",
    "capture_citations",
    "citation_contexts",
    "run_citation_engine",
    "source_number",
]

CITATION_TAG = "ragbridge_citation_run"
"""The instrument tag that ties a `run_citation_engine` call's retrievals to it."""

_LABEL = re.compile(r"\A\s*Source (\d+):[ \t]*(?:\r?\n)?")
_SPACE = re.compile(r"\s+")
_MODES = (MetadataMode.NONE, MetadataMode.LLM, MetadataMode.ALL)


def source_number(text: str) -> int | None:
    """N of a chunk starting ``"Source N:"`` (as ``CitationQueryEngine`` writes it), else None."""
    found = _LABEL.match(text)
    return int(found.group(1)) if found else None


def _body(text: str) -> str:
    """A chunk's text without its label, whitespace collapsed (the splitter may re-space)."""
    return _SPACE.sub(" ", _LABEL.sub("", text, count=1)).strip()


def _texts(item: NodeWithScore) -> list[str]:
    # The engine cuts `get_content(metadata_mode=its mode)` (NONE unless the user set one).
    return [_SPACE.sub(" ", item.node.get_content(metadata_mode=mode)) for mode in _MODES]


def _origins(
    chunks: Sequence[Context], retrieved: Sequence[NodeWithScore]
) -> list[NodeWithScore | None]:
    """The retrieved node each chunk was cut from, or None. Chunks come in the order of their
    nodes, so the search starts at the previous chunk's node (two nodes with the same text are
    then told apart by order), then looks at every node."""
    texts = [_texts(item) for item in retrieved]
    out: list[NodeWithScore | None] = []
    at = 0
    for chunk in chunks:
        body = _body(chunk.text)
        order = list(range(at, len(retrieved))) + list(range(at))
        hit = next((j for j in order if body and any(body in t for t in texts[j])), None)
        out.append(None if hit is None else retrieved[hit])
        at = at if hit is None else hit
    return out


def citation_contexts(
    chunks: Sequence[Context],
    retrieved: Sequence[NodeWithScore] = (),
    *,
    use_ref_doc_id: bool = True,
) -> tuple[list[Context], str | None]:
    """The engine's source chunks (as `nodes_to_contexts` reads them, Source order kept) named
    after the retrieved nodes they were cut from, and a note when something could not be done
    (no ``Source N:`` labels, or chunks that match no retrieved node: those keep the id they
    had). Text is unchanged: it is what the ``[N]`` markers refer to."""
    origins = _origins(chunks, retrieved) if retrieved else [None] * len(chunks)
    out: list[Context] = []
    unlabelled = unmatched = 0
    for position, (chunk, origin) in enumerate(zip(chunks, origins, strict=True), start=1):
        number = source_number(chunk.text)
        unlabelled += number is None
        meta: dict[str, Any] = dict(chunk.metadata)
        meta["citation_source"] = number if number is not None else position
        meta["citation_node_id"] = chunk.metadata.get("node_id")
        ctx_id = chunk.id
        if origin is None:
            unmatched += bool(retrieved)
        else:
            node = origin.node
            meta["node_id"] = node.node_id
            if node.ref_doc_id is not None:
                meta["ref_doc_id"] = node.ref_doc_id
            ctx_id = (node.ref_doc_id or node.node_id) if use_ref_doc_id else node.node_id
        out.append(chunk.model_copy(update={"id": ctx_id, "metadata": meta}))
    notes = []
    if unlabelled:
        notes.append(
            f"{unlabelled} of {len(chunks)} source nodes carry no 'Source N:' label (not a "
            "CitationQueryEngine's?): their citation numbers are read as positions"
        )
    if unmatched:
        notes.append(
            f"{unmatched} of {len(chunks)} source chunks match no retrieved node's text: they "
            "keep the chunk node's own id"
        )
    return out, "; ".join(notes) or None


def capture_citations(
    response: Any,
    question: str | Sample,
    *,
    retrieved: Sequence[NodeWithScore] = (),
    use_ref_doc_id: bool = True,
) -> Sample:
    """A `Sample` from a ``CitationQueryEngine`` response already in hand: the answer with its
    ``[N]`` markers, the source chunks as contexts in Source order.

    ``question`` is the question asked, or the `Sample` it came from (its id, reference and
    labels are kept). ``retrieved`` are the nodes the retriever returned, when known (e.g. from
    ``capture_retrievals``): chunks are then named after them; without them a chunk is named by
    its document (``ref_doc_id``) when it has one, else by the chunk's own fresh node id. A
    streaming response not yet consumed raises `ragbridge.adapters.llamaindex.reading.Unscorable`.
    """
    sample = Sample(id="0", question=question) if isinstance(question, str) else question
    chunks = nodes_to_contexts(source_nodes(response), use_ref_doc_id=use_ref_doc_id)
    contexts, note = citation_contexts(chunks, retrieved, use_ref_doc_id=use_ref_doc_id)
    meta = dict(sample.metadata)
    if note:
        meta["citation_note"] = note
    return sample.model_copy(
        update={"answer": answer_of(response), "contexts": contexts, "metadata": meta}
    )


async def arun_citation_engine(
    engine: Any, samples: Iterable[Sample | str], **options: Unpack[QueryRunOptions]
) -> list[Sample]:
    """Async form of `run_citation_engine`."""
    todo = as_samples(samples)
    use_ref_doc_id = options.get("use_ref_doc_id", True)
    run = uuid.uuid4().hex
    # `arun_query_engine` merges the caller's instrument tags into each query's, so this run's
    # tag plus the sample tag it sets finds each sample's retrievals in our own capture.
    tags = {**active_instrument_tags.get(), CITATION_TAG: run}
    with capture_retrievals(use_ref_doc_id=use_ref_doc_id) as cap, instrument_tags(tags):
        filled = await arun_query_engine(engine, todo, **options)
    out: list[Sample] = []
    for sample in filled:
        retrieved = [
            item
            for r in cap.with_tags(**{CITATION_TAG: run, SAMPLE_TAG: sample.id})
            for item in r.nodes
        ]
        contexts, note = citation_contexts(
            sample.contexts, retrieved, use_ref_doc_id=use_ref_doc_id
        )
        meta = dict(sample.metadata)
        if note and sample.contexts:
            meta["citation_note"] = note
        out.append(sample.model_copy(update={"contexts": contexts, "metadata": meta}))
    return out


def run_citation_engine(
    engine: Any, samples: Iterable[Sample | str], **options: Unpack[QueryRunOptions]
) -> list[Sample]:
    """Ask a ``CitationQueryEngine`` every sample's question (as `run_query_engine` does: same
    options, errors recorded per sample) and return samples whose citations
    `ragbridge.core.citations.parse.parse_citations` resolves: the answer with its ``[N]``
    markers, and the engine's source chunks as contexts in Source order, each named after the
    retrieved node it was cut from (document id by default, node id with
    ``use_ref_doc_id=False``; see the module's docstring). ``metadata["citation_note"]`` says
    when a chunk could not be traced or the engine wrote no ``Source N:`` labels."""
    return run_sync(arun_citation_engine(engine, samples, **options))
