"""RAGAS and DeepEval as providers of ragbridge's measures (``faithfulness:ragas``, ...).

Each resolves by name through the ``ragbridge.providers`` entry points, scores through the
measure (its checks and edge policy first), and gives the value the comparison gives for the
same cell: one implementation of running a framework, used by both.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ragas")
pytest.importorskip("deepeval")

from ragbridge.adapters.compare import compare_frameworks_on, definitions, providers
from ragbridge.core import evaluate
from ragbridge.core.metrics import Faithfulness, resolve
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Sample
from ragbridge.core.testing import CountingJudge, HashEmbedder
from tests.test_compare import EmptyListsJudge

SAMPLE = Sample(
    id="s",
    question="How tall is Mount Everest?",
    answer="Mount Everest is 8,849 metres tall. It lies in Nepal.",
    reference="Mount Everest is 8,849 metres high.",
    contexts=[
        {"id": "a", "text": "Mount Everest's elevation is 8,849 metres."},
        {"id": "b", "text": "Everest lies on the border of Nepal and China."},
    ],
)
JUDGED = ("faithfulness", "answer_relevance", "context_precision", "context_recall")


@pytest.mark.parametrize("framework", ["ragas", "deepeval"])
@pytest.mark.parametrize("measure", JUDGED)
def test_a_framework_provider_gives_the_comparisons_value(framework: str, measure: str) -> None:
    metric = resolve(f"{measure}:{framework}")
    assert (metric.name, metric.provider) == (measure, framework)
    alone = evaluate([SAMPLE], [metric], judge=CountingJudge(), embedder=HashEmbedder())
    compared = compare_frameworks_on(
        [SAMPLE],
        frameworks=(framework,),
        measures=[measure],
        judge=CountingJudge(),
        embedder=HashEmbedder(),
    )
    mine = alone.get("s", measure)
    theirs = compared.evaluations[framework].get("s", measure)
    assert mine is not None
    assert theirs is not None
    assert mine.failure is None
    assert (mine.value, mine.provider, mine.usage.calls) == (
        theirs.value, theirs.provider, theirs.usage.calls,
    )  # fmt: skip


def test_ragas_nan_through_the_registry_is_a_typed_failure() -> None:
    judge = EmptyListsJudge(
        marker="Thanks for asking", empty=(("StatementGeneratorOutput", "statements"),)
    )
    claimless = SAMPLE.model_copy(update={"answer": "Thanks for asking, happy to help!"})
    score = evaluate([claimless], ["faithfulness:ragas"], judge=judge).get("s", "faithfulness")
    assert score is not None
    assert score.value is None
    assert score.failure is not None
    assert score.failure.kind is FailureKind.NO_CLAIMS


def test_the_measures_edge_policy_runs_before_the_framework() -> None:
    """Through the registry an abstention is skipped for every provider of faithfulness;
    the comparison, which calls RAGAS directly, shows what RAGAS itself does."""
    judge = CountingJudge()
    abstains = SAMPLE.model_copy(update={"answer": "I don't know."})
    score = evaluate([abstains], [Faithfulness("ragas")], judge=judge).get("s", "faithfulness")
    assert score is not None
    assert score.value is None
    assert "abstains" in (score.reason or "")
    assert judge.calls == 0


def test_string_measures_have_a_ragas_provider_too() -> None:
    score = evaluate([SAMPLE], ["exact_match:ragas"]).get("s", "exact_match")
    assert score is not None
    assert (score.value, score.provider) == (0.0, "ragas")  # raw strings differ
    assert evaluate([SAMPLE], ["exact_match"]).get("s", "exact_match").value == 0.0  # type: ignore[union-attr]


def test_the_comparisons_tables_come_from_the_registry() -> None:
    table = providers()
    for measure in JUDGED:
        for label, name in (("ragas", "ragas"), ("deepeval", "deepeval")):
            how = REGISTRY.provider(measure, name).how
            assert table[measure][label].endswith(how)
    assert "ragas:non-llm" in table["context_recall"]
    notes = definitions()
    assert notes["faithfulness"].startswith("faithfulness: ")
    assert "NaN" in notes["faithfulness"]
    assert "1.0" in notes["faithfulness"]
    assert notes["bleu"].startswith("bleu: ")
