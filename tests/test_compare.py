"""`ragbridge.adapters.compare`: ragbridge, RAGAS and DeepEval on the same samples, judge and cache.

Real RAGAS 0.4 and DeepEval 4.3 metrics run offline on ragbridge's `CountingJudge` (which answers
any schema with a minimal valid instance) or on small scripted judges written here; embeddings
come from `HashEmbedder`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from ragbridge.adapters._extras import install_hint
from ragbridge.adapters.compare import (
    ID_MEASURES,
    JUDGE_MEASURES,
    MEASURES,
    STRING_MEASURES,
    compare_frameworks_on,
)
from ragbridge.core.judging.judge import JudgeReply, Message, PermanentJudgeError
from ragbridge.core.results.crosscheck import CrossComparison
from ragbridge.core.results.evaluation import Evaluation, FailureKind, Usage
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge

ALL = ("ragbridge", "ragbridge:offline", "ragas", "deepeval")
NEEDS_JUDGE = "needs a judge (pass --judge)"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # DeepEval writes ./.deepeval/ into the working directory; RAGAS must not phone home.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def _samples() -> list[Sample]:
    """Four samples, three contexts each, with ids, labels, references and reference contexts;
    varied enough that the offline measures are not constant."""
    rows = [
        ("Where is the Eiffel Tower?", "The Eiffel Tower is in Paris.", "It is in Paris.",
         {"a": 1}),
        ("When did it open?", "It opened in 1889 for the World's Fair.", "It opened in 1889.",
         {"a": 1, "b": 1}),
        ("How tall is it?", "Paris.", "paris", {"x": 1}),
        ("Who designed it?", "Gustave Eiffel's company designed the tower.",
         "The company of Gustave Eiffel designed it.", {"a": 1, "c": 2, "x": 1}),
    ]  # fmt: skip
    out = []
    for i, (question, answer, reference, relevance) in enumerate(rows):
        contexts = [
            Context(text=f"{answer} Source {i}.", id="a"),
            Context(text="Paris is the capital of France.", id="b"),
            Context(text="Cheese is made from milk.", id="c"),
        ]
        out.append(
            Sample(
                id=f"s{i}",
                question=question,
                answer=answer,
                contexts=contexts,
                reference=reference,
                reference_contexts=[f"{answer} Source {i}."] if i % 2 == 0 else [reference],
                relevance=relevance,
            )
        )
    return out


def _assert_cells_are_values_or_failures(evaluation: Evaluation, measures: Sequence[str]) -> None:
    for measure in measures:
        column = evaluation.column(measure)
        assert sorted(column) == ["s0", "s1", "s2", "s3"], measure
        for sid, score in column.items():
            if score.value is None:
                assert score.failure is not None, (measure, sid, score)
            else:
                assert 0.0 <= score.value <= 1.0


# --------------------------------------------------------------------------- with a judge


def test_three_frameworks_on_one_counting_judge_and_cache(tmp_path: Path) -> None:
    judge = CountingJudge()
    seen: list[tuple[int, int]] = []
    run = compare_frameworks_on(
        _samples(),
        frameworks=("ragbridge", "ragas", "deepeval"),
        measures=JUDGE_MEASURES,
        judge=judge,
        embedder=HashEmbedder(),
        cache=tmp_path / "cache.sqlite",
        progress=lambda done, total: seen.append((done, total)),
    )
    # "ragas" also brings RAGAS's non-LLM context measures (the samples have reference_contexts).
    assert list(run.evaluations) == ["ragbridge", "ragas", "deepeval", "ragas:non-llm"]
    assert run.evaluations["ragas:non-llm"].metrics == ["context_precision", "context_recall"]
    assert run.evaluations["ragas:non-llm"].usage() == Usage()
    for label in ("ragbridge", "ragas", "deepeval"):
        evaluation = run.evaluations[label]
        assert evaluation.metrics == list(JUDGE_MEASURES), label
        _assert_cells_are_values_or_failures(evaluation, JUDGE_MEASURES)
        assert evaluation.metadata["judge_model"] == "counting-judge"
        assert evaluation.usage().calls > 0, label

    # Every judge call is attributed to exactly one framework cell.
    usage = run.usage()
    assert sum(u.calls for u in usage.values()) == judge.calls
    # ragbridge shares calls between measures: 3 per sample for the four (metrics/__init__).
    assert usage["ragbridge"].calls == 3 * 4
    # Per sample, at 3 contexts: RAGAS faithfulness 2, answer_relevancy 1 (+2 identical
    # strictness prompts served from the cache), context_precision 1 per context, recall 1.
    ragas_calls = {m: sum(s.usage.calls for s in run.evaluations["ragas"].column(m).values())
                   for m in JUDGE_MEASURES}  # fmt: skip
    assert ragas_calls == {
        "faithfulness": 8,
        "answer_relevance": 4,
        "context_precision": 12,
        "context_recall": 4,
    }
    assert usage["ragas"].cached_calls == 8
    deepeval_calls = {
        m: sum(s.usage.calls for s in run.evaluations["deepeval"].column(m).values())
        for m in JUDGE_MEASURES
    }
    # DeepEval's faithfulness sends 4 prompts per sample; with the counting judge's minimal
    # replies 6 of the 16 are word for word the same prompt as another sample's, in flight at
    # the same time: the engine sends each once (deterministically, whichever finishes first).
    assert deepeval_calls == {
        "faithfulness": 10,
        "answer_relevance": 12,
        "context_precision": 8,
        "context_recall": 8,
    }

    # Reasons: RAGAS says it gives none; DeepEval's and ragbridge's are kept.
    ragas_scores = run.evaluations["ragas"].column("faithfulness").values()
    assert {s.reason for s in ragas_scores} == {"RAGAS gives no reason"}
    assert {s.provider for s in ragas_scores} == {"ragas"}
    for score in run.evaluations["deepeval"].column("faithfulness").values():
        assert isinstance(score.reason, str)
        assert score.reason
        assert score.provider == "deepeval"
        assert score.judge_model == "counting-judge"

    # The comparison: one column per framework per measure, costs as the evaluations say.
    comparison = run.comparison
    assert comparison.judge_model == "counting-judge"
    assert comparison.n_samples == 4
    assert [m.measure for m in comparison.measures] == list(JUDGE_MEASURES)
    for m in comparison.measures:
        labels = ["ragbridge", "ragas", "deepeval"]
        if m.measure in ("context_precision", "context_recall"):
            labels.append("ragas:non-llm")
        assert [f.framework for f in m.frameworks] == labels
        assert len(m.pairs) == len(labels) * (len(labels) - 1) // 2
        for f in m.frameworks:
            column = run.evaluations[f.framework].column(m.measure)
            assert f.usage == sum((s.usage for s in column.values()), Usage())
    assert comparison.skipped == []
    assert any("counting-judge" in note for note in comparison.notes)
    assert any(note.startswith("answer_relevance:") for note in comparison.notes)
    assert seen[0][0] == 0
    assert seen[-1][0] == seen[-1][1] > 0

    # Second run on the same cache: no new judge call, everything counted as cached.
    again = CountingJudge()
    rerun = compare_frameworks_on(
        _samples(),
        frameworks=("ragbridge", "ragas", "deepeval"),
        measures=JUDGE_MEASURES,
        judge=again,
        embedder=HashEmbedder(),
        cache=tmp_path / "cache.sqlite",
    )
    assert again.calls == 0
    for label, u in rerun.usage().items():
        assert u.calls == 0, label
        assert u.cached_calls == usage[label].calls + usage[label].cached_calls, label
    for label in run.evaluations:
        for m in run.evaluations[label].metrics:
            first = {k: s.value for k, s in run.evaluations[label].column(m).items()}
            second = {k: s.value for k, s in rerun.evaluations[label].column(m).items()}
            assert first == second, (label, m)


@dataclass
class EmptyListsJudge(CountingJudge):
    """CountingJudge, except that schemas named in ``empty`` get an empty list for prompts that
    contain ``marker`` — RAGAS's statement extraction, DeepEval's claim extraction, ..."""

    marker: str = ""
    empty: tuple[tuple[str, str], ...] = ()

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        text = "\n".join(m.get("content", "") for m in messages)
        for schema_name, field_name in self.empty:
            if schema is not None and schema.__name__ == schema_name and self.marker in text:
                self.calls += 1
                return JudgeReply(
                    text=json.dumps({field_name: []}),
                    usage=Usage(prompt_tokens=10, completion_tokens=3),
                )
        return await super().generate(messages, schema=schema)


def _with_claimless_answer() -> list[Sample]:
    samples = _samples()
    samples[1] = samples[1].model_copy(update={"answer": "Thanks for asking, happy to help!"})
    return samples


def test_ragas_nan_for_an_answer_without_statements_is_a_no_claims_policy_difference() -> None:
    judge = EmptyListsJudge(
        marker="Thanks for asking",
        empty=(("StatementGeneratorOutput", "statements"), ("Claims", "claims")),
    )
    run = compare_frameworks_on(
        _with_claimless_answer(),
        frameworks=("ragas", "deepeval"),
        measures=["faithfulness"],
        judge=judge,
    )
    ragas = run.evaluations["ragas"].column("faithfulness")
    deepeval = run.evaluations["deepeval"].column("faithfulness")
    assert ragas["s1"].value is None
    assert ragas["s1"].failure is not None
    assert ragas["s1"].failure.kind is FailureKind.NO_CLAIMS
    assert "no statement" in ragas["s1"].failure.message
    assert ragas["s1"].usage.calls == 1  # the extraction call; nothing left to verify
    assert deepeval["s1"].value == 1.0  # DeepEval's policy: no claims, nothing unfaithful
    for sid in ("s0", "s2", "s3"):
        assert ragas[sid].value == 0.0  # CountingJudge's minimal verdict: not supported
    cases = run.comparison.measure("faithfulness").edge_cases
    assert [(c.sample_id, c.kind) for c in cases] == [("s1", "no_claims")]
    assert "policy difference" in cases[0].description
    assert cases[0].values == {"ragas": None, "deepeval": 1.0}
    stats = {f.framework: f for f in run.comparison.measure("faithfulness").frameworks}
    assert stats["ragas"].failures_by_kind == {"no_claims": 1}
    assert stats["ragas"].n_scored == 3


def test_a_ragas_nan_with_statements_stays_a_judge_error() -> None:
    # The statements are extracted but the verdict reply (whose prompt holds the contexts of s1)
    # lists none: RAGAS returns NaN, and that is not the no-claims policy.
    judge = EmptyListsJudge(marker="Source 1.", empty=(("NLIStatementOutput", "statements"),))
    run = compare_frameworks_on(
        _samples(), frameworks=("ragas",), measures=["faithfulness"], judge=judge
    )
    column = run.evaluations["ragas"].column("faithfulness")
    score = column["s1"]
    assert score.failure is not None
    assert score.failure.kind is FailureKind.JUDGE_ERROR
    assert "NaN" in score.failure.message
    assert score.usage.calls == 2
    assert [column[s].value for s in ("s0", "s2", "s3")] == [0.0, 0.0, 0.0]
    assert run.comparison.measure("faithfulness").edge_cases == []


def test_a_failing_judge_is_a_typed_failure_in_every_framework() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("quota exceeded")})
    run = compare_frameworks_on(
        _samples()[:2],
        frameworks=("ragbridge", "ragas", "deepeval"),
        measures=["faithfulness", "context_recall"],
        judge=judge,
    )
    for label in ("ragbridge", "ragas", "deepeval"):
        for measure in ("faithfulness", "context_recall"):
            for sid, score in run.evaluations[label].column(measure).items():
                assert score.value is None, (label, measure, sid)
                assert score.failure is not None
                assert score.failure.kind is FailureKind.JUDGE_ERROR
                assert "quota exceeded" in score.failure.message, (label, score.failure.message)
    for m in run.comparison.measures:
        expected = {"ragbridge": 2, "ragas": 2, "deepeval": 2}
        if m.measure == "context_recall":
            expected["ragas:non-llm"] = 0  # string matching needs no judge
        assert {f.framework: f.n_failed for f in m.frameworks} == expected


# --------------------------------------------------------------------------- without a judge


def test_offline_comparison_runs_non_llm_measures_and_says_what_it_skipped() -> None:
    samples = _samples()
    run = compare_frameworks_on(samples, frameworks=ALL, embedder=HashEmbedder())
    assert sorted(run.evaluations) == ["ragas", "ragas:non-llm", "ragbridge:offline"]
    offline = run.evaluations["ragbridge:offline"]
    assert offline.metrics == [*JUDGE_MEASURES, *ID_MEASURES, *STRING_MEASURES]
    assert run.evaluations["ragas"].metrics == [*ID_MEASURES, *STRING_MEASURES]
    assert run.evaluations["ragas:non-llm"].metrics == ["context_precision", "context_recall"]
    for label, evaluation in run.evaluations.items():
        _assert_cells_are_values_or_failures(evaluation, evaluation.metrics)
        assert evaluation.usage() == Usage(), label

    skipped = {(s.framework, s.measure): s.reason for s in run.comparison.skipped}
    expected = {}
    for m in JUDGE_MEASURES:
        expected[("ragbridge", m)] = NEEDS_JUDGE
        expected[("ragas", m)] = NEEDS_JUDGE
        expected[("deepeval", m)] = NEEDS_JUDGE
    for m in (*ID_MEASURES, *STRING_MEASURES):
        expected[("deepeval", m)] = "DeepEval has no non-LLM implementation"
    assert skipped == expected
    assert run.skipped == run.comparison.skipped
    table = run.comparison.table()
    assert "skipped deepeval / faithfulness: needs a judge (pass --judge)" in table
    assert "skipped deepeval / rouge_l: DeepEval has no non-LLM implementation" in table
    assert run.comparison.judge_model is None

    ragas = run.evaluations["ragas"]
    # Same definition on both sides: id measures and ROUGE-L agree sample by sample.
    for m in (*ID_MEASURES, "rouge_l"):
        ours = {k: s.value for k, s in offline.column(m).items()}
        theirs = {k: s.value for k, s in ragas.column(m).items()}
        assert ours == pytest.approx(theirs), m
    assert {k: s.value for k, s in ragas.column("id_context_recall").items()} == {
        "s0": 1.0,
        "s1": 1.0,
        "s2": 0.0,
        "s3": pytest.approx(2 / 3),
    }
    id_recall = run.comparison.measure("id_context_recall")
    (pair,) = id_recall.pairs
    assert (pair.a, pair.b, pair.n) == ("ragbridge:offline", "ragas", 4)
    assert pair.spearman == pytest.approx(1.0)
    assert pair.mean_abs_diff == pytest.approx(0.0)
    # Exact match differs by definition: "Paris." vs "paris" is a SQuAD match, not a string one.
    assert offline.column("exact_match")["s2"].value == 1.0
    assert ragas.column("exact_match")["s2"].value == 0.0
    # The context measures compare ragbridge's offline provider with RAGAS's non-LLM ones.
    cp = run.comparison.measure("context_precision")
    assert [f.framework for f in cp.frameworks] == ["ragbridge:offline", "ragas:non-llm"]
    assert [(p.a, p.b, p.n) for p in cp.pairs] == [("ragbridge:offline", "ragas:non-llm", 4)]
    assert any(note.startswith("bleu:") for note in run.comparison.notes)
    assert any("no judge" in note for note in run.comparison.notes)


def test_missing_inputs_are_failures_and_absent_columns_are_skipped() -> None:
    samples = [
        s.model_copy(update={"reference_contexts": None, "relevance": None}) for s in _samples()
    ]
    samples[0] = samples[0].model_copy(update={"reference": None})
    run = compare_frameworks_on(
        samples,
        frameworks=("ragbridge:offline", "ragas"),
        measures=["context_recall", "id_context_precision", "rouge_l"],
        embedder=HashEmbedder(),
    )
    skipped = {(s.framework, s.measure): s.reason for s in run.skipped}
    assert skipped == {
        ("ragas", "context_recall"): NEEDS_JUDGE,
        ("ragas:non-llm", "context_recall"): "needs reference_contexts (no sample has them)",
        ("ragas", "id_context_precision"): "needs context ids and relevance labels",
    }
    rouge = run.evaluations["ragas"].column("rouge_l")["s0"]
    assert rouge.failure is not None
    assert rouge.failure.kind is FailureKind.MISSING_INPUT
    assert "'reference'" in rouge.failure.message
    ours = run.evaluations["ragbridge:offline"].column("rouge_l")["s0"]
    assert ours.failure is not None
    assert ours.failure.kind is FailureKind.MISSING_INPUT
    unlabelled = run.evaluations["ragbridge:offline"].column("id_context_precision")["s1"]
    assert unlabelled.value is None


def test_bad_arguments_name_what_is_known() -> None:
    with pytest.raises(ValueError, match="unknown framework 'langsmith'; known: ragbridge"):
        compare_frameworks_on(_samples(), frameworks=("langsmith",))
    with pytest.raises(ValueError, match=r"unknown measure 'rouge'; known: .*rouge_l"):
        compare_frameworks_on(_samples(), measures=["rouge"])
    twice = [_samples()[0], _samples()[0]]
    with pytest.raises(ValueError, match=r"samples\[1\]: id: duplicate sample id 's0'"):
        compare_frameworks_on(twice, frameworks=("ragas",))
    with pytest.raises(ValueError, match="no samples"):
        compare_frameworks_on([], frameworks=("ragas",))
    assert set(MEASURES) == {*JUDGE_MEASURES, *ID_MEASURES, *STRING_MEASURES}


def test_comparison_round_trips_through_json(tmp_path: Path) -> None:
    run = compare_frameworks_on(
        _samples(), frameworks=("ragbridge:offline", "ragas"), measures=["rouge_l", "bleu"]
    )
    path = tmp_path / "cmp.json"
    run.comparison.to_json(path)
    back = CrossComparison.from_json(path)
    assert back == run.comparison
    assert [m.measure for m in back.measures] == ["rouge_l", "bleu"]


def test_bleu_differs_by_definition_between_ragbridge_and_ragas() -> None:
    # ragbridge: sacrebleu sentence BLEU; RAGAS: corpus BLEU over ". "-split pieces.
    sample = _samples()[0].model_copy(
        update={"answer": "It is in Paris. It is tall.", "reference": "It is in Paris."}
    )
    run = compare_frameworks_on(
        [sample], frameworks=("ragbridge:offline", "ragas"), measures=["bleu"]
    )
    theirs = run.evaluations["ragas"].column("bleu")["s0"]
    ours = run.evaluations["ragbridge:offline"].column("bleu")["s0"]
    assert ours.value is not None
    assert theirs.value is not None
    assert 0.0 < ours.value < 1.0
    assert 0.0 < theirs.value < 1.0
    assert ours.value != pytest.approx(theirs.value, abs=0.05)
    (pair,) = run.comparison.measure("bleu").pairs
    assert pair.n == 1
    assert pair.spearman is None
    assert pair.mean_abs_diff == pytest.approx(abs(ours.value - theirs.value))


# --------------------------------------------------------------------------- imports


def test_module_imports_neither_framework_until_asked() -> None:
    code = (
        "import sys\n"
        "import ragbridge.adapters.compare\n"
        "assert 'ragas' not in sys.modules, 'ragas imported'\n"
        "assert 'deepeval' not in sys.modules, 'deepeval imported'\n"
        "sys.modules['ragas'] = None\n"
        "from ragbridge.adapters.compare import compare_frameworks_on\n"
        "from ragbridge.core.sample import Sample\n"
        "try:\n"
        "    compare_frameworks_on([Sample(id='a', question='q', answer='a', reference='a')],\n"
        "                          frameworks=['ragas'], measures=['rouge_l'])\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert install_hint("ragas") in out.stdout
