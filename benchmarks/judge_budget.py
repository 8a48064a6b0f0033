"""Judge budget, wall time under a concurrency cap, and fault tolerance of the LLM metrics.

    python benchmarks/judge_budget.py                    # all three sections (a few minutes)
    python benchmarks/judge_budget.py --only budget      # judge calls and prompt tokens per sample
    python benchmarks/judge_budget.py --only chars       # prompt characters, fixed part, ratios
    python benchmarks/judge_budget.py --only wall --samples 100 --sleep 0.2 --cap 16
    python benchmarks/judge_budget.py --only faults --samples 100

Faithfulness + AnswerRelevance + ContextPrecision + ContextRecall (and their RAGAS 0.4.3 and
DeepEval 4.3 counterparts) run on seeded synthetic samples against counting judges that answer
every request with a minimal valid reply. Nothing is sent anywhere: no LLM, no network. Prompt
tokens are estimated as len(prompt) // 4 for every framework (ragbridge's CountingJudge rule).

The characters section also prints the *fixed part* of the prompts: per call kind (ragbridge
task, RAGAS output model, DeepEval schema), the lines that occur identically in every prompt of
that kind across all samples, counted once per call; it is the text a framework pays for on every
sample whatever the sample says.
RAGAS and DeepEval rows are skipped when those packages are not importable.
"""

from __future__ import annotations

import os

# Before any framework import: no telemetry, no .env loading.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import ast
import asyncio
import contextlib
import io
import json
import logging
import math
import random
import re
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ragbridge.core import Context, JudgeEngine, Sample, estimate, evaluate
from ragbridge.core.judging.judge import JudgeReply, JudgeTimeout, Message, RateLimited
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.testing import CountingJudge, HashEmbedder, minimal_instance, task_of

SKIP_RAGAS = "skipped: install ragbridge[ragas]"
SKIP_DEEPEVAL = "skipped: install ragbridge[deepeval]"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def tokens(text: str) -> int:
    """The same estimate as ragbridge's CountingJudge (`ragbridge.core.testing._tokens`)."""
    return max(1, len(text) // 4)


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


# --------------------------------------------------------------------------- synthetic samples

_SYLLABLES = ["var", "nel", "ost", "ria", "kam", "bor", "del", "tin", "sha", "lun", "mer", "quo"]
_KINDS = ["Bridge", "Institute", "Observatory", "Museum", "Railway", "Library", "Foundry", "Dam"]
_CITIES = ["Arleth", "Brenmoor", "Castavel", "Dunmere", "Elsford", "Fenwick", "Galdor", "Harrow"]
_PEOPLE = ["Ada Korrin", "Mila Strand", "Jonas Pell", "Ines Varga", "Tomas Reede", "Lena Osk"]
_DESIGNS = ["cantilevered", "brick-vaulted", "glass-roofed", "octagonal", "terraced", "modular"]
_AWARDS = ["Halvorsen Prize", "Civic Heritage Medal", "Northern Design Award", "Brandt Citation"]


@dataclass
class _Entity:
    name: str
    founded: int
    city: str
    second_city: str
    leader: str
    left: int
    cost: int
    staff: int
    design: str
    award: str
    award_year: int
    expanded: int

    def facts(self) -> list[str]:
        n = self.name
        return [
            f"The {n} was founded in {self.founded} in {self.city}.",
            f"{self.leader} directed the {n} from {self.founded} until {self.left}.",
            f"Building the {n} cost roughly {self.cost} million crowns, twice the first budget.",
            f"The {n} employs about {self.staff} people, most of them in {self.city}.",
            f"Critics praised the {self.design} design of the {n} when it opened.",
            f"In {self.expanded} the {n} opened a second site in {self.second_city}.",
            f"The {n} received the {self.award} in {self.award_year}.",
            f"Visitors to the {n} rose sharply after the {self.second_city} site opened.",
        ]


def _entity(rng: random.Random) -> _Entity:
    name = "".join(rng.sample(_SYLLABLES, 2)).capitalize() + " " + rng.choice(_KINDS)
    founded = rng.randint(1850, 1990)
    city, second = rng.sample(_CITIES, 2)
    return _Entity(
        name=name,
        founded=founded,
        city=city,
        second_city=second,
        leader=rng.choice(_PEOPLE),
        left=founded + rng.randint(5, 30),
        cost=rng.randint(3, 90),
        staff=rng.randint(40, 2400),
        design=rng.choice(_DESIGNS),
        award=rng.choice(_AWARDS),
        award_year=founded + rng.randint(10, 40),
        expanded=founded + rng.randint(8, 45),
    )


def make_samples(n: int, k: int, seed: int = 7) -> list[Sample]:
    """``n`` seeded samples: a question, a 2-4 sentence answer, ``k`` contexts of 2-4 sentences
    (one to three of them about the question's subject, the rest distractors), a reference."""
    rng = random.Random(seed * 1000 + k)
    entities = [_entity(rng) for _ in range(max(n, 8) + 8)]
    samples = []
    for i in range(n):
        subject = entities[i]
        facts = subject.facts()
        question = rng.choice(
            [
                f"When and where was the {subject.name} founded, and who directed it?",
                f"What is the {subject.name} known for, and how did it grow?",
                f"How much did the {subject.name} cost and how many people work there?",
            ]
        )
        answer_facts = rng.sample(facts, rng.randint(2, 4))
        if rng.random() < 0.3:  # an unsupported detail now and then
            answer_facts[-1] = f"The {subject.name} is the oldest of its kind in the region."
        reference = " ".join(rng.sample(facts, rng.randint(2, 3)))
        n_relevant = min(k, rng.randint(1, 3))
        contexts = []
        for j in range(k):
            source = subject if j < n_relevant else rng.choice(entities[n:])
            contexts.append(" ".join(rng.sample(source.facts(), rng.randint(2, 4))))
        rng.shuffle(contexts)
        samples.append(
            Sample(
                id=f"q{i:04d}",
                question=question,
                answer=" ".join(answer_facts),
                contexts=[Context(text=t, id=f"q{i:04d}-d{j}") for j, t in enumerate(contexts)],
                reference=reference,
            )
        )
    return samples


# --------------------------------------------------------------------------- counting


@dataclass
class Meter:
    """Calls, prompt tokens and calls in flight, shared by sync and async paths."""

    sleep: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    prompts: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def enter(self, prompt: str, kind: str) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += tokens(prompt)
            self.prompts.append((kind, prompt))
            self.by_kind[kind] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


@dataclass
class Row:
    framework: str
    contexts: int | str = ""
    samples: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    wall: float = 0.0
    max_in_flight: int = 0
    note: str = ""
    skipped: str | None = None
    chars: int = 0
    fixed_chars: int = 0

    @property
    def calls_per_sample(self) -> float:
        return self.calls / self.samples if self.samples else 0.0

    @property
    def chars_per_sample(self) -> float:
        return self.chars / self.samples if self.samples else 0.0

    @property
    def fixed_per_sample(self) -> float:
        return self.fixed_chars / self.samples if self.samples else 0.0

    @property
    def tokens_per_sample(self) -> float:
        return self.prompt_tokens / self.samples if self.samples else 0.0


def fixed_chars(prompts: Sequence[tuple[str, str]]) -> int:
    """Characters of the lines shared by every prompt of the same kind, summed over all calls.

    A line counts as fixed when it occurs (as many times) in every prompt of its kind, across
    all samples: instructions, schemas, headers and delimiters that do not depend on the data.
    Needs at least two samples to mean anything (with one, every line is "shared").
    """
    by_kind: dict[str, list[str]] = {}
    for kind, text in prompts:
        by_kind.setdefault(kind, []).append(text)
    total = 0
    for texts in by_kind.values():
        common = Counter(texts[0].split("\n"))
        for text in texts[1:]:
            common &= Counter(text.split("\n"))
        per_call = sum((len(line) + 1) * n for line, n in common.items())
        total += per_call * len(texts)
    return total


@dataclass
class RecordingJudge(CountingJudge):
    """CountingJudge that also keeps every prompt (all messages joined), kind = task id."""

    prompts: list[tuple[str, str]] = field(default_factory=list)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        text = "\n".join(m.get("content", "") for m in messages)
        self.prompts.append((task_of(messages) or "?", text))
        return await super().generate(messages, schema=schema)


def metrics_ragbridge() -> list[Any]:
    from ragbridge.core.metrics import (
        AnswerRelevance,
        ContextPrecision,
        ContextRecall,
        Faithfulness,
    )

    return [Faithfulness(), AnswerRelevance(), ContextPrecision(), ContextRecall()]


def cell_summary(evaluation: Any) -> str:
    status = Counter()
    kinds = Counter()
    for row in evaluation:
        status[row.score.status] += 1
        if row.score.failure is not None:
            kinds[f"{row.metric}:{row.score.failure.kind.value}"] += 1
    text = f"{status['scored']} scored, {status['failed']} failed"
    if kinds:
        text += " (" + ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())) + ")"
    return text


# --------------------------------------------------------------------------- ragbridge


def run_ragbridge(samples: list[Sample], *, sleep: float = 0.0, cap: int = 16) -> Row:
    judge = RecordingJudge(delay=sleep)
    metrics = metrics_ragbridge()
    started = time.perf_counter()
    evaluation = evaluate(
        samples,
        metrics,
        judge=judge,
        embedder=HashEmbedder(),
        cache=None,
        max_concurrency=cap,
    )
    wall = time.perf_counter() - started
    usage = evaluation.usage()
    planned = estimate(samples, metrics_ragbridge())
    same = usage.calls == judge.calls and usage.prompt_tokens == judge.prompt_tokens
    n = len(samples)
    note = (
        f"estimate(): {planned.calls_per_sample:.2f} calls, {planned.prompt_tokens / n:,.0f} tok; "
        f"usage() {usage.calls / n:.2f} calls, {usage.prompt_tokens / n:,.0f} tok"
        f"{'' if same else ' (DIFFERS from the judge counter)'}; {cell_summary(evaluation)}"
    )
    return Row(
        "ragbridge",
        len(samples[0].contexts),
        len(samples),
        judge.calls,
        judge.prompt_tokens,
        wall,
        judge.max_in_flight,
        note,
        chars=sum(len(text) for _, text in judge.prompts),
        fixed_chars=fixed_chars(judge.prompts),
    )


# --------------------------------------------------------------------------- RAGAS


def _json_schema_in(prompt: str) -> dict[str, Any] | None:
    marker = "as specified in JSON Schema:\n"
    at = prompt.rfind(marker)
    if at == -1:
        return None
    schema, _ = json.JSONDecoder().raw_decode(prompt, at + len(marker))
    return schema


def _input_in(prompt: str) -> dict[str, Any]:
    at = prompt.rfind("\ninput: ")
    if at == -1:
        return {}
    try:
        data, _ = json.JSONDecoder().raw_decode(prompt, at + len("\ninput: "))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def minimal_from_json_schema(schema: dict[str, Any], sizes: dict[str, int]) -> Any:
    """A minimal value valid against a (pydantic-generated) JSON Schema; arrays named in
    ``sizes`` get that many items, others one."""
    defs = schema.get("$defs", {})

    def build(node: dict[str, Any], name: str | None) -> Any:
        if "$ref" in node:
            return build(defs[node["$ref"].rsplit("/", 1)[-1]], name)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return node["enum"][0]
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = node[key]
                if any(o.get("type") == "null" for o in options):
                    return None
                return build(options[0], name)
        if "allOf" in node:
            return build(node["allOf"][0], name)
        kind = node.get("type", "object")
        if kind == "object":
            props = node.get("properties", {})
            wanted = node.get("required", list(props))
            return {p: build(props[p], p) for p in wanted}
        if kind == "array":
            return [build(node.get("items", {}), None) for _ in range(sizes.get(name or "", 1))]
        return {"string": "x", "integer": 0, "number": 0.0, "boolean": False, "null": None}[kind]

    return build(schema, None)


def ragas_reply(prompt: str) -> str:
    """Minimal valid JSON for the schema RAGAS states in the prompt, sized to its input:
    one verdict per statement given (faithfulness), one classification per reference sentence
    (context recall), one item for lists the judge would extract itself."""
    schema = _json_schema_in(prompt)
    if schema is None:
        return "{}"
    data = _input_in(prompt)
    sizes = {k: len(v) for k, v in data.items() if isinstance(v, list)}
    if isinstance(data.get("answer"), str) and "classifications" in schema.get("properties", {}):
        sizes["classifications"] = len(sentences(data["answer"])) or 1
    return json.dumps(minimal_from_json_schema(schema, sizes))


_RAGAS_TASKS = {
    "StatementGeneratorOutput": "faithfulness",
    "NLIStatementOutput": "faithfulness",
    "ResponseRelevanceOutput": "answer_relevancy (n=3 in 1 request)",
    "Verification": "context_precision",
    "ContextRecallClassifications": "context_recall",
}


def run_ragas(
    samples: list[Sample], *, sleep: float = 0.0, cap: int = 16
) -> tuple[Row, dict[str, int]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langchain_core.outputs import Generation, LLMResult
            from ragas import EvaluationDataset, RunConfig
            from ragas import evaluate as ragas_evaluate
            from ragas.embeddings import BaseRagasEmbeddings
            from ragas.llms import BaseRagasLLM
            from ragas.metrics import (
                AnswerRelevancy,
                ContextPrecision,
                ContextRecall,
                Faithfulness,
            )
    except Exception as exc:  # ImportError, or a broken install (see INTEGRATION_NOTES)
        return Row("ragas 0.4.3", skipped=f"{SKIP_RAGAS} ({type(exc).__name__})"), {}

    meter = Meter(sleep=sleep)

    class CountingRagasLLM(BaseRagasLLM):
        """Answers every RAGAS prompt with minimal valid JSON; one request = one call (n
        completions of one request share its prompt, as with an OpenAI ``n`` request)."""

        def _result(self, prompt: Any, n: int) -> LLMResult:
            text = ragas_reply(prompt.to_string())
            return LLMResult(generations=[[Generation(text=text) for _ in range(n)]])

        def _kind(self, text: str, n: int) -> str:
            schema = _json_schema_in(text) or {}
            return f"{schema.get('title', '?')} n={n}"

        def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            text = prompt.to_string()
            meter.enter(text, self._kind(text, n))
            try:
                if meter.sleep:
                    time.sleep(meter.sleep)
                return self._result(prompt, n)
            finally:
                meter.leave()

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            text = prompt.to_string()
            meter.enter(text, self._kind(text, n))
            try:
                if meter.sleep:
                    await asyncio.sleep(meter.sleep)
                return self._result(prompt, n)
            finally:
                meter.leave()

        def is_finished(self, response: LLMResult) -> bool:
            return True

    class HashRagasEmbeddings(BaseRagasEmbeddings):
        def __init__(self) -> None:
            super().__init__()
            self._hash = HashEmbedder()

        def embed_query(self, text: str) -> list[float]:
            return self._hash._vector(text)

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [self._hash._vector(t) for t in texts]

        async def aembed_query(self, text: str) -> list[float]:
            return self.embed_query(text)

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.embed_documents(texts)

    dataset = EvaluationDataset.from_list(
        [
            {
                "user_input": s.question,
                "response": s.answer,
                "retrieved_contexts": [c.text for c in s.contexts],
                "reference": s.reference,
            }
            for s in samples
        ]
    )
    # Fresh instances of the legacy metrics behind ragas.metrics.faithfulness, answer_relevancy,
    # context_precision, context_recall (the module singletons keep the llm of the first run).
    metrics = [
        Faithfulness(),
        AnswerRelevancy(),
        ContextPrecision(),
        ContextRecall(),
    ]
    started = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        result = ragas_evaluate(
            dataset,
            metrics=metrics,
            llm=CountingRagasLLM(),
            embeddings=HashRagasEmbeddings(),
            run_config=RunConfig(max_workers=cap, timeout=600),
            show_progress=False,
            raise_exceptions=False,
        )
    wall = time.perf_counter() - started
    frame = result.to_pandas()
    names = [m.name for m in metrics]
    nan = int(frame[names].isna().sum().sum())
    per_metric = Counter()
    for kind, count in meter.by_kind.items():
        per_metric[_RAGAS_TASKS.get(kind.split()[0], kind)] += count
    note = f"{nan} NaN of {len(samples) * len(names)} cells; calls: " + ", ".join(
        f"{k} {v / len(samples):g}" for k, v in per_metric.items()
    )
    row = Row(
        "ragas 0.4.3",
        len(samples[0].contexts),
        len(samples),
        meter.calls,
        meter.prompt_tokens,
        wall,
        meter.max_in_flight,
        note,
        chars=sum(len(text) for _, text in meter.prompts),
        fixed_chars=fixed_chars(meter.prompts),
    )
    return row, dict(meter.by_kind)


# --------------------------------------------------------------------------- DeepEval


def deepeval_list_size(prompt: str) -> int:
    """How many verdicts a DeepEval prompt asks for: one per retrieved document (contextual
    precision), claim (faithfulness), statement (answer relevancy) or expected-output
    sentence (contextual recall)."""
    docs = re.search(r"Retrieval Context\s*\((\d+) documents?\)", prompt)
    if docs:
        return int(docs.group(1))
    for header in ("Claims:", "Statements:"):
        found = re.search(re.escape(header) + r"\s*\n(\[.*?\])\s*\n\s*JSON:", prompt, re.DOTALL)
        if found:
            try:
                return max(1, len(ast.literal_eval(found.group(1))))
            except (ValueError, SyntaxError):
                return 1
    expected = re.search(r"Expected Output:\s*\n(.*?)\n\s*\nRetrieval Context:", prompt, re.DOTALL)
    if expected:
        return max(1, len(sentences(expected.group(1))))
    return 1


def run_deepeval(
    samples: list[Sample], *, include_reason: bool, sleep: float = 0.0, cap: int = 16
) -> Row:
    label = "deepeval 4.3" + ("" if include_reason else " (no reason)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import deepeval
            from deepeval.evaluate.configs import (
                AsyncConfig,
                CacheConfig,
                DisplayConfig,
                ErrorConfig,
            )
            from deepeval.metrics import (
                AnswerRelevancyMetric,
                ContextualPrecisionMetric,
                ContextualRecallMetric,
                FaithfulnessMetric,
            )
            from deepeval.models import DeepEvalBaseLLM
            from deepeval.test_case import LLMTestCase
    except Exception as exc:
        return Row(label, skipped=f"{SKIP_DEEPEVAL} ({type(exc).__name__})")

    meter = Meter(sleep=sleep)

    class CountingDeepEvalLLM(DeepEvalBaseLLM):
        def __init__(self) -> None:
            super().__init__("counting-judge")

        def load_model(self) -> Any:
            return self

        def get_model_name(self) -> str:
            return "counting-judge"

        def _reply(self, prompt: str, schema: type[BaseModel] | None) -> Any:
            if schema is None:
                return "{}"
            try:
                return minimal_instance(schema, deepeval_list_size(prompt))
            except TypeError as exc:  # DeepEval swallows TypeError: make it visible
                raise RuntimeError(f"minimal_instance failed: {exc}") from exc

        def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
            meter.enter(str(prompt), getattr(schema, "__name__", "text"))
            try:
                if meter.sleep:
                    time.sleep(meter.sleep)
                return self._reply(str(prompt), schema)
            finally:
                meter.leave()

        async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
            meter.enter(str(prompt), getattr(schema, "__name__", "text"))
            try:
                if meter.sleep:
                    await asyncio.sleep(meter.sleep)
                return self._reply(str(prompt), schema)
            finally:
                meter.leave()

    judge = CountingDeepEvalLLM()
    options = {"model": judge, "include_reason": include_reason, "async_mode": True}
    metrics = [
        FaithfulnessMetric(**options),
        AnswerRelevancyMetric(**options),
        ContextualPrecisionMetric(**options),
        ContextualRecallMetric(**options),
    ]
    cases = [
        LLMTestCase(
            input=s.question,
            actual_output=s.answer,
            expected_output=s.reference,
            retrieval_context=[c.text for c in s.contexts],
        )
        for s in samples
    ]
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:  # DeepEval writes ./.deepeval/
        os.chdir(scratch)
        try:
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = deepeval.evaluate(
                    cases,
                    metrics,
                    async_config=AsyncConfig(run_async=True, max_concurrent=cap),
                    display_config=DisplayConfig(show_indicator=False, print_results=False),
                    cache_config=CacheConfig(write_cache=False, use_cache=False),
                    error_config=ErrorConfig(ignore_errors=True),
                )
            wall = time.perf_counter() - started
        finally:
            os.chdir(here)
    errors = sum(
        1
        for tr in result.test_results
        for md in tr.metrics_data or []
        if md.error is not None or md.score is None
    )
    groups = Counter()
    for kind, count in meter.by_kind.items():
        group = (
            "reason"
            if kind.endswith("ScoreReason")
            else "verdicts"
            if kind == "Verdicts"
            else "extraction"
        )
        groups[group] += count
    note = f"{errors} errored cells; calls: " + ", ".join(
        f"{k} {groups[k] / len(samples):g}"
        for k in ("extraction", "verdicts", "reason")
        if groups[k]
    )
    return Row(
        label,
        len(samples[0].contexts),
        len(samples),
        meter.calls,
        meter.prompt_tokens,
        wall,
        meter.max_in_flight,
        note,
        chars=sum(len(text) for _, text in meter.prompts),
        fixed_chars=fixed_chars(meter.prompts),
    )


# --------------------------------------------------------------------------- fault injection

_BLOCK = re.compile(r"<<<BEGIN (?P<label>[A-Z]+) (?P<n>\d+)>>>")


@dataclass
class ConversationCountingJudge:
    """CountingJudge's minimal replies, with the numbered blocks counted over the whole
    conversation instead of the last message only, so a repair re-ask (whose last message
    holds no blocks) is answered with lists of the same sizes as the first ask."""

    model: str = "conversation-counting-judge"
    calls: int = 0

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        asked = "\n".join(m.get("content", "") for m in messages if m.get("role") != "assistant")
        blocks = {(b["label"], b["n"]) for b in _BLOCK.finditer(asked)}
        counts = dict(Counter(label for label, _ in blocks))
        length = max(counts.values(), default=1)
        text = (
            "ok" if schema is None else minimal_instance(schema, length, counts).model_dump_json()
        )
        prompt = sum(tokens(m.get("content", "")) for m in messages)
        return JudgeReply(
            text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=tokens(text))
        )


@dataclass
class FaultyJudge:
    """Fails ``rate`` of calls (seeded): JudgeTimeout, RateLimited, "not json", or the valid
    reply cut in half."""

    inner: Any
    rate: float = 0.3
    seed: int = 0
    model: str = "faulty-judge"
    injected: Counter[str] = field(default_factory=Counter)
    on_repair: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        fault = None
        if self._rng.random() < self.rate:
            fault = self._rng.choice(["timeout", "rate_limited", "malformed", "truncated"])
            self.injected[fault] += 1
            if any(m.get("role") == "assistant" for m in messages):
                self.on_repair[fault] += 1
        if fault == "timeout":
            raise JudgeTimeout("injected timeout")
        if fault == "rate_limited":
            raise RateLimited("injected rate limit")
        reply = await self.inner.generate(messages, schema=schema)
        if fault == "malformed":
            return JudgeReply(text="not json", usage=reply.usage)
        if fault == "truncated":
            return JudgeReply(text=reply.text[: len(reply.text) // 2], usage=reply.usage)
        return reply


async def _no_sleep(_: float) -> None:
    return None


def run_faults(samples: list[Sample], *, seed: int, cap: int) -> list[str]:
    lines: list[str] = []

    def run(judge: Any) -> Any:
        return evaluate(samples, metrics_ragbridge(), judge=judge, embedder=HashEmbedder())

    clean = run(JudgeEngine(ConversationCountingJudge(), max_concurrency=cap))
    clean_values = {(r.sample_id, r.metric): r.score.value for r in clean}
    lines.append(f"fault-free run: {cell_summary(clean)}")
    configs = [
        ("retries on (max_retries=6, repair=True)", ConversationCountingJudge, True),
        ("retries off (max_retries=0, repair=False)", ConversationCountingJudge, False),
        ("retries on, inner judge = plain CountingJudge", CountingJudge, True),
    ]
    for label, inner, retries in configs:
        faulty = FaultyJudge(inner(), rate=0.3, seed=seed)
        options = (
            {"max_retries": 6, "repair": True} if retries else {"max_retries": 0, "repair": False}
        )
        engine = JudgeEngine(
            faulty, max_concurrency=cap, backoff_base=0.0, sleep=_no_sleep, seed=seed, **options
        )
        cells = list(run(engine))
        nan = sum(1 for r in cells if r.score.value is not None and math.isnan(r.score.value))
        scored = [r for r in cells if r.score.status == "scored"]
        differ = [r for r in scored if r.score.value != clean_values[(r.sample_id, r.metric)]]
        unscored = [r for r in cells if r.score.status != "scored"]
        untyped = [
            r for r in unscored if r.score.failure is None or not r.score.failure.message.strip()
        ]
        by_kind = Counter(r.score.failure.kind.value for r in unscored if r.score.failure)
        stats = engine.stats
        lines.append(f"{label}:")
        lines.append(
            "  injected "
            + ", ".join(f"{k} x{v}" for k, v in sorted(faulty.injected.items()))
            + f"; engine sent {stats.calls} calls, {stats.retries} retries, "
            f"{stats.failures} calls failed, max in flight {stats.max_in_flight}"
        )
        if faulty.on_repair:
            bad = faulty.on_repair["malformed"] + faulty.on_repair["truncated"]
            lines.append(
                f"  {sum(faulty.on_repair.values())} faults hit a repair re-ask, {bad} of them "
                "malformed/truncated (a bad repair leads to a fresh attempt while retries last)"
            )
        lines.append(
            f"  {len(scored)}/{len(cells)} cells scored, {len(differ)} differ from the "
            f"fault-free value, {nan} NaN; {len(unscored)} unscored, {len(untyped)} of them "
            "without a typed failure and message"
        )
        if by_kind:
            per_metric = Counter(r.metric for r in unscored)
            lines.append(
                "  failed by kind: "
                + ", ".join(f"{k} x{v}" for k, v in sorted(by_kind.items()))
                + "  (by metric: "
                + ", ".join(f"{k} x{v}" for k, v in sorted(per_metric.items()))
                + ")"
            )
        examples: dict[str, str] = {}
        for r in unscored:
            if r.score.failure is not None:
                message = r.score.failure.message
                key = "misaligned" if "verdicts (one per" in message else r.score.failure.kind.value
                examples.setdefault(key, f"{r.metric}: {message}")
        for key, message in sorted(examples.items()):
            lines.append(f"  e.g. {key}: {message[:120]}")
        for r in differ[:3]:
            lines.append(
                f"  DIFFERS {r.sample_id}/{r.metric}: {r.score.value} vs "
                f"{clean_values[(r.sample_id, r.metric)]}"
            )
    return lines


# --------------------------------------------------------------------------- output


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def command(args: argparse.Namespace, only: str) -> str:
    parts = [f"python benchmarks/judge_budget.py --only {only} --seed {args.seed}"]
    if only in {"budget", "chars"}:
        parts.append(f"--budget-samples {args.budget_samples}")
    if only == "chars":
        parts.append(f"--ks {','.join(str(k) for k in args.ks)}")
    if only in {"wall", "faults"}:
        parts.append(f"--samples {args.samples} --cap {args.cap}")
    if only == "wall":
        parts.append(f"--sleep {args.sleep} --contexts {args.contexts}")
    return " ".join(parts)


def section_budget(args: argparse.Namespace) -> None:
    print(f"\n## 1. Judge calls and prompt tokens per sample\n# {command(args, 'budget')}")
    rows: list[Row] = []
    for k in (3, 10):
        samples = make_samples(args.budget_samples, k, args.seed)
        rows.append(run_ragbridge(samples))
        rows.append(run_ragas(samples)[0])
        rows.append(run_deepeval(samples, include_reason=True))
        rows.append(run_deepeval(samples, include_reason=False))
    table = [
        [r.framework, str(r.contexts), "-", "-", r.skipped]
        if r.skipped
        else [
            r.framework,
            str(r.contexts),
            f"{r.calls_per_sample:.2f}",
            f"{r.tokens_per_sample:,.0f}",
            r.note,
        ]
        for r in rows
    ]
    print_table(
        ["framework", "contexts", "judge calls/sample", "prompt tokens/sample", "notes"], table
    )
    ours = [r for r in rows if r.framework == "ragbridge"]
    ragas = {r.contexts: r for r in rows if r.framework.startswith("ragas") and not r.skipped}
    checks = [
        f"ragbridge <= 4 calls/sample at every k: {all(r.calls_per_sample <= 4 for r in ours)}"
    ]
    if ragas:
        fewer = all(r.prompt_tokens < ragas[r.contexts].prompt_tokens for r in ours)
        checks.append(f"fewer prompt tokens than RAGAS at every k: {fewer}")
    print("# " + "; ".join(checks))


def section_chars(args: argparse.Namespace) -> None:
    print(
        f"\n## 1b. Prompt characters per sample, and the fixed part (text identical for every "
        f"sample)\n# {command(args, 'chars')}"
    )
    table: list[list[str]] = []
    verdicts: list[str] = []
    for k in args.ks:
        samples = make_samples(args.budget_samples, k, args.seed)
        ours = run_ragbridge(samples)
        ragas = run_ragas(samples)[0]
        deep = run_deepeval(samples, include_reason=True)
        quiet = run_deepeval(samples, include_reason=False)
        others = [r for r in (ragas, deep) if not r.skipped]
        cheaper = min(others, key=lambda r: r.chars) if others else None
        for r in (ours, ragas, deep, quiet):
            if r.skipped:
                table.append([r.framework, str(k), "-", "-", "-", r.skipped])
                continue
            ratio = f"{r.chars / cheaper.chars:.2f}x" if cheaper else "-"
            table.append(
                [
                    r.framework,
                    str(k),
                    f"{r.chars_per_sample:,.0f}",
                    f"{r.fixed_per_sample:,.0f}",
                    ratio,
                    f"{r.calls_per_sample:.2f} calls/sample",
                ]
            )
        if cheaper is not None:
            ratio = ours.chars / cheaper.chars
            verdicts.append(
                f"k={k}: {ratio:.2f}x {cheaper.framework} ({'ok' if ratio <= 0.5 else 'OVER'})"
            )
        verdicts.append(
            f"k={k}: ragbridge fixed part {ours.fixed_per_sample:,.0f} chars "
            f"({'ok' if ours.fixed_per_sample <= 4000 else 'OVER'} vs 4,000)"
        )
    print_table(
        [
            "framework",
            "contexts",
            "prompt chars/sample",
            "fixed chars/sample",
            "vs cheaper of RAGAS/DeepEval",
            "notes",
        ],
        table,
    )
    print("# targets: ragbridge <= 0.5x the cheaper of RAGAS and DeepEval (include_reason=True)")
    for line in verdicts:
        print(f"#   {line}")


def section_wall(args: argparse.Namespace) -> None:
    print(
        f"\n## 2. Wall time, {args.samples} samples x 4 metrics, judge sleeping "
        f"{args.sleep * 1000:.0f} ms per call, cap {args.cap}\n# {command(args, 'wall')}"
    )
    samples = make_samples(args.samples, args.contexts, args.seed)
    rows = [
        run_ragbridge(samples, sleep=args.sleep, cap=args.cap),
        run_ragas(samples, sleep=args.sleep, cap=args.cap)[0],
        run_deepeval(samples, include_reason=True, sleep=args.sleep, cap=args.cap),
    ]
    table = [
        [r.framework, "-", "-", "-", r.skipped]
        if r.skipped
        else [
            r.framework,
            f"{r.wall:.1f}",
            str(r.calls),
            str(r.max_in_flight),
            f"ideal {math.ceil(r.calls / args.cap) * args.sleep:.1f} s at cap {args.cap}",
        ]
        for r in rows
    ]
    print_table(["framework", "wall s", "judge calls", "max in flight", "notes"], table)
    ours = rows[0]
    print(
        f"# ragbridge max in flight {ours.max_in_flight} <= cap {args.cap}: "
        f"{ours.max_in_flight <= args.cap}"
    )


def section_faults(args: argparse.Namespace) -> None:
    print(
        f"\n## 3. Fault injection (ragbridge), {args.samples} samples x 4 metrics, 30% of judge "
        f"calls fail\n# {command(args, 'faults')}"
    )
    for line in run_faults(
        make_samples(args.samples, args.contexts, args.seed), seed=args.seed, cap=args.cap
    ):
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["budget", "chars", "wall", "faults"])
    parser.add_argument("--samples", type=int, default=100, help="samples for wall and faults")
    parser.add_argument("--budget-samples", type=int, default=20)
    parser.add_argument(
        "--contexts", type=int, default=3, help="contexts per sample (wall, faults)"
    )
    parser.add_argument("--sleep", type=float, default=0.2, help="judge latency in seconds")
    parser.add_argument("--cap", type=int, default=16, help="concurrency cap for every framework")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--ks",
        type=lambda text: [int(k) for k in text.split(",")],
        default=[1, 3, 10, 20],
        help="contexts per sample for the characters section, comma-separated",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} cores; {versions()}")
    if args.only in (None, "budget"):
        section_budget(args)
    if args.only in (None, "chars"):
        section_chars(args)
    if args.only in (None, "wall"):
        section_wall(args)
    if args.only in (None, "faults"):
        section_faults(args)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("ragbridge", "ragas", "deepeval"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} absent")
    return ", ".join(out)


if __name__ == "__main__":
    main()
