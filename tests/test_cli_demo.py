"""`ragbridge demo` end to end through the console script, as a user runs it.

The demo runs in a subprocess with a clean environment: none of the offline or telemetry
switches the suite sets for itself (tests/conftest.py) and no ``HF_HUB_OFFLINE``, so what it
proves is what ragbridge does on its own. `audit_hook` puts an audit hook in that process (and
any Python process it starts) which records every socket connection and host lookup and
refuses those off loopback, so a stray one cannot reach the network, and the test sees it.
The same folder is then run again: the rerun must load no model (every vector comes from the
cache in the folder).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from audit_hook import clean_env, install, off_loopback, read_log

NEEDS = ("langchain_core", "llama_index", "langsmith", "ragas", "deepeval", "tokenizers")


@dataclass
class DemoRun:
    """One ``ragbridge demo`` process: its output, and what the audit hook recorded."""

    work: Path
    code: int
    stdout: str
    stderr: str
    audit: list[dict[str, Any]]

    @property
    def loaded_models(self) -> list[str]:
        return [m for r in self.audit if r["event"] == "exit" for m in r["loaded"]]

    def wrote(self) -> list[Path]:
        """The paths listed under ``wrote:``, resolved against the working folder."""
        lines = self.stdout.split("\nwrote:\n", 1)[1].splitlines()
        listed = []
        for line in lines:
            if not line.startswith("  "):
                break
            listed.append(self.work / line.strip())
        return listed


def _run(exe: str, work: Path, hooks: Path) -> DemoRun:
    (work / "audit.jsonl").unlink(missing_ok=True)
    done = subprocess.run(
        [exe, "demo", "--out", "out"], cwd=work, env=clean_env(work, hooks),
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return DemoRun(work, done.returncode, done.stdout, done.stderr, read_log(work))


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("audit-hook"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, hooks: Path) -> tuple[DemoRun, DemoRun]:
    """The demo run twice in one folder: cold (empty folder), then warm (a rerun)."""
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the demo needs pip install 'ragbridge[all]' (missing: {', '.join(missing)})")
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None
    work = tmp_path_factory.mktemp("demo")
    cold = _run(exe, work, hooks)
    assert cold.code == 0, cold.stderr[-3000:]
    warm = _run(exe, work, hooks)
    assert warm.code == 0, warm.stderr[-3000:]
    return cold, warm


@pytest.fixture(scope="module")
def demo(runs: tuple[DemoRun, DemoRun]) -> tuple[Path, str]:
    cold, _ = runs
    return cold.work / "out", cold.stdout


# -- the audit hook itself can fail a test ---------------------------------------------------------


def test_the_audit_hook_records_and_refuses_a_lookup_off_loopback(
    hooks: Path, tmp_path: Path
) -> None:
    code = (
        "import socket\n"
        "socket.getaddrinfo('localhost', 80)\n"
        "try:\n"
        "    socket.getaddrinfo('t.explodinggradients.com', 443)\n"
        "except ConnectionRefusedError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(tmp_path, hooks),
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "refused: test audit hook" in done.stdout
    records = read_log(tmp_path)
    assert [r["target"] for r in off_loopback(records)] == ["'t.explodinggradients.com'"]
    lookups = [(r["target"], r["local"]) for r in records if r["event"] == "socket.getaddrinfo"]
    assert lookups == [("'localhost'", True), ("'t.explodinggradients.com'", False)]


# -- no network, no noise -------------------------------------------------------------------------


def test_the_demo_opens_no_socket_off_loopback(runs: tuple[DemoRun, DemoRun]) -> None:
    """No RAGAS or DeepEval telemetry, no Hugging Face Hub, with no opt-out in the environment."""
    for run in runs:
        stray = off_loopback(run.audit)
        assert stray == [], f"the demo reached for the network: {stray}"
    assert any(r["event"] == "exit" for r in runs[0].audit)  # the hook was really installed


NOISE = (
    "Loading weights",  # sentence-transformers / transformers progress bar
    "No reference context IDs provided",  # RAGAS's id-based context recall
    "LangSmithBetaWarning",
    "is in beta",
    "Running teardown",  # DeepEval's pytest plugin
    "posthog",  # DeepEval's telemetry errors
    "Evaluation dataset saved",  # DeepEval's banner
    "it/s]",  # any tqdm bar
)


def test_the_demo_prints_no_framework_noise(runs: tuple[DemoRun, DemoRun]) -> None:
    for run in runs:
        for needle in NOISE:
            assert needle.lower() not in (run.stderr + run.stdout).lower(), needle
        foreign = [
            line for line in run.stderr.splitlines() if line and not line.startswith("ragbridge")
        ]
        assert foreign == [], "stderr lines that are not ragbridge's own:\n" + run.stderr[-2000:]


# -- what it prints and writes --------------------------------------------------------------------


def test_demo_prints_both_pipelines_and_their_comparison(demo: tuple[Path, str]) -> None:
    _, stdout = demo
    assert "handbook: 42 documents, 42 questions (5 with no answer in the handbook)" in stdout
    assert "\nlangchain pipeline\n" in stdout
    assert "\nllamaindex pipeline\n" in stdout
    assert "llamaindex vs langchain (paired over the samples both scored)" in stdout
    assert stdout.count("bad retrieval, good-looking answer") == 2
    assert "ragbridge vs RAGAS on the langchain samples, no judge" in stdout
    assert "  rouge_l                spearman +1.00" in stdout


def test_wrote_lists_every_file_the_demo_writes(runs: tuple[DemoRun, DemoRun]) -> None:
    cold, _ = runs
    out = cold.work / "out"
    listed = cold.wrote()
    assert len(listed) == len(set(listed))
    assert all(path.is_file() for path in listed), [p for p in listed if not p.is_file()]
    assert out / "comparison.json" in listed
    cache = out / "cache.sqlite"
    assert f"embedding cache: out{os.sep}cache.sqlite" in cold.stdout
    on_disk = {p for p in out.rglob("*") if p.is_file()}
    sidecars = {cache, cache.with_name("cache.sqlite-wal"), cache.with_name("cache.sqlite-shm")}
    assert on_disk - sidecars == set(listed)
    assert not (cold.work / ".deepeval").exists()  # DeepEval's state stays out of the way


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
    from ragbridge.core.results.crosscheck import CrossComparison

    comparison = CrossComparison.from_json(out / "comparison.json")
    assert {m.measure for m in comparison.measures} >= {"id_context_recall", "rouge_l"}
    assert any(s.framework == "deepeval" for s in comparison.skipped)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "id_context_recall" in html
    assert "LangChain vs LlamaIndex" in html
    assert html.count("<details") >= 84  # one drill-down per sample and pipeline


# -- the rerun -------------------------------------------------------------------------------------


def test_a_rerun_in_the_same_folder_loads_no_model(runs: tuple[DemoRun, DemoRun]) -> None:
    """Every vector of the rerun (the handbook, the questions, the answers) comes from the cache
    in the folder: the embedding model (the numpy forward pass of the default embedder) is
    never even imported, nor is torch."""
    cold, warm = runs
    assert "ragbridge.adapters._bert_numpy" in cold.loaded_models  # the check can fail
    assert warm.loaded_models == []


def test_a_rerun_gives_the_same_results(runs: tuple[DemoRun, DemoRun]) -> None:
    cold, warm = runs
    assert cold.stdout == warm.stdout
