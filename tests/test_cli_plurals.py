"""Counts printed with their noun: "1 run", never "1 runs" (issue 28).

Before: ``ragbridge history`` over a store holding one run printed "1 runs", ``export`` of one
sample "wrote 1 samples", ``compare`` of one sample "1 samples; frameworks: ...", and the cache,
report, cluster, annotate and testset commands likewise for a count of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbridge.adapters.cli.main import main
from ragbridge.adapters.cli.plural import noun, plural
from ragbridge.core import Context, Sample
from ragbridge.core.sample import save_samples


def _one(tmp_path: Path) -> Path:
    data = tmp_path / "one.jsonl"
    sample = Sample(
        id="q",
        question="How many days?",
        answer="Twenty days.",
        contexts=[Context(text="Twenty days of leave.", id="d1")],
        reference="Twenty days.",
        relevance={"d1": 1},
    )
    save_samples([sample], data)
    return data


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plural_and_noun() -> None:
    assert [plural(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert plural(1, "reply", "replies") == "1 reply"
    assert plural(3, "reply", "replies") == "3 replies"
    assert [noun(n, "has", "have") for n in (1, 2)] == ["has", "have"]


def test_history_of_one_run_says_1_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _one(tmp_path)
    store = tmp_path / "runs.sqlite"
    code, _, err = _cli(capsys, "eval", str(data), "--metrics", "mrr", "--history", str(store))
    assert code == 0, err
    code, out, err = _cli(capsys, "history", str(store))
    assert code == 0, err
    head = out.splitlines()[0]
    assert head.startswith(f"{store}: 1 run of ")
    assert "1 runs" not in out


def test_export_and_eval_of_one_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _one(tmp_path)
    code, out, _ = _cli(capsys, "export", str(data), "--to", "deepeval", str(tmp_path / "d.json"))
    assert code == 0
    assert out.startswith("wrote 1 sample to ")
    code, out, _ = _cli(capsys, "eval", str(data), "--metrics", "mrr")
    assert out.splitlines()[0] == "1 sample, 1 metric"


def test_compare_of_one_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ragas")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    data = _one(tmp_path)
    code, out, err = _cli(capsys, "compare", str(data), "--frameworks", "ragbridge,ragas",
                          "--measures", "id_context_recall")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0] == "1 sample; frameworks: ragbridge, ragas"


def test_a_split_of_one_sample_is_refused_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "split", str(_one(tmp_path)))
    assert code == 2
    assert "1 sample is too few to split" in err
