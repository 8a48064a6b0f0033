"""ragbridge's measures behind DeepEval's own class names: change the import, keep the code.

`FaithfulnessMetric`, `AnswerRelevancyMetric`, `ContextualPrecisionMetric`,
`ContextualRecallMetric` and `HallucinationMetric` (all `DeepEvalNamedMetric`) are for code
written for DeepEval: its class names, constructor arguments, ``__name__`` (the results column),
required test case fields and error, strict mode, and direction. DeepEval 4.3 scores its
HallucinationMetric as agreement with ``LLMTestCase.context`` (1 is a pass, ``threshold`` a
minimum; before 4.x it was the share of contexts contradicted, ``threshold`` a maximum), so the
drop-in `HallucinationMetric` reads ``context`` and shows ``1 − hallucination``. Each class says
where its definition differs from DeepEval's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from typing_extensions import Unpack

from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import default_embedder, resolve_metrics
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import LLMTestCase, MissingTestCaseParamsError
from .metrics import RagbridgeMetric
from .models import judge_of_model
from .test_cases import ContextsFrom

__all__ = [
    "AnswerRelevancyMetric",
    "ContextualPrecisionMetric",
    "ContextualRecallMetric",
    "DeepEvalNamedMetric",
    "FaithfulnessMetric",
    "HallucinationMetric",
]

_ReqField = Literal["input", "actual_output", "expected_output", "retrieval_context", "context"]


class DeepEvalNamedMetric(RagbridgeMetric):
    """A ragbridge measure behind DeepEval's class name, arguments, column and direction.

    The subclasses (`FaithfulnessMetric`, `AnswerRelevancyMetric`, `ContextualPrecisionMetric`,
    `ContextualRecallMetric`, `HallucinationMetric`) take DeepEval's constructor arguments in
    DeepEval's order — ``threshold``, ``model`` (a model object or name, `judge_of_model`),
    ``include_reason``, ``async_mode``, ``strict_mode``, ``verbose_mode``, ``flaky`` — so that
    changing the import is the whole migration, and they behave as DeepEval's classes do where
    a user can see it:

    * ``__name__`` (the results-table column, the ``assert_test`` message) is DeepEval's
      (``"Faithfulness"``); a non-default ``provider=`` is appended (``"Faithfulness (offline)"``);
    * a test case missing a field DeepEval's class requires (or with an empty
      ``actual_output``) raises DeepEval's ``MissingTestCaseParamsError`` with DeepEval's
      message, so ``ErrorConfig(skip_on_missing_params=..., ignore_errors=...)`` acts the same;
    * ``strict_mode`` sets the threshold to 1 and a score below it to 0, as DeepEval's does;
    * success is ``score >= threshold`` for every class, HallucinationMetric included (DeepEval
      4.3's direction);
    * no "You're running DeepEval's latest ... Metric!" banner (it is not DeepEval's metric).

    The number is ragbridge's measure (one implementation, shared sub-results, cache, typed
    failures); each class says where its definition differs from DeepEval's. ``provider=``
    picks another registered provider (``"offline"``, ``"nli"``, or ``"deepeval"`` for
    DeepEval's own definition on the ragbridge judge and cache). With no judge given, DeepEval's
    default model is used, as DeepEval does; a measure that needs an embedder and gets none
    uses ragbridge's offline default (all-MiniLM-L6-v2). ``judge=``, ``embedder=``, ``cache=``
    and the other `Settings` fields, ``settings=`` and ``scorer=`` mean what they mean for
    `RagbridgeMetric`.
    """

    measure_name: ClassVar[str]
    deepeval_name: ClassVar[str]
    required_fields: ClassVar[tuple[_ReqField, ...]]
    contexts_field: ClassVar[ContextsFrom] = "retrieval_context"

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        *,
        flaky: bool = False,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        contexts_from: ContextsFrom | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        metric = self._measure(metric, provider)
        if model is None and metric.needs_judge and not _given("judge", scorer, settings, options):
            options["judge"] = judge_of_model(None)  # DeepEval's default model
        if metric.needs_embedder and not _given("embedder", scorer, settings, options):
            options["embedder"] = default_embedder()
        self.flaky = flaky
        super().__init__(
            metric,
            threshold=threshold,
            include_reason=include_reason,
            strict_mode=strict_mode,
            async_mode=async_mode,
            verbose_mode=verbose_mode,
            scorer=scorer,
            contexts_from=self.contexts_field if contexts_from is None else contexts_from,
            model=model,
            settings=settings,
            **options,
        )

    def _measure(self, metric: Metric | None, provider: str | None) -> Metric:
        """The measure this class scores; ``metric=`` is how DeepEval's copies (one per test
        case) get the resolved measure back, and it must be this class's measure."""
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

    def _sample(self, test_case: LLMTestCase) -> Sample:
        # DeepEval's check and wording (deepeval.metrics.utils.check_llm_test_case_params):
        # a None field is missing, and so is an empty actual_output.
        required = self._required()
        empty = getattr(test_case, "actual_output", None) == ""
        if empty and "actual_output" in required:
            self._missing(f"'actual_output' cannot be empty for the '{self.__name__}' metric")
        missing = [f"'{f}'" for f in required if getattr(test_case, f, None) is None]
        if missing:
            if len(missing) <= 2:
                listed = " and ".join(missing)
            else:
                listed = ", ".join(missing[:-1]) + ", and " + missing[-1]
            self._missing(f"{listed} cannot be None for the '{self.__name__}' metric")
        return super()._sample(test_case)

    def _required(self) -> tuple[str, ...]:
        """The test case fields checked before scoring (the class's; `GEval`'s are its
        ``evaluation_params``)."""
        return self.required_fields

    def _missing(self, message: str) -> None:
        self.error = message
        self.success = False
        raise MissingTestCaseParamsError(message)

    def _shown(self, value: float) -> float:
        shown = super()._shown(value)
        threshold = self.threshold
        if self.strict_mode and threshold is not None and shown < threshold:
            return 0.0
        return shown


def _given(
    setting: str, scorer: Scorer | None, settings: Settings | None, options: Mapping[str, Any]
) -> bool:
    """Whether the judge (or embedder) is named already: as a keyword, in ``settings=``, or by
    ``scorer=`` (which holds its own); if not, the drop-in supplies DeepEval's default."""
    in_settings = settings is not None and getattr(settings, setting) is not None
    return scorer is not None or options.get(setting) is not None or in_settings


class FaithfulnessMetric(DeepEvalNamedMetric):
    """ragbridge's ``faithfulness`` as DeepEval's ``FaithfulnessMetric``: the share of the
    answer's claims that ``retrieval_context`` supports.

    Differs from DeepEval's: a claim the contexts neither support nor contradict counts as
    unsupported (DeepEval counts it as faithful unless ``penalize_ambiguous_claims``), and an
    answer with no claim is an error, not 1.0.
    """

    measure_name = "faithfulness"
    deepeval_name = "Faithfulness"
    required_fields = ("input", "actual_output", "retrieval_context")


class AnswerRelevancyMetric(DeepEvalNamedMetric):
    """ragbridge's ``answer_relevance`` as DeepEval's ``AnswerRelevancyMetric``.

    A different definition: ragbridge generates the questions the answer would answer and
    compares them with ``input`` by embedding similarity (RAGAS's definition), with a
    noncommittal answer scored 0; DeepEval scores the share of the answer's statements the
    judge finds relevant to ``input``. ``provider="deepeval"`` gives DeepEval's definition on
    the ragbridge judge. Needs an embedder (``embedder=``; by default ragbridge's offline one).
    """

    measure_name = "answer_relevance"
    deepeval_name = "Answer Relevancy"
    required_fields = ("input", "actual_output")


class ContextualPrecisionMetric(DeepEvalNamedMetric):
    """ragbridge's ``context_precision`` as DeepEval's ``ContextualPrecisionMetric``: each
    passage of ``retrieval_context`` judged useful for ``expected_output`` or not, scored as
    rank-weighted precision — DeepEval's definition too."""

    measure_name = "context_precision"
    deepeval_name = "Contextual Precision"
    required_fields = ("input", "retrieval_context", "expected_output")


class ContextualRecallMetric(DeepEvalNamedMetric):
    """ragbridge's ``context_recall`` as DeepEval's ``ContextualRecallMetric``: the share of
    ``expected_output``'s statements that ``retrieval_context`` backs — DeepEval's definition
    too."""

    measure_name = "context_recall"
    deepeval_name = "Contextual Recall"
    required_fields = ("input", "retrieval_context", "expected_output")


class HallucinationMetric(DeepEvalNamedMetric):
    """DeepEval's ``HallucinationMetric`` on ragbridge's ``hallucination``, read as DeepEval 4.3
    reads it: checked against ``LLMTestCase.context`` (not ``retrieval_context``), and scored as
    agreement — ``score = 1 − hallucination``, 1 is a pass, ``threshold`` is a minimum.

    DeepEval 4.3 turned its HallucinationMetric around (it warns: "now scores in the same
    direction as every other deepeval metric"); before, the score was the share of contexts
    contradicted and ``threshold`` a maximum. That reading is ``as_deepeval_metric(
    "hallucination", contexts_from="context")``. Differs from DeepEval's: ragbridge counts the
    answer's claims the contexts contradict *or leave unsupported*; DeepEval counts the
    contexts the output contradicts (an unsupported detail is forgiven). ``provider="nli"``
    counts contradictions only.
    """

    measure_name = "hallucination"
    deepeval_name = "Hallucination"
    required_fields = ("input", "actual_output", "context")
    contexts_field = "context"
    _complement = True

    def _explain(self, score: Score) -> str:
        assert score.value is not None
        head = (
            f"score {1.0 - score.value:.2f} = 1 − hallucination {score.value:.2f} (1 is a pass): "
            f"DeepEval 4.3's direction (success when score >= threshold {self.threshold:g}); "
            "as_deepeval_metric('hallucination') shows the hallucination itself"
        )
        return f"{head}\n{explain(score)}"
