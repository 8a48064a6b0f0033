"""The examples run, and the example data is what its generator produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragbridge.core import Evaluation

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_finds_the_better_retriever(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "retrieval_quickstart.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    ndcg = [line for line in lines if line.strip().startswith("ndcg@5") and "diff" in line]
    assert len(ndcg) == 1
    diff = float(ndcg[0].split("diff")[1].split()[0])
    assert diff > 0  # the candidate retriever was generated to be better
    results = Evaluation.from_jsonl(tmp_path / "candidate.results.jsonl")
    summary = results.summary()["recall@5"]
    assert (summary.n_scored, summary.n_skipped, summary.n_failed) == (35, 4, 1)


def test_example_data_is_reproducible(tmp_path: Path) -> None:
    script = ROOT / "examples" / "make_example_data.py"
    copy = tmp_path / "make_example_data.py"
    copy.write_text(script.read_text())
    subprocess.run([sys.executable, str(copy)], capture_output=True, check=True)
    for name in ("baseline.jsonl", "candidate.jsonl"):
        assert (tmp_path / "data" / name).read_text() == (
            ROOT / "examples" / "data" / name
        ).read_text()


def test_offline_metrics_example_runs_and_explains_the_wrong_number() -> None:
    import importlib.util

    import pytest

    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("needs the local extra (sentence-transformers)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "offline_metrics.py")],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:4]}
    assert float(rows["wrong-number"][0]) == 0.0  # faithfulness
    assert float(rows["evasive"][2]) == 0.0  # answer relevance of a noncommittal answer
    assert "terms not found in the contexts: ['30']" in done.stdout


def test_framework_sinks_example_gives_the_same_numbers_in_every_framework() -> None:
    import importlib.util

    import pytest

    for module in ("sentence_transformers", "deepeval", "langsmith", "llama_index.core"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"needs {module} (pip install 'ragbridge[all]')")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "framework_sinks.py")],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    rows = [line.split() for line in done.stdout.splitlines()]
    table = {r[0]: r[1:] for r in rows if len(r) == 5 and r[0] in {f"q{i}" for i in range(1, 6)}}
    assert len(table) == 5
    for sid, values in table.items():
        assert len(set(values)) == 1, (sid, values)  # ragbridge = langsmith = deepeval = llamaindex
    assert table["q5"][0] == "0.000"
    assert "✗ [not supported] I could not find that in the context." in done.stdout
    assert "(warm cache): score 1.00, judge calls so far 3, cached 3" in done.stdout
