"""The numpy BERT encoder's forward pass as an ONNX graph, run by ONNX Runtime.

Why it exists: `._bert_numpy` runs all-MiniLM-L6-v2 without torch, but numpy calls one
operation at a time: every elementwise step (GELU, LayerNorm, softmax, bias adds) is a separate
single-threaded pass over memory, and the GELU alone, with no ``erf`` in numpy, costs about a
quarter of an encode. ONNX Runtime runs the whole graph in C++ on its own thread pool, fuses the
bias add and the erf GELU into one kernel (``BiasGelu``) and does the matrix products with its
own MLAS kernels. Measured on 2 cores (``benchmarks/embedder_fidelity.py``): ~1.65x the numpy
forward pass's sentences per second, as many as sentence-transformers on torch for short
sentences and 7-15% more for ~120-word texts; in ``benchmarks/offline_speed.py`` (``evaluate``
with the four offline metrics, where the encode shares the CPU with the metrics' own Python
code) 29 samples/s cold against numpy's 18 and torch's 25 on one 2-core machine (11-12 for onnx
on a slower one, where the model is about 85% of the time). The wheels (onnxruntime and onnx)
take ~115 MB instead of torch's ~2 GB; the load takes ~0.3 s instead of torch's ~4 s.

No ONNX file ships with ragbridge and none exists on the package index for this model: the
graph is built here, in memory, at load time, with the ``onnx`` package's helpers, from the same
vendored float16 safetensors the numpy backend reads (`._bert_numpy.convert_weights`: converted
to float32 once, query, key and value fused, the attention scale folded into the query weights,
token type 0 folded into the position table). So both backends compute with identical float32
weights, and the graph is, step for step, `SentenceEncoder._forward`:

* embeddings: ``Gather`` of the word vectors + the first ``tokens`` rows of the position table
  (``Slice`` up to the input's width), then ``LayerNormalization`` (opset 17);
* per layer: one ``MatMul`` + ``Add`` for q, k and v, ``Reshape``/``Transpose`` to
  (3, batch, heads, tokens, head size), ``Gather`` of q, k and v, the scores ``q @ k^T`` (no
  scaling node: it is in the query weights) plus the additive padding mask, ``Softmax``, the
  context ``MatMul``, back to (batch, tokens, hidden), the output projection, residual +
  ``LayerNormalization``, then the feed-forward block with the exact GELU written as
  ``x (1 + erf(x / sqrt 2)) / 2`` (``Erf``: the pattern ONNX Runtime fuses), residual +
  ``LayerNormalization``;
* output: the last hidden state, (batch, tokens, hidden). Mean pooling and normalisation stay
  in `._bert_numpy` (`mean_pool`, `SentenceEncoder.encode`), as do tokenising, sorting texts
  by length and batching: `OnnxSentenceEncoder` only replaces how the weights are held and how
  one padded batch is run, so there is one implementation of everything else.

Standard operators only, on purpose: ORT's own fused contrib operators (``Attention``,
``SkipLayerNormalization``), written into the graph directly, measured 8-12% *slower* on the
offline metrics' short sentences. Nor does ORT fuse those itself in this graph (its
residual + LayerNorm fusion wants a static sequence length; nothing matched its attention
fusion): what it fuses here is the bias add + GELU.

Opset 17 and IR version 8 are the oldest that have ``LayerNormalization``, so any onnxruntime
the ``local`` extra allows loads the graph (checked with onnxruntime 1.19 and onnx 1.17, the
extra's minimum, and 1.32 / 1.23). Graph optimisations are on at the highest level
(``ORT_ENABLE_ALL``, ORT's default, set explicitly so it is not lost by accident).

Threads: ONNX Runtime's own pool, one thread per physical core by default. ORT does not read
``OMP_NUM_THREADS``, so, as for numpy's BLAS, a user's ``OMP_NUM_THREADS`` is passed on here
explicitly (as ``intra_op_num_threads``); nothing else sets a count.

``onnx`` and ``onnxruntime`` are imported with `importlib.import_module` when a model is
built, not at module import: they are optional (the ``local`` extra) and mypy must pass on an
installation without them. ``ORT_DISABLE_TELEMETRY=1`` is set (unless the user set it) right
before onnxruntime is imported: from 1.29 on, that import starts ONNX Runtime's native usage
telemetry otherwise (`._hub.disable_runtime_telemetry` says what it does and why it must be
that early).
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any

import numpy as np
import numpy.typing as npt

from ragbridge.adapters._bert_numpy import (
    F32,
    BertConfig,
    BertWeights,
    SentenceEncoder,
    convert_weights,
    mean_pool,
)
from ragbridge.adapters._hub import disable_runtime_telemetry

__all__ = ["OPSET", "OnnxSentenceEncoder", "build_model", "make_session"]

OPSET = 17
"""The ONNX operator set of the graph: the first with ``LayerNormalization``."""

_IR_VERSION = 8  # the IR version that goes with opset 17 (onnx 1.12); newer runtimes read it too

_MASKED = -1e9  # added to the scores of padding keys, as `._bert_numpy` does


class _GraphBuilder:
    """Collects the nodes and initializers of a graph; names node outputs uniquely."""

    def __init__(self, onnx: Any) -> None:
        self.onnx = onnx
        self.helper = onnx.helper
        self.numpy_helper = onnx.numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.external: dict[str, F32] = {}
        self._count = 0

    def constant(self, name: str, value: npt.ArrayLike, dtype: type[np.generic]) -> str:
        """Add a small initializer (a shape, an index, a scalar) and return its name."""
        # np.array, not np.ascontiguousarray: the latter turns a scalar into shape (1,).
        array = np.array(value, dtype=dtype, order="C")
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name

    def weight(self, name: str, value: F32) -> str:
        """Add a float32 weight as an external initializer: the model declares only its name,
        type and shape, and `make_session` hands ONNX Runtime the numpy array itself. The 91 MB
        of weights are then copied once (into the session) instead of also into the protobuf,
        into its serialized bytes and out of them again: building and opening the session
        takes ~0.07 s instead of ~0.37 s (measured), with a lower peak of memory."""
        tensor = self.onnx.TensorProto()
        tensor.name = name
        tensor.data_type = self.onnx.TensorProto.FLOAT
        tensor.dims.extend(value.shape)
        tensor.data_location = self.onnx.TensorProto.EXTERNAL
        for key, text in (("location", "supplied-at-load-time"), ("length", str(value.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, text
        self.initializers.append(tensor)
        self.external[name] = np.ascontiguousarray(value, dtype=np.float32)
        return name

    def affine(self, x: str, name: str, matrix: F32, bias: F32) -> str:
        """``x @ matrix + bias`` (``MatMul`` then ``Add``: ORT handles a 3-D ``x`` that way)."""
        product = self.op("MatMul", x, self.weight(name, matrix))
        return self.op("Add", product, self.weight(f"{name}.bias", bias))

    def norm(self, x: str, name: str, scale_shift: tuple[F32, F32], eps: float) -> str:
        """LayerNorm over the last axis (``LayerNormalization``, opset 17)."""
        scale = self.weight(f"{name}.scale", scale_shift[0])
        shift = self.weight(f"{name}.shift", scale_shift[1])
        return self.op("LayerNormalization", x, scale, shift, axis=-1, epsilon=eps)

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        """Add a node with one output; return the output's (generated, unique) name."""
        self._count += 1
        output = f"{op_type.lower()}_{self._count}"
        self.nodes.append(
            self.helper.make_node(op_type, list(inputs), [output], name=output, **attributes)
        )
        return output


def build_model(weights: BertWeights, config: BertConfig) -> tuple[Any, dict[str, F32]]:
    """The BERT encoder of `._bert_numpy` as an ``onnx.ModelProto`` (see the module docs), and
    the float32 arrays of its external initializers by name (pass both to `make_session`).

    Inputs ``input_ids`` (int64, batch x tokens) and ``attention_mask`` (float32, 1 for a token,
    0 for padding); output ``last_hidden_state`` (float32, batch x tokens x hidden). Only small
    constants are stored in the model itself. Needs the ``onnx`` package.
    """
    onnx = importlib.import_module("onnx")
    float32, int64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    hidden, heads = config.hidden_size, config.num_heads
    eps = config.layer_norm_eps
    g = _GraphBuilder(onnx)

    zero = g.constant("zero", [0], np.int64)
    one = g.constant("one", 1.0, np.float32)
    masked = g.constant("masked", _MASKED, np.float32)
    half = g.constant("half", 0.5, np.float32)
    sqrt2 = g.constant("sqrt2", math.sqrt(2.0), np.float32)
    key_axes = g.constant("key_axes", [1, 2], np.int64)
    split_heads = g.constant("split_heads", [0, 0, 3, heads, hidden // heads], np.int64)
    merge_heads = g.constant("merge_heads", [0, 0, hidden], np.int64)
    index = [g.constant(f"index_{i}", i, np.int64) for i in range(3)]  # scalars: Gather drops
    words = g.weight("words", weights.words)
    positions = g.weight("positions", weights.positions)

    # Embeddings: word vectors + the first `tokens` position rows (token type 0 is in them).
    width = g.op("Shape", "input_ids", start=1, end=2)
    position_rows = g.op("Slice", positions, zero, width, zero)
    embedded = g.op("Add", g.op("Gather", words, "input_ids"), position_rows)
    x = g.norm(embedded, "embeddings.norm", weights.embedding_norm, eps)

    # (1 - mask) * -1e9, shaped (batch, 1, 1, keys) to broadcast over heads and queries.
    padding = g.op("Mul", g.op("Sub", one, "attention_mask"), masked)
    key_bias = g.op("Unsqueeze", padding, key_axes)

    for i, layer in enumerate(weights.layers):
        at = f"layer{i}"
        qkv = g.affine(x, f"{at}.qkv", layer.qkv, layer.qkv_bias)  # (batch, tokens, 3 hidden)
        # -> (3, batch, heads, tokens, head size); Gather on axis 0 picks q, k, v.
        stacked = g.op("Transpose", g.op("Reshape", qkv, split_heads), perm=[2, 0, 3, 1, 4])
        q, k, v = (g.op("Gather", stacked, index[j], axis=0) for j in range(3))
        scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
        attention = g.op("Softmax", g.op("Add", scores, key_bias), axis=-1)
        context = g.op("MatMul", attention, v)  # (batch, heads, tokens, head size)
        merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = g.affine(merged, f"{at}.out", layer.out, layer.out_bias)
        x = g.norm(g.op("Add", attended, x), f"{at}.norm1", layer.norm1, eps)
        up = g.affine(x, f"{at}.up", layer.up, layer.up_bias)
        # Exact GELU: up * (1 + erf(up / sqrt 2)) * 0.5, the pattern ORT fuses into BiasGelu.
        erf = g.op("Erf", g.op("Div", up, sqrt2))
        gelu = g.op("Mul", g.op("Mul", up, g.op("Add", erf, one)), half)
        down = g.affine(gelu, f"{at}.down", layer.down, layer.down_bias)
        x = g.norm(g.op("Add", down, x), f"{at}.norm2", layer.norm2, eps)

    g.nodes.append(onnx.helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = onnx.helper.make_graph(
        g.nodes,
        "bert_encoder",
        [
            onnx.helper.make_tensor_value_info("input_ids", int64, ["batch", "tokens"]),
            onnx.helper.make_tensor_value_info("attention_mask", float32, ["batch", "tokens"]),
        ],
        [
            onnx.helper.make_tensor_value_info(
                "last_hidden_state", float32, ["batch", "tokens", hidden]
            )
        ],
        g.initializers,
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid("", OPSET)],
        ir_version=_IR_VERSION,
        producer_name="ragbridge",
    )
    return model, g.external


def _thread_count() -> int:
    """``OMP_NUM_THREADS`` if the user set a positive integer, else 0 (ORT's default)."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 0


def make_session(model: bytes, external: dict[str, F32]) -> Any:
    """An ``onnxruntime.InferenceSession`` on the CPU for a serialized model and the arrays of
    its external initializers: all graph optimisations on, warnings off (ORT logs them to
    stderr; ragbridge loads models quietly).

    The arrays go in as ``OrtValue`` views of numpy memory (``add_external_initializers``,
    onnxruntime >= 1.12), which ORT copies into its graph before optimising it: the session
    does not refer to them afterwards, so the caller need not keep them.
    """
    disable_runtime_telemetry()  # before the first import: ORT reads the switch only then
    ort = importlib.import_module("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = _thread_count()
    # No busy-waiting between and after parallel sections: during `evaluate` the encode shares
    # the CPU with the metrics' own Python code, which a spinning ORT thread would slow down
    # (measured: +2-3% cold samples/s in benchmarks/offline_speed.py on 2 cores).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only
    names = list(external)
    values = [ort.OrtValue.ortvalue_from_numpy(external[name]) for name in names]
    options.add_external_initializers(names, values)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class OnnxSentenceEncoder(SentenceEncoder):
    """`SentenceEncoder` with its forward pass run by ONNX Runtime (see the module docs).

    Same files, tokens, batching, pooling and normalisation as the numpy encoder; only
    `_load_weights` (build the graph and the session; the numpy arrays are not kept) and
    `_forward` differ. Loading takes ~0.5 s for all-MiniLM-L6-v2 (convert the weights, build
    and optimise the graph). Needs ``onnx``, ``onnxruntime`` and ``tokenizers``.
    """

    max_batch_tokens = 1024
    """ORT runs ~5-10% faster on batches of ~1,000 tokens (e.g. 48 sentences of 20 tokens)
    than on 64 x 20 or more: the activations of a batch stay in the CPU caches (measured on the
    offline metrics' sentences and ~120-word contexts)."""

    def _load_weights(self, raw: dict[str, npt.NDArray[Any]]) -> None:
        """Build the graph from the float32 weights and open an ONNX Runtime session on it."""
        weights = convert_weights(raw, self.config, self.folder / "model.safetensors")
        model, external = build_model(weights, self.config)
        self._session = make_session(model.SerializeToString(), external)

    def _forward(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        """Mean-pooled last hidden states of a padded batch: (batch, tokens) -> (batch, hidden)."""
        (tokens,) = self._session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask}
        )
        return mean_pool(tokens, mask)
