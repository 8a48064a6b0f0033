"""`ragbridge export`: each file loads with the framework's own reader and back into ragbridge."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.sample import Context, Sample, save_samples

SAMPLES = [
    Sample(
        id="leave-1",
        question="How many days of leave?",
        answer="25 days.",
        contexts=[Context(text="Staff get 25 days | paid.", id="leave", score=0.9)],
        reference="25 days of paid leave.",
        reference_contexts=["Staff get 25 days | paid."],
        relevance={"leave": 2},
        metadata={"kind": "single-hop"},
    ),
    Sample(
        id="none-1",
        question="Is there a gym?",
        reference="The handbook does not say.",
        relevance={},
    ),
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(SAMPLES, path)
    return path


def test_export_ragas_loads_in_ragas_and_back(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ragas = pytest.importorskip("ragas")
    from ragbridge.adapters.ragas import from_ragas_jsonl

    monkeypatch.setenv("HOME", str(tmp_path))
    out = tmp_path / "ragas.jsonl"
    assert main(["export", str(data), "--to", "ragas", str(out)]) == 0
    assert "wrote 2 samples" in capsys.readouterr().out
    dataset = ragas.EvaluationDataset.from_jsonl(str(out))
    assert dataset.samples[0].user_input == "How many days of leave?"
    assert dataset.samples[0].retrieved_context_ids == ["leave"]
    assert from_ragas_jsonl(out) == SAMPLES


def test_export_deepeval_loads_in_deepeval_and_back(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("deepeval")
    from deepeval.dataset import EvaluationDataset

    from ragbridge.adapters.deepeval import load_test_cases

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "deepeval.json"
    assert main(["export", str(data), "--to", "deepeval", str(out)]) == 0
    dataset = EvaluationDataset()
    dataset.add_goldens_from_json_file(str(out))
    assert [g.input for g in dataset.goldens] == [s.question for s in SAMPLES]
    assert dataset.goldens[0].retrieval_context == ["Staff get 25 days | paid."]
    assert load_test_cases(out) == SAMPLES


def test_export_langsmith_examples_feed_langsmith_evaluate_with_default_keys(
    data: Path, tmp_path: Path
) -> None:
    pytest.importorskip("langsmith")
    from langsmith import evaluate
    from langsmith.schemas import Example

    from ragbridge.adapters.langsmith import evaluators, example_id, offline_client

    out = tmp_path / "examples.jsonl"
    assert main(["export", str(data), "--to", "langsmith-examples", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["id"] == str(example_id("leave-1"))
    assert records[0]["outputs"]["relevance"] == {"leave": 2}
    assert records[1]["outputs"]["relevance"] == {}
    examples = [
        Example(id=uuid.UUID(r["id"]), inputs=r["inputs"], outputs=r["outputs"],
                metadata=r["metadata"])
        for r in records
    ]  # fmt: skip

    def target(inputs: dict[str, str]) -> dict[str, object]:
        return {"answer": "25 days.", "contexts": [{"page_content": "x", "id": "leave"}]}

    results = evaluate(
        target,
        data=examples,
        evaluators=evaluators(["recall@1"]),
        upload_results=False,
        client=offline_client(),
    )
    by_question = {
        row["example"].inputs["question"]: row["evaluation_results"]["results"][0]
        for row in results
    }
    assert by_question["How many days of leave?"].score == 1.0
    gym = by_question["Is there a gym?"]
    assert gym.score is None  # no relevant document exists: a skip, not a zero
    assert "skipped" in (gym.comment or "")


def test_export_refuses_an_unknown_format(data: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["export", str(data), "--to", "csv", "out.csv"])
    assert exc.value.code == 2
