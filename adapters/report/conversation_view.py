"""A conversation's turn in the report: the conversation before its question, turn by turn.

A follow-up ("and for part-timers?") means nothing without the turns before it, and neither do
its scores: so a turn's drill-down shows the conversation so far — each turn's role and words,
what each earlier answer retrieved, and a link to that earlier turn's own drill-down (its scores,
contexts and verdicts) when it was scored in this run. Text goes through `esc`, as every other
user-supplied string in the report.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from ragbridge.core.sample import Sample
from ragbridge.core.turn import Turn

from .markup import esc, sample_anchor

__all__ = ["conversation_block", "conversation_id"]

_TOOL_SHOWN = 400
"""Characters of a tool turn's output shown inline; the rest is what a retrieval returned and
sits in that turn's contexts."""


def conversation_id(sample: Sample) -> str | None:
    """The id of the conversation a turn sample belongs to (`Conversation.turn_sample`)."""
    where: Any = sample.metadata.get("conversation")
    if isinstance(where, dict) and isinstance(where.get("id"), str):
        return str(where["id"])
    return None


def _turn_line(
    turn: Turn, position: int, conversation: str | None, pipeline: str, scored: Container[str]
) -> str:
    text = turn.content or ""
    if turn.role == "tool" and len(text) > _TOOL_SHOWN:
        text = text[:_TOOL_SHOWN] + "…"
    extras: list[str] = []
    if turn.contexts:
        count = len(turn.contexts)
        extras.append(f"{count} context{'' if count == 1 else 's'}")
    if turn.tool_calls:
        extras.append("calls " + ", ".join(esc(c.name) for c in turn.tool_calls))
    turn_sample = f"{conversation}#{position}" if conversation is not None else None
    if turn_sample is not None and turn_sample in scored:
        extras.append(f'<a href="#{sample_anchor(turn_sample, pipeline)}">its scores</a>')
    note = f' <span class="muted">({"; ".join(extras)})</span>' if extras else ""
    body = esc(text) if text else '<span class="muted">no text</span>'
    return (
        f'<li class="turn turn-{esc(turn.role)}"><strong>{position}. {esc(turn.role)}</strong>'
        f'{note}<div class="text">{body}</div></li>'
    )


def conversation_block(sample: Sample, pipeline: str, scored: Container[str]) -> str:
    """The conversation before ``sample``'s question ("" for a sample that is no turn)."""
    if sample.history is None:
        return ""
    if not sample.history:
        first = '<span class="muted">none: this is the first question</span>'
        return f"<p><strong>Conversation so far</strong> {first}</p>"
    conversation = conversation_id(sample)
    lines = [
        _turn_line(turn, position, conversation, pipeline, scored)
        for position, turn in enumerate(sample.history)
    ]
    return (
        f"<p><strong>Conversation so far</strong> ({len(sample.history)} turns)</p>"
        f'<ol class="conversation" start="0">{"".join(lines)}</ol>'
    )
