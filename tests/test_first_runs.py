"""First runs that pass: the default metric set fits the file, a framework's own NaN at an input
it cannot use is its skip, and ids that never match the labels are said whatever the run size.

Before (issue 28): ``ragbridge eval mine.jsonl`` on a valid file without labels exited 1 with
three errors about recall@5, mrr and ndcg@5; ``ragbridge compare`` on the demo's samples exited 1
with "judge_error ×5: RAGAS returned NaN" and no judge in use; a 2-sample run whose ids never
matched the labels scored recall 0.0 with no warning.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from ragbridge.adapters.cli.default_metrics import FieldCounts, fit_default
from ragbridge.adapters.cli.main import main
from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.sample import save_samples

DEFAULT_LINE = (
    "ragbridge: metrics: faithfulness, answer_relevance (default; no sample has a reference or "
    "relevance labels: context_recall, recall@5, mrr, ndcg@5 left out)"
)


def _answered(n: int, **fields: object) -> list[Sample]:
    """``n`` answered samples with one context each; ``fields`` set on every one."""
    return [
        Sample(
            id=f"q{i}",
            question=f"How many days of leave does plan {i} give?",
            answer=f"Plan {i} gives {20 + i} days of leave.",
            contexts=[Context(text=f"Plan {i} gives {20 + i} days of leave a year.", id=f"d{i}")],
            **fields,  # type: ignore[arg-type]
        )
        for i in range(n)
    ]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- 1. the default set


def test_a_valid_file_without_labels_passes_with_the_default_set_and_one_line_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "mine.jsonl"
    save_samples(_answered(4), data)
    code, out, err = _cli(capsys, "eval", str(data), "--embedder", "hash")
    assert code == 0, err
    assert out.splitlines()[0] == "4 samples, 2 metrics"
    lines = err.splitlines()
    assert lines[0] == DEFAULT_LINE
    assert [line for line in lines if "metrics:" in line] == [DEFAULT_LINE]  # one line
    assert "error" not in err


def test_named_metrics_are_never_fitted_even_when_they_spell_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.adapters.cli.options import DEFAULT_METRICS

    data = tmp_path / "mine.jsonl"
    save_samples(_answered(4), data)
    for names in ("recall@5,faithfulness", DEFAULT_METRICS):
        code, _, err = _cli(capsys, "eval", str(data), "--embedder", "hash", "--metrics", names)
        assert code == 1
        assert "ragbridge: error: recall@5: 4 of 4 cells failed — missing_input" in err
        assert "(default;" not in err


def test_some_labelled_samples_keep_the_ranking_measures_and_the_line_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = _answered(4)
    samples[:3] = [s.model_copy(update={"relevance": {s.contexts[0].id: 1}}) for s in samples[:3]]
    data = tmp_path / "mixed.jsonl"
    save_samples(samples, data)
    code, out, err = _cli(capsys, "eval", str(data), "--embedder", "hash")
    assert err.splitlines()[0] == (
        "ragbridge: metrics: faithfulness, answer_relevance, recall@5, mrr, ndcg@5 (default; no "
        "sample has a reference: context_recall left out; 1 of 4 samples lacks relevance labels: "
        "recall@5, mrr, ndcg@5 fail there (missing_input))"
    )
    assert "recall@5          1.000" in out  # the three labelled samples are scored
    assert code == 1  # the unlabelled one is reported: add labels, or {} for "no relevant doc"
    assert "fix: add 'relevance' to the samples in the input file" in err


def test_a_retrieval_only_file_keeps_the_ranking_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = [
        s.model_copy(update={"answer": None, "relevance": {s.contexts[0].id: 1}})
        for s in _answered(3)
    ]
    data = tmp_path / "retrieval.jsonl"
    save_samples(samples, data)
    code, out, err = _cli(capsys, "eval", str(data))
    assert code == 0, err
    assert err.splitlines() == [
        "ragbridge: metrics: recall@5, mrr, ndcg@5 (default; no sample has an answer or a "
        "reference: faithfulness, answer_relevance, context_recall left out)"
    ]
    assert out.splitlines()[0] == "3 samples, 3 metrics"


def test_a_file_no_default_metric_fits_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "questions.jsonl"
    save_samples([Sample(id="q", question="Why?")], data)
    code, _, err = _cli(capsys, "eval", str(data))
    assert code == 2
    assert err.splitlines() == [
        "ragbridge: error: no default metric fits these samples: no sample has an answer, "
        "contexts, a reference or relevance labels; name the metrics with --metrics"
    ]


def test_run_fits_the_default_to_the_questions_and_what_the_pipeline_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "first_pipeline.py").write_text(
        textwrap.dedent(
            """
            from langchain_core.runnables import RunnableLambda

            def build():
                return RunnableLambda(lambda q: {"answer": "Twenty days."})
            """
        ),
        encoding="utf-8",
    )
    questions = tmp_path / "questions.jsonl"
    save_samples([Sample(id=f"q{i}", question=f"Question {i}?") for i in range(2)], questions)
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(capsys, "run", "first_pipeline:build", str(questions),
                          "--embedder", "hash")  # fmt: skip
    assert err.splitlines()[0] == DEFAULT_LINE
    assert out.splitlines()[0] == "2 samples, 2 metrics"
    assert code == 0, err


def test_fit_default_reads_what_each_measure_requires() -> None:
    counts = FieldCounts.of(_answered(2, reference="Twenty days."))
    choice = fit_default(["faithfulness", "context_recall", "mrr"], counts)
    assert choice.names == ["faithfulness", "context_recall"]
    assert choice.line == (
        "metrics: faithfulness, context_recall (default; no sample has relevance labels: mrr "
        "left out)"
    )
    everything = FieldCounts.of(_answered(2, reference="x", relevance={}))  # {} is labelled
    assert fit_default(["faithfulness", "mrr"], everything).line is None
    produced = FieldCounts.of([Sample(id="q", question="Why?")], produced=("answer", "contexts"))
    assert fit_default(["faithfulness", "recall@5"], produced).names == ["faithfulness"]


# --------------------------------------------------------------------------- 2. a framework's NaN


def _no_relevant_doc() -> list[Sample]:
    """Two answerable questions and one with no relevant document (``relevance == {}``)."""
    samples = [
        s.model_copy(update={"relevance": {s.contexts[0].id: 1}, "reference": s.answer})
        for s in _answered(2)
    ]
    samples.append(samples[0].model_copy(update={"id": "none", "relevance": {}}))
    return samples


def test_ragas_nan_at_a_question_without_relevant_ids_is_its_skip_not_a_judge_error() -> None:
    pytest.importorskip("ragas")
    from ragbridge.adapters.compare import compare_frameworks_on

    run = compare_frameworks_on(
        _no_relevant_doc(), frameworks=["ragbridge", "ragas"], measures=["id_context_recall"]
    )
    cell = run.evaluations["ragas"].get("none", "id_context_recall")
    assert cell is not None
    assert cell.status == "skipped"
    assert cell.failure is None
    assert "'relevance' has no grade > 0" in (cell.reason or "")
    ours = run.evaluations["ragbridge"].get("none", "id_context_recall")
    assert ours is not None
    assert ours.status == "skipped"  # both skip it: no edge case, no failure
    assert run.evaluations["ragas"].get("q0", "id_context_recall").value == 1.0  # type: ignore[union-attr]


def test_ragas_nan_without_a_judge_is_never_called_a_judge_error() -> None:
    pytest.importorskip("ragas")
    from ragbridge.adapters.ragas.provider import _unjudged_nan

    sample = _no_relevant_doc()[0]
    score = _unjudged_nan("id_context_precision", sample, math.nan)
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind.value == "invalid_output"
    assert "without calling a judge" in score.failure.message
    assert _unjudged_nan("id_context_recall", sample, 0.5) is None  # a value is RAGAS's value


def test_compare_on_samples_with_no_answer_questions_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ragas")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    data = tmp_path / "samples.jsonl"
    save_samples(_no_relevant_doc(), data)
    code, out, err = _cli(capsys, "compare", str(data), "--frameworks", "ragbridge,ragas",
                          "--measures", "id_context_recall")  # fmt: skip
    assert code == 0, err
    assert "judge_error" not in out + err
    assert "  ragas                1.000 [1.000, 1.000]     scored 2, failed 0" in out


# --------------------------------------------------------------------------- 3. ids vs labels


def _mismatched(ids: list[str]) -> list[Sample]:
    return [
        Sample(
            id=sid,
            question="q?",
            contexts=[Context(text="t", id=f"chunk-{sid}")],
            relevance={f"doc-{sid}": 1},
        )
        for sid in ids
    ]


def test_a_two_sample_run_whose_ids_never_match_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "two.jsonl"
    save_samples(_mismatched(["a", "b"]), data)
    code, out, err = _cli(capsys, "eval", str(data), "--metrics", "recall@5")
    assert "recall@5  0.000" in out
    (warning,) = [line for line in err.splitlines() if line.startswith("ragbridge: warning:")]
    assert warning.startswith(
        "ragbridge: warning: ranking measures: 2 of 2 labelled samples retrieved no labelled "
        "context id (e.g. retrieved 'chunk-a' vs labelled 'doc-a')"
    )
    assert code == 0


def test_a_few_mismatched_samples_among_matching_ones_are_named() -> None:
    good = [
        Sample(id=f"g{i}", question="q?", contexts=[Context(text="t", id=f"d{i}")],
               relevance={f"d{i}": 1})
        for i in range(9)
    ]  # fmt: skip
    (line,) = evaluate([*good, *_mismatched(["odd"])], ["mrr"]).metadata["warnings"]
    assert line == (
        "ranking measures: 1 of 10 labelled samples retrieved no labelled context id (odd; e.g. "
        "retrieved 'chunk-odd' vs labelled 'doc-odd') — retrieval misses, or ids that name other "
        "things than the labels"
    )
    many = evaluate([*good, *_mismatched([f"m{i}" for i in range(7)])], ["mrr"])
    assert "(m0, m1, m2, m3, m4, … and 2 more; e.g." in many.metadata["warnings"][0]
