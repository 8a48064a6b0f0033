"""A LlamaIndex query or chat engine as a `RobustPipeline`: each question answered again with
what its retriever returned passed through the harness's perturbation first.

How: while an answer runs, ``BaseRetriever.retrieve``/``aretrieve`` are replaced (counted,
restored after; see `ragbridge.adapters.robustness.MethodPatch`). Every engine that retrieves
reaches them: ``RetrieverQueryEngine`` (``as_query_engine``) calls its retriever's
``retrieve``/``aretrieve`` and then its node postprocessors, a ``CustomQueryEngine`` such as the
demo's calls them itself, chat engines likewise. The replacement calls the real method (the
instrumentation events see the real retrieval), turns the ``NodeWithScore``s into `Context`s as
`node_to_context` does, applies the perturbation held in a ContextVar for this answer, and
hands the engine nodes again: the very objects retrieved for passages left as they were, new
``TextNode``s for injected or changed ones (their perturbation markers kept out of what the LLM
and the embedder read). Only the *outermost* retrieval is perturbed: a retriever calling other
retrievers (fusion, recursive) is perturbed once, on its combined result.

The answer is run by `arun_query_engine` on the single sample, so the answer, errors and
metadata are those of ``ragbridge run``. Its contexts are the response's source nodes (what the
engine answered from, after its postprocessors), each read back as the context the
perturbation gave; an engine reporting no source nodes gets the perturbation's output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ragbridge.adapters.robustness import MARKER_KEYS, MethodPatch, PerturbRun, default_identity
from ragbridge.core.robustness.types import Perturb
from ragbridge.core.sample import Context, Sample

from ._framework import (
    BaseRetriever,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from .capture import arun_query_engine, engine_kind
from .reading import node_to_context

__all__ = ["RETRIEVER_PATCH", "LlamaIndexRobustPipeline", "nodes_for"]


@dataclass
class _Answer:
    """One answer's perturbation, how it reads ids, and the context each node handed to the
    engine stands for (by node id), to read the response's source nodes back."""

    run: PerturbRun
    use_ref_doc_id: bool
    handed: dict[str, Context] = field(default_factory=dict)


_RUN: ContextVar[_Answer | None] = ContextVar("ragbridge_llamaindex_perturb", default=None)
"""The perturbation of the answer running in this context."""

_INSIDE: ContextVar[bool] = ContextVar("ragbridge_llamaindex_perturbing", default=False)
"""True inside a retrieval being perturbed: retrievers it calls are left alone."""

_NODE_KEYS = ("node_id", "ref_doc_id")  # written by node_to_context; a new node has its own


def _new_node(context: Context, use_ref_doc_id: bool) -> NodeWithScore:
    """A node carrying an injected or changed passage: its text, its metadata (markers hidden
    from the LLM and the embedder), its id reported as the context's id."""
    metadata = {k: v for k, v in context.metadata.items() if k not in _NODE_KEYS}
    hidden = [k for k in MARKER_KEYS if k in metadata]
    seed = f"{context.id}\0{context.text}".encode()
    node_id = f"robustness-{hashlib.sha256(seed).hexdigest()[:16]}"
    if not use_ref_doc_id and context.id is not None:
        node_id = context.id
    node = TextNode(
        text=context.text,
        id_=node_id,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
    )
    if use_ref_doc_id and context.id is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=context.id)
    return NodeWithScore(node=node, score=context.score)


def nodes_for(
    given: Sequence[Context],
    live: Sequence[Context],
    items: Sequence[NodeWithScore],
    *,
    use_ref_doc_id: bool = True,
) -> list[NodeWithScore]:
    """The nodes to hand the engine for the perturbed contexts ``given``: the original
    ``NodeWithScore`` of a context that is one of ``live`` (the same object, or an equal one),
    else a new one (see the module)."""
    by_object = {id(c): n for c, n in zip(live, items, strict=True)}
    out: list[NodeWithScore] = []
    for context in given:
        found = by_object.get(id(context))
        if found is None:
            found = next((n for c, n in zip(live, items, strict=True) if c == context), None)
        out.append(found if found is not None else _new_node(context, use_ref_doc_id))
    return out


def _perturbed(answer: _Answer, items: Any) -> list[NodeWithScore]:
    items = list(items)
    live = [node_to_context(n, use_ref_doc_id=answer.use_ref_doc_id) for n in items]
    given = answer.run.apply(live)
    nodes = nodes_for(given, live, items, use_ref_doc_id=answer.use_ref_doc_id)
    for context, node in zip(given, nodes, strict=True):
        answer.handed[node.node.node_id] = context
    return nodes


def _target() -> _Answer | None:
    current = _RUN.get()
    if current is None or _INSIDE.get() or not current.run.applies_to(None, []):
        return None
    return current


def _wrap_retrieve(original: Callable[..., Any]) -> Callable[..., Any]:
    def retrieve(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = _target()
        if answer is None:
            return original(self, *args, **kwargs)
        token = _INSIDE.set(True)
        try:
            items = original(self, *args, **kwargs)
        finally:
            _INSIDE.reset(token)
        return _perturbed(answer, items)

    retrieve.__wrapped__ = original  # type: ignore[attr-defined]
    return retrieve


def _wrap_aretrieve(original: Callable[..., Any]) -> Callable[..., Any]:
    async def aretrieve(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = _target()
        if answer is None:
            return await original(self, *args, **kwargs)
        token = _INSIDE.set(True)
        try:
            items = await original(self, *args, **kwargs)
        finally:
            _INSIDE.reset(token)
        return _perturbed(answer, items)

    aretrieve.__wrapped__ = original  # type: ignore[attr-defined]
    return aretrieve


RETRIEVER_PATCH = MethodPatch(
    BaseRetriever, {"retrieve": _wrap_retrieve, "aretrieve": _wrap_aretrieve}
)
"""``BaseRetriever.retrieve``/``aretrieve`` replaced while a robust answer runs (process-wide,
counted; a retrieval outside an answer runs unchanged even while it is installed)."""


class LlamaIndexRobustPipeline:
    """A LlamaIndex query engine (or chat engine) as the robustness harness's
    `RobustPipeline`.

    ``use_ref_doc_id`` is `run_query_engine`'s (contexts named by document id, default).
    ``identity`` keys the harness's cache of answers; by default
    `ragbridge.adapters.robustness.default_identity` of the engine.
    """

    def __init__(
        self, query_engine: Any, *, identity: str | None = None, use_ref_doc_id: bool = True
    ) -> None:
        engine_kind(query_engine)  # refuses what cannot be asked, naming it
        self.query_engine = query_engine
        self.use_ref_doc_id = use_ref_doc_id
        self._identity = identity if identity is not None else default_identity(query_engine)

    @property
    def identity(self) -> str:
        """What the harness keys this pipeline's cached answers on."""
        return self._identity

    def __repr__(self) -> str:
        return f"LlamaIndexRobustPipeline({self._identity!r})"

    async def _run(self, sample: Sample) -> Sample:
        done = await arun_query_engine(
            self.query_engine, [sample], use_ref_doc_id=self.use_ref_doc_id
        )
        return done[0]

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        """``sample`` answered by the engine, its retrieval passed through ``perturb`` (None: the
        engine as it is, exactly `run_query_engine`'s result). The contexts are the ones the
        engine answered from, as the perturbation gave them; a perturbation that reached no
        retriever is said in the metadata (see `PerturbRun.outcome`)."""
        if perturb is None:
            return await self._run(sample)
        answer = _Answer(PerturbRun(perturb), self.use_ref_doc_id)
        token = _RUN.set(answer)
        try:
            with RETRIEVER_PATCH.applied():
                out = await self._run(sample)
        finally:
            _RUN.reset(token)
        result = answer.run.finish(
            out, int(out.metadata.get("retrievals") or 0), keep_contexts=True
        )
        if not answer.run.given:
            return result
        metadata = dict(result.metadata)
        if metadata.get("contexts_from") == "instrumentation" or not out.contexts:
            # the engine reported no source nodes; the instrumentation saw the live ones
            contexts = answer.run.given[-1]
            metadata["contexts_from"] = "robustness"
        else:
            contexts = [answer.handed.get(str(c.metadata.get("node_id")), c) for c in out.contexts]
        return result.model_copy(update={"contexts": contexts, "metadata": metadata})
