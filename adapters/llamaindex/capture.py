"""LlamaIndex adapter, source side: capture what LlamaIndex pipelines retrieve, and run query
engines, chat engines and retrievers over samples.

(LlamaIndex LLMs and embedding models as ragbridge's `Judge` and `Embedder` are in
`ragbridge.adapters.llamaindex.models`; their names are importable from here too.)

Why it looks the way it does:

* **Capture through instrumentation, not callbacks.** The legacy ``CallbackManager`` only works
  when attached to the index or ``Settings``; the instrumentation dispatcher sees every
  retrieval of every query engine, chat engine and agent. One event handler (retrieval and query
  ends) and one span handler (parent links) are attached to the *root* dispatcher.
* **Installed once, gated by captures.** The dispatcher has no API to remove a handler, so the
  pair is attached on first use and stays; it forwards to the captures currently open and does
  nothing otherwise. A closed capture is unregistered and drops its span bookkeeping, so it
  records nothing afterwards and holds no references to a finished run.
* **Attribution by top-level span and by tags.** Each retrieval is tied to the outermost span it
  ran under (the user's ``query``/``chat`` call) using the parent ids the dispatcher passes to
  span handlers; these are per asyncio task and per thread, so concurrent queries never mix.
  Events also carry the ``instrument_tags({...})`` active when they fired; `run_query_engine`
  tags each sample's query so its retrievals can be found whatever the span shape.
* **Document ids survive chunking.** Contexts are named by ``node.ref_doc_id`` by default
  (`ragbridge.adapters.llamaindex.reading`, which also turns nodes into contexts for the rest of
  the adapter).
* **Handlers must not fail silently.** The dispatcher swallows every exception raised in a
  handler, so handlers here are small and their logic is exercised directly by the tests.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from typing_extensions import TypedDict, Unpack

from ragbridge.adapters._extras import install_hint
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync

from ._framework import (
    MODEL_CALL_ENDS,
    MODEL_CALL_STARTS,
    BaseEvent,
    BaseEventHandler,
    BaseSpanHandler,
    NodeWithScore,
    QueryEndEvent,
    RetrievalEndEvent,
    RetrievalStartEvent,
    active_instrument_tags,
    get_dispatcher,
    instrument_tags,
)
from .models import LlamaIndexEmbedder, LlamaIndexJudge, map_error, usage_of
from .reading import (
    contexts_from,
    contexts_of,
    model_name,
    node_to_context,
    nodes_to_contexts,
    query_text,
    source_nodes,
)

INSTALL_HINT = install_hint("llamaindex")
"""What to run when the ``llamaindex`` extra is missing."""

__all__ = [
    "INSTALL_HINT",
    "CapturedQuery",
    "CapturedRetrieval",
    "LlamaIndexEmbedder",
    "LlamaIndexJudge",
    "QueryRunOptions",
    "RetrievalCapture",
    "RetrieverRunOptions",
    "arun_query_engine",
    "arun_retriever",
    "capture_retrievals",
    "engine_kind",
    "map_error",
    "node_to_context",
    "nodes_to_contexts",
    "run_query_engine",
    "run_retriever",
    "usage_of",
]

RUN_TAG = "ragbridge_run"
SAMPLE_TAG = "ragbridge_sample"


# --------------------------------------------------------------------------- capture


@dataclass(frozen=True)
class CapturedRetrieval:
    """One retriever call: its query, nodes (ranked) and where it ran.

    ``root_span_id`` names the outermost call it ran under (``"RetrieverQueryEngine.aquery-…"``),
    which is what groups the retrievals of one user query; ``tags`` are the instrument tags that
    were active. ``use_ref_doc_id`` is the setting of the capture that recorded it, which
    `contexts` follows unless told otherwise.
    """

    query: str
    nodes: list[NodeWithScore]
    span_id: str | None
    root_span_id: str | None
    tags: dict[str, Any]
    thread_id: int
    use_ref_doc_id: bool = True

    @classmethod
    def of_event(
        cls,
        event: RetrievalEndEvent,
        *,
        root_span_id: str | None,
        tags: dict[str, Any],
        use_ref_doc_id: bool,
    ) -> CapturedRetrieval:
        """The retrieval a ``RetrievalEndEvent`` reports, on the thread that emitted it."""
        return cls(
            query=query_text(event.str_or_query_bundle),
            nodes=list(event.nodes),
            span_id=event.span_id,
            root_span_id=root_span_id,
            tags=tags,
            thread_id=threading.get_ident(),
            use_ref_doc_id=use_ref_doc_id,
        )

    @property
    def name(self) -> str | None:
        """The retriever's class (``"VectorIndexRetriever"``), read from its span id."""
        if not self.span_id or "." not in self.span_id:
            return None
        return self.span_id.split(".", 1)[0]

    def matches(self, name: str) -> bool:
        """Selected by ``name``: the retriever's class name."""
        return self.name == name

    def contexts(self, *, use_ref_doc_id: bool | None = None) -> list[Context]:
        """The nodes as ranked `Context`s, named as the capture names them (document ids unless
        it was opened with ``use_ref_doc_id=False``); ``use_ref_doc_id=`` overrides that."""
        chosen = self.use_ref_doc_id if use_ref_doc_id is None else use_ref_doc_id
        return nodes_to_contexts(self.nodes, use_ref_doc_id=chosen)


@dataclass(frozen=True)
class CapturedQuery:
    """One finished query-engine call (a ``QueryEndEvent``)."""

    query: str
    response: Any
    span_id: str | None
    root_span_id: str | None
    tags: dict[str, Any]


class RetrievalCapture:
    """Records the retrievals and queries of every LlamaIndex pipeline while it is open.

    Use it as a context manager (``with capture_retrievals() as cap:``) or call `open`/`close`.
    While open it sees events from every thread and task of the process; group them with
    `by_root` (one entry per top-level call) or `with_tags`. After `close` it records nothing;
    what it recorded stays readable.
    """

    def __init__(self, *, use_ref_doc_id: bool = True) -> None:
        self.use_ref_doc_id = use_ref_doc_id
        self.retrievals: list[CapturedRetrieval] = []
        self.queries: list[CapturedQuery] = []
        self.model_calls: list[tuple[str, dict[str, Any]]] = []  # (model name, tags) per LLM call
        self._lock = threading.Lock()
        self._roots: dict[str, str] = {}  # open span id -> outermost span id
        self._active = False

    # -- lifecycle
    @property
    def active(self) -> bool:
        return self._active

    def open(self) -> RetrievalCapture:
        """Start recording (installs the root-dispatcher handlers on first use)."""
        _install()
        with self._lock:
            self._active = True
        _ROUTER.add(self)
        return self

    def close(self) -> None:
        """Stop recording and forget span bookkeeping; recorded results are kept."""
        _ROUTER.remove(self)
        with self._lock:
            self._active = False
            self._roots.clear()

    def __enter__(self) -> RetrievalCapture:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- called by the router (any thread)
    def _span_enter(self, id_: str, parent_id: str | None) -> None:
        with self._lock:
            if not self._active:
                return
            if parent_id is None:
                self._roots[id_] = id_
            else:
                # A parent opened before this capture is unknown: treat it as the top level.
                self._roots[id_] = self._roots.get(parent_id, parent_id)

    def _span_exit(self, id_: str) -> None:
        with self._lock:
            self._roots.pop(id_, None)

    def _span_result(self, id_: str, bound_args: Any, instance: Any, result: Any) -> None:
        """A span is about to close with ``result`` (a hook for subclasses; chat engines emit
        no query event, so their answers are only seen here)."""

    def _root_of(self, span_id: str | None) -> str | None:
        if span_id is None:
            return None
        return self._roots.get(span_id, span_id)

    def _event(self, event: BaseEvent) -> None:
        with self._lock:
            if not self._active:
                return
            root = self._root_of(event.span_id)
            tags = dict(event.tags)
            if isinstance(event, RetrievalEndEvent):
                self.retrievals.append(
                    CapturedRetrieval.of_event(
                        event, root_span_id=root, tags=tags, use_ref_doc_id=self.use_ref_doc_id
                    )
                )
            elif isinstance(event, MODEL_CALL_STARTS):
                name = model_name(event.model_dict)
                if name is not None:
                    self.model_calls.append((name, tags))
            elif isinstance(event, QueryEndEvent):
                self.queries.append(
                    CapturedQuery(
                        query=query_text(event.query),
                        response=event.response,
                        span_id=event.span_id,
                        root_span_id=root,
                        tags=tags,
                    )
                )

    # -- reading
    def by_root(self) -> dict[str | None, list[CapturedRetrieval]]:
        """Retrievals grouped by top-level call, in the order the calls first retrieved."""
        out: dict[str | None, list[CapturedRetrieval]] = {}
        with self._lock:
            for r in self.retrievals:
                out.setdefault(r.root_span_id, []).append(r)
        return out

    def with_tags(self, **tags: Any) -> list[CapturedRetrieval]:
        """Retrievals that ran under ``instrument_tags`` containing all of ``tags``."""
        with self._lock:
            return [r for r in self.retrievals if all(r.tags.get(k) == v for k, v in tags.items())]

    def models_with_tags(self, **tags: Any) -> list[str]:
        """Distinct names of the LLMs called under ``instrument_tags`` containing ``tags``."""
        with self._lock:
            names = [n for n, t in self.model_calls if all(t.get(k) == v for k, v in tags.items())]
        return list(dict.fromkeys(names))

    def roots(self) -> list[str]:
        """The top-level calls (their span ids) in the order they first retrieved: one per
        ``query``/``chat`` call of the user's code."""
        return [root for root in self.by_root() if root is not None]

    def groups(self) -> dict[str | None, list[CapturedRetrieval]]:
        """``{root span id: retrievals}``, as in the LangChain capture (same as `by_root`)."""
        return self.by_root()

    def for_root(self, root: str) -> list[CapturedRetrieval]:
        """The retrievals of one top-level call (one of `roots`)."""
        return self.by_root().get(root, [])

    def contexts(
        self,
        root: str | Iterable[CapturedRetrieval] | None = None,
        *,
        retriever_name: str | None = None,
    ) -> list[Context]:
        """The contexts of one top-level call (``root``, one of `roots`), or of every call
        captured (no root); each node once, at its first occurrence, named as the capture
        names them (``use_ref_doc_id``).

        The same call as the LangChain capture's ``contexts(root, retriever_name=...)``. Here a
        call's contexts are those of *all* its retrievals (a sub-question engine retrieves once
        per sub-question and answers from all of them); ``retriever_name`` keeps the retrievals
        of one retriever class (``"VectorIndexRetriever"``).

        Passing a list of retrievals (``contexts(cap.with_tags(...))``) still works but is
        deprecated: call ``.contexts()`` on each retrieval, or pass a root.
        """
        if root is None:
            chosen = self.retrievals
        elif isinstance(root, str):
            chosen = self.for_root(root)
        else:
            warnings.warn(
                "RetrievalCapture.contexts(retrievals) is deprecated: pass a root from "
                "cap.roots() (as with the LangChain capture), or call .contexts() on each "
                "retrieval",
                DeprecationWarning,
                stacklevel=2,
            )
            chosen = list(root)
        if retriever_name is not None:
            chosen = [r for r in chosen if r.matches(retriever_name)]
        return contexts_of(chosen, use_ref_doc_id=self.use_ref_doc_id)


def note_rewritten_query(
    meta: dict[str, Any], retrievals: Sequence[CapturedRetrieval], question: str
) -> None:
    """Set ``meta["retrieval_query"]`` when a chat engine retrieved with another question than
    the user's (``condense_plus_context`` rewrites it): the last one it retrieved with."""
    queries = list(dict.fromkeys(r.query for r in retrievals))
    if queries and queries != [question]:
        meta["retrieval_query"] = queries[-1]


@contextmanager
def capture_retrievals(*, use_ref_doc_id: bool = True) -> Iterator[RetrievalCapture]:
    """``with capture_retrievals() as cap:`` — record every retrieval inside the block."""
    cap = RetrievalCapture(use_ref_doc_id=use_ref_doc_id)
    cap.open()
    try:
        yield cap
    finally:
        cap.close()


class _Router:
    """The set of open captures the installed handlers forward to (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._captures: tuple[RetrievalCapture, ...] = ()

    def add(self, cap: RetrievalCapture) -> None:
        with self._lock:
            if cap not in self._captures:
                self._captures = (*self._captures, cap)

    def remove(self, cap: RetrievalCapture) -> None:
        with self._lock:
            self._captures = tuple(c for c in self._captures if c is not cap)

    @property
    def captures(self) -> tuple[RetrievalCapture, ...]:
        return self._captures  # an immutable snapshot: no lock needed to iterate


_ROUTER = _Router()


_FORWARDED = (
    RetrievalStartEvent,
    RetrievalEndEvent,
    QueryEndEvent,
    *MODEL_CALL_STARTS,
    *MODEL_CALL_ENDS,
)
"""The events captures read: retrievals and queries, and model calls (their names, and their
start and end for the shadow wrapper's timings)."""


class _EventHandler(BaseEventHandler):
    """Forwards retrieval, query and model-call events to the open captures; nothing when none
    is open."""

    @classmethod
    def class_name(cls) -> str:
        return "RagbridgeEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if not isinstance(event, _FORWARDED):
            return
        for cap in _ROUTER.captures:
            cap._event(event)


class _SpanHandler(BaseSpanHandler[Any]):
    """Forwards span parent links to the open captures; keeps no spans of its own (returning
    None from ``new_span`` means the base class stores nothing, so nothing can leak)."""

    @classmethod
    def class_name(cls) -> str:
        return "RagbridgeSpanHandler"

    def new_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        for cap in _ROUTER.captures:
            cap._span_enter(id_, parent_span_id)
        return None

    def prepare_to_exit_span(
        self, id_: str, bound_args: Any, instance: Any | None = None, result: Any = None, **kw: Any
    ) -> None:
        for cap in _ROUTER.captures:
            cap._span_result(id_, bound_args, instance, result)
            cap._span_exit(id_)
        return None

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: Any,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kw: Any,
    ) -> None:
        for cap in _ROUTER.captures:
            cap._span_exit(id_)
        return None


_INSTALL_LOCK = threading.Lock()
_INSTALLED: list[tuple[_EventHandler, _SpanHandler]] = []


def _install() -> tuple[_EventHandler, _SpanHandler]:
    """Attach the handler pair to the root dispatcher, once per process."""
    with _INSTALL_LOCK:
        if not _INSTALLED:
            root = get_dispatcher()
            events, spans = _EventHandler(), _SpanHandler()
            root.add_event_handler(events)
            root.add_span_handler(spans)
            _INSTALLED.append((events, spans))
        return _INSTALLED[0]


# --------------------------------------------------------------------------- running engines

Progress = Callable[[int, int], Any]


class QueryRunOptions(TypedDict, total=False):
    """`arun_query_engine`'s keyword arguments, which `run_query_engine` passes on."""

    max_concurrency: int
    progress: Progress | None
    use_ref_doc_id: bool


class RetrieverRunOptions(TypedDict, total=False):
    """`arun_retriever`'s keyword arguments, which `run_retriever` passes on."""

    max_concurrency: int
    use_ref_doc_id: bool
    node_postprocessors: Sequence[Any] | None


def as_samples(samples: Iterable[Sample | str]) -> list[Sample]:
    out: list[Sample] = []
    for i, item in enumerate(samples):
        out.append(Sample(id=str(i), question=item) if isinstance(item, str) else item)
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        raise ValueError("sample ids must be unique")
    return out


def engine_kind(engine: Any) -> str:
    """``"query"`` for a query engine (``aquery``), ``"chat"`` for a chat engine (``achat``).

    Anything else is refused here, in one line, rather than failing once per sample.
    """
    if callable(getattr(engine, "aquery", None)):
        return "query"
    if callable(getattr(engine, "achat", None)):
        return "chat"
    hint = ""
    if callable(getattr(engine, "run", None)):
        hint = (
            " (an agent workflow: give the agent's query-engine tool's engine instead, or "
            "capture the agent's retrievals with capture_retrievals())"
        )
    elif callable(getattr(engine, "aretrieve", None)):
        hint = " (a retriever: use run_retriever)"
    raise TypeError(
        f"run_query_engine needs a LlamaIndex query engine (aquery) or chat engine (achat), "
        f"got {type(engine).__name__}{hint}"
    )


async def arun_query_engine(
    engine: Any,
    samples: Iterable[Sample | str],
    *,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    use_ref_doc_id: bool = True,
) -> list[Sample]:
    """Async form of `run_query_engine`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    kind = engine_kind(engine)
    todo = as_samples(samples)
    run_id = uuid.uuid4().hex
    # A chat engine keeps one conversation memory: its questions go one at a time, each into a
    # fresh conversation, or one sample's history would leak into the next one's answer.
    gate = asyncio.Semaphore(max_concurrency if kind == "query" else 1)
    done = 0

    async def ask(question: str) -> Any:
        if kind == "query":
            return await engine.aquery(question)
        reset = getattr(engine, "reset", None)
        if callable(reset):
            reset()
        return await engine.achat(question)

    async def one(sample: Sample) -> Sample:
        nonlocal done
        async with gate:
            start = time.perf_counter()
            meta: dict[str, Any] = dict(sample.metadata)
            answer: str | None = None
            contexts: list[Context] = []
            try:
                # Merged with the caller's tags: instrument_tags replaces, it does not add.
                tags = {**active_instrument_tags.get(), RUN_TAG: run_id, SAMPLE_TAG: sample.id}
                with instrument_tags(tags):
                    response = await ask(sample.question)
            except Exception as exc:  # one failing query must not stop the run
                meta["error"] = f"{type(exc).__name__}: {exc}"
                response = None
            meta["latency_s"] = round(time.perf_counter() - start, 6)
            captured = cap.with_tags(**{RUN_TAG: run_id, SAMPLE_TAG: sample.id})
            meta["retrievals"] = len(captured)
            if kind == "chat":
                meta["engine"] = type(engine).__name__
                note_rewritten_query(meta, captured, sample.question)
            models = cap.models_with_tags(**{RUN_TAG: run_id, SAMPLE_TAG: sample.id})
            if models:  # the last LLM wrote the answer; `ragbridge eval` warns if it judges
                meta["generator_model"] = models[-1]
                if len(models) > 1:
                    meta["generator_models"] = models
            if response is not None:
                answer = str(response)
                source = source_nodes(response)
                contexts = contexts_from(source, captured, use_ref_doc_id=use_ref_doc_id)
                if not source and captured:
                    # Engines that do not report sources still retrieved: use what was seen.
                    meta["contexts_from"] = "instrumentation"
        done += 1
        if progress is not None:
            progress(done, len(todo))
        data = sample.model_dump()
        data.update(answer=answer, contexts=contexts, metadata=meta)
        return Sample.model_validate(data)

    with capture_retrievals(use_ref_doc_id=use_ref_doc_id) as cap:
        return list(await asyncio.gather(*(one(s) for s in todo)))


def run_query_engine(
    engine: Any, samples: Iterable[Sample | str], **options: Unpack[QueryRunOptions]
) -> list[Sample]:
    """Ask a LlamaIndex query engine or chat engine every sample's question; return the samples
    filled in.

    A query engine is asked with ``engine.aquery``, at most ``max_concurrency`` queries in
    flight. A chat engine (``index.as_chat_engine(chat_mode="context")``,
    ``"condense_plus_context"``, ...) is asked with ``engine.achat``, one question at a time,
    each in a fresh conversation (``engine.reset()`` before it; its memory is shared, so
    concurrent or chained questions would answer from each other's history); the engine is
    left reset. Anything else (an agent workflow, a retriever) is refused with a `TypeError`
    before any question is asked.

    Each result keeps the input's id, reference and relevance, and gets ``answer``
    (``str(response)``), ``contexts`` (from ``response.source_nodes``, else from the captured
    retrievals) and ``metadata["latency_s"]``/``["retrievals"]`` (chat engines also
    ``["engine"]``, and ``["retrieval_query"]`` when the engine retrieved with a rewritten
    question). A query that raises gets ``metadata["error"]`` and no answer; the run
    continues. Bare strings are accepted as questions (ids ``"0"``, ...). Works inside a
    running event loop too (the run then uses a worker thread).

    The captured-retrieval fallback needs instrumented components: a ``CustomQueryEngine``'s own
    ``custom_query`` emits no events, but retrievers it calls do. ``options`` are
    `QueryRunOptions` (``max_concurrency=8``, ``progress=None``, ``use_ref_doc_id=True``).
    """
    engine_kind(engine)  # refuse what cannot be asked before starting a loop
    return run_sync(arun_query_engine(engine, samples, **options))


async def arun_retriever(
    retriever: Any,
    samples: Iterable[Sample | str],
    *,
    max_concurrency: int = 8,
    use_ref_doc_id: bool = True,
    node_postprocessors: Sequence[Any] | None = None,
) -> list[Sample]:
    """Async form of `run_retriever`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    if not callable(getattr(retriever, "aretrieve", None)):
        raise TypeError(
            "run_retriever needs a LlamaIndex retriever (aretrieve), "
            f"got {type(retriever).__name__}"
        )
    todo = as_samples(samples)
    gate = asyncio.Semaphore(max_concurrency)

    async def one(sample: Sample) -> Sample:
        meta: dict[str, Any] = dict(sample.metadata)
        contexts: list[Context] = []
        async with gate:
            start = time.perf_counter()
            try:
                nodes = await retriever.aretrieve(sample.question)
                for post in node_postprocessors or ():
                    nodes = post.postprocess_nodes(nodes, query_str=sample.question)
            except Exception as exc:  # one failing retrieval must not stop the run
                meta["error"] = f"{type(exc).__name__}: {exc}"
            else:
                contexts = nodes_to_contexts(nodes, use_ref_doc_id=use_ref_doc_id)
            meta["latency_s"] = round(time.perf_counter() - start, 6)
        return sample.model_copy(update={"contexts": contexts, "metadata": meta})

    return list(await asyncio.gather(*(one(s) for s in todo)))


def run_retriever(
    retriever: Any, samples: Iterable[Sample | str], **options: Unpack[RetrieverRunOptions]
) -> list[Sample]:
    """Retrieval only: each sample's ``contexts`` from ``retriever.aretrieve`` (after
    ``node_postprocessors``, as LlamaIndex's ``RetrieverEvaluator`` applies them), for scoring
    a retriever with the ranking measures without paying for generation. Ids are document ids
    (``ref_doc_id``) unless ``use_ref_doc_id=False``; errors are recorded per sample as in
    `run_query_engine`. The LangChain counterpart is ``retrieve_only``. ``options`` are
    `RetrieverRunOptions` (``max_concurrency=8``, ``use_ref_doc_id=True``,
    ``node_postprocessors=None``)."""
    return run_sync(arun_retriever(retriever, samples, **options))
