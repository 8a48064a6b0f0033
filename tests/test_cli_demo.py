"""`ragbridge demo` end to end through the console script: offline, every file it promises."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NEEDS = ("langchain_core", "llama_index", "langsmith", "ragas", "deepeval", "sentence_transformers")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the demo needs pip install 'ragbridge[all]' (missing: {', '.join(missing)})")
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None
    work = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(work)}
    done = subprocess.run(
        [exe, "demo", "--out", "out"], cwd=work, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "out", done.stdout


def test_demo_prints_both_pipelines_and_their_comparison(demo: tuple[Path, str]) -> None:
    _, stdout = demo
    assert "handbook: 42 documents, 42 questions (5 with no answer in the handbook)" in stdout
    assert "\nlangchain pipeline\n" in stdout
    assert "\nllamaindex pipeline\n" in stdout
    assert "llamaindex vs langchain (paired over the samples both scored)" in stdout
    assert stdout.count("bad retrieval, good-looking answer") == 2
    assert "Evaluation dataset saved" not in stdout  # DeepEval's banner is kept out
    assert "ragbridge vs RAGAS on the langchain samples, no judge" in stdout
    assert "  rouge_l                spearman +1.00" in stdout


def test_demo_writes_results_framework_files_and_the_report(demo: tuple[Path, str]) -> None:
    out, _ = demo
    from ragbridge.adapters.deepeval import load_test_cases
    from ragbridge.adapters.ragas import from_ragas_jsonl
    from ragbridge.core import Evaluation, load_samples

    for name in ("langchain", "llamaindex"):
        samples = list(load_samples(out / f"samples.{name}.jsonl"))
        assert len(samples) == 42
        assert all(s.answer for s in samples)
        assert all(s.metadata["pipeline"] == f"demo-{name}" for s in samples)
        results = Evaluation.from_jsonl(out / f"results.{name}.jsonl")
        recall = results.summary()["recall@4"]
        assert (recall.n_scored, recall.n_skipped) == (37, 5)  # no-answer questions skip
        assert recall.mean is not None
        assert recall.mean > 0.8
    langchain = list(load_samples(out / "samples.langchain.jsonl"))
    assert from_ragas_jsonl(out / "ragas_dataset.jsonl") == langchain
    assert load_test_cases(out / "deepeval_test_cases.json") == langchain
    rows = [
        json.loads(line) for line in (out / "langsmith_experiment.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 42
    assert {"recall@4", "faithfulness"} <= set(rows[0]["feedback"])
    from ragbridge.core.crosscheck import CrossComparison

    comparison = CrossComparison.from_json(out / "comparison.json")
    assert {m.measure for m in comparison.measures} >= {"id_context_recall", "rouge_l"}
    assert any(s.framework == "deepeval" for s in comparison.skipped)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "id_context_recall" in html
    assert "LangChain vs LlamaIndex" in html
    assert html.count("<details") >= 84  # one drill-down per sample and pipeline
