"""Conversation-level measures: knowledge retention and conversation completeness.

Both read a sample with its ``history`` — a `conversation_record` (the whole conversation) or
a turn row (the conversation up to that turn) — and both answer from one shared judge call,
``conversation.assess`` (`ragbridge.core.prompts.conversation`), keyed on the turns shown and
the expected outcome: scored together they cost one call per conversation, and the first to
ask records it (`MetricContext.shared`), so summed usage is the true cost.

* ``knowledge_retention`` — the share of the assistant's turns that keep to what the user said
  before them: ``1 - failing / checked``, where *checked* are the assistant turns after the
  first fact the user stated, and *failing* those named as the first to forget or contradict a
  fact. Per turn, as DeepEval's ``KnowledgeRetentionMetric`` counts (turns without attrition
  over turns with knowledge before them), from one call instead of one per turn.
* ``conversation_completeness`` — the share of the user's intentions the assistant met, the
  expected outcome (when the conversation has one) counting as one more:
  ``met / (intentions + outcome)``; DeepEval's ``ConversationCompletenessMetric`` is the same
  share without the outcome.

Where DeepEval scores 1.0 (no fact stated, no intention found) these skip with the reason: a
measure that has nothing to check says so rather than reporting a perfect score.
``details`` name turns by their position in the conversation (``turns[position]``, the
``<id>#<position>`` of its turn rows).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..metrics._shared import planned, versions
from ..metrics.base import Metric, MetricContext, PlannedCall, declare, usage_of
from ..prompts.conversation import (
    CONVERSATION_ASSESS,
    ConversationAssessment,
    FactVerdict,
    ShownTurn,
)
from ..results.evaluation import Failure, FailureKind, Score
from ..sample import Sample

__all__ = ["ConversationCompleteness", "ConversationView", "KnowledgeRetention"]


@dataclass(frozen=True)
class ConversationView:
    """What the judge is shown of a sample with history: the user and assistant turns with
    text (history, question, answer), the position of each in the conversation, and the
    expected outcome (``metadata["conversation"]["expected_outcome"]``)."""

    turns: tuple[ShownTurn, ...]
    positions: tuple[int, ...]
    expected_outcome: str | None

    @classmethod
    def of(cls, sample: Sample) -> ConversationView:
        history = sample.history or []
        shown: list[ShownTurn] = []
        positions: list[int] = []
        for position, turn in enumerate(history):
            if turn.role in ("user", "assistant") and turn.content and turn.content.strip():
                shown.append(("user" if turn.role == "user" else "assistant", turn.content))
                positions.append(position)
        asked = len(history)
        shown.append(("user", sample.question))
        positions.append(asked)
        where = sample.metadata.get("conversation")
        where = where if isinstance(where, dict) else {}
        if sample.answer is not None and sample.answer.strip():
            at = where.get("turn")
            if not isinstance(at, int) or isinstance(at, bool) or at <= asked:
                at = asked + 1  # a sample made by hand: its answer follows its question
            shown.append(("assistant", sample.answer))
            positions.append(at)
        outcome = where.get("expected_outcome")
        return cls(tuple(shown), tuple(positions), outcome if isinstance(outcome, str) else None)

    @property
    def key(self) -> Hashable:
        """The memo key of the shared call: both measures of one record ask it once."""
        return (CONVERSATION_ASSESS.id, self.turns, self.expected_outcome)

    def position(self, number: int | None) -> int | None:
        """The conversation position of the judge's 1-based TURN ``number`` (None stays None)."""
        if number is None or not 1 <= number <= len(self.positions):
            return None
        return self.positions[number - 1]

    def assistant_numbers(self) -> list[int]:
        return [n for n, (role, _) in enumerate(self.turns, start=1) if role == "assistant"]

    def first_user_number(self) -> int:
        return next(n for n, (role, _) in enumerate(self.turns, start=1) if role == "user")


async def assess_conversation(
    sample: Sample, ctx: MetricContext
) -> tuple[ConversationView, JudgeCall[ConversationAssessment], bool]:
    """The shared ``conversation.assess`` call of this record, and whether this caller owns it."""
    view = ConversationView.of(sample)
    call, owned = await ctx.shared(
        view.key,
        lambda: ctx.ask(
            CONVERSATION_ASSESS, turns=view.turns, expected_outcome=view.expected_outcome
        ),
    )
    return view, call, owned


class _ConversationMeasure(Metric):
    """The checks and plan both conversation measures share; each reads its half of the reply."""

    requires = ("question",)
    prompt_version = versions(CONVERSATION_ASSESS)

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if sample.history is None:
            return Failure(
                kind=FailureKind.MISSING_INPUT,
                message=(
                    f"{self.name} needs the sample's 'history' (the conversation before its "
                    "question), which is None: score a conversation (conversation_record) or "
                    "a turn of one (Conversation.turn_sample)"
                ),
            )
        return super().missing_input(sample, ctx)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if sample.history is None or not sample.question.strip():
            return []
        view = ConversationView.of(sample)
        return [
            planned(
                CONVERSATION_ASSESS,
                view.key,
                turns=view.turns,
                expected_outcome=view.expected_outcome,
            )
        ]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        view, call, owned = await assess_conversation(sample, ctx)
        usage = usage_of(call, owned=(owned,))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        return self._read(view, call.value).model_copy(update={"usage": usage})

    def _read(self, view: ConversationView, reply: ConversationAssessment) -> Score:
        raise NotImplementedError


class KnowledgeRetention(_ConversationMeasure):
    """Share of the assistant's turns that keep to what the user said before them.

    ``details["facts"]``: each fact with the position of the user ``turn`` that stated it, its
    ``verdict`` (kept / forgotten / contradicted), the assistant turn that broke it
    (``by_turn``) and the judge's reason; ``turns_checked`` and ``failing_turns`` are positions.
    """

    reads: ClassVar[tuple[str, ...] | None] = ("question", "answer", "metadata.conversation")

    def _read(self, view: ConversationView, reply: ConversationAssessment) -> Score:
        facts = [_fact(view, f) for f in reply.facts]
        counts = {v: sum(1 for f in facts if f["verdict"] == v) for v in _FACT_VERDICTS}
        if not facts:
            return Score.skip(
                "the user stated no fact for the assistant to keep to (DeepEval: 1.0)",
                details={"facts": [], **counts, "total": 0},
            )
        start = min(f.said_in or view.first_user_number() for f in reply.facts)
        checked = [n for n in view.assistant_numbers() if n > start]
        if not checked:
            return Score.skip(
                "no assistant turn came after what the user said, so nothing could forget it",
                details={"facts": facts, **counts, "total": len(facts)},
            )
        failing = sorted(
            {f.broken_in for f in reply.facts if f.verdict != "kept" and f.broken_in in checked}
        )
        details: dict[str, Any] = {
            "facts": facts,
            **counts,
            "total": len(facts),
            "turns_checked": [view.position(n) for n in checked],
            "failing_turns": [view.position(n) for n in failing],
        }
        kept = len(checked) - len(failing)
        reason = f"{kept} of {len(checked)} assistant turns kept to what the user said"
        broken = [f for f in facts if f["verdict"] != "kept"]
        if broken:
            first = min(broken, key=lambda f: (f["by_turn"] is None, f["by_turn"] or 0))
            reason += (
                f"; turn {first['by_turn']} {first['verdict']} '{first['fact']}' "
                f"(said in turn {first['turn']})"
            )
        return Score(value=kept / len(checked), reason=reason, details=details)


_FACT_VERDICTS = ("kept", "forgotten", "contradicted")


def _fact(view: ConversationView, fact: FactVerdict) -> dict[str, Any]:
    return {
        "fact": fact.fact,
        "turn": view.position(fact.said_in),
        "verdict": fact.verdict,
        "by_turn": view.position(fact.broken_in),
        "reason": fact.reason,
    }


class ConversationCompleteness(_ConversationMeasure):
    """Share of the user's intentions the conversation met, the expected outcome counting as
    one more when the conversation has one.

    ``details["intentions"]``: each intention with the user ``turn`` that asked, its
    ``verdict`` (met / unmet), the assistant turn that met it (``by_turn``) and the reason;
    ``details["outcome"]``: the expected outcome's verdict, or None when there is none.
    """

    reads: ClassVar[tuple[str, ...] | None] = ("question", "answer", "metadata.conversation")

    def _read(self, view: ConversationView, reply: ConversationAssessment) -> Score:
        intentions = [
            {
                "intention": i.intention,
                "turn": view.position(i.asked_in),
                "verdict": i.verdict,
                "by_turn": view.position(i.met_in),
                "reason": i.reason,
            }
            for i in reply.intentions
        ]
        outcome: dict[str, Any] | None = None
        if view.expected_outcome is not None and reply.outcome:
            said = reply.outcome[0]
            outcome = {
                "expected": view.expected_outcome,
                "verdict": said.verdict,
                "by_turn": view.position(said.met_in),
                "reason": said.reason,
            }
        verdicts = [i["verdict"] for i in intentions] + ([outcome["verdict"]] if outcome else [])
        met = verdicts.count("met")
        details: dict[str, Any] = {
            "intentions": intentions,
            "outcome": outcome,
            "met": met,
            "total": len(verdicts),
        }
        if not verdicts:
            return Score.skip(
                "the judge found nothing the user wanted from the conversation (DeepEval: 1.0)",
                details=details,
            )
        reason = f"{met} of {len(verdicts)} of the user's intentions met"
        if outcome is not None:
            reached = "was" if outcome["verdict"] == "met" else "was not"
            reason += f" (the expected outcome {reached} reached)"
        unmet = [i for i in intentions if i["verdict"] == "unmet"]
        if unmet:
            reason += f"; unmet: '{unmet[0]['intention']}' (asked in turn {unmet[0]['turn']})"
        return Score(value=met / len(verdicts), reason=reason, details=details)


_EDGES = {
    "no history": "failure missing_input naming 'history'",
    "no expected outcome": "the intentions alone",
}
declare(
    KnowledgeRetention,
    meaning="share of the assistant's turns that keep to what the user said before them",
    how=(
        "one judge call per conversation lists the user's facts and the first assistant turn "
        "that forgot or contradicted each"
    ),
    needs=("judge",),
    judge_calls="1 per conversation, shared",
    edges={**_EDGES, "no facts stated": "skipped (DeepEval: 1.0)"},
)
declare(
    ConversationCompleteness,
    meaning="share of the user's intentions (and the expected outcome) the conversation met",
    how=(
        "the same call lists what the user wanted, whether the assistant delivered it, and "
        "whether the expected outcome was reached"
    ),
    needs=("judge",),
    judge_calls="1 per conversation, shared",
    edges={**_EDGES, "no intention found": "skipped (DeepEval: 1.0)"},
)
