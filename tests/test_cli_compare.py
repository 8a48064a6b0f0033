"""``ragbridge compare``: the command line of the cross-framework comparison, run in-process.

Until ``compare_command`` is registered in ``ragbridge.adapters.cli.main``, the tests build the
same parser around it (and handle errors as ``main`` does); once it is registered they go
through ``main`` itself.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from ragbridge.adapters.cli import compare_command
from ragbridge.adapters.cli.options import UserError
from ragbridge.core.results.crosscheck import CrossComparison
from ragbridge.core.sample import Context, Sample, save_samples

# The module (the package re-exports the function `main` under the same name).
cli_main = importlib.import_module("ragbridge.adapters.cli.main")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def _registered() -> bool:
    parser = cli_main.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return "compare" in action.choices
    return False


def main(argv: Sequence[str]) -> int:
    if _registered():
        code: int = cli_main.main(list(argv))
        return code
    parser = argparse.ArgumentParser(prog="ragbridge")
    sub = parser.add_subparsers(dest="command", required=True)
    compare_command.register(sub)
    args = parser.parse_args(list(argv))
    try:
        result: int = args.handler(args)
    except (UserError, ValueError, OSError, ImportError) as exc:
        print(f"ragbridge: error: {exc}", file=sys.stderr)
        return 2
    return result


@pytest.fixture
def data(tmp_path: Path) -> Path:
    samples = [
        Sample(
            id=f"q{i}",
            question=f"Where is landmark {i}?",
            answer=f"Landmark {i} is in {city}.",
            contexts=[
                Context(text=f"Landmark {i} stands in {city}.", id=f"d{i}"),
                Context(text=f"{city} is a city.", id="city"),
                Context(text="Bread is baked.", id="bread"),
            ],
            reference=f"It is in {city}.",
            reference_contexts=[f"Landmark {i} stands in {city}."],
            relevance={f"d{i}": 1, "city": i % 2, **({"unretrieved": 1} if i == 2 else {})},
        )
        for i, city in enumerate(["Paris", "Rome", "Oslo", "Lima"])
    ]
    path = tmp_path / "data.jsonl"
    save_samples(samples, path)
    return path


def test_compare_with_a_judge_writes_json_and_report(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.json"
    report = tmp_path / "report.html"
    code = main(
        [
            "compare",
            str(data),
            "--frameworks",
            "ragbridge,ragas,deepeval",
            "--measures",
            "faithfulness,context_recall,rouge_l",
            "--judge",
            "python:ragbridge.core.testing:CountingJudge",
            "--embedder",
            "hash",
            "--cache",
            str(tmp_path / "cache.sqlite"),
            "--out",
            str(out),
            "--report",
            str(report),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    assert lines[0] == (
        "4 samples; frameworks: ragbridge, ragas, deepeval, ragas:non-llm; judge counting-judge"
    )
    assert any(line.startswith("  deepeval: ") and "judge calls" in line for line in lines)
    assert "faithfulness" in lines
    assert "skipped deepeval / rouge_l: DeepEval has no non-LLM implementation" in lines
    assert f"wrote {out}" in lines
    assert f"wrote {report}" in lines

    comparison = CrossComparison.from_json(out)
    assert comparison.judge_model == "counting-judge"
    assert comparison.n_samples == 4
    assert [m.measure for m in comparison.measures] == ["faithfulness", "context_recall", "rouge_l"]
    faithfulness = comparison.measure("faithfulness")
    assert [f.framework for f in faithfulness.frameworks] == ["ragbridge", "ragas", "deepeval"]
    assert all(f.usage.calls > 0 for f in faithfulness.frameworks)
    assert [f.framework for f in comparison.measure("rouge_l").frameworks] == [
        "ragbridge",
        "ragas",
    ]
    html = report.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "ragas:non-llm" in html
    assert "deepeval" in html

    # A rerun on the cache spends nothing.
    code = main(
        [
            "compare",
            str(data),
            "--measures",
            "faithfulness",
            "--judge",
            "python:ragbridge.core.testing:CountingJudge",
            "--embedder",
            "hash",
            "--cache",
            str(tmp_path / "cache.sqlite"),
        ]
    )
    rerun = capsys.readouterr().out
    assert code == 0
    assert any(
        line.startswith("  ragas: 0 judge calls (8 cached)") for line in rerun.splitlines()
    ), rerun


def test_offline_compare_prints_what_it_skipped(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "compare",
            str(data),
            "--frameworks",
            "ragbridge:offline,ragas,deepeval",
            "--measures",
            "faithfulness,context_precision,id_context_recall",
            "--embedder",
            "hash",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0] == "4 samples; frameworks: ragbridge:offline, ragas:non-llm, ragas"
    assert [line for line in out if line.startswith("skipped ")] == [
        "skipped ragas / faithfulness: needs a judge (pass --judge)",
        "skipped deepeval / faithfulness: needs a judge (pass --judge)",
        "skipped ragas / context_precision: needs a judge (pass --judge)",
        "skipped deepeval / context_precision: needs a judge (pass --judge)",
        "skipped deepeval / id_context_recall: DeepEval has no non-LLM implementation",
    ]
    assert any(line.startswith("  ragbridge:offline vs ragas: spearman +1.00") for line in out), out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--frameworks", "ragas,trulens"], "--frameworks: unknown name 'trulens'; choose from"),
        (["--measures", "rouge,bleu"], "--measures: unknown name 'rouge'; choose from"),
        (["--frameworks", " , "], "--frameworks is empty"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    data: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", str(data), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"ragbridge: error: {message}")
    assert len(err.strip().splitlines()) == 1


def test_bad_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"ragbridge: error: {tmp_path / 'missing.jsonl'}: no such file"
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "question": 3}\n', encoding="utf-8")
    assert main(["compare", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragbridge: error: ")
    assert "question" in err
    assert len(err.strip().splitlines()) == 1


def test_a_measure_that_fails_everywhere_exits_1_naming_framework_and_fix(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unreferenced = tmp_path / "noref.jsonl"
    save_samples(
        [Sample(id=f"q{i}", question="Where?", answer=f"In {i}.") for i in range(3)], unreferenced
    )
    out = tmp_path / "cmp.json"
    code = main(
        ["compare", str(unreferenced), "--frameworks", "ragbridge,ragas", "--measures", "rouge_l",
         "--out", str(out)]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[0].startswith("ragbridge: error: ragbridge rouge_l: 3 of 3 cells failed")
    assert err[0].endswith(
        "fix: add 'reference' to the samples in the input file, or drop rouge_l from --measures"
    )
    assert err[1].startswith("ragbridge: error: ragas rouge_l: 3 of 3 cells failed")
    assert CrossComparison.from_json(out).n_samples == 3  # written anyway


def test_timeout_and_retries_shape_the_shared_judge_engine(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbridge.adapters import compare
    from ragbridge.core.judging.engine import JudgeEngine

    seen: dict[str, object] = {}
    real = compare.build_engines

    # The command hands its flags to compare_frameworks_on as Settings fields; the engine
    # that one call builds for every framework is the one to check.
    def spy(settings: object, metrics: object) -> object:
        engines = real(settings, metrics)  # type: ignore[arg-type]
        seen["judge"] = engines.judge
        return engines

    monkeypatch.setattr(compare, "build_engines", spy)
    code = main(
        ["compare", str(data), "--frameworks", "ragbridge", "--measures", "faithfulness",
         "--judge", "python:ragbridge.core.testing:CountingJudge", "--timeout", "7",
         "--max-retries", "1", "--concurrency", "2"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    engine = seen["judge"]
    assert isinstance(engine, JudgeEngine)
    assert (engine.timeout, engine.max_retries, engine.max_concurrency) == (7.0, 1, 2)


def test_output_paths_are_checked_before_anything_runs(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragbridge.adapters import compare

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the comparison ran before its outputs were checked")

    monkeypatch.setattr(compare, "compare_frameworks_on", refuse)
    missing = tmp_path / "no" / "cmp.json"
    assert main(["compare", str(data), "--out", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"ragbridge: error: --out {missing}: the folder {missing.parent} does not exist\n"
    )
    assert main(["compare", str(data), "--cache", str(tmp_path)]) == 2
    assert "is a folder; name a file in it" in capsys.readouterr().err
