"""DeepEval's conversational metrics on ragbridge's measures: change the import, keep the code.

``from deepeval.metrics import TurnFaithfulnessMetric`` becomes ``from
ragbridge.adapters.deepeval import TurnFaithfulnessMetric``; the constructor (DeepEval's
arguments, in DeepEval's order), the results column (``"Turn Faithfulness"``),
``measure``/``a_measure(test_case)``, ``score``/``reason``/``success``/``error``,
``deepeval.assert_test`` and ``deepeval.evaluate`` stay as they were. The test case is read
with `from_conversational_test_case`; the number is ragbridge's:

* **Turn metrics** score every assistant turn that answers a user turn
  (`Conversation.turn_sample`: the turn's answer and contexts, with the conversation before it
  as ``history``) with one ragbridge measure — `TurnFaithfulnessMetric` ``faithfulness``,
  `TurnRelevancyMetric` ``answer_relevance``, `TurnContextualPrecisionMetric`
  ``context_precision``, `TurnContextualRecallMetric` ``context_recall``,
  `TurnContextualRelevancyMetric` ``context_relevance`` — and the score is **the mean over
  those turns**, as DeepEval averages its per-exchange windows. ``turn_scores`` keeps each
  turn's ragbridge `Score` by position; the reason lists each turn's value and why. Each turn
  costs what a single-turn sample costs (the judge reads the conversation so far, and a grown
  conversation's earlier turns hit the cache); DeepEval instead judges each window of up to
  ``window_size`` exchanges afresh, re-reading every earlier turn.
* **Conversation metrics** — `KnowledgeRetentionMetric` ``knowledge_retention``,
  `ConversationCompletenessMetric` ``conversation_completeness`` — score the whole
  conversation (`conversation_record`): one judge call per conversation, shared by both when
  they are built on one ``scorer=`` (``Scorer(["knowledge_retention",
  "conversation_completeness"], judge=...)``); DeepEval makes one call per user turn, one per
  assistant turn and one per intention.

Where they differ from DeepEval's, by design: a turn whose measure fails makes the metric's
``error`` (never a low score), and a turn the measure does not apply to (a retrieval measure on
a turn that retrieved nothing) is left out of the mean and named in the reason — DeepEval
counts such a window as 1.0; when no turn is scored at all, or a conversation measure has
nothing to check (no fact stated), ``error`` says so ("skipped: ...") where DeepEval reports
1.0. A turn's reference is its own (``Turn.reference``, kept through DeepEval by
`to_conversational_test_case`), else the conversation's ``expected_outcome``, which is what
DeepEval's contextual precision and recall read. ``strict_mode`` sets the threshold to 1 and
each turn's value below it to 0, as DeepEval does per window. ``window_size`` is accepted and
does not narrow what is judged: ragbridge shows each turn the whole conversation before it,
compactly. ``model=`` is the judge (`judge_of_model`), ``provider=`` another implementation of
the measure, and ``judge=``, ``embedder=``, ``cache=``, ``settings=``, ``scorer=`` mean what
they mean for `RagbridgeMetric`. ``system_one_model``/``eval_mode`` other than DeepEval's LLM
mode, and a custom ``evaluation_template``, are refused: ragbridge judges with its own prompts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn

from typing_extensions import Unpack

from . import _framework  # noqa: F401  (first: DeepEval through the one guard)

# isort: split
from deepeval.config.eval_mode import EvalMode
from deepeval.errors import MissingTestCaseParamsError
from deepeval.metrics import BaseConversationalMetric
from deepeval.test_case import ConversationalTestCase

from ragbridge.core.conversation import Conversation
from ragbridge.core.judging.engine import cost_of
from ragbridge.core.metrics.base import Metric
from ragbridge.core.multiturn.record import conversation_record, turn_applies, turn_rows
from ragbridge.core.results.evaluation import Score
from ragbridge.core.results.usage import Usage
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import default_embedder, resolve_metrics, run_sync
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._banner import silence_banner
from .conversations import from_conversational_test_case
from .dropins import _given
from .metrics import _refuse_two_judges
from .models import judge_of_model

__all__ = [
    "ConversationCompletenessMetric",
    "DeepEvalConversationalMetric",
    "KnowledgeRetentionMetric",
    "TurnContextualPrecisionMetric",
    "TurnContextualRecallMetric",
    "TurnContextualRelevancyMetric",
    "TurnFaithfulnessMetric",
    "TurnRelevancyMetric",
]


class DeepEvalConversationalMetric(BaseConversationalMetric):  # type: ignore[misc]
    """A ragbridge measure behind one of DeepEval's conversational metric classes (see the
    module docstring): DeepEval's arguments, column and outcome fields, ragbridge's number.

    Every constructor argument is kept under its own name because DeepEval's ``evaluate``
    copies metrics by calling the class again with them; copies share one `Scorer` (its judge
    engine and cache).
    """

    measure_name: ClassVar[str]
    deepeval_name: ClassVar[str]
    per_turn: ClassVar[bool] = True
    needs_outcome: ClassVar[bool] = False
    """DeepEval requires ``expected_outcome`` (its contextual precision and recall): missing,
    with a turn that has no reference of its own, raises DeepEval's
    ``MissingTestCaseParamsError`` with DeepEval's message."""

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie within [0, 1], got {threshold!r}")
        _refuse_deepeval_only(system_one_model, eval_mode, evaluation_template)
        resolved = self._measure(metric, provider)
        if model is not None:
            _refuse_two_judges(scorer, settings, options)
            options["judge"] = judge_of_model(model)
        elif resolved.needs_judge and not _given("judge", scorer, settings, options):
            options["judge"] = judge_of_model(None)  # DeepEval's default model
        if resolved.needs_embedder and not _given("embedder", scorer, settings, options):
            options["embedder"] = default_embedder()
        if scorer is None:
            scorer = Scorer([resolved], settings=settings, **options)
        elif resolved.name not in scorer.names:
            raise ValueError(f"scorer scores {scorer.names}, not {resolved.name!r}")
        self.scorer = scorer
        self.metric = scorer.metrics[scorer.names.index(resolved.name)]
        self.settings = scorer.settings  # kept by this name: DeepEval copies metrics by it
        self.threshold = 1.0 if strict_mode else threshold
        self.system_one_model = None
        self.eval_mode = EvalMode.LLM
        self.include_reason = include_reason
        self.async_mode = async_mode
        self.strict_mode = strict_mode
        self.verbose_mode = verbose_mode
        self.flaky = flaky
        self.evaluation_template = None
        engine = scorer.judge
        self.evaluation_model = engine.model if engine is not None else self.metric.provider
        self.turn_scores: dict[int, Score] = {}
        """Each scored turn's ragbridge `Score`, by position in the conversation (turn
        metrics; the latest measurement)."""
        self.last_score: Score | None = None
        """The conversation's ragbridge `Score` (conversation metrics; the latest
        measurement)."""

    def _measure(self, metric: Metric | None, provider: str | None) -> Metric:
        """The measure this class scores; ``metric=`` is how DeepEval's copies get it back."""
        if metric is None:
            spelled = self.measure_name if provider is None else f"{self.measure_name}:{provider}"
            return resolve_metrics([spelled])[0]
        if metric.name != self.measure_name:
            raise ValueError(
                f"{type(self).__name__} scores {self.measure_name!r}, not {metric.name!r}"
            )
        if provider is not None and provider != metric.provider:
            raise ValueError(
                f"metric= uses provider {metric.provider!r}, provider= says {provider!r}"
            )
        return metric

    @property
    def __name__(self) -> str:
        metric = self.metric
        default = metric.providers[0] if metric.providers else metric.provider
        suffix = "" if metric.provider == default else f" ({metric.provider})"
        return f"{self.deepeval_name}{suffix}"

    # DeepEval annotates ``-> float``; an error returns None (``error`` says why).
    def measure(  # type: ignore[override]
        self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """Score ``test_case`` (``*args``/``**kwargs`` are DeepEval's display flags, unused)."""
        result: float | None = run_sync(self._ascore(test_case))
        return result

    async def a_measure(  # type: ignore[override]
        self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """The async form of `measure`, on the caller's event loop."""
        return await self._ascore(test_case)

    # ------------------------------------------------------------------ scoring

    async def _ascore(self, test_case: ConversationalTestCase) -> float | None:
        self.error = None
        self.success = None
        conversation = self._conversation(test_case)
        name = self.metric.name
        if not self.per_turn:
            record = conversation_record(conversation)
            scores = await self.scorer.ascore(record, only=[name], key=_record_key(record))
            return self._apply_whole(scores[name])
        rows = self._rows(conversation)
        found = await asyncio.gather(*(self.scorer.ascore(row, only=[name]) for _, row in rows))
        positions = [at for at, _ in rows]
        return self._apply_turns(
            [(at, scores[name]) for at, scores in zip(positions, found, strict=True)]
        )

    def _conversation(self, test_case: ConversationalTestCase) -> Conversation:
        """DeepEval's checks (and wording), then the test case as a `Conversation`."""
        if not isinstance(test_case, ConversationalTestCase):
            self._refuse(
                ValueError,
                "Unable to evaluate test cases that are not of type 'ConversationalTestCase' "
                f"using the conversational '{self.__name__}' metric.",
            )
        conversation = from_conversational_test_case(test_case)
        if self.needs_outcome and conversation.expected_outcome is None:
            unlabelled = [t for _, t in conversation.assistant_turns() if t.reference is None]
            if unlabelled:
                self._refuse(
                    MissingTestCaseParamsError,
                    "'expected_outcome' in a conversational test case cannot be empty for the "
                    f"'{self.__name__}' metric.",
                )
        return conversation

    def _refuse(self, kind: type[Exception], message: str) -> NoReturn:
        self.error = message
        self.success = False
        raise kind(message)

    def _rows(self, conversation: Conversation) -> list[tuple[int, Sample]]:
        """The turns this measure scores, by position; a turn without a reference reads the
        conversation's expected outcome as one (DeepEval's reference for these measures)."""
        outcome = conversation.expected_outcome
        rows: list[tuple[int, Sample]] = []
        for row in turn_rows(conversation):
            if not turn_applies(row, self.metric):
                continue
            if self.needs_outcome and row.reference is None and outcome is not None:
                row = row.model_copy(update={"reference": outcome})
            rows.append((int(row.metadata["conversation"]["turn"]), row))
        return rows

    def _shown(self, value: float) -> float:
        """DeepEval's strict mode: a value below the threshold (1) counts as 0."""
        threshold: float | None = self.threshold
        return 0.0 if self.strict_mode and threshold is not None and value < threshold else value

    def _settle(self, usage: Usage) -> None:
        engine = self.scorer.judge
        self.evaluation_cost = cost_of(usage, engine.price) if engine is not None else 0.0
        self.input_tokens = usage.prompt_tokens
        self.output_tokens = usage.completion_tokens
        self.success = self.is_successful()

    def _apply_whole(self, score: Score) -> float | None:
        self.last_score = score
        self.turn_scores = {}
        self.reason = None
        if score.value is None:
            self.score = None
            self.error = explain(score)
        else:
            self.score = self._shown(score.value)
            if self.include_reason:
                self.reason = explain(score)
        self._settle(score.usage)
        if self.verbose_mode:
            self.verbose_logs = self._logs([(None, score)], score.usage)
        value: float | None = self.score
        return value

    def _apply_turns(self, scored: Sequence[tuple[int, Score]]) -> float | None:
        self.last_score = None
        self.turn_scores = dict(scored)
        self.reason = None
        self.score = None
        usage = sum((s.usage for _, s in scored), Usage())
        failed = [(at, s) for at, s in scored if s.failure is not None]
        valued = [(at, s) for at, s in scored if s.value is not None]
        skipped = [(at, s) for at, s in scored if s.value is None and s.failure is None]
        if not scored:
            self.error = (
                f"skipped: no assistant turn of the conversation answers a user turn with "
                f"what {self.metric.name} reads"
            )
        elif failed:
            self.error = "\n".join(
                [f"{len(failed)} of {len(scored)} turns failed", *_turn_lines(failed)]
            )
        elif not valued:
            self.error = "\n".join(["skipped: no turn was scored", *_turn_lines(skipped)])
        else:
            shown = [self._shown(s.value) for _, s in valued if s.value is not None]
            self.score = sum(shown) / len(shown)
            if self.include_reason:
                self.reason = self._explain(valued, skipped)
        self._settle(usage)
        if self.verbose_mode:
            self.verbose_logs = self._logs(list(scored), usage)
        value: float | None = self.score
        return value

    def _explain(
        self, valued: Sequence[tuple[int, Score]], skipped: Sequence[tuple[int, Score]]
    ) -> str:
        assert self.score is not None
        worst_at, worst = min(valued, key=lambda pair: (pair[1].value or 0.0, pair[0]))
        strict = " (strict: a turn below 1 counts 0)" if self.strict_mode else ""
        head = (
            f"{self.score:.2f} = mean {self.metric.name} over {len(valued)} "
            f"turn{'s' if len(valued) != 1 else ''}{strict}; lowest turns[{worst_at}] "
            f"{worst.value:.2f}"
        )
        lines = [head, *_turn_lines(valued)]
        if skipped:
            lines.append("not in the mean:")
            lines += _turn_lines(skipped)
        return "\n".join(lines)

    def _logs(self, scored: Sequence[tuple[int | None, Score]], usage: Usage) -> str:
        lines = [
            f"metric: {self.metric.name} (provider {self.metric.provider})",
            f"usage: {usage.calls} calls ({usage.cached_calls} cached), "
            f"{usage.prompt_tokens}+{usage.completion_tokens} tokens",
        ]
        for at, score in scored:
            where = "conversation" if at is None else f"turns[{at}]"
            lines.append(f"{where}: {explain(score, limit=50)}")
        return "\n".join(lines)

    def is_successful(self) -> bool:
        value: float | None = self.score
        threshold: float | None = self.threshold
        if self.error is not None or value is None or threshold is None:
            success = False
        else:
            success = value >= threshold
        self.success = success
        return success


silence_banner(DeepEvalConversationalMetric)


def _refuse_deepeval_only(system_one_model: Any, eval_mode: Any, template: Any) -> None:
    """DeepEval's System One modes and custom templates change how DeepEval judges; ragbridge
    judges with its own prompts, so a request for them is refused rather than ignored."""
    if system_one_model is not None:
        raise ValueError(
            "system_one_model= selects DeepEval's System One judge; ragbridge's drop-ins judge "
            "with the model= judge only"
        )
    if eval_mode not in (None, "llm", EvalMode.LLM):
        raise ValueError(
            f"eval_mode={eval_mode!r}: ragbridge's drop-ins judge in DeepEval's 'llm' mode only"
        )
    if template is not None:
        raise ValueError(
            "evaluation_template= replaces DeepEval's prompts; ragbridge judges with its own "
            "(use DeepEval's own metric for a custom template)"
        )


def _record_key(record: Sample) -> str:
    """The Scorer key of a conversation record: everything but its id, metadata included (the
    expected outcome and the answer's position live there)."""
    text = record.model_dump_json(exclude={"id"})
    return "conversation:" + hashlib.sha256(text.encode()).hexdigest()


def _turn_lines(scored: Sequence[tuple[int, Score]]) -> list[str]:
    lines: list[str] = []
    for at, score in scored:
        value = "" if score.value is None else f" {score.value:.2f}"
        first, *rest = explain(score, limit=6).splitlines()
        lines.append(f"  turns[{at}]{value}: {first}")
        lines += [f"    {line.strip()}" for line in rest]
    return lines


class _Windowed(DeepEvalConversationalMetric):
    """DeepEval's classes with a ``window_size`` before ``flaky``."""

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        window_size: int = 10,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        self.window_size = window_size
        super().__init__(
            threshold,
            model,
            system_one_model,
            eval_mode,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            flaky,
            evaluation_template,
            provider=provider,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )


class TurnFaithfulnessMetric(_Windowed):
    """ragbridge's ``faithfulness`` on each assistant turn, averaged, as DeepEval's
    ``TurnFaithfulnessMetric``.

    A claim is checked against the turn's retrieved contexts and, with ``support=
    "conversation"`` (the default), against what the conversation itself established — what the
    user said earlier and what earlier turns retrieved — each supported claim naming the turn
    it came from; ``support="turn"`` counts the turn's own contexts only. Differs from
    DeepEval's: a claim no source supports or contradicts is unsupported (DeepEval forgives it
    unless ``penalize_ambiguous_claims``, accepted here and always in effect), there is no
    truths step (``truths_extraction_limit`` is accepted and unused), and a turn with no claim
    is a skipped turn, not 1.0.
    """

    measure_name = "faithfulness"
    deepeval_name = "Turn Faithfulness"

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        truths_extraction_limit: int | None = None,
        penalize_ambiguous_claims: bool = False,
        window_size: int = 10,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        support: str = "conversation",
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        self.truths_extraction_limit = truths_extraction_limit
        self.penalize_ambiguous_claims = penalize_ambiguous_claims
        self.support = support
        if metric is None and support != "conversation":
            from ragbridge.core.metrics.faithfulness import Faithfulness

            metric = Faithfulness(provider or "llm", support=support)
        elif metric is not None and getattr(metric, "support", support) != support:
            raise ValueError(
                f"metric= checks support={getattr(metric, 'support', None)!r}, support= says "
                f"{support!r}"
            )
        super().__init__(
            threshold,
            model,
            system_one_model,
            eval_mode,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            window_size,
            flaky,
            evaluation_template,
            provider=provider,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )


class TurnRelevancyMetric(_Windowed):
    """ragbridge's ``answer_relevance`` on each assistant turn, averaged, as DeepEval's
    ``TurnRelevancyMetric``.

    A different definition: ragbridge generates the questions the turn's answer would answer
    and compares them by embedding with the question, written out with the user's earlier
    turns (RAGAS's definition; a noncommittal answer scores 0); DeepEval asks the judge whether
    the last assistant message is relevant to its window. ``template_class`` is accepted and
    unused. Needs an embedder (``embedder=``; by default ragbridge's offline one).
    """

    measure_name = "answer_relevance"
    deepeval_name = "Turn Relevancy"

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        window_size: int = 10,
        template_class: str | None = None,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        self.template_class = template_class
        super().__init__(
            threshold,
            model,
            system_one_model,
            eval_mode,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            window_size,
            flaky,
            evaluation_template,
            provider=provider,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )


class TurnContextualPrecisionMetric(_Windowed):
    """ragbridge's ``context_precision`` on each assistant turn that retrieved, averaged, as
    DeepEval's ``TurnContextualPrecisionMetric``: each context judged useful for the turn's
    reference (else the conversation's ``expected_outcome``, DeepEval's reference) and scored
    as rank-weighted precision. A turn that retrieved nothing is left out of the mean."""

    measure_name = "context_precision"
    deepeval_name = "Turn Contextual Precision"
    needs_outcome = True


class TurnContextualRecallMetric(_Windowed):
    """ragbridge's ``context_recall`` on each assistant turn that retrieved, averaged, as
    DeepEval's ``TurnContextualRecallMetric``: the share of the turn's reference (else the
    conversation's ``expected_outcome``) the turn's contexts back."""

    measure_name = "context_recall"
    deepeval_name = "Turn Contextual Recall"
    needs_outcome = True


class TurnContextualRelevancyMetric(_Windowed):
    """ragbridge's ``context_relevance`` on each assistant turn that retrieved, averaged, as
    DeepEval's ``TurnContextualRelevancyMetric``: the share of the turn's contexts relevant to
    its question read with the conversation so far. DeepEval asks one call per context; here
    all of a turn's contexts are judged in one call."""

    measure_name = "context_relevance"
    deepeval_name = "Turn Contextual Relevancy"


class KnowledgeRetentionMetric(DeepEvalConversationalMetric):
    """ragbridge's ``knowledge_retention`` on the whole conversation, as DeepEval's
    ``KnowledgeRetentionMetric``: the share of the assistant's turns that keep to what the user
    said before them (DeepEval's count too), from one judge call per conversation instead of
    one per turn. A conversation where the user states no fact is an error ("skipped: ..."),
    where DeepEval reports 1.0."""

    measure_name = "knowledge_retention"
    deepeval_name = "Knowledge Retention"
    per_turn = False


class ConversationCompletenessMetric(_Windowed):
    """ragbridge's ``conversation_completeness`` on the whole conversation, as DeepEval's
    ``ConversationCompletenessMetric``: the share of the user's intentions the assistant met,
    with the ``expected_outcome``, when the test case has one, counted as one more (DeepEval
    does not read it). One judge call per conversation (shared with `KnowledgeRetentionMetric`
    on one ``scorer=``); ``window_size`` (default 3, as DeepEval's, which does not use it
    either) is accepted."""

    measure_name = "conversation_completeness"
    deepeval_name = "Conversation Completeness"
    per_turn = False

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        window_size: int = 3,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        super().__init__(
            threshold,
            model,
            system_one_model,
            eval_mode,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            window_size,
            flaky,
            evaluation_template,
            provider=provider,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )
