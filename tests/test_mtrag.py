"""MTRAG read into conversations, and its per-turn retrieval scored trec_eval-exactly.

The data is tests/data/mtrag: one ClapNQ conversation of MTRAG (8 turns, the first UNANSWERABLE),
whole lines of MTRAG's own files, under MTRAG's Apache-2.0 licence (LICENSE and NOTICE beside
it). The reader must put each task's labels on the assistant turn that answers that task's
question, label the unanswerable turn as a no-answer turn, and hand the retrieval measures the
same rankings MTRAG's evaluator (pytrec_eval) scores. A last test reads the whole benchmark when
MTRAG_DIR names a checkout of it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragbridge.adapters import mtrag
from ragbridge.core.retrieval import evaluate_run, score_samples

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "mtrag"
TASKS = DATA / "clapnq_tasks.jsonl"
QRELS = DATA / "clapnq_qrels.tsv"
CONVERSATION = "dd6b6ffd177f2b311abe676261279d2f"
MEASURES = [f"recall_{k}" for k in (1, 3, 5, 10)] + [f"ndcg_cut_{k}" for k in (1, 3, 5, 10)]

if not TASKS.is_file():
    pytest.skip(
        f"{DATA} is absent: MTRAG's test slice ships with the repository (tests/data/mtrag)",
        allow_module_level=True,
    )


def _raw() -> list[dict[str, Any]]:
    """The task lines as MTRAG wrote them (json reads their NaN cells)."""
    return [json.loads(line) for line in TASKS.read_text(encoding="utf-8").splitlines()]


def _answer_position(turn: int) -> int:
    """Where the assistant turn answering user turn ``turn`` (from 1) sits: user, assistant, ..."""
    return 2 * turn - 1


# --------------------------------------------------------------------------- the reader


def test_each_task_labels_the_assistant_turn_that_answers_its_question() -> None:
    raw = _raw()
    (conversation,) = mtrag.load_conversations(TASKS)
    assert conversation.id == CONVERSATION
    assert [t.role for t in conversation.turns] == ["user", "assistant"] * 8
    assert conversation.metadata["mtrag"]["domain"] == "clapnq"
    for task in raw:
        k = task["turn"]
        turn = conversation.turns[_answer_position(k)]
        assert turn.id == f"{CONVERSATION}<::>{k}"
        assert turn.reference == task["targets"][0]["text"]
        assert turn.content == task["targets"][0]["text"]  # MTRAG's conversation is its reference
        assert {c.id for c in turn.contexts} == {c["document_id"] for c in task["contexts"]}
        assert turn.metadata["mtrag"]["answerability"] == task["answerability"]
        sample = conversation.turn_sample(_answer_position(k))
        assert sample.question == task["input"][-1]["text"]
        assert [h.content for h in sample.history or []] == [m["text"] for m in task["input"][:-1]]
    # a label one turn off would show here: neighbouring turns hold different references
    references = [t.reference for _, t in conversation.assistant_turns()]
    assert len(set(references)) == len(references)


def test_nan_cells_are_dropped_not_kept_as_labels() -> None:
    """MTRAG's sample file writes an empty cell as NaN ("Multi-Turn": NaN on a first turn)."""
    assert math.isnan(_raw()[0]["Multi-Turn"])
    (conversation,) = mtrag.load_conversations(TASKS)
    first = conversation.turns[1].metadata["mtrag"]
    assert "Multi-Turn" not in first
    assert conversation.turns[3].metadata["mtrag"]["Multi-Turn"] == ["Clarification"]


def test_the_unanswerable_turn_is_a_no_answer_turn() -> None:
    (conversation,) = mtrag.load_conversations(TASKS, qrels=mtrag.read_qrels(QRELS))
    first = conversation.turn_sample(1)
    assert first.metadata["mtrag"]["answerability"] == ["UNANSWERABLE"]
    assert first.relevance == {}
    assert first.is_no_answer
    assert not conversation.turn_sample(3).is_no_answer
    scores = score_samples([first], ["recall@5", "no_answer"])
    recall, no_answer = scores.get(first.id, "recall@5"), scores.get(first.id, "no_answer")
    assert recall is not None
    assert recall.status == "skipped"
    assert recall.reason is not None
    assert "no relevant document" in recall.reason
    assert no_answer is not None
    assert no_answer.value == 1.0


def test_relevance_comes_from_the_qrels_when_given_else_from_the_annotators(
    tmp_path: Path,
) -> None:
    qrels = mtrag.read_qrels(QRELS)
    (labelled,) = mtrag.load_conversations(TASKS, qrels=qrels)
    (from_feedback,) = mtrag.load_conversations(TASKS)
    for k in range(2, 9):
        task = f"{CONVERSATION}<::>{k}"
        assert labelled.turns[_answer_position(k)].relevance == dict(qrels[task])
        assert from_feedback.turns[_answer_position(k)].relevance == dict(qrels[task])
    # a reviewer's later "no" overrides the author's "yes": the latest judgement counts
    lines = TASKS.read_text(encoding="utf-8").splitlines()
    task = json.loads(lines[1])
    judged = task["contexts"][0]["feedback"]["relevant"]
    stamp = next(iter(judged.values()))["timestamp"]
    judged["reviewer"] = {"value": "no", "timestamp": stamp + 60}
    edited = tmp_path / "tasks.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(task)]) + "\n", encoding="utf-8")
    (conversation,) = mtrag.load_conversations(edited)
    turn = conversation.turns[3]
    assert turn.relevance is not None
    assert turn.relevance[task["contexts"][0]["document_id"]] == 0
    assert sorted(turn.relevance.values()) == [0, 1, 1]
    assert turn.reference_contexts is not None
    assert task["contexts"][0]["text"] not in turn.reference_contexts
    assert len(turn.reference_contexts) == 2


def test_task_samples_are_asked_after_the_reference_history_and_answered_by_the_prediction() -> (
    None
):
    raw = _raw()
    samples = mtrag.load_task_samples(TASKS)
    assert [s.id for s in samples] == [f"{CONVERSATION}<::>{k}" for k in range(1, 9)]
    assert samples[0].history == []
    for sample, task, before in zip(samples[1:], raw[1:], raw[:-1], strict=True):
        assert sample.answer == task["predictions"][0]["text"]
        assert sample.reference == task["targets"][0]["text"]
        assert sample.history is not None
        # the turn before is MTRAG's reference answer, not the system's prediction for it
        assert sample.history[-1].content == before["targets"][0]["text"]
        assert sample.history[-1].content != before["predictions"][0]["text"]


def test_task_ids_read_in_both_of_mtrags_spellings() -> None:
    assert mtrag.split_task_id(f"{CONVERSATION}::3") == (CONVERSATION, 3)
    assert mtrag.split_task_id(f"{CONVERSATION}<::>12") == (CONVERSATION, 12)
    assert mtrag.canonical_task_id(f"{CONVERSATION}::3") == f"{CONVERSATION}<::>3"
    assert mtrag.canonical_task_id("q17") == "q17"
    for bad in ("q17", f"{CONVERSATION}<::>0", f"{CONVERSATION}<::>x", "<::>3"):
        with pytest.raises(ValueError, match="not an MTRAG task id"):
            mtrag.split_task_id(bad)
    assert set(mtrag.read_predictions(TASKS).scores) <= {
        *mtrag.read_qrels(QRELS),
        f"{CONVERSATION}<::>1",
    }
    assert mtrag.domain_of("mt-rag-ibmcloud-elser-512-100-20240502") == "cloud"
    assert mtrag.domain_of("ibmcloud") == "cloud"
    assert mtrag.domain_of("mt-rag-fiqa-beir-elser-512-100-20240501") == "fiqa"
    assert mtrag.domain_of("banking") is None


def test_queries_are_read_by_task_id() -> None:
    rewrite = mtrag.read_queries(DATA / "clapnq_rewrite.jsonl")
    last = mtrag.read_queries(DATA / "clapnq_lastturn.jsonl")
    assert set(rewrite) == set(last) == set(mtrag.read_qrels(QRELS))
    assert last[f"{CONVERSATION}<::>4"] == "|user|: How many teams are in the NFL?"


def test_a_task_that_contradicts_its_conversation_is_refused_naming_its_line(
    tmp_path: Path,
) -> None:
    lines = TASKS.read_text(encoding="utf-8").splitlines()
    task = json.loads(lines[2])
    task["input"][-1]["text"] = "a question nobody asked"
    wrong = tmp_path / "tasks.jsonl"
    wrong.write_text("\n".join([lines[0], lines[1], json.dumps(task), lines[3]]) + "\n")
    with pytest.raises(ValueError, match=r"tasks\.jsonl:3: the question of task .*<::>3"):
        mtrag.load_conversations(wrong)
    task = json.loads(lines[2])
    task["turn"] = 5
    wrong.write_text(json.dumps(task) + "\n")
    with pytest.raises(ValueError, match=r"tasks\.jsonl:1: turn: says 5, but input holds 3"):
        mtrag.load_conversations(wrong)


# --------------------------------------------------------------------------- trec_eval-exact


def test_per_turn_retrieval_agrees_with_mtrags_evaluator() -> None:
    """The passages of each task, ranked by their ELSER score, as a run: ragbridge's values per
    turn equal pytrec_eval's (what MTRAG's run_retrieval_eval.py calls) for every measure."""
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier not installed")
    qrels = mtrag.read_qrels(QRELS)
    run = mtrag.read_predictions(TASKS)
    ours = evaluate_run(qrels, run.run(), MEASURES)
    judged = {q: dict(qrels[q]) for q in qrels}
    theirs = pytrec_eval.RelevanceEvaluator(
        judged, {"recall.1,3,5,10", "ndcg_cut.1,3,5,10"}
    ).evaluate(run.scores)
    assert set(ours.qids) == set(theirs) == set(judged)  # the unanswerable turn 1 is no query
    for measure in MEASURES:
        for qid, value in ours.per_query(measure).items():
            assert value == pytest.approx(theirs[qid][measure], abs=1e-12), (qid, measure)
    # not a run that scores 1 everywhere: turn 3's fourth relevant passage is ranked 4th
    assert ours.per_query("recall_3")[f"{CONVERSATION}<::>3"] == 0.75


def test_a_conversations_turns_score_as_the_run_does() -> None:
    """Per-turn samples of the conversation (ranked by score by the reader) give the values
    `evaluate_run` gives the run; the unanswerable turn is skipped, not scored 0."""
    qrels = mtrag.read_qrels(QRELS)
    (conversation,) = mtrag.load_conversations(TASKS, qrels=qrels)
    samples = [conversation.turn_sample(i) for i, _ in conversation.assistant_turns()]
    names = ["recall@1", "recall@3", "recall@5", "recall@10", "ndcg@1", "ndcg@3", "ndcg@5"]
    names.append("ndcg@10")
    per_turn = score_samples(samples, names)
    run = evaluate_run(qrels, mtrag.read_predictions(TASKS).run(), MEASURES)
    for sample in samples:
        task = sample.metadata["conversation"]["turn_id"]
        for name, measure in zip(names, MEASURES, strict=True):
            score = per_turn.get(sample.id, name)
            assert score is not None
            if task == f"{CONVERSATION}<::>1":
                assert score.status == "skipped"
            else:
                assert score.value == run.per_query(measure)[task], (task, name)
    # the file lists turn 5's passages out of score order; the ranking is by score
    fifth = conversation.turns[_answer_position(5)]
    assert [c.score for c in fifth.contexts] == sorted(
        (c.score for c in fifth.contexts if c.score is not None), reverse=True
    )


# --------------------------------------------------------------------------- the benchmark


def _benchmark() -> ModuleType:
    path = ROOT / "benchmarks" / "mtrag_retrieval.py"
    spec = importlib.util.spec_from_file_location("mtrag_retrieval", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_checks_score_what_they_claim() -> None:
    bench = _benchmark()
    qrels = mtrag.read_qrels(QRELS)
    ceiling = evaluate_run(qrels, bench.ceiling_run(qrels), MEASURES)
    assert set(ceiling.per_query("ndcg_cut_10").values()) == {1.0}
    assert ceiling.per_query("recall_1")[f"{CONVERSATION}<::>3"] == 0.25  # 4 relevant passages
    carry = bench.carry_over_run(qrels)
    assert carry[f"{CONVERSATION}<::>2"] == {}  # the first turn with qrels has no earlier one
    fifth = carry[f"{CONVERSATION}<::>5"]
    shared = "832860310_2886-3341-0-455"  # relevant to turns 4 and 5
    assert fifth[shared] == 4.0
    assert set(fifth) == {d for k in (2, 3, 4) for d in qrels[f"{CONVERSATION}<::>{k}"]}


def test_the_benchmark_says_how_to_get_the_data_when_it_has_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MTRAG_DIR", raising=False)
    assert _benchmark().main([]) == 2
    assert "git clone https://github.com/IBM/mt-rag-benchmark" in capsys.readouterr().err


# --------------------------------------------------------------------------- the whole benchmark


def test_the_whole_benchmark_when_a_checkout_is_given() -> None:
    """MTRAG_DIR: a checkout of MTRAG (its retrieval tasks are plain files in git)."""
    where = os.environ.get("MTRAG_DIR")
    if not where:
        pytest.skip("set MTRAG_DIR to a checkout of github.com/IBM/mt-rag-benchmark")
    qrels = _benchmark().find_qrels(Path(where))
    if not qrels:
        pytest.skip(f"{where}: no mtrag-human/retrieval_tasks/<domain>/qrels/dev.tsv there")
    counts = {domain: len(mtrag.read_qrels(path)) for domain, path in qrels.items()}
    assert counts == {"clapnq": 208, "cloud": 188, "fiqa": 180, "govt": 201}  # MTRAG: 777 tasks
