"""Capturing what any Runnable retrieved, by callbacks: `RetrievalCapture` and `capture_retrievals`.

Why it is built this way:

* **Capture by callbacks, not by wrapping.** A retriever can sit anywhere inside a user's chain
  (LCEL, a tool of an agent, a sub-chain). `RetrievalCapture` is a callback handler: it records
  every ``on_retriever_*`` event and the parent of every chain/tool/model run, and groups
  retrievals by the *top-level* run they belong to by walking parent run ids. Nothing in the
  chain changes.
* **Grouping by root run id, resolved late.** Under ``batch``/``abatch`` and concurrent
  ``ainvoke`` many invocations interleave; each has its own root run id, so walking parents is
  exact whatever the interleaving. Roots are resolved when asked for (not when an event arrives),
  so the order in which callbacks happen to be delivered from worker threads does not matter.
* **Thread-safe.** LangChain calls sync handlers from executor threads; one lock guards all state.
* **No-change capture.** `capture_retrievals` registers a handler through LangChain's configure
  hook and a ContextVar, so ``with capture_retrievals() as cap: chain.invoke(q)`` works with a
  chain the user cannot (or does not want to) pass callbacks to. The hook holds one capture, so
  a nested block's capture passes every event it handles on to the enclosing one
  (`_passed_outward`, written once for all of them).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, cast
from uuid import UUID

from ragbridge.core.sample import Context

from ._framework import BaseCallbackHandler, Document, register_configure_hook
from .documents import DEFAULT_SCORE_KEYS, document_to_context

__all__ = [
    "FROM_CAPTURE",
    "Retrieval",
    "RetrievalCapture",
    "capture_retrievals",
    "choose_retrieval",
]


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


_Args = ParamSpec("_Args")


def _passed_outward(record: Callable[_Args, None]) -> Callable[_Args, None]:
    """The callback method ``record``, then the same event handed on, arguments unchanged, to
    the enclosing captures (``_forward``): a nested `capture_retrievals` block's capture is the
    one LangChain calls, and the enclosing block must see the same events.

    LangChain calls a handler's ``on_*`` methods by name with the arguments it has (see
    ``langchain_core.callbacks.manager.handle_event``), so the event handed on is the method of
    the same name, called with the same arguments.
    """
    name = record.__name__

    @functools.wraps(record)
    def record_and_pass(*args: _Args.args, **kwargs: _Args.kwargs) -> None:
        record(*args, **kwargs)
        handler, event_args = cast(RetrievalCapture, args[0]), args[1:]
        for other in handler._forward:
            getattr(other, name)(*event_args, **kwargs)

    return record_and_pass


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
    # Only the events below are handled (and passed outward); the rest are BaseCallbackHandler's
    # no-ops. Chain and tool starts give the parent links (a retriever wrapped as an agent tool
    # nests under the tool run); model starts also give the generating model's name.

    def _parent(self, run_id: UUID, parent_run_id: UUID | None, inputs: Any = None) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
            if parent_run_id is None and inputs is not None:
                self._root_inputs[run_id] = inputs

    # LangChain passes the first arguments positionally and the rest (parent_run_id, tags,
    # metadata, invocation_params, ...) by keyword, the set varying by event and version.

    @_passed_outward
    def on_chain_start(
        self, serialized: dict[str, Any], inputs: dict[str, Any], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._parent(run_id, kwargs.get("parent_run_id"), inputs)

    @_passed_outward
    def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._parent(run_id, kwargs.get("parent_run_id"), input_str)

    @_passed_outward
    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._model_start(run_id, kwargs)

    @_passed_outward
    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._model_start(run_id, kwargs)

    def _model_start(self, run_id: UUID, kwargs: dict[str, Any]) -> None:
        # The generating model's name, so a judge of the same model can be warned about: LangChain
        # puts it in ls_model_name; older integrations only in the invocation params.
        params = kwargs.get("invocation_params") or {}
        name = (kwargs.get("metadata") or {}).get("ls_model_name") or next(
            (params[k] for k in ("model", "model_name", "model_id") if params.get(k)), None
        )
        with self._lock:
            self._parents[run_id] = kwargs.get("parent_run_id")
            if name:
                self._models[run_id] = str(name)

    def models_for(self, root_run_id: UUID) -> list[str]:
        """Names of the chat models / LLMs that ran under one top-level invocation, in order."""
        with self._lock:
            names = [m for run, m in self._models.items() if self._root_of(run) == root_run_id]
        return list(dict.fromkeys(names))

    @_passed_outward
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

    @_passed_outward
    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._retrieval_ended(run_id, documents=list(documents))

    @_passed_outward
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._retrieval_ended(run_id, error=error)

    def _retrieval_ended(
        self,
        run_id: UUID,
        documents: list[Document] | None = None,
        error: BaseException | None = None,
    ) -> None:
        with self._lock:
            record = self._retrievals.get(run_id)
            if record is None:
                return
            record.ended = time.perf_counter()
            if error is not None:
                record.error = error
            else:
                record.documents = documents
                record.end_seq = next(self._seq)

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
        return choose_retrieval(self.for_root(root_run_id), retriever_name)

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


def choose_retrieval(
    found: list[Retrieval], retriever_name: str | None
) -> tuple[Retrieval | None, dict[str, Any]]:
    """`RetrievalCapture.select` over the retrievals of one invocation (also what a
    shadow-scored request is scored on)."""
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
