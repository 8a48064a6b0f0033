"""What judging an agent's trajectory costs: judge calls and prompt characters per trajectory,
ragbridge's goal_accuracy + task_completion next to DeepEval's ``TaskCompletionMetric`` and RAGAS's
``AgentGoalAccuracyWithReference`` / ``WithoutReference``, on the same trajectories and the same
counting judge.

    python benchmarks/agent_cost.py                    # both sections (a few seconds)
    python benchmarks/agent_cost.py --only goal --trajectories 5

Sections (issue 32's cost figures; no LLM, no network):

* ``goal`` — ragbridge's ``goal_accuracy`` and ``task_completion`` (one shared ``agent.goal``
  call per trajectory for both), with and without a reference outcome; DeepEval 4.3's
  ``TaskCompletionMetric`` (with and without ``include_reason``) on ``LLMTestCase(input,
  actual_output, tools_called)``; RAGAS 0.4's ``AgentGoalAccuracyWithReference`` and
  ``WithoutReference``, both the metric ``ragas.evaluate`` runs (``multi_turn_ascore`` on a
  ``MultiTurnSample``) and the ``ragas.metrics.collections`` one (``ascore``). Goal: 1 call per
  trajectory for both measures.
* ``steps`` — ragbridge's four retrieval-step measures (step_query_relevance,
  step_context_relevance, steps_to_relevant, redundant_retrievals): no peer defines them; the
  figure is their cost (2 calls per trajectory: the queries, and every step's contexts).

The trajectories are made up, seeded: ``--trajectories`` (20) agents answering a two-hop question
("where was the director of <film> born, and how old were they when it came out?"), each with two
retriever tool calls of ``--contexts`` (3) passages and a calculator call. Every framework gets a
fresh `CountingJudge` (through `DeepEvalJudge` for DeepEval, `RagasJudge` for RAGAS), which
answers each request with a minimal valid reply for the schema asked, and is shown the same
question, tool calls, tool outputs and final answer. Characters are the sum of ``len(content)``
over a request's messages. The dry-run ``estimate`` is printed next to the counted calls.
"""

from __future__ import annotations

import os

# Before any framework import: no telemetry, no .env loading.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import asyncio
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conversation_cost import quiet

from ragbridge.core import Sample, estimate, evaluate
from ragbridge.core.testing import CountingJudge, HashEmbedder
from ragbridge.core.trajectory import Step

SECTIONS = ("goal", "steps")
GOAL_METRICS = ("goal_accuracy", "task_completion")
STEP_METRICS = (
    "step_query_relevance",
    "step_context_relevance",
    "steps_to_relevant",
    "redundant_retrievals",
)

_FILMS = ("Inception", "Heat", "Alien", "Fargo", "Vertigo", "Amélie", "Roma", "Parasite")
_FIRST = ("Ana", "Bruno", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiro")
_LAST = ("Moreau", "Okafor", "Lindqvist", "Tanaka", "Rossi", "Novak", "Haddad", "Ibarra")
_CITIES = ("Lyon", "Lagos", "Uppsala", "Osaka", "Turin", "Brno", "Beirut", "Bilbao")


def _passages(rng: random.Random, subject: str, fact: str, count: int) -> list[str]:
    """``count`` passages about ``subject``, the first holding ``fact``."""
    filler = (
        f"{subject} has been discussed in {rng.randint(3, 90)} reviews since its release.",
        f"Critics compared {subject} to {rng.randint(2, 9)} earlier works of the decade.",
        f"A restored print of {subject} toured {rng.randint(4, 30)} cities last year.",
        f"{subject} was the subject of a retrospective lasting {rng.randint(2, 8)} weeks.",
    )
    return [fact, *rng.sample(filler, k=min(count - 1, len(filler)))][:count]


def make_trajectories(count: int = 20, contexts: int = 3, *, seed: int = 32) -> list[Sample]:
    """``count`` seeded agent samples: two searches (``contexts`` passages each) and a calculator
    call, a final answer and a reference outcome."""
    rng = random.Random(seed)
    out: list[Sample] = []
    for i in range(count):
        film = _FILMS[i % len(_FILMS)]
        director = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        city = rng.choice(_CITIES)
        born, released = rng.randint(1940, 1975), rng.randint(1985, 2015)
        first = _passages(rng, film, f"{film} ({released}) was directed by {director}.", contexts)
        second = _passages(rng, director, f"{director} was born in {city} in {born}.", contexts)
        age = released - born
        steps = [
            Step(
                name="search_films",
                args={"query": f"{film} director"},
                output="\n".join(first),
                contexts=first,
            ),
            Step(
                name="search_people",
                args={"query": f"{director} birthplace"},
                output="\n".join(second),
                contexts=second,
            ),
            Step(name="calculator", args={"expression": f"{released} - {born}"}, output=str(age)),
        ]
        out.append(
            Sample(
                id=f"agent-{i:02d}",
                question=(
                    f"Where was the director of {film} born, and how old were they when it "
                    "came out?"
                ),
                answer=f"{director} was born in {city} and was {age} when {film} came out.",
                reference=f"The director, {director}, was born in {city} and was {age}.",
                contexts=[*first, *second],
                trajectory=steps,
            )
        )
    return out


def without_reference(samples: Sequence[Sample]) -> list[Sample]:
    return [s.model_copy(update={"reference": None}) for s in samples]


# --------------------------------------------------------------------------- runs


@dataclass
class Cost:
    label: str
    calls: int
    chars: int
    trajectories: int

    def row(self) -> str:
        n = self.trajectories
        return f"  {self.label:<62}{self.calls / n:>12.2f}{self.chars / n:>13,.0f}"


HEADER = f"  {'setting':<62}{'calls/traj':>12}{'chars/traj':>13}"


def run_ours(samples: Sequence[Sample], metrics: Sequence[str]) -> CountingJudge:
    judge = CountingJudge()
    evaluate(samples, metrics, judge=judge, embedder=HashEmbedder())
    return judge


def run_deepeval(samples: Sequence[Sample], *, include_reason: bool) -> CountingJudge:
    """DeepEval's own ``TaskCompletionMetric`` on the same trajectories as ``tools_called``."""
    from deepeval.metrics import TaskCompletionMetric
    from deepeval.test_case import LLMTestCase, ToolCall

    from ragbridge.adapters.deepeval.models import DeepEvalJudge

    judge = CountingJudge()
    model = DeepEvalJudge(judge)

    async def every() -> None:
        for sample in samples:
            case = LLMTestCase(
                input=sample.question,
                actual_output=sample.answer or "",
                tools_called=[
                    ToolCall(name=s.name, input_parameters=dict(s.args), output=s.output)
                    for s in sample.trajectory or []
                ],
            )
            metric = TaskCompletionMetric(
                model=model, include_reason=include_reason, async_mode=True
            )
            await metric.a_measure(case, _show_indicator=False)

    with quiet():
        asyncio.run(every())
    return judge


def ragas_messages(sample: Sample) -> list[Any]:
    """The trajectory as RAGAS's messages: the question, then per step the assistant's tool
    call and the tool's output, then the answer."""
    from ragas.messages import AIMessage, HumanMessage, ToolMessage
    from ragas.messages import ToolCall as RagasToolCall

    messages: list[Any] = [HumanMessage(content=sample.question)]
    for step in sample.trajectory or []:
        messages.append(
            AIMessage(content="", tool_calls=[RagasToolCall(name=step.name, args=dict(step.args))])
        )
        messages.append(ToolMessage(content=step.output or ""))
    messages.append(AIMessage(content=sample.answer or ""))
    return messages


def run_ragas(samples: Sequence[Sample], *, reference: bool, collections: bool) -> CountingJudge:
    """RAGAS's ``AgentGoalAccuracyWith(out)Reference``: the ``ragas.evaluate`` metric
    (``multi_turn_ascore``) or the ``ragas.metrics.collections`` one (``ascore``)."""
    from ragbridge.adapters.ragas.models import RagasJudge

    judge = CountingJudge()
    llm = RagasJudge(judge)

    async def every() -> None:
        for sample in samples:
            messages = ragas_messages(sample)
            if collections:
                from ragas.metrics import collections as modern

                if reference:
                    metric: Any = modern.AgentGoalAccuracyWithReference(llm=llm.for_collections())
                    await metric.ascore(user_input=messages, reference=sample.reference or "")
                else:
                    metric = modern.AgentGoalAccuracyWithoutReference(llm=llm.for_collections())
                    await metric.ascore(user_input=messages)
            else:
                from ragas.dataset_schema import MultiTurnSample
                from ragas.metrics._goal_accuracy import (
                    AgentGoalAccuracyWithoutReference,
                    AgentGoalAccuracyWithReference,
                )

                row = MultiTurnSample(
                    user_input=messages, reference=sample.reference if reference else None
                )
                legacy = (
                    AgentGoalAccuracyWithReference(llm=llm)
                    if reference
                    else AgentGoalAccuracyWithoutReference(llm=llm)
                )
                await legacy.multi_turn_ascore(row)

    with quiet():
        asyncio.run(every())
    return judge


def _peer(label: str, run: Callable[[], CountingJudge], n: int) -> Cost | None:
    try:
        judge = run()
    except ImportError as exc:
        print(f"  {label}: skipped ({exc.name} is not installed)")
        return None
    return Cost(label, judge.calls, judge.prompt_chars, n)


# --------------------------------------------------------------------------- sections


def section_goal(samples: Sequence[Sample]) -> None:
    n = len(samples)
    bare = without_reference(samples)
    print(f"\n(a) goal and task completion: {n} trajectories, 3 tool calls each (2 retrievals)")
    print(HEADER)
    ours: list[Cost] = []
    for label, rows, metrics in (
        ("ragbridge goal_accuracy + task_completion, with reference", samples, GOAL_METRICS),
        ("ragbridge goal_accuracy + task_completion, no reference", bare, GOAL_METRICS),
        ("ragbridge goal_accuracy alone, with reference", samples, ("goal_accuracy",)),
    ):
        judge = run_ours(rows, metrics)
        ours.append(Cost(label, judge.calls, judge.prompt_chars, n))
        print(ours[-1].row())
    peers = [
        _peer(
            "DeepEval 4.3 TaskCompletionMetric",
            lambda: run_deepeval(samples, include_reason=True),
            n,
        ),
        _peer(
            "DeepEval 4.3 TaskCompletionMetric, include_reason=False",
            lambda: run_deepeval(samples, include_reason=False),
            n,
        ),
        _peer(
            "RAGAS 0.4 AgentGoalAccuracyWithReference (ragas.evaluate's)",
            lambda: run_ragas(samples, reference=True, collections=False),
            n,
        ),
        _peer(
            "RAGAS 0.4 AgentGoalAccuracyWithoutReference (ragas.evaluate's)",
            lambda: run_ragas(bare, reference=False, collections=False),
            n,
        ),
        _peer(
            "RAGAS 0.4 collections AgentGoalAccuracyWithReference",
            lambda: run_ragas(samples, reference=True, collections=True),
            n,
        ),
        _peer(
            "RAGAS 0.4 collections AgentGoalAccuracyWithoutReference",
            lambda: run_ragas(bare, reference=False, collections=True),
            n,
        ),
    ]
    shown = [p for p in peers if p is not None]
    for peer in shown:
        print(peer.row())
    if len(shown) == len(peers):
        both = Cost(
            "DeepEval TaskCompletion + RAGAS AgentGoalAccuracy (the pair)",
            peers[0].calls + peers[2].calls,  # type: ignore[union-attr]
            peers[0].chars + peers[2].chars,  # type: ignore[union-attr]
            n,
        )
        print(both.row())
    per = ours[0].calls / n
    dry = estimate(samples, GOAL_METRICS).calls
    print(f"  dry run (estimate): {dry} calls, counted {ours[0].calls}")
    print(f"  ragbridge: {per:.2f} calls per trajectory for both   goal <= 1: "
          f"{'ok' if per <= 1 else 'MISSED'}")  # fmt: skip


def section_steps(samples: Sequence[Sample]) -> None:
    n = len(samples)
    print(f"\n(b) retrieval-step measures: {n} trajectories (no peer defines these)")
    print(HEADER)
    judge = run_ours(samples, STEP_METRICS)
    print(Cost("ragbridge, the 4 step measures", judge.calls, judge.prompt_chars, n).row())
    print(f"  by task: {dict(sorted((str(k), v) for k, v in judge.by_task.items()))}")
    dry = estimate(samples, STEP_METRICS).calls
    print(f"  dry run (estimate): {dry} calls, counted {judge.calls}")
    with_relevance = run_ours(samples, (*STEP_METRICS, "context_relevance"))
    print(
        Cost(
            "ragbridge, the 4 + context_relevance (its call shared)",
            with_relevance.calls,
            with_relevance.prompt_chars,
            n,
        ).row()
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--trajectories", type=int, default=20)
    parser.add_argument("--contexts", type=int, default=3, help="passages per retrieval step")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; use {', '.join(SECTIONS)}")
    shown = " ".join(
        [
            *([] if chosen == list(SECTIONS) else [f"--only {','.join(chosen)}"]),
            *([] if args.trajectories == 20 else [f"--trajectories {args.trajectories}"]),
            *([] if args.contexts == 3 else [f"--contexts {args.contexts}"]),
        ]
    )
    print(f"$ python benchmarks/agent_cost.py {shown}".rstrip())
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    samples = make_trajectories(args.trajectories, args.contexts)
    start = time.perf_counter()
    sections = {"goal": section_goal, "steps": section_steps}
    for name in chosen:
        sections[name](samples)
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
