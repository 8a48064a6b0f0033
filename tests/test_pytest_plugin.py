"""The pytest plugin, loaded through its real ``pytest11`` entry point (pytester runs pytest)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points

import pytest

from ragbridge.adapters.pytest_plugin import RagAssertionError, assert_rag
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import HashEmbedder, ScriptedJudge

pytest_plugins = ["pytester"]

SAMPLE = Sample(
    id="tower",
    question="Where is the Eiffel Tower and how tall is it?",
    answer="The Eiffel Tower is in Paris. It is 500 metres tall.",
    contexts=[Context(text="The Eiffel Tower is a tower in Paris.", id="d1")],
    relevance={"d1": 1},
)

SCRIPT = {
    "answer.analyze": {
        "claims": ["The Eiffel Tower is in Paris.", "It is 500 metres tall."],
        "questions": ["Where is the Eiffel Tower?"],
        "noncommittal": False,
    },
    "faithfulness.verify": {
        "verdicts": [
            {"reason": "context 1 places it in Paris", "verdict": "supported", "context": 1},
            {"reason": "no context gives a height", "verdict": "unsupported", "context": None},
        ]
    },
}


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("ragbridge") == "ragbridge.adapters.pytest_plugin"


def test_assert_rag_passes_and_returns_the_scores() -> None:
    scores = assert_rag(
        SAMPLE,
        ["faithfulness", "hallucination", "recall@5"],
        {"faithfulness": 0.5, "hallucination": 0.5, "recall@5": 1.0},
        judge=ScriptedJudge(dict(SCRIPT)),
    )
    assert scores["faithfulness"].value == 0.5
    assert scores["recall@5"].value == 1.0


def test_a_miss_shows_values_thresholds_reasons_and_claim_verdicts() -> None:
    with pytest.raises(RagAssertionError) as caught:
        assert_rag(
            SAMPLE,
            ["faithfulness", "hallucination", "recall@5"],
            {"faithfulness": 0.8, "hallucination": 0.2},
            judge=ScriptedJudge(dict(SCRIPT)),
        )
    err = caught.value
    assert err.missed == ["faithfulness", "hallucination"]  # hallucination's threshold is a maximum
    text = str(err)
    assert "sample 'tower': 2 of 2 RAG thresholds missed" in text
    assert "✗ faithfulness: 0.500 (wanted >= 0.8)" in text
    assert "✗ hallucination: 0.500 (wanted <= 0.2)" in text
    assert "recall@5: 1.000 (not asserted)" in text
    assert "✗ [unsupported] It is 500 metres tall. — no context gives a height" in text


def test_a_judge_failure_fails_the_assertion_with_the_failure() -> None:
    from ragbridge.core.judging.judge import PermanentJudgeError

    judge = ScriptedJudge({"*": PermanentJudgeError("model not found")})
    with pytest.raises(RagAssertionError, match=r"failed \(judge_error\): model not found"):
        assert_rag(SAMPLE, ["faithfulness"], 0.1, judge=judge)


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="not scored: recall@10"):
        assert_rag(SAMPLE, ["mrr"], {"recall@10": 0.5})
    with pytest.raises(ValueError, match=r"within \[0, 1\], got 80"):
        assert_rag(SAMPLE, ["mrr"], 80)


def _write_eval_set(pytester: pytest.Pytester) -> None:
    rows = [
        {
            "id": "paris",
            "question": "Capital of France?",
            "answer": "Paris is the capital of France.",
            "contexts": [{"text": "Paris is the capital of France.", "id": "d1"}],
            "relevance": {"d1": 1},
        },
        {
            "id": "berlin",
            "question": "Capital of Germany?",
            "answer": "Bonn is the capital of Germany.",
            "contexts": [{"text": "Germany's capital is Berlin.", "id": "d9"}],
            "relevance": {"d2": 1},
        },
    ]
    pytester.makefile(".jsonl", eval="\n".join(json.dumps(r) for r in rows))


def test_an_eval_set_runs_as_parametrised_tests_through_the_entry_point(
    pytester: pytest.Pytester,
) -> None:
    _write_eval_set(pytester)
    pytester.makepyfile(
        """
        import pytest
        from ragbridge.adapters.pytest_plugin import assert_rag

        @pytest.mark.ragbridge_samples("eval.jsonl")
        def test_retrieval(rag_sample):
            assert_rag(rag_sample, ["recall@5", "mrr"], {"recall@5": 1.0})
        """
    )
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_retrieval?paris? PASSED*",
            "*test_retrieval?berlin? FAILED*",
            "*sample 'berlin': 1 of 1 RAG thresholds missed*",
            "*✗ recall@5: 0.000 (wanted >= 1)*",
        ]
    )


def test_marker_misuse_gets_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ragbridge_samples("missing.jsonl")
        def test_a(rag_sample):
            pass

        def test_b(rag_sample):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ragbridge_samples: no such file*missing.jsonl*"])
    result.stdout.no_fnmatch_line("*_pytest*")  # the message alone, no traceback


def test_fixture_without_marker_explains(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_b(rag_sample):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*needs @pytest.mark.ragbridge_samples*"])


def test_offline_metrics_work_in_assert_rag() -> None:
    scores = assert_rag(
        SAMPLE, ["faithfulness:offline"], {"faithfulness": 0.0}, embedder=HashEmbedder()
    )
    assert 0.0 <= (scores["faithfulness"].value or 0.0) <= 1.0
    assert scores["faithfulness"].provider == "offline"


def test_without_a_judge_faithfulness_means_the_offline_provider_as_in_the_cli() -> None:
    # One rule for the plugin and the `ragbridge` command: no judge, so the offline provider,
    # and the failure message names it.
    scores = assert_rag(SAMPLE, ["faithfulness"], {"faithfulness": 0.0}, embedder=HashEmbedder())
    assert scores["faithfulness"].provider == "offline"
    with pytest.raises(RagAssertionError) as caught:
        assert_rag(SAMPLE, ["faithfulness", "mrr"], 1.0, embedder=HashEmbedder())
    text = str(caught.value)
    assert "  providers: faithfulness → faithfulness:offline (no judge)" in text.splitlines()
    assert caught.value.scores["faithfulness"].provider == "offline"


def test_with_a_judge_faithfulness_is_the_judge_version_and_no_provider_note() -> None:
    with pytest.raises(RagAssertionError) as caught:
        assert_rag(SAMPLE, ["faithfulness"], 0.9, judge=ScriptedJudge(dict(SCRIPT)))
    assert caught.value.scores["faithfulness"].provider == "llm"
    assert "providers:" not in str(caught.value)


def test_a_judge_only_measure_without_a_judge_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"correctness needs a judge .*pass judge=\.\.\."):
        assert_rag(SAMPLE, ["correctness"], 0.5)


def test_a_misspelled_metric_gets_a_suggestion() -> None:
    with pytest.raises(
        ValueError, match=r"unknown metric 'fathfulness'; did you mean faithfulness"
    ):
        assert_rag(SAMPLE, ["fathfulness"], 0.5)
