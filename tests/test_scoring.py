"""Scorer (one sample per call, for sinks) and explain (a Score as readable lines)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragbridge.core import Scorer, explain
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, ScriptedJudge

SAMPLE = Sample(
    id="s1",
    question="Where is the Eiffel Tower?",
    answer="The Eiffel Tower is in Paris. It is 500 metres tall.",
    contexts=[Context(text="The Eiffel Tower is a tower in Paris.", id="d1")],
    reference="It is in Paris.",
    relevance={"d1": 1},
)

SCRIPT = {
    "answer.analyze": {
        "claims": ["The Eiffel Tower is in Paris.", "It is 500 metres tall."],
        "questions": ["Where is the Eiffel Tower?"],
        "noncommittal": False,
    },
    "faithfulness.verify": {
        "verdicts": [
            {"reason": "context 1 says so", "verdict": "supported", "context": 1},
            {"reason": "no height is given", "verdict": "unsupported", "context": None},
        ]
    },
}


def test_scorer_scores_every_metric_and_shares_the_claims_between_them() -> None:
    judge = ScriptedJudge(dict(SCRIPT))
    scorer = Scorer(["faithfulness", "hallucination", "recall@5"], judge=judge)
    scores = scorer.score(SAMPLE)
    assert list(scores) == ["faithfulness", "hallucination", "recall@5"]
    assert scores["faithfulness"].value == 0.5
    assert scores["hallucination"].value == 0.5
    assert scores["recall@5"].value == 1.0
    # one analysis + one verification serve both claim metrics
    assert judge.tasks().count("answer.analyze") == 1
    assert judge.tasks().count("faithfulness.verify") == 1


def test_sync_score_works_inside_a_running_loop_and_the_cache_serves_later_records(
    tmp_path: Path,
) -> None:
    judge = CountingJudge()
    scorer = Scorer(["faithfulness"], judge=judge, cache=tmp_path / "c.sqlite")

    async def inside_a_loop() -> dict[str, Score]:
        return scorer.score(SAMPLE)

    first = asyncio.run(inside_a_loop())
    calls = judge.calls
    again = scorer.score(SAMPLE)
    assert judge.calls == calls  # every call of the second record came from the cache
    assert again["faithfulness"].value == first["faithfulness"].value
    assert again["faithfulness"].usage.cached_calls == calls


def test_scorer_refuses_a_judge_metric_without_a_judge_naming_the_offline_alternative() -> None:
    with pytest.raises(ValueError, match=r"faithfulness need a judge.*'faithfulness:offline'"):
        Scorer(["faithfulness", "mrr"])
    with pytest.raises(ValueError, match="no metrics"):
        Scorer([])
    with pytest.raises(TypeError, match="expected a Sample"):
        Scorer(["mrr"]).score({"id": "x"})  # type: ignore[arg-type]


def test_explain_lists_the_verdict_of_every_claim() -> None:
    score = Scorer(["faithfulness"], judge=ScriptedJudge(dict(SCRIPT))).score(SAMPLE)[
        "faithfulness"
    ]
    text = explain(score)
    lines = text.splitlines()
    assert lines[0] == score.reason
    assert lines[1].startswith("  ✓ [supported] The Eiffel Tower is in Paris.")
    assert "(d1)" in lines[1]
    assert lines[2] == "  ✗ [unsupported] It is 500 metres tall. — no height is given"
    assert explain(score, limit=1).splitlines()[-1] == "  … and 1 more"


def test_explain_failures_and_skips() -> None:
    assert (
        explain(Score.fail("timeout", "no reply in 30 s")) == "failed (timeout): no reply in 30 s"
    )
    assert explain(Score.skip("no reference")) == "skipped: no reference"
    assert explain(Score(value=0.25)) == "score 0.250"
    context_score = Score(
        value=0.5,
        reason="1 of 2 contexts useful",
        details={"contexts": [{"rank": 1, "context_id": "d9", "useful": False, "reason": "off"}]},
    )
    assert explain(context_score).splitlines()[1] == "  ✗ [not useful] context 1 (d9) — off"
