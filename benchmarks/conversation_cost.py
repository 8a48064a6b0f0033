"""What scoring conversations costs: judge calls and prompt characters per turn and per
conversation, ragbridge next to DeepEval's Turn* metrics, on the same conversations and the same
counting judge.

    python benchmarks/conversation_cost.py                 # every section (about 30 s on 2 cores)
    python benchmarks/conversation_cost.py --only turns --conversations 5

Sections (issue 31's figures; no LLM, no network):

* ``turns`` — the four core turn measures (faithfulness, answer relevance, context precision,
  context recall) on every assistant turn, by `evaluate_conversations`; then with context
  relevance as a fifth. Next to them DeepEval 4.3's own ``TurnFaithfulnessMetric``,
  ``TurnRelevancyMetric``, ``TurnContextualPrecisionMetric``, ``TurnContextualRecallMetric``
  (and ``TurnContextualRelevancyMetric``), with and without ``include_reason``. Goal: ragbridge's
  four measures cost what they cost on a single-turn sample, 3 calls a turn at any number of
  contexts (printed per number of contexts).
* ``conversation`` — ``knowledge_retention`` and ``conversation_completeness`` next to
  DeepEval's ``KnowledgeRetentionMetric`` and ``ConversationCompletenessMetric``. Goal: at most
  1 call per conversation for both.
* ``grow`` — the conversations cut after their third exchange are scored, then the whole
  conversations on the same reply cache: what the fourth exchange costs. DeepEval keeps no
  cache for conversational metrics and re-judges every window.

The conversations are made up, seeded: ``--conversations`` (20) of 4 exchanges, each assistant
turn with 3, 4 or 5 retrieved contexts (in turn), a reference per turn, a fact the user states
in the first turn and an expected outcome. Every framework gets the same `CountingJudge` (via
`DeepEvalJudge` for DeepEval), which answers each request with a minimal valid reply for the
schema asked (lists the judge would make up itself, such as claims or intentions, get
``--items`` entries; DeepEval's knowledge extraction gets one fact, `BenchJudge`). With one
item DeepEval's ``ConversationCompletenessMetric`` judges one intention per conversation: its
counts are a lower bound. Characters are the sum of ``len(content)`` over a request's messages.
"""

from __future__ import annotations

import os

# Before any framework import: no telemetry, no .env loading.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import asyncio
import contextlib
import io
import json
import platform
import random
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ragbridge.core.conversation import Conversation, Turn
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.multiturn import (
    CONVERSATION_METRICS,
    TURN_METRICS,
    estimate_conversations,
    evaluate_conversations,
)
from ragbridge.core.multiturn.record import split_row_id
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.testing import CountingJudge, HashEmbedder

SECTIONS = ("turns", "conversation", "grow")
EXCHANGES = 4
WITH_RELEVANCE = (*TURN_METRICS, "context_relevance")

DEEPEVAL_TURN = (
    "TurnFaithfulnessMetric",
    "TurnRelevancyMetric",
    "TurnContextualPrecisionMetric",
    "TurnContextualRecallMetric",
)
DEEPEVAL_CONVERSATION = ("KnowledgeRetentionMetric", "ConversationCompletenessMetric")

_TOPICS = ("annual leave", "parental leave", "sick pay", "remote work", "expenses", "training")
_WHO = ("part-timers", "new starters", "contractors", "managers", "interns", "night staff")
_UNITS = ("days", "weeks", "hours", "euros", "sessions")
_APPROVERS = ("HR team", "line manager", "payroll office")


def _sentence(rng: random.Random, topic: str) -> str:
    who = rng.choice(_WHO)
    return (
        f"For {who}, the {topic} policy allows {rng.randint(2, 40)} {rng.choice(_UNITS)} "
        f"after {rng.randint(1, 12)} months, approved by the {rng.choice(_APPROVERS)}."
    )


def _passage(rng: random.Random, topic: str) -> str:
    return " ".join(_sentence(rng, topic) for _ in range(rng.randint(2, 3)))


def make_conversations(count: int = 20, *, seed: int = 31) -> list[Conversation]:
    """``count`` seeded conversations of `EXCHANGES` exchanges; assistant turn ``i`` of
    conversation ``c`` retrieves ``3 + (c + i) % 3`` contexts."""
    rng = random.Random(seed)
    out: list[Conversation] = []
    for c in range(count):
        topic = _TOPICS[c % len(_TOPICS)]
        hours = rng.choice((16, 20, 24, 30))
        turns: list[Turn] = []
        for i in range(EXCHANGES):
            who = rng.choice(_WHO)
            if i == 0:
                question = f"I work {hours} hours a week. How does {topic} work for me?"
            else:
                question = f"And what about {who}? Does that change after {i + 1} months?"
            contexts = [_passage(rng, topic) for _ in range(3 + (c + i) % 3)]
            answer = " ".join(_sentence(rng, topic) for _ in range(rng.randint(2, 4)))
            turns.append(Turn(role="user", content=question))
            turns.append(
                Turn(
                    role="assistant",
                    content=answer,
                    contexts=contexts,
                    reference=_sentence(rng, topic) + " " + _sentence(rng, topic),
                )
            )
        out.append(
            Conversation(
                id=f"conv-{c:02d}",
                turns=turns,
                expected_outcome=f"The user knows how {topic} applies to a {hours}-hour week.",
            )
        )
    return out


def prefixes(conversations: Sequence[Conversation], exchanges: int) -> list[Conversation]:
    """Each conversation cut after ``exchanges`` exchanges (same ids)."""
    return [c.model_copy(update={"turns": c.turns[: 2 * exchanges]}) for c in conversations]


def quiet() -> contextlib.ExitStack:
    """DeepEval prints progress and banners: keep them out of the table."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


# --------------------------------------------------------------------------- runs


@dataclass
class Cost:
    """What one run spent: calls and prompt characters, in total and per unit."""

    label: str
    calls: int
    chars: int
    turns: int
    conversations: int

    def row(self) -> str:
        per_turn = f"{self.calls / self.turns:>11.2f}" if self.turns else f"{'':>11}"
        chars_turn = f"{self.chars / self.turns:>13,.0f}" if self.turns else f"{'':>13}"
        return (
            f"  {self.label:<52}{per_turn}{self.calls / self.conversations:>11.2f}"
            f"{chars_turn}{self.chars / self.conversations:>14,.0f}"
        )


HEADER = (
    f"  {'setting':<52}{'calls/turn':>11}{'calls/conv':>11}{'chars/turn':>13}{'chars/conv':>14}"
)


@dataclass
class BenchJudge(CountingJudge):
    """`CountingJudge`, except that DeepEval's knowledge extraction gets one fact: its minimal
    reply (an empty ``data``) would make ``KnowledgeRetentionMetric`` skip every per-turn check
    and under-count DeepEval. ragbridge never asks for that schema."""

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        reply = await super().generate(messages, schema=schema)
        if schema is not None and schema.__name__ == "Knowledge" and "data" in schema.model_fields:
            return JudgeReply(text=json.dumps({"data": {"fact": "x"}}), usage=reply.usage)
        return reply


def run_ours(
    conversations: Sequence[Conversation],
    metrics: Sequence[str],
    conversation_metrics: Sequence[str],
    *,
    items: int = 1,
    cache: str | None = None,
) -> tuple[CountingJudge, Evaluation]:
    """`evaluate_conversations` on a fresh counting judge."""
    judge = BenchJudge(list_length=items)
    evaluation = evaluate_conversations(
        conversations,
        metrics,
        conversation_metrics,
        judge=judge,
        embedder=HashEmbedder(),
        cache=cache,
    )
    return judge, evaluation


def calls_by_contexts(
    evaluation: Evaluation, conversations: Sequence[Conversation]
) -> dict[int, list[int]]:
    """Judge calls of each turn row (its cells' usage summed: a shared call is counted in the
    cell that made it), grouped by the turn's number of contexts."""
    contexts = {
        f"{c.id}#{at}": len(turn.contexts)
        for c in conversations
        for at, turn in c.assistant_turns()
    }
    calls: dict[str, int] = defaultdict(int)
    for sample_id in evaluation.sample_ids:
        if split_row_id(sample_id)[1] is None:
            continue
        for metric in evaluation.metrics:
            score = evaluation.get(sample_id, metric)
            if score is not None:
                calls[sample_id] += score.usage.calls
    grouped: dict[int, list[int]] = defaultdict(list)
    for sample_id, n in calls.items():
        grouped[contexts[sample_id]].append(n)
    return dict(sorted(grouped.items()))


def run_deepeval(
    conversations: Sequence[Conversation],
    names: Sequence[str],
    *,
    include_reason: bool = True,
    items: int = 1,
) -> CountingJudge:
    """DeepEval's own metrics ``names`` on the same conversations (`to_conversational_test_case`),
    judged by a counting judge through `DeepEvalJudge`."""
    import deepeval.metrics as deepeval_metrics

    from ragbridge.adapters.deepeval.conversations import to_conversational_test_case
    from ragbridge.adapters.deepeval.models import DeepEvalJudge

    judge = BenchJudge(list_length=items)
    model = DeepEvalJudge(judge)
    cases = [to_conversational_test_case(c) for c in conversations]

    async def every() -> None:
        for case in cases:
            metrics = [
                getattr(deepeval_metrics, name)(
                    model=model, include_reason=include_reason, async_mode=True
                )
                for name in names
            ]
            await asyncio.gather(*(m.a_measure(case, _show_indicator=False) for m in metrics))

    with quiet():
        asyncio.run(every())
    return judge


def _turns(conversations: Sequence[Conversation]) -> int:
    return sum(len(c.assistant_turns()) for c in conversations)


def _cost(
    label: str, judge: CountingJudge, conversations: Sequence[Conversation], per_turn: bool
) -> Cost:
    turns = _turns(conversations) if per_turn else 0
    return Cost(label, judge.calls, judge.prompt_chars, turns, len(conversations))


# --------------------------------------------------------------------------- sections


def section_turns(conversations: Sequence[Conversation], items: int) -> None:
    n = len(conversations)
    print(
        f"\n(a) turn measures: {n} conversations x {EXCHANGES} assistant turns, 3-5 contexts a turn"
    )
    print(HEADER)
    rows: list[Cost] = []
    for label, metrics in (
        ("ragbridge, 4 core turn measures", TURN_METRICS),
        ("ragbridge, 4 core + context_relevance", WITH_RELEVANCE),
    ):
        judge, evaluation = run_ours(conversations, metrics, (), items=items)
        rows.append(_cost(label, judge, conversations, True))
        print(rows[-1].row())
        if metrics == TURN_METRICS:
            core = evaluation
    five = (*DEEPEVAL_TURN, "TurnContextualRelevancyMetric")
    peers = (
        ("DeepEval 4.3, the 4 matching Turn* metrics", DEEPEVAL_TURN, True),
        ("DeepEval 4.3, the 4 Turn*, include_reason=False", DEEPEVAL_TURN, False),
        ("DeepEval 4.3, 5 Turn* (+ TurnContextualRelevancy)", five, True),
    )
    for label, names, reason in peers:
        try:
            judge = run_deepeval(conversations, names, include_reason=reason, items=items)
        except ImportError:
            print("  DeepEval: skipped, install ragbridge[deepeval]")
            break
        print(_cost(label, judge, conversations, True).row())
    print("  ragbridge's 4 core measures, calls per turn by number of contexts:")
    for k, calls in calls_by_contexts(core, conversations).items():
        mean = sum(calls) / len(calls)
        verdict = "ok" if max(calls) <= 3 else "MISSED"
        print(f"    {k} contexts: {mean:.2f} calls/turn over {len(calls)} turns (max {max(calls)})"
              f"   goal <= 3: {verdict}")  # fmt: skip
    dry = estimate_conversations(conversations, TURN_METRICS, ())
    print(f"  dry run (estimate_conversations): {dry.calls} calls, counted {rows[0].calls}")


def section_conversation(conversations: Sequence[Conversation], items: int) -> None:
    n = len(conversations)
    print(f"\n(b) conversation measures: {n} conversations of {EXCHANGES} exchanges")
    print(HEADER)
    judge, _ = run_ours(conversations, (), CONVERSATION_METRICS, items=items)
    ours = _cost("ragbridge, knowledge_retention + completeness", judge, conversations, False)
    print(ours.row())
    for label, reason in (
        ("DeepEval 4.3, KnowledgeRetention + Completeness", True),
        ("DeepEval 4.3, the same, include_reason=False", False),
    ):
        try:
            peer = run_deepeval(
                conversations, DEEPEVAL_CONVERSATION, include_reason=reason, items=items
            )
        except ImportError:
            print("  DeepEval: skipped, install ragbridge[deepeval]")
            break
        print(_cost(label, peer, conversations, False).row())
    per = ours.calls / n
    print(f"  ragbridge: {per:.2f} calls per conversation for both   goal <= 1: "
          f"{'ok' if per <= 1 else 'MISSED'}")  # fmt: skip


def section_grow(conversations: Sequence[Conversation], items: int) -> None:
    n = len(conversations)
    shorter = prefixes(conversations, EXCHANGES - 1)
    print(f"\n(c) a conversation grows: {n} conversations scored after {EXCHANGES - 1} exchanges, "
          f"then after {EXCHANGES}, same reply cache")  # fmt: skip
    print(f"  {'run':<52}{'calls':>8}{'calls/conv':>11}")
    with tempfile.TemporaryDirectory() as folder:
        cache = str(Path(folder) / "replies.sqlite")
        for label, convs in (
            (f"ragbridge, {EXCHANGES - 1} exchanges, cold cache", shorter),
            (f"ragbridge, {EXCHANGES} exchanges, same cache", conversations),
        ):
            judge, _ = run_ours(convs, TURN_METRICS, CONVERSATION_METRICS, items=items, cache=cache)
            print(f"  {label:<52}{judge.calls:>8}{judge.calls / n:>11.2f}")
    try:
        for label, convs in (
            (f"DeepEval 4.3, 4 Turn* + 2, {EXCHANGES - 1} exchanges", shorter),
            (f"DeepEval 4.3, 4 Turn* + 2, {EXCHANGES} exchanges", conversations),
        ):
            judge = run_deepeval(convs, (*DEEPEVAL_TURN, *DEEPEVAL_CONVERSATION), items=items)
            print(f"  {label:<52}{judge.calls:>8}{judge.calls / n:>11.2f}")
    except ImportError:
        print("  DeepEval: skipped, install ragbridge[deepeval]")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--items", type=int, default=1, help="items in made-up reply lists")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; use {', '.join(SECTIONS)}")
    shown = " ".join(
        [
            *([] if chosen == list(SECTIONS) else [f"--only {','.join(chosen)}"]),
            *([] if args.conversations == 20 else [f"--conversations {args.conversations}"]),
            *([] if args.items == 1 else [f"--items {args.items}"]),
        ]
    )
    print(f"$ python benchmarks/conversation_cost.py {shown}".rstrip())
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    conversations = make_conversations(args.conversations)
    start = time.perf_counter()
    sections: dict[str, Any] = {
        "turns": section_turns,
        "conversation": section_conversation,
        "grow": section_grow,
    }
    for name in chosen:
        sections[name](conversations, args.items)
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
