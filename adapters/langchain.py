"""LangChain adapter: capture what any Runnable retrieved, run a pipeline over `Sample`s, and use
LangChain chat models / embeddings as ragbridge's `Judge` / `Embedder`.

Why it is built this way:

* **Capture by callbacks, not by wrapping.** A retriever can sit anywhere inside a user's chain
  (LCEL, a tool of an agent, a sub-chain). `RetrievalCapture` is a callback handler: it records
  every ``on_retriever_*`` event and the parent of every chain/tool run, and groups retrievals by
  the *top-level* run they belong to by walking parent run ids. Nothing in the chain changes.
* **Grouping by root run id, resolved late.** Under ``batch``/``abatch`` and concurrent
  ``ainvoke`` many invocations interleave; each has its own root run id, so walking parents is
  exact whatever the interleaving. Roots are resolved when asked for (not when an event arrives),
  so the order in which callbacks happen to be delivered from worker threads does not matter.
* **Thread-safe.** LangChain calls sync handlers from executor threads; one lock guards all state.
* **No-change capture.** `capture_retrievals` registers a handler through LangChain's configure
  hook and a ContextVar, so ``with capture_retrievals() as cap: chain.invoke(q)`` works with a
  chain the user cannot (or does not want to) pass callbacks to.
* **`Document` has no score.** ``retriever.invoke`` returns ``Document(id, page_content,
  metadata)``; a score is taken from metadata when a retriever put one there.
* **Shadow scoring wraps, but only to add a handler.** `shadow` returns a `ShadowRunnable` whose
  methods call the wrapped Runnable's own with one more callback handler (per request, so its
  retrievals and model calls need no grouping) and hand the measurements to the core's
  `ShadowScorer`, which records and scores off the request path.

Importing this module without ``langchain-core`` raises an ImportError naming the extra.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import functools
import itertools
import json
import math
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID, uuid4

from pydantic import BaseModel
from typing_extensions import Unpack

from ragbridge.core.judging.judge import (
    JudgeReply,
    Message,
    classify_error,
)
from ragbridge.core.metrics.base import Metric
from ragbridge.core.monitoring.shadow import (
    FinishedRequest,
    ShadowOptions,
    ShadowScorer,
    busy_ms,
    shadow_scorer,
)
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer

if TYPE_CHECKING:
    from ragbridge.core.testset.documents import SourceDocument

INSTALL_HINT = 'pip install "ragbridge[langchain]"'
"""What to run when the ``langchain`` extra is missing."""

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.runnables.config import get_config_list, merge_configs
    from langchain_core.tracers.context import register_configure_hook
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"ragbridge.adapters.langchain needs langchain-core, which is not installed: {INSTALL_HINT}"
    ) from exc

__all__ = [
    "INSTALL_HINT",
    "LangChainEmbedder",
    "LangChainJudge",
    "Retrieval",
    "RetrievalCapture",
    "ShadowRunnable",
    "aretrieve_only",
    "arun_pipeline",
    "capture_retrievals",
    "document_to_context",
    "retrieve_only",
    "run_pipeline",
    "shadow",
    "source_documents",
]

Progress = Callable[[int, int], Any]
"""Called as ``progress(done, total)`` after each sample."""

DEFAULT_ID_KEYS: tuple[str, ...] = ("id", "doc_id", "source")
"""Metadata keys tried, in order, for a context id when ``Document.id`` is empty."""

DEFAULT_SCORE_KEYS: tuple[str, ...] = ("score", "relevance_score", "similarity_score")
"""Metadata keys tried, in order, for a retriever score."""


# --------------------------------------------------------------------------- documents


def _jsonable(value: Any) -> Any:
    """Metadata must survive ``save_samples`` (JSON); anything else is kept as its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


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
        metadata={str(k): _jsonable(v) for k, v in metadata.items()},
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
        metadata = {str(k): _jsonable(v) for k, v in (doc.metadata or {}).items()}
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


# --------------------------------------------------------------------------- capture


class _Setting(enum.Enum):
    CAPTURE = "the capture's setting"


FROM_CAPTURE: Literal[_Setting.CAPTURE] = _Setting.CAPTURE
"""Default of `Retrieval.contexts`'s ``id_key``: the setting of the capture that recorded it."""


@dataclass
class Retrieval:
    """One retriever run seen by a `RetrievalCapture`.

    ``id_key`` and ``score_keys`` are the settings of the capture that recorded it, which
    `contexts` follows unless told otherwise.
    """

    run_id: UUID
    parent_run_id: UUID | None
    query: str
    name: str | None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    documents: list[Document] | None = None
    error: BaseException | None = None
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None
    end_seq: int | None = None
    id_key: str | Sequence[str] | None = None
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS

    @property
    def done(self) -> bool:
        return self.documents is not None

    @property
    def latency_s(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    def contexts(
        self,
        *,
        id_key: str | Sequence[str] | Literal[_Setting.CAPTURE] | None = FROM_CAPTURE,
        score_keys: Sequence[str] | None = None,
    ) -> list[Context]:
        """The retrieved documents as ranked `Context`s (empty for a failed retrieval), with ids
        and scores read as the capture reads them (its ``id_key``/``score_keys``); either can
        be overridden here (``id_key=None``: ``Document.id``, then the default metadata keys)."""
        key = self.id_key if id_key is FROM_CAPTURE else id_key
        scores = self.score_keys if score_keys is None else score_keys
        return [document_to_context(d, id_key=key, score_keys=scores) for d in self.documents or []]

    def matches(self, name: str) -> bool:
        """Selected by ``name``: its run name (``with_config(run_name=...)``) or one of its tags."""
        return self.name == name or name in self.tags


class RetrievalCapture(BaseCallbackHandler):
    """Records every retrieval inside any Runnable, grouped per top-level invocation.

    Pass it as ``config={"callbacks": [cap]}`` (or use `capture_retrievals`). Retrievals are
    grouped by their *root* run: the top-level ``invoke``/one input of a ``batch``. Read them
    with `for_root`, `groups`, or `select`.
    """

    # Sync handlers are otherwise dispatched to executor threads under ``ainvoke``; recording is
    # cheap and lock-protected, so running inline saves a thread hop per event.
    run_inline = True

    def __init__(
        self,
        *,
        id_key: str | Sequence[str] | None = None,
        score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    ) -> None:
        super().__init__()
        self.id_key = id_key
        self.score_keys = tuple(score_keys)
        self._lock = threading.Lock()
        self._parents: dict[UUID, UUID | None] = {}
        self._root_inputs: dict[UUID, Any] = {}
        self._retrievals: dict[UUID, Retrieval] = {}
        self._models: dict[UUID, str] = {}  # LLM run id -> model name, in start order
        self._seq = itertools.count()
        self._forward: tuple[RetrievalCapture, ...] = ()

    # -- callbacks ------------------------------------------------------------------------------

    def _parent(self, run_id: UUID, parent_run_id: UUID | None, inputs: Any = None) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
            if parent_run_id is None and inputs is not None:
                self._root_inputs[run_id] = inputs

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._parent(run_id, parent_run_id, inputs)
        for other in self._forward:
            other.on_chain_start(
                serialized, inputs, run_id=run_id, parent_run_id=parent_run_id, **kwargs
            )

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        # A retriever wrapped as an agent tool nests under the tool run.
        self._parent(run_id, parent_run_id, input_str)
        for other in self._forward:
            other.on_tool_start(
                serialized, input_str, run_id=run_id, parent_run_id=parent_run_id, **kwargs
            )

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model_start(run_id, parent_run_id, metadata, kwargs)
        for other in self._forward:
            other.on_chat_model_start(
                serialized,
                messages,
                run_id=run_id,
                parent_run_id=parent_run_id,
                metadata=metadata,
                **kwargs,
            )

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model_start(run_id, parent_run_id, metadata, kwargs)
        for other in self._forward:
            other.on_llm_start(
                serialized,
                prompts,
                run_id=run_id,
                parent_run_id=parent_run_id,
                metadata=metadata,
                **kwargs,
            )

    def _model_start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        # The generating model's name, so a judge of the same model can be warned about: LangChain
        # puts it in ls_model_name; older integrations only in the invocation params.
        params = kwargs.get("invocation_params") or {}
        name = (metadata or {}).get("ls_model_name") or next(
            (params[k] for k in ("model", "model_name", "model_id") if params.get(k)), None
        )
        with self._lock:
            self._parents[run_id] = parent_run_id
            if name:
                self._models[run_id] = str(name)

    def models_for(self, root_run_id: UUID) -> list[str]:
        """Names of the chat models / LLMs that ran under one top-level invocation, in order."""
        with self._lock:
            names = [m for run, m in self._models.items() if self._root_of(run) == root_run_id]
        return list(dict.fromkeys(names))

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name")
        record = Retrieval(
            run_id=run_id,
            parent_run_id=parent_run_id,
            query=str(query),
            name=None if name is None else str(name),
            tags=list(tags or []),
            metadata=dict(metadata or {}),
            id_key=self.id_key,
            score_keys=self.score_keys,
        )
        with self._lock:
            self._parents[run_id] = parent_run_id
            if parent_run_id is None:
                self._root_inputs[run_id] = query
            self._retrievals[run_id] = record
        for other in self._forward:
            other.on_retriever_start(
                serialized,
                query,
                run_id=run_id,
                parent_run_id=parent_run_id,
                tags=tags,
                metadata=metadata,
                **kwargs,
            )

    def on_retriever_end(
        self,
        documents: Sequence[Document],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            record = self._retrievals.get(run_id)
            if record is not None:
                record.documents = list(documents)
                record.ended = time.perf_counter()
                record.end_seq = next(self._seq)
        for other in self._forward:
            other.on_retriever_end(documents, run_id=run_id, parent_run_id=parent_run_id, **kwargs)

    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            record = self._retrievals.get(run_id)
            if record is not None:
                record.error = error
                record.ended = time.perf_counter()
        for other in self._forward:
            other.on_retriever_error(error, run_id=run_id, parent_run_id=parent_run_id, **kwargs)

    # -- reading --------------------------------------------------------------------------------

    def _root_of(self, run_id: UUID) -> UUID:
        seen: set[UUID] = set()
        current = run_id
        while True:
            parent = self._parents.get(current)
            if parent is None or parent in seen:
                return current
            seen.add(current)
            current = parent

    @property
    def retrievals(self) -> list[Retrieval]:
        """Every retrieval seen, in start order."""
        with self._lock:
            return list(self._retrievals.values())

    def groups(self) -> dict[UUID, list[Retrieval]]:
        """``{root run id: retrievals}`` in the order roots first retrieved."""
        out: dict[UUID, list[Retrieval]] = {}
        with self._lock:
            for record in self._retrievals.values():
                out.setdefault(self._root_of(record.run_id), []).append(record)
        return out

    def for_root(self, root_run_id: UUID) -> list[Retrieval]:
        """The retrievals of one top-level invocation (pass ``config={"run_id": ...}``)."""
        return self.groups().get(root_run_id, [])

    def roots(self) -> list[UUID]:
        """Root run ids in the order they first retrieved (with the hook form, one per
        top-level ``invoke`` and one per input of a ``batch``)."""
        return list(self.groups())

    def root_input(self, root_run_id: UUID) -> Any:
        """What the top-level run was invoked with (None if it was not seen)."""
        with self._lock:
            return self._root_inputs.get(root_run_id)

    def select(
        self, root_run_id: UUID, retriever_name: str | None = None
    ) -> tuple[Retrieval | None, dict[str, Any]]:
        """The retrieval to score for one invocation, and metadata saying how it was chosen.

        Among the *completed* retrievals of the root: the last one to finish whose run name or
        tag is ``retriever_name``, or — with no name — the last one to finish. Retrievals that
        ran in parallel finish in no fixed order: name the one you mean.
        """
        return _choose(self.for_root(root_run_id), retriever_name)

    def contexts(
        self,
        root: UUID | None = None,
        *,
        retriever_name: str | None = None,
        root_run_id: UUID | None = None,
    ) -> list[Context]:
        """The contexts of one top-level invocation (``root``, one of `roots`), or of every
        invocation captured (no root, each context id once at its first occurrence), with ids
        and scores read by the capture's ``id_key``/``score_keys``.

        The same call as the LlamaIndex capture's ``contexts(root, retriever_name=...)``. Here an
        invocation's contexts are those of its *selected* retrieval (see `select`: the last to
        finish, or the one named ``retriever_name``), the one a chain usually answers from.
        ``root_run_id=`` is the former name of ``root`` (deprecated).
        """
        if root_run_id is not None:
            warnings.warn(
                "RetrievalCapture.contexts(root_run_id=...) is deprecated: pass the root "
                "positionally, contexts(root), as with the LlamaIndex capture",
                DeprecationWarning,
                stacklevel=2,
            )
            if root is not None:
                raise TypeError("pass root or root_run_id, not both")
            root = root_run_id
        roots = [root] if root is not None else self.roots()
        out: list[Context] = []
        seen: set[str] = set()
        for one in roots:
            chosen, _ = self.select(one, retriever_name)
            if chosen is None:
                continue
            for context in chosen.contexts(id_key=self.id_key, score_keys=self.score_keys):
                if root is None and context.id is not None:
                    if context.id in seen:
                        continue
                    seen.add(context.id)
                out.append(context)
        return out

    def clear(self) -> None:
        with self._lock:
            self._parents.clear()
            self._root_inputs.clear()
            self._retrievals.clear()


def _choose(
    found: list[Retrieval], retriever_name: str | None
) -> tuple[Retrieval | None, dict[str, Any]]:
    """`RetrievalCapture.select` over the retrievals of one invocation."""
    done = sorted((r for r in found if r.done), key=lambda r: r.end_seq or 0)
    info: dict[str, Any] = {"retrievals": len(found)}
    failed = [r for r in found if r.error is not None]
    if failed:
        info["retrieval_errors"] = [f"{type(r.error).__name__}: {r.error}" for r in failed]
    if retriever_name is not None:
        done = [r for r in done if r.matches(retriever_name)]
        if not done:
            names = sorted({r.name or "?" for r in found})
            info["retrieval_note"] = (
                f"no completed retrieval named {retriever_name!r} (saw: {names})"
            )
            return None, info
    if not done:
        return None, info
    chosen = done[-1]
    info["retriever"] = chosen.name
    info["retrieval_query"] = chosen.query
    if len(found) > 1:
        how = f"named {retriever_name!r}" if retriever_name else "the last to finish"
        info["retrieval_note"] = f"{len(found)} retrievals ran; used {how} ({chosen.name})"
    return chosen, info


_ACTIVE: ContextVar[RetrievalCapture | None] = ContextVar(
    "ragbridge_retrieval_capture", default=None
)
register_configure_hook(_ACTIVE, inheritable=True)


@contextlib.contextmanager
def capture_retrievals(
    *,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
) -> Iterator[RetrievalCapture]:
    """Capture every retrieval of every Runnable run in this context, with no callbacks passed.

    Works through LangChain's configure hook: any callback manager configured while the block is
    active (this thread/task and tasks created from it) gets the capture. Nested blocks each see
    what runs inside them (the inner capture forwards to the outer one).
    """
    cap = RetrievalCapture(id_key=id_key, score_keys=score_keys)
    outer = _ACTIVE.get()
    if outer is not None:
        cap._forward = (outer,)
    token = _ACTIVE.set(cap)
    try:
        yield cap
    finally:
        _ACTIVE.reset(token)


# --------------------------------------------------------------------------- pipelines


def _message_text(message: BaseMessage) -> str:
    """A message's text; content may be a list of blocks (Anthropic-style)."""
    content = message.content
    if isinstance(content, str):
        return content
    return str(message.text)


_ANSWER_KEYS = ("answer", "output", "result")


def _answer_of(output: Any, answer_key: str | None) -> str | None:
    """The answer in a chain's output: a str, a message, or a dict's answer/output/result."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return _message_text(output)
    if isinstance(output, Mapping):
        keys = (answer_key,) if answer_key is not None else _ANSWER_KEYS
        for key in keys:
            if key in output:
                return _answer_of(output[key], None)
        return None
    return None


def _chain_input(question: str, input_key: str | None) -> Any:
    return question if input_key is None else {input_key: question}


def _run_sync(coro: Any) -> Any:
    """Run a coroutine from sync code, also inside a running loop (Jupyter): on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragbridge") as pool:
        return pool.submit(asyncio.run, coro).result()


async def arun_pipeline(
    chain: Runnable[Any, Any],
    samples: Iterable[Sample],
    *,
    retriever_name: str | None = None,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    answer_key: str | None = None,
    input_key: str | None = None,
    id_key: str | Sequence[str] | None = None,
    config: RunnableConfig | None = None,
) -> list[Sample]:
    """Async `run_pipeline`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    items = list(samples)
    cap = RetrievalCapture(id_key=id_key)
    sem = asyncio.Semaphore(max_concurrency)
    done = 0
    base = dict(config or {})
    user_callbacks = base.pop("callbacks", None)

    async def one(sample: Sample) -> Sample:
        nonlocal done
        run_id = uuid4()
        callbacks: list[Any] = [cap]
        if isinstance(user_callbacks, list):
            callbacks.extend(user_callbacks)
        run_config: RunnableConfig = {
            **base,  # type: ignore[typeddict-item]
            "callbacks": callbacks,
            "run_id": run_id,
            "metadata": {**dict(base.get("metadata") or {}), "ragbridge_sample_id": sample.id},
        }
        metadata = dict(sample.metadata)
        answer: str | None = None
        async with sem:
            start = time.perf_counter()
            try:
                output = await chain.ainvoke(_chain_input(sample.question, input_key), run_config)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one failing sample must not stop the run
                metadata["error"] = f"{type(exc).__name__}: {exc}"
            else:
                answer = _answer_of(output, answer_key)
                if answer is None:
                    metadata["answer_note"] = (
                        f"no answer found in chain output of type {type(output).__name__}"
                    )
            metadata["latency_s"] = time.perf_counter() - start
        chosen, info = cap.select(run_id, retriever_name)
        metadata.update(info)
        models = cap.models_for(run_id)
        if models:  # the last model to run wrote the answer; ragbridge eval warns if it judges
            metadata["generator_model"] = models[-1]
            if len(models) > 1:
                metadata["generator_models"] = models
        contexts = [] if chosen is None else chosen.contexts(id_key=id_key)
        done += 1
        if progress is not None:
            progress(done, len(items))
        return sample.model_copy(
            update={"answer": answer, "contexts": contexts, "metadata": metadata}
        )

    return list(await asyncio.gather(*(one(s) for s in items)))


def run_pipeline(
    chain: Runnable[Any, Any],
    samples: Iterable[Sample],
    *,
    retriever_name: str | None = None,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    answer_key: str | None = None,
    input_key: str | None = None,
    id_key: str | Sequence[str] | None = None,
    config: RunnableConfig | None = None,
) -> list[Sample]:
    """Run ``chain`` on each sample's question; return copies with ``contexts`` and ``answer``.

    Each input gets its own root run id, so the retrieval captured inside the chain is matched
    to *its* sample however the runs interleave. When several retrievals ran, the one named
    ``retriever_name`` (run name or tag) is used, else the last to finish; ``metadata`` says which
    (``retriever``, ``retrieval_query``, ``retrieval_note``). ``answer`` is the output string,
    an AIMessage's content, or the dict key ``answer_key`` (default: answer/output/result).
    ``metadata["latency_s"]`` is the wall time of the invocation; ``metadata["generator_model"]``
    the model that ran last inside it (``ls_model_name``), so a judge of the same model is
    flagged by ``ragbridge eval``. A chain error on one sample is
    recorded as ``metadata["error"]`` (no answer) and the run continues. ``input_key`` sends
    ``{input_key: question}`` instead of the bare question. At most ``max_concurrency``
    invocations run at once. Reference, relevance and metadata are kept.
    """
    return _run_sync(  # type: ignore[no-any-return]
        arun_pipeline(
            chain,
            samples,
            retriever_name=retriever_name,
            max_concurrency=max_concurrency,
            progress=progress,
            answer_key=answer_key,
            input_key=input_key,
            id_key=id_key,
            config=config,
        )
    )


async def aretrieve_only(
    retriever: Runnable[Any, Any],
    samples: Iterable[Sample],
    k: int | None = None,
    *,
    max_concurrency: int = 8,
    id_key: str | Sequence[str] | None = None,
) -> list[Sample]:
    """Async `retrieve_only`."""
    items = list(samples)
    sem = asyncio.Semaphore(max_concurrency)

    async def one(sample: Sample) -> Sample:
        metadata = dict(sample.metadata)
        contexts: list[Context] = []
        async with sem:
            start = time.perf_counter()
            try:
                docs = await retriever.ainvoke(sample.question)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metadata["error"] = f"{type(exc).__name__}: {exc}"
            else:
                ranked = list(docs)[:k] if k is not None else list(docs)
                contexts = [document_to_context(d, id_key=id_key) for d in ranked]
            metadata["latency_s"] = time.perf_counter() - start
        return sample.model_copy(update={"contexts": contexts, "metadata": metadata})

    return list(await asyncio.gather(*(one(s) for s in items)))


def retrieve_only(
    retriever: Runnable[Any, Any],
    samples: Iterable[Sample],
    k: int | None = None,
    *,
    max_concurrency: int = 8,
    id_key: str | Sequence[str] | None = None,
) -> list[Sample]:
    """Retrieval-only run: each sample's ``contexts`` from ``retriever`` (top ``k`` if given).

    For scoring a retriever alone with the ranking measures, without paying for generation.
    ``k`` cuts the returned ranking; it cannot make a retriever return *more* documents (set its
    ``search_kwargs`` for that). Errors are recorded per sample as in `run_pipeline`.
    """
    return _run_sync(  # type: ignore[no-any-return]
        aretrieve_only(retriever, samples, k, max_concurrency=max_concurrency, id_key=id_key)
    )


# --------------------------------------------------------------------------- judge & embedder


def _model_name(obj: Any) -> str:
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(obj).__name__


def map_error(exc: Exception) -> Exception | None:
    """The ragbridge judge error for a provider exception, or None to re-raise it as is.

    The mapping is core's `classify_error` (status codes and class names, no SDK imports), shared
    by every adapter so they all retry the same errors.
    """
    return classify_error(exc)


_ROLES: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
}


def to_langchain_messages(messages: Sequence[Message]) -> list[BaseMessage]:
    """ragbridge's ``{"role", "content"}`` dicts as LangChain messages."""
    out: list[BaseMessage] = []
    for message in messages:
        role = message.get("role", "user")
        cls = _ROLES.get(role)
        if cls is None:
            raise ValueError(f"unknown message role {role!r}")
        out.append(cls(content=message.get("content", "")))
    return out


def _usage(message: Any) -> Usage:
    meta = getattr(message, "usage_metadata", None) or {}
    return Usage(
        prompt_tokens=int(meta.get("input_tokens") or 0),
        completion_tokens=int(meta.get("output_tokens") or 0),
    )


def _raw_text(message: Any) -> str:
    """The text of a raw reply; for a tool call, its arguments as JSON (so a repair can quote
    what was wrong)."""
    if not isinstance(message, BaseMessage):
        return "" if message is None else str(message)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args", {}))
    return _message_text(message)


_STRUCTURED_METHODS = ("function_calling", "json_mode")


class LangChainJudge:
    """A LangChain chat model as a ragbridge `Judge`.

    With a schema it uses the model's structured output (``function_calling``, then
    ``json_mode``; or only ``method`` when given), falling back to a plain prompt whose text the
    engine parses. A structured call that parses to ``None`` (a model answering in prose instead
    of calling the tool) is returned as text with ``parsed=None``, so the engine repairs it
    instead of taking it for an answer. Provider errors are mapped to the engine's retry classes.
    """

    def __init__(self, chat_model: Any, *, method: str | None = None) -> None:
        self.chat_model = chat_model
        self.method = method
        self.model: str = _model_name(chat_model)
        self._structured: dict[type[BaseModel], tuple[str | None, Any]] = {}
        self._lock = threading.Lock()

    def _runnable_for(self, schema: type[BaseModel]) -> tuple[str | None, Any]:
        """The structured runnable for ``schema`` (built once), or ``(None, None)`` for plain."""
        with self._lock:
            cached = self._structured.get(schema)
        if cached is not None:
            return cached
        methods = (self.method,) if self.method is not None else _STRUCTURED_METHODS
        chosen: tuple[str | None, Any] = (None, None)
        for method in methods:
            try:
                runnable = self.chat_model.with_structured_output(
                    schema, method=method, include_raw=True
                )
            except (NotImplementedError, ValueError, TypeError, AttributeError):
                continue
            chosen = (method, runnable)
            break
        with self._lock:
            self._structured[schema] = chosen
        return chosen

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        lc_messages = to_langchain_messages(messages)
        try:
            if schema is not None:
                _, runnable = self._runnable_for(schema)
                if runnable is not None:
                    result = await runnable.ainvoke(lc_messages)
                    return self._structured_reply(result, schema)
            reply = await self.chat_model.ainvoke(lc_messages)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            mapped = map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return JudgeReply(text=_raw_text(reply), usage=_usage(reply))

    @staticmethod
    def _structured_reply(result: Any, schema: type[BaseModel]) -> JudgeReply:
        raw = result.get("raw") if isinstance(result, Mapping) else result
        parsed = result.get("parsed") if isinstance(result, Mapping) else None
        usage = _usage(raw)
        if parsed is None:
            return JudgeReply(text=_raw_text(raw), parsed=None, usage=usage)
        if isinstance(parsed, BaseModel):
            return JudgeReply(text=parsed.model_dump_json(), parsed=parsed, usage=usage)
        return JudgeReply(text=json.dumps(parsed, default=str), parsed=parsed, usage=usage)


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as a ragbridge `Embedder` (``aembed_documents``)."""

    def __init__(self, embeddings: Any, *, model: str | None = None) -> None:
        self.embeddings = embeddings
        self.model: str = model or _model_name(embeddings)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            vectors = await self.embeddings.aembed_documents(list(texts))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            mapped = map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return [list(map(float, v)) for v in vectors]


# --------------------------------------------------------------------------- shadow scoring


class _RequestCapture(RetrievalCapture):
    """What one served request did: its retrievals (`RetrievalCapture`) and when each model
    call ran. One per request, so nothing needs grouping; it is dropped with the request."""

    def __init__(self, *, id_key: str | Sequence[str] | None, score_keys: Sequence[str]) -> None:
        super().__init__(id_key=id_key, score_keys=score_keys)
        self._model_started: dict[UUID, float] = {}
        self.model_spans: list[tuple[float, float]] = []

    def _model_start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        super()._model_start(run_id, parent_run_id, metadata, kwargs)
        with self._lock:
            self._model_started[run_id] = time.perf_counter()

    def _model_end(self, run_id: UUID) -> None:
        now = time.perf_counter()
        with self._lock:
            started = self._model_started.pop(run_id, None)
            if started is not None:
                self.model_spans.append((started, now))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._model_end(run_id)

    def retrieval_spans(self) -> list[tuple[float, float]]:
        with self._lock:
            return [(r.started, r.ended) for r in self._retrievals.values() if r.ended]

    def model_names(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(self._models.values()))


@dataclass
class _Call:
    """One request between `ShadowRunnable._begin` and `_finish`."""

    request_id: str
    id_from: str
    input: Any
    config: RunnableConfig
    capture: _RequestCapture
    started: float = field(default_factory=time.perf_counter)
    timestamp: float = field(default_factory=time.time)


_QUESTION_KEYS = ("question", "input", "query")


def _question_of(value: Any, input_key: str | None) -> str | None:
    """The user's question in a chain's input: a str, a dict's question/input/query (or
    ``input_key``), a message, or the last human message of a list."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in (input_key,) if input_key is not None else _QUESTION_KEYS:
            found = value.get(key)
            if isinstance(found, str):
                return found
        return None
    if isinstance(value, BaseMessage):
        return _message_text(value)
    if isinstance(value, Sequence) and value and isinstance(value[-1], HumanMessage):
        return _message_text(value[-1])
    return None


class _Chunks:
    """A stream's chunks added up as LangChain adds them (``a + b``: strings, message chunks,
    dicts of a parallel step), so a streamed answer can be scored once the stream ends."""

    def __init__(self) -> None:
        self.value: Any = None
        self.problem: str | None = None
        self._empty = True

    def add(self, chunk: Any) -> None:
        if self.problem is not None:
            return
        if self._empty:
            self.value, self._empty = chunk, False
            return
        try:
            self.value = self.value + chunk
        except TypeError:
            self.value = None
            self.problem = f"stream chunks of type {type(chunk).__name__} do not add up"


class ShadowRunnable(Runnable[Any, Any]):
    """A Runnable that serves exactly as the one it wraps and shadow-scores its requests.

    Built by `shadow`. ``invoke``, ``ainvoke``, ``batch``, ``abatch``, ``stream`` and ``astream``
    call the wrapped Runnable's own method with the same input and config (plus one callback
    handler) and return what it returns, raise what it raises. Composition (``|``,
    ``with_config``, ``astream_events``) works through these. After each request, its
    measurements go to the `ShadowScorer` (``self.scorer``), which records and samples off the
    request path.
    """

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        scorer: ShadowScorer,
        *,
        owns_scorer: bool,
        pipeline: str | None,
        request_id_key: str,
        answer_key: str | None,
        input_key: str | None,
        retriever_name: str | None,
        id_key: str | Sequence[str] | None,
        score_keys: Sequence[str],
    ) -> None:
        self.runnable = runnable
        self.scorer = scorer
        self.owns_scorer = owns_scorer
        self.name = runnable.get_name()
        self.pipeline = pipeline if pipeline is not None else self.name
        self.request_id_key = request_id_key
        self.answer_key = answer_key
        self.input_key = input_key
        self.retriever_name = retriever_name
        self.id_key = id_key
        self.score_keys = tuple(score_keys)

    def __repr__(self) -> str:
        return f"shadow({self.runnable!r}, sample_rate={self.scorer.sample_rate})"

    # -- what the wrapped runnable says about itself
    @property
    def InputType(self) -> Any:
        return self.runnable.InputType

    @property
    def OutputType(self) -> Any:
        return self.runnable.OutputType

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_output_schema(config)

    @property
    def config_specs(self) -> Any:
        return self.runnable.config_specs

    def get_graph(self, config: RunnableConfig | None = None) -> Any:
        return self.runnable.get_graph(config)

    # -- lifecycle
    def close(self, timeout: float | None = None) -> bool:
        """Close the scorer when this wrapper built it (see `ShadowScorer.close`); a shared
        scorer is left to its owner. True when nothing was cut short."""
        return self.scorer.close(timeout) if self.owns_scorer else True

    async def aclose(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> ShadowRunnable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the request path
    def _begin(self, input: Any, config: RunnableConfig | None) -> _Call:
        given = config or {}
        metadata = given.get("metadata") or {}
        named = metadata.get(self.request_id_key)
        run_id = given.get("run_id")
        capture = _RequestCapture(id_key=self.id_key, score_keys=self.score_keys)
        extra: RunnableConfig = {"callbacks": [capture]}
        if named is not None and str(named):
            request_id, id_from = str(named), "metadata"
        elif run_id is not None:
            request_id, id_from = str(run_id), "run_id"
        else:
            new = uuid4()
            request_id, id_from = str(new), "generated"
            extra["run_id"] = new  # the trace of the request carries its id
        patched = merge_configs(config, extra)
        return _Call(request_id, id_from, input, patched, capture)

    def _finish(
        self,
        call: _Call,
        *,
        output: Any = None,
        error: BaseException | None = None,
        unscorable: str | None = None,
    ) -> None:
        """Hand the request's measurements to the scorer; never raises."""
        try:
            latency = (time.perf_counter() - call.started) * 1000.0
            capture = call.capture
            answer: str | None = None
            if error is None and unscorable is None:
                answer = _answer_of(output, self.answer_key)
                if answer is None:
                    unscorable = f"no answer found in the output ({type(output).__name__})"
            chosen, info = _choose(capture.retrievals, self.retriever_name)
            question = _question_of(call.input, self.input_key)
            if question is None and chosen is not None:
                question = chosen.query
            self.scorer.record(
                FinishedRequest(
                    request_id=call.request_id,
                    question=question,
                    answer=answer,
                    contexts=None if not info["retrievals"] else _contexts_later(chosen),
                    retrieval_ms=busy_ms(capture.retrieval_spans()),
                    generation_ms=busy_ms(capture.model_spans),
                    latency_ms=latency,
                    error=None if error is None else f"{type(error).__name__}: {error}",
                    not_scorable=unscorable,
                    timestamp=call.timestamp,
                    pipeline=self.pipeline,
                    attributes=functools.partial(_attributes, call, info, question),
                )
            )
        except Exception as exc:  # serving must go on whatever happens here
            self.scorer.note_error(f"request {call.request_id!r}: {type(exc).__name__}: {exc}")

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = self._begin(input, config)
        try:
            output = self.runnable.invoke(input, call.config, **kwargs)
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, output=output)
        return output

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        call = self._begin(input, config)
        try:
            output = await self.runnable.ainvoke(input, call.config, **kwargs)
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, output=output)
        return output

    def _begin_batch(
        self, inputs: list[Any], config: RunnableConfig | list[RunnableConfig] | None
    ) -> list[_Call]:
        configs = get_config_list(config, len(inputs)) if config is not None else None
        return [
            self._begin(one, None if configs is None else configs[i])
            for i, one in enumerate(inputs)
        ]

    def _finish_batch(self, calls: list[_Call], outputs: list[Any]) -> None:
        for call, output in zip(calls, outputs, strict=True):
            if isinstance(output, Exception):
                self._finish(call, error=output)
            else:
                self._finish(call, output=output)

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """The wrapped Runnable's ``batch`` (its own batching kept), one request per input.
        When it raises (``return_exceptions=False``), every input's request is recorded with
        that error: the caller got no output for any of them."""
        if not inputs:
            return self.runnable.batch(inputs, config, return_exceptions=return_exceptions)
        calls = self._begin_batch(inputs, config)
        try:
            outputs = self.runnable.batch(
                inputs,
                [c.config for c in calls],
                return_exceptions=return_exceptions,
                **kwargs,
            )
        except BaseException as exc:
            for call in calls:
                self._finish(call, error=exc)
            raise
        self._finish_batch(calls, outputs)
        return outputs

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """Async `batch`."""
        if not inputs:
            return await self.runnable.abatch(inputs, config, return_exceptions=return_exceptions)
        calls = self._begin_batch(inputs, config)
        try:
            outputs = await self.runnable.abatch(
                inputs,
                [c.config for c in calls],
                return_exceptions=return_exceptions,
                **kwargs,
            )
        except BaseException as exc:
            for call in calls:
                self._finish(call, error=exc)
            raise
        self._finish_batch(calls, outputs)
        return outputs

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> Iterator[Any]:
        """The wrapped Runnable's ``stream``, chunk by chunk; the answer scored is the chunks
        added up. A stream the caller stops reading early is recorded, not scored."""
        call = self._begin(input, config)
        chunks = _Chunks()
        try:
            for chunk in self.runnable.stream(input, call.config, **kwargs):
                chunks.add(chunk)
                yield chunk
        except GeneratorExit:
            self._finish(call, unscorable=_STOPPED)
            raise
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, output=chunks.value, unscorable=chunks.problem)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> AsyncIterator[Any]:
        """Async `stream`."""
        call = self._begin(input, config)
        chunks = _Chunks()
        try:
            async for chunk in self.runnable.astream(input, call.config, **kwargs):
                chunks.add(chunk)
                yield chunk
        except GeneratorExit:
            self._finish(call, unscorable=_STOPPED)
            raise
        except BaseException as exc:
            self._finish(call, error=exc)
            raise
        self._finish(call, output=chunks.value, unscorable=chunks.problem)


_STOPPED = "the caller stopped reading the stream before its end"


def _contexts_later(chosen: Retrieval | None) -> Callable[[], list[Context]]:
    """The chosen retrieval's documents as contexts, converted on the scorer's sink thread."""
    return (lambda: []) if chosen is None else chosen.contexts


def _attributes(call: _Call, info: dict[str, Any], question: str | None) -> dict[str, Any]:
    """What else a record keeps about a LangChain request (built on the sink thread)."""
    out: dict[str, Any] = {"request_id_from": call.id_from}
    for key in ("retrievals", "retriever", "retrieval_note", "retrieval_errors"):
        if info.get(key):
            out[key] = info[key]
    query = info.get("retrieval_query")
    if query is not None and query != question:
        out["retrieval_query"] = query
    models = call.capture.model_names()
    if models:
        out["model"] = models[-1]
    return out


def shadow(
    runnable: Runnable[Any, Any],
    metrics: ShadowScorer | Scorer | Iterable[Metric | str],
    *,
    pipeline: str | None = None,
    request_id_key: str = "request_id",
    answer_key: str | None = None,
    input_key: str | None = None,
    retriever_name: str | None = None,
    id_key: str | Sequence[str] | None = None,
    score_keys: Sequence[str] = DEFAULT_SCORE_KEYS,
    **options: Unpack[ShadowOptions],
) -> ShadowRunnable:
    """Wrap ``runnable`` to record every request it serves and score a sample of them in the
    background (shadow scoring); the wrapper serves exactly as ``runnable`` does.

    ``metrics`` are metric names or objects, scored by a new `ShadowScorer` built with
    ``options`` (``judge=``, ``sample_rate=`` (default 0.05), ``relevance_threshold=``,
    ``sinks=``, ``store=``, ``max_pending=``, ``max_queued=``, ``close_timeout=``, ...; see
    `ragbridge.core.monitoring.shadow.ShadowScorer`) and closed with the wrapper; or a
    `ShadowScorer` to share with other wrappers (a LlamaIndex engine's too), which its owner
    closes. By default records go to ``ragbridge-monitor.sqlite`` in the working directory.

    Per request it measures the retrieval time (retriever callbacks; calls that overlap count
    once), the generation time (chat model / LLM callbacks), the chunks the retrieval returned
    (the one named ``retriever_name`` when several ran, else the last to finish; ids and scores
    read as in `document_to_context` with ``id_key``/``score_keys``), the question (the input
    string, or its ``input_key``/question/input/query), and the answer (as `run_pipeline` reads
    it, ``answer_key``). The request id is ``config["metadata"][request_id_key]`` when given,
    else ``config["run_id"]``, else a new UUID that also becomes the run id of its trace;
    sampling is decided by that id. ``pipeline`` names the records (default: the Runnable's name).
    """
    scorer, owns = shadow_scorer(metrics, options)
    return ShadowRunnable(
        runnable,
        scorer,
        owns_scorer=owns,
        pipeline=pipeline,
        request_id_key=request_id_key,
        answer_key=answer_key,
        input_key=input_key,
        retriever_name=retriever_name,
        id_key=id_key,
        score_keys=score_keys,
    )
