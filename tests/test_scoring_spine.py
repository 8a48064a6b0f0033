"""The scoring spine, named and homed: one function scores a record (`score_record`), the
retrieval per-sample scorer has a name of its own (`score_ranking`), and the former name
``score_sample`` still imports from where it did, with a warning that names the new one."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ragbridge.core
import ragbridge.core.retrieval
from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.cache import scores as kept_scores
from ragbridge.core.metrics import AnswerRelevance, Faithfulness
from ragbridge.core.retrieval import score_ranking
from ragbridge.core.scoring import record, runner, scorer
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge, HashEmbedder

PACKAGE = Path(__file__).resolve().parents[1]


def labelled() -> Sample:
    return Sample(
        id="s1",
        question="Where is the Eiffel tower?",
        answer="In Paris.",
        contexts=[Context(text="Lyon is in France.", id="d2"), Context(text="Paris.", id="d1")],
        relevance={"d1": 1},
    )


MEASURES = ["mrr", "recall@1", "ndcg@2"]


def outcomes(scores: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {k: (v.value, v.reason, v.details, v.failure) for k, v in scores.items()}


@pytest.mark.parametrize("where", ["ragbridge.core.retrieval", "ragbridge.core"])
def test_the_former_name_warns_naming_the_new_one_and_scores_the_same(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = ragbridge.core.retrieval if where == "ragbridge.core.retrieval" else ragbridge.core
    # ragbridge.core keeps a resolved name; start from an unresolved one.
    monkeypatch.delitem(vars(module), "score_sample", raising=False)
    with pytest.warns(DeprecationWarning, match="score_sample is deprecated: use score_ranking"):
        old = module.score_sample
    assert old is score_ranking
    with pytest.warns(DeprecationWarning, match="score_sample is deprecated"):  # every use warns
        assert module.score_sample is score_ranking
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name itself never warns
        new = score_ranking(labelled(), MEASURES)
        from ragbridge.core import score_ranking as exported

    assert exported is score_ranking
    assert outcomes(old(labelled(), MEASURES)) == outcomes(new)
    assert new["mrr"].value == 0.5


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'score_samplez'"):
        _ = ragbridge.core.retrieval.score_samplez  # type: ignore[attr-defined]


def spy(calls: list[str]) -> Callable[..., Any]:
    async def counted(sample: Sample, *args: Any, **kwargs: Any) -> Any:
        calls.append(sample.id)
        return await record.score_record(sample, *args, **kwargs)

    return counted


def test_scorer_and_evaluate_score_each_record_through_score_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert scorer.score_record is record.score_record
    assert runner.score_record is record.score_record
    through_scorer: list[str] = []
    through_runner: list[str] = []
    monkeypatch.setattr(scorer, "score_record", spy(through_scorer))
    monkeypatch.setattr(runner, "score_record", spy(through_runner))
    sample = labelled()
    metrics = ["faithfulness", "mrr"]
    one = Scorer(metrics, judge=CountingJudge(), embedder=HashEmbedder()).score(sample)
    assert through_scorer == ["s1"]
    both = [sample, sample.model_copy(update={"id": "s2"})]
    many = evaluate(both, metrics, judge=CountingJudge())
    assert through_runner == ["s1", "s2"]
    assert one["mrr"].value == many.get("s1", "mrr").value == 0.5  # type: ignore[union-attr]


def definitions(name: str) -> list[str]:
    """Where a function called ``name`` is defined in the package (core and adapters)."""
    found = []
    for folder in ("core", "adapters"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                    found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}")
    return found


def test_each_scoring_name_is_defined_once_and_the_old_one_nowhere() -> None:
    assert [d.split(":")[0] for d in definitions("score_record")] == ["core/scoring/record.py"]
    assert [d.split(":")[0] for d in definitions("score_ranking")] == [
        "core/retrieval/per_sample.py"
    ]
    assert definitions("score_sample") == []


def test_the_code_digest_covers_the_whole_core_wherever_its_module_sits() -> None:
    """Kept Scores are keyed on the source of all of ``ragbridge.core``: an edited prompt or
    metric must miss. When the module moved into ``core/cache/``, the digest covered that folder
    only and each core metric's own module was hashed apart, so core metrics no longer shared
    one digest and ``cache prune --old-prompts`` removed results of current code."""
    files = {path.relative_to(PACKAGE / "core").as_posix() for path in kept_scores._core_files()}
    assert {"prompts/base.py", "metrics/faithfulness.py", "judging/engine.py"} <= files
    assert kept_scores._in_core("ragbridge.core.metrics.faithfulness")
    assert not kept_scores._in_core("ragbridge.adapters.ragas")
    assert kept_scores.code_digest(Faithfulness) == kept_scores.code_digest(AnswerRelevance)
