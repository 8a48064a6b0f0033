"""One set of samples, scored inside every framework a team already runs — offline.

Shows the *sink* side of ragbridge: the same measure (faithfulness, offline provider) as a
LangSmith evaluator in ``langsmith.evaluate``, a DeepEval metric in ``deepeval.evaluate``, a
LlamaIndex evaluator, and a pytest assertion — one implementation, four front doors, the same
numbers. Then the other direction: DeepEval's and RAGAS's own metrics running on a ragbridge
judge and cache (here `CountingJudge`, a stand-in for your LLM judge that answers any schema).

Run: ``python examples/framework_sinks.py`` (needs ``pip install ".[all]"``).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("LANGSMITH_TEST_TRACKING", "false")

sys.path.insert(0, str(Path(__file__).parent))
from corpus import ANSWERS, DOCUMENTS, QUESTIONS

from ragbridge.core import Context, Sample, Scorer

SAMPLES = [
    Sample(
        id=qid,
        question=question,
        answer=answer,
        contexts=[Context(text=DOCUMENTS[doc], id=doc) for doc in relevance],
        relevance=relevance,
    )
    for (qid, question, relevance), answer in zip(QUESTIONS, ANSWERS, strict=True)
]
METRIC = "faithfulness:offline"


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="ragbridge-sinks-"))
    os.chdir(work)  # DeepEval and RAGAS write state files into the working directory
    direct = {s.id: Scorer([METRIC]).score(s)["faithfulness"].value for s in SAMPLES}

    # LangSmith: drop-in evaluators, offline client, no upload.
    from langsmith import evaluate

    from ragbridge.adapters.langsmith import evaluators, offline_client, to_examples

    by_id = {s.id: s for s in SAMPLES}

    def pipeline(inputs: dict[str, str]) -> dict[str, object]:
        sample = next(s for s in SAMPLES if s.question == inputs["question"])
        return {"answer": sample.answer, "contexts": [c.text for c in sample.contexts]}

    with contextlib.redirect_stdout(io.StringIO()):  # LangSmith prints the experiment's name
        ls = evaluate(
            pipeline,
            data=to_examples(SAMPLES),
            evaluators=evaluators([METRIC]),
            upload_results=False,
            client=offline_client(),
        )
    langsmith_scores = {
        row["example"].metadata["ragbridge_id"]: row["evaluation_results"]["results"][0].score
        for row in ls
    }

    # DeepEval: a BaseMetric in deepeval.evaluate.
    import deepeval

    from ragbridge.adapters.deepeval import as_deepeval_metric, to_test_case

    cases = [to_test_case(s) for s in SAMPLES]
    with contextlib.redirect_stdout(io.StringIO()):  # DeepEval's banner; the table stays readable
        result = deepeval.evaluate(
            test_cases=cases,
            metrics=[as_deepeval_metric(METRIC, threshold=0.5)],
            display_config=deepeval.evaluate.configs.DisplayConfig(print_results=False,
                                                                   show_indicator=False),
        )  # fmt: skip
    deepeval_scores = {case.name or "": case.metrics_data[0].score for case in result.test_results}

    # LlamaIndex: a BaseEvaluator.
    from ragbridge.adapters.llamaindex import RagbridgeEvaluator

    evaluator = RagbridgeEvaluator(METRIC)
    llama_scores = {
        s.id: evaluator.evaluate(
            query=s.question, response=s.answer, contexts=[c.text for c in s.contexts]
        ).score
        for s in SAMPLES
    }

    print(f"{'sample':<8}{'ragbridge':>10}{'langsmith':>10}{'deepeval':>10}{'llamaindex':>11}")
    for sid in by_id:
        deepeval_score = _by_question(deepeval_scores, cases, SAMPLES, sid)
        print(
            f"{sid:<8}{_cell(direct[sid]):>10}{_cell(langsmith_scores[sid]):>10}"
            f"{_cell(deepeval_score):>10}{_cell(llama_scores[sid]):>11}"
        )
    print("(- = no score: skipped with a reason, the same in every framework)")

    # pytest: the same measure as an assertion (in a test file, import assert_rag from
    # ragbridge.adapters.pytest_plugin; a miss prints the reason and each claim's verdict).
    from ragbridge.adapters.pytest_plugin import RagAssertionError, assert_rag

    wrong = by_id["q1"].model_copy(
        update={"id": "q1-wrong", "answer": "New employees receive 30 days of paid leave per year."}
    )
    for sample in (wrong, by_id["q5"]):
        try:
            assert_rag(sample, [METRIC], {"faithfulness": 0.9})
        except RagAssertionError as miss:
            print(f"\nassert_rag on {sample.id} ({sample.answer!r}):\n{miss}")
    print()

    # The other direction: DeepEval's and RAGAS's own metrics on one ragbridge judge and cache.
    from deepeval.metrics import FaithfulnessMetric

    from ragbridge.adapters.deepeval import DeepEvalJudge
    from ragbridge.core.testing import CountingJudge

    judge = CountingJudge()
    cache = work / "judge-cache.sqlite"
    for attempt in ("cold", "warm"):
        wrapped = DeepEvalJudge(judge, cache=cache)
        metric = FaithfulnessMetric(model=wrapped, async_mode=False, include_reason=False)
        metric.measure(cases[0])
        print(
            f"DeepEval FaithfulnessMetric on a ragbridge judge ({attempt} cache): "
            f"score {metric.score:.2f}, judge calls so far {judge.calls}, "
            f"cached {wrapped.usage.cached_calls}"
        )


def _cell(value: float | None) -> str:
    """A score as the table prints it; ``-`` when the measure gave none (skipped or failed)."""
    return "-" if value is None else f"{value:.3f}"


def _by_question(
    scores: dict[str, float | None], cases: list[object], samples: list[Sample], sid: str
) -> float | None:
    """DeepEval names test results by the test case's name, or 'test_case_<i>' when unnamed."""
    index = next(i for i, s in enumerate(samples) if s.id == sid)
    for name in (getattr(cases[index], "name", None), f"test_case_{index}"):
        if name in scores:
            value = scores[name]
            return None if value is None else float(value)
    raise KeyError(sid)


if __name__ == "__main__":
    main()
