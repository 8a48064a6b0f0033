"""Judge agreement (`ragbridge.core.labels.agreement`): statistics on hand-built cases, consensus
over several annotators, hallucination read inverted, undefined statistics, and the input mistakes
that must be said out loud (ids that never match)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragbridge.core.labels.agreement import (
    AgreementError,
    AgreementTable,
    MetricAgreement,
    Statistic,
    _kappa_2x2,
    best_threshold,
    consensus,
    judge_agreement,
    judge_says_yes,
    people_agreement,
)
from ragbridge.core.labels.annotation import annotator_agreement
from ragbridge.core.labels.human import QUESTIONS, HumanLabel
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import cohen_kappa

# Eight samples: four people call grounded, four not; the judge ranks all but one pair right.
SCORES = [0.9, 0.8, 0.7, 0.3, 0.6, 0.2, 0.1, 0.4]
PEOPLE = ["yes", "yes", "yes", "yes", "no", "no", "no", "no"]


def _case(
    scores: list[float] = SCORES, people: list[str] = PEOPLE, *, provider: str = "offline"
) -> tuple[Evaluation, list[HumanLabel]]:
    ev = Evaluation()
    labels = []
    for i, (value, said) in enumerate(zip(scores, people, strict=True)):
        ev.add(f"s{i}", "faithfulness", Score(value=value, provider=provider))
        ev.add(f"s{i}", "hallucination", Score(value=round(1.0 - value, 10), provider=provider))
        labels.append(HumanLabel(sample_id=f"s{i}", annotator="ann", grounded=said))  # type: ignore[arg-type]
    return ev, labels


def _row(table: AgreementTable, label: str) -> MetricAgreement:
    return next(r for r in table.rows if r.label == label)


def test_hand_built_case_gives_the_known_kappa_auroc_spearman_confusion_and_threshold() -> None:
    ev, labels = _case()
    row = _row(judge_agreement(ev, labels), "faithfulness:offline")
    assert (row.n, row.n_binary, row.n_labels, row.n_people_yes) == (8, 8, 8, 4)
    assert row.default is not None
    assert row.best is not None
    # at 0.5: yes for 0.9, 0.8, 0.7, 0.6 -> TP 3, FP 1 (0.6), FN 1 (0.3), TN 3
    c = row.default.confusion
    assert (c.tp, c.fp, c.fn, c.tn) == (3, 1, 1, 3)
    assert c.positive == "grounded = yes"
    # p_o = 6/8, p_e = 1/2 -> kappa = 0.5
    assert row.default.kappa.value == pytest.approx(0.5)
    assert row.default.balanced_accuracy.value == pytest.approx(0.75)
    # best cut: yes above 0.6 -> TP 3, FP 0, FN 1, TN 4: p_o = 7/8, p_e = 1/2 -> kappa 0.75
    assert row.best.threshold == pytest.approx(0.6)
    assert row.best.kappa.value == pytest.approx(0.75)
    assert row.best.rule == "faithfulness:offline > 0.6 means grounded = yes"
    # 14 of the 16 (positive, negative) pairs are ordered right
    assert row.auroc.value == pytest.approx(14 / 16)
    # ranks of the scores [8,7,6,3,5,2,1,4] against tied ranks 6.5 / 2.5: r = 24 / sqrt(32 * 42)
    assert row.spearman.value == pytest.approx(24 / math.sqrt(32 * 42))
    assert row.auroc.ci_low is not None
    assert row.auroc.ci_high is not None
    assert row.auroc.ci_low <= 14 / 16 <= row.auroc.ci_high
    assert row.default.kappa.ci_low is not None


def test_hallucination_is_read_inverted_and_agrees_exactly_with_faithfulness() -> None:
    ev, labels = _case()
    table = judge_agreement(ev, labels)
    faith, halluc = _row(table, "faithfulness:offline"), _row(table, "hallucination:offline")
    assert halluc.inverted
    assert not faith.inverted
    assert halluc.question == faith.question == "grounded"
    assert halluc.auroc.value == pytest.approx(faith.auroc.value)
    assert halluc.spearman.value == pytest.approx(faith.spearman.value)
    assert halluc.spearman.value is not None
    assert halluc.spearman.value > 0
    assert halluc.default is not None
    assert faith.default is not None
    assert halluc.default.confusion == faith.default.confusion
    assert halluc.best is not None
    assert halluc.best.threshold == pytest.approx(0.4)
    assert halluc.best.rule == "hallucination:offline < 0.4 means grounded = yes"


def test_the_default_verdict_is_the_offline_providers_own_at_exactly_one_half() -> None:
    """Offline: faithful above 0.5, hallucinated from 0.5 on — a 0.5 is a "no" both ways."""
    half = np.asarray([0.5])
    assert not judge_says_yes(half, 0.5, inverted=False)[0]
    assert not judge_says_yes(half, 0.5, inverted=True)[0]
    ev, labels = _case([0.5, 0.9, 0.1], ["no", "yes", "no"])
    table = judge_agreement(ev, labels)
    for label in ("faithfulness:offline", "hallucination:offline"):
        row = _row(table, label)
        assert row.default is not None
        assert (row.default.confusion.tp, row.default.confusion.tn) == (1, 2)


def test_consensus_majority_for_binary_mean_for_graded_and_ties_have_none() -> None:
    labels = [
        HumanLabel(sample_id="a", annotator="p1", grounded="yes", accuracy=5),
        HumanLabel(sample_id="a", annotator="p2", grounded="yes", accuracy=4),
        HumanLabel(sample_id="a", annotator="p3", grounded="no", accuracy=1),
        HumanLabel(sample_id="b", annotator="p1", grounded="yes"),
        HumanLabel(sample_id="b", annotator="p2", grounded="partly"),
        HumanLabel(sample_id="c", annotator="p1", accuracy=3),
    ]
    grounded = consensus(labels, QUESTIONS["grounded"])
    assert set(grounded) == {"a", "b"}  # c has no grounded answer
    assert grounded["a"].positive is True
    assert grounded["a"].graded == pytest.approx(2 / 3)
    assert grounded["a"].n_labels == 3
    assert grounded["b"].positive is None  # one yes, one partly: no majority
    assert grounded["b"].graded == pytest.approx(0.75)
    accuracy = consensus(labels, QUESTIONS["accuracy"])
    assert accuracy["a"].positive is True  # 5 and 4 are >= 4
    assert accuracy["a"].graded == pytest.approx((1.0 + 0.75 + 0.0) / 3)
    assert accuracy["c"].positive is False


def test_tied_samples_are_left_out_of_binary_statistics_and_counted() -> None:
    ev, labels = _case()
    ev.add("tie", "faithfulness", Score(value=0.95, provider="offline"))
    labels += [
        HumanLabel(sample_id="tie", annotator="p1", grounded="yes"),
        HumanLabel(sample_id="tie", annotator="p2", grounded="no"),
    ]
    row = _row(judge_agreement(ev, labels, metrics=["faithfulness"]), "faithfulness:offline")
    assert (row.n, row.n_binary, row.n_ties, row.n_labels) == (9, 8, 1, 10)
    assert row.default is not None
    assert row.default.confusion.n == 8
    assert row.default.kappa.value == pytest.approx(0.5)  # as without the tied sample
    assert any("tied annotators" in note for note in row.notes)


def test_agreement_between_people_comes_from_the_annotation_module() -> None:
    labels = [
        HumanLabel(sample_id="1", annotator="a", grounded="yes"),
        HumanLabel(sample_id="1", annotator="b", grounded="yes"),
        HumanLabel(sample_id="2", annotator="a", grounded="no"),
        HumanLabel(sample_id="2", annotator="b", grounded="no"),
        HumanLabel(sample_id="3", annotator="a", grounded="yes"),
        HumanLabel(sample_id="3", annotator="b", grounded="partly"),
        HumanLabel(sample_id="4", annotator="a", grounded="yes"),  # alone: no pair
    ]
    people = people_agreement(labels, QUESTIONS["grounded"])
    found = annotator_agreement(labels)["grounded"]
    assert (people.samples, people.annotators, people.kappa_pairs) == (3, 2, 1)
    assert people.alpha.value == pytest.approx(found.alpha)
    assert people.kappa.value == pytest.approx(found.kappa)
    ev = Evaluation([(s, "faithfulness", Score(value=0.5)) for s in "1234"])
    table = judge_agreement(ev, labels)
    assert table.people == [people]
    single = judge_agreement(ev, labels[-1:] + labels[:1])
    assert single.people == []  # nobody labelled a sample twice: no row
    same = people_agreement(labels[:2], QUESTIONS["grounded"])
    assert same.alpha.value is None
    assert same.alpha.undefined == "alpha undefined: every label is the same"


def test_one_class_of_people_labels_makes_kappa_auroc_and_threshold_undefined() -> None:
    ev, labels = _case(people=["yes"] * 8)
    row = _row(judge_agreement(ev, labels), "faithfulness:offline")
    assert row.default is not None
    assert row.default.kappa.value is None
    assert "one class" in (row.default.kappa.undefined or "")
    assert row.auroc.value is None
    assert "every sample" in (row.auroc.undefined or "")
    assert row.spearman.value is None  # the graded answers are constant too
    assert row.best is None
    assert "one answer" in (row.best_undefined or "")
    c = row.default.confusion
    assert (c.tp, c.fn) == (4, 4)  # the confusion matrix is still what happened


def test_constant_judge_scores_are_undefined_not_zero() -> None:
    ev, labels = _case(scores=[0.9] * 8)
    row = _row(judge_agreement(ev, labels), "faithfulness:offline")
    assert row.default is not None
    assert row.default.kappa.value is None
    assert "says yes on all 8" in (row.default.kappa.undefined or "")
    assert row.default.balanced_accuracy.value == pytest.approx(0.5)
    assert row.spearman.value is None
    assert "same score" in (row.spearman.undefined or "")
    assert row.auroc.value is None
    assert "same score" in (row.auroc.undefined or "")
    assert row.best is None
    assert "same score" in (row.best_undefined or "")


def test_a_single_pair_has_no_spearman() -> None:
    ev, labels = _case(scores=[0.9], people=["yes"])
    row = _row(judge_agreement(ev, labels), "faithfulness:offline")
    assert row.spearman.undefined == "1 paired sample(s); Spearman needs two"


def test_a_statistic_is_a_value_or_a_reason_never_both_nor_nan() -> None:
    with pytest.raises(ValueError, match="either a value or an undefined reason"):
        Statistic(value=0.3, undefined="why")
    with pytest.raises(ValueError, match="either a value or an undefined reason"):
        Statistic()
    with pytest.raises(ValueError, match="finite"):
        Statistic(value=float("nan"))
    assert Statistic.missing("x").text() == "undefined"
    assert Statistic.of(0.4567).text() == "0.46"


def test_failed_skipped_missing_and_unlabelled_cells_are_counted_never_dropped_silently() -> None:
    ev, labels = _case()
    ev.add("s8", "faithfulness", Score.fail("timeout", "judge did not answer"))
    ev.add("s9", "faithfulness", Score.skip("no contexts"))
    ev.add("u1", "faithfulness", Score(value=0.4))  # scored, nobody labelled it
    ev.add("s10", "hallucination", Score(value=0.2))  # labelled, no faithfulness cell
    labels += [
        HumanLabel(sample_id=s, annotator="ann", grounded="yes") for s in ("s8", "s9", "s10")
    ]
    row = _row(judge_agreement(ev, labels), "faithfulness:offline")
    assert (row.n, row.n_failed, row.n_skipped, row.n_missing, row.n_unlabelled) == (
        8,
        1,
        1,
        1,
        1,
    )
    assert row.failures_by_kind == {"timeout": 1}
    assert "3 of 11 labelled samples not compared" in " ".join(row.notes)


def test_ids_that_never_match_name_a_few_from_each_side() -> None:
    ev, _ = _case()
    labels = [HumanLabel(sample_id=f"q{i}", annotator="a", grounded="yes") for i in range(5)]
    with pytest.raises(AgreementError) as info:
        judge_agreement(ev, labels)
    message = str(info.value)
    assert "never match" in message
    assert "'q0', 'q1', 'q2' … (5 in all)" in message
    assert "'s0', 's1', 's2'" in message


def test_nothing_people_were_asked_about_is_refused_with_the_names() -> None:
    ev = Evaluation([("s0", "mrr", Score(value=1.0)), ("s0", "context_recall", Score(value=1.0))])
    labels = [HumanLabel(sample_id="s0", annotator="a", grounded="yes")]
    with pytest.raises(AgreementError, match="mrr, context_recall; the labels check"):
        judge_agreement(ev, labels)
    with pytest.raises(AgreementError, match="no human labels"):
        judge_agreement(ev, [])
    with pytest.raises(AgreementError, match="not in the results: recall@5"):
        judge_agreement(ev, labels, metrics=["recall@5"])


def test_metrics_without_labels_for_their_question_get_a_row_saying_so() -> None:
    ev, labels = _case()
    for i in range(8):
        ev.add(f"s{i}", "answer_relevance", Score(value=0.7))
        ev.add(f"s{i}", "mrr", Score(value=1.0))
    table = judge_agreement(ev, labels)
    row = _row(table, "answer_relevance")
    assert not row.compared
    assert row.n == 0
    assert "no labelled sample answers 'relevance'" in row.notes
    assert table.not_compared == {"mrr": "no form question checks it"}
    assert [r.label for r in table.compared] == ["faithfulness:offline", "hallucination:offline"]


def test_best_threshold_ties_go_to_the_cut_closest_to_the_default() -> None:
    scores = np.asarray([0.1, 0.2, 0.8, 0.9])
    people = np.asarray([False, False, True, True])
    # a perfect split anywhere in [0.2, 0.8): 0.2 is the observed value that makes it
    assert best_threshold(scores, people, inverted=False) == pytest.approx(0.2)
    assert best_threshold(1.0 - scores, people, inverted=True) == pytest.approx(0.8)
    # cutting at 0.1 and at 0.55 both give kappa 0.5 here
    scores = np.asarray([0.1, 0.45, 0.55, 0.9])
    people = np.asarray([False, True, False, True])
    assert best_threshold(scores, people, inverted=False) == pytest.approx(0.55)
    assert best_threshold(scores, people, inverted=False, default=0.2) == pytest.approx(0.1)


def test_the_vectorised_search_kappa_equals_stats_cohen_kappa() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        judge = rng.integers(0, 2, 30).astype(bool)
        people = rng.integers(0, 2, 30).astype(bool)
        if judge.all() or not judge.any() or people.all() or not people.any():
            continue
        tp = float(np.sum(judge & people))
        fp = float(np.sum(judge & ~people))
        fn = float(np.sum(~judge & people))
        tn = float(np.sum(~judge & ~people))
        fast = _kappa_2x2(*(np.asarray([v]) for v in (tp, fp, fn, tn)))[0]
        assert fast == pytest.approx(cohen_kappa(judge.tolist(), people.tolist()))


def test_graded_questions_use_four_or_more_as_yes() -> None:
    ev = Evaluation()
    labels = []
    for i, (value, accuracy) in enumerate([(0.9, 5), (0.7, 4), (0.6, 3), (0.1, 1)]):
        ev.add(f"s{i}", "answer_correctness", Score(value=value, provider="llm"))
        labels.append(HumanLabel(sample_id=f"s{i}", annotator="a", accuracy=accuracy))
    row = _row(judge_agreement(ev, labels), "answer_correctness:llm")
    assert row.positive == "accuracy >= 4"
    assert row.spearman.value == pytest.approx(1.0)
    assert row.default is not None
    assert row.default.confusion.fp == 1  # 0.6 said yes, people said 3
    assert row.best is not None
    assert row.best.threshold == pytest.approx(0.6)
    assert row.best.kappa.value == pytest.approx(1.0)


def test_the_table_round_trips_through_json() -> None:
    ev, labels = _case()
    table = judge_agreement(ev, labels, n_resamples=200, source={"labels": "x.jsonl"})
    again = AgreementTable.model_validate_json(table.to_json())
    assert again == table
    assert again.source == {"labels": "x.jsonl"}


def test_the_bootstrap_is_seeded() -> None:
    ev, labels = _case()
    a = _row(judge_agreement(ev, labels, seed=3), "faithfulness:offline")
    b = _row(judge_agreement(ev, labels, seed=3), "faithfulness:offline")
    assert a.auroc == b.auroc


def test_bad_settings_are_refused() -> None:
    ev, labels = _case()
    with pytest.raises(ValueError, match="threshold"):
        judge_agreement(ev, labels, threshold=1.5)
    with pytest.raises(ValueError, match="confidence"):
        judge_agreement(ev, labels, confidence=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        judge_agreement(ev, labels, n_resamples=0)


def test_people_agreement_says_the_scale_people_answered_on() -> None:
    """The between-people line names the question's own scale, not one phrase for every
    question: 1-5 for the graded ones, yes/partly/no for grounded, yes/no for an aspect."""
    from ragbridge.core.labels.agreement import scale_text
    from ragbridge.core.labels.human import QUESTIONS, criterion_question

    assert scale_text(QUESTIONS["relevance"].scale) == "1-5"
    assert scale_text(QUESTIONS["grounded"].scale) == "yes/partly/no"
    assert scale_text(criterion_question("cites_policy", None).scale) == "yes/no"
    assert scale_text(criterion_question("depth", (0, 10)).scale) == "0-10"
