"""A conversation's own sources of support, for the claim measures of its turns.

Scored turn by turn against only the turn's retrieved contexts, a reply that repeats what the
user said two turns earlier ("You work 20 hours a week, so ...") or what an earlier turn
retrieved is marked a hallucination: it is supported, by the conversation. So faithfulness and
hallucination take ``support``:

* ``"conversation"`` (the default): on a conversation's turn (``sample.history`` not None) the
  claims are checked against the turn's contexts and then against the conversation's sources —
  each earlier user turn's words and each context an earlier assistant turn retrieved — each
  labelled with its turn position (`conversation_sources`). A claim one of them supports is
  supported, and its details name it (``{"source": "turn", "turn": 2, "role": "user"}``).
* ``"turn"``: the turn's own contexts only, as for a sample that is no conversation's turn.

What is not a source: the assistant's own earlier replies (repeating an earlier claim does not
make it true), system and tool turns, and the current question (a sample that is no turn does
not count its question either, so a conversation's first turn scores as that sample would).
A text shown twice (the same passage retrieved for two turns) is listed once, where it first
appears; a source equal to one of the turn's contexts is left to that context.

The judge reads the sources as more numbered context blocks after the turn's own, each opening
with its label (`TurnSource.shown`), so the one ``faithfulness.verify`` call and its reply
checks are unchanged, and a sample without history sends the same prompt as before. The
offline provider matches the raw texts (`extend_contexts`, `name_sources`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..results.evaluation import Score
from ..sample import Sample

__all__ = [
    "NO_RETRIEVAL",
    "SUPPORTS",
    "Support",
    "TurnSource",
    "checked_support",
    "conversation_sources",
    "extend_contexts",
    "name_sources",
    "no_retrieval_skip",
    "sources_for",
    "turn_without_retrieval",
]

Support = Literal["conversation", "turn"]
SUPPORTS: tuple[Support, ...] = ("conversation", "turn")


@dataclass(frozen=True)
class TurnSource:
    """One source the conversation itself offers: what a user turn said, or a context an
    earlier assistant turn retrieved. ``turn`` is its position in the conversation (counted
    from 0, as ``Conversation.turns`` is indexed)."""

    text: str
    turn: int
    role: Literal["user", "assistant"]
    context_id: str | None = None

    def shown(self) -> str:
        """The text as the judge reads it: a label naming where it comes from, then the text."""
        if self.role == "user":
            label = f"[From the conversation, turn {self.turn}: what the user said]"
        else:
            label = f"[From the conversation, turn {self.turn}: a passage retrieved for that turn]"
        return f"{label}\n{self.text}"

    def detail(self) -> dict[str, Any]:
        """What a claim's details say of the source that supports (or contradicts) it."""
        return {
            "context": None,
            "context_id": self.context_id,
            "source": "turn",
            "turn": self.turn,
            "role": self.role,
        }


def checked_support(value: str) -> Support:
    """``value`` if it is one of `SUPPORTS`, else a ValueError naming them."""
    if value not in SUPPORTS:
        raise ValueError(f"support must be one of {SUPPORTS}, got {value!r}")
    return "turn" if value == "turn" else "conversation"


def turn_without_retrieval(sample: Sample) -> bool:
    """A conversation's turn (history not None) that retrieved nothing: the retrieval measures
    skip it (a chat turn that needs no documents is not a retrieval failure; `missed_retrieval`
    asks whether it needed some)."""
    return sample.history is not None and not sample.contexts


NO_RETRIEVAL = (
    "this turn retrieved nothing, so there is no retrieval to judge "
    "(missed_retrieval says whether it needed documents)"
)


def no_retrieval_skip(sample: Sample) -> Score | None:
    """The retrieval measures' Score for a turn that retrieved nothing (skipped, no call), else
    None."""
    return Score.skip(NO_RETRIEVAL) if turn_without_retrieval(sample) else None


def conversation_sources(sample: Sample) -> list[TurnSource]:
    """The sources of ``sample``'s history, in conversation order (see the module doc)."""
    if not sample.history:
        return []
    seen = {c.text for c in sample.contexts}
    out: list[TurnSource] = []

    def add(source: TurnSource) -> None:
        if source.text.strip() and source.text not in seen:
            seen.add(source.text)
            out.append(source)

    for position, turn in enumerate(sample.history):
        if turn.role == "user":
            add(TurnSource(turn.content or "", position, "user"))
        elif turn.role == "assistant":
            for context in turn.contexts:
                add(TurnSource(context.text, position, "assistant", context.id))
    return out


def sources_for(sample: Sample, support: str) -> list[TurnSource]:
    """The conversation's sources when ``support`` is ``"conversation"``, else none."""
    return conversation_sources(sample) if support == "conversation" else []


def extend_contexts(metric: object, sample: Sample, contexts: list[str]) -> list[TurnSource]:
    """For an offline provider: append the raw texts of the sources ``metric``'s ``support``
    allows (default ``"conversation"``) to ``contexts`` in place, and return the sources, so
    `name_sources` can tell the rows that matched one."""
    sources = sources_for(sample, str(getattr(metric, "support", "conversation")))
    contexts.extend(source.text for source in sources)
    return sources


def name_sources(rows: Sequence[dict[str, Any]], own: int, sources: Sequence[TurnSource]) -> None:
    """Rewrite, in place, each row whose 1-based ``context`` lies past the turn's ``own``
    contexts to name the conversation source it is instead (`TurnSource.detail`)."""
    if not sources:
        return
    for row in rows:
        number = row.get("context")
        if isinstance(number, int) and own < number <= own + len(sources):
            row.update(sources[number - own - 1].detail())
