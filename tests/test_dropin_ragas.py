"""Drop-in for RAGAS users (issue 16): ragbridge's measures inside ``ragas.evaluate`` through
RAGAS's own metric protocol, RAGAS's result with typed failures next to it, and RAGAS's
getting-started evaluation (examples/ragas_getting_started.py) run offline.

Every judge is scripted (`ragbridge.core.testing`, or the example's word-overlap judge) and
every framework object is real RAGAS 0.4 / LangChain.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import math
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ragas = pytest.importorskip("ragas")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from ragas.dataset_schema import EvaluationResult, SingleTurnSample  # noqa: E402
from ragas.metrics.base import (  # noqa: E402
    MetricWithEmbeddings,
    MetricWithLLM,
    SingleTurnMetric,
)
from ragas.run_config import RunConfig  # noqa: E402

from ragbridge.adapters.ragas import (  # noqa: E402
    RagasEmbedder,
    RagasJudge,
    RagasResult,
    RagbridgeMetric,
    RagbridgeScoreError,
    aevaluate,
    evaluate,
    judge_from_ragas,
    ragbridge_metric,
    ragbridge_metrics,
    scores_from_ragas,
    to_ragas_dataset,
)
from ragbridge.core import evaluate as ragbridge_evaluate  # noqa: E402
from ragbridge.core.judging.judge import PermanentJudgeError  # noqa: E402
from ragbridge.core.results.evaluation import FailureKind  # noqa: E402
from ragbridge.core.sample import Context, Sample  # noqa: E402
from ragbridge.core.settings import Settings  # noqa: E402
from ragbridge.core.testing import (  # noqa: E402
    CountingJudge,
    HashEmbedder,
    ScriptedJudge,
    minimal_reply,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ragas_getting_started.py"


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # RAGAS writes ~/.local/share/ragas; its telemetry is off (tests/conftest.py, and the
    # adapter sets RAGAS_DO_NOT_TRACK itself). ragas.evaluate() is deprecated in 0.4.
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    warnings.simplefilter("ignore", DeprecationWarning)


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ragas_getting_started", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _overlap_judge() -> Any:
    """The example's word-overlap judge: scores that differ from sample to sample."""
    return _example().OverlapJudge()


SAMPLES = [
    Sample(
        id="rhine",
        question="Where does the Rhine reach the sea?",
        answer="The Rhine reaches the North Sea near Rotterdam. The Rhine is very cold.",
        contexts=[
            Context(
                text="The Rhine rises in the Alps and reaches the North Sea near Rotterdam.",
                id="d1",
            ),
            Context(text="Lake Baikal in Siberia is the deepest lake on Earth.", id="d4"),
        ],
        reference="The Rhine reaches the North Sea near Rotterdam. It rises in the Alps.",
        relevance={"d1": 1},
    ),
    Sample(
        id="atacama",
        question="Where is the Atacama Desert?",
        answer="The Atacama Desert covers southern Argentina.",
        contexts=[Context(text="The Atacama Desert lies in northern Chile.", id="d5")],
        reference="The Atacama Desert is in northern Chile.",
        relevance={"d5": 1},
    ),
    Sample(
        id="reef",
        question="Where is the Great Barrier Reef?",
        answer="The Great Barrier Reef lies off Queensland in Australia.",
        contexts=[
            Context(text="Kilimanjaro is the highest mountain in Africa.", id="d2"),
            Context(
                text="The Great Barrier Reef lies off Queensland in north-eastern Australia.",
                id="d3",
            ),
        ],
        reference="The Great Barrier Reef lies off Queensland, Australia.",
        relevance={"d3": 1},
    ),
]
MEASURES = ("faithfulness", "answer_relevance", "context_recall", "answer_correctness")
OFFLINE = ("exact_match", "recall@1", "answer_relevance:offline")


def _value(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _ragbridge_values(samples: list[Sample], measures: tuple[str, ...], **settings: Any) -> dict:
    """ragbridge's own values, by (sample id, measure as named here)."""
    values = {}
    for measure in measures:
        for row in ragbridge_evaluate(samples, [measure], **settings):
            values[(row.sample_id, measure)] = row.score.value
    return values


# --------------------------------------------------------------------------- the metric protocol


def test_a_ragbridge_metric_is_a_ragas_metric_of_the_right_kind() -> None:
    judged = RagbridgeMetric("faithfulness", judge=CountingJudge())
    assert isinstance(judged, SingleTurnMetric)
    assert isinstance(judged, MetricWithLLM)
    assert not isinstance(judged, MetricWithEmbeddings)
    assert judged.name == "faithfulness"
    assert judged.required_columns == {"SINGLE_TURN": {"user_input", "response"}}
    assert isinstance(judged.llm, RagasJudge)  # the judge given shows as RAGAS's llm
    relevancy = RagbridgeMetric("answer_relevancy")
    assert relevancy.name == "answer_relevancy"  # RAGAS's column name is kept
    assert relevancy.metric.name == "answer_relevance"
    assert isinstance(relevancy, MetricWithLLM)
    assert isinstance(relevancy, MetricWithEmbeddings)
    assert relevancy.llm is None  # ragas.evaluate fills it
    for name in OFFLINE:
        offline = ragbridge_metric(name, embedder=HashEmbedder())
        assert isinstance(offline, SingleTurnMetric)
        assert not isinstance(offline, (MetricWithLLM, MetricWithEmbeddings)), name
    offline = RagbridgeMetric("answer_relevance:offline", embedder=HashEmbedder())
    assert offline.name == "answer_relevancy:offline"  # RAGAS's name; not the default provider
    recall = RagbridgeMetric("context_recall")
    assert recall.required_columns["SINGLE_TURN"] == {"user_input", "reference"}


def test_scores_equal_ragbridge_evaluate_on_the_same_samples_and_judge() -> None:
    metrics = [
        RagbridgeMetric(name, judge=_overlap_judge(), embedder=HashEmbedder(), names="ragbridge")
        for name in (*MEASURES, *OFFLINE)
    ]
    result = ragas.evaluate(to_ragas_dataset(SAMPLES), metrics=metrics, show_progress=False)
    mine = {
        (s.id, m.name): _value(result.scores[i][m.name])
        for i, s in enumerate(SAMPLES)
        for m in metrics
    }
    theirs = _ragbridge_values(
        SAMPLES, (*MEASURES, *OFFLINE), judge=_overlap_judge(), embedder=HashEmbedder()
    )
    assert mine == theirs
    # Not trivially equal: the samples score differently.
    assert theirs[("rhine", "faithfulness")] == 0.5
    assert theirs[("atacama", "faithfulness")] == 0.0
    assert theirs[("reef", "faithfulness")] == 1.0
    assert theirs[("atacama", "recall@1")] == 1.0
    assert theirs[("reef", "recall@1")] == 0.0
    assert len({v for (_, m), v in theirs.items() if m == "answer_relevance"}) == 3


def test_the_llm_and_embeddings_given_to_ragas_evaluate_are_the_judge_and_embedder() -> None:
    counting = CountingJudge()
    llm = RagasJudge(_overlap_judge())
    metrics = [RagbridgeMetric(name) for name in MEASURES]
    result = evaluate(
        to_ragas_dataset(SAMPLES),
        metrics=metrics,
        llm=llm,
        embeddings=RagasEmbedder(HashEmbedder()),
        show_progress=False,
    )
    theirs = _ragbridge_values(SAMPLES, MEASURES, judge=_overlap_judge(), embedder=HashEmbedder())
    assert {
        (s.id, m.metric.name): _value(result.scores[i][m.name])
        for i, s in enumerate(SAMPLES)
        for m in metrics
    } == theirs
    assert llm.engine.stats.calls > 0  # our metrics called through RAGAS's llm (its engine)
    assert all(m.llm is None for m in metrics)  # RAGAS resets what it filled in
    # The next run's llm is used, not the last one's.
    again = evaluate(
        to_ragas_dataset(SAMPLES[:1]),
        metrics=[metrics[0]],
        llm=RagasJudge(counting),
        show_progress=False,
    )
    assert counting.calls > 0
    assert again.ragbridge_scores[0]["faithfulness"].judge_model == "counting-judge"


class ChatModel(BaseChatModel):
    """A LangChain chat model answering like `CountingJudge` (minimal valid replies)."""

    model_name: str = "scripted-chat"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        roles = {"system": "system", "human": "user", "ai": "assistant"}
        asked = [{"role": roles[m.type], "content": str(m.content)} for m in messages]
        usage = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
        message = AIMessage(content=minimal_reply(asked), usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


@pytest.mark.parametrize("wrap", [True, False], ids=["LangchainLLMWrapper", "bare-langchain"])
def test_a_langchain_model_as_ragas_llm_judges_our_metric(wrap: bool) -> None:
    from ragas.llms import LangchainLLMWrapper

    model = ChatModel()
    llm = LangchainLLMWrapper(model) if wrap else model  # as RAGAS's guide writes it
    result = evaluate(
        to_ragas_dataset(SAMPLES[:1]),
        metrics=[RagbridgeMetric("faithfulness")],
        llm=llm,
        show_progress=False,
    )
    score = result.ragbridge_scores[0]["faithfulness"]
    assert model.calls == 2  # answer.analyze, faithfulness.verify
    assert score.judge_model == "scripted-chat"
    assert (score.usage.prompt_tokens, score.usage.completion_tokens) == (22, 14)
    expected = _ragbridge_values(SAMPLES[:1], ("faithfulness",), judge=CountingJudge())
    assert score.value == expected[("rhine", "faithfulness")]


def test_judge_from_ragas_unwraps_our_own_wrappers_and_refuses_strangers() -> None:
    counting = CountingJudge()
    ours = RagasJudge(counting)
    assert judge_from_ragas(ours) is ours.engine
    assert judge_from_ragas(ours.for_collections()) is ours.engine
    assert judge_from_ragas(counting) is counting
    with pytest.raises(TypeError, match="neither a RAGAS LLM"):
        judge_from_ragas(object())


def test_a_judge_given_to_the_metric_wins_over_ragas_llm() -> None:
    mine, theirs = CountingJudge(model="mine"), CountingJudge(model="theirs")
    result = evaluate(
        to_ragas_dataset(SAMPLES[:1]),
        metrics=[RagbridgeMetric("faithfulness", llm=mine)],  # RAGAS's spelling of judge=
        llm=RagasJudge(theirs),
        show_progress=False,
    )
    assert mine.calls == 2
    assert theirs.calls == 0
    assert result.ragbridge_scores[0]["faithfulness"].judge_model == "mine"


def test_the_judge_is_given_once() -> None:
    with pytest.raises(TypeError, match="llm= and judge= name the same model"):
        RagbridgeMetric("faithfulness", llm=CountingJudge(), judge=CountingJudge())
    with pytest.raises(TypeError, match="llm= and judge= name the same model"):
        RagbridgeMetric(
            "faithfulness", llm=CountingJudge(), settings=Settings(judge=CountingJudge())
        )


def test_ragas_llm_spelling_goes_with_settings_and_the_cache(tmp_path: Path) -> None:
    settings = Settings(cache=tmp_path / "judge.sqlite")
    dataset = to_ragas_dataset(SAMPLES)
    values = []
    for _ in range(2):
        model = ChatModel()
        metric = RagbridgeMetric("faithfulness", settings=settings, llm=model)
        result = evaluate(dataset, metrics=[metric], show_progress=False)
        values.append((model.calls, result.scores))
    assert values[0][0] == 2 * len(SAMPLES)
    assert values[1][0] == 0  # every reply from the cache file
    assert values[0][1] == values[1][1]


def test_a_metric_that_needs_no_judge_takes_no_model_from_ragas() -> None:
    # With no llm=, ragas.evaluate makes an OpenAI client for every MetricWithLLM whose llm is
    # None (no key here: it would raise). A ragbridge string metric is not one.
    result = ragas.evaluate(
        to_ragas_dataset(SAMPLES),
        metrics=[RagbridgeMetric("exact_match")],
        show_progress=False,
        raise_exceptions=True,
    )
    assert result["exact_match"] == [0.0, 0.0, 0.0]


def test_a_judged_metric_with_no_judge_anywhere_says_what_to_pass() -> None:
    with pytest.raises(ValueError, match=r"no judge: pass llm= to ragas.evaluate"):
        RagbridgeMetric("faithfulness").init(RunConfig())


def test_metrics_made_together_share_each_rows_claims() -> None:
    names = ("faithfulness", "answer_correctness", "answer_relevancy")
    runs = {}
    for together in (True, False):
        judge = CountingJudge()
        if together:
            metrics = ragbridge_metrics(*names, judge=judge, embedder=HashEmbedder())
        else:
            metrics = [RagbridgeMetric(n, judge=judge, embedder=HashEmbedder()) for n in names]
        result = evaluate(to_ragas_dataset(SAMPLES), metrics=metrics, show_progress=False)
        runs[together] = (judge.by_task["answer.analyze"], result.scores)
    assert runs[True][0] == len(SAMPLES)  # one answer.analyze per row, whoever asks
    assert runs[False][0] == 3 * len(SAMPLES)
    assert runs[True][1] == runs[False][1]


def test_a_failed_score_raises_in_ragas_and_is_nan_or_stops_the_run() -> None:
    judge = ScriptedJudge({"*": PermanentJudgeError("bad request: model not allowed")})
    metric = RagbridgeMetric("faithfulness", judge=judge, max_retries=0)
    result = ragas.evaluate(to_ragas_dataset(SAMPLES[:1]), metrics=[metric], show_progress=False)
    assert math.isnan(result.scores[0]["faithfulness"])
    with pytest.raises(RagbridgeScoreError, match=r"failed \(judge_error\): bad request") as info:
        ragas.evaluate(
            to_ragas_dataset(SAMPLES[:1]),
            metrics=[metric],
            show_progress=False,
            raise_exceptions=True,
        )
    assert info.value.failure.kind is FailureKind.JUDGE_ERROR


def test_a_skipped_score_is_nan_with_its_reason_logged(caplog: pytest.LogCaptureFixture) -> None:
    abstains = SAMPLES[0].model_copy(update={"answer": "I don't know."})
    metric = RagbridgeMetric("faithfulness", judge=CountingJudge())
    with caplog.at_level(logging.WARNING, logger="ragbridge.adapters.ragas"):
        result = ragas.evaluate(to_ragas_dataset([abstains]), metrics=[metric], show_progress=False)
    assert math.isnan(result.scores[0]["faithfulness"])
    assert "ragbridge faithfulness skipped a row" in caplog.text
    assert "abstains" in caplog.text


def test_single_turn_ascore_works_outside_evaluate() -> None:
    metric = RagbridgeMetric("exact_match")
    row = SingleTurnSample(user_input="q", response="Paris", reference="Paris")
    assert asyncio.run(metric.single_turn_ascore(row)) == 1.0


# --------------------------------------------------------------------------- RAGAS's result


def _faithfulness() -> Any:
    from ragas.metrics import Faithfulness

    return Faithfulness()


def test_an_unparseable_reply_carries_ragas_logged_cause_into_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge = RagasJudge(ScriptedJudge({"*": "Sure! Here are the statements you asked for."}))
    dataset = to_ragas_dataset(SAMPLES[:2])
    with caplog.at_level(logging.ERROR, logger="ragas.executor"):
        result = evaluate(dataset, metrics=[_faithfulness()], llm=judge, show_progress=False)
    # RAGAS's own result, unchanged: NaN in scores and in the table, its executor's log line.
    assert isinstance(result, EvaluationResult)
    assert isinstance(result, RagasResult)
    assert all(math.isnan(row["faithfulness"]) for row in result.scores)
    assert "Exception raised in Job[0]: RagasOutputParserException" in caplog.text
    # ...and next to it, why.
    failure = result.failures[1]["faithfulness"]
    assert failure.kind is FailureKind.PARSE_ERROR
    assert failure.message.startswith(
        "RAGAS faithfulness raised RagasOutputParserException: The output parser failed to "
        "parse the output including retries."
    )
    assert "(in RAGAS prompt 'statement_generator_prompt')" in failure.message
    assert "caused by OutputParserException: Invalid json output: Sure! Here are" in (
        failure.message
    )
    table = result.to_pandas(failures=True)
    assert list(table.columns[-2:]) == ["faithfulness", "faithfulness:failure"]
    assert table["faithfulness:failure"][0].startswith("parse_error: RAGAS faithfulness raised")
    assert "faithfulness:failure" not in result.to_pandas().columns
    # The ragbridge Evaluation of the same result carries the cause, with no other step.
    score = result.to_evaluation(samples=SAMPLES[:2]).get("atacama", "faithfulness")
    assert score is not None
    assert score.failure == failure
    assert scores_from_ragas(result).get("0", "faithfulness").failure == failure  # type: ignore[union-attr]
    # A plain ragas.evaluate result can only say that RAGAS returned NaN.
    plain = ragas.evaluate(dataset, metrics=[_faithfulness()], llm=judge, show_progress=False)
    generic = scores_from_ragas(plain).get("0", "faithfulness")
    assert generic is not None
    assert generic.failure is not None
    assert "RagasOutputParserException" not in generic.failure.message


def test_a_ragas_timeout_is_a_timeout_failure() -> None:
    slow = RagasJudge(CountingJudge(delay=1.0))
    result = evaluate(
        to_ragas_dataset(SAMPLES[:1]),
        metrics=[_faithfulness()],
        llm=slow,
        run_config=RunConfig(timeout=0.05),  # type: ignore[arg-type]
        show_progress=False,
    )
    failure = result.failures[0]["faithfulness"]
    assert failure.kind is FailureKind.TIMEOUT
    assert failure.message == (
        "RAGAS faithfulness raised TimeoutError: no result within RunConfig.timeout"
    )


def test_a_judge_failure_inside_a_ragas_metric_keeps_its_kind() -> None:
    judge = RagasJudge(ScriptedJudge({"*": PermanentJudgeError("401 invalid key")}), max_retries=0)
    result = evaluate(
        to_ragas_dataset(SAMPLES[:1]), metrics=[_faithfulness()], llm=judge, show_progress=False
    )
    failure = result.failures[0]["faithfulness"]
    assert failure.kind is FailureKind.JUDGE_ERROR
    assert "RagasJudgeError: ragbridge judge call failed (judge_error): 401 invalid key" in (
        failure.message
    )


def test_a_nan_ragas_returns_without_an_error_says_so() -> None:
    # RAGAS's faithfulness returns NaN, raising nothing, when it extracts no statement.
    judge = RagasJudge(ScriptedJudge({"*": '{"statements": []}'}))
    result = evaluate(
        to_ragas_dataset(SAMPLES[:1]), metrics=[_faithfulness()], llm=judge, show_progress=False
    )
    failure = result.failures[0]["faithfulness"]
    assert failure.kind is FailureKind.INVALID_OUTPUT
    assert "without raising an error" in failure.message


def test_ragbridge_cells_keep_their_own_score_failure_and_skip() -> None:
    abstains = SAMPLES[0].model_copy(update={"id": "dodge", "answer": "I don't know."})
    failing = RagbridgeMetric(
        "answer_correctness",
        judge=ScriptedJudge({"*": PermanentJudgeError("context length exceeded")}),
        max_retries=0,
    )
    metrics = [RagbridgeMetric("faithfulness", judge=_overlap_judge()), failing]
    result = evaluate(to_ragas_dataset([SAMPLES[0], abstains]), metrics=metrics)
    scored = result.ragbridge_scores[0]["faithfulness"]
    assert scored.value == 0.5
    assert scored.details is not None  # the per-claim verdicts behind the value
    assert result.failures[0] == {
        "answer_correctness": result.ragbridge_scores[0]["answer_correctness"].failure
    }
    assert result.failures[0]["answer_correctness"].message == "context length exceeded"
    skipped = result.ragbridge_scores[1]["faithfulness"]
    assert skipped.status == "skipped"
    assert "abstains" in (skipped.reason or "")
    assert "faithfulness" not in result.failures[1]  # a skip is not a failure
    assert math.isnan(result.scores[1]["faithfulness"])


class _Broken(SingleTurnMetric):
    """A RAGAS metric that fails before its chain starts: only RAGAS's executor log sees it."""

    def __init__(self) -> None:
        self.name = "broken"
        self._required_columns = {}

    def init(self, run_config: RunConfig) -> None:
        pass

    async def single_turn_ascore(self, *args: Any, **kwargs: Any) -> float:
        raise KeyError("no column 'rubric'")

    async def _single_turn_ascore(self, sample: Any, callbacks: Any) -> float:
        raise AssertionError("not reached")


def test_an_error_only_ragas_executor_logged_is_still_the_cause() -> None:
    result = evaluate(
        to_ragas_dataset(SAMPLES[:2]),
        metrics=[RagbridgeMetric("exact_match"), _Broken()],
        show_progress=False,
    )
    assert result.scores[1]["exact_match"] == 0.0
    failure = result.failures[1]["broken"]
    assert failure.kind is FailureKind.JUDGE_ERROR
    assert failure.message == "RAGAS broken raised KeyError: \"no column 'rubric'\""


def test_two_metrics_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\['faithfulness'\] given twice"):
        evaluate(
            to_ragas_dataset(SAMPLES[:1]),
            metrics=[RagbridgeMetric("faithfulness"), _faithfulness()],
            llm=RagasJudge(CountingJudge()),
        )


def test_the_users_callbacks_still_see_the_run() -> None:
    class Names(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(serialized["name"])

    seen = Names()
    evaluate(
        to_ragas_dataset(SAMPLES[:1]),
        metrics=[RagbridgeMetric("exact_match")],
        callbacks=[seen],
        show_progress=False,
    )
    assert seen.names[:3] == ["ragas evaluation", "row 0", "exact_match"]


def test_aevaluate_gives_the_same_typed_result() -> None:
    judge = RagasJudge(ScriptedJudge({"*": "not JSON"}))

    async def run() -> RagasResult:
        return await aevaluate(
            to_ragas_dataset(SAMPLES[:1]), metrics=[_faithfulness()], llm=judge, show_progress=False
        )

    result = asyncio.run(run())
    assert result.failures[0]["faithfulness"].kind is FailureKind.PARSE_ERROR


# --------------------------------------------------------------------------- the example


def test_the_getting_started_example_runs_offline_and_gives_ragbridge_numbers() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True, timeout=300
    )
    lines = done.stdout.splitlines()
    header = lines[1].split()
    assert header == [
        "user_input",
        "context_recall",
        "faithfulness",
        "answer_correctness",
        "answer_relevancy",
    ]
    rows = {}
    for line in lines[2:]:
        question, _, numbers = line.partition("?")
        rows[question.split(maxsplit=1)[1] + "?"] = [float(x) for x in numbers.split()]
    example = _example()
    assert list(rows) == example.sample_queries
    faithfulness = [values[1] for values in rows.values()]
    assert faithfulness == [1.0, 1.0, 1.0, 0.5, 0.0]  # the two wrong answers are caught
    assert all(values[0] == 1.0 for values in rows.values())  # every reference was retrieved
    # The same numbers as ragbridge's own evaluate on the same rows and judge.
    table = example.main()
    samples = from_table(table)
    measures = ("context_recall", "faithfulness", "answer_correctness", "answer_relevance")
    ours = _ragbridge_values(
        samples, measures, judge=example.OverlapJudge(), embedder=HashEmbedder(dim=256)
    )
    for i, sample in enumerate(samples):
        for measure, column in zip(measures, header[1:], strict=True):
            assert ours[(sample.id, measure)] == pytest.approx(table[column][i], abs=1e-12)
            assert round(table[column][i], 3) == rows[sample.question][header.index(column) - 1]


def from_table(table: Any) -> list[Sample]:
    return [
        Sample(
            id=str(i),
            question=row["user_input"],
            answer=row["response"],
            contexts=[Context(text=t) for t in row["retrieved_contexts"]],
            reference=row["reference"],
        )
        for i, row in table.iterrows()
    ]
