"""The robustness harness (`ragbridge.core.robustness.harness`) on a fake pipeline.

`ExtractivePipeline` is a `RobustPipeline` written here: its retrieval is a fixed table per
question, and its answer is the first sentence of the passages it is *given* that shares a
content word with the question ("I don't know." when none does). So every figure the harness
reports follows from the perturbation it applied, with no model, and it counts its calls.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragbridge.core.robustness.answers import AnswerCache
from ragbridge.core.robustness.conditions import CLEAN, Condition, default_conditions
from ragbridge.core.robustness.harness import RobustnessResult, arun_robustness, run_robustness
from ragbridge.core.robustness.plan import (
    DEFAULT_METRICS,
    OFFLINE_METRICS,
    RobustnessPlan,
    condition_metrics,
    plan_robustness,
)
from ragbridge.core.robustness.types import Perturb, RobustPipeline
from ragbridge.core.sample import Context, Sample
from ragbridge.core.settings import Settings
from ragbridge.core.testing import CountingJudge, HashEmbedder

_STOP = {"what", "when", "which", "does", "have", "many", "much", "with", "from", "that", "this"}

FACTS: list[tuple[str, str, str, list[str]]] = [
    (
        "eiffel",
        "When was the Eiffel Tower completed?",
        "1889",
        ["The Eiffel Tower was completed in 1889.", "Gustave Eiffel's company built it in Paris."],
    ),
    (
        "everest",
        "How tall is Mount Everest?",
        "8,849 metres",
        ["Mount Everest is 8,849 metres tall.", "It lies in the Himalaya on the Nepal border."],
    ),
    (
        "apollo",
        "In which year did Apollo 11 land on the Moon?",
        "1969",
        ["Apollo 11 landed on the Moon in 1969.", "Neil Armstrong walked out first."],
    ),
    (
        "mars",
        "How many moons orbit Mars?",
        "2",
        ["Mars has 2 moons, Phobos and Deimos.", "Both moons are small and irregular."],
    ),
    (
        "boiling",
        "At what temperature does water boil at sea level?",
        "100 degrees Celsius",
        ["Water boils at 100 degrees Celsius at sea level.", "Pressure changes the point."],
    ),
    (
        "hamlet",
        "Who wrote the play Hamlet?",
        "William Shakespeare",
        ["Hamlet was written by William Shakespeare.", "The play is set in Denmark."],
    ),
]


def _samples() -> list[Sample]:
    return [
        Sample(id=sid, question=q, reference=ref, relevance={f"{sid}-0": 1})
        for sid, q, ref, _ in FACTS
    ]


def _retrieval() -> dict[str, list[Context]]:
    return {
        sid: [Context(text=t, id=f"{sid}-{i}") for i, t in enumerate(texts)]
        for sid, _, _, texts in FACTS
    }


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 3 and w not in _STOP}


def extractive(question: str, contexts: Sequence[Context]) -> str:
    """The first sentence sharing a content word with the question, else "I don't know."."""
    asked = _words(question)
    for context in contexts:
        for sentence in re.split(r"(?<=[.!?])\s+", context.text):
            if asked & _words(sentence):
                return sentence
    return "I don't know."


class ExtractivePipeline:
    """A deterministic `RobustPipeline`: fixed retrieval, extractive answer, counted calls."""

    def __init__(
        self,
        retrieval: dict[str, list[Context]],
        *,
        identity: str = "extractive:v1",
        delay: float = 0.0,
        fail: Sequence[str] = (),
    ) -> None:
        self.retrieval = retrieval
        self._identity = identity
        self.delay = delay
        self.fail = set(fail)
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.given: list[tuple[str, list[Context]]] = []

    @property
    def identity(self) -> str:
        return self._identity

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if sample.id in self.fail:
                meta = {**sample.metadata, "error": "RuntimeError: the model is down"}
                return sample.model_copy(update={"answer": None, "metadata": meta})
            live = list(self.retrieval.get(sample.id, []))
            given = perturb(live) if perturb is not None else live
            self.given.append((sample.id, given))
            answer = extractive(sample.question, given)
            return sample.model_copy(update={"answer": answer, "contexts": given})
        finally:
            self.in_flight -= 1


OFFLINE = Settings(embedder=HashEmbedder())


def _run(pipeline: ExtractivePipeline, **kw: object) -> RobustnessResult:
    kw.setdefault("settings", OFFLINE)
    return run_robustness(pipeline, _samples(), **kw)  # type: ignore[arg-type]


def test_the_fake_pipeline_is_a_robust_pipeline() -> None:
    pipe = ExtractivePipeline(_retrieval())
    assert isinstance(pipe, RobustPipeline)
    assert extractive("How tall is Mount Everest?", _retrieval()["everest"]).startswith("Mount")
    assert extractive("How tall is Mount Everest?", _retrieval()["mars"]) == "I don't know."


def test_offline_run_answers_every_question_under_every_condition() -> None:
    pipe = ExtractivePipeline(_retrieval())
    result = _run(pipe)
    names = [c.name for c in result.conditions]
    assert names == [c.name for c in default_conditions()]
    assert names[0] == "noise@0"
    skipped = sum(len(s.skipped) for s in result.summary)
    assert skipped == 0, [(s.name, s.skipped) for s in result.summary]
    assert len(result.samples) == len(FACTS) * len(names)
    assert pipe.calls == len(result.samples) == result.pipeline_calls
    assert result.answers_cached == 0
    by_id = {s.id: s for s in result.samples}
    noisy = by_id["everest@noise@0.4"]
    assert noisy.metadata["robustness_condition"] == "noise@0.4"
    assert noisy.metadata["noise_ratio"] == 0.4
    assert noisy.metadata["source_id"] == "everest"
    assert sum(1 for c in noisy.contexts if c.metadata.get("robustness") == "noise") == 1
    negative = by_id["everest@negative"]
    assert negative.relevance == {}
    assert negative.is_no_answer
    assert all(c.metadata.get("from") != "everest" for c in negative.contexts)
    counter = by_id["everest@counterfactual"]
    fact = counter.metadata["counterfactual"]
    assert fact["original"] == "8,849"
    assert fact["wrong"] != fact["original"]
    assert fact["wrong"] in counter.answer  # the extractive pipeline follows the planted fact
    # offline choice: no judge, so offline providers and token_f1 for correctness
    assert result.metrics == {
        "noise": ["token_f1", "faithfulness"],
        "negative": ["negative_rejection"],
        "counterfactual": ["counterfactual_robustness", "token_f1"],
    }
    assert any("token_f1" in note for note in result.notes)
    # each condition scored with its own measures only
    assert result.evaluation.get("everest@negative", "token_f1") is None
    assert result.evaluation.get("everest@noise@0", "negative_rejection") is None
    assert result.evaluation.get("everest@counterfactual", "counterfactual_robustness") is not None


def test_summary_follows_the_perturbation() -> None:
    result = _run(ExtractivePipeline(_retrieval()))
    clean = result.condition("noise@0")
    assert clean.n == len(FACTS)
    assert clean.errors == 0
    assert clean.abstention is not None
    assert clean.abstention.mean == 0.0
    negative = result.condition("negative")
    # no passage of its own: the extractive pipeline finds no shared word and declines
    assert negative.abstention is not None
    assert negative.abstention.mean == 1.0
    rejection = negative.metrics["negative_rejection"]
    assert rejection is not None
    assert rejection.mean == 1.0
    assert rejection.n == len(FACTS)
    counter = result.condition("counterfactual")
    assert counter.follows_wrong is not None
    assert counter.follows_wrong.mean == 1.0
    assert counter.flags_conflict is not None
    assert counter.flags_conflict.mean == 0.0
    robust = counter.metrics["counterfactual_robustness"]
    assert robust is not None
    assert robust.mean == 0.0
    curve = result.curve("token_f1")
    assert [r for r, _ in curve] == [0.0, 0.2, 0.4, 0.6, 0.8]
    first, last = curve[0][1], curve[-1][1]
    assert first is not None
    assert last is not None
    assert first.mean > last.mean
    assert all(ci is None or 0.0 <= ci.low <= ci.mean <= ci.high <= 1.0 for _, ci in curve)
    abst = result.curve("abstention")
    assert abst[0][1] is not None
    assert abst[-1][1] is not None
    assert abst[-1][1].mean >= abst[0][1].mean
    as_dict = result.to_dict()
    assert as_dict["summary"][0]["condition"] == "noise@0"
    assert as_dict["summary"][-1]["follows_wrong"]["mean"] == 1.0


def test_rerun_with_a_cache_calls_neither_pipeline_nor_judge(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache.sqlite")
    conds = [CLEAN, Condition("noise", 0.5), Condition("negative"), Condition("counterfactual")]
    judge = CountingJudge()
    first_pipe = ExtractivePipeline(_retrieval())
    first = run_robustness(
        first_pipe,
        _samples(),
        conditions=conds,
        counterfactuals="judge",
        settings=Settings(judge=judge, cache=cache),
    )
    assert first_pipe.calls == len(FACTS) * len(conds)
    assert judge.calls > 0
    assert first.metrics == {k: v for k, v in DEFAULT_METRICS.items()}

    again_judge = CountingJudge()
    again_pipe = ExtractivePipeline(_retrieval())
    again = run_robustness(
        again_pipe,
        _samples(),
        conditions=conds,
        counterfactuals="judge",
        settings=Settings(judge=again_judge, cache=cache),
    )
    assert again_pipe.calls == 0
    assert again.pipeline_calls == 0
    assert again.answers_cached == first_pipe.calls
    assert again_judge.calls == 0
    assert [s.model_dump() for s in again.samples] == [s.model_dump() for s in first.samples]
    assert again.to_dict()["summary"] == first.to_dict()["summary"]

    # an edited pipeline (another identity) is asked again; so are perturbed answers under
    # another seed, but not the clean ones (the clean run depends on no seed)
    edited = ExtractivePipeline(_retrieval(), identity="extractive:v2")
    run_robustness(
        edited,
        _samples(),
        conditions=conds,
        settings=Settings(cache=cache, embedder=HashEmbedder()),
    )
    assert edited.calls == len(FACTS) * len(conds)
    reseeded = ExtractivePipeline(_retrieval())
    run_robustness(
        reseeded,
        _samples(),
        conditions=[CLEAN, Condition("noise", 0.5)],
        seed=7,
        settings=Settings(cache=cache, embedder=HashEmbedder()),
    )
    assert reseeded.calls == len(FACTS)


def test_questions_that_cannot_be_perturbed_are_skipped_with_a_reason() -> None:
    retrieval = _retrieval()
    retrieval["hamlet"] = []  # retrieves nothing
    samples = [
        *_samples()[:4],
        Sample(id="hamlet", question="Who wrote the play Hamlet?", reference="Shakespeare"),
        # no number or name of the reference in its passages: no offline counterfactual
        Sample(id="boiling", question=FACTS[4][1], reference="it depends on pressure"),
        Sample(id="down", question="Is the model up?", reference="no"),
    ]
    retrieval["down"] = [Context(text="The model is down today.", id="down-0")]
    pipe = ExtractivePipeline(retrieval, fail=["down"])
    result = run_robustness(pipe, samples, settings=OFFLINE)
    clean = result.condition("noise@0")
    assert clean.errors == 1
    assert clean.n == len(samples)
    for summary in result.summary[1:]:
        reasons = {s.sample_id: s.reason for s in summary.skipped}
        assert "retrieved no passage" in reasons["hamlet"], summary.name
        assert "clean run failed" in reasons["down"]
        assert "model is down" in reasons["down"]
    counter = {s.sample_id: s.reason for s in result.condition("counterfactual").skipped}
    assert "boiling" in counter
    assert counter["boiling"].startswith("no counterfactual")
    ids = {s.id for s in result.samples}
    assert "hamlet@negative" not in ids
    assert "down@noise@0.2" not in ids
    # a skipped question is counted, never silently missing: answered + skipped = all
    for summary in result.summary:
        assert summary.n + len(summary.skipped) == len(samples)


def test_a_pool_too_small_is_a_skip_naming_the_counts() -> None:
    pipe = ExtractivePipeline(_retrieval())
    seen: list[tuple[str, int, int]] = []
    result = run_robustness(
        pipe,
        _samples()[:1],
        conditions=[Condition("noise", 0.5)],
        settings=OFFLINE,
        progress=lambda name, done, total: seen.append((name, done, total)),
    )
    (reason,) = result.condition("noise@0.5").skipped
    assert "noise pool" in reason.reason
    assert "1 needed" in reason.reason
    assert pipe.calls == 1
    assert seen == [("noise@0", 1, 1), ("noise@0.5", 0, 0)]  # a condition all skipped is done


def test_pipeline_calls_run_concurrently_up_to_max_concurrency() -> None:
    pipe = ExtractivePipeline(_retrieval(), delay=0.02)
    seen: list[tuple[str, int, int]] = []
    asyncio.run(
        arun_robustness(
            pipe,
            _samples(),
            conditions=[CLEAN, Condition("noise", 0.5), Condition("negative")],
            settings=Settings(embedder=HashEmbedder(), max_concurrency=2),
            progress=lambda name, done, total: seen.append((name, done, total)),
        )
    )
    assert pipe.max_in_flight == 2
    finals = {name: (done, total) for name, done, total in seen if done == total}
    assert finals == {n: (len(FACTS), len(FACTS)) for n in ("noise@0", "noise@0.5", "negative")}


def test_plan_counts_pipeline_and_judge_calls_before_anything_runs(tmp_path: Path) -> None:
    conds = default_conditions()
    offline = plan_robustness(_samples(), conds)
    assert offline.pipeline_calls == len(FACTS) * len(conds)
    assert offline.judge_calls == 0
    assert offline.cost_usd is None
    assert offline.metrics == {k: [m.split(":")[0] for m in v] for k, v in OFFLINE_METRICS.items()}
    judged = plan_robustness(_samples(), conds, have_judge=True, counterfactuals="judge")
    # answer_correctness (2) + faithfulness (shares answer.analyze: +1) per noise sample,
    # one rejection call per negative, counterfactual + correctness per counterfactual
    assert judged.by_metric["negative_rejection"] == len(FACTS)
    assert judged.judge_calls > 0
    assert judged.counterfactual_calls == len(FACTS)
    text = "\n".join(judged.lines())
    assert f"pipeline calls: {len(FACTS) * len(conds)}" in text
    assert "writing counterfactuals" in text

    cache = str(tmp_path / "cache.sqlite")

    def planned(samples: list[Sample]) -> RobustnessPlan:
        from ragbridge.core.cache.disk import open_cache

        store = open_cache(cache)
        assert store is not None
        try:
            return plan_robustness(samples, conds, cache=AnswerCache(store, "extractive:v1"))
        finally:
            store.close()

    def run(samples: list[Sample], conditions: list[Condition]) -> int:
        pipe = ExtractivePipeline(_retrieval())
        settings = Settings(cache=cache, embedder=HashEmbedder())
        run_robustness(pipe, samples, conditions=conditions, settings=settings)
        return pipe.calls

    run(_samples(), [CLEAN])
    warm = planned(_samples())
    assert warm.answers_cached == len(FACTS)
    assert warm.pipeline_calls == len(FACTS) * (len(conds) - 1)
    # a full run: the plan of the rerun rebuilds the pool and the counterfactuals and finds
    # every answer, and the rerun indeed calls nothing
    assert run(_samples(), conds) == warm.pipeline_calls
    hot = planned(_samples())
    assert hot.answers_cached == len(FACTS) * len(conds)
    assert hot.pipeline_calls == 0
    assert "pipeline calls: 0" in "\n".join(hot.lines())
    assert run(_samples(), conds) == 0
    # a question without a counterfactual is a skip the plan foresees, not a call
    odd = [*_samples(), Sample(id="odd", question="Is it odd?", reference="it depends")]
    retrieval_odd = Context(text="Oddness depends on the observer.", id="odd-0")
    pipe = ExtractivePipeline({**_retrieval(), "odd": [retrieval_odd]})
    settings = Settings(cache=cache, embedder=HashEmbedder())
    result = run_robustness(pipe, odd, conditions=conds, settings=settings)
    skipped = sum(len(s.skipped) for s in result.summary)
    assert skipped >= 1
    again = planned(odd)
    assert again.skipped == skipped
    assert again.pipeline_calls == 0


def test_metric_choice_without_a_judge() -> None:
    chosen = condition_metrics({"noise": ["faithfulness", "answer_correctness"]}, have_judge=False)
    assert chosen.by_kind["noise"] == ["faithfulness", "token_f1"]
    assert any("faithfulness:offline" in n for n in chosen.notes)
    with pytest.raises(ValueError, match="needs a judge"):
        condition_metrics({"noise": ["faithfulness:llm"]}, have_judge=False)
    with pytest.raises(ValueError, match="unknown condition kind"):
        condition_metrics({"noisy": ["faithfulness"]}, have_judge=False)
    with pytest.raises(ValueError, match="two providers"):
        condition_metrics(
            {"noise": ["faithfulness:offline"], "counterfactual": ["faithfulness:llm"]},
            have_judge=True,
        )
    with pytest.raises(ValueError, match="needs a judge"):
        run_robustness(
            ExtractivePipeline(_retrieval()), _samples(), counterfactuals="judge", settings=OFFLINE
        )


def test_judge_writes_counterfactuals_and_the_offline_builder_covers_the_rest() -> None:
    from ragbridge.core.judging.engine import Price
    from ragbridge.core.testing import ScriptedJudge, minimal_reply

    def write(messages: list[dict[str, str]]) -> dict[str, str]:
        text = " ".join(m.get("content", "") for m in messages)
        if "Eiffel Tower" in text:
            return {"original": "1889", "wrong": "1066"}
        return {"original": "not in any passage", "wrong": "x"}  # refused: offline instead

    judge = ScriptedJudge(
        {"robustness.counterfactual": write, "*": lambda m: minimal_reply(m)}  # type: ignore[dict-item]
    )
    result = run_robustness(
        ExtractivePipeline(_retrieval()),
        _samples(),
        conditions=[CLEAN, Condition("counterfactual")],
        counterfactuals="judge",
        metrics={"noise": ["token_f1"], "counterfactual": ["counterfactual_robustness:offline"]},
        settings=Settings(judge=judge, price=Price(1.0, 2.0)),
    )
    asked = [c for c in judge.calls if c.task == "robustness.counterfactual"]
    assert len(asked) == len(FACTS)
    assert result.counterfactuals["eiffel"] == {
        "original": "1889",
        "wrong": "1066",
        "source": "judge",
    }
    assert {v["source"] for k, v in result.counterfactuals.items() if k != "eiffel"} == {"offline"}
    by_id = {s.id: s for s in result.samples}
    assert "1066" in (by_id["eiffel@counterfactual"].answer or "")
    spent = result.evaluation.metadata["counterfactual_usage"]
    assert spent["prompt_tokens"] > 0
    assert result.evaluation.metadata["cost_usd"] > 0


class RaisingPipeline(ExtractivePipeline):
    """A pipeline that raises instead of recording its error (the protocol asks it not to)."""

    raised = 0

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        if sample.id == "mars" and perturb is not None:
            self.raised += 1
            raise ConnectionError("vector store unreachable")
        return await super().answer(sample, perturb)


def test_a_pipeline_that_raises_is_an_error_of_that_question_only(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache.sqlite")
    conds = [CLEAN, Condition("negative")]
    settings = Settings(cache=cache, embedder=HashEmbedder())
    result = run_robustness(
        RaisingPipeline(_retrieval()), _samples(), conditions=conds, settings=settings
    )
    negative = result.condition("negative")
    assert negative.errors == 1
    assert negative.n == len(FACTS)
    failed = {s.id: s for s in result.samples}["mars@negative"]
    assert failed.answer is None
    assert "vector store unreachable" in failed.metadata["error"]
    score = result.evaluation.get("mars@negative", "negative_rejection")
    assert score is not None
    assert score.value is None
    # the error was not cached: the rerun asks again for that answer only
    again = RaisingPipeline(_retrieval())
    run_robustness(again, _samples(), conditions=conds, settings=settings)
    assert again.raised == 1  # asked again for the failed answer...
    assert again.calls == 0  # ...and for nothing else
    assert (
        run_robustness(
            ExtractivePipeline(_retrieval()), _samples(), conditions=conds, settings=settings
        ).pipeline_calls
        == 1
    )
