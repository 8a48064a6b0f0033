"""Roll-ups of a conversation run: per conversation, then over conversations.

The turns of one conversation are not independent samples — a retrieval that went wrong early
drags its follow-ups with it — so statistics over conversations treat the conversation as the
unit: `per_conversation` turns a turn metric's rows into one value per conversation (the mean
of its scored turns), and `conversation_summary` and `compare_conversations` are the ordinary
`Evaluation.summary` and `ragbridge.core.results.stats.compare` over those values. A bootstrap
that resamples conversations is the cluster bootstrap of the turn scores (each conversation
weighing the same); a paired test over per-conversation means pairs what a system change moves.

`rollup` is the per-conversation view a reader acts on: how many turns were scored, their mean,
the worst turn and the first failing one (a failure, or a value on the wrong side of the
threshold), by position in the conversation (the ``#<position>`` of the row id).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from ..labels.thresholds import DEFAULT_THRESHOLD
from ..results.evaluation import Evaluation, Failure, FailureKind, MetricSummary, Score, Usage
from ..results.stats import Comparison, compare
from .record import Level, levels_of, split_row_id

__all__ = [
    "ConversationRollup",
    "compare_conversations",
    "conversation_summary",
    "metric_level",
    "per_conversation",
    "rollup",
]


class ConversationRollup(BaseModel):
    """One conversation's turns on one metric.

    ``mean`` is over the scored turns (None when none was); ``worst_turn`` is the position of
    the lowest value (the highest for a measure of harm; the earliest on a tie);
    ``first_failing_turn`` the earliest turn that failed or whose value is below the threshold
    (above it for a measure of harm), with why in ``first_failing``.
    """

    model_config = ConfigDict(frozen=True)

    conversation: str
    metric: str
    turns: int
    turns_scored: int
    turns_failed: int
    turns_skipped: int
    mean: float | None
    worst_turn: int | None
    worst_value: float | None
    first_failing_turn: int | None
    first_failing: str | None


def metric_level(evaluation: Evaluation, metric: str) -> Level:
    """Whether ``metric``'s rows are turns or conversations: as the run recorded it
    (`evaluate_conversations`), else from the row ids (``"<id>#<position>"`` for turns)."""
    recorded = levels_of(evaluation).get(metric)
    if recorded is not None:
        return recorded
    positions = [split_row_id(sid)[1] for sid in evaluation.column(metric)]
    if positions and all(p is not None for p in positions):
        return "turn"
    if not any(p is not None for p in positions):
        return "conversation"
    raise ValueError(
        f"{metric!r} has both turn rows ('<id>#<position>') and other rows, and the run does "
        "not record its level: roll up a run of evaluate_conversations"
    )


def _turns(evaluation: Evaluation, metric: str) -> dict[str, list[tuple[int, Score]]]:
    """``{conversation id: [(position, score), ...]}`` of a turn metric, turns in order."""
    if metric_level(evaluation, metric) == "conversation":
        raise ValueError(
            f"{metric!r} is scored once per conversation (rows '<id>'), not per turn: read "
            "evaluation.column(...) or conversation_summary for it"
        )
    grouped: dict[str, list[tuple[int, Score]]] = {}
    for sample_id, score in evaluation.column(metric).items():
        conversation, position = split_row_id(sample_id)
        if position is None:
            raise ValueError(
                f"row {sample_id!r} of {metric!r} is not a turn row ('<conversation id>#"
                "<position>')"
            )
        grouped.setdefault(conversation, []).append((position, score))
    for turns in grouped.values():
        turns.sort(key=lambda item: item[0])
    return grouped


def _higher_is_better(metric: str) -> bool:
    """The measure's direction from the registry; a name it does not know: higher is better."""
    from ..metrics import resolve

    try:
        return resolve(metric).higher_is_better
    except (KeyError, ValueError):
        return True


def _why_failing(score: Score, threshold: float, higher: bool) -> str | None:
    if score.failure is not None:
        return f"failed ({score.failure.kind.value}): {score.failure.message}"
    if score.value is None:
        return None
    if higher and score.value < threshold:
        return f"{score.value:.3g} is below the threshold {threshold:g}"
    if not higher and score.value > threshold:
        return f"{score.value:.3g} is above the threshold {threshold:g} (lower is better)"
    return None


def rollup(
    evaluation: Evaluation,
    metric: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    higher_is_better: bool | None = None,
) -> list[ConversationRollup]:
    """Each conversation's turns on turn metric ``metric``, in the order conversations appear.

    ``threshold`` decides a failing turn (default 0.5, the judges' verdict threshold);
    ``higher_is_better`` defaults to the measure's own direction. Raises ValueError for a
    conversation-level metric (one row per conversation: nothing to roll up).
    """
    higher = _higher_is_better(metric) if higher_is_better is None else higher_is_better
    out: list[ConversationRollup] = []
    for conversation, turns in _turns(evaluation, metric).items():
        scored = [(p, s.value) for p, s in turns if s.value is not None]
        worst = None
        if scored:
            pick = min if higher else max
            worst = pick(scored, key=lambda item: item[1])  # the first of equals: earliest
        failing = next(
            ((p, why) for p, s in turns if (why := _why_failing(s, threshold, higher)) is not None),
            None,
        )
        out.append(
            ConversationRollup(
                conversation=conversation,
                metric=metric,
                turns=len(turns),
                turns_scored=len(scored),
                turns_failed=sum(1 for _, s in turns if s.failure is not None),
                turns_skipped=sum(1 for _, s in turns if s.status == "skipped"),
                mean=sum(v for _, v in scored) / len(scored) if scored else None,
                worst_turn=None if worst is None else worst[0],
                worst_value=None if worst is None else worst[1],
                first_failing_turn=None if failing is None else failing[0],
                first_failing=None if failing is None else failing[1],
            )
        )
    return out


def _conversation_score(turns: Iterable[tuple[int, Score]]) -> Score:
    """One conversation's value of a turn metric: the mean of its scored turns, with their
    summed usage; when none was scored, a failure (some failed) or a skip (all skipped)."""
    scores = [s for _, s in turns]
    usage = sum((s.usage for s in scores), Usage())
    values = [s.value for s in scores if s.value is not None]
    failed = [s.failure for s in scores if s.failure is not None]
    skipped = [s for s in scores if s.status == "skipped"]
    counts = {
        "turns_scored": len(values),
        "turns_failed": len(failed),
        "turns_skipped": len(skipped),
    }
    if values:
        return Score(
            value=min(1.0, max(0.0, sum(values) / len(values))),
            reason=(
                f"mean of {len(values)} scored turns ({len(failed)} failed, {len(skipped)} skipped)"
            ),
            details=counts,
            usage=usage,
        )
    if failed:
        kind: FailureKind = Counter(f.kind for f in failed).most_common(1)[0][0]
        message = f"none of the {len(scores)} turns was scored; first failure: {failed[0].message}"
        return Score(failure=Failure(kind=kind, message=message), details=counts, usage=usage)
    return Score.skip(
        f"every turn was skipped; first: {skipped[0].reason}", details=counts, usage=usage
    )


def per_conversation(evaluation: Evaluation, metric: str) -> Evaluation:
    """``metric`` with one row per conversation: the conversation's own row for a
    conversation-level metric, the mean of its scored turns for a turn metric (see
    `_conversation_score`). Statistics over this are statistics over conversations."""
    if metric_level(evaluation, metric) == "conversation":
        return Evaluation(
            ((sid, metric, s) for sid, s in evaluation.column(metric).items()),
            metadata=dict(evaluation.metadata),
        )
    return Evaluation(
        (
            (conversation, metric, _conversation_score(turns))
            for conversation, turns in _turns(evaluation, metric).items()
        ),
        metadata=dict(evaluation.metadata),
    )


def conversation_summary(
    evaluation: Evaluation,
    metric: str,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> MetricSummary:
    """``metric``'s mean over conversations with a bootstrap CI that resamples conversations.

    Each conversation weighs the same (a turn metric's value per conversation is the mean of its
    scored turns); ``n_scored`` / ``n_failed`` / ``n_skipped`` count conversations.
    """
    summary = per_conversation(evaluation, metric).summary(
        confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    return summary[metric]


def compare_conversations(
    a: Evaluation,
    b: Evaluation,
    metric: str,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10000,
    seed: int = 0,
) -> Comparison:
    """Run b against run a on ``metric``, paired over the same conversations.

    Per-conversation values (`per_conversation`) are compared as `compare` compares samples:
    ``diff = mean_b - mean_a`` with a paired bootstrap CI and a paired permutation p-value;
    ``n_paired`` counts conversations scored in both, ``n_unpaired`` those scored in one only.
    The runs must cover the same conversations: otherwise the difference would mix which
    conversations were run with how well they went, and ValueError names the ones that differ.
    """
    pa, pb = per_conversation(a, metric), per_conversation(b, metric)
    ids_a, ids_b = set(pa.sample_ids), set(pb.sample_ids)
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise ValueError(
            f"the two runs do not cover the same conversations for {metric!r}: "
            f"{len(only_a)} only in a {_some(only_a)}, {len(only_b)} only in b {_some(only_b)}; "
            "compare runs over the same conversations"
        )
    return compare(
        pa, pb, metrics=[metric], confidence=confidence, n_resamples=n_resamples, seed=seed
    )[metric]


def _some(ids: list[str], shown: int = 3) -> str:
    if not ids:
        return "(none)"
    more = f", ... {len(ids) - shown} more" if len(ids) > shown else ""
    return "(" + ", ".join(repr(i) for i in ids[:shown]) + more + ")"
