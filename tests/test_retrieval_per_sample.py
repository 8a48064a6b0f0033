"""Ranking measures per Sample, including the no-answer and unlabelled policies."""

from __future__ import annotations

import math

import pytest

from ragbridge.core import Context, Sample, score_sample, score_samples
from ragbridge.core.results import FailureKind


def _sample(
    sid: str, ids: list[str | None], relevance: dict[str, int] | None, **kw: object
) -> Sample:
    contexts = [
        Context(text=f"passage {i}", id=i, score=kw.pop(f"s{n}", None)) for n, i in enumerate(ids)
    ]  # type: ignore[arg-type]
    return Sample(id=sid, question="q?", contexts=contexts, relevance=relevance, **kw)  # type: ignore[arg-type]


def test_values_come_from_context_order_against_relevance() -> None:
    sample = _sample("s", ["d3", "d1", "d7", "d2"], {"d1": 1, "d2": 2, "d9": 1, "d3": 0})
    scores = score_sample(
        sample,
        ["hit_rate@1", "hit_rate@2", "mrr", "precision@2", "recall@4", "f1@4", "ndcg@3",
         "average_precision", "r_precision"],
    )  # fmt: skip
    values = {name: s.value for name, s in scores.items()}
    assert values["hit_rate@1"] == 0.0
    assert values["hit_rate@2"] == 1.0
    assert values["mrr"] == 0.5
    assert values["precision@2"] == 0.5
    assert values["recall@4"] == pytest.approx(2 / 3)
    assert values["f1@4"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    dcg = 1 / math.log2(3)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert values["ndcg@3"] == pytest.approx(dcg / idcg)
    assert values["average_precision"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert values["r_precision"] == pytest.approx(1 / 3)
    recall = scores["recall@4"]
    assert recall.provider == "retrieval"
    assert recall.details == {"relevant_ranks": [2, 4], "num_relevant": 3}


def test_no_answer_question_skips_ranking_measures_and_scores_no_answer() -> None:
    declined = _sample("a", [], {})
    returned = _sample("b", ["d1"], {"d1": 0})
    quiet = _sample("c", ["d1", "d2"], {}, s0=0.2, s1=0.1)
    evaluation = score_samples(
        [declined, returned, quiet], ["recall@5", "no_answer"], no_answer_threshold=0.5
    )
    recall = evaluation.get("a", "recall@5")
    assert recall is not None
    assert recall.status == "skipped"
    assert "no relevant document exists" in (recall.reason or "")
    na = {sid: evaluation.get(sid, "no_answer") for sid in "abc"}
    assert na["a"] is not None
    assert na["a"].value == 1.0
    assert na["b"] is not None
    assert na["b"].value == 0.0
    assert na["c"] is not None
    assert na["c"].value == 1.0
    assert "scoring >= 0.5" in (na["c"].reason or "")


def test_declining_counts_as_no_answer_even_with_contexts() -> None:
    sample = _sample("s", ["d1"], {}, metadata={"declined": True})
    assert score_sample(sample, ["no_answer"])["no_answer"].value == 1.0


def test_no_answer_is_skipped_for_answerable_questions() -> None:
    sample = _sample("s", ["d1"], {"d1": 1})
    score = score_sample(sample, ["no_answer"])["no_answer"]
    assert score.status == "skipped"


def test_unlabelled_and_missing_ids_are_typed_failures() -> None:
    unlabelled = _sample("u", ["d1"], None)
    no_id = _sample("n", ["d1", None], {"d1": 1})
    evaluation = score_samples([unlabelled, no_id], ["mrr", "no_answer"])
    failure = evaluation.get("u", "mrr")
    assert failure is not None
    assert failure.failure is not None
    assert failure.failure.kind is FailureKind.MISSING_INPUT
    assert "'relevance' is null" in failure.failure.message
    missing = evaluation.get("n", "mrr")
    assert missing is not None
    assert missing.failure is not None
    assert "contexts[1].id is missing" in missing.failure.message
    summary = evaluation.summary()["mrr"]
    assert (summary.n_scored, summary.n_failed) == (0, 2)


def test_repeated_document_ids_count_once() -> None:
    sample = _sample("s", ["d1", "d1", "d2"], {"d1": 1, "d2": 1})
    scores = score_sample(sample, ["precision@2", "recall@2"])
    assert scores["precision@2"].value == 1.0  # d1, d2 after the duplicate is dropped
    assert scores["recall@2"].value == 1.0


def test_evaluation_keeps_sample_order_and_rejects_counts() -> None:
    samples = [_sample(s, ["d1"], rel) for s, rel in [("z", None), ("a", {"d1": 1}), ("m", {})]]
    evaluation = score_samples(samples, ["mrr"])
    assert evaluation.sample_ids == ["z", "a", "m"]
    assert evaluation.summary()["mrr"].mean == 1.0
    with pytest.raises(ValueError, match="count"):
        score_samples(samples, ["num_ret"])
    with pytest.raises(ValueError, match="duplicate sample id"):
        score_samples([samples[0], samples[0]], ["mrr"])
