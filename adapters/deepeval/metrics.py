"""ragbridge's measures as DeepEval metrics: `RagbridgeMetric` and `as_deepeval_metric`.

Why it is built this way:

* **A ragbridge failure is an error, never a score.** `RagbridgeMetric` sets ``error`` (and
  ``success=False``, ``score=None``) when the ragbridge `Score` failed, so DeepEval reports it as
  an errored metric instead of a low score. A *skipped* score (the measure does not apply, e.g.
  a ranking measure on an unlabelled sample) is reported the same way, as ``"skipped: <reason>"``:
  DeepEval has no "not applicable" outcome that does not either pass or abort the run.
* **ragbridge's direction.** A metric shows as ``ragbridge/<measure>``; for a measure where
  lower is better (``hallucination``) success is ``score <= threshold`` and the reason opens by
  saying so. DeepEval's own class names and directions are the drop-ins
  (`ragbridge.adapters.deepeval.dropins`).
* **Copies share one scorer.** DeepEval's ``evaluate`` copies a metric by calling its class
  again with the attributes named like its constructor arguments, so every argument is kept
  under its own name and the copies share one `Scorer` (its judge engine and cache).
* **``model=`` is DeepEval's name for the judge** (`judge_of_model`); giving ``model=`` and
  ``judge=`` is refused.
* **No "You're running DeepEval's latest ... Metric!" banner** for these metrics
  (`ragbridge.adapters.deepeval._banner`); DeepEval's own metrics keep theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from typing_extensions import Unpack

from ragbridge.core.judging.engine import cost_of
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import resolve_metrics
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._banner import silence_banner
from ._framework import BaseMetric, LLMTestCase
from .models import judge_of_model
from .test_cases import ContextsFrom, check_contexts_from, from_test_case

__all__ = ["MetricOptions", "RagbridgeMetric", "as_deepeval_metric"]


class MetricOptions(SettingsOptions, total=False):
    """`RagbridgeMetric`'s keyword arguments but ``scorer``, which `as_deepeval_metric` passes
    on to it: ``**options: Unpack[MetricOptions]``."""

    threshold: float
    include_reason: bool
    strict_mode: bool
    async_mode: bool
    verbose_mode: bool
    contexts_from: ContextsFrom
    model: Any


class RagbridgeMetric(BaseMetric):  # type: ignore[no-untyped-call]
    """A ragbridge metric as a DeepEval `BaseMetric`, for ``assert_test`` and ``evaluate``.

    ``measure``/``a_measure`` convert the test case with `from_test_case`, score it with a
    `Scorer`, and set ``score``, ``reason`` (`explain`: the reason and one line per claim or
    context verdict), ``success`` and, for a failed or skipped ragbridge score, ``error`` (score
    stays None). ``last_score`` keeps the full ragbridge `Score` of the latest measurement.

    Every constructor argument is kept under its own name because DeepEval's ``evaluate``
    copies metrics by calling the class again with them; copies share one `Scorer` (its judge
    engine and cache). Metrics built on one ``scorer=`` that holds several metrics share each
    test case's sub-results (the claims faithfulness extracts serve hallucination), as the
    Scorer keeps one record per test case content. How models are called is ``settings=`` or
    its fields as keywords (``judge=``, ``cache=``, ``price=``, ...), as for
    `ragbridge.core.evaluate`.
    """

    def __init__(
        self,
        metric: Metric | str,
        *,
        threshold: float = 0.5,
        include_reason: bool = True,
        strict_mode: bool = False,
        async_mode: bool = True,
        verbose_mode: bool = False,
        scorer: Scorer | None = None,
        contexts_from: ContextsFrom = "auto",
        model: Any = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie within [0, 1], got {threshold!r}")
        check_contexts_from(contexts_from)
        self.contexts_from: ContextsFrom = contexts_from
        resolved = metric if isinstance(metric, Metric) else resolve_metrics([metric])[0]
        if model is not None:
            _refuse_two_judges(scorer, settings, options)
            options["judge"] = judge_of_model(model)
        if scorer is None:
            scorer = Scorer([resolved], settings=settings, **options)
        elif resolved.name not in scorer.names:
            raise ValueError(f"scorer scores {scorer.names}, not {resolved.name!r}")
        self.scorer = scorer
        self.metric = resolved = scorer.metrics[scorer.names.index(resolved.name)]
        self.settings = scorer.settings  # kept by this name: DeepEval copies metrics by it
        # The model is not kept as ``self.model``: DeepEval's copies pass the scorer, which
        # holds it, and a second judge source would be refused.
        self.higher_is_better = type(resolved).higher_is_better != self._complement
        self.threshold = (1.0 if self.higher_is_better else 0.0) if strict_mode else threshold
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        engine = scorer.judge
        self.evaluation_model = engine.model if engine is not None else resolved.provider
        self.last_score: Score | None = None

    @property
    def __name__(self) -> str:
        # The provider is part of the name when it is not the default, so that
        # "faithfulness" and "faithfulness:offline" stay apart in DeepEval's results.
        metric = self.metric
        default = metric.providers[0] if metric.providers else metric.provider
        suffix = "" if metric.provider in (default, "retrieval") else f":{metric.provider}"
        return f"ragbridge/{metric.name}{suffix}"

    _complement: ClassVar[bool] = False
    """True when ``score`` is 1 − the measure's value (the direction flips with it)."""

    # DeepEval annotates ``-> float``; a failed or skipped score returns None (``error`` says why).
    def measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """Score ``test_case`` (``*args``/``**kwargs`` are DeepEval's display flags, unused)."""
        sample = self._sample(test_case)
        name = self.metric.name
        return self._apply(self.scorer.score(sample, only=[name])[name])

    async def a_measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """The async form of `measure`, on the caller's event loop."""
        sample = self._sample(test_case)
        name = self.metric.name
        scores = await self.scorer.ascore(sample, only=[name])
        return self._apply(scores[name])

    def _sample(self, test_case: LLMTestCase) -> Sample:
        return from_test_case(test_case, contexts_from=self.contexts_from)

    def _shown(self, value: float) -> float:
        """The score DeepEval shows for the measure's ``value``."""
        return 1.0 - value if self._complement else value

    def _explain(self, score: Score) -> str:
        """The reason DeepEval shows: ragbridge's explanation, headed by the direction of the
        score when lower is better, so that a 0.0 next to the drop-in's 1.0 reads right."""
        if self.higher_is_better or score.value is None:
            return explain(score)
        name = self.metric.name
        head = (
            f"score {score.value:.2f} = {name} {score.value:.2f}: ragbridge's direction, 0 is "
            f"best (success when score <= threshold {self.threshold:g})"
        )
        if name == "hallucination":
            head += "; DeepEval's HallucinationMetric (and its drop-in here) shows 1 − this"
        return f"{head}\n{explain(score)}"

    def _apply(self, score: Score) -> float | None:
        self.last_score = score
        self.score = None if score.value is None else self._shown(score.value)
        self.reason = None
        self.error = None
        # Run-level: retrieved ids that (almost) never match the labels, said on ranking scores.
        warnings = self.scorer.warnings if score.provider == "retrieval" else []
        notes = [f"warning: {w}" for w in warnings]
        if score.value is None:
            # "failed (kind): message" or "skipped: reason"
            self.error = "\n".join([explain(score), *notes])
        elif self.include_reason:
            self.reason = "\n".join([self._explain(score), *notes])
        elif notes:
            self.reason = "\n".join(notes)
        engine = self.scorer.judge
        cost = cost_of(score.usage, engine.price) if engine is not None else 0.0
        self.evaluation_cost = cost
        self.input_tokens = score.usage.prompt_tokens
        self.output_tokens = score.usage.completion_tokens
        self.success = self.is_successful()
        if self.verbose_mode:
            self.verbose_logs = self._verbose_logs(score)
        value: float | None = self.score
        return value

    def _verbose_logs(self, score: Score) -> str:
        usage = score.usage
        return "\n".join(
            [
                f"metric: {self.metric.name} (provider {score.provider})",
                f"judge: {score.judge_model}, prompt version {score.prompt_version}",
                f"usage: {usage.calls} calls ({usage.cached_calls} cached), "
                f"{usage.prompt_tokens}+{usage.completion_tokens} tokens",
                explain(score, limit=50),
            ]
        )

    def is_successful(self) -> bool:
        value: float | None = self.score
        threshold: float | None = self.threshold
        if self.error is not None or value is None or threshold is None:
            success = False
        elif self.higher_is_better:
            success = value >= threshold
        else:
            success = value <= threshold
        self.success = success
        return success


silence_banner(RagbridgeMetric)


def as_deepeval_metric(
    metric: Metric | str, *, settings: Settings | None = None, **options: Unpack[MetricOptions]
) -> RagbridgeMetric:
    """A DeepEval metric scoring ``metric`` (an object or a name like ``"faithfulness:offline"``).

    It shows as ``ragbridge/<measure>`` and keeps ragbridge's direction — the number every
    other ragbridge sink, report and gate shows for the measure: success is
    ``score >= threshold``, or ``score <= threshold`` for measures where lower is better
    (``hallucination``, as DeepEval's HallucinationMetric read before 4.x), and then the reason
    opens by saying so. For DeepEval's own names, arguments and directions use the drop-in
    classes (`FaithfulnessMetric`, ..., `HallucinationMetric`: 1 − hallucination, 1 a pass).
    ``strict_mode`` sets the threshold to 1 (0 for lower-is-better). A failed or skipped
    ragbridge score sets ``error``. ``contexts_from`` picks the test case field checked as the
    contexts (`from_test_case`): by default ``retrieval_context``, or ``context`` when a test
    case has only that one, as in DeepEval's own HallucinationMetric example. ``model=`` is
    DeepEval's name for ``judge=`` (`judge_of_model`). ``options`` are `MetricOptions`, with
    `RagbridgeMetric`'s defaults.
    """
    return RagbridgeMetric(metric, settings=settings, **options)


def _refuse_two_judges(
    scorer: Scorer | None, settings: Settings | None, options: Mapping[str, Any]
) -> None:
    given = [
        name
        for name, present in (
            ("judge=", options.get("judge") is not None),
            ("settings.judge", settings is not None and settings.judge is not None),
            ("scorer= (it holds its judge)", scorer is not None),
        )
        if present
    ]
    if given:
        raise TypeError(
            f"model= and {given[0]} both name the judge; pass it once (model= is DeepEval's "
            "name for judge=)"
        )
