"""The roll-ups a conversations run prints after its summary: per conversation, and over them.

A summary of turn scores weighs a long conversation as many short ones and hides where a
conversation went wrong. So after the usual table, ``eval``/``run`` on conversations print

* each metric over **conversations** (each weighing the same: a turn metric's value per
  conversation is the mean of its scored turns), with a bootstrap CI that resamples
  conversations (`ragbridge.core.multiturn.conversation_summary`), and
* per conversation, for each turn metric, the turns scored, their mean, the worst turn and the
  first failing turn (`ragbridge.core.multiturn.rollup`), and each conversation metric's value.

The run streams its cells (``--out``, ``--history``) without keeping them, so the roll-ups are
gathered as the cells go past (`RollupTally`): the runner hands cells over in record order, and
a conversation's records are consecutive, so each conversation is rolled up by the core's own
functions as soon as its last cell is in, and its cells are dropped. What stays is one small
score per conversation and metric.

This module imports nothing from ragbridge's core at import time (see `options`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ragbridge.adapters.cli.plural import plural
from ragbridge.adapters.cli.tables import aligned

if TYPE_CHECKING:
    from ragbridge.core.multiturn import ConversationRollup
    from ragbridge.core.results.evaluation import MetricSummary, Score

__all__ = ["SHOWN", "RollupTally", "rollup_lines"]

SHOWN = 20
"""Conversations listed one by one at most; past it, those with a failing turn come first."""


class RollupTally:
    """Per-conversation roll-ups of a conversations run, gathered cell by cell.

    ``levels`` is each metric's level (``"turn"`` or ``"conversation"``), as the run scores it.
    Call `add` with every cell in the order the run reports them, then `close`.
    """

    def __init__(self, levels: Mapping[str, str]) -> None:
        self.levels = dict(levels)
        self.rollups: dict[str, dict[str, ConversationRollup]] = {}
        """Conversation -> turn metric -> its roll-up (`ragbridge.core.multiturn.rollup`)."""
        self.values: dict[str, dict[str, Score]] = {m: {} for m in self.levels}
        """Metric -> conversation -> the conversation's score (its mean over turns for a turn
        metric, as `per_conversation` gives it), without details."""
        self._current: str | None = None
        self._cells: list[tuple[str, str, Score]] = []

    def add(self, sample_id: str, metric: str, score: Score) -> None:
        from ragbridge.core.multiturn import split_row_id

        level = self.levels.get(metric, "turn")
        conversation = sample_id if level == "conversation" else split_row_id(sample_id)[0]
        if conversation != self._current:
            self._flush()
            self._current = conversation
        self._cells.append((sample_id, metric, score))

    def close(self) -> None:
        """Roll up the last conversation (idempotent)."""
        self._flush()
        self._current = None

    def _flush(self) -> None:
        from ragbridge.core.multiturn import LEVELS_KEY, per_conversation, rollup
        from ragbridge.core.results.evaluation import Evaluation

        conversation = self._current
        if conversation is None or not self._cells:
            return
        cells = Evaluation(self._cells, metadata={LEVELS_KEY: self.levels})
        self._cells = []
        for metric in cells.metrics:
            if self.levels.get(metric, "turn") == "conversation":
                score = cells.get(conversation, metric)
            else:
                for row in rollup(cells, metric):
                    self.rollups.setdefault(row.conversation, {})[metric] = row
                score = per_conversation(cells, metric).get(conversation, metric)
            if score is not None:
                self.values.setdefault(metric, {})[conversation] = score.model_copy(
                    update={"details": None}
                )

    @property
    def conversations(self) -> list[str]:
        """Every conversation with a cell, in the order they were scored."""
        seen: dict[str, None] = {}
        for column in self.values.values():
            seen.update(dict.fromkeys(column))
        return list(seen)

    def summaries(self) -> dict[str, MetricSummary]:
        """Each metric over conversations: mean, CI resampling conversations, counts."""
        from ragbridge.core.multiturn import LEVELS_KEY, conversation_summary
        from ragbridge.core.results.evaluation import Evaluation

        per = Evaluation(
            (
                (conversation, metric, score)
                for metric, column in self.values.items()
                for conversation, score in column.items()
            ),
            metadata={LEVELS_KEY: dict.fromkeys(self.values, "conversation")},
        )
        return {m: conversation_summary(per, m) for m in self.values if self.values[m]}


def _failing(tally: RollupTally, conversation: str) -> int:
    """How many metrics failed somewhere in ``conversation``: a failing turn, or a
    conversation metric that failed or fell past the threshold."""
    from ragbridge.core.labels.thresholds import DEFAULT_THRESHOLD

    count = sum(
        1 for r in tally.rollups.get(conversation, {}).values() if r.first_failing_turn is not None
    )
    for metric, level in tally.levels.items():
        score = tally.values.get(metric, {}).get(conversation)
        if level != "conversation" or score is None:
            continue
        low = score.value is not None and score.value < DEFAULT_THRESHOLD
        count += score.failure is not None or low
    return count


def _shown(tally: RollupTally, shown: int) -> list[str]:
    conversations = tally.conversations
    if len(conversations) <= shown:
        return conversations
    order = sorted(range(len(conversations)), key=lambda i: -_failing(tally, conversations[i]))
    return [conversations[i] for i in sorted(order[:shown])]


def _cell(score: Score | None) -> str:
    if score is None:
        return "—"
    if score.failure is not None:
        return f"failed ({score.failure.kind.value})"
    return "skipped" if score.value is None else f"{score.value:.3f}"


def _conversation_rows(tally: RollupTally, conversation: str) -> list[list[str]]:
    rows: list[list[str]] = []
    for metric, level in tally.levels.items():
        if level == "conversation":
            score = tally.values.get(metric, {}).get(conversation)
            if score is not None:
                rows.append([metric, "whole", _cell(score), "", ""])
            continue
        r = tally.rollups.get(conversation, {}).get(metric)
        if r is None:
            continue
        worst = "—" if r.worst_turn is None else f"#{r.worst_turn} {r.worst_value:.3f}"
        first = "—" if r.first_failing_turn is None else f"#{r.first_failing_turn}"
        mean = "—" if r.mean is None else f"{r.mean:.3f}"
        rows.append([metric, f"{r.turns_scored}/{r.turns}", mean, worst, first])
    if rows:
        rows[0].insert(0, conversation)
        for row in rows[1:]:
            row.insert(0, "")
    return rows


def rollup_lines(tally: RollupTally, *, shown: int = SHOWN) -> list[str]:
    """The lines printed after a conversations run's summary (none when nothing was scored)."""
    from ragbridge.core.labels.thresholds import DEFAULT_THRESHOLD

    summaries = tally.summaries()
    conversations = tally.conversations
    if not summaries or not conversations:
        return []
    over: list[Sequence[str]] = [("metric", "mean", "95% CI", "scored", "failed", "skipped")]
    for name, s in summaries.items():
        mean = "—" if s.mean is None else f"{s.mean:.3f}"
        ci = "—" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
        over.append((name, mean, ci, str(s.n_scored), str(s.n_failed), str(s.n_skipped)))
    lines = [
        "",
        f"over {plural(len(conversations), 'conversation')} (each weighs the same; the CI "
        "resamples conversations):",
        *aligned(over),
        "",
        f"per conversation (a failing turn failed, or scored below {DEFAULT_THRESHOLD:g}, above "
        "it where lower is better; #n: the turn at position n, row <id>#n):",
    ]
    table: list[Sequence[str]] = [
        ("conversation", "metric", "turns", "mean", "worst", "first failing")
    ]
    listed = _shown(tally, shown)
    for conversation in listed:
        table.extend(_conversation_rows(tally, conversation))
    lines.extend(aligned(table))
    left = len(conversations) - len(listed)
    if left:
        lines.append(
            f"... {plural(left, 'more conversation')} not listed (those with a failing turn are "
            "listed first); --out has every cell, --report a table of every conversation"
        )
    return lines
