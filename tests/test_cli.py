"""The `ragbridge` command: eval, run, langsmith, estimate, gate — results and bad input.

Most tests call `main(argv)` (what the console script calls) in-process for speed; one test per
family goes through the installed console script in a subprocess to prove the entry point.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Context, Sample, load_samples, save_samples
from ragbridge.core.scoring.runner import estimate

DATA = Path(__file__).parent / "data"


def _samples(n: int = 6, *, good: bool = True) -> list[Sample]:
    out = []
    for i in range(n):
        relevant = f"d{i}"
        ranking = [relevant, "x1", "x2"] if good or i % 3 == 0 else ["x1", "x2", relevant]
        out.append(
            Sample(
                id=f"q{i}",
                question=f"What is fact number {i}?",
                answer=f"Fact {i} is that the sky is blue.",
                contexts=[Context(text=f"Fact {i}: the sky is blue.", id=d) for d in ranking],
                reference=f"Fact {i} is that the sky is blue.",
                relevance={relevant: 1},
                metadata={"generator_model": "counting-judge" if i == 0 else "other"},
            )
        )
    return out


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(_samples(), path)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_offline_prints_the_summary_and_writes_results(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / "results.jsonl"
    code, out, _ = run_cli(
        capsys, "eval", str(data), "--metrics", "recall@1,mrr,faithfulness",
        "--embedder", "hash", "--out", str(out_path),
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[0] == "6 samples, 3 metrics"
    assert out.splitlines()[1].split() == ["metric", "mean", "95%", "CI", "scored", "failed",
                                           "skipped", "failures"]  # fmt: skip
    results = Evaluation.from_jsonl(out_path)
    assert results.metrics == ["recall@1", "mrr", "faithfulness"]
    assert results.get("q3", "recall@1").value == 1.0  # type: ignore[union-attr]
    faith = results.get("q0", "faithfulness")
    assert faith is not None
    assert faith.provider == "offline"  # no --judge: the offline provider
    assert "recall@1      1.000" in out


def test_eval_with_a_judge_spec_warns_when_the_judge_wrote_the_answers(
    data: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness,correctness",
        "--judge", "python:ragbridge.core.testing:CountingJudge",
        "--cache", str(tmp_path / "cache.sqlite"),
    )  # fmt: skip
    assert code == 0
    assert "warning: the judge model 'counting-judge' generated 1 of the answers" in err
    assert "judge counting-judge: 18 calls (0 cached)" in out  # 2 faithfulness + 1 correctness
    code, out, _ = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness,correctness",
        "--judge", "python:ragbridge.core.testing:CountingJudge",
        "--cache", str(tmp_path / "cache.sqlite"),
    )  # fmt: skip
    assert "0 calls (18 cached)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "{missing}"], "no-such.jsonl: no such file"),
        (["eval", "{bad}"], "bad.jsonl:2: question: "),
        (["eval", "{data}", "--metrics", "recal@5"], "recal@5"),
        (["eval", "{data}", "--metrics", "correctness"], "correctness needs a judge"),
        (["eval", "{data}", "--judge", "gpt4"], "expected KIND:…, e.g. openai:gpt-4o-mini"),
        (["eval", "{data}", "--judge", "python:nosuchmodule:x"], "cannot import 'nosuchmodule'"),
        (["eval", "{data}", "--judge", "python:json:loads"], "must be callable with no arguments"),
        (["eval", "{data}", "--judge", "python:ragbridge.core:Sample"], "raised ValidationError"),
        (["eval", "{data}", "--embedder", "nope:x"], "unknown kind 'nope'"),
        (["gate", "{data}"], "nothing to check"),
        (["gate", "{results}", "--threshold", "recall@5"], "expected METRIC=VALUE"),
        (["gate", "{results}", "--threshold", "ndcg@9=0.5"], "the results have no metric"),
        (["gate", "{results}", "--threshold", "mrr=5"], "must lie within [0, 1]"),
        (["gate", "{data}", "--threshold", "mrr=0.5"], "results "),
        (["langsmith", "{missing}"], "no such file"),
        (["estimate", "{data}", "--metrics", "nope"], "nope"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(
    argv: list[str],
    message: str,
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": 5}\n')
    results = tmp_path / "results.jsonl"
    main(["eval", str(data), "--metrics", "mrr", "--out", str(results)])
    capsys.readouterr()
    paths = {"missing": tmp_path / "no-such.jsonl", "bad": bad, "data": data, "results": results}
    code, _, err = run_cli(capsys, *[a.format(**paths) for a in argv])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ragbridge: error: ")
    assert message in lines[0]


def test_bad_option_values_exit_2_via_argparse(data: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(data), "--concurrency", "0"])
    assert exc.value.code == 2


def test_estimate_matches_the_core_estimate_and_prices_it(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        capsys, "estimate", str(data), "--price-in", "0.15", "--price-out", "0.6"
    )
    expected = estimate(
        load_samples(data), ["faithfulness", "answer_relevance", "context_precision",
                             "context_recall"]
    )  # fmt: skip
    assert code == 0
    assert f"judge calls: {expected.calls} ({expected.calls_per_sample:.1f} per sample)" in out
    assert f"prompt tokens: ~{expected.prompt_tokens:,}" in out
    from ragbridge.core.judging.engine import Price

    assert f"cost: ~${expected.cost(Price(0.15, 0.6)):.4f}" in out


def _results(tmp_path: Path, name: str, good: bool, n: int = 30) -> Path:
    path = tmp_path / f"{name}.jsonl"
    data = tmp_path / f"{name}-data.jsonl"
    save_samples(_samples(n, good=good), data)
    assert main(["eval", str(data), "--metrics", "recall@1,mrr", "--out", str(path)]) == 0
    return path


def test_gate_passes_fails_on_threshold_and_on_a_significant_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _results(tmp_path, "good", True)
    bad = _results(tmp_path, "bad", False)
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "gate", str(good), "--threshold", "recall@1=0.9")
    assert (code, out.splitlines()[-1]) == (0, "gate passed")
    assert "✓ recall@1 = 1.000, required >= 0.900" in out
    code, out, _ = run_cli(
        capsys, "gate", str(bad), "--threshold", "recall@1=0.8", "--baseline", str(good)
    )
    assert code == 1
    lines = out.splitlines()
    assert "✗ recall@1 = 0.333, required >= 0.800" in lines
    assert any(
        line.startswith(
            "✗ recall@1 baseline 1.000 → 0.333: -0.667, more than the allowed drop 0.030 "
            "and significant (p="
        )
        for line in lines
    )
    assert lines[-1] == "gate failed: 3 checks missed"


def test_gate_tolerates_an_insignificant_drop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _results(tmp_path, "good", True, n=3)
    worse = _results(tmp_path, "worse", False, n=3)  # one of three samples differs: p = 1
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "gate", str(worse), "--baseline", str(good), "--max-drop", "0")
    assert code == 0, out
    assert "more than the allowed drop 0.000 but not significant (p=0.500 >= alpha 0.05" in out


def test_langsmith_export_is_scored(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("langsmith")
    saved = tmp_path / "samples.jsonl"
    code, out, _ = run_cli(
        capsys, "langsmith", str(DATA / "langsmith_runs.jsonl"), "--metrics", "faithfulness",
        "--embedder", "hash", "--save-samples", str(saved),
    )  # fmt: skip
    assert code == 0
    samples = list(load_samples(saved))
    assert samples[0].question == "What is the capital of France?"
    assert [c.id for c in samples[0].contexts] == ["d1", "d2"]
    assert f"{len(samples)} samples, 1 metric" in out.splitlines()


def test_run_executes_a_langchain_pipeline_named_module_colon_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "my_pipeline.py").write_text(
        textwrap.dedent(
            """
            from langchain_core.documents import Document
            from langchain_core.retrievers import BaseRetriever
            from langchain_core.runnables import RunnableLambda

            DOCS = {f"d{i}": f"Fact {i}: the sky is blue." for i in range(6)}

            class Lookup(BaseRetriever):
                def _get_relevant_documents(self, query, *, run_manager):
                    n = query.split("number ")[1].rstrip("?")
                    return [Document(page_content=DOCS[f"d{n}"], id=f"d{n}")]

            def build():
                retriever = Lookup()
                return RunnableLambda(
                    lambda q: {"answer": retriever.invoke(q)[0].page_content}
                )
            """
        )
    )
    questions = tmp_path / "questions.jsonl"
    save_samples([s.model_copy(update={"answer": None, "contexts": []}) for s in _samples()],
                 questions)  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(
        capsys, "run", "my_pipeline:build", str(questions), "--metrics", "recall@1",
        "--save-samples", "captured.jsonl",
    )  # fmt: skip
    assert code == 0, out
    captured = list(load_samples(tmp_path / "captured.jsonl"))
    assert [s.contexts[0].id for s in captured] == [f"d{i}" for i in range(6)]
    assert captured[2].answer == "Fact 2: the sky is blue."
    assert "recall@1  1.000" in out
    code, _, err = run_cli(capsys, "run", "my_pipeline:DOCS", str(questions))
    assert code == 2
    assert "neither a LangChain runnable nor a LlamaIndex query engine" in err


def test_the_console_script_runs_and_reports_errors_without_a_traceback(data: Path) -> None:
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ragbridge console script is not installed"
    ok = subprocess.run(
        [exe, "eval", str(data), "--metrics", "mrr"], capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert "mrr" in ok.stdout
    bad = subprocess.run(
        [exe, "eval", str(data) + ".missing"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().endswith("no such file")
    assert json.loads(json.dumps(bad.stderr))  # printable, one line


def test_eval_writes_the_html_report(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.html"
    code, out, _ = run_cli(
        capsys, "eval", str(data), "--metrics", "recall@1,faithfulness", "--embedder", "hash",
        "--report", str(report),
    )  # fmt: skip
    assert code == 0
    assert f"wrote {report}" in out
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<details") >= 6  # one drill-down per sample
    assert "What is fact number 5?" in html


def test_a_missing_extra_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text((DATA / "langsmith_runs.jsonl").read_text())
    monkeypatch.setitem(sys.modules, "langsmith", None)  # as if the extra were not installed
    for name in [m for m in sys.modules if m.startswith("ragbridge.adapters.langsmith")]:
        monkeypatch.delitem(sys.modules, name)
    code, _, err = run_cli(capsys, "langsmith", str(runs))
    assert code == 2
    assert err.count("\n") == 1
    assert 'pip install ".[langsmith]" (in your ragbridge clone)' in err


def test_judge_and_embedder_specs_build_the_adapters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("httpx")
    from ragbridge.adapters.cli.options import build_embedder, build_judge
    from ragbridge.core.testing import HashEmbedder

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.delenv("RAGBRIDGE_API_KEY", raising=False)
    judge = build_judge("openai:gpt-4o-mini", "http://127.0.0.1:9/v1/")
    assert type(judge).__name__ == "OpenAIJudge"
    assert judge is not None
    assert judge.model == "gpt-4o-mini"
    assert "sk-secret-value" not in repr(judge)
    assert "http://127.0.0.1:9/v1" in repr(judge)
    assert isinstance(build_embedder("hash"), HashEmbedder)
    (tmp_path / "my_models.py").write_text(
        textwrap.dedent(
            """
            def chat():
                from langchain_core.language_models import GenericFakeChatModel
                return GenericFakeChatModel(messages=iter(["ok"]))

            def llm():
                from llama_index.core.llms import MockLLM
                return MockLLM()
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    if importlib.util.find_spec("langchain_core") is not None:
        assert type(build_judge("langchain:my_models:chat")).__name__ == "LangChainJudge"
    if importlib.util.find_spec("llama_index") is not None:
        assert type(build_judge("llamaindex:my_models:llm")).__name__ == "LlamaIndexJudge"
