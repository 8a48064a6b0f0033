"""Offline scores are the same in every process, whatever its hash seed.

A cluster run is only "identical to the local run" if a worker process computes the same bits
as this one. Python randomises set order per process (``PYTHONHASHSEED``), and a float sum over
a set in that order differed in the last bit between processes (faithfulness:offline, found by
the Dask benchmark). Two subprocesses with different seeds must print identical values.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

WORDS = [
    "leave",
    "policy",
    "staff",
    "annual",
    "days",
    "service",
    "contract",
    "clause",
    "manager",
    "approval",
    "notice",
    "weeks",
    "salary",
    "holiday",
    "request",
    "office",
    "remote",
    "travel",
    "expense",
    "budget",
    "report",
    "review",
    "team",
    "project",
]


def _write(path: Path, n: int = 60) -> None:
    """Claims and contexts drawn from one small vocabulary: many terms of equal weight, which
    is where the order of a float sum shows."""
    rng = random.Random(7)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + "."

    rows = [
        {
            "id": f"s{i}",
            "question": text(10)[:-1] + "?",
            "answer": text(18),
            "reference": text(12),
            "contexts": [text(40) for _ in range(3)],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


SCRIPT = """
import json, sys
from ragbridge.core.scoring.runner import evaluate
from ragbridge.core.sample import load_samples
from ragbridge.core.testing import HashEmbedder
metrics = ["faithfulness:offline", "hallucination:offline", "answer_relevance:offline",
           "context_precision:offline", "context_recall:offline", "context_usage:offline"]
ev = evaluate(load_samples(sys.argv[1]), metrics, embedder=HashEmbedder())
print(json.dumps([[s, m, score.value] for s, m, score in ev]))
"""


def _values(data: Path, seed: str) -> list[list[object]]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    values: list[list[object]] = json.loads(done.stdout.splitlines()[-1])
    return values


def test_offline_values_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    data = tmp_path / "samples.jsonl"
    _write(data)
    first = _values(data, "1")
    assert len(first) == 60 * 6
    assert any(isinstance(v, float) and 0 < v < 1 for _, _, v in first)
    for seed in ("2", "3"):
        assert _values(data, seed) == first, f"PYTHONHASHSEED={seed} gave other values"
