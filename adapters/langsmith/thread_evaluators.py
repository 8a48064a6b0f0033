"""ragbridge's conversation measures as LangSmith thread evaluators (the sink side, for threads).

Why it exists: a chat assistant's quality is a property of its threads — did a follow-up stay
grounded, did the assistant forget what the user said two turns ago — and LangSmith shows
threads, but langsmith 0.14 has no thread evaluator of its own to run locally (its multi-turn
evaluators are online rules configured in the app, grouped by ``thread_id``). openevals 0.2.2
has the local shape: a *trajectory evaluator*, called with the conversation as
``outputs=[messages]`` (and ``reference_outputs``), returning ``{"key", "score", "comment",
"metadata"}`` results — what ``openevals.simulators.run_multiturn_simulation(...,
trajectory_evaluators=[...])`` calls after a simulated conversation. `ThreadEvaluator` gives
ragbridge's measures both shapes:

* **openevals' shape** — ``evaluator(outputs=..., reference_outputs=...)`` returns one result
  per measure for the whole conversation: a conversation measure's score as is, a turn
  measure's as the mean of the conversation's scored turns (`per_conversation`), with each
  turn's value, the worst turn and the first failing turn in ``metadata``
  (`ragbridge.core.multiturn.rollup`). ``outputs`` may be a message list (openevals', LangChain
  messages), a `Conversation`, or one thread's runs.
* **LangSmith's feedback shape** — `ThreadEvaluator.feedback` returns ``EvaluationResult``s
  built as `ragbridge.adapters.langsmith.evaluators` builds them (``comment`` = the reason and
  one line per verdict, ``evaluator_info`` = provider, judge, usage, details; failures with
  ``extra={"error": True}``), each with the run it belongs to as ``target_run_id``: a turn
  measure's score goes to that turn's root run — LangSmith's thread view then aggregates it
  over the thread, as it does every trace's feedback — and a conversation measure's score to
  the thread's last root run (the SDK has no call that writes feedback to a thread itself).
  `ThreadEvaluator.log` posts them with ``client.create_feedback``.

Scoring is `ragbridge.core.multiturn.evaluate_conversations` (`ThreadEvaluator.score`): turn
measures on every answering turn (``Conversation.turn_sample``: the turn with the conversation
so far, cached per conversation prefix), conversation measures (``knowledge_retention``,
``conversation_completeness``: one shared judge call per conversation) on the whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.metrics.base import Metric
from ragbridge.core.multiturn import (
    CONVERSATION_METRICS,
    TURN_METRICS,
    aevaluate_conversations,
    evaluate_conversations,
    per_conversation,
    rollup,
    split_row_id,
)
from ragbridge.core.multiturn.rollups import metric_level
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.scoring.runner import resolve_metrics
from ragbridge.core.scoring.scorer import explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import EvaluationResult, EvaluationResults
from .evaluators import feedback_keys
from .messages import turns_from_messages
from .reading import field_of
from .threads import read_thread_runs

__all__ = [
    "ThreadEvaluator",
    "as_conversation",
    "thread_evaluator",
]

_FEEDBACK_CONFIG = {"type": "continuous", "min": 0, "max": 1}


# --------------------------------------------------------------------------- reading a thread


def _last_run_id(conversation: Conversation) -> str | None:
    """The root run of the thread's last turn that came from a run, or None."""
    for turn in reversed(conversation.turns):
        run_id = _run_id(turn.metadata)
        if run_id is not None:
            return run_id
    return None


def _run_id(metadata: Mapping[str, Any]) -> str | None:
    info = metadata.get("langsmith")
    found = info.get("run_id") if isinstance(info, Mapping) else None
    return None if found is None else str(found)


def _expected(reference_outputs: Any) -> str | None:
    """What the conversation should achieve, from openevals' ``reference_outputs``: a string,
    or a dict's ``expected_outcome`` / ``outcome`` / ``reference``."""
    if isinstance(reference_outputs, str):
        return reference_outputs
    if isinstance(reference_outputs, Mapping):
        for key in ("expected_outcome", "outcome", "reference"):
            if isinstance(reference_outputs.get(key), str):
                return str(reference_outputs[key])
    return None


def as_conversation(
    thread: Any, *, thread_id: str | None = None, expected: str | None = None
) -> Conversation:
    """``thread`` as one `Conversation`: a `Conversation` as is, one thread's runs
    (`read_thread_runs`), or a message list (`turns_from_messages`; id ``thread_id`` or
    ``"thread"``). ``expected`` sets the expected outcome when the thread has none."""
    if isinstance(thread, Conversation):
        conversation = thread
    else:
        items = list(thread) if isinstance(thread, Iterable) else []
        if items and all(field_of(i, "run_type") is not None for i in items):
            read = read_thread_runs(items)
            if len(read.conversations) != 1:
                raise ValueError(
                    f"expected the runs of one thread, got {read.report()}; score several "
                    "threads with ThreadEvaluator.feedback"
                )
            conversation = read.conversations[0]
        elif items:
            conversation = Conversation(id=thread_id or "thread", turns=turns_from_messages(items))
        else:
            raise TypeError(
                f"expected a Conversation, a thread's runs or a message list, got {thread!r:.80}"
            )
    if expected is not None and conversation.expected_outcome is None:
        conversation = conversation.model_copy(update={"expected_outcome": expected})
    return conversation


# --------------------------------------------------------------------------- the evaluator


class ThreadEvaluator:
    """ragbridge's turn and conversation measures over LangSmith threads (see the module doc).

    ``metrics`` are turn measures (default `TURN_METRICS`: faithfulness, answer relevance,
    context precision and recall), ``conversation_metrics`` whole-conversation ones (default
    knowledge retention and conversation completeness); ``keys`` renames feedback keys (a
    mapping measure → key, or ``"langsmith-tutorial"``); ``settings`` (or its fields as
    keyword arguments: ``judge``, ``cache``, ...) are `ragbridge.core.evaluate`'s.
    """

    def __init__(
        self,
        metrics: Iterable[Metric | str] = TURN_METRICS,
        conversation_metrics: Iterable[Metric | str] = CONVERSATION_METRICS,
        *,
        keys: Mapping[str, str] | str | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        # Resolved once: a typo fails here, and feedback keys use the names the rows carry.
        turn, whole = list(metrics), list(conversation_metrics)
        self.metrics: list[Metric] = resolve_metrics(turn) if turn else []
        self.conversation_metrics: list[Metric] = resolve_metrics(whole) if whole else []
        self.settings = Settings.of(settings, options)
        names = [m.name for m in (*self.metrics, *self.conversation_metrics)]
        self.keys = feedback_keys(keys, names)
        self.__name__ = "ragbridge_thread"

    # ----------------------------------------------------------------- scoring

    def score(self, conversations: Iterable[Conversation]) -> Evaluation:
        """Every measure on ``conversations``, in one run: turn measures on each answering
        turn (rows ``"<id>#<position>"``), conversation measures on each conversation (rows
        ``"<id>"``) — `ragbridge.core.multiturn.evaluate_conversations`."""
        return evaluate_conversations(
            conversations, self.metrics, self.conversation_metrics, settings=self.settings
        )

    async def ascore(self, conversations: Iterable[Conversation]) -> Evaluation:
        """The async form of `score`."""
        return await aevaluate_conversations(
            conversations, self.metrics, self.conversation_metrics, settings=self.settings
        )

    # ----------------------------------------------------------------- LangSmith feedback

    def _result(
        self, metric: str, score: Score, target: str | None, **info: Any
    ) -> EvaluationResult:
        evaluator_info: dict[str, Any] = {
            "ragbridge_metric": metric,
            "status": score.status,
            **info,
            **score.model_dump(
                mode="json",
                include={
                    "reason",
                    "provider",
                    "judge_model",
                    "prompt_version",
                    "usage",
                    "latency_s",
                    "details",
                },
            ),
        }
        if score.failure is not None:
            evaluator_info["failure"] = score.failure.model_dump(mode="json")
        return EvaluationResult(
            key=self.keys[metric],
            score=score.value,
            comment=explain(score),
            evaluator_info=evaluator_info,
            feedback_config=dict(_FEEDBACK_CONFIG),
            extra={"error": True} if score.failure is not None else None,
            target_run_id=target,
        )

    def results(self, conversation: Conversation, evaluation: Evaluation) -> list[EvaluationResult]:
        """``conversation``'s scores in ``evaluation`` as LangSmith feedback: each turn score
        targets its turn's root run, each conversation score the thread's last root run."""
        out: list[EvaluationResult] = []
        last = _last_run_id(conversation)
        for metric in evaluation.metrics:
            if metric not in self.keys:
                continue
            if metric_level(evaluation, metric) == "conversation":
                score = evaluation.get(conversation.id, metric)
                if score is not None:
                    out.append(
                        self._result(
                            metric, score, last, thread_id=conversation.id, level="conversation"
                        )
                    )
                continue
            for position, turn in enumerate(conversation.turns):
                score = evaluation.get(f"{conversation.id}#{position}", metric)
                if score is not None:
                    out.append(
                        self._result(
                            metric,
                            score,
                            _run_id(turn.metadata),
                            thread_id=conversation.id,
                            level="turn",
                            turn=position,
                        )
                    )
        return out

    def feedback(self, conversations: Iterable[Conversation]) -> list[EvaluationResult]:
        """Score ``conversations`` and return their LangSmith feedback (`results`)."""
        items = list(conversations)
        evaluation = self.score(items)
        return [r for c in items for r in self.results(c, evaluation)]

    def evaluate(self, thread: Any) -> EvaluationResults:
        """One thread (a `Conversation`, its runs, or a message list) scored as LangSmith
        feedback, as ``EvaluationResults``."""
        conversation = as_conversation(thread)
        return EvaluationResults(results=self.results(conversation, self.score([conversation])))

    async def aevaluate(self, thread: Any) -> EvaluationResults:
        """The async form of `evaluate`."""
        conversation = as_conversation(thread)
        evaluation = await self.ascore([conversation])
        return EvaluationResults(results=self.results(conversation, evaluation))

    @staticmethod
    def log(client: Any, results: Iterable[EvaluationResult], **kwargs: Any) -> int:
        """Post ``results`` with ``client.create_feedback`` (a `langsmith.Client`), each to its
        ``target_run_id``; ``kwargs`` go to every call (``project_id``, ...). A result without
        a target run is refused: LangSmith would not know where it belongs."""
        posted = 0
        for result in results:
            if result.target_run_id is None:
                raise ValueError(
                    f"feedback {result.key!r} names no run: a thread read from LangSmith "
                    "(read_threads) gives each turn its run"
                )
            client.create_feedback(
                run_id=result.target_run_id,
                key=result.key,
                score=result.score,
                comment=result.comment,
                source_info=result.evaluator_info,
                feedback_config=result.feedback_config,
                extra=result.extra,
                feedback_source_type="model",
                **kwargs,
            )
            posted += 1
        return posted

    # ----------------------------------------------------------------- openevals' shape

    def summary(self, conversation: Conversation, evaluation: Evaluation) -> list[dict[str, Any]]:
        """One openevals result per measure for the whole ``conversation``."""
        out: list[dict[str, Any]] = []
        for metric in evaluation.metrics:
            if metric not in self.keys:
                continue
            score = per_conversation(evaluation, metric).get(conversation.id, metric)
            if score is None:
                continue
            metadata: dict[str, Any] = {"ragbridge_metric": metric, "status": score.status}
            comment = explain(score)
            if metric_level(evaluation, metric) == "turn":
                (row,) = [
                    r for r in rollup(evaluation, metric) if r.conversation == conversation.id
                ]
                metadata["rollup"] = row.model_dump()
                metadata["turns"] = [
                    {"turn": position, "value": s.value, "status": s.status}
                    for sid, s in evaluation.column(metric).items()
                    for owner, position in [split_row_id(sid)]
                    if owner == conversation.id
                ]
                if row.first_failing_turn is not None:
                    comment += f"\nfirst failing turn {row.first_failing_turn}: {row.first_failing}"
            if score.failure is not None:
                metadata["failure"] = score.failure.model_dump(mode="json")
            out.append(
                {
                    "key": self.keys[metric],
                    "score": score.value,
                    "comment": comment,
                    "metadata": metadata,
                    "source_run_id": None,
                }
            )
        return out

    def __call__(
        self,
        *,
        outputs: Any,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """openevals' trajectory-evaluator call: ``outputs`` is the conversation (messages, a
        `Conversation` or a thread's runs), ``reference_outputs`` its expected outcome (a
        string or ``{"expected_outcome": ...}``). ``inputs`` is accepted and not read."""
        conversation = as_conversation(
            outputs, thread_id=kwargs.get("thread_id"), expected=_expected(reference_outputs)
        )
        return self.summary(conversation, self.score([conversation]))

    def __repr__(self) -> str:
        return f"<ThreadEvaluator {', '.join(self.keys.values())}>"


def thread_evaluator(
    metrics: Iterable[Metric | str] = TURN_METRICS,
    conversation_metrics: Iterable[Metric | str] = CONVERSATION_METRICS,
    *,
    keys: Mapping[str, str] | str | None = None,
    settings: Settings | None = None,
    **options: Unpack[SettingsOptions],
) -> ThreadEvaluator:
    """A `ThreadEvaluator` (see its doc and the module doc)."""
    return ThreadEvaluator(metrics, conversation_metrics, keys=keys, settings=settings, **options)
