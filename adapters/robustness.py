"""Re-running a user's LangChain or LlamaIndex pipeline under a retrieval fault: what the two
adapters share, and `robust_pipeline`, which picks the adapter for an object.

Why it is built this way:

* **The fault goes where the pipeline reads its retrieval.** The harness
  (`ragbridge.core.robustness`) hands each answer a `Perturb` (live contexts -> the contexts to
  give instead). The adapters patch their framework's *base* retriever entry points
  (LangChain ``BaseRetriever.invoke``/``ainvoke``, LlamaIndex ``BaseRetriever.retrieve``/
  ``aretrieve``) for as long as at least one answer is running, so any retriever inside any
  chain or engine is reached without the user rebuilding their pipeline.
* **The perturbation in force lives in a ContextVar**, set around one answer. asyncio tasks and
  the frameworks' thread pools copy the context, so concurrent answers under *different*
  conditions each see their own; a retrieval made outside an answer sees none and runs as usual.
* **The patch is counted** (`MethodPatch`): the first answer to start installs it, the last to
  end restores the original functions, whatever the interleaving.
* **No framework is imported here**, so the CLI can import `robust_pipeline` cheaply and a user
  without one framework can still use the other; each adapter module is imported on demand.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from ragbridge.core.robustness.types import Perturb, RobustPipeline
from ragbridge.core.sample import Context, Sample

__all__ = [
    "MARKER_KEYS",
    "MethodPatch",
    "PerturbRun",
    "default_identity",
    "robust_pipeline",
]

MARKER_KEYS: tuple[str, ...] = ("robustness", "from")
"""Metadata keys the perturbation writes on an injected or changed context. They stay on the
recorded contexts but are kept out of what the pipeline's model reads, so the fault is not
announced to the generator."""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _shape(obj: Any, depth: int, seen: set[int], out: list[str]) -> None:
    """The plain settings (numbers, strings, flags) of ``obj`` and of the objects it holds, two
    levels down, with the class names of everything else: what a ``repr`` often leaves out (a
    LlamaIndex retriever's ``similarity_top_k`` behind the engine) without reading data."""
    fields = getattr(obj, "__dict__", None)
    if not isinstance(fields, dict) or id(obj) in seen:
        return
    seen.add(id(obj))
    private = getattr(obj, "__pydantic_private__", None)
    both = {**fields, **(private if isinstance(private, dict) else {})}
    for key in sorted(both):
        value = both[key]
        if value is None or isinstance(value, (bool, int, float, str)):
            out.append(f"{depth}:{key}={value!r}")
        else:
            out.append(f"{depth}:{key}:{type(value).__qualname__}")
            if depth < 2:
                _shape(value, depth + 1, seen, out)


def default_identity(obj: Any) -> str:
    """What cached answers of ``obj`` are keyed on when the caller names nothing: the class's
    qualified name and a digest of the module file that defines it, the object's ``repr``
    (memory addresses removed) and its settings two levels down (`_shape`). An edited pipeline
    module, or a pipeline built differently (another ``k``, another step), gets a new identity
    and is run again rather than served stale answers; a rebuilt but identical pipeline keeps
    its identity. Edits elsewhere (a prompt in another module) are not seen: pass
    ``identity=`` naming the version when they matter."""
    cls = type(obj)
    digest = hashlib.sha256()
    try:
        source = inspect.getsourcefile(cls)
    except TypeError:  # a built-in class has no source file
        source = None
    if source is not None:
        try:
            with open(source, "rb") as handle:
                digest.update(handle.read())
        except OSError:
            pass
    digest.update(b"\0")
    with suppress(Exception):  # a repr that fails must not stop the run; the class names it
        digest.update(_ADDRESS.sub("", repr(obj)).encode("utf-8", "replace"))
    shape: list[str] = []
    with suppress(Exception):
        _shape(obj, 0, set(), shape)
    digest.update("\n".join(shape).encode("utf-8", "replace"))
    return f"{cls.__module__}.{cls.__qualname__}@{digest.hexdigest()[:16]}"


@dataclass
class PerturbRun:
    """One answer's perturbation and what it did: the contexts each perturbed retrieval gave the
    pipeline (in the order they finished) and the names of retrievers that ran unperturbed
    because ``retriever_name`` did not match them."""

    perturb: Perturb
    retriever_name: str | None = None
    given: list[list[Context]] = field(default_factory=list)
    passed_over: list[str] = field(default_factory=list)

    def applies_to(self, name: str | None, tags: list[str]) -> bool:
        """Whether a retriever run named ``name`` with ``tags`` is the one to perturb."""
        if self.retriever_name is None:
            return True
        if name == self.retriever_name or self.retriever_name in tags:
            return True
        self.passed_over.append(name or "?")
        return False

    def apply(self, live: list[Context]) -> list[Context]:
        """``perturb`` of ``live``, recorded as what the pipeline was given."""
        given = list(self.perturb(list(live)))
        for i, item in enumerate(given):
            if not isinstance(item, Context):
                raise TypeError(
                    f"the perturbation returned a {type(item).__name__} at position {i}, "
                    "not a Context"
                )
        self.given.append(given)
        return given

    def outcome(self, retrievals_seen: int) -> tuple[list[Context] | None, dict[str, str]]:
        """The contexts to report (None: keep the pipeline's own) and what metadata must say.

        ``retrievals_seen`` is how many retrievals the adapter's capture saw under the answer.
        A perturbation that reached nothing is said, never passed off as a perturbed answer:
        a ``retriever_name`` that matched none of the retrievers that ran, or retrievals that
        bypassed the patched entry points, are an ``error`` (the answer is then not scored); no
        retrieval at all (an agent that answered without one) is a ``robustness_note``.
        """
        if self.given:
            info: dict[str, str] = {}
            if len(self.given) > 1:
                info["robustness_note"] = (
                    f"{len(self.given)} retrievals were perturbed; the contexts are those "
                    "given by the last to finish"
                )
            return self.given[-1], info
        if self.passed_over:
            seen = sorted(set(self.passed_over))
            return None, {
                "error": (
                    f"RobustnessError: retriever_name {self.retriever_name!r} matched none of "
                    f"the retrievers that ran (saw: {seen}); the perturbation was not applied"
                )
            }
        if retrievals_seen:
            return None, {
                "error": (
                    "RobustnessError: the pipeline retrieved, but not through the framework's "
                    "base retriever entry point (a retriever class overriding it?); the "
                    "perturbation was not applied"
                )
            }
        return None, {"robustness_note": "no retrieval ran: there was nothing to perturb"}

    def finish(self, out: Sample, retrievals_seen: int, *, keep_contexts: bool = False) -> Sample:
        """``out`` (the pipeline's answer under this perturbation) as the harness must see it:
        the contexts the perturbation gave (unless ``keep_contexts``: the pipeline reported
        the contexts it answered from itself) and what `outcome` says in the metadata. A
        perturbation that was not applied takes the answer away, so it is never scored as a
        perturbed one; when the pipeline failed as well, its own error stays ``error``."""
        contexts, info = self.outcome(retrievals_seen)
        metadata = dict(out.metadata)
        update: dict[str, Any] = {"metadata": metadata}
        if contexts is not None and not keep_contexts:
            update["contexts"] = contexts
        for key, value in info.items():
            if key == "error" and "error" in metadata:
                metadata["robustness_error"] = value
            else:
                metadata[key] = value
                if key == "error":
                    update["answer"] = None
        return out.model_copy(update=update)


class MethodPatch:
    """Functions on a class replaced while at least one user holds the patch.

    ``wrappers`` maps a method name to a function taking the original and returning its
    replacement. The first `applied` installs every replacement, the last to leave puts the
    originals back (the very objects found in the class's ``__dict__``), so nested and
    concurrent answers share one installation and nothing is left patched after them.
    """

    def __init__(
        self, owner: type, wrappers: Mapping[str, Callable[[Callable[..., Any]], Any]]
    ) -> None:
        self.owner = owner
        self._wrappers = dict(wrappers)
        self._lock = threading.Lock()
        self._users = 0
        self._originals: dict[str, Any] = {}

    @property
    def active(self) -> bool:
        """Whether the replacements are installed now."""
        return self._users > 0

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Hold the patch for the duration of the block."""
        with self._lock:
            if self._users == 0:
                for name, wrap in self._wrappers.items():
                    original = self.owner.__dict__[name]
                    self._originals[name] = original
                    setattr(self.owner, name, wrap(original))
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    for name, original in self._originals.items():
                        setattr(self.owner, name, original)
                    self._originals.clear()


def _is_langchain_runnable(obj: Any) -> bool:
    """A LangChain Runnable, checked without importing LangChain unless it is already loaded
    (an object of its classes cannot exist otherwise)."""
    import sys

    module = sys.modules.get("langchain_core.runnables")
    return module is not None and isinstance(obj, module.Runnable)


def _is_llamaindex_engine(obj: Any) -> bool:
    """A LlamaIndex query or chat engine, by the same rule."""
    import sys

    if sys.modules.get("llama_index.core") is None:
        return False
    from ragbridge.adapters.llamaindex import engine_kind

    try:
        engine_kind(obj)
    except TypeError:
        return False
    return True


def robust_pipeline(obj: Any, identity: str | None = None, **options: Any) -> RobustPipeline:
    """The `RobustPipeline` for ``obj``.

    An object that already is one (``identity`` and ``answer``) is returned as it is, keeping
    its own identity (``identity`` is then not used). A LangChain Runnable becomes a
    `ragbridge.adapters.langchain.robustness.LangChainRobustPipeline` (``options`` are its
    `PipelineOptions`: ``retriever_name``, ``answer_key``, ``input_key``, ``id_key``,
    ``config``), a LlamaIndex query or chat engine a
    `ragbridge.adapters.llamaindex.robustness.LlamaIndexRobustPipeline` (``use_ref_doc_id``).
    Anything else is refused with a `TypeError` naming what is accepted."""
    if isinstance(obj, RobustPipeline):
        if options:
            raise TypeError(
                f"{type(obj).__name__} is already a RobustPipeline: options belong to its own "
                f"constructor (got {sorted(options)})"
            )
        return obj
    if _is_langchain_runnable(obj):
        from ragbridge.adapters.langchain.robustness import LangChainRobustPipeline

        return LangChainRobustPipeline(obj, identity=identity, **options)
    if _is_llamaindex_engine(obj):
        from ragbridge.adapters.llamaindex.robustness import LlamaIndexRobustPipeline

        return LlamaIndexRobustPipeline(obj, identity=identity, **options)
    raise TypeError(
        "the robustness harness runs a LangChain Runnable or a LlamaIndex query/chat engine "
        f"(or any RobustPipeline), not a {type(obj).__name__}"
    )
