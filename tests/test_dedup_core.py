"""What the issue 29 dedup pass made one piece of code: each shared piece still says what its
copies said (metadata keys and their order, messages, accepted keywords)."""

from __future__ import annotations

import argparse

import pytest

from ragbridge.adapters.cli.argtypes import add_cost_options, non_negative_int, positive_int
from ragbridge.core import Context, Sample
from ragbridge.core.labels.human import HumanLabel, first_label_at
from ragbridge.core.scoring.runner import evaluate
from ragbridge.core.settings import SettingsOptions
from ragbridge.core.testing import CountingJudge, HashEmbedder
from ragbridge.core.testset import SourceDocument, TestsetSpec, estimate_testset, plan
from ragbridge.core.testset.generate import GenerateOptions

SAMPLE = Sample(
    id="s1",
    question="Where is the Eiffel Tower?",
    answer="The Eiffel Tower is in Paris.",
    contexts=[Context(id="d1", text="The Eiffel Tower stands in Paris.")],
)


def test_run_metadata_keeps_its_counts_in_their_order() -> None:
    """The judge's and the embedder's counts are written by one helper; the JSON keys and
    their order are what the two hand-written dicts gave."""
    evaluation = evaluate(
        [SAMPLE],
        ["faithfulness", "answer_relevance"],
        judge=CountingJudge(),
        embedder=HashEmbedder(),
    )
    judge = evaluation.metadata["judge_stats"]
    embedding = evaluation.metadata["embedding_stats"]
    assert list(judge) == ["calls", "cached", "retries", "failures", "refused", "max_in_flight"]
    assert list(embedding) == ["calls", "cached_texts", "retries", "failures", "refused"]
    assert judge["calls"] >= 1


def test_run_keywords_still_reach_the_run() -> None:
    seen: list[tuple[int, int | None]] = []
    cells: list[str] = []
    evaluation = evaluate(
        [SAMPLE],
        ["faithfulness"],
        judge=CountingJudge(),
        progress=lambda done, total: seen.append((done, total)),
        on_result=lambda sample_id, metric, score: cells.append(metric),
        keep=False,
        window=1,
    )
    assert seen == [(1, 1)]
    assert cells == ["faithfulness"]
    assert evaluation.metadata["cells_kept"] is False
    with pytest.raises(TypeError, match="unknown setting"):
        evaluate([SAMPLE], ["faithfulness"], judge=CountingJudge(), windows=2)  # type: ignore[call-arg]


def test_testset_keywords_are_the_spec_fields_and_the_settings() -> None:
    spec_fields = set(TestsetSpec.__dataclass_fields__) - {"size"}
    assert set(plan.TestsetOptions.__annotations__) == spec_fields
    assert set(GenerateOptions.__annotations__) == spec_fields | set(
        SettingsOptions.__annotations__
    )


def test_estimate_testset_takes_the_spec_options_and_refuses_others() -> None:
    words = " ".join(f"word{i}" for i in range(400))
    docs = [SourceDocument(id="a", text=words), SourceDocument(id="b", text=words[::-1])]
    default = estimate_testset(docs, 4)
    same = estimate_testset(docs, 4, styles=None, dedup_threshold=0.9, relevance="document")
    assert same.calls == default.calls
    assert estimate_testset(docs, 4, max_rounds=5).max_calls == default.calls * 5
    with pytest.raises(TypeError, match="unexpected keyword"):
        estimate_testset(docs, 4, judge=CountingJudge())  # type: ignore[call-arg]


def test_first_label_at_remembers_the_first_place() -> None:
    seen: dict[tuple[str, str], int] = {}
    label = HumanLabel(sample_id="s1", annotator="ann", grounded="yes")
    assert first_label_at(seen, label, 3) is None
    assert first_label_at(seen, label, 7) == 3
    other = HumanLabel(sample_id="s1", annotator="bob", grounded="no")
    assert first_label_at(seen, other, 8) is None


def test_counts_read_and_refuse_as_before() -> None:
    assert positive_int("3") == 3
    assert non_negative_int("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 1, got 0"):
        positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError, match="must be 0 or more, got -1"):
        non_negative_int("-1")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a whole number, got 'x'"):
        positive_int("x")


def test_price_options() -> None:
    parser = argparse.ArgumentParser()
    add_cost_options(parser, price=float, tokens=int, tokens_help="per call (default 150)")
    args = parser.parse_args(["--price-in", "2.5"])
    assert (args.price_in, args.price_out, args.completion_tokens) == (2.5, None, 150)
