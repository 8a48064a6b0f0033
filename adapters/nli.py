"""`NLIModel`: an MNLI-style cross-encoder on this machine, as ragbridge's `EntailmentModel`.

The ``nli`` provider of faithfulness and hallucination (`ragbridge.core.metrics.providers.nli`)
needs a model that reads a (premise, hypothesis) pair and gives P(entailment), P(neutral),
P(contradiction). This module wraps any transformers sequence-classification checkpoint trained
that way (``cross-encoder/nli-deberta-v3-base``, ``MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli``,
...).
This module only loads and runs the model; the measures are implemented once, in the core:
``Faithfulness(provider="nli")`` / ``Hallucination(provider="nli")`` (by name
``"faithfulness:nli"``, ``"hallucination:nli"``) with ``evaluate(..., nli=NLIModel(path))``.

Design choices, each for a reason:

* **Lazy imports.** Importing this module imports neither torch nor transformers. Constructing an
  `NLIModel` only checks that they are installed (an ImportError naming ``pip install ".[nli]"``,
  run in your ragbridge clone, otherwise); the model loads on the first `NLIModel.predict` (or
  `NLIModel.load`), once, under a lock.
* **Hub disabled.** Weights are never downloaded: ``local_files_only=True`` on every load, and
  ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` are set with ``os.environ.setdefault`` (a value
  the user set wins). A model that is neither a folder nor in the Hugging Face cache raises
  `NLIModelNotFoundError`, naming the model and how to get it.
* **Labels come from the checkpoint.** Label order differs between NLI checkpoints (the
  cross-encoder models put contradiction first, MoritzLaurer's put entailment first), so the
  columns are mapped through ``config.id2label``: case-insensitive names containing "entail",
  "neutral" and "contradict". Hard-coding an order is the classic silent bug of NLI metrics.
  Anything else (``LABEL_0``, a 1-logit score model) is refused with a ValueError listing the
  labels the model has.
* **Two-label models** (``entailment`` / ``not_entailment``, e.g. the ``...-2c`` checkpoints):
  ``neutral = P(not_entailment)`` and ``contradiction = 0``. "Not entailed" lumps neutral and
  contradicted together; reporting it as contradiction would invent contradictions the model never
  asserted. ``detects_contradiction`` is False for them once loaded: faithfulness
  (entailment-based) is unaffected, and the core's hallucination measure (contradiction-based)
  refuses such a model with a typed failure instead of silently scoring 0.
* **Truncation.** Each pair is ``[CLS] premise [SEP] hypothesis [SEP]``, cut to ``max_length``
  tokens by shortening the premise (the retrieved context) only, so the claim under test is kept
  whole; a claim that alone exceeds the budget falls back to shortening both.
* **One forward at a time, in a worker thread.** Inference runs in ``asyncio.to_thread`` so the
  event loop keeps serving judge calls; forwards are serialised (a fast tokenizer is not
  thread-safe — "Already borrowed" — and torch already uses every core for one batch). Waiting
  callers queue on an asyncio lock of their own loop, holding no worker thread.
* **Repeated pairs are free.** Faithfulness and hallucination of one sample ask about the same
  (context, sentence) pairs; a bounded memo (``cache_size`` pairs, keyed by a hash of the pair)
  answers the second request without a forward pass.

Probabilities are ``softmax(logits)`` over the model's classes: they sum to 1 (up to float32
rounding), which is what the `Entailment` contract promises.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbridge.adapters._extras import install_hint, missing_extra, require
from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters._hub import disable_hub, quiet_model_loading
from ragbridge.adapters._hub import installed as _installed
from ragbridge.adapters._loaded_once import LoadedOnce
from ragbridge.core.judging.judge import Entailment

quiet_frameworks()  # before transformers is imported (lazily, on the first load)

__all__ = [
    "INSTALL_HINT",
    "NLIModel",
    "NLIModelNotFoundError",
]

INSTALL_HINT = install_hint("nli")
"""What to run when the ``nli`` extra is missing."""

_NOT_ENTAILMENT = re.compile(r"(^|[^a-z])(not|non)[^a-z]?entail")


class NLIModelNotFoundError(FileNotFoundError):
    """The NLI model is not on this machine, and ragbridge never downloads weights."""


@dataclass(frozen=True)
class _Columns:
    """Which logit column holds which class (``not_entailment`` only for 2-label models)."""

    entailment: int
    neutral: int | None = None
    contradiction: int | None = None
    not_entailment: int | None = None

    def read(self, probs: Sequence[float]) -> Entailment:
        if self.not_entailment is not None:
            return Entailment(
                entailment=float(probs[self.entailment]),
                neutral=float(probs[self.not_entailment]),
                contradiction=0.0,
            )
        assert self.neutral is not None
        assert self.contradiction is not None
        return Entailment(
            entailment=float(probs[self.entailment]),
            neutral=float(probs[self.neutral]),
            contradiction=float(probs[self.contradiction]),
        )


def _role(label: str) -> str | None:
    name = label.strip().lower()
    if "contradict" in name:
        return "contradiction"
    if "neutral" in name:
        return "neutral"
    if "entail" in name:
        return "not_entailment" if _NOT_ENTAILMENT.search(name) else "entailment"
    return None


def _columns(id2label: Mapping[Any, str], model: str) -> _Columns:
    """Map ``config.id2label`` to NLI roles; ValueError naming the labels when that fails."""
    labels = {int(k): str(v) for k, v in id2label.items()}
    roles: dict[str, list[int]] = {}
    for index, label in sorted(labels.items()):
        role = _role(label)
        roles.setdefault(role or "?", []).append(index)
    found = {role: ids[0] for role, ids in roles.items() if len(ids) == 1 and role != "?"}
    three = {"entailment", "neutral", "contradiction"}
    two = {"entailment", "not_entailment"}
    if len(labels) == 3 and set(found) == three:
        return _Columns(found["entailment"], found["neutral"], found["contradiction"])
    if len(labels) == 2 and set(found) == two:
        return _Columns(found["entailment"], not_entailment=found["not_entailment"])
    raise ValueError(
        f"{model!r} is not an MNLI-style NLI classifier: its labels (config.id2label) are "
        f"{labels}; NLIModel needs three labels named like entailment / neutral / contradiction "
        "(any order, any case) or two named entailment / not_entailment"
    )


def _pair_key(premise: str, hypothesis: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(premise.encode("utf-8", "surrogatepass"))
    h.update(b"\x00\x01")
    h.update(hypothesis.encode("utf-8", "surrogatepass"))
    return h.digest()


class NLIModel:
    """An offline `EntailmentModel`: a transformers sequence-classification NLI cross-encoder.

    ``model`` is a model folder or a Hugging Face model id already in the local cache (never
    downloaded). ``device`` is a torch device string; ``batch_size`` the pairs per forward pass;
    ``max_length`` the token budget of one pair (capped by the tokenizer's own maximum);
    ``cache_size`` the number of (premise, hypothesis) results remembered (0 disables).

    The ``model`` attribute is the name or path given, as a string. After loading,
    ``labels`` holds the checkpoint's ``id2label`` and ``detects_contradiction`` says whether it
    has a contradiction class (False for two-label models, None before loading).
    """

    model: str

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        device: str = "cpu",
        batch_size: int = 16,
        max_length: int = 512,
        cache_size: int = 4096,
    ) -> None:
        """Check the extra is installed and remember the settings; nothing heavy happens yet."""
        for arg, value, low in (
            ("batch_size", batch_size, 1),
            ("max_length", max_length, 8),
            ("cache_size", cache_size, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{arg} must be an integer >= {low}, got {value!r}")
        name = os.fspath(model)
        if not isinstance(name, str) or not name:
            raise ValueError("model must be a model folder or a Hugging Face model id")
        disable_hub()
        missing = [pkg for pkg in ("torch", "transformers") if not _installed(pkg)]
        if missing:
            raise missing_extra("NLIModel", " and ".join(missing), "nli")
        self.model = name
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache_size = cache_size
        self.labels: dict[int, str] | None = None
        self.detects_contradiction: bool | None = None
        self._loader: LoadedOnce[tuple[Any, Any, Any, _Columns, int]] = LoadedOnce(self._build)
        self._infer_lock = threading.Lock()
        self._memo: OrderedDict[bytes, Entailment] = OrderedDict()

    def __repr__(self) -> str:
        return (
            f"NLIModel(model={self.model!r}, device={self.device!r}, "
            f"batch_size={self.batch_size}, max_length={self.max_length})"
        )

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (it loads on the first predict or `load`)."""
        return self._loader.loaded

    def load(self) -> NLIModel:
        """Load and check the model now (blocking) rather than on the first `predict`.

        Fails early on a missing model or a checkpoint that is not an NLI classifier, instead of
        turning every cell of a run into a failure. Safe to call again; returns ``self``.
        """
        self._components()
        return self

    def _components(self) -> tuple[Any, Any, Any, _Columns, int]:
        """(torch, tokenizer, model, columns, max_length); the first caller loads, others wait."""
        return self._loader.get()

    def _build(self) -> tuple[Any, Any, Any, _Columns, int]:
        disable_hub()
        torch = require("torch", extra="nli", what="NLIModel")
        transformers = require("transformers", extra="nli", what="NLIModel")
        try:
            config = transformers.AutoConfig.from_pretrained(self.model, local_files_only=True)
        except (OSError, ValueError) as exc:
            # OSError: no such folder / not in the cache; ValueError: huggingface_hub's
            # HFValidationError for a string that is neither a path nor a valid repo id.
            raise _not_found(self.model, exc) from None
        columns = _columns(config.id2label or {}, self.model)
        try:
            with quiet_model_loading():  # no "Loading weights" bar on the user's stderr
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    self.model, local_files_only=True
                )
                network = transformers.AutoModelForSequenceClassification.from_pretrained(
                    self.model, local_files_only=True
                )
        except OSError as exc:
            raise _not_found(self.model, exc) from None
        network.to(self.device)
        network.eval()
        limit = self.max_length
        model_max = getattr(tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < limit:
            limit = model_max
        self.labels = {int(k): str(v) for k, v in config.id2label.items()}
        self.detects_contradiction = columns.contradiction is not None
        return torch, tokenizer, network, columns, limit

    def _forward(self, pairs: list[tuple[str, str]]) -> list[Entailment]:
        torch, tokenizer, network, columns, limit = self._components()
        premises = [p for p, _ in pairs]
        hypotheses = [h for _, h in pairs]
        common = {"padding": True, "max_length": limit, "return_tensors": "pt"}
        try:
            batch = tokenizer(premises, hypotheses, truncation="only_first", **common)
        except Exception:  # a hypothesis longer than the budget on its own
            batch = tokenizer(premises, hypotheses, truncation="longest_first", **common)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            logits = network(**batch).logits
        probs = torch.softmax(logits.float(), dim=-1).cpu().tolist()
        return [columns.read(row) for row in probs]

    def _predict_blocking(self, pairs: list[tuple[str, str]]) -> list[Entailment]:
        """Blocking: load if needed, answer repeats from the memo, run the rest in batches."""
        self._components()
        with self._infer_lock:
            keys = [_pair_key(p, h) for p, h in pairs]
            results: list[Entailment | None] = [self._memo.get(k) for k in keys]
            todo = [i for i, r in enumerate(results) if r is None]
            for start in range(0, len(todo), self.batch_size):
                chunk = todo[start : start + self.batch_size]
                for i, scored in zip(chunk, self._forward([pairs[i] for i in chunk]), strict=True):
                    results[i] = scored
            if self.cache_size:
                for key, result in zip(keys, results, strict=True):
                    assert result is not None
                    self._memo[key] = result
                    self._memo.move_to_end(key)
                while len(self._memo) > self.cache_size:
                    self._memo.popitem(last=False)
        return [r for r in results if r is not None]

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        """One `Entailment` per (premise, hypothesis) pair, in order; ``[]`` for no pairs.

        The model loads on the first call; the work runs in a worker thread.
        """
        batch = list(pairs)
        for i, pair in enumerate(batch):
            if (
                not isinstance(pair, tuple)
                or len(pair) != 2
                or not all(isinstance(t, str) for t in pair)
            ):
                raise TypeError(f"pair #{i} must be a (premise, hypothesis) tuple of str")
        if not batch:
            return []
        return await self._loader.in_thread(self._predict_blocking, batch)


def _not_found(name: str, exc: BaseException) -> NLIModelNotFoundError:
    text = str(exc).strip()
    first_line = text.splitlines()[0] if text else type(exc).__name__
    if Path(name).expanduser().exists() or name.startswith(("/", ".", "~")):
        how = "no transformers checkpoint could be loaded from that folder (config.json needed)"
    else:
        how = (
            "it is neither a local folder nor in the Hugging Face cache, and ragbridge never "
            f"downloads weights. Fetch it once where there is internet (`hf download {name}`), "
            "or save it with save_pretrained() and pass the folder"
        )
    return NLIModelNotFoundError(
        f"NLI model {name!r} is not available locally: {how}. (Loader said: {first_line})"
    )
