"""``conversation.assess``: one judge call that reads a whole conversation, for the two
conversation-level measures.

Knowledge retention (does the assistant keep to what the user told it?) and conversation
completeness (did the user get what they came for?) read the same thing — every turn, in
order — so one call answers both: the facts the user stated, each with the turn that stated it
and the first assistant turn that forgot or contradicted it; the user's intentions, each with
the turn that asked and the turn that met it; and, when the conversation has an expected
outcome, whether it was reached. DeepEval asks one call per user turn to extract knowledge, one
per assistant turn to check it, and one more per intention; here the cost is one call per
conversation whatever its length.

Turns are shown as numbered blocks (``<<<BEGIN TURN 3>>>``, 1-based, user and assistant turns
with text only), so the reply can be checked: a fact's turn must be a user turn, the turn that
broke it a later assistant turn (`_turns_fit`). A measure maps the numbers back to positions in
the conversation (`ConversationRequest.positions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..judging.judge import Message
from . import register
from .base import Facts, PromptTemplate, Reply, neutralise
from .budget import OVERHEAD, VERDICT, bounded, tokens

__all__ = [
    "CONVERSATION_ASSESS",
    "ConversationAssessment",
    "ConversationTemplate",
    "FactVerdict",
    "IntentionVerdict",
    "OutcomeVerdict",
    "format_turns",
    "turn_facts",
]

ShownTurn = tuple[Literal["user", "assistant"], str]
"""A turn as the judge sees it: its role and its text."""


class FactVerdict(Reply):
    """A fact the user stated, and whether the assistant's later turns kept to it.

    ``said_in``: the TURN number where the user stated it. ``broken_in``: the first assistant
    TURN that forgot or contradicted it (required unless the verdict is ``kept``)."""

    fact: str
    said_in: int | None
    reason: str
    verdict: Literal["kept", "forgotten", "contradicted"]
    broken_in: int | None


class IntentionVerdict(Reply):
    """Something the user wanted from the conversation, and whether they got it.

    ``asked_in``: the TURN number where the user asked; ``met_in``: the assistant TURN that met
    it, or None."""

    intention: str
    asked_in: int | None
    reason: str
    verdict: Literal["met", "unmet"]
    met_in: int | None


class OutcomeVerdict(Reply):
    """Whether the conversation reached the expected outcome, and at which TURN."""

    reason: str
    verdict: Literal["met", "unmet"]
    met_in: int | None


class ConversationAssessment(Reply):
    """Reply of ``conversation.assess``: ``outcome`` holds one verdict per OUTCOME block shown
    (one when the conversation has an expected outcome, none otherwise)."""

    facts: list[FactVerdict]
    intentions: list[IntentionVerdict]
    outcome: list[OutcomeVerdict] = Field(json_schema_extra={"aligned_with": "OUTCOME"})


def format_turns(turns: Sequence[ShownTurn]) -> str:
    """The conversation as numbered, delimited TURN blocks (1-based), role on the first line."""
    if not turns:
        return "(the conversation has no turns with text)"
    return "\n".join(
        f"<<<BEGIN TURN {i}>>>\n{role}: {neutralise(text)}\n<<<END TURN {i}>>>"
        for i, (role, text) in enumerate(turns, start=1)
    )


def _format_outcome(outcome: str | None) -> str:
    if outcome is None:
        return '(no expected outcome was given: reply with an empty "outcome" list)'
    return f"<<<BEGIN OUTCOME 1>>>\n{neutralise(outcome)}\n<<<END OUTCOME 1>>>"


def turn_facts(turns: Sequence[ShownTurn], outcome: str | None) -> dict[str, int]:
    """What a reply is checked against: the number of turns, of outcomes, and which turn
    numbers are the user's (``"USER 3": 1``; the others are the assistant's)."""
    facts = {"TURN": len(turns), "OUTCOME": 0 if outcome is None else 1}
    facts.update({f"USER {i}": 1 for i, (role, _) in enumerate(turns, start=1) if role == "user"})
    return facts


def _turn_problem(
    facts: Facts, number: int | None, role: Literal["user", "assistant"], what: str
) -> str | None:
    if number is None:
        return None
    shown = facts.get("TURN", 0)
    if not 1 <= number <= shown:
        return f"{what} names turn {number}, but only turns 1..{shown} were shown"
    actual = "user" if f"USER {number}" in facts else "assistant"
    if actual != role:
        return f"{what} names turn {number}, which is {_a(actual)} turn; name {_a(role)} turn"
    return None


def _a(role: str) -> str:
    return "an assistant" if role == "assistant" else "a user"


def _turns_fit(reply: BaseModel, facts: Facts) -> str | None:
    """Turn numbers that exist and have the right role; a broken fact names the turn that
    broke it, after the turn that stated it."""
    if not isinstance(reply, ConversationAssessment):
        return None
    for i, fact in enumerate(reply.facts, start=1):
        problem = _turn_problem(facts, fact.said_in, "user", f"fact {i}'s said_in") or (
            _turn_problem(facts, fact.broken_in, "assistant", f"fact {i}'s broken_in")
        )
        if problem is not None:
            return problem
        if fact.verdict != "kept" and fact.broken_in is None:
            return f"fact {i} is {fact.verdict}: give the assistant turn that did so in broken_in"
        said, broken = fact.said_in, fact.broken_in
        if said is not None and broken is not None and broken <= said:
            return (
                f"fact {i} was said in turn {said}; the turn that broke it ({broken}) must "
                "come after it"
            )
    for i, intention in enumerate(reply.intentions, start=1):
        problem = _turn_problem(
            facts, intention.asked_in, "user", f"intention {i}'s asked_in"
        ) or _turn_problem(facts, intention.met_in, "assistant", f"intention {i}'s met_in")
        if problem is not None:
            return problem
    for outcome in reply.outcome:
        problem = _turn_problem(facts, outcome.met_in, "assistant", "the outcome's met_in")
        if problem is not None:
            return problem
    return None


def _budget(values: Mapping[str, Any]) -> int:
    """A reason and a verdict per fact and intention: about two of each per user turn, plus
    the restated fact or intention (a sentence of the turn's text)."""
    turns: Sequence[ShownTurn] = values.get("turns") or ()
    asked = [text for role, text in turns if role == "user"]
    return bounded(OVERHEAD + 4 * VERDICT * max(1, len(asked)) + tokens(asked) + VERDICT)


@dataclass(frozen=True)
class ConversationTemplate(PromptTemplate):
    """A template whose values are a conversation's turns (`ShownTurn` pairs) and its expected
    outcome (a string or None), rendered as numbered TURN / OUTCOME blocks."""

    def render(self, **values: Any) -> list[Message]:
        turns: Sequence[ShownTurn] = values["turns"]
        outcome: str | None = values.get("expected_outcome")
        return self.messages(
            {"turns": format_turns(turns), "expected_outcome": _format_outcome(outcome)}
        )

    def facts(self, **values: Any) -> dict[str, int]:
        return turn_facts(values["turns"], values.get("expected_outcome"))


CONVERSATION_ASSESS = register(
    ConversationTemplate(
        id="conversation.assess",
        version="1",
        description=(
            "Facts the user stated and whether later replies kept them; the user's intentions "
            "and whether they were met; the expected outcome, if any."
        ),
        system=(
            "You review whole conversations between a user and an assistant: what the user "
            "told it, what they wanted, and whether the assistant's replies lived up to both."
        ),
        user="""\
$turns

$expected_outcome

Turns are numbered in order. Reply with:
- "facts": each fact the user states about themselves, their situation or their request \
(names, numbers, constraints, preferences, choices) that later replies must respect; \
"said_in": the user turn stating it. Then "reason" (one sentence) and "verdict": \
"contradicted" if a later assistant turn says or assumes otherwise, "forgotten" if one asks \
for it again or ignores it where it matters, else "kept"; "broken_in": the first assistant \
turn that did so, or null when kept. [] if the user states no such fact.
- "intentions": each thing the user wants to get from the conversation; "asked_in": the user \
turn asking. Then "reason" (one sentence), "verdict": "met" if the assistant's replies \
deliver it, else "unmet"; "met_in": the assistant turn that delivers it, or null.
- "outcome": for the OUTCOME block, if there is one: "reason", "verdict": "met" if the \
conversation reaches it, else "unmet"; "met_in": the assistant turn that reaches it, or null.""",
        schema=ConversationAssessment,
        extra_check=_turns_fit,
        budget=_budget,
    )
)
