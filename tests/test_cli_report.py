"""``ragbridge report``: the HTML report of results files, two runs diffed, trends from a store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragbridge.adapters.cli.main import main
from ragbridge.adapters.cli.report_command import default_names
from ragbridge.core.monitoring.records import RunRecord
from ragbridge.core.monitoring.store import MonitorStore
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import compare
from ragbridge.core.sample import Context, Sample, save_samples


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    samples = [
        Sample(
            id=f"q{i}",
            question=f"What does rule {i} say?",
            answer=f"Rule {i} says {i}.",
            contexts=[Context(text=f"Rule {i}: {i}.", id=f"r{i}")],
            relevance={f"r{i}": 1},
        )
        for i in range(6)
    ]
    data = tmp_path / "eval.jsonl"
    save_samples(samples, data)
    base, new = Evaluation(), Evaluation()
    for i, s in enumerate(samples):
        base.add(s.id, "recall@5", Score(value=1.0 if i % 2 else 0.0))
        new.add(s.id, "recall@5", Score(value=1.0))
        base.add(s.id, "token_f1", Score(value=0.5))
        new.add(s.id, "token_f1", Score(value=0.5 + i / 20))
    a, b = tmp_path / "results.base.jsonl", tmp_path / "results.new.jsonl"
    base.to_jsonl(a)
    new.to_jsonl(b)
    return data, a, b


def test_two_results_files_are_diffed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, a, b = _files(tmp_path)
    out = tmp_path / "report.html"
    assert main(["report", str(a), str(b), "--samples", str(data), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "report of 2 runs (base, new) over 6 samples" in printed
    assert f"wrote {out}" in printed
    page = out.read_text(encoding="utf-8")
    assert "<title>ragbridge report: new vs base</title>" in page
    assert f"<dt>Input file</dt><dd>{data}</dd>" in page
    table = re.search(r'<table class="paired" data-a="base" data-b="new">(.*?)</table>', page, re.S)
    assert table is not None
    for metric, c in compare(Evaluation.from_jsonl(a), Evaluation.from_jsonl(b)).items():
        assert c.diff is not None
        diff = re.escape(f"{c.diff:+.3f}")
        row = rf'<tr data-metric="{metric}">.*?<td class="num diff[^"]*">{diff}</td>'
        assert re.search(row, table.group(1))
    assert "What does rule 3 say?" in page


def test_one_results_file_without_samples(tmp_path: Path) -> None:
    _, a, _ = _files(tmp_path)
    out = tmp_path / "one.html"
    assert main(["report", str(a), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert 'id="paired"' not in page
    assert f"<dt>Input file</dt><dd>{a}</dd>" in page  # the results file when nothing better
    assert f"<title>ragbridge report: {a}</title>" in page


def test_names_and_a_samples_file_per_run(tmp_path: Path) -> None:
    data, a, b = _files(tmp_path)
    out = tmp_path / "r.html"
    argv = ["report", str(a), str(b), "--samples", str(data), str(data)]
    argv += ["--name", "before", "after", "--title", "T <1>", "--out", str(out)]
    assert main(argv) == 0
    page = out.read_text(encoding="utf-8")
    assert '<table class="paired" data-a="before" data-b="after">' in page
    assert "<title>T &lt;1&gt;</title>" in page


def test_trends_from_a_history_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = _files(tmp_path)
    store = tmp_path / "history.sqlite"
    with MonitorStore(store) as st:
        for i in range(3):
            summary = {"recall@5": {"mean": 0.5 + i / 10, "ci_low": 0.4, "ci_high": 0.9}}
            st.add_run(
                RunRecord(run_id=f"r{i}", timestamp=1e9 + i, command="eval", summary=summary)
            )
    out = tmp_path / "r.html"
    assert main(["report", str(a), "--history", str(store), "--out", str(out)]) == 0
    assert "trends over 3 recorded runs" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert '<svg class="trend" data-metric="recall@5"' in page
    assert page.count('<circle class="run-pt"') == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--name", "x"], "--name: 1 name for 2 results files"),
        (["--name", "x", "x"], "--name: 'x' is given twice"),
        (["--samples", "S", "S", "S"], "--samples: 3 files for 2 results files"),
        (["--history", "missing.sqlite"], "--history missing.sqlite: no such file"),
        (["--history", "A"], "--history A: not a monitor store (not an SQLite file)"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    message: str,
) -> None:
    data, a, b = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    extra = [{"S": str(data), "A": a.name}.get(x, x) for x in extra]
    message = message.replace("--history A", f"--history {a.name}")
    out = tmp_path / "r.html"
    assert main(["report", a.name, b.name, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert not (tmp_path / "missing.sqlite").exists()  # a typo creates no store


def test_out_may_not_be_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = _files(tmp_path)
    before = a.read_bytes()
    assert main(["report", str(a), "--out", str(a)]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert a.read_bytes() == before


def test_samples_that_match_no_result_are_said_out_loud(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, a, _ = _files(tmp_path)
    other = tmp_path / "other.jsonl"
    save_samples([Sample(id="zz", question="?")], other)
    assert main(["report", str(a), "--samples", str(other), "--out", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "ragbridge: warning:" in err
    assert "none of its 6 sample ids is in the samples given for it" in err


def test_default_names() -> None:
    assert default_names(["out/results.langchain.jsonl", "out/results.llamaindex.jsonl"]) == [
        "langchain",
        "llamaindex",
    ]
    assert default_names(["a/results.jsonl", "b/results.jsonl"]) == [
        "a/results.jsonl",
        "b/results.jsonl",
    ]
    assert default_names(["run_1.jsonl", "run_2.jsonl", "run_3.jsonl"]) == ["1", "2", "3"]
    assert default_names(["baseline.jsonl", "candidate.jsonl"]) == ["baseline", "candidate"]
    assert default_names(["only.jsonl"]) == ["only"]
