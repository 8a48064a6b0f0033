"""Context relevance per retrieved context (issue 30): the share relevant and its rank-aware form,
judged in one call per sample, shared with context precision (and recall), and offline.

Scripted and counting judges from `ragbridge.core.testing`; DeepEval's own
``ContextualRelevancyMetric`` on a scripted DeepEval model as the peer.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core import Context, Sample, estimate, evaluate
from ragbridge.core.judging.judge import Message
from ragbridge.core.metrics import (
    ContextPrecision,
    ContextRecall,
    ContextRelevance,
    ContextRelevanceRanked,
    DocumentRelevance,
    Metric,
    resolve,
)
from ragbridge.core.prompts.context_relevance import (
    CONTEXT_RELEVANCE,
    CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE,
    ContextRelevanceVerdicts,
)
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import Evaluation, FailureKind, Score
from ragbridge.core.testing import CountingJudge, HashEmbedder, ScriptedJudge

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "short_answer_dev"

_CONTEXT = re.compile(r"<<<BEGIN CONTEXT (\d+)>>>\n(.*?)\n<<<END CONTEXT \1>>>", re.S)


def sample(
    n: int = 3, *, reference: str | None = "Photovoltaic cells turn sunlight into DC."
) -> Sample:
    return Sample(
        id=f"s{n}",
        question="How do solar panels generate electricity?",
        answer="With photovoltaic cells.",
        reference=reference,
        contexts=[
            Context(id=f"d{i}", text=f"Passage {i} on solar cells.") for i in range(1, n + 1)
        ],
    )


def cell(result: Evaluation, name: str, sample_id: str = "s3") -> Score:
    score = result.get(sample_id, name)
    assert score is not None, name
    return score


def relevance(flags: Sequence[bool], *, useful: Sequence[bool] | None = None) -> dict[str, Any]:
    """A reply with one verdict per context (with usefulness for the combined templates)."""
    verdicts: list[dict[str, Any]] = []
    for i, flag in enumerate(flags):
        verdict: dict[str, Any] = {"reason": f"context {i + 1}", "relevant": flag}
        if useful is not None:
            verdict["useful"] = useful[i]
        verdicts.append(verdict)
    return {"verdicts": verdicts}


# --------------------------------------------------------------------------- the two values


def test_the_share_and_the_rank_weighted_form_of_one_set_of_verdicts() -> None:
    judge = ScriptedJudge({"context_relevance.judge": relevance([True, False, True])})
    result = evaluate([sample()], [ContextRelevance(), ContextRelevanceRanked()], judge=judge)
    share, ranked = cell(result, "context_relevance"), cell(result, "context_relevance_ranked")
    assert share.value == pytest.approx(2 / 3)
    assert ranked.value == pytest.approx((1 / 1 + 2 / 3) / 2)  # precision@1 and @3, averaged
    assert share.reason == "2 of 3 contexts relevant to the question"
    assert share.details["contexts"] == [
        {"rank": 1, "context_id": "d1", "relevant": True, "reason": "context 1"},
        {"rank": 2, "context_id": "d2", "relevant": False, "reason": "context 2"},
        {"rank": 3, "context_id": "d3", "relevant": True, "reason": "context 3"},
    ]
    assert [c["precision_at_k"] for c in ranked.details["contexts"]] == [1.0, 0.5, 2 / 3]
    assert share.prompt_version == ranked.prompt_version == "context_relevance.judge@1"
    assert share.provider == "llm"


def test_relevant_contexts_moved_to_the_top_raise_only_the_ranked_form() -> None:
    top = ScriptedJudge({"*": relevance([True, True, False])})
    bottom = ScriptedJudge({"*": relevance([False, True, True])})
    metrics: list[Metric] = [ContextRelevance(), ContextRelevanceRanked()]
    first, last = (
        evaluate([sample()], metrics, judge=top),
        evaluate([sample()], metrics, judge=bottom),
    )
    assert cell(first, "context_relevance").value == cell(last, "context_relevance").value
    assert cell(first, "context_relevance_ranked").value == 1.0
    assert cell(last, "context_relevance_ranked").value == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_no_relevant_context_is_zero_with_a_reason() -> None:
    judge = ScriptedJudge({"*": relevance([False, False, False])})
    result = evaluate([sample()], [ContextRelevance(), ContextRelevanceRanked()], judge=judge)
    for name in ("context_relevance", "context_relevance_ranked"):
        assert cell(result, name).value == 0.0
        assert cell(result, name).reason == "none of the 3 contexts is relevant to the question"


# --------------------------------------------------------------------------- one call per sample


@pytest.mark.parametrize("n_contexts", [1, 4, 12])
def test_both_measures_make_one_call_whatever_the_number_of_contexts(n_contexts: int) -> None:
    judge = CountingJudge()
    metrics: list[Metric] = [ContextRelevance(), ContextRelevanceRanked()]
    result = evaluate([sample(n_contexts)], metrics, judge=judge)
    assert judge.by_task == {"context_relevance.judge": 1}
    sid = f"s{n_contexts}"
    calls = [cell(result, m.name, sid).usage.calls for m in metrics]
    assert sorted(calls) == [0, 1]  # the first to ask pays; summed usage is the true cost
    assert result.usage().calls == 1
    assert estimate([sample(n_contexts)], metrics).calls == 1


def test_one_call_shared_with_context_precision_against_the_reference() -> None:
    flags, useful = [True, True, False], [True, False, False]
    joint = ScriptedJudge(
        {"context.relevant_useful.with_reference": relevance(flags, useful=useful)}
    )
    metrics: list[Metric] = [ContextRelevance(), ContextRelevanceRanked(), ContextPrecision()]
    together = evaluate([sample()], metrics, judge=joint)
    assert joint.tasks() == ["context.relevant_useful.with_reference"]
    assert together.usage().calls == 1
    planned = estimate([sample()], metrics)
    assert planned.calls == 1
    assert planned.by_template == {"context.relevant_useful.with_reference": 1}
    # the same verdicts through each measure's own template give the same values
    alone = ScriptedJudge(
        {
            "context_relevance.judge": relevance(flags),
            "context_precision.with_reference": {
                "verdicts": [{"reason": "r", "useful": u} for u in useful]
            },
        }
    )
    apart = evaluate([sample()], [ContextRelevance()], judge=alone)
    precision_apart = evaluate([sample()], [ContextPrecision()], judge=alone)
    assert cell(together, "context_relevance").value == cell(apart, "context_relevance").value
    assert cell(together, "context_precision").value == pytest.approx(1.0)
    assert (
        cell(together, "context_precision").value
        == cell(precision_apart, "context_precision").value
    )
    for name in ("context_relevance", "context_precision"):
        assert cell(together, name).prompt_version == "context.relevant_useful.with_reference@1"


@pytest.mark.parametrize(
    ("precision", "reference"),
    [(ContextPrecision(), None), (ContextPrecision(use_reference=False), "DC from sunlight.")],
    ids=["no reference", "use_reference=False"],
)
def test_precision_judged_against_the_answer_shares_the_answer_variant(
    precision: ContextPrecision, reference: str | None
) -> None:
    judge = CountingJudge()
    metrics: list[Metric] = [ContextRelevanceRanked(), precision]
    result = evaluate([sample(reference=reference)], metrics, judge=judge)
    assert judge.by_task == {"context.relevant_useful.with_answer": 1}
    assert cell(result, "context_precision").details["judged_against"] == "answer"
    assert estimate([sample(reference=reference)], metrics).calls == 1


def test_all_three_context_measures_make_one_call_counted_once() -> None:
    flags, useful = [False, True, True], [False, True, False]
    statements = [
        {"statement": "PV cells make DC.", "reason": "r", "attributed": True, "context": 2},
        {"statement": "From sunlight.", "reason": "r", "attributed": False, "context": None},
    ]
    contexts = [
        {"reason": "r", "relevant": r, "useful": u} for r, u in zip(flags, useful, strict=True)
    ]
    judge = ScriptedJudge(
        {"context.assess_relevance": {"contexts": contexts, "statements": statements}}
    )
    metrics: list[Metric] = [
        ContextRelevance(),
        ContextRelevanceRanked(),
        ContextPrecision(),
        ContextRecall(),
    ]
    result = evaluate([sample()], metrics, judge=judge)
    assert judge.tasks() == ["context.assess_relevance"]
    assert result.usage().calls == 1
    assert sum(cell(result, m.name).usage.calls for m in metrics) == 1
    assert estimate([sample()], metrics).by_template == {"context.assess_relevance": 1}
    assert cell(result, "context_relevance").value == pytest.approx(2 / 3)
    assert cell(result, "context_relevance_ranked").value == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert cell(result, "context_precision").value == pytest.approx(1 / 2)
    assert cell(result, "context_recall").value == 0.5
    for m in metrics:
        assert cell(result, m.name).prompt_version == "context.assess_relevance@1"


def test_precision_and_recall_without_relevance_keep_context_assess() -> None:
    judge = CountingJudge()
    evaluate([sample()], [ContextPrecision(), ContextRecall()], judge=judge)
    assert judge.by_task == {"context.assess": 1}


def test_a_sample_precision_cannot_judge_leaves_relevance_its_own_call() -> None:
    judge = CountingJudge()
    no_reference = sample(reference=None)
    metrics: list[Metric] = [ContextRelevance(), ContextPrecision(use_reference=True)]
    result = evaluate([no_reference], metrics, judge=judge)
    assert judge.by_task == {"context_relevance.judge": 1}
    failure = cell(result, "context_precision").failure
    assert failure is not None
    assert failure.kind == FailureKind.MISSING_INPUT
    assert cell(result, "context_relevance").status == "scored"
    assert estimate([no_reference], metrics).calls == 1


def test_other_providers_of_precision_share_nothing() -> None:
    judge = CountingJudge()
    metrics: list[Metric] = [ContextRelevance(), resolve("context_precision:offline")]
    evaluate([sample()], metrics, judge=judge, embedder=HashEmbedder())
    assert judge.by_task == {"context_relevance.judge": 1}


def test_a_failed_call_fails_both_measures_and_is_counted_once() -> None:
    judge = ScriptedJudge({"*": ValueError("the judge broke")})
    metrics: list[Metric] = [ContextRelevance(), ContextRelevanceRanked()]
    result = evaluate([sample()], metrics, judge=judge, max_retries=0)
    for m in metrics:
        assert cell(result, m.name).value is None
        assert cell(result, m.name).failure is not None
    assert len(judge.calls) == 1


# --------------------------------------------------------------------------- the reply check


def test_the_checker_refuses_a_verdict_list_of_the_wrong_length() -> None:
    contexts = ["one", "two", "three"]
    check = CONTEXT_RELEVANCE.checker(question="q", contexts=contexts)
    short = ContextRelevanceVerdicts.model_validate(relevance([True, False]))
    assert check(short) == "expected 3 verdicts (one per context), got 2"
    assert check(ContextRelevanceVerdicts.model_validate(relevance([True] * 3))) is None
    joint = CONTEXT_RELEVANT_USEFUL_WITH_REFERENCE.checker(
        question="q", reference="r", contexts=contexts
    )
    long = joint.template.schema.model_validate(relevance([True] * 4, useful=[True] * 4))
    assert joint(long) == "expected 3 verdicts (one per context), got 4"


def test_a_reply_missing_a_verdict_is_asked_again_never_scored() -> None:
    judge = ScriptedJudge({"*": [relevance([True, False]), relevance([True, False, False])]})
    result = evaluate([sample()], [ContextRelevance()], judge=judge)
    assert cell(result, "context_relevance").value == pytest.approx(1 / 3)
    assert len(judge.calls) == 2  # the repair is a call, counted like any other
    always_short = ScriptedJudge({"*": relevance([True, False])})
    failed = cell(
        evaluate([sample()], [ContextRelevance()], judge=always_short), "context_relevance"
    )
    assert failed.value is None
    assert failed.failure is not None


# --------------------------------------------------------------------------- edges and registry


def test_no_contexts_is_missing_input_without_a_call() -> None:
    judge = CountingJudge()
    empty = Sample(id="e", question="What is photosynthesis?", contexts=[])
    metrics: list[Metric] = [ContextRelevance(), ContextRelevanceRanked()]
    result = evaluate([empty], metrics, judge=judge)
    for m in metrics:
        failure = cell(result, m.name, "e").failure
        assert failure is not None
        assert failure.kind == FailureKind.MISSING_INPUT
        assert "'contexts'" in failure.message
    assert judge.calls == 0
    assert estimate([empty], metrics).calls == 0


def test_a_blank_question_is_missing_input() -> None:
    blank = Sample(id="b", question="  ", contexts=[Context(text="Some passage.")])
    result = evaluate([blank], [ContextRelevance()], judge=CountingJudge())
    failure = cell(result, "context_relevance", "b").failure
    assert failure is not None
    assert failure.kind == FailureKind.MISSING_INPUT
    assert "'question'" in failure.message


def test_the_registry_lists_both_measures_with_both_providers_and_their_edges() -> None:
    rows = {(r["measure"], r["provider"]): r for r in REGISTRY.rows()}
    for name in ("context_relevance", "context_relevance_ranked"):
        assert rows[(name, "llm")]["needs"] == "judge"
        assert rows[(name, "offline")]["needs"] == "embedder"
        assert REGISTRY.measure(name).edges["no contexts"] == "missing_input"
        assert isinstance(resolve(name), ContextRelevance)
        assert resolve(f"{name}:offline").provider == "offline"
    assert type(resolve("context_relevance_ranked")) is ContextRelevanceRanked


def test_kept_scores_of_both_measures_are_current_for_the_cache_commands() -> None:
    # `ragbridge cache` treats kept Scores whose code digest is not one of this ragbridge's
    # metrics as stale; a measure missing from ALL_LLM_METRICS would lose its kept Scores.
    from ragbridge.adapters.cli.cache_command import current_codes
    from ragbridge.core.cache.scores import code_digest

    current = current_codes()
    for cls in (ContextRelevance, ContextRelevanceRanked):
        assert code_digest(cls) in current


def test_document_relevance_stays_a_single_grade_of_the_whole_set() -> None:
    # the neighbour this measure is not: one yes/no for all contexts, no per-context verdict
    judge = CountingJudge()
    result = evaluate([sample()], [DocumentRelevance(), ContextRelevance()], judge=judge)
    assert judge.by_task == {"grader.document_relevance": 1, "context_relevance.judge": 1}
    assert "contexts" not in (cell(result, "document_relevance").details or {})


# --------------------------------------------------------------------------- offline


class Topic:
    """Embeds a text on one axis per topic word it holds (deterministic, no model)."""

    model = "topic-axes"
    words = ("solar", "panels", "electricity", "cooking", "pasta")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0 if w in t.lower() else 0.0 for w in self.words] + [0.1] for t in texts]


def test_offline_judges_each_context_without_a_judge() -> None:
    question = "How do solar panels generate electricity?"
    contexts = [
        Context(id="off", text="Boil the pasta for nine minutes, then drain it."),
        Context(id="on", text="Solar panels generate electricity from sunlight."),
    ]
    s = Sample(id="o", question=question, contexts=contexts)
    metrics = [resolve("context_relevance:offline"), resolve("context_relevance_ranked:offline")]
    result = evaluate([s], metrics, embedder=Topic())
    share, ranked = (
        cell(result, "context_relevance", "o"),
        cell(result, "context_relevance_ranked", "o"),
    )
    assert [c["relevant"] for c in share.details["contexts"]] == [False, True]
    assert share.value == 0.5
    assert ranked.value == 0.5  # the one relevant context sits at rank 2
    first = share.details["contexts"][1]
    assert first["coverage"] == 1.0  # solar, panels, generate, electricity: all four there
    assert first["score"] == pytest.approx((first["similarity"] + 1.0) / 2, abs=1e-3)
    assert share.details["relevance_threshold"] == 0.3
    assert share.provider == "offline"
    assert share.usage.calls == 0


def test_offline_threshold_is_the_metrics_setting() -> None:
    s = Sample(
        id="t",
        question="How do solar panels generate electricity?",
        contexts=[Context(text="Solar panels generate electricity from sunlight.")],
    )
    strict = ContextRelevance(provider="offline", relevance=1.01)
    result = evaluate([s], [strict], embedder=Topic())
    assert cell(result, "context_relevance", "t").value == 0.0


def test_offline_a_question_without_content_words_uses_the_similarity_alone() -> None:
    s = Sample(id="w", question="Who is he?", contexts=[Context(text="He is the mayor.")])
    result = evaluate([s], [ContextRelevance(provider="offline")], embedder=HashEmbedder())
    row = cell(result, "context_relevance", "w").details["contexts"][0]
    assert row["coverage"] is None
    assert row["score"] == row["similarity"]


def test_offline_on_the_short_answer_dev_sample() -> None:
    """The figure of `benchmarks/context_relevance_offline.py`, on its first 25 questions."""
    if not (DEV / "qa_pairs.jsonl").exists():
        pytest.skip(f"the public short-answer dev data is not beside the repository ({DEV})")
    pytest.importorskip("tokenizers", reason="needs the local extra")
    import importlib.util

    from ragbridge.adapters.local import LocalEmbedder
    from ragbridge.core.results.stats import auroc

    path = ROOT / "benchmarks" / "context_relevance_offline.py"
    spec = importlib.util.spec_from_file_location("context_relevance_offline", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = [json.loads(line) for line in (DEV / "qa_pairs.jsonl").read_text().splitlines()]
    embedder = LocalEmbedder()
    samples, kinds = module.build(rows[:25], embedder)
    result = evaluate(samples, ["context_relevance:offline"], embedder=embedder)
    labels, scores = [], []
    for s in samples:
        for row in cell(result, "context_relevance", s.id).details["contexts"]:
            labels.append(kinds[row["context_id"]] == "own")
            scores.append(row["score"])
    assert auroc(labels, scores) > 0.9


# --------------------------------------------------------------------------- the peer


def _contexts_of(messages: Sequence[Message]) -> list[str]:
    return [m.group(2) for m in _CONTEXT.finditer(messages[-1]["content"])]


def ours_by(oracle: Callable[[str], bool]) -> ScriptedJudge:
    """Our judge, relevant per context by ``oracle`` (any relevant sentence makes it relevant)."""

    def reply(messages: list[Message]) -> dict[str, Any]:
        flags = [any(oracle(s) for s in re.split(r"(?<=\.)\s+", t)) for t in _contexts_of(messages)]
        return relevance(flags)

    return ScriptedJudge({"context_relevance.judge": reply})


def deepevals_score(question: str, contexts: list[str], oracle: Callable[[str], bool]) -> float:
    """DeepEval's ContextualRelevancyMetric on a scripted DeepEval model: per statement (each
    sentence of each context) ``oracle`` says yes or no, as a judge would."""
    pytest.importorskip("deepeval")
    from deepeval.metrics import ContextualRelevancyMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase
    from pydantic import BaseModel

    class Scripted(DeepEvalBaseLLM):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(model="scripted")

        def load_model(self) -> Scripted:
            return self

        def get_model_name(self) -> str:
            return "scripted"

        def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
            prompts.append(prompt)
            found = re.search(r"Context:\n(.*?)\n\nJSON:", prompt, re.S)
            assert found is not None, prompt[-300:]
            statements = [s for s in re.split(r"(?<=\.)\s+", found.group(1).strip()) if s]
            verdicts = [
                {"statement": s, "verdict": "yes" if oracle(s) else "no", "reason": "scripted"}
                for s in statements
            ]
            assert schema is not None
            return schema.model_validate({"verdicts": verdicts})

        async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
            return self.generate(prompt, schema)

    prompts: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        metric = ContextualRelevancyMetric(model=Scripted(), include_reason=False, async_mode=False)
    case = LLMTestCase(input=question, actual_output="-", retrieval_context=contexts)
    value = float(metric.measure(case))
    assert len(prompts) == len(contexts)  # one call per context (ours: one per sample)
    return value


@pytest.fixture
def _offline_deepeval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # DeepEval writes ./.deepeval/
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    monkeypatch.setenv("DEEPEVAL_DISABLE_DOTENV", "1")


@pytest.mark.usefixtures("_offline_deepeval")
def test_deepeval_agrees_when_each_context_is_one_statement_and_pools_statements_otherwise() -> (
    None
):
    question = "How do solar panels generate electricity?"

    def oracle(statement: str) -> bool:
        return "solar" in statement.lower()

    one_each = [
        "Solar cells turn light into current.",
        "Pasta needs salted water.",
        "Solar panels sit on roofs.",
    ]
    ours = evaluate(
        [Sample(id="p", question=question, contexts=[Context(text=t) for t in one_each])],
        [ContextRelevance()],
        judge=ours_by(oracle),
    )
    assert cell(ours, "context_relevance", "p").value == pytest.approx(2 / 3)
    assert deepevals_score(question, one_each, oracle) == pytest.approx(2 / 3)
    # A long relevant context and a short irrelevant one: DeepEval pools the statements of all
    # contexts (3 of 4 relevant); ragbridge judges each context as a whole (1 of 2).
    uneven = [
        "Solar cells turn light into current. Solar panels hold many cells. Solar farms are big.",
        "Pasta needs salted water.",
    ]
    ours = evaluate(
        [Sample(id="u", question=question, contexts=[Context(text=t) for t in uneven])],
        [ContextRelevance()],
        judge=ours_by(oracle),
    )
    assert cell(ours, "context_relevance", "u").value == 0.5
    assert deepevals_score(question, uneven, oracle) == pytest.approx(3 / 4)


def test_ragas_rates_the_contexts_joined_so_one_relevant_passage_can_fill_the_score() -> None:
    """RAGAS's ContextRelevance (the NVIDIA metric) on a scripted RAGAS LLM that follows its
    prompt ("2 if the context contains any relevant information"): the contexts are joined into
    one text and rated once per judge prompt (two), so one relevant passage of two gives 1.0,
    where ragbridge's share is 0.5 and says which passage is off."""
    pytest.importorskip("ragas")
    import asyncio

    from pydantic import BaseModel
    from ragas.llms.base import InstructorBaseRagasLLM
    from ragas.metrics.collections import ContextRelevance as RagasContextRelevance

    class Scripted(InstructorBaseRagasLLM):  # type: ignore[misc]
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def generate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
            self.prompts.append(prompt)
            shown = prompt.rsplit('"context":', 1)[-1].lower()
            return response_model.model_validate({"rating": 2 if "solar" in shown else 0})

        async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> BaseModel:
            return self.generate(prompt, response_model)

    question = "How do solar panels generate electricity?"
    contexts = ["Solar cells turn light into current.", "Pasta needs salted water."]
    llm = Scripted()
    theirs = asyncio.run(
        RagasContextRelevance(llm=llm).ascore(user_input=question, retrieved_contexts=contexts)
    )
    assert theirs.value == 1.0
    assert len(llm.prompts) == 2  # two judge prompts, each over all contexts joined
    ours = evaluate(
        [Sample(id="r", question=question, contexts=[Context(text=t) for t in contexts])],
        [ContextRelevance()],
        judge=ours_by(lambda s: "solar" in s.lower()),
    )
    score = cell(ours, "context_relevance", "r")
    assert score.value == 0.5
    assert [c["relevant"] for c in score.details["contexts"]] == [True, False]
