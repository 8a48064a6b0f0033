"""A LangChain "answer with sources" chain as samples whose citations can be checked.

Chains that answer with citations hand back the documents they numbered for the model next to
the answer: ``create_retrieval_chain`` returns ``{"input", "context": [Document], "answer"}``,
``RetrievalQA(return_source_documents=True)`` ``{"result", "source_documents": [...]}``, and
hand-built LCEL chains the same shape. A ``[1]`` in the answer names the first of *those*
documents, in *that* order, which need not be the order (or the set) the retriever returned: a
chain may rerank, filter or reverse them. So the contexts here are read from the chain's output,
not from the captured retrieval (`run_pipeline`'s contexts), which is kept only as a fallback.

`run_citation_chain` runs the chain as `run_pipeline` does (same options, a root run per
sample, errors recorded per sample) and reads each sample's output through a callback on its
root run, so the chain is not changed. `capture_citations` reads an output already in hand.
Documents become contexts as everywhere else in the adapter (`document_to_context`: ``[doc-id]``
markers resolve against those ids), and the answer is read as `run_pipeline` reads it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from typing_extensions import Unpack

from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync

from ._framework import BaseCallbackHandler, Document, Runnable, RunnableConfig
from .documents import document_to_context
from .pipelines import PipelineOptions, answer_of, arun_pipeline

__all__ = [
    "DOCUMENT_KEYS",
    "arun_citation_chain",
    "capture_citations",
    "documents_of",
    "run_citation_chain",
]

DOCUMENT_KEYS: tuple[str, ...] = ("context", "source_documents", "documents", "docs")
"""Output keys tried, in order, for the documents an answer cites (``create_retrieval_chain``
uses ``context``; ``RetrievalQA`` and ``RetrievalQAWithSourcesChain`` ``source_documents``)."""

_SAMPLE_KEY = "ragbridge_sample_id"  # the run metadata `arun_pipeline` tags each invocation with


def documents_of(
    output: Any, documents_key: str | None = None
) -> tuple[str, list[Document]] | None:
    """The key and the documents of a chain's output dict (``documents_key``, else the first of
    `DOCUMENT_KEYS` holding a list of ``Document``s), or None when it has none."""
    if not isinstance(output, Mapping):
        return None
    for key in (documents_key,) if documents_key is not None else DOCUMENT_KEYS:
        value = output.get(key)
        if isinstance(value, Sequence) and not isinstance(value, str):
            docs = list(value)
            if all(isinstance(d, Document) for d in docs):
                return key, docs
    return None


def _no_documents(output: Any, documents_key: str | None) -> str:
    keys = [documents_key] if documents_key is not None else list(DOCUMENT_KEYS)
    kind = type(output).__name__
    found = f"keys {sorted(map(str, output))}" if isinstance(output, Mapping) else f"a {kind}"
    return f"no documents in the chain's output (looked for {keys} in {found})"


def capture_citations(
    output: Any,
    question: str | Sample,
    *,
    answer_key: str | None = None,
    documents_key: str | None = None,
    id_key: str | Sequence[str] | None = None,
) -> Sample:
    """A `Sample` from an "answer with sources" chain's output already in hand: the answer as
    written (markers kept) and the output's documents as contexts, in their order.

    ``question`` is the question asked, or the `Sample` it came from (id, reference and labels
    kept). The answer is read as `run_pipeline` reads it (``answer_key``, else
    answer/output/result); the documents from ``documents_key``, else the first of
    `DOCUMENT_KEYS` present; ``id_key`` names a metadata key holding the document id (see
    `document_to_context`). No documents: no contexts, and ``metadata["citation_note"]`` says
    which keys were looked for.
    """
    sample = Sample(id="0", question=question) if isinstance(question, str) else question
    meta = dict(sample.metadata)
    contexts: list[Context] = []
    found = documents_of(output, documents_key)
    if found is None:
        meta["citation_note"] = _no_documents(output, documents_key)
    else:
        key, docs = found
        contexts = [document_to_context(d, id_key=id_key) for d in docs]
        meta["contexts_from"] = f"chain output: {key}"
    return sample.model_copy(
        update={"answer": answer_of(output, answer_key), "contexts": contexts, "metadata": meta}
    )


class _RootOutputs(BaseCallbackHandler):
    """Keeps the output of each sample's root run (the chain's return value), by sample id."""

    run_inline = True  # in the caller's task: the output is kept before `ainvoke` returns

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[UUID, str] = {}
        self.outputs: dict[str, Any] = {}

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        sample_id = (metadata or {}).get(_SAMPLE_KEY)
        if parent_run_id is None and isinstance(sample_id, str):
            with self._lock:
                self._samples[run_id] = sample_id

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            sample_id = self._samples.pop(run_id, None)
            if sample_id is not None:
                self.outputs[sample_id] = outputs


async def arun_citation_chain(
    chain: Runnable[Any, Any],
    samples: Iterable[Sample],
    *,
    documents_key: str | None = None,
    **options: Unpack[PipelineOptions],
) -> list[Sample]:
    """Async form of `run_citation_chain`."""
    keep = _RootOutputs()
    base: RunnableConfig = options.get("config") or {}
    callbacks = base.get("callbacks")
    if callbacks is not None and not isinstance(callbacks, list):
        raise TypeError("config['callbacks'] must be a list of handlers for run_citation_chain")
    config: RunnableConfig = {**base, "callbacks": [keep, *(callbacks or [])]}
    run_options: PipelineOptions = {**options, "config": config}
    filled = await arun_pipeline(chain, samples, **run_options)
    out: list[Sample] = []
    for sample in filled:
        if sample.id not in keep.outputs:  # the chain failed: arun_pipeline said why
            out.append(sample)
            continue
        output = keep.outputs[sample.id]
        found = documents_of(output, documents_key)
        meta = dict(sample.metadata)
        contexts = sample.contexts
        if found is None:
            meta["citation_note"] = _no_documents(output, documents_key) + (
                ": contexts are the captured retrieval's, whose order the answer may not follow"
                if contexts
                else ""
            )
        else:
            key, docs = found
            contexts = [document_to_context(d, id_key=options.get("id_key")) for d in docs]
            meta["contexts_from"] = f"chain output: {key}"
        out.append(sample.model_copy(update={"contexts": contexts, "metadata": meta}))
    return out


def run_citation_chain(
    chain: Runnable[Any, Any],
    samples: Iterable[Sample],
    *,
    documents_key: str | None = None,
    **options: Unpack[PipelineOptions],
) -> list[Sample]:
    """Run an "answer with sources" chain on each sample's question (as `run_pipeline` does;
    ``options`` are its `PipelineOptions`) and return samples whose citations
    `ragbridge.core.citations.parse.parse_citations` resolves: the answer with its ``[1]`` /
    ``[doc-id]`` markers, and as contexts the documents of the chain's output (``documents_key``,
    else the first of `DOCUMENT_KEYS`) in the order the chain gave them, which is the order its
    prompt numbered. ``metadata["contexts_from"]`` names the key; a chain whose output holds no
    documents keeps the captured retrieval's contexts, with ``metadata["citation_note"]``."""
    return run_sync(arun_citation_chain(chain, samples, documents_key=documents_key, **options))
