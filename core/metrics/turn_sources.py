"""Sources of support beyond a sample's own contexts, for the claim measures: a conversation's
(its earlier turns) and an agent's (everything its retrieval steps returned).

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

An agent's sample (``sample.trajectory`` not None) has sources of its own, whatever ``support``
says: everything its retrieval steps returned (`ragbridge.core.trajectory.step_contexts`). An
agent answers from all it gathered across its steps, so its claims are checked against the
union of the sample's contexts and every step's contexts, each passage listed once
(`step_sources`). A claim a step's passage decides names that step in its details —
``{"source": "step", "step": 2, "tool": "search"}``, ``step`` being the index in
``sample.trajectory`` (from 0, as `step_contexts` gives it) — whether the passage is one of the
sample's own contexts (a capture usually makes those the union of the steps') or a step
source shown after them (`Sources.own_steps`). Step sources come before the conversation's: a
passage this turn's agent retrieved again is this turn's.

The judge reads the sources as more numbered context blocks after the turn's own, each opening
with its label (`TurnSource.shown`, `StepSource.shown`), so the one ``faithfulness.verify`` call
and its reply checks are unchanged, and a sample without history or trajectory sends the same
prompt as before. The offline provider matches the raw texts (`extend_contexts`,
`name_sources`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..results.evaluation import Score
from ..sample import Sample

__all__ = [
    "NO_RETRIEVAL",
    "SUPPORTS",
    "Source",
    "Sources",
    "StepSource",
    "Support",
    "TurnSource",
    "checked_support",
    "conversation_sources",
    "extend_contexts",
    "name_sources",
    "no_retrieval_skip",
    "own_steps",
    "sources_for",
    "step_sources",
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


@dataclass(frozen=True)
class StepSource:
    """A passage an agent's retrieval step returned: ``step`` is the step's index in
    ``sample.trajectory`` (from 0), ``tool`` the tool it called."""

    text: str
    step: int
    tool: str
    context_id: str | None = None

    def shown(self) -> str:
        """The text as the judge reads it: a label naming the step, then the text."""
        return f"[Retrieved by the agent: step {self.step}, tool {self.tool}]\n{self.text}"

    def named(self) -> dict[str, Any]:
        """What a claim's details say of the step whose passage decides it."""
        return {"source": "step", "step": self.step, "tool": self.tool}

    def detail(self) -> dict[str, Any]:
        """What a claim's details say of the step source (shown after the sample's own
        contexts, so no number of the sample's contexts) that decides it."""
        return {"context": None, "context_id": self.context_id, **self.named()}


Source: TypeAlias = TurnSource | StepSource
"""A source of support beyond the sample's own contexts."""


class Sources(list[Source]):
    """The sources shown to the judge after the sample's own contexts, in order, and
    ``own_steps``: for each of the sample's own contexts (1-based, as the judge cites them) that
    a retrieval step of its trajectory returned, that step (`own_steps`)."""

    def __init__(
        self, items: Iterable[Source] = (), own_steps: dict[int, StepSource] | None = None
    ) -> None:
        super().__init__(items)
        self.own_steps: dict[int, StepSource] = dict(own_steps or {})


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


def conversation_sources(sample: Sample, shown: Iterable[str] = ()) -> list[TurnSource]:
    """The sources of ``sample``'s history, in conversation order (see the module doc); a text
    equal to one of the sample's contexts or of ``shown`` is left to it."""
    if not sample.history:
        return []
    seen = {c.text for c in sample.contexts} | set(shown)
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


def step_sources(sample: Sample) -> list[StepSource]:
    """What the retrieval steps of ``sample``'s trajectory returned that is not one of the
    sample's own contexts, each text once, where it was first retrieved (step order, then
    rank order); [] for a sample that is no agent's."""
    if not sample.trajectory:
        return []
    seen = {c.text for c in sample.contexts}
    out: list[StepSource] = []
    for index, step in enumerate(sample.trajectory):
        for context in step.contexts:
            if context.text.strip() and context.text not in seen:
                seen.add(context.text)
                out.append(StepSource(context.text, index, step.name, context.id))
    return out


def own_steps(sample: Sample) -> dict[int, StepSource]:
    """For each of the sample's own contexts (1-based) that a retrieval step returned too, the
    first step that returned it; {} for a sample that is no agent's."""
    if not sample.trajectory:
        return {}
    first: dict[str, StepSource] = {}
    for index, step in enumerate(sample.trajectory):
        for context in step.contexts:
            first.setdefault(context.text, StepSource(context.text, index, step.name, context.id))
    return {
        number: first[context.text]
        for number, context in enumerate(sample.contexts, start=1)
        if context.text in first
    }


def sources_for(sample: Sample, support: str) -> Sources:
    """The sources ``sample``'s claims are checked against besides its own contexts: its
    retrieval steps' passages (an agent's sample, whatever ``support`` says), then the
    conversation's sources when ``support`` is ``"conversation"``."""
    steps = step_sources(sample)
    conversation = (
        conversation_sources(sample, (s.text for s in steps)) if support == "conversation" else []
    )
    return Sources([*steps, *conversation], own_steps(sample))


def extend_contexts(metric: object, sample: Sample, contexts: list[str]) -> Sources:
    """For an offline provider: append the raw texts of the sources ``metric``'s ``support``
    allows (default ``"conversation"``) to ``contexts`` in place, and return the sources, so
    `name_sources` can tell the rows that matched one."""
    sources = sources_for(sample, str(getattr(metric, "support", "conversation")))
    contexts.extend(source.text for source in sources)
    return sources


def name_sources(rows: Sequence[dict[str, Any]], own: int, sources: Sequence[Source]) -> None:
    """Rewrite, in place, each row whose 1-based ``context`` lies past the sample's ``own``
    contexts to name the source it is instead (`TurnSource.detail`, `StepSource.detail`), and
    add to each row citing one of its own contexts that a retrieval step returned the step's
    name (`StepSource.named`, when ``sources`` is a `Sources`)."""
    by_own = sources.own_steps if isinstance(sources, Sources) else {}
    if not sources and not by_own:
        return
    for row in rows:
        number = row.get("context")
        if not isinstance(number, int) or isinstance(number, bool):
            continue
        if own < number <= own + len(sources):
            row.update(sources[number - own - 1].detail())
        elif number in by_own:
            row.update(by_own[number].named())
