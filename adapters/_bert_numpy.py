"""A BERT sentence encoder in numpy: the torch-free engine of ragbridge's default embedder.

Why it exists: the default embedding model, all-MiniLM-L6-v2, is small (6 layers, hidden size
384, 22.7 M parameters), and running it through sentence-transformers means installing torch
(~2 GB) and importing it (seconds). Its forward pass is a few matrix products per layer, which
numpy hands to the same BLAS that torch would use on a CPU. So this module runs the model with
numpy alone and tokenises with the Hugging Face ``tokenizers`` package (Rust, no torch) from the
model's own ``tokenizer.json``; `ragbridge.adapters.local.LocalEmbedder` uses it by default.

What it computes is what sentence-transformers computes for the model (a ``BertModel``, then
``Pooling`` with mean tokens, then ``Normalize``), step for step:

* tokens: ``[CLS] text [SEP]``, truncated to ``max_seq_length`` tokens (specials included) as
  ``sentence_bert_config.json`` says (256 for all-MiniLM-L6-v2), lower-cased WordPiece;
* embeddings: word + position + token type 0, then LayerNorm;
* each layer (post-LayerNorm BERT, Devlin et al. 2019): multi-head self-attention with the
  padding masked out, a residual connection and LayerNorm, then a feed-forward block
  ``GELU(x W1 + b1) W2 + b2`` with the exact (erf) GELU, a residual connection and LayerNorm;
* mean of the token vectors over the attention mask, then L2 normalisation (optional).

Speed, each for a reason: texts are tokenised once, sorted by token count and batched with
texts of similar length, so little work is spent on padding; everything is float32; the query,
key and value projections are one matrix product with pre-transposed, pre-concatenated weights
(the attention scale folded into the query weights), and all heads of a batch go through one
batched matmul; no Python loop runs per token. Threads are whatever numpy's BLAS decides (a
user's ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` wins; nothing here sets them).

Loading needs neither torch nor the ``safetensors`` package: the file format is an 8-byte
little-endian header length, a JSON header (name -> dtype, shape, byte offsets) and raw
little-endian data, read with `numpy.frombuffer` and converted to float32 once.
"""

from __future__ import annotations

import importlib
import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MODEL_FILES",
    "BertConfig",
    "BertWeights",
    "LayerWeights",
    "SentenceEncoder",
    "convert_weights",
    "erf",
    "gelu",
    "mean_pool",
    "read_safetensors",
]

F32 = npt.NDArray[np.float32]

MODEL_FILES = (
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)
"""The files a model folder must hold (the layout sentence-transformers saves)."""

_DTYPES: dict[str, np.dtype[Any]] = {
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "I64": np.dtype("<i8"),
}

# Attention scores are a (batch, heads, tokens, tokens) float32 array: cap its size, so a batch
# of 256-token texts does not take hundreds of MB (64 x 12 x 256 x 256 floats = 200 MB). 4 Mi
# floats (16 MB) costs no measurable speed against 8 Mi (10 texts of 180 tokens per batch).
_MAX_SCORES = 4 * 2**20

_MASKED = np.float32(-1e9)  # added to the scores of padding keys: exp() of it is exactly 0

# Numerical Recipes' erfc Chebyshev fit (Press et al., "Numerical Recipes in C", 2nd ed. 1992,
# section 6.2, function erfcc): erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0, with
# fractional error below 1.2e-7 everywhere. P's coefficients, lowest degree first:
_ERFC_COEFFS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


_GELU_CHUNK = 32 * 1024  # elements: 4 buffers of 128 KiB stay in a core's L2 cache
_ZERO, _HALF, _ONE = np.float32(0), np.float32(0.5), np.float32(1)
_INV_SQRT2 = np.float32(1 / math.sqrt(2))


def _erfc_nonnegative(z: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """erfc(z) for z >= 0 by the Numerical Recipes fit above, in ``z``'s float dtype.

    numpy has no erf (scipy does, but is not a dependency). For z >= 0, erfc(z) <= 1, so the
    fit's fractional error bound 1.2e-7 is also an absolute bound (plus float rounding).
    """
    dtype = z.dtype.type
    t = dtype(1.0) / (dtype(1.0) + dtype(0.5) * z)
    poly = np.full_like(z, _ERFC_COEFFS[-1])
    for coefficient in reversed(_ERFC_COEFFS[:-1]):
        poly *= t
        poly += dtype(coefficient)
    poly -= z * z
    np.exp(poly, out=poly)
    poly *= t
    return poly


def erf(x: npt.ArrayLike) -> npt.NDArray[np.floating[Any]]:
    """The error function, elementwise, with absolute error <= 1.2e-7 (see `_erfc_nonnegative`).

    erf(x) = sign(x) (1 - erfc(|x|)). Keeps a float32 or float64 input's precision.
    """
    array = np.asarray(x)
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    result: npt.NDArray[np.floating[Any]] = np.sign(array) * (1 - _erfc_nonnegative(np.abs(array)))
    return result


def gelu(x: F32) -> F32:
    """The exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (Hendrycks & Gimpel 2016), in place.

    With z = |x| / sqrt 2, x Phi(x) = relu(x) - |x| erfc(z) / 2 = relu(x) - z t exp(P(t) - z^2 -
    ln sqrt 2) by the fit above, so only erfc of a non-negative number is needed and the
    constant factor folds into the exponent. The GELU of the feed-forward block is the
    largest elementwise job of the forward pass (~30 numpy operations per element, single
    threaded: about a quarter of the encode time, as much as the matrix product before it), so
    it runs over chunks small enough to stay in the CPU cache, with four preallocated buffers
    and no temporary arrays. Overwrites and returns ``x`` (float32, C-contiguous).
    """
    if not x.flags.c_contiguous:
        raise ValueError("gelu works in place on a C-contiguous array")
    flat = x.reshape(-1)  # a view, since x is contiguous
    size = min(_GELU_CHUNK, flat.size)
    z_buffer, t_buffer, p_buffer, q_buffer = np.empty((4, size), dtype=np.float32)
    c0 = np.float32(_ERFC_COEFFS[0] - math.log(math.sqrt(2)))
    rest = [np.float32(c) for c in reversed(_ERFC_COEFFS[1:-1])]
    top = np.float32(_ERFC_COEFFS[-1])
    for start in range(0, flat.size, size):
        xs = flat[start : start + size]
        z, t, p, q = (
            z_buffer[: xs.size],
            t_buffer[: xs.size],
            p_buffer[: xs.size],
            q_buffer[: xs.size],
        )
        np.abs(xs, out=z)
        z *= _INV_SQRT2
        np.multiply(z, _HALF, out=t)
        t += _ONE
        np.reciprocal(t, out=t)
        np.multiply(t, top, out=p)
        for coefficient in rest:
            p += coefficient
            p *= t
        p += c0
        np.multiply(z, z, out=q)
        p -= q
        np.exp(p, out=p)
        p *= t
        p *= z
        np.maximum(xs, _ZERO, out=xs)
        xs -= p
    return x


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file as read-only numpy arrays (F16, F32 and I64).

    Format (https://github.com/huggingface/safetensors): 8 bytes little-endian unsigned header
    length N, N bytes of JSON mapping each name to ``dtype``, ``shape`` and ``data_offsets``
    (relative to the end of the header), then the data.
    """
    data = path.read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path} is not a safetensors file (too short)")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        raise ValueError(f"{path} is not a safetensors file (header length {length})")
    header: dict[str, Any] = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(
                f"{path}: tensor {name} has dtype {info['dtype']}; F16, F32 or I64 only"
            )
        start, end = info["data_offsets"]
        shape = tuple(int(n) for n in info["shape"])
        count = math.prod(shape)
        if end - start != count * dtype.itemsize or base + end > len(data):
            raise ValueError(f"{path}: tensor {name} has inconsistent offsets")
        tensors[name] = np.frombuffer(data, dtype=dtype, count=count, offset=base + start).reshape(
            shape
        )
    return tensors


@dataclass(frozen=True)
class BertConfig:
    """The architecture numbers the forward pass needs, from the model's ``config.json``."""

    hidden_size: int
    num_heads: int
    num_layers: int
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read ``config.json``; refuse what this forward pass does not implement."""
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("model_type") != "bert" or raw.get("hidden_act") != "gelu":
            raise ValueError(
                f"{path}: a BERT model with exact GELU is needed, got model_type="
                f"{raw.get('model_type')!r}, hidden_act={raw.get('hidden_act')!r}"
            )
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are implemented")
        return cls(
            hidden_size=int(raw["hidden_size"]),
            num_heads=int(raw["num_attention_heads"]),
            num_layers=int(raw["num_hidden_layers"]),
            layer_norm_eps=float(raw["layer_norm_eps"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
        )


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer's weights, float32, matrices transposed to (in, out) for ``x @ w``."""

    qkv: F32  # (hidden, 3 hidden): query (pre-scaled by 1/sqrt(head size)), key, value
    qkv_bias: F32
    out: F32
    out_bias: F32
    norm1: tuple[F32, F32]
    up: F32
    up_bias: F32
    down: F32
    down_bias: F32
    norm2: tuple[F32, F32]


@dataclass(frozen=True)
class BertWeights:
    """All weights of the encoder, float32, in the layout `convert_weights` describes."""

    words: F32  # (vocabulary, hidden)
    positions: F32  # (max positions, hidden), token type 0 added in
    embedding_norm: tuple[F32, F32]
    layers: tuple[LayerWeights, ...]


def convert_weights(
    raw: dict[str, npt.NDArray[Any]], config: BertConfig, source: Path
) -> BertWeights:
    """Convert a BERT checkpoint to float32 once, transpose the matrices, fuse q/k/v.

    Every backend that runs the vendored weights starts from this one conversion, so they all
    compute with the same float32 numbers: the query, key and value projections become one
    (hidden, 3 hidden) matrix, the attention scale 1/sqrt(head size) is folded into the query
    weights, and token type 0 (every text is a single segment) is folded into the position
    table. ``source`` names the file in errors. Accepts names with or without ``bert.``.
    """
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""

    def get(name: str) -> F32:
        key = prefix + name
        if key not in raw:
            raise ValueError(f"{source} has no tensor {key}")
        return np.ascontiguousarray(raw[key], dtype=np.float32)

    def linear(name: str) -> tuple[F32, F32]:
        return np.ascontiguousarray(get(f"{name}.weight").T), get(f"{name}.bias")

    positions = get("embeddings.position_embeddings.weight")
    scale = np.float32(1 / math.sqrt(config.hidden_size // config.num_heads))
    layers = []
    for i in range(config.num_layers):
        at = f"encoder.layer.{i}"
        q, q_bias = linear(f"{at}.attention.self.query")
        k, k_bias = linear(f"{at}.attention.self.key")
        v, v_bias = linear(f"{at}.attention.self.value")
        out, out_bias = linear(f"{at}.attention.output.dense")
        up, up_bias = linear(f"{at}.intermediate.dense")
        down, down_bias = linear(f"{at}.output.dense")
        layers.append(
            LayerWeights(
                qkv=np.ascontiguousarray(np.concatenate([q * scale, k, v], axis=1)),
                qkv_bias=np.concatenate([q_bias * scale, k_bias, v_bias]),
                out=out,
                out_bias=out_bias,
                norm1=(
                    get(f"{at}.attention.output.LayerNorm.weight"),
                    get(f"{at}.attention.output.LayerNorm.bias"),
                ),
                up=up,
                up_bias=up_bias,
                down=down,
                down_bias=down_bias,
                norm2=(
                    get(f"{at}.output.LayerNorm.weight"),
                    get(f"{at}.output.LayerNorm.bias"),
                ),
            )
        )
    return BertWeights(
        words=get("embeddings.word_embeddings.weight"),
        positions=positions + get("embeddings.token_type_embeddings.weight")[0],
        embedding_norm=(get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias")),
        layers=tuple(layers),
    )


def mean_pool(tokens: F32, mask: F32) -> F32:
    """Mean of the token vectors over the attention mask: (batch, tokens, hidden) -> (batch,
    hidden), as sentence-transformers' ``Pooling`` (mean tokens, count clamped at 1e-9)."""
    summed = np.einsum("bth,bt->bh", tokens, mask)
    counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    pooled: F32 = summed / counts
    return pooled


def _affine(x: F32, weight: F32, bias: F32) -> F32:
    """``x @ weight + bias``, the bias added in place (float32 stays float32)."""
    out = np.matmul(x, weight)
    out += bias
    return out.astype(np.float32, copy=False)


def _layer_norm(x: F32, scale: F32, shift: F32, eps: float) -> F32:
    """LayerNorm over the last axis (biased variance, as torch), in place."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
    x *= 1 / np.sqrt(variance + np.float32(eps))
    x *= scale
    x += shift
    return x


class SentenceEncoder:
    """A sentence-transformers BERT model with mean pooling (all-MiniLM-L6-v2), run by numpy.

    ``folder`` holds `MODEL_FILES`. Loading reads and converts the weights once (~0.2 s for
    all-MiniLM-L6-v2) and needs ``tokenizers`` (imported here, not at module import). Raises
    FileNotFoundError naming the first missing file, ValueError for a model this forward pass
    does not implement. Not thread-safe: `encode` from one thread at a time (the tokenizer
    is not safe to share between threads either).
    """

    max_batch_tokens: int | None = None
    """At most this many tokens (padding included) per forward pass, whatever ``batch_size``
    says; None: no limit but the attention scores' (``_MAX_SCORES``). A subclass whose engine
    runs faster on smaller batches sets it (`._bert_onnx`)."""

    def __init__(self, folder: Path) -> None:
        for name in MODEL_FILES:
            if not (folder / name).is_file():
                raise FileNotFoundError(f"the model file {folder / name} is missing")
        self.folder = folder
        self.config = BertConfig.from_file(folder / "config.json")
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
        if modes != ["pooling_mode_mean_tokens"]:
            raise ValueError(f"{folder}: only mean pooling is implemented, the model uses {modes}")
        st_config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.max_seq_length = min(
            int(st_config["max_seq_length"]), self.config.max_position_embeddings
        )
        self._tokenizer = self._load_tokenizer(folder / "tokenizer.json")
        self._load_weights(read_safetensors(folder / "model.safetensors"))

    @property
    def dimension(self) -> int:
        """The length of one sentence vector."""
        return self.config.hidden_size

    def _load_tokenizer(self, path: Path) -> Any:
        """The model's fast tokenizer: no padding (batches are padded here), truncation on.

        The shipped ``tokenizer.json`` pads and truncates to 128 tokens; sentence-transformers
        overrides that with ``max_seq_length``, and so does this.
        """
        # import_module: tokenizers is optional, and mypy must pass on an install without it.
        tokenizers = importlib.import_module("tokenizers")
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        return tokenizer

    def _load_weights(self, raw: dict[str, npt.NDArray[Any]]) -> None:
        """Keep the float32 weights for `_forward` (`convert_weights`); subclasses that run the
        model elsewhere override this and `_forward`."""
        self._weights = convert_weights(raw, self.config, self.folder / "model.safetensors")

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, ``[CLS] ... [SEP]``, truncated to ``max_seq_length``."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        return [encoding.ids for encoding in encodings]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, normalize: bool = True) -> F32:
        """One float32 row per text, in order: mean-pooled, unit length if ``normalize``.

        Texts are sorted by token count and cut into batches of at most ``batch_size`` (fewer
        for long texts, see ``_MAX_SCORES`` and ``max_batch_tokens``), each padded to its own
        longest text.
        """
        ids = self.tokenize(texts)
        result = np.empty((len(ids), self.dimension), dtype=np.float32)
        lengths = np.array([len(row) for row in ids], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        heads = self.config.num_heads
        start = 0
        while start < len(order):
            longest_allowed = int(lengths[order[min(start + batch_size, len(order)) - 1]])
            fit = max(1, _MAX_SCORES // (heads * longest_allowed * longest_allowed))
            if self.max_batch_tokens is not None:
                fit = min(fit, max(1, self.max_batch_tokens // longest_allowed))
            chosen = order[start : start + min(batch_size, fit)]
            width = int(lengths[chosen[-1]])  # sorted: the last is the longest
            batch = np.zeros((len(chosen), width), dtype=np.int64)
            mask = np.zeros((len(chosen), width), dtype=np.float32)
            for row, index in enumerate(chosen):
                n = int(lengths[index])
                batch[row, :n] = ids[index]
                mask[row, :n] = 1
            result[chosen] = self._forward(batch, mask)
            start += len(chosen)
        if normalize:
            norms = np.linalg.norm(result, axis=1, keepdims=True)
            result /= np.maximum(norms, np.float32(1e-12))  # torch.nn.functional.normalize's eps
        return result

    def _forward(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        """Mean-pooled last hidden states of a padded batch: (batch, tokens) -> (batch, hidden)."""
        config = self.config
        batch, width = ids.shape
        hidden, heads = config.hidden_size, config.num_heads
        head_size = hidden // heads
        eps = config.layer_norm_eps
        weights = self._weights
        x = weights.words[ids.reshape(-1)]
        x += np.tile(weights.positions[:width], (batch, 1))
        _layer_norm(x, *weights.embedding_norm, eps)
        key_bias = ((1 - mask) * _MASKED)[:, None, None, :]  # (batch, 1, 1, keys)
        for layer in weights.layers:
            qkv = _affine(x, layer.qkv, layer.qkv_bias)
            # (batch*tokens, 3*hidden) -> q, v: (batch, heads, tokens, head_size), k transposed:
            # (batch, heads, head_size, tokens). Contiguous copies: a batched matmul over
            # strided views is up to 10x slower (BLAS threads work on tiny strided blocks).
            split = qkv.reshape(batch, width, 3, heads, head_size)
            q = np.ascontiguousarray(split[:, :, 0].transpose(0, 2, 1, 3))
            k_t = np.ascontiguousarray(split[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(split[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k_t  # (batch, heads, tokens, tokens): all heads in one matmul
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * width, hidden)
            attended = _affine(context, layer.out, layer.out_bias)
            attended += x
            x = _layer_norm(attended, *layer.norm1, eps)
            inner = gelu(_affine(x, layer.up, layer.up_bias))
            outer = _affine(inner, layer.down, layer.down_bias)
            outer += x
            x = _layer_norm(outer, *layer.norm2, eps)
        return mean_pool(x.reshape(batch, width, hidden), mask)
