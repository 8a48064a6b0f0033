"""examples/shadow_scoring.py runs offline and records what it says it records."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ragbridge.core.monitoring import MonitorStore

ROOT = Path(__file__).resolve().parents[1]


def test_the_shadow_scoring_example_runs(tmp_path: Path) -> None:
    if importlib.util.find_spec("langchain_core") is None:
        pytest.skip("needs the langchain extra")
    store = tmp_path / "monitor.sqlite"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "shadow_scoring.py"), str(store)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "LangChain: 200 requests served" in done.stdout
    with MonitorStore(store) as monitor:
        records = monitor.requests()
    langchain = [r for r in records if r.pipeline == "handbook-langchain"]
    assert len(langchain) == 200
    assert all(r.retrieval_ms is not None and r.chunks_retrieved == 2 for r in langchain)
    sampled = [r for r in langchain if r.sampled]
    assert sampled
    assert all("faithfulness" in r.scores for r in sampled)
    # the question worded unlike its document misses retrieval, and the answer abstains
    assert {r.retrieval_miss for r in langchain if r.abstained} == {True}
