"""Roll-ups of a conversation run: per conversation (mean, worst turn, first failing turn) and
over conversations (a CI that resamples conversations, a comparison paired by conversation)."""

from __future__ import annotations

import numpy as np
import pytest

from ragbridge.core import Evaluation, Score
from ragbridge.core.multiturn import (
    LEVELS_KEY,
    compare_conversations,
    conversation_summary,
    per_conversation,
    rollup,
)
from ragbridge.core.results.stats import mean_ci, paired_permutation_test


def run(cells: dict[str, float | Score], metric: str = "faithfulness") -> Evaluation:
    return Evaluation(
        (sid, metric, v if isinstance(v, Score) else Score(value=v)) for sid, v in cells.items()
    )


TIMEOUT = Score.fail("timeout", "no reply within 30 s")


def test_rollup_names_the_worst_and_the_first_failing_turn() -> None:
    evaluation = run(
        {
            "c1#1": 0.9,
            "c1#3": 0.4,  # the first below 0.5
            "c1#5": TIMEOUT,
            "c1#7": 0.2,  # the worst
            "c2#1": 1.0,
            "c2#3": Score.skip("this turn retrieved nothing"),
        }
    )
    c1, c2 = rollup(evaluation, "faithfulness")
    assert c1.conversation == "c1"
    assert (c1.turns, c1.turns_scored, c1.turns_failed, c1.turns_skipped) == (4, 3, 1, 0)
    assert c1.mean == pytest.approx((0.9 + 0.4 + 0.2) / 3)
    assert (c1.worst_turn, c1.worst_value) == (7, 0.2)
    assert c1.first_failing_turn == 3
    assert c1.first_failing == "0.4 is below the threshold 0.5"
    assert (c2.worst_turn, c2.first_failing_turn, c2.turns_skipped) == (1, None, 1)

    strict = rollup(evaluation, "faithfulness", threshold=0.95)[0]
    assert strict.first_failing_turn == 1
    lenient = rollup(evaluation, "faithfulness", threshold=0.1)[0]
    assert lenient.first_failing_turn == 5
    assert lenient.first_failing is not None
    assert lenient.first_failing.startswith("failed (timeout)")


def test_turns_are_ordered_by_position_not_by_row_order_and_ids_may_hold_a_hash() -> None:
    evaluation = run({"chat#7#10": 0.1, "chat#7#2": 0.3})
    (only,) = rollup(evaluation, "faithfulness")
    assert only.conversation == "chat#7"
    assert (only.first_failing_turn, only.worst_turn) == (2, 10)


def test_a_measure_of_harm_fails_above_the_threshold_and_its_worst_is_the_highest() -> None:
    evaluation = run({"c1#1": 0.1, "c1#3": 0.7, "c1#5": 0.9}, metric="hallucination")
    (c1,) = rollup(evaluation, "hallucination")
    assert (c1.worst_turn, c1.worst_value, c1.first_failing_turn) == (5, 0.9, 3)


def test_a_conversation_metric_has_nothing_to_roll_up() -> None:
    evaluation = run({"c1": 0.5, "c2": 1.0}, metric="knowledge_retention")
    evaluation.metadata[LEVELS_KEY] = {"knowledge_retention": "conversation"}
    with pytest.raises(ValueError, match="once per conversation"):
        rollup(evaluation, "knowledge_retention")
    summary = conversation_summary(evaluation, "knowledge_retention")
    assert (summary.mean, summary.n_scored) == (0.75, 2)


def test_the_summary_weighs_conversations_equally_and_resamples_them() -> None:
    # c1: three perfect turns; c2..c4: one bad turn each. Over turns the mean is 0.5; over
    # conversations 0.25, and the CI is the bootstrap of the four conversation means.
    cells: dict[str, float | Score] = {"c1#1": 1.0, "c1#3": 1.0, "c1#5": 1.0}
    cells.update({f"c{i}#1": 0.0 for i in (2, 3, 4)})
    cells["c5#1"] = TIMEOUT
    evaluation = run(cells)
    summary = conversation_summary(evaluation, "faithfulness", seed=3)
    assert summary.mean == pytest.approx(0.25)
    assert (summary.n_scored, summary.n_failed) == (4, 1)
    assert summary.failures_by_kind == {"timeout": 1}
    expected = mean_ci([1.0, 0.0, 0.0, 0.0], seed=3)
    assert (summary.ci_low, summary.ci_high) == pytest.approx((expected.low, expected.high))
    assert evaluation.summary()["faithfulness"].mean == pytest.approx(0.5)  # the turn view


def test_compare_pairs_by_conversation_over_per_conversation_means() -> None:
    a = run({"c1#1": 0.2, "c1#3": 0.4, "c2#1": 0.5, "c3#1": 0.1, "c3#3": 0.3, "c4#1": 0.6})
    # b lists the conversations in another order and c1 has one more turn
    b = run({"c4#1": 0.7, "c3#1": 0.6, "c2#1": 0.9, "c1#1": 0.5, "c1#3": 0.5, "c1#5": 0.8})
    result = compare_conversations(a, b, "faithfulness", n_resamples=2000)
    means_a = np.array([0.3, 0.5, 0.2, 0.6])
    means_b = np.array([0.6, 0.9, 0.6, 0.7])
    assert result.n_paired == 4
    assert result.n_unpaired == 0
    assert result.mean_a == pytest.approx(means_a.mean())
    assert result.diff == pytest.approx((means_b - means_a).mean())
    assert result.p_value == pytest.approx(paired_permutation_test(means_a, means_b))
    assert result.ci_low is not None
    assert result.ci_high is not None
    assert 0 < result.ci_low <= result.diff <= result.ci_high


def test_compare_refuses_runs_over_different_conversations() -> None:
    a = run({"c1#1": 0.2, "c2#1": 0.5, "c3#1": 0.1})
    b = run({"c1#1": 0.3, "c2#1": 0.6, "c9#1": 0.9})
    with pytest.raises(ValueError, match="do not cover the same conversations") as raised:
        compare_conversations(a, b, "faithfulness")
    message = str(raised.value)
    assert "1 only in a ('c3')" in message
    assert "1 only in b ('c9')" in message


def test_a_conversation_whose_turns_all_failed_is_a_failure_not_a_zero() -> None:
    per = per_conversation(run({"c1#1": TIMEOUT, "c1#3": TIMEOUT, "c2#1": 0.5}), "faithfulness")
    failed = per.get("c1", "faithfulness")
    assert failed is not None
    assert failed.failure is not None
    assert failed.failure.kind == "timeout"
    assert "none of the 2 turns was scored" in failed.failure.message
