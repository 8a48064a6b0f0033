"""What a judge is shown as "the question" of a conversation's turn: the conversation so far,
then the latest question (`asked`).

A follow-up ("and for part-timers?", "how tall is it?") means nothing on its own: a judge that
reads only the last user turn cannot tell what "it" is, so it splits the answer into claims it
cannot resolve, or calls a right context irrelevant. Every judge prompt that shows a question
therefore shows `asked(sample)`: the question itself for a sample that is no conversation's turn
(``history`` None) or the first question of one (``history == []``), so those prompts, and the
replies cached for them, are byte for byte what they were; otherwise the turns before the
question, one line each, then the question.

The rendering depends on the turns before the question and nothing after, so when a
conversation grows its earlier turns render as before and hit the cache. It is compact:
roles and contents, whitespace folded; a tool turn and a system turn are cut to `TOOL_CHARS`
characters, and an assistant turn that only calls tools is named by its calls. Contexts an
earlier turn retrieved are not shown here (faithfulness lists them as sources of support when it
is asked to: `ragbridge.core.metrics.turn_sources`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sample import Sample
from ..turn import Turn

__all__ = ["TOOL_CHARS", "asked", "render_history", "user_side"]

TOOL_CHARS = 200
"""Characters of a tool or system turn's content kept in the rendering (a tool's output is
often a page of text that the assistant's reply after it already summarises)."""

_HEAD = "Conversation so far (earlier turns, oldest first):"
_LATEST = "Latest question, to be read in the light of the turns above:"


def _folded(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int) -> str:
    text = _folded(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _line(turn: Turn) -> str:
    """One turn as one line: ``role: content``."""
    if turn.role == "tool":
        return f"tool result: {_cut(turn.content or '', TOOL_CHARS)}"
    if turn.role == "system":
        return f"system: {_cut(turn.content or '', TOOL_CHARS)}"
    calls = ", ".join(call.name for call in turn.tool_calls)
    content = _folded(turn.content or "")
    if turn.role == "assistant" and calls:
        content = f"{content} [called {calls}]" if content else f"[called {calls}]"
    return f"{turn.role}: {content}"


def render_history(history: Sequence[Turn]) -> str:
    """The turns of ``history``, one line each under a heading ("" for no turns)."""
    if not history:
        return ""
    return "\n".join([_HEAD, *(_line(turn) for turn in history)])


def asked(sample: Sample) -> str:
    """The question as a judge should read it: ``sample.question`` itself when the sample has no
    history (None or ``[]``), else the conversation so far followed by the question."""
    if not sample.history:
        return sample.question
    return f"{render_history(sample.history)}\n{_LATEST}\n{sample.question}"


def user_side(sample: Sample, earlier: int = 2) -> str:
    """The question with the ``earlier`` user turns before it, joined: a stand-in for the
    follow-up written out in full, for comparisons by embedding (answer relevance), where the
    whole conversation would drown the question and the bare follow-up ("and its height?")
    names nothing. ``sample.question`` itself for a sample without history."""
    if not sample.history:
        return sample.question
    users = [_folded(t.content or "") for t in sample.history if t.role == "user"]
    return " ".join([*users[-earlier:], sample.question]) if earlier > 0 else sample.question
