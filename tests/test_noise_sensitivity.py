"""``noise_sensitivity`` (issue 33): RAGAS 0.4.3's NoiseSensitivity, one call besides the shared
claims, an offline provider, and every sink.

The key test drives RAGAS's own ``NoiseSensitivity`` (legacy and collections) and ours with ONE
scripted oracle: a text's statements are its sentences, and a statement is supported by a text
iff it occurs in it verbatim (case-insensitive). The oracle reads RAGAS's prompts (the JSON input
at their end) and ours (the numbered blocks), so both metrics see the same relations and must
give the same value on every random case.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from ragbridge.core import estimate, evaluate
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.metrics import Faithfulness, NoiseSensitivity, resolve
from ragbridge.core.prompts import get
from ragbridge.core.registry import REGISTRY
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import CountingJudge, ScriptedJudge, task_of

# --------------------------------------------------------------------------- the oracle

_SPLIT = re.compile(r"(?<=[.!?])\s+")
_BLOCK = re.compile(
    r"<<<BEGIN (?P<label>[A-Z]+)(?: (?P<n>\d+))?>>>(?P<text>.*?)<<<END (?P=label)", re.DOTALL
)
_RAGAS_INPUT = re.compile(r"input: (\{.*\})\s*Output:\s*$", re.DOTALL)


def sentences(text: str) -> list[str]:
    """The oracle's statements of a text: its sentences."""
    return [s.strip() for s in _SPLIT.split(text.strip()) if s.strip()]


def supports(text: str, statement: str) -> bool:
    """The oracle's support: the statement occurs in the text verbatim (case-insensitive)."""
    return statement.strip().lower() in text.lower()


def _blocks(prompt: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in _BLOCK.finditer(prompt):
        found.setdefault(m["label"], []).append(m["text"].strip())
    return found


@dataclass
class VerbatimOracle:
    """A `Judge` answering RAGAS's statement/NLI prompts and ragbridge's prompts alike."""

    model: str = "verbatim-oracle"
    calls: int = 0

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        prompt = "\n".join(m["content"] for m in messages if m["role"] == "user")
        task = task_of(messages)
        if task is None:
            reply: Any = self._ragas(prompt)
        elif task == "answer.analyze":
            (answer,) = _blocks(prompt)["ANSWER"]
            reply = {"claims": sentences(answer), "questions": ["a?", "b?", "c?"]}
            reply["noncommittal"] = False
        elif task == "noise_sensitivity.judge":
            blocks = _blocks(prompt)
            (reference,) = blocks["REFERENCE"]
            contexts = blocks["CONTEXT"]
            reply = {
                "reference_contexts": [
                    j
                    for j, c in enumerate(contexts, start=1)
                    if any(supports(c, s) for s in sentences(reference))
                ],
                "claims": [
                    {
                        "reason": "verbatim",
                        "in_reference": supports(reference, claim),
                        "contexts": [
                            j for j, c in enumerate(contexts, start=1) if supports(c, claim)
                        ],
                    }
                    for claim in blocks["CLAIM"]
                ],
            }
        else:
            raise AssertionError(f"the oracle was asked {task!r}")
        return JudgeReply(text=json.dumps(reply))

    @staticmethod
    def _ragas(prompt: str) -> dict[str, Any]:
        match = _RAGAS_INPUT.search(prompt)
        assert match is not None, prompt[-300:]
        data = json.loads(match[1])
        if "answer" in data:  # StatementGeneratorPrompt
            return {"statements": sentences(data["answer"])}
        context = data["context"]  # NLIStatementPrompt
        return {
            "statements": [
                {"statement": s, "reason": "verbatim", "verdict": int(supports(context, s))}
                for s in data["statements"]
            ]
        }


# --------------------------------------------------------------------------- random cases

TOPIC = [
    "The bridge opened in 1932.",
    "The bridge is painted red.",
    "The bridge spans the river.",
    "The bridge has six lanes.",
    "The bridge was designed by Smith.",
]
ANSWER_ONLY = ["The bridge glows at night."]  # no context or reference states it
FILLER = ["Tea is grown in India.", "The museum closes at noon."]


def random_case(rng: random.Random, n: int) -> Sample:
    """A case whose answer, reference and contexts share sentences in every combination."""
    reference = rng.sample(TOPIC, rng.randint(1, 3))
    if len(reference) > 1 and rng.random() < 0.5:
        # one compound statement holding the next one verbatim: a claim the reference supports
        # while a context stating only that claim supports no statement of the reference
        first, second = reference[:2]
        reference[:2] = [f"{first[:-1]}, {second[0].lower()}{second[1:]}"]
    answer = rng.sample(TOPIC + ANSWER_ONLY, rng.randint(1, 4))
    contexts = [
        " ".join(rng.sample(TOPIC + FILLER, rng.randint(1, 3))) for _ in range(rng.randint(1, 4))
    ]
    return Sample(
        id=f"case-{n}",
        question="What do we know about the bridge?",
        answer=" ".join(answer),
        reference=" ".join(reference),
        contexts=[Context(id=f"c{n}-{j}", text=t) for j, t in enumerate(contexts)],
    )


def random_cases(n: int, seed: int = 33) -> list[Sample]:
    rng = random.Random(seed)
    return [random_case(rng, i) for i in range(n)]


def claim_kinds(sample: Sample) -> set[tuple[bool, bool, bool]]:
    """(in the reference, backed by a relevant context, backed by an irrelevant one) per claim."""
    reference = sample.reference or ""
    texts = [c.text for c in sample.contexts]
    relevant = [any(supports(t, s) for s in sentences(reference)) for t in texts]
    kinds = set()
    for claim in sentences(sample.answer or ""):
        backing = [r for t, r in zip(texts, relevant, strict=True) if supports(t, claim)]
        kinds.add((supports(reference, claim), any(backing), not all(backing)))
    return kinds


def ours(samples: list[Sample], mode: str, **kw: Any) -> list[Score]:
    result = evaluate(samples, [NoiseSensitivity(mode=mode, **kw)], judge=VerbatimOracle())  # type: ignore[arg-type]
    return [result.get(s.id, "noise_sensitivity") for s in samples]  # type: ignore[misc]


ragas = pytest.importorskip("ragas")


def ragas_legacy(samples: list[Sample], mode: str) -> list[float]:
    """RAGAS's own legacy NoiseSensitivity on the oracle (through ragbridge's RAGAS judge)."""
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics._noise_sensitivity import NoiseSensitivity as RagasNoiseSensitivity

    from ragbridge.adapters.ragas import RagasJudge

    metric = RagasNoiseSensitivity(llm=RagasJudge(VerbatimOracle()), mode=mode)  # type: ignore[arg-type]

    async def run() -> list[float]:
        rows = [
            SingleTurnSample(
                user_input=s.question,
                response=s.answer,
                reference=s.reference,
                retrieved_contexts=[c.text for c in s.contexts],
            )
            for s in samples
        ]
        return list(await asyncio.gather(*(metric.single_turn_ascore(r) for r in rows)))

    return asyncio.run(run())


def ragas_collections(samples: list[Sample], mode: str) -> list[float]:
    """RAGAS's collections NoiseSensitivity on the same oracle."""
    from ragas.metrics.collections import NoiseSensitivity as ModernNoiseSensitivity

    from ragbridge.adapters.ragas import RagasJudge

    metric = ModernNoiseSensitivity(
        llm=RagasJudge(VerbatimOracle()).for_collections(),  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
    )

    async def run() -> list[float]:
        results = await asyncio.gather(
            *(
                metric.ascore(
                    user_input=s.question,
                    response=s.answer or "",
                    reference=s.reference or "",
                    retrieved_contexts=[c.text for c in s.contexts],
                )
                for s in samples
            )
        )
        return [float(r.value) for r in results]

    return asyncio.run(run())


def max_difference(samples: list[Sample], mode: str) -> tuple[float, list[float], list[Score]]:
    """The largest |ours - RAGAS legacy| over ``samples`` (the figure the report quotes)."""
    theirs = ragas_legacy(samples, mode)
    mine = ours(samples, mode)
    diffs = [
        abs((m.value if m.value is not None else math.nan) - t)
        for m, t in zip(mine, theirs, strict=True)
    ]
    return max(diffs), theirs, mine


CASES = random_cases(240)


def test_random_cases_cover_every_kind_of_claim() -> None:
    # in reference x backed by a relevant context x backed by an irrelevant one: all 8 occur
    kinds = set().union(*(claim_kinds(s) for s in CASES))
    assert kinds == {(a, b, c) for a in (True, False) for b in (True, False) for c in (True, False)}


@pytest.mark.parametrize("mode", ["relevant", "irrelevant"])
def test_equal_to_ragas_noise_sensitivity_on_random_cases(mode: str) -> None:
    worst, theirs, mine = max_difference(CASES, mode)
    print(f"noise_sensitivity mode={mode}: max |ours - ragas| over {len(CASES)} cases = {worst}")
    for sample, t, m in zip(CASES, theirs, mine, strict=True):
        assert m.status == "scored", (sample.id, m.failure, m.reason)
        assert m.value is not None
        assert abs(m.value - t) <= 1e-9, (sample.id, mode, m.value, t, m.details)
    assert worst <= 1e-9
    # not a degenerate comparison: the values spread over several levels
    assert len({round(t, 6) for t in theirs}) >= 4
    assert sum(t > 0 for t in theirs) >= len(CASES) // 5


@pytest.mark.parametrize("mode", ["relevant", "irrelevant"])
def test_equal_to_ragas_collections_noise_sensitivity(mode: str) -> None:
    sample = CASES[:60]
    theirs = ragas_collections(sample, mode)
    mine = ours(sample, mode)
    assert [m.value for m in mine] == pytest.approx(theirs, abs=1e-9)
    assert theirs == pytest.approx(ragas_legacy(sample, mode), abs=1e-9)


# --------------------------------------------------------------------------- edge cases

ABSTAINS = Sample(
    id="abstains",
    question="When did the bridge open?",
    answer="I don't know.",
    reference="The bridge opened in 1932.",
    contexts=[Context(id="c1", text="The bridge opened in 1932. I don't know.")],
)


def test_an_abstention_is_skipped_by_default_and_scored_as_ragas_does_with_compat() -> None:
    # RAGAS scores an abstention like any answer: "I don't know." is not in the reference and
    # occurs in the only context, which is relevant, so RAGAS's relevant mode calls it 1.0.
    for mode in ("relevant", "irrelevant"):
        (skipped,) = ours([ABSTAINS], mode)
        assert skipped.status == "skipped"
        assert skipped.reason is not None
        assert "abstains" in skipped.reason
        (scored,) = ours([ABSTAINS], mode, compat="ragas")
        (theirs,) = ragas_legacy([ABSTAINS], mode)
        assert scored.status == "scored"
        assert scored.value == theirs
    assert ragas_legacy([ABSTAINS], "relevant") == [1.0]  # RAGAS: 1.0 for declining


def test_no_claims_is_a_typed_failure_where_ragas_gives_nan() -> None:
    judge = ScriptedJudge({"answer.analyze": {"claims": [], "questions": [], "noncommittal": True}})
    sample = CASES[0].model_copy(update={"answer": "Hmm."})
    result = evaluate([sample], [NoiseSensitivity()], judge=judge)
    score = result.get(sample.id, "noise_sensitivity")
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.NO_CLAIMS
    assert judge.tasks() == ["answer.analyze"]


@pytest.mark.parametrize("field", ["reference", "contexts"])
@pytest.mark.parametrize("provider", ["llm", "offline"])
def test_missing_reference_or_contexts_is_missing_input(field: str, provider: str) -> None:
    sample = CASES[0].model_copy(update={field: None if field == "reference" else []})
    judge = CountingJudge()
    result = evaluate([sample], [NoiseSensitivity(provider)], judge=judge)
    score = result.get(sample.id, "noise_sensitivity")
    assert score is not None
    assert score.failure is not None
    assert score.failure.kind == FailureKind.MISSING_INPUT
    assert field in score.failure.message
    assert judge.calls == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="mode must be 'relevant' or 'irrelevant'"):
        NoiseSensitivity(mode="noisy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compat must be None or 'ragas'"):
        NoiseSensitivity(compat="deepeval")  # type: ignore[arg-type]


SAMPLE = Sample(
    id="s",
    question="What do we know about the bridge?",
    answer="The bridge opened in 1932. The bridge is painted red.",
    reference="The bridge opened in 1932.",
    contexts=[
        Context(id="d1", text="The bridge opened in 1932."),
        Context(id="d2", text="The bridge is painted red."),
    ],
)
ANALYSIS = {"claims": sentences(SAMPLE.answer or ""), "questions": ["a?", "b?", "c?"]}
ANALYSIS["noncommittal"] = False  # type: ignore[assignment]


def _judged(reference_contexts: list[int], second: list[int]) -> dict[str, Any]:
    return {
        "reference_contexts": reference_contexts,
        "claims": [
            {"reason": "r", "in_reference": True, "contexts": [1]},
            {"reason": "r", "in_reference": False, "contexts": second},
        ],
    }


@pytest.mark.parametrize(
    "bad",
    [
        _judged([3], [2]),  # a context that was never shown
        _judged([1], [0]),  # numbers are 1-based
        {"reference_contexts": [1], "claims": [_judged([1], [2])["claims"][0]]},  # a claim short
    ],
)
def test_a_reply_naming_a_context_not_shown_is_asked_again(bad: dict[str, Any]) -> None:
    judge = ScriptedJudge(
        {"answer.analyze": ANALYSIS, "noise_sensitivity.judge": [bad, _judged([1], [2])]}
    )
    result = evaluate([SAMPLE], [NoiseSensitivity(mode="irrelevant")], judge=judge)
    score = result.get("s", "noise_sensitivity")
    assert score is not None
    assert score.status == "scored", score
    assert judge.tasks().count("noise_sensitivity.judge") == 2
    assert score.value == 0.5  # the second claim: incorrect, backed by noise (context 2) only
    claims = score.details["claims"]
    assert [c["counted"] for c in claims] == [False, True]
    assert claims[1]["context_ids"] == ["d2"]
    assert score.details["contexts"] == [
        {"context": 1, "relevant": True, "id": "d1"},
        {"context": 2, "relevant": False, "id": "d2"},
    ]


def test_the_claims_come_from_the_analysis_faithfulness_shares() -> None:
    judge = CountingJudge()
    result = evaluate([SAMPLE], [Faithfulness(), NoiseSensitivity()], judge=judge)
    assert judge.by_task == {
        "answer.analyze": 1,
        "faithfulness.verify": 1,
        "noise_sensitivity.judge": 1,
    }
    assert result.usage().calls == 3
    assert estimate([SAMPLE], [Faithfulness(), NoiseSensitivity()]).calls == 3
    assert estimate([SAMPLE], [NoiseSensitivity()]).calls == 2
    assert estimate([ABSTAINS], [NoiseSensitivity()]).calls == 0


def test_one_call_whatever_the_number_of_contexts() -> None:
    many = SAMPLE.model_copy(
        update={"contexts": [Context(id=f"d{i}", text=f"Passage {i}.") for i in range(12)]}
    )
    judge = CountingJudge(list_length=3)
    result = evaluate([many], [NoiseSensitivity()], judge=judge)
    assert judge.calls == 2
    score = result.get("s", "noise_sensitivity")
    assert score is not None
    assert score.status == "scored"
    assert score.prompt_version == "answer.analyze@2+noise_sensitivity.judge@1"


def test_registered_lower_is_better_with_both_providers() -> None:
    spec = REGISTRY.measure("noise_sensitivity")
    assert spec.higher_is_better is False
    assert [p.name for p in REGISTRY.providers("noise_sensitivity")] == ["llm", "offline"]
    assert isinstance(resolve("noise_sensitivity"), NoiseSensitivity)
    assert resolve("noise_sensitivity:offline").provider == "offline"
    assert get("noise_sensitivity.judge").version == "1"


# --------------------------------------------------------------------------- offline provider

OFFLINE = Sample(
    id="o",
    question="Tell me about the Eiffel Tower.",
    answer="The Eiffel Tower is in Paris. The Eiffel Tower is 500 metres tall. "
    "The Eiffel Tower was painted by Monet.",
    reference="The Eiffel Tower is in Paris. It is 330 metres tall.",
    contexts=[
        Context(
            id="paris", text="The Eiffel Tower is in Paris, though some say it is 500 metres tall."
        ),
        Context(id="noise", text="Claude Monet painted the Eiffel Tower in spring."),
        Context(id="other", text="The Louvre is a museum."),
    ],
)


@pytest.mark.parametrize(("mode", "value"), [("relevant", 1 / 3), ("irrelevant", 1 / 3)])
def test_offline_decides_the_relations_lexically(mode: str, value: float) -> None:
    result = evaluate([OFFLINE], [NoiseSensitivity("offline", mode=mode)])  # type: ignore[arg-type]
    score = result.get("o", "noise_sensitivity")
    assert score is not None
    assert score.status == "scored", score
    assert score.value == pytest.approx(value)
    details = score.details
    assert [c["relevant"] for c in details["contexts"]] == [True, False, False]
    assert [c["id"] for c in details["contexts"]] == ["paris", "noise", "other"]
    rows = details["claims"]
    assert [r["incorrect"] for r in rows] == [False, True, True]
    assert [r["context_ids"] for r in rows] == [["paris"], ["paris"], ["noise"]]
    assert [r["relevant"] for r in rows] == [True, True, False]
    assert [r["irrelevant"] for r in rows] == [False, False, True]
    assert rows[1]["support"]["reference"] < 0.5 < rows[1]["support"]["contexts"][0]
    assert score.provider == "offline"


def test_offline_skips_an_abstention_and_scores_it_with_compat() -> None:
    (skipped,) = [c.score for c in evaluate([ABSTAINS], [NoiseSensitivity("offline")])]
    assert skipped.status == "skipped"
    scored = evaluate([ABSTAINS], [NoiseSensitivity("offline", compat="ragas")])
    assert scored.get("abstains", "noise_sensitivity").status == "scored"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- sinks

NAME = "noise_sensitivity:offline"
OFFLINE_VALUE = 1 / 3


def test_ragas_sink_scores_it_by_name() -> None:
    from ragas.dataset_schema import SingleTurnSample

    from ragbridge.adapters.ragas import ragbridge_metric

    metric = ragbridge_metric(NAME)
    row = SingleTurnSample(
        user_input=OFFLINE.question,
        response=OFFLINE.answer,
        reference=OFFLINE.reference,
        retrieved_contexts=[c.text for c in OFFLINE.contexts],
    )
    assert asyncio.run(metric.single_turn_ascore(row)) == pytest.approx(OFFLINE_VALUE)


def test_deepeval_sink_scores_it_by_name() -> None:
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from ragbridge.adapters.deepeval import as_deepeval_metric

    metric = as_deepeval_metric(NAME, threshold=0.5)
    case = LLMTestCase(
        input=OFFLINE.question,
        actual_output=OFFLINE.answer,
        expected_output=OFFLINE.reference,
        retrieval_context=[c.text for c in OFFLINE.contexts],
    )
    assert metric.measure(case) == pytest.approx(OFFLINE_VALUE)
    assert metric.success is True  # lower is better: 1/3 is within a 0.5 maximum


def test_llamaindex_sink_scores_it_by_name() -> None:
    pytest.importorskip("llama_index.core")
    from ragbridge.adapters.llamaindex import RagbridgeEvaluator

    evaluator = RagbridgeEvaluator(NAME)
    result = evaluator.evaluate(
        query=OFFLINE.question,
        response=OFFLINE.answer,
        contexts=[c.text for c in OFFLINE.contexts],
        reference=OFFLINE.reference,
    )
    assert result.score == pytest.approx(OFFLINE_VALUE)
    assert result.invalid_result is False


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_TEST_TRACKING", "false")

    def refuse(self: socket.socket, address: Any) -> None:
        raise OSError(f"network disabled in tests: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_langsmith_sink_scores_it_by_name(no_network: None) -> None:
    langsmith = pytest.importorskip("langsmith")
    from langsmith.schemas import Example

    from ragbridge.adapters.langsmith import evaluators, offline_client

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"answer": OFFLINE.answer, "contexts": [c.text for c in OFFLINE.contexts]}

    data = [
        Example(
            id=uuid.UUID(int=1),
            inputs={"question": OFFLINE.question},
            outputs={"reference": OFFLINE.reference},
        )
    ]
    results = langsmith.evaluate(
        target,
        data=data,
        evaluators=evaluators([NAME]),
        upload_results=False,
        client=offline_client(),
    )
    results.wait()
    (row,) = list(results)
    (found,) = row["evaluation_results"]["results"]
    assert found.key == "noise_sensitivity"
    assert found.score == pytest.approx(OFFLINE_VALUE)
