"""``ragbridge robustness``: its arguments, its plan, a run on the demo pipeline and its report.

* bad ``--ratios`` are refused naming every bad value, and a ratio of 1 names the negative
  condition instead;
* DATA.jsonl is checked before the pipeline is imported, ``--dry-run`` prints the plan and
  imports (so calls) nothing;
* the demo's LangChain pipeline runs end to end with ``--cache``, and the rerun calls neither
  the pipeline nor the judge;
* the report draws each measure's curve over the noise ratio and a row per condition, and a
  hostile question, answer or error renders only as text.
"""

from __future__ import annotations

import html
import json
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.adapters.cli.robustness_command import parse_ratios
from ragbridge.adapters.report.robustness_view import render_robustness_report
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.robustness.conditions import Condition
from ragbridge.core.robustness.harness import run_robustness
from ragbridge.core.robustness.types import Perturb
from ragbridge.core.sample import Context, Sample, load_samples, save_samples
from ragbridge.core.testing import HashEmbedder
from tests.test_report import HOSTILE, HOSTILE_ID, _parse

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "adapters" / "demo" / "data" / "handbook_questions.jsonl"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one-line argparse error of ``argv`` (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A pipeline module of the test's own: the demo's LangChain pipeline (hash embedder, no
    model file) behind a counter of pipeline calls, a counting judge, and ``broken``, whose
    import fails (a dry run must not import it)."""
    name = f"robustness_pipe_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from langchain_core.runnables import RunnableLambda

            from ragbridge.adapters.demo.pipelines import langchain_pipeline
            from ragbridge.core.testing import CountingJudge, HashEmbedder

            CALLS = [0]
            JUDGE = CountingJudge()

            def _count(question):
                CALLS[0] += 1
                return question

            def build():
                return RunnableLambda(_count) | langchain_pipeline(embedder=HashEmbedder())

            def judge():
                return JUDGE
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "broken_pipe.py").write_text("raise RuntimeError('imported!')\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)
    sys.modules.pop("broken_pipe", None)


def _questions(tmp_path: Path, n: int = 6) -> Path:
    samples = list(load_samples(QUESTIONS))[:n]
    path = tmp_path / "questions.jsonl"
    save_samples(samples, path)
    return path


# --------------------------------------------------------------------------- arguments


def test_bad_ratios_are_refused_naming_each_bad_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = usage_error(capsys, "robustness", "m:x", "d.jsonl", "--ratios", "0,1.5,x")
    assert "argument --ratios" in line
    assert "1.5 is outside [0, 1)" in line
    assert "'x' is not a number" in line
    line = usage_error(capsys, "robustness", "m:x", "d.jsonl", "--ratios", "0,,0.2")
    assert "an empty item" in line


def test_a_ratio_of_one_is_the_negative_condition(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(capsys, "robustness", "m:x", "d.jsonl", "--ratios", "0.2,1")
    assert "1 replaces every passage: that is the negative condition" in line


def test_ratios_keep_their_order_once_each() -> None:
    assert parse_ratios("0, 0.4,0.2,0.4") == (0.0, 0.4, 0.2)
    assert parse_ratios("0.5") == (0.5,)


def test_the_data_is_checked_before_the_pipeline_is_imported(
    module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q?"}\n\n{"id": "b", "question": 3}\n', "utf-8")
    code, _, err = run_cli(capsys, "robustness", "broken_pipe:build", str(bad))
    assert code == 2
    assert f"{bad}:3: question" in err
    assert "imported!" not in err
    assert "broken_pipe" not in sys.modules
    cf = tmp_path / "cf.jsonl"
    cf.write_text(
        '{"id": "a", "question": "q?", "reference": "r"}\n\n'
        '{"id": "b", "question": "q?", "metadata": {"counterfactual": {"original": "x"}}}\n',
        "utf-8",
    )
    code, _, err = run_cli(capsys, "robustness", "broken_pipe:build", str(cf))
    assert code == 2
    assert f"{cf}:3: " in err
    assert "counterfactual" in err
    assert "broken_pipe" not in sys.modules


def test_judge_counterfactuals_need_a_judge(
    module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _questions(tmp_path)
    code, _, err = run_cli(
        capsys, "robustness", "broken_pipe:build", str(data), "--counterfactuals", "judge"
    )
    assert code == 2
    assert "--counterfactuals judge needs a judge" in err
    assert "broken_pipe" not in sys.modules


# --------------------------------------------------------------------------- the plan


def test_a_dry_run_prints_the_plan_and_calls_nothing(
    module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _questions(tmp_path, n=6)
    code, out, _ = run_cli(
        capsys, "robustness", "broken_pipe:build", str(data), "--dry-run", "--embedder", "hash"
    )
    assert code == 0, out
    assert "broken_pipe" not in sys.modules  # the pipeline was not even imported
    assert "6 question(s) x 7 condition(s)" in out
    assert "pipeline calls: 42" in out  # 6 questions x (clean, 4 noise, negative, counterfactual)
    assert "judge calls: 0 for scoring" in out

    code, out, _ = run_cli(
        capsys, "robustness", "broken_pipe:build", str(data), "--dry-run", "--ratios", "0,0.5",
        "--no-negative", "--judge", f"python:{module}:judge", "--embedder", "hash",
        "--price-in", "1", "--price-out", "2", "--cache", "c.sqlite",
    )  # fmt: skip
    assert code == 0, out
    assert "6 question(s) x 3 condition(s) (noise@0, noise@0.5, counterfactual)" in out
    assert "pipeline calls: 18" in out
    calls = re.search(r"judge calls: (\d+) for scoring", out)
    assert calls is not None, out
    assert int(calls[1]) > 0, out
    assert "estimated judge cost: $" in out
    assert "answers already in --cache are not subtracted" in out
    assert sys.modules[module].JUDGE.calls == 0  # counted, not sent
    assert not (tmp_path / "c.sqlite").exists()


# --------------------------------------------------------------------------- a run


def test_the_demo_langchain_pipeline_runs_and_a_rerun_pays_nothing(
    module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_core")
    data = _questions(tmp_path, n=6)
    argv = [
        "robustness", f"{module}:build", str(data), "--ratios", "0,0.5", "--embedder", "hash",
        "--judge", f"python:{module}:judge", "--cache", "cache.sqlite",
    ]  # fmt: skip
    code, out, err = run_cli(
        capsys, *argv, "--out", "cells.jsonl", "--report", "robustness.html",
        "--save-samples", "answers.jsonl",
    )  # fmt: skip
    assert code == 0, err
    pipe = sys.modules[module]
    first_calls, first_judge = pipe.CALLS[0], pipe.JUDGE.calls
    assert first_calls > 6
    assert first_judge > 0
    # the plan came before the run, and a line per condition after it
    assert err.index("plan: pipeline calls: 24") < err.index("ragbridge: noise@0.5: ")
    header = out.splitlines()[0]
    assert f"pipeline: {first_calls} calls, 0 answers from the cache" in header
    table = {line.split()[0]: line for line in out.splitlines()[2:] if line[:1].isalpha()}
    assert set(table) >= {"noise@0", "noise@0.5", "negative", "counterfactual"}
    assert re.match(r"noise@0\s+6\s+\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", table["noise@0"])

    cells = [json.loads(line) for line in Path("cells.jsonl").read_text("utf-8").splitlines()]
    ids = {c.get("sample_id") for c in cells if "sample_id" in c}
    assert {"q01@noise@0", "q01@noise@0.5", "q01@negative"} <= ids
    answered = list(load_samples("answers.jsonl"))
    assert {s.metadata["robustness_condition"] for s in answered} >= {"noise@0.5", "negative"}
    page = Path("robustness.html").read_text("utf-8")
    assert '<section id="robustness">' in page
    assert '<a href="#robustness">Robustness</a>' in page
    for metric in ("answer_correctness", "faithfulness", "abstention"):
        assert f'<polyline class="curve" data-metric="{metric}"' in page
    assert page.count('<tr data-condition="') == 4

    pipe.CALLS[0] = 0
    pipe.JUDGE.calls = 0
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    assert pipe.CALLS[0] == 0, "the rerun asked the pipeline again"
    assert pipe.JUDGE.calls == 0, "the rerun asked the judge again"
    summary = json.loads(out)
    assert summary["pipeline_calls"] == 0
    assert summary["answers_cached"] == first_calls
    assert [s["condition"] for s in summary["summary"]] == [
        "noise@0", "noise@0.5", "negative", "counterfactual",
    ]  # fmt: skip
    # the plan, printed before the run, knew: every answer cached, nothing to ask
    assert summary["plan"]["answers_cached"] == first_calls
    assert summary["plan"]["pipeline_calls"] == 0
    assert "plan: pipeline calls: 0" in err


# --------------------------------------------------------------------------- the report


class HostilePipeline:
    """A `RobustPipeline` whose questions, answers, passages and errors are markup."""

    identity = "hostile"

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        if sample.id == "boom":
            raise RuntimeError(HOSTILE[1])
        live = [
            Context(text=f"{t} ({sample.question} {i})", id=f"{sample.id}-{i}")
            for i, t in enumerate(HOSTILE)
        ]
        given = perturb(live) if perturb is not None else live
        return sample.model_copy(update={"answer": HOSTILE[0], "contexts": given})


def test_the_report_draws_the_curve_and_hostile_text_stays_text() -> None:
    questions = [
        Sample(id=HOSTILE_ID, question=HOSTILE[0], reference="In 2021 <b>it</b> was 12."),
        Sample(id="q2", question="Hostile <b>question</b>?", reference="It was 12 in 2021."),
        Sample(id="q3", question="A third question?", reference="Forty <i>two</i>."),
        Sample(id="boom", question="Fails?", reference="x"),
    ]
    result = run_robustness(
        HostilePipeline(),
        questions,
        conditions=[Condition("noise", 0.25), Condition("negative")],
        embedder=HashEmbedder(),
    )
    page = render_robustness_report(result, title="<robust>", generated_by="ci & me")
    assert isinstance(result.evaluation, Evaluation)
    section = page[page.index('<section id="robustness">') :]
    section = section[: section.index("</section>")]
    # the curve: a point per noise ratio for each measure with values, the CI as a band
    assert 'class="robustness-curve"' in section
    assert section.count('<circle class="curve-pt" data-metric="abstention"') == 2
    assert 'class="ci-band"' in section
    assert page.count('<tr data-condition="') == 3
    # the failed question is skipped with its (hostile) reason, escaped
    assert "the clean run failed" in section
    assert html.escape(HOSTILE[1], quote=True) in section
    # nothing hostile is markup anywhere on the page
    assert "<script>alert" not in page
    assert "<img" not in page
    assert "<svg onload" not in page
    tags = _parse(page)
    assert tags.starts["script"] == 2
    assert tags.script_types == ["application/json", None]
    assert tags.starts["img"] == 0
    assert not [a for a in tags.attrs if a[1].startswith("on")]
    for ident in tags.ids:
        assert re.fullmatch(r"[a-z0-9-]+", ident), ident
    assert "default-src 'none'" in page


def test_a_curve_of_one_ratio_is_a_point_with_its_interval_and_a_gap_breaks_the_line() -> None:
    from ragbridge.adapters.report.robustness_view import curve_svg
    from ragbridge.core.results.stats import MeanCI

    svg = curve_svg({"faithfulness": [(0.0, MeanCI(0.5, 0.4, 0.6, 3))]})
    assert svg.count('<circle class="curve-pt"') == 1
    assert '<line class="ci-band"' in svg
    assert "<polyline" not in svg  # one point draws no line
    svg = curve_svg(
        {
            "<b>m</b>": [
                (0.0, MeanCI(0.9, 0.8, 1.0, 5)),
                (0.4, None),  # nothing scored here: the line stops, it does not dive to 0
                (0.8, MeanCI(0.5, 0.3, 0.7, 5)),
            ]
        }
    )
    assert svg.count('<circle class="curve-pt"') == 2
    assert "<polyline" not in svg
    assert 'data-metric="&lt;b&gt;m&lt;/b&gt;"' in svg
    assert "<b>" not in svg
