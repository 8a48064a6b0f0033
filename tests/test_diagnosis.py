"""Retrieval × generation quadrants."""

from __future__ import annotations

import pytest

from ragbridge.core.results.diagnosis import Quadrant, diagnose
from ragbridge.core.results.evaluation import Evaluation, Score


def _evaluation(rows: dict[str, dict[str, float | Score]]) -> Evaluation:
    ev = Evaluation()
    for sid, cells in rows.items():
        for metric, v in cells.items():
            ev.add(sid, metric, v if isinstance(v, Score) else Score(value=v))
    return ev


ROWS: dict[str, dict[str, float | Score]] = {
    "fine": {"recall@5": 1.0, "faithfulness": 0.9, "mrr": 1.0},
    "generator": {"recall@5": 1.0, "faithfulness": 0.2, "mrr": 0.5},
    "lost": {"recall@5": 0.0, "faithfulness": 0.1, "mrr": 0.0},
    "danger-a": {"recall@5": 0.0, "faithfulness": 0.7, "mrr": 0.0},
    "danger-b": {"recall@5": 0.25, "faithfulness": 1.0, "mrr": 0.2},
    "no-answer": {
        "recall@5": Score.skip("no relevant document exists"),
        "faithfulness": 0.5,
        "mrr": Score.skip("no relevant document exists"),
    },
}


def test_quadrants_with_the_dangerous_rows_first() -> None:
    d = diagnose(_evaluation(ROWS))
    assert (d.retrieval_metric, d.generation_metric) == ("recall@5", "faithfulness")
    assert [(r.sample_id, r.quadrant) for r in d.rows] == [
        ("danger-b", Quadrant.BAD_RETRIEVAL_GOOD_ANSWER),  # the more confident answer first
        ("danger-a", Quadrant.BAD_RETRIEVAL_GOOD_ANSWER),
        ("lost", Quadrant.BAD_RETRIEVAL_BAD_ANSWER),
        ("generator", Quadrant.GOOD_RETRIEVAL_BAD_ANSWER),
        ("fine", Quadrant.GOOD_RETRIEVAL_GOOD_ANSWER),
        ("no-answer", Quadrant.UNKNOWN),
    ]
    assert d.counts["bad retrieval, good-looking answer"] == 2
    assert d.rows[-1].note == "recall@5: skipped (no relevant document exists)"


def test_hallucination_reads_lower_as_better_and_measures_can_be_named() -> None:
    ev = _evaluation(
        {
            "a": {"mrr": 0.1, "hallucination": 0.0},
            "b": {"mrr": 1.0, "hallucination": 0.9},
        }
    )
    d = diagnose(ev, retrieval="mrr", generation="hallucination", retrieval_threshold=0.5)
    quadrants = {r.sample_id: r.quadrant for r in d.rows}
    assert quadrants == {
        "a": Quadrant.BAD_RETRIEVAL_GOOD_ANSWER,
        "b": Quadrant.GOOD_RETRIEVAL_BAD_ANSWER,
    }


def test_thresholds_move_samples_between_quadrants() -> None:
    d = diagnose(_evaluation(ROWS), retrieval_threshold=0.2)
    assert d.in_quadrant(Quadrant.GOOD_RETRIEVAL_GOOD_ANSWER)[0].sample_id == "danger-b"


def test_errors_name_what_is_missing() -> None:
    with pytest.raises(ValueError, match="no retrieval measure in the evaluation"):
        diagnose(_evaluation({"a": {"faithfulness": 1.0}}))
    with pytest.raises(ValueError, match="measure 'ndcg@3' is not in the evaluation"):
        diagnose(_evaluation(ROWS), retrieval="ndcg@3")
    with pytest.raises(ValueError, match=r"retrieval_threshold must lie within \[0, 1\]"):
        diagnose(_evaluation(ROWS), retrieval_threshold=5)
