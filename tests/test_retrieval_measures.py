"""Ranking measures against an independent, deliberately plain reference implementation,
and against pytrec_eval (another provider of the same measures) where it is installed."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ragbridge.core.retrieval import (
    Measure,
    Qrels,
    Run,
    evaluate_run,
    parse_measure,
    parse_measures,
    parse_trec_measures,
    trec_order,
)

CUTS = (1, 2, 3, 5, 10, 30)


def _reference(judged: dict[str, int], ranking: list[str], level: int) -> dict[str, float]:
    """Textbook definitions, one query, no numpy: the oracle for the vectorised kernels."""
    grades = [judged.get(doc, -1) for doc in ranking]
    rel = [g >= level for g in grades]
    n_rel = sum(1 for g in judged.values() if g >= level)
    out: dict[str, float] = {}
    for k in CUTS:
        hits = sum(rel[:k])
        p = hits / k
        r = hits / n_rel if n_rel else 0.0
        out[f"P_{k}"] = p
        out[f"recall_{k}"] = r
        out[f"F1@{k}"] = 2 * p * r / (p + r) if p + r else 0.0
        out[f"success_{k}"] = 1.0 if hits else 0.0
        ap_k = sum(sum(rel[: i + 1]) / (i + 1) for i in range(min(k, len(rel))) if rel[i])
        out[f"map_cut_{k}"] = ap_k / n_rel if n_rel else 0.0
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        dcg = sum(max(g, 0) / math.log2(i + 2) for i, g in enumerate(grades[:k]))
        out[f"ndcg_cut_{k}"] = dcg / idcg if idcg else 0.0
        ideal_exp = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
        dcg_exp = sum((2 ** max(g, 0) - 1) / math.log2(i + 2) for i, g in enumerate(grades[:k]))
        out[f"ndcg_exp@{k}"] = dcg_exp / ideal_exp if ideal_exp else 0.0
    first = next((i for i, r in enumerate(rel) if r), None)
    out["recip_rank"] = 0.0 if first is None else 1 / (first + 1)
    ap = sum(sum(rel[: i + 1]) / (i + 1) for i in range(len(rel)) if rel[i])
    out["map"] = ap / n_rel if n_rel else 0.0
    top = min(n_rel, len(rel))
    out["Rprec"] = sum(rel[:top]) / n_rel if top else 0.0
    ideal_all = sorted((g for g in judged.values() if g > 0), reverse=True)
    idcg_all = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_all))
    dcg_all = sum(max(g, 0) / math.log2(i + 2) for i, g in enumerate(grades))
    out["ndcg"] = dcg_all / idcg_all if idcg_all else 0.0
    out["num_rel"] = float(n_rel)
    out["num_ret"] = float(len(ranking))
    out["num_rel_ret"] = float(sum(rel))
    return out


def _random_collection(seed: int, queries: int = 40) -> tuple[dict, dict]:
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    scores: dict[str, dict[str, float]] = {}
    for q in range(queries):
        pool = [f"d{rng.randrange(60):02d}" for _ in range(40)]
        judged = {d: rng.choice([-1, 0, 0, 0, 1, 1, 2, 3]) for d in pool[: rng.randrange(0, 25)]}
        if judged or rng.random() < 0.5:
            qrels[f"q{q}"] = judged or {"zz": 0}
        retrieved = list(dict.fromkeys(pool))[: rng.randrange(0, 35)]
        # coarse scores so that ties (broken by doc id, descending) are frequent
        scores[f"q{q}"] = {d: float(rng.randrange(6)) for d in retrieved}
    return qrels, scores


SPECS = [
    *[f"P_{k}" for k in CUTS], *[f"recall_{k}" for k in CUTS], *[f"success_{k}" for k in CUTS],
    *[f"map_cut_{k}" for k in CUTS], *[f"ndcg_cut_{k}" for k in CUTS],
    *[f"F1@{k}" for k in CUTS], *[f"ndcg_exp@{k}" for k in CUTS],
    "recip_rank", "map", "Rprec", "ndcg", "num_rel", "num_ret", "num_rel_ret",
]  # fmt: skip


@pytest.mark.parametrize("level", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vectorised_measures_equal_the_reference(seed: int, level: int) -> None:
    qrels, scores = _random_collection(seed)
    measures = parse_measures([s.replace("F1@", "f1@") for s in SPECS])
    # a tiny block size exercises the block concatenation and per-block grade widths
    result = evaluate_run(qrels, scores, measures, relevance_level=level, block_size=7)
    assert result.qids == tuple(sorted(q for q in scores if q in qrels))
    for row, qid in enumerate(result.qids):
        expected = _reference(qrels[qid], trec_order(scores[qid]), level)
        for spec, measure in zip(SPECS, measures, strict=True):
            got = float(result.values[measure][row])
            assert got == pytest.approx(expected[spec], abs=1e-12), (qid, spec)


def test_complete_mode_scores_missing_queries_as_empty_rankings() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 0}}
    run = {"a": {"d1": 1.0}, "x": {"d9": 1.0}}
    normal = evaluate_run(qrels, run, ["map", "num_q"])
    complete = evaluate_run(qrels, run, ["map", "num_q"], complete=True)
    assert normal.qids == ("a",)
    assert complete.qids == ("a", "b", "c")
    assert complete.per_query("map") == {"a": 1.0, "b": 0.0, "c": 0.0}
    aggregate = {m.trec_name: v for m, v in complete.aggregate().items()}
    assert aggregate == {"map": pytest.approx(1 / 3), "num_q": 3.0}


def test_ties_break_by_doc_id_descending_and_rank_column_is_irrelevant() -> None:
    assert trec_order({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5}) == ["b", "c", "a", "d"]
    assert trec_order({"x": 0.1, "y": 0.3, "z": 0.2}) == ["y", "z", "x"]
    assert trec_order({}) == []
    with pytest.raises(ValueError, match="NaN"):
        trec_order({"a": float("nan")})


def test_duplicate_document_in_a_ranking_is_an_error() -> None:
    with pytest.raises(ValueError, match="'d1' is ranked more than once"):
        evaluate_run({"q": {"d1": 1}}, Run({"q": ["d1", "d2", "d1"]}), ["map"])


def test_ndcg_gain_overrides_follow_trec_eval() -> None:
    # trec_eval ndcg.1=3,2=9: level 1 gains 3, level 2 gains 9, level 3 keeps gain 3
    qrels = {"q": {"a": 1, "b": 2, "c": 3, "d": 0}}
    run = Run({"q": ["a", "d", "c", "b"]})
    [measure] = parse_trec_measures(["ndcg.1=3,2=9"])
    assert measure.trec_name == "ndcg_1=3,2=9"
    got = evaluate_run(qrels, run, [measure]).per_query(measure)["q"]
    dcg = 3 / math.log2(2) + 3 / math.log2(4) + 9 / math.log2(5)
    idcg = 9 / math.log2(2) + 3 / math.log2(3) + 3 / math.log2(4)
    assert got == pytest.approx(dcg / idcg, abs=1e-12)


def test_measure_names_round_trip_between_spellings() -> None:
    pairs = {
        "hit_rate@5": "success_5",
        "mrr": "recip_rank",
        "ndcg@10": "ndcg_cut_10",
        "precision@3": "P_3",
        "recall@100": "recall_100",
        "average_precision": "map",
        "r_precision": "Rprec",
        "map@10": "map_cut_10",
    }
    for ours, theirs in pairs.items():
        assert parse_measure(ours) == parse_measure(theirs)
        assert parse_measure(ours).name == ours
        assert parse_measure(theirs).trec_name == theirs
    assert parse_measure("ndcg_exp@10").gain == "exponential"
    assert [m.trec_name for m in parse_trec_measures(["P.10,5,23.4"])] == ["P_5", "P_10", "P_23"]
    assert len(parse_trec_measures(["P"])) == 9
    with pytest.raises(ValueError, match="has no trec_eval equivalent"):
        _ = parse_measure("f1@5").trec_name
    with pytest.raises(ValueError, match="unknown measure 'bpref'"):
        parse_measure("bpref")
    with pytest.raises(ValueError, match="duplicate cutoffs"):
        parse_trec_measures(["P.5,5"])
    with pytest.raises(ValueError, match="cutoff must be a positive"):
        parse_measure("recall@0")
    with pytest.raises(ValueError, match="needs a cutoff"):
        Measure("P")


def test_empty_inputs_give_empty_results_not_errors() -> None:
    result = evaluate_run({}, {}, ["map", "P_5"])
    assert result.qids == ()
    assert result.aggregate() == {parse_measure("map"): 0.0, parse_measure("P_5"): 0.0}
    one = evaluate_run({"q": {"d": 1}}, Run({"q": []}), ["map", "ndcg_cut_5", "recip_rank"])
    assert all(v == 0.0 for v in one.aggregate().values())


def test_qrels_accepts_mappings_and_reports_membership() -> None:
    qrels = Qrels({"q": {"d": 1}})
    assert "q" in qrels
    assert len(qrels) == 1
    assert qrels.get("nope") is None


@pytest.mark.parametrize("seed", [7, 8])
def test_agrees_with_pytrec_eval(seed: int) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier not installed")
    qrels, scores = _random_collection(seed, queries=60)
    qrels = {q: j for q, j in qrels.items() if any(g > 0 for g in j.values())}
    # pytrec_eval breaks score ties differently from trec_eval's text path: use distinct scores
    rng = np.random.default_rng(seed)
    run = {q: {d: float(rng.random()) for d in docs} for q, docs in scores.items()}
    theirs = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "ndcg_cut.5,10", "P.5,10", "recip_rank", "recall.10", "Rprec", "ndcg"}
    ).evaluate(run)
    names = ["map", "ndcg_cut_5", "ndcg_cut_10", "P_5", "P_10", "recip_rank", "recall_10"]
    names += ["Rprec", "ndcg"]
    ours = evaluate_run(qrels, run, names)
    assert set(ours.qids) == set(theirs)
    for name in names:
        for qid, value in ours.per_query(name).items():
            assert value == pytest.approx(theirs[qid][name], abs=1e-9), (qid, name)
