"""What the agent measures read of a trajectory: its retrieval steps, their queries, and each
step as a judge is shown it.

A step is a **retrieval step** when it returned contexts, or when its tool is one the measure
was told is a retriever (``retrievers=("search_docs",)``): a search that found nothing is still
a search, and only its name says so. A retrieval step's **query** is the first non-blank string
among its arguments ``query``, ``question``, ``q``, ``search_query``, ``input``, ``text``,
``prompt``, ``keywords`` (the names LangChain, LlamaIndex and the common search tools use); else
its only string argument; else its arguments as JSON. Steps are named by their index in
``sample.trajectory`` (from 0), as `ragbridge.core.trajectory.step_contexts` names them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..prompts.history import TOOL_CHARS
from ..results.evaluation import Failure, FailureKind, Score, Usage
from ..sample import Sample
from ..trajectory import Step

__all__ = [
    "QUERY_KEYS",
    "RetrievalStep",
    "no_trajectory",
    "retrieval_steps",
    "returned_text",
    "shown_step",
    "shown_steps",
    "step_query",
]

QUERY_KEYS: tuple[str, ...] = (
    "query",
    "question",
    "q",
    "search_query",
    "input",
    "text",
    "prompt",
    "keywords",
)
"""Argument names read as a retrieval step's query, in this order."""


def step_query(step: Step) -> str:
    """The query ``step`` was given (see the module doc); "" for a call without arguments."""
    for key in QUERY_KEYS:
        value = step.args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    strings = [v for v in step.args.values() if isinstance(v, str) and v.strip()]
    if len(strings) == 1:
        return strings[0]
    if not step.args:
        return ""
    return json.dumps(step.args, ensure_ascii=False, sort_keys=True, default=str)


@dataclass(frozen=True)
class RetrievalStep:
    """A retrieval step of a trajectory: its ``index`` there, the step, and its query."""

    index: int
    step: Step
    query: str

    @property
    def tool(self) -> str:
        return self.step.name


def retrieval_steps(sample: Sample, retrievers: Iterable[str] = ()) -> list[RetrievalStep]:
    """The retrieval steps of ``sample``'s trajectory, in order ([] without one)."""
    named = frozenset(retrievers)
    return [
        RetrievalStep(index, step, step_query(step))
        for index, step in enumerate(sample.trajectory or [])
        if step.contexts or step.name in named
    ]


def no_trajectory(name: str, sample: Sample) -> Failure | None:
    """The ``missing_input`` failure of a step measure on a sample that is no agent's."""
    if sample.trajectory is not None:
        return None
    return Failure(
        kind=FailureKind.MISSING_INPUT,
        message=(
            f"{name} needs the sample's 'trajectory' (the agent's tool calls), which is None: "
            "capture an agent's run, or score a conversation turn that made tool calls"
        ),
    )


def _cut(text: str, limit: int = TOOL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def returned_text(step: Step) -> str:
    """What a step returned, as one text: its output, else its contexts joined."""
    if step.output is not None and step.output.strip():
        return step.output
    return " | ".join(c.text for c in step.contexts)


def shown_step(step: Step, *, query: bool = False) -> str:
    """A step as a judge reads it, in a few lines: the tool, its query (``query``) or its
    arguments, the error it raised, and the first `TOOL_CHARS` characters of what it returned
    (enough to see what a later step builds on, where the whole output would be a page)."""
    lines = [f"tool: {step.name}"]
    if query:
        lines.append(f"query: {step_query(step) or '(none)'}")
    else:
        args = json.dumps(step.args, ensure_ascii=False, sort_keys=True, default=str)
        lines.append(f"arguments: {_cut(args)}")
    if step.error:
        lines.append(f"failed: {_cut(step.error)}")
    returned = returned_text(step)
    lines.append(f"returned: {_cut(returned)}" if returned.strip() else "returned: nothing")
    return "\n".join(lines)


def shown_steps(steps: Sequence[Step], *, query: bool = False) -> tuple[str, ...]:
    """`shown_step` of each of ``steps``."""
    return tuple(shown_step(step, query=query) for step in steps)


DEFAULT_QUERY_RELEVANCE = 0.6
"""The offline provider's threshold on a query's relevance score (see the module doc)."""


def step_row(step: RetrievalStep, **verdict: Any) -> dict[str, Any]:
    """One step's row in a step measure's details: its index, tool, query and verdict."""
    return {"step": step.index, "tool": step.tool, "query": step.query, **verdict}


def query_score(
    rows: list[dict[str, Any]], *, usage: Usage | None = None, extra: dict[str, Any] | None = None
) -> Score:
    """step_query_relevance from one row per retrieval step (``relevant`` in each), whoever
    judged; ``extra`` is added to the details (the offline threshold)."""
    relevant = sum(1 for r in rows if r["relevant"])
    n = len(rows)
    reason = f"{relevant} of {n} retrieval step queries relevant to the question"
    off = [r for r in rows if not r["relevant"]]
    if off:
        reason += f"; first off the question: step {off[0]['step']} ({off[0]['query']!r})"
    return Score(
        value=relevant / n,
        reason=reason,
        details={"relevant": relevant, "retrieval_steps": n, "steps": rows, **(extra or {})},
        usage=usage or Usage(),
    )
