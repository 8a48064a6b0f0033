"""Ranking measures per Sample, including the no-answer and unlabelled policies."""

from __future__ import annotations

import math

import pytest

from ragbridge.core import Context, Sample, score_ranking, score_samples
from ragbridge.core.results.evaluation import FailureKind


def _sample(
    sid: str, ids: list[str | None], relevance: dict[str, int] | None, **kw: object
) -> Sample:
    contexts = [
        Context(text=f"passage {i}", id=i, score=kw.pop(f"s{n}", None)) for n, i in enumerate(ids)
    ]  # type: ignore[arg-type]
    return Sample(id=sid, question="q?", contexts=contexts, relevance=relevance, **kw)  # type: ignore[arg-type]


def test_values_come_from_context_order_against_relevance() -> None:
    sample = _sample("s", ["d3", "d1", "d7", "d2"], {"d1": 1, "d2": 2, "d9": 1, "d3": 0})
    scores = score_ranking(
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
    assert recall.details == {
        "relevant_ranks": [2, 4],
        "num_relevant": 3,
        "ids_matched": 3,  # d3 (grade 0) is a label too: the ids do name the labelled things
        "ids_retrieved": 4,
    }
    assert recall.reason is None
    assert "warnings" not in score_samples([sample], ["mrr"]).metadata


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
    assert score_ranking(sample, ["no_answer"])["no_answer"].value == 1.0


def test_no_answer_is_skipped_for_answerable_questions() -> None:
    sample = _sample("s", ["d1"], {"d1": 1})
    score = score_ranking(sample, ["no_answer"])["no_answer"]
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
    scores = score_ranking(sample, ["precision@2", "recall@2"])
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


def test_an_abstaining_answer_counts_as_declined() -> None:
    for answer in ("I don't know.", "The context does not say.", "Sorry, I could not find that."):
        sample = _sample("s", ["d1"], {}, answer=answer)
        score = score_ranking(sample, ["no_answer"])["no_answer"]
        assert score.value == 1.0, answer
        assert "abstains" in (score.reason or "")
    stated = _sample("s", ["d1"], {}, answer="The office opens at 9.")
    assert score_ranking(stated, ["no_answer"])["no_answer"].value == 0.0


def test_ids_that_match_no_label_are_flagged_on_the_sample() -> None:
    """A sample whose retrieved ids are none of its labels: a 0 that says why."""
    sample = _sample("s", ["chunk-7", "chunk-2"], {"doc-1": 1, "doc-4": 0})
    score = score_ranking(sample, ["recall@5"])["recall@5"]
    assert score.value == 0.0
    assert score.details is not None
    assert score.details["ids_matched"] == 0  # type: ignore[call-overload]
    assert score.details["id_mismatch"] == {  # type: ignore[call-overload]
        "retrieved": "chunk-7",
        "labelled": "doc-1",
        "labels_in_metadata": None,
        "llamaindex": False,
    }
    assert "none of the 2 retrieved context ids (e.g. 'chunk-7')" in (score.reason or "")
    assert "labelled id (e.g. 'doc-1')" in (score.reason or "")
    # one sample, no cause in sight: still said at the run level, whatever the run size
    (line,) = score_samples([sample], ["recall@5"]).metadata["warnings"]
    assert line.startswith("ranking measures: 1 of 1 labelled sample retrieved no labelled")


def test_labels_found_in_metadata_make_the_sample_a_typed_failure() -> None:
    """The ids are chunk UUIDs, the labels sit in metadata['source']: conclusive, not a 0."""
    contexts = [
        Context(text="a", id="0b6f1c2e-8f0e-4c55-9d2a-6a1f4f7e9c01", metadata={"source": "hr.md"}),
        Context(text="b", id="5c3d7a90-1b2e-4f8a-b6c4-2d9e8f7a6b5c", metadata={"source": "it.md"}),
    ]
    sample = Sample(id="s", question="q", contexts=contexts, relevance={"it.md": 1})
    evaluation = score_samples([sample], ["recall@5", "mrr"])
    for metric in ("recall@5", "mrr"):
        score = evaluation.get("s", metric)
        assert score is not None
        assert score.failure is not None
        assert score.failure.kind is FailureKind.INVALID_INPUT
        assert "metadata['source'] holds labelled ids" in score.failure.message
        assert "id_key='source'" in score.failure.message
    (warning,) = evaluation.metadata["warnings"]
    assert warning.startswith("ranking measures: 1 of 1 labelled sample retrieved no labelled")
    assert "id_key='source'" in warning


def test_llamaindex_node_labels_name_use_ref_doc_id_false() -> None:
    contexts = [
        Context(text="a", id="handbook", metadata={"node_id": "n-1", "ref_doc_id": "handbook"}),
        Context(text="b", id="faq", metadata={"node_id": "n-9", "ref_doc_id": "faq"}),
    ]
    sample = Sample(id="s", question="q", contexts=contexts, relevance={"n-9": 1})
    score = score_ranking(sample, ["mrr"])["mrr"]
    assert score.failure is not None
    assert "use_ref_doc_id=False" in score.failure.message
