"""Retrieved context ids that never match the relevance labels: said per sample and per run.

The framework cases use real objects: LangChain's `InMemoryVectorStore` (a fresh UUID per
chunk as ``Document.id``) through `retrieve_only`, and the id shapes LlamaIndex gives.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ragbridge.core import Context, Evaluation, Sample, evaluate, score_samples
from ragbridge.core.results.evaluation import Score
from ragbridge.core.results.id_check import (
    IdCheck,
    IdMatch,
    id_warnings,
    match_ids,
    note_id_warnings,
)


def _uuid(n: int) -> str:
    return str(uuid.UUID(int=n + 10**20))


def _sample(sid: str, ids: list[str], labels: dict[str, int], **meta: object) -> Sample:
    contexts = [Context(text=f"text {i}", id=i, metadata=dict(meta)) for i in ids]
    return Sample(id=sid, question="q", contexts=contexts, relevance=labels)


def test_match_ids_counts_labelled_ids_at_any_grade() -> None:
    contexts = [Context(text="a", id="d1"), Context(text="b", id="d1"), Context(text="c", id="d2")]
    assert match_ids(contexts, {"d2": 0, "d9": 1}) == IdMatch(retrieved=2, matched=1)
    miss = match_ids(contexts, {"d8": 0, "d9": 1})
    assert miss.mismatched
    assert (miss.retrieved_example, miss.label_example) == ("d1", "d9")  # a relevant label first
    assert not match_ids([], {"d9": 1}).mismatched  # nothing retrieved: a miss, not an id problem


@pytest.mark.parametrize(
    ("misses", "hits", "kind"),
    [
        (3, 0, "mistake"),  # none of 3
        (4, 1, "mistake"),  # 80 % of 5
        (3, 1, "misses"),  # 75 % of 4: the samples named, as retrieval misses or id trouble
        (2, 0, "mistake"),  # every one of 2: the run size never silences it
        (1, 0, "mistake"),
        (0, 5, None),
    ],
)
def test_run_level_threshold(misses: int, hits: int, kind: str | None) -> None:
    samples = [_sample(f"m{i}", [f"chunk-{i}"], {f"doc-{i}": 1}) for i in range(misses)]
    samples += [_sample(f"h{i}", [f"doc-{i}"], {f"doc-{i}": 1}) for i in range(hits)]
    evaluation = score_samples(samples, ["recall@5", "mrr"])
    lines = evaluation.metadata.get("warnings", [])
    assert len(lines) == (0 if kind is None else 1)
    total = misses + hits
    if kind == "misses":
        assert lines[0] == (
            f"ranking measures: {misses} of {total} labelled samples retrieved no labelled "
            "context id (m0, m1, m2; e.g. retrieved 'chunk-0' vs labelled 'doc-0') — retrieval "
            "misses, or ids that name other things than the labels"
        )
    if kind == "mistake":
        samples_word = "sample" if total == 1 else "samples"
        assert lines[0].startswith(
            f"ranking measures: {misses} of {total} labelled {samples_word} retrieved no "
            "labelled context id (e.g. retrieved 'chunk-0' vs labelled 'doc-0')"
        )
        assert "id_key=" in lines[0]
        assert "use_ref_doc_id=" in lines[0]


def test_uuid_ids_name_langchain_and_id_key_even_in_a_small_run() -> None:
    samples = [_sample(f"s{i}", [_uuid(i), _uuid(i + 50)], {f"handbook-{i}": 1}) for i in range(2)]
    (line,) = score_samples(samples, ["recall@5"]).metadata["warnings"]
    assert line.startswith("ranking measures: 2 of 2 labelled samples")
    assert f"e.g. retrieved '{_uuid(0)}' vs labelled 'handbook-0'" in line
    assert "LangChain's Document.id (a fresh UUID per chunk)" in line
    assert "id_key='source'" in line


def test_llamaindex_contexts_without_a_matching_key_name_use_ref_doc_id() -> None:
    samples = [
        _sample(f"s{i}", [f"doc-{i}"], {f"other-{i}": 1}, node_id=f"n{i}", ref_doc_id=f"doc-{i}")
        for i in range(3)
    ]
    (line,) = score_samples(samples, ["mrr"]).metadata["warnings"]
    assert "LlamaIndex context ids are document ids (ref_doc_id) by default" in line


def test_evaluate_adds_one_warning_that_survives_jsonl(tmp_path: Path) -> None:
    """The runner checks once, after the loop: one line, whatever the number of measures."""
    samples = [_sample(f"s{i}", [f"chunk-{i}"], {f"doc-{i}": 1}) for i in range(4)]
    evaluation = evaluate(samples, ["recall@5", "mrr", "ndcg@10"])
    (line,) = evaluation.metadata["warnings"]
    assert line.startswith("ranking measures: 4 of 4 labelled samples")
    score = evaluation.get("s0", "mrr")
    assert score is not None
    assert score.value == 0.0
    assert score.details["ids_matched"] == 0  # type: ignore[call-overload,index]
    assert "none of the 1 retrieved context ids (e.g. 'chunk-0')" in (score.reason or "")
    path = tmp_path / "results.jsonl"
    evaluation.to_jsonl(path)
    again = Evaluation.from_jsonl(path)
    assert again.metadata["warnings"] == [line]
    assert id_warnings(again) == [line]  # recomputed from the cells' details alone
    assert note_id_warnings(again).metadata["warnings"] == [line]  # not added twice


def test_no_warning_for_matching_ids_or_judge_only_runs() -> None:
    good = [_sample(f"s{i}", [f"doc-{i}", "x"], {f"doc-{i}": 1}) for i in range(4)]
    assert "warnings" not in evaluate(good, ["recall@5"]).metadata
    assert id_warnings(Evaluation([("s", "faithfulness", Score(value=0.0))])) == []


def test_the_tally_counts_each_sample_once_and_ignores_other_scores() -> None:
    check = IdCheck()
    miss = Score(value=0.0, details={"ids_matched": 0, "ids_retrieved": 2})
    for sid in ("a", "b", "c"):
        check.add_scores(sid, [miss, miss, Score(value=1.0)])
    check.add_score("d", Score(value=1.0, details={"ids_matched": 1, "ids_retrieved": 1}))
    assert (check.labelled, check.mismatched) == (4, 3)
    assert check.warning() is None  # 75 %: no likely id mistake, so no id advice ...
    assert "(a, b, c; e.g." in (check.misses() or "")  # ... but the three are named
    assert check.lines() == [check.misses()]
    check.add_score("e", miss)
    assert check.warning() is not None  # 80 %
    assert check.misses() is None
    assert check.lines() == [check.warning()]


# --------------------------------------------------------------------------- real LangChain


def _store() -> object:
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    texts = {
        "leave": "Staff get 25 days of paid leave a year.",
        "parking": "Parking in the courtyard is free for staff.",
        "laptops": "Laptops are replaced every three years.",
    }
    return InMemoryVectorStore.from_texts(
        list(texts.values()),
        DeterministicFakeEmbedding(size=16),
        metadatas=[{"source": name} for name in texts],
    )


def test_langchain_uuid_ids_fail_with_the_fix_and_id_key_source_fixes_them() -> None:
    """Before: recall@3 = 0.0 on every question, no word. After: invalid_input naming
    id_key='source' per sample plus one run warning; with id_key='source', recall@3 = 1.0."""
    from ragbridge.adapters.langchain import retrieve_only

    retriever = _store().as_retriever(search_kwargs={"k": 3})  # type: ignore[attr-defined]
    questions = [
        Sample(id=name, question=f"what about {name}?", relevance={name: 1})
        for name in ("leave", "parking", "laptops")
    ]
    default = retrieve_only(retriever, questions)
    assert all(uuid.UUID(c.id or "") for s in default for c in s.contexts)  # chunk UUIDs
    evaluation = evaluate(default, ["recall@3", "mrr"])
    for sample in default:
        score = evaluation.get(sample.id, "recall@3")
        assert score is not None
        assert score.failure is not None
        assert score.failure.kind.value == "invalid_input"
        assert "id_key='source'" in score.failure.message
    (line,) = evaluation.metadata["warnings"]
    assert line.startswith("ranking measures: 3 of 3 labelled samples retrieved no labelled")
    assert "metadata['source'] holds the labelled ids; pass id_key='source'" in line

    fixed = evaluate(retrieve_only(retriever, questions, id_key="source"), ["recall@3"])
    assert [s.value for _, _, s in fixed] == [1.0, 1.0, 1.0]
    assert "warnings" not in fixed.metadata


# --------------------------------------------------------------------------- the CLI and report


def test_ragbridge_eval_prints_the_warning_and_the_report_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from ragbridge.adapters.cli.main import main

    data = tmp_path / "data.jsonl"
    rows = [
        {
            "id": f"q{i}",
            "question": "q?",
            "contexts": [{"text": "t", "id": _uuid(i), "metadata": {"source": f"doc-{i}"}}],
            "relevance": {f"doc-{i}": 1},
        }
        for i in range(3)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = tmp_path / "report.html"
    code = main(["eval", str(data), "--metrics", "recall@5,mrr", "--report", str(report)])
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("ragbridge: warning: ")]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "ragbridge: warning: ranking measures: 3 of 3 labelled samples retrieved no labelled"
    )
    assert "id_key='source'" in warnings[0]
    assert code == 1  # every ranking cell failed: the ids name chunks, the labels documents
    page = report.read_text(encoding="utf-8")
    assert 'class="warnings"' in page
    assert "ranking measures: 3 of 3 labelled samples" in page


def test_a_metadata_key_names_the_fix_of_the_framework_the_contexts_came_from() -> None:
    from ragbridge.core.results.id_check import id_fix

    assert "id_key='source'" in id_fix("source")
    assert "LangSmith" in id_fix("source")
    llamaindex = id_fix("file_name", llamaindex=True)
    assert "LangChain" not in llamaindex
    assert "node" in llamaindex
