"""A LangChain Runnable as a `RobustPipeline`: each question answered again with what its
retriever returned passed through the harness's perturbation first.

How: while an answer runs, ``BaseRetriever.invoke``/``ainvoke`` are replaced (counted, restored
after; see `ragbridge.adapters.robustness.MethodPatch`). The replacement calls the real method
(callbacks, tracing and the capture see the real retrieval), turns its ``Document``s into
`Context`s with `document_to_context`, applies the perturbation held in a ContextVar for this
answer, and hands the chain ``Document``s again: the very objects the retriever returned for
passages left as they were, new ones for injected or changed passages. Every path of the demo
chain and of LCEL reaches these two methods: a ``with_config`` binding, ``RunnableParallel``,
``batch``/``stream`` all call the bound retriever's ``invoke``/``ainvoke``.

Which retrieval is perturbed: the one named ``retriever_name`` (run name or tag, as
`run_pipeline` selects), else every *outermost* retrieval (a retriever calling other
retrievers, such as an ensemble, is perturbed once, on its combined result).

The answer is run by `arun_pipeline` on the single sample, so the answer, errors and metadata
are those of ``ragbridge run``; only the contexts differ: the callbacks saw the live documents,
so the sample records what the perturbation gave the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from typing_extensions import Unpack

from ragbridge.adapters.robustness import MARKER_KEYS, MethodPatch, PerturbRun, default_identity
from ragbridge.core.robustness.types import Perturb
from ragbridge.core.sample import Context, Sample

from ._framework import BaseRetriever, Document, Runnable, RunnableConfig
from .documents import document_to_context
from .pipelines import PipelineOptions, arun_pipeline

__all__ = ["RETRIEVER_PATCH", "LangChainRobustPipeline", "documents_for"]

_RUN: ContextVar[tuple[PerturbRun, str | Sequence[str] | None] | None] = ContextVar(
    "ragbridge_langchain_perturb", default=None
)
"""The perturbation of the answer running in this context, with the id_key to read ids by."""

_INSIDE: ContextVar[bool] = ContextVar("ragbridge_langchain_perturbing", default=False)
"""True inside a retrieval being perturbed: retrievers it calls are left alone."""


def documents_for(
    given: Sequence[Context], live: Sequence[Context], docs: Sequence[Document]
) -> list[Document]:
    """The ``Document``s to hand the chain for the perturbed contexts ``given``: the original
    document of a context that is one of ``live`` (the same object, or an equal one), else a
    new ``Document`` with the context's id, text and metadata (without the perturbation's
    markers, which the chain's prompt must not show)."""
    by_object = {id(c): d for c, d in zip(live, docs, strict=True)}
    out: list[Document] = []
    for context in given:
        found = by_object.get(id(context))
        if found is None:
            found = next((d for c, d in zip(live, docs, strict=True) if c == context), None)
        if found is None:
            metadata = {k: v for k, v in context.metadata.items() if k not in MARKER_KEYS}
            found = Document(id=context.id, page_content=context.text, metadata=metadata)
        out.append(found)
    return out


def _target(instance: Any, config: RunnableConfig | None) -> tuple[PerturbRun, Any] | None:
    """This answer's perturbation when the retrieval about to run is one to perturb."""
    current = _RUN.get()
    if current is None or _INSIDE.get():
        return None
    run, id_key = current
    config = config or {}
    name = config.get("run_name") or instance.get_name()
    tags = [*(config.get("tags") or []), *(instance.tags or [])]
    return (run, id_key) if run.applies_to(name, tags) else None


def _perturbed(run: PerturbRun, id_key: Any, docs: Any) -> list[Document]:
    docs = list(docs)
    live = [document_to_context(d, id_key=id_key) for d in docs]
    return documents_for(run.apply(live), live, docs)


def _wrap_invoke(original: Callable[..., Any]) -> Callable[..., Any]:
    def invoke(self: Any, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        target = _target(self, config)
        if target is None:
            return original(self, input, config, **kwargs)
        token = _INSIDE.set(True)
        try:
            docs = original(self, input, config, **kwargs)
        finally:
            _INSIDE.reset(token)
        return _perturbed(*target, docs)

    invoke.__wrapped__ = original  # type: ignore[attr-defined]
    return invoke


def _wrap_ainvoke(original: Callable[..., Any]) -> Callable[..., Any]:
    async def ainvoke(
        self: Any, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        target = _target(self, config)
        if target is None:
            return await original(self, input, config, **kwargs)
        token = _INSIDE.set(True)
        try:
            docs = await original(self, input, config, **kwargs)
        finally:
            _INSIDE.reset(token)
        return _perturbed(*target, docs)

    ainvoke.__wrapped__ = original  # type: ignore[attr-defined]
    return ainvoke


RETRIEVER_PATCH = MethodPatch(BaseRetriever, {"invoke": _wrap_invoke, "ainvoke": _wrap_ainvoke})
"""``BaseRetriever.invoke``/``ainvoke`` replaced while a robust answer runs (process-wide,
counted; a retrieval outside an answer runs unchanged even while it is installed)."""


class LangChainRobustPipeline:
    """A LangChain chain (any ``Runnable`` that retrieves through a LangChain retriever) as the
    robustness harness's `RobustPipeline`.

    ``options`` are `run_pipeline`'s (`PipelineOptions`); ``retriever_name`` also chooses the
    retriever to perturb. One matching none of the retrievers that ran leaves the retrieval
    unperturbed, so that sample gets no answer and ``metadata["error"]`` =
    ``"RobustnessError: retriever_name ... matched none of the retrievers that ran (saw:
    [...])"``: the harness counts it as the condition's pipeline error instead of scoring a
    clean answer as a perturbed one. ``max_concurrency`` and ``progress`` do not apply (one
    question per call; the harness paces and reports) and are ignored. ``identity`` keys the
    harness's cache of answers; by default `ragbridge.adapters.robustness.default_identity` of
    the chain.
    """

    def __init__(
        self,
        chain: Runnable[Any, Any],
        *,
        identity: str | None = None,
        **options: Unpack[PipelineOptions],
    ) -> None:
        if not isinstance(chain, Runnable):
            raise TypeError(f"expected a LangChain Runnable, got {type(chain).__name__}")
        self.chain = chain
        options.pop("max_concurrency", None)
        options.pop("progress", None)
        self.options: PipelineOptions = options
        self.retriever_name = options.get("retriever_name")
        self._identity = identity if identity is not None else default_identity(chain)

    @property
    def identity(self) -> str:
        """What the harness keys this pipeline's cached answers on."""
        return self._identity

    def __repr__(self) -> str:
        return f"LangChainRobustPipeline({self._identity!r})"

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        """``sample`` answered by the chain, its retrieval passed through ``perturb`` (None: the
        chain as it is, exactly `run_pipeline`'s result). The contexts are those ``perturb``
        gave the chain; a perturbation that reached no retriever is said in the metadata
        (see `PerturbRun.outcome`)."""
        if perturb is None:
            return (await arun_pipeline(self.chain, [sample], **self.options))[0]
        run = PerturbRun(perturb, self.retriever_name)
        token = _RUN.set((run, self.options.get("id_key")))
        try:
            with RETRIEVER_PATCH.applied():
                out = (await arun_pipeline(self.chain, [sample], **self.options))[0]
        finally:
            _RUN.reset(token)
        return run.finish(out, int(out.metadata.get("retrievals") or 0))
