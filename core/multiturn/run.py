"""Scoring whole conversations: turn measures on each answering turn, conversation measures on
each conversation, in one run.

`evaluate_conversations` is `evaluate` over a stream of records — each conversation's turn rows
(``"<id>#<position>"``) then its conversation row (``"<id>"``) — with the run choosing, record
by record, which metrics score it (`RunOptions.applies`): turn metrics on turn rows, conversation
metrics on conversation rows. One run means one judge engine, one cache, one in-flight cap, the
same call counting and the same abort rule as any `evaluate`; a cell a metric does not score is
absent, as in any `Evaluation`. The level of each metric is kept in the run's metadata
(``metadata["conversation_levels"]``), where the roll-ups (`ragbridge.core.multiturn.rollups`)
read it.
"""

from __future__ import annotations

from collections.abc import Iterable

from typing_extensions import Unpack

from ..conversation import Conversation
from ..metrics.base import Metric
from ..results.evaluation import Evaluation
from ..sample import Sample
from ..scoring.runner import (
    Estimate,
    RunOptions,
    aevaluate,
    estimate,
    resolve_metrics,
    run_sync,
)
from ..settings import Settings
from .record import LEVELS_KEY, Level, conversation_rows, record_level, turn_applies

__all__ = [
    "CONVERSATION_METRICS",
    "TURN_METRICS",
    "aevaluate_conversations",
    "estimate_conversations",
    "evaluate_conversations",
]

TURN_METRICS: tuple[str, ...] = (
    "faithfulness",
    "answer_relevance",
    "context_precision",
    "context_recall",
)
"""The turn measures scored by default: 3 judge calls a turn together, as for a sample."""

CONVERSATION_METRICS: tuple[str, ...] = ("knowledge_retention", "conversation_completeness")
"""The conversation measures scored by default: 1 judge call a conversation together."""


class _Levels:
    """The metrics of each level, and which of them score a record."""

    def __init__(
        self, metrics: Iterable[Metric | str], conversation_metrics: Iterable[Metric | str]
    ) -> None:
        turn = _resolved(metrics)
        whole = _resolved(conversation_metrics)
        if not turn and not whole:
            raise ValueError("no metrics given (neither turn nor conversation metrics)")
        both = sorted({m.name for m in turn} & {m.name for m in whole})
        if both:
            raise ValueError(
                f"{both} given as both a turn and a conversation metric; a run scores each "
                "measure at one level (run it twice to have both)"
            )
        self.metrics: list[Metric] = [*turn, *whole]
        self.conversation_names = frozenset(m.name for m in whole)
        self.has_turns = bool(turn)
        self.has_whole = bool(whole)

    def applies(self, sample: Sample, metric: Metric) -> bool:
        if record_level(sample) == "conversation":
            return metric.name in self.conversation_names
        return metric.name not in self.conversation_names and turn_applies(sample, metric)

    def records(self, conversations: Iterable[Conversation]) -> Iterable[Sample]:
        return conversation_rows(conversations, turns=self.has_turns, whole=self.has_whole)

    def table(self) -> dict[str, Level]:
        return {
            m.name: "conversation" if m.name in self.conversation_names else "turn"
            for m in self.metrics
        }


def _resolved(metrics: Iterable[Metric | str]) -> list[Metric]:
    chosen = list(metrics)
    return resolve_metrics(chosen) if chosen else []


def _no_applies(options: RunOptions) -> None:
    if options.get("applies") is not None:
        raise TypeError(
            "evaluate_conversations chooses the metrics of each row itself (turn metrics on "
            "turn rows, conversation metrics on conversation rows); do not pass applies="
        )


async def aevaluate_conversations(
    conversations: Iterable[Conversation],
    metrics: Iterable[Metric | str] = TURN_METRICS,
    conversation_metrics: Iterable[Metric | str] = CONVERSATION_METRICS,
    *,
    settings: Settings | None = None,
    **options: Unpack[RunOptions],
) -> Evaluation:
    """Score ``conversations``; see `evaluate_conversations`."""
    _no_applies(options)
    levels = _Levels(metrics, conversation_metrics)
    chosen: RunOptions = {**options, "applies": levels.applies}
    evaluation = await aevaluate(
        levels.records(conversations), levels.metrics, settings=settings, **chosen
    )
    evaluation.metadata[LEVELS_KEY] = levels.table()
    return evaluation


def evaluate_conversations(
    conversations: Iterable[Conversation],
    metrics: Iterable[Metric | str] = TURN_METRICS,
    conversation_metrics: Iterable[Metric | str] = CONVERSATION_METRICS,
    *,
    settings: Settings | None = None,
    **options: Unpack[RunOptions],
) -> Evaluation:
    """Score turn ``metrics`` on every answering turn and ``conversation_metrics`` on every
    conversation, in one run, into one `Evaluation`.

    Rows: ``"<conversation id>#<position>"`` for each assistant turn that answers a user turn
    and has text (every turn metric) or only contexts (the metrics that do not read the
    answer: context precision and recall, ranking measures); ``"<conversation id>"`` for each
    conversation (`conversation_record`) × ``conversation_metrics``. A cell a metric does not
    score is absent. Either list may be empty; a measure cannot be in both.

    ``settings`` and ``options`` are `evaluate`'s (judge, cache, concurrency, ``progress`` —
    called per row —, ``on_result``, ``keep``, ...). A conversation with no user turn, or ids
    that collide between rows, raise ValueError.
    """
    result: Evaluation = run_sync(
        aevaluate_conversations(
            conversations, metrics, conversation_metrics, settings=settings, **options
        )
    )
    return result


def estimate_conversations(
    conversations: Iterable[Conversation],
    metrics: Iterable[Metric | str] = TURN_METRICS,
    conversation_metrics: Iterable[Metric | str] = CONVERSATION_METRICS,
) -> Estimate:
    """Dry run of `evaluate_conversations`: the judge calls and prompt tokens it would spend
    (``samples`` counts rows), shared calls counted once per row, as `estimate` counts them."""
    levels = _Levels(metrics, conversation_metrics)
    return estimate(levels.records(conversations), levels.metrics, applies=levels.applies)
