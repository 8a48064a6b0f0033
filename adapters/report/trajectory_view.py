"""An agent's trajectory in the report: its tool calls step by step.

An agent's answer is only as good as the steps that gathered its evidence, so a sample with a
``trajectory`` shows each step in order — the tool, its arguments, what it returned or the error
it raised, how long it took, and the passages a retrieval step returned — and the reference
calls, when the sample has them, beside it. Every string goes through `esc`, like every other
user-supplied string in the report; arguments are shown as compact JSON text.
"""

from __future__ import annotations

import json

from ragbridge.core.sample import Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

from .markup import esc, number

__all__ = ["trajectory_block"]

_OUTPUT_SHOWN = 600
"""Characters of a step's output shown; a retrieval step's passages are listed in full below it."""


def _args(args: dict[str, object]) -> str:
    return esc(json.dumps(args, ensure_ascii=False, sort_keys=True, default=repr))


def _call(call: ToolCall) -> str:
    return f"<code>{esc(call.name)}({_args(call.args)})</code>"


def _step(index: int, step: Step) -> str:
    head = f"<strong>{index}.</strong> <code>{esc(step.name)}({_args(step.args)})</code>"
    notes: list[str] = []
    if step.latency_s is not None:
        notes.append(f"{number(step.latency_s, 2)} s")
    if step.contexts:
        count = len(step.contexts)
        notes.append(f"{count} context{'' if count == 1 else 's'}")
    if notes:
        head += f' <span class="muted">({"; ".join(notes)})</span>'
    parts = [head]
    if step.error is not None:
        parts.append(f'<div class="text bad-text">error: {esc(step.error)}</div>')
    if step.output is not None:
        shown = step.output
        if len(shown) > _OUTPUT_SHOWN:
            shown = shown[:_OUTPUT_SHOWN] + "…"
        parts.append(f'<div class="text">{esc(shown)}</div>')
    if step.contexts:
        items = "".join(
            f"<li>{esc(ctx.id or '—')}: {esc(ctx.text[:200])}</li>" for ctx in step.contexts
        )
        parts.append(f'<ol class="step-contexts">{items}</ol>')
    return f'<li class="step">{"".join(parts)}</li>'


def trajectory_block(sample: Sample) -> str:
    """The sample's trajectory step by step, and its reference calls ("" for no trajectory)."""
    if sample.trajectory is None and sample.reference_tool_calls is None:
        return ""
    out: list[str] = []
    steps = sample.trajectory or []
    out.append(f"<p><strong>Trajectory</strong> ({len(steps)} steps)</p>")
    if steps:
        out.append(
            '<ol class="trajectory">'
            + "".join(_step(i, s) for i, s in enumerate(steps, start=1))
            + "</ol>"
        )
    if sample.reference_tool_calls is not None:
        calls = ", ".join(_call(c) for c in sample.reference_tool_calls) or "none"
        out.append(f"<p><strong>Reference tool calls</strong> {calls}</p>")
    return "".join(out)
