"""The report's conversations section: each conversation's turns rolled up, metric by metric.

A run of `ragbridge.core.multiturn.evaluate_conversations` scores turns (rows
``"<id>#<position>"``) and whole conversations (rows ``"<id>"``); the summary table above
weighs every turn alike. This section reads the run as a reader of chat logs does:

* each metric **over conversations** — every conversation weighing the same, with a CI that
  resamples conversations (`conversation_summary`);
* **one row per conversation**: per turn metric the mean of its scored turns, how many were
  scored, the worst turn and the first failing one (`rollup`), each turn linked to its
  drill-down (where the conversation before it is shown turn by turn); per conversation metric
  its value, linked to the conversation's own drill-down.

A run with no conversation rows (no ``conversation_levels`` in its metadata) gets no section.
Conversation ids are user text: they go through `esc`, and links use `sample_anchor`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragbridge.core.labels.thresholds import DEFAULT_THRESHOLD
from ragbridge.core.multiturn import (
    ConversationRollup,
    conversation_summary,
    levels_of,
    rollup,
    split_row_id,
)
from ragbridge.core.results.evaluation import Evaluation, Score

from .markup import ci_text, esc, number, sample_anchor

__all__ = ["conversation_runs", "conversations_section"]


def conversation_runs(pipelines: Mapping[str, Evaluation]) -> dict[str, Evaluation]:
    """The pipelines whose run scored conversations (`evaluate_conversations`)."""
    return {name: ev for name, ev in pipelines.items() if levels_of(ev)}


def _turn_link(conversation: str, position: int | None, pipeline: str, text: str) -> str:
    if position is None:
        return text
    anchor = sample_anchor(f"{conversation}#{position}", pipeline)
    return f'<a href="#{anchor}">#{position}</a> {text}'.rstrip()


def _turn_cell(row: ConversationRollup | None, pipeline: str) -> str:
    if row is None:
        return '<td class="absent">—</td>'
    parts = [
        f'<span class="mean">{number(row.mean)}</span>',
        f'<span class="muted">{row.turns_scored}/{row.turns} turns</span>',
    ]
    if row.worst_turn is not None:
        worst = _turn_link(row.conversation, row.worst_turn, pipeline, number(row.worst_value))
        parts.append(f"worst {worst}")
    if row.first_failing_turn is not None:
        first = _turn_link(row.conversation, row.first_failing_turn, pipeline, "")
        why = f' title="{esc(row.first_failing)}"' if row.first_failing else ""
        parts.append(f'<span class="failing"{why}>first failing {first}</span>')
    return f"<td>{'<br>'.join(parts)}</td>"


def _whole_cell(score: Score | None, conversation: str, pipeline: str) -> str:
    if score is None:
        return '<td class="absent">—</td>'
    anchor = sample_anchor(conversation, pipeline)
    if score.failure is not None:
        text = f"failed ({esc(score.failure.kind.value)})"
    elif score.value is None:
        text = "skipped"
    else:
        text = number(score.value)
    return f'<td class="num"><a href="#{anchor}">{text}</a></td>'


def _conversations(ev: Evaluation, levels: Mapping[str, str]) -> list[str]:
    """Conversation ids in the order their rows were scored."""
    seen: dict[str, None] = {}
    for sample_id, metric, _ in ev:
        if levels.get(metric) == "conversation":
            seen.setdefault(sample_id, None)
        else:
            seen.setdefault(split_row_id(sample_id)[0], None)
    return list(seen)


def _over_conversations(ev: Evaluation, metrics: list[str], pipeline: str) -> list[str]:
    out = [
        f'<table class="conversation-summary" data-pipeline="{esc(pipeline)}"><thead><tr>'
        '<th>Metric</th><th class="num">Mean over conversations</th><th class="num">CI</th>'
        '<th class="num">Scored</th><th class="num">Failed</th><th class="num">Skipped</th>'
        "</tr></thead><tbody>"
    ]
    for metric in metrics:
        s = conversation_summary(ev, metric)
        out.append(
            f'<tr data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
            f'<td class="num mean">{number(s.mean)}</td>'
            f'<td class="num ci">{ci_text(s.ci_low, s.ci_high)}</td>'
            f'<td class="num">{s.n_scored}</td><td class="num">{s.n_failed}</td>'
            f'<td class="num">{s.n_skipped}</td></tr>'
        )
    out.append("</tbody></table>")
    return out


def _per_conversation(ev: Evaluation, levels: Mapping[str, str], pipeline: str) -> list[str]:
    turn = [m for m in ev.metrics if levels.get(m, "turn") == "turn"]
    whole = [m for m in ev.metrics if levels.get(m) == "conversation"]
    rolled = {m: {r.conversation: r for r in rollup(ev, m)} for m in turn}
    head = "".join(f"<th>{esc(m)}</th>" for m in turn) + "".join(
        f'<th class="num">{esc(m)}</th>' for m in whole
    )
    out = [
        '<div class="table-scroll">',
        f'<table class="conversations" data-pipeline="{esc(pipeline)}"><thead><tr>'
        f"<th>Conversation</th>{head}</tr></thead><tbody>",
    ]
    for conversation in _conversations(ev, levels):
        cells = [_turn_cell(rolled[m].get(conversation), pipeline) for m in turn]
        cells += [_whole_cell(ev.get(conversation, m), conversation, pipeline) for m in whole]
        out.append(
            f'<tr data-conversation="{esc(conversation)}"><td>{esc(conversation)}</td>'
            f"{''.join(cells)}</tr>"
        )
    out.append("</tbody></table></div>")
    return out


def conversations_section(pipelines: Mapping[str, Evaluation]) -> list[str]:
    """The section's lines; none when no pipeline scored conversations."""
    runs = conversation_runs(pipelines)
    if not runs:
        return []
    out = [
        '<section id="conversations"><h2>Conversations</h2>',
        '<p class="muted">Over conversations, each conversation weighs the same (a turn '
        "metric's value per conversation is the mean of its scored turns) and the CI resamples "
        f"conversations. A failing turn failed, or scored below {DEFAULT_THRESHOLD:g} (above it "
        "where lower is better); #n is the turn at position n in its conversation, linked to "
        "its drill-down.</p>",
    ]
    for name, ev in runs.items():
        if len(pipelines) > 1:
            out.append(f"<h3>Pipeline {esc(name)}</h3>")
        levels = levels_of(ev)
        metrics = [m for m in ev.metrics if m in levels]
        out.extend(_over_conversations(ev, metrics, name))
        out.extend(_per_conversation(ev, levels, name))
    out.append("</section>")
    return out
