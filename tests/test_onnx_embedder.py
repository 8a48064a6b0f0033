"""The ONNX Runtime backend of `LocalEmbedder` (`ragbridge.adapters._bert_onnx`): the graph built
in memory from the vendored float16 all-MiniLM-L6-v2 must give the numpy forward pass's vectors
(to float noise, which is why both share the cache-key name ``all-MiniLM-L6-v2:fp16``), keep
the order of the texts, treat empty strings alike, be the default only when it is installed,
say which extra to install when it is not, and stay out of ``import ragbridge.adapters.local``.

Skipped as a whole, saying why, without onnxruntime, onnx or tokenizers (the ``local`` extra).
Fidelity to sentence-transformers is measured by ``benchmarks/embedder_fidelity.py``; the numpy
backend, which this one must match, is held to sentence-transformers in test_numpy_embedder.py.
Nothing here uses the network (the weights ship with ragbridge; the suite's conftest blocks it).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

if missing := [m for m in ("onnxruntime", "onnx", "tokenizers") if not importlib.util.find_spec(m)]:
    pytest.skip(
        f"{', '.join(missing)} not installed: the onnx backend needs the local extra "
        '(pip install ".[local]")',
        allow_module_level=True,
    )

from ragbridge.adapters import _bert_onnx, local
from ragbridge.adapters._bert_numpy import MODEL_FILES, SentenceEncoder
from ragbridge.adapters._bert_onnx import OnnxSentenceEncoder
from ragbridge.adapters.local import (
    INSTALL_HINT,
    NUMPY_MODEL,
    LocalEmbedder,
    LocalModelNotFoundError,
    default_backend,
)

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "adapters" / "models" / "all-MiniLM-L6-v2"

LONG = " ".join(["the policy review covers travel, expenses and security"] * 60)  # > 256 tokens

TEXTS = [
    "The cat sat on the warm mat by the fireplace.",
    "",
    "Quarterly revenue rose eight percent on strong cloud sales.",
    LONG,
    "Yes.",
    "  leading and trailing spaces  ",
    "Über naïve café résumé 東京 2024-05-01 #42 e-mail: someone@example.org (see §3.1) — done!",
    " ".join(["photosynthesis converts light into chemical energy"] * 8),  # ~60 tokens
    "ALL CAPS SHOUTING TEXT",
]
"""Varied lengths in one call, so batches pad short texts next to long ones."""


@pytest.fixture(scope="module")
def onnx_encoder() -> OnnxSentenceEncoder:
    return OnnxSentenceEncoder(VENDORED)


@pytest.fixture(scope="module")
def numpy_encoder() -> SentenceEncoder:
    return SentenceEncoder(VENDORED)


def cosines(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    dots = (a64 * b64).sum(axis=1)
    return dots / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))  # type: ignore[no-any-return]


# -- the vectors: the numpy forward pass's, to float noise ------------------------------------


@pytest.mark.parametrize("normalize", [True, False])
def test_vectors_agree_with_the_numpy_backend(
    onnx_encoder: OnnxSentenceEncoder, numpy_encoder: SentenceEncoder, normalize: bool
) -> None:
    ours = onnx_encoder.encode(TEXTS, normalize=normalize)
    reference = numpy_encoder.encode(TEXTS, normalize=normalize)
    assert ours.shape == reference.shape == (len(TEXTS), 384)
    assert ours.dtype == np.float32
    similarity = cosines(ours, reference)
    worst = int(similarity.argmin())
    assert similarity.min() >= 0.99999, f"cosine {similarity[worst]:.7f} for {TEXTS[worst][:60]!r}"
    if normalize:
        # The shared cache-key name rests on this: float noise, not different content (the
        # float16 vs float32 weights differ by ~3e-4, see adapters/local.py).
        assert np.abs(ours - reference).max() < 1e-5


def test_a_batch_of_different_lengths_is_padded_without_leaking(
    onnx_encoder: OnnxSentenceEncoder,
) -> None:
    text = "The cat sat on the warm mat by the fireplace."
    alone = onnx_encoder.encode([text])[0]
    padded = onnx_encoder.encode([text, LONG, "mid length text " * 5])[0]  # one batch
    in_small_batches = onnx_encoder.encode([*TEXTS, text], batch_size=2)[-1]
    for other in (padded, in_small_batches):
        assert np.abs(other - alone).max() < 1e-6


def test_a_text_over_256_tokens_is_truncated_like_the_numpy_backend(
    onnx_encoder: OnnxSentenceEncoder, numpy_encoder: SentenceEncoder
) -> None:
    assert len(onnx_encoder.tokenize([LONG])[0]) == 256 == onnx_encoder.max_seq_length
    longer = onnx_encoder.encode([LONG, LONG + " completely different words at the end"])
    assert np.abs(longer[0] - longer[1]).max() < 1e-6  # what lies past 256 tokens is ignored
    reference = numpy_encoder.encode([LONG])
    assert cosines(longer[:1], reference)[0] >= 0.99999


def test_order_is_preserved(onnx_encoder: OnnxSentenceEncoder) -> None:
    """Batches are sorted by length inside `encode`: the rows must come back in input order."""
    forward = onnx_encoder.encode(TEXTS)
    backward = onnx_encoder.encode(TEXTS[::-1])
    assert np.abs(backward[::-1] - forward).max() < 1e-6
    singles = np.stack([onnx_encoder.encode([text])[0] for text in TEXTS])
    assert np.abs(singles - forward).max() < 1e-6


def test_empty_and_blank_texts_are_handled_as_the_numpy_backend_does(
    onnx_encoder: OnnxSentenceEncoder, numpy_encoder: SentenceEncoder
) -> None:
    ours = onnx_encoder.encode(["", " ", "x"])
    reference = numpy_encoder.encode(["", " ", "x"])
    assert np.isfinite(ours).all()
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert np.abs(ours[0] - ours[1]).max() < 1e-6  # both are just [CLS] [SEP]
    assert np.abs(ours - reference).max() < 1e-5
    assert onnx_encoder.encode([]).shape == (0, 384)


def test_through_local_embedder_it_matches_the_numpy_backend() -> None:
    onnx_embedder = LocalEmbedder(backend="onnx")
    numpy_embedder = LocalEmbedder(backend="numpy")
    assert onnx_embedder.model == numpy_embedder.model == NUMPY_MODEL  # one cache-key name
    ours = np.array(asyncio.run(onnx_embedder.embed(TEXTS)), dtype=np.float32)
    reference = np.array(asyncio.run(numpy_embedder.embed(TEXTS)), dtype=np.float32)
    assert cosines(ours, reference).min() >= 0.99999
    unnormalized = LocalEmbedder(backend="onnx", normalize=False)
    assert unnormalized.model == f"{NUMPY_MODEL}:unnormalized"


# -- the graph ------------------------------------------------------------------------------------


def test_the_graph_is_a_valid_opset_17_model_with_external_weights(
    numpy_encoder: SentenceEncoder,
) -> None:
    onnx = pytest.importorskip("onnx")
    model, external = _bert_onnx.build_model(numpy_encoder._weights, numpy_encoder.config)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    assert {n.op_type for n in model.graph.node} >= {"Erf", "LayerNormalization", "Softmax"}
    # The weights travel beside the protobuf, not inside it: the model itself stays small.
    assert model.ByteSize() < 1_000_000
    assert sum(a.nbytes for a in external.values()) > 80_000_000  # 22.7 M float32 weights
    assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in external.values())
    # The checker reads external data from files: check a copy with the weights put inline.
    inline = onnx.ModelProto()
    inline.CopyFrom(model)
    for tensor in inline.graph.initializer:
        if tensor.name in external:
            tensor.CopyFrom(onnx.numpy_helper.from_array(external[tensor.name], tensor.name))
    onnx.checker.check_model(inline, full_check=True)  # names, types, shapes, opset agree
    inferred = onnx.shape_inference.infer_shapes(inline, strict_mode=True)
    (output,) = inferred.graph.output
    assert [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim] == [
        "batch",
        "tokens",
        384,
    ]


@pytest.mark.parametrize(
    ("value", "threads"), [(None, 0), ("1", 1), ("2", 2), ("", 0), ("zero", 0), ("0", 0)]
)
def test_omp_num_threads_is_passed_on_to_onnx_runtime(
    value: str | None, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORT ignores OMP_NUM_THREADS; a user's value must still win, as it does for numpy's BLAS.
    0 is ORT's own default (one thread per physical core)."""
    if value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert _bert_onnx._thread_count() == threads


# -- which backend, and what to install ------------------------------------------------------------


def test_onnx_is_the_default_backend_when_it_is_installed() -> None:
    assert default_backend() == "onnx"
    embedder = LocalEmbedder()
    assert (embedder.backend, embedder.model) == ("onnx", NUMPY_MODEL)
    assert LocalEmbedder(backend="numpy").backend == "numpy"  # still selectable


@pytest.mark.parametrize("missing", ["onnxruntime", "onnx"])
def test_without_onnx_runtime_the_default_falls_back_to_numpy(
    missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installation with tokenizers only (the local extra before onnx) keeps working."""
    real = local._installed
    monkeypatch.setattr(local, "_installed", lambda module: module != missing and real(module))
    assert default_backend() == "numpy"
    embedder = LocalEmbedder()
    assert (embedder.backend, embedder.model) == ("numpy", NUMPY_MODEL)  # the same cache key


@pytest.mark.parametrize("missing", ["onnxruntime", "onnx"])
def test_asking_for_onnx_without_it_names_the_local_extra(
    missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = local._installed
    monkeypatch.setattr(local, "_installed", lambda module: module != missing and real(module))
    with pytest.raises(ImportError) as info:
        LocalEmbedder(backend="onnx")
    assert missing in str(info.value)
    assert "local extra" in str(info.value)
    assert INSTALL_HINT in str(info.value)


def test_onnx_runtime_vanishing_before_the_first_embed_names_the_local_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = LocalEmbedder(backend="onnx")  # installed at construction ...
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # ... not importable at the load
    with pytest.raises(ImportError) as info:
        asyncio.run(embedder.embed(["hello"]))
    assert "onnxruntime" in str(info.value)
    assert INSTALL_HINT in str(info.value)
    assert not embedder.loaded


def test_a_missing_vendored_file_is_a_local_model_not_found_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "all-MiniLM-L6-v2"
    for name in MODEL_FILES:
        if name != "model.safetensors":
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(VENDORED / name)
    monkeypatch.setattr(local, "_VENDORED_MODEL", folder)
    with pytest.raises(LocalModelNotFoundError, match="Reinstall ragbridge"):
        LocalEmbedder(backend="onnx").load()


# -- imports ---------------------------------------------------------------------------------------

IMPORTS = """
import asyncio, json, sys
import ragbridge.adapters.local as m
after_import = [n for n in ("onnx", "onnxruntime", "tokenizers") if n in sys.modules]
embedder = m.LocalEmbedder()  # constructing finds the backend without importing it
after_construction = [n for n in ("onnx", "onnxruntime", "tokenizers") if n in sys.modules]
vectors = asyncio.run(embedder.embed(["one text", "and another, a little longer"]))
heavy = [n for n in ("torch", "sentence_transformers", "transformers") if n in sys.modules]
print(json.dumps({
    "after_import": after_import,
    "after_construction": after_construction,
    "backend": embedder.backend,
    "loaded": "onnxruntime" in sys.modules,
    "heavy": heavy,
    "dim": len(vectors[0]),
}))
"""


def test_importing_local_does_not_import_onnx_runtime_and_embedding_needs_no_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {
        "after_import": [],
        "after_construction": [],
        "backend": "onnx",
        "loaded": True,
        "heavy": [],
        "dim": 384,
    }
    assert done.stderr == ""  # ORT's warnings (unused initializers, ...) are silenced
