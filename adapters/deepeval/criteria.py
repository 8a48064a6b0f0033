"""DeepEval's ``GEval`` on ragbridge's scored criterion: change the import, keep the code.

``from deepeval.metrics import GEval`` becomes ``from ragbridge.adapters.deepeval import GEval``;
the constructor, the results column (``"Correctness [GEval]"``), ``measure``/``a_measure``,
``assert_test`` and ``deepeval.evaluate`` stay as they were. The number is ragbridge's scored
criterion (`ragbridge.core.criteria.Criterion`): the evaluation steps are written once per run
(and kept in the reply cache) instead of once per test case, the reply is validated against the
scale, the criterion is data inside a delimited block, and a judge returning log-probabilities
gets G-Eval's probability-weighted score.

How DeepEval's arguments are read (`geval_criterion`):

* ``evaluation_params`` are the fields the judge sees (``reads``): ``INPUT`` → question,
  ``ACTUAL_OUTPUT`` → answer, ``EXPECTED_OUTPUT`` → reference, ``RETRIEVAL_CONTEXT`` →
  contexts, and ``CONTEXT`` → contexts read from ``LLMTestCase.context`` (a criterion reads one
  list of passages: both at once is refused). ``METADATA``, ``TAGS`` and the tool and MCP
  fields have no criterion field and are refused; so is no ``evaluation_params`` (DeepEval then
  evaluates a trace).
* The scale is DeepEval's: 0-10, normalised to [0, 1] as DeepEval does. ``strict_mode=True``
  is DeepEval's binary form: a 0/1 scale, threshold 1, and the score is the integer the judge
  gave (no weighting), as DeepEval's.
* ``name`` is the column; the ragbridge measure is named after it (`measure_name`:
  ``"Answer Correctness"`` → ``Answer_Correctness``).

Refused because they would silently change what is measured: ``rubric=`` (ragbridge's `Rubric`
has level descriptions but no criterion and steps, so DeepEval's criterion would be dropped: use
`ragbridge.core.criteria.Rubric` with ``as_deepeval_metric``), ``top_logprobs`` other than 20
(ragbridge asks for 20), and a custom ``evaluation_template``. Accepted and ignored:
``async_mode`` (scoring is async underneath either way). ``_include_g_eval_suffix=False`` drops
`` [GEval]`` from the column, as in DeepEval. Confident AI's ``upload``/``pull`` are not
offered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from . import _framework  # noqa: F401  (first: DeepEval through the one guard)

# isort: split
from deepeval.metrics.g_eval import g_eval as _deepeval_g_eval
from deepeval.metrics.g_eval.utils import validate_criteria_and_evaluation_steps
from deepeval.test_case import SingleTurnParams

from ragbridge.core.criteria import Criterion
from ragbridge.core.criteria.measures import LOGPROBS
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Score
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.settings import Settings, SettingsOptions

from .dropins import DeepEvalNamedMetric
from .test_cases import ContextsFrom

__all__ = ["GEval", "geval_criterion", "measure_name"]

SCALE = (0, 10)
"""DeepEval's G-Eval scale when no rubric is given (``get_score_range``)."""

STRICT_SCALE = (0, 1)
"""DeepEval's ``strict_mode`` scale: follows the criterion fully (1) or not (0)."""

STEPS_ONLY = "Meet every evaluation step."
"""The criterion of a GEval given ``evaluation_steps`` only (DeepEval's criterion serves only
to write the steps, so with the steps given there is none)."""

_READS: dict[SingleTurnParams, tuple[str, ContextsFrom]] = {
    SingleTurnParams.INPUT: ("question", "auto"),
    SingleTurnParams.ACTUAL_OUTPUT: ("answer", "auto"),
    SingleTurnParams.EXPECTED_OUTPUT: ("reference", "auto"),
    SingleTurnParams.RETRIEVAL_CONTEXT: ("contexts", "retrieval_context"),
    SingleTurnParams.CONTEXT: ("contexts", "context"),
}


def measure_name(name: str) -> str:
    """The ragbridge measure name of a GEval ``name``: a criterion's name is a letter, then
    letters, digits or underscores; anything else becomes ``_`` (``"Answer Correctness"`` →
    ``Answer_Correctness``), and a name not starting with a letter gets ``geval_`` first."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"GEval: name must be non-empty text, got {name!r}")
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", name.strip()).strip("_")
    return slug if slug[:1].isalpha() else f"geval_{slug}".rstrip("_")


def _reads(evaluation_params: Sequence[Any] | None) -> tuple[tuple[str, ...], ContextsFrom]:
    """The fields a GEval's ``evaluation_params`` show the judge, and where its contexts come
    from (``"auto"`` when it reads none)."""
    if evaluation_params is None:
        raise ValueError(
            "GEval without evaluation_params evaluates a DeepEval trace; ragbridge's GEval "
            "scores test cases: pass evaluation_params=[SingleTurnParams.INPUT, ...]"
        )
    if len(evaluation_params) == 0:
        raise ValueError("evaluation_params cannot be an empty list.")  # DeepEval's words
    reads: list[str] = []
    contexts_from: ContextsFrom = "auto"
    for param in evaluation_params:
        if not isinstance(param, SingleTurnParams):
            raise TypeError(
                f"evaluation_params takes SingleTurnParams (LLMTestCaseParams) members, got "
                f"{param!r}"
            )
        if param not in _READS:
            raise ValueError(
                f"GEval: {param.name} has no criterion field in ragbridge (a criterion reads "
                "the input, actual output, expected output and one list of passages); for a "
                "metadata key use ragbridge.core.criteria.Criterion(reads=('metadata.<key>', "
                "...)) with as_deepeval_metric"
            )
        field, source = _READS[param]
        if source != "auto":
            if contexts_from not in ("auto", source):
                raise ValueError(
                    "GEval: CONTEXT and RETRIEVAL_CONTEXT together are not supported: a "
                    "ragbridge criterion reads one list of passages; keep one of them"
                )
            contexts_from = source
        if field not in reads:
            reads.append(field)
    return tuple(reads), contexts_from


def geval_criterion(
    name: str,
    evaluation_params: Sequence[Any] | None,
    criteria: str | None = None,
    evaluation_steps: Sequence[str] | None = None,
    *,
    threshold: float = 0.5,
    strict_mode: bool = False,
) -> tuple[Criterion, ContextsFrom]:
    """The ragbridge `Criterion` a DeepEval GEval's arguments describe, and the test case field
    its contexts come from. Raises DeepEval's own errors for DeepEval's own mistakes (no
    criteria and no steps, an empty criterion) and ValueError for what ragbridge cannot read."""
    given = None if evaluation_steps is None else list(evaluation_steps)
    validate_criteria_and_evaluation_steps(criteria, given)
    steps = given or None
    reads, contexts_from = _reads(evaluation_params)
    text = criteria if criteria is not None else STEPS_ONLY
    meaning = criteria if criteria is not None else (steps or [STEPS_ONLY])[0]
    spec = Criterion(
        name=measure_name(name),
        criteria=text,
        evaluation_steps=tuple(steps) if steps else None,
        reads=reads,
        scale=STRICT_SCALE if strict_mode else SCALE,
        threshold=1.0 if strict_mode else threshold,
        meaning=meaning,
    )
    return spec, contexts_from


class GEval(DeepEvalNamedMetric):
    """DeepEval's ``GEval`` with ragbridge's scored criterion behind it.

    ``GEval(name, evaluation_params, criteria, evaluation_steps, rubric, model, threshold,
    top_logprobs, async_mode, strict_mode, verbose_mode, _include_g_eval_suffix, flaky,
    evaluation_template)`` in DeepEval's order and with its defaults; see the module for how
    each is read and which are refused. ``model=`` is DeepEval's (a name DeepEval resolves, a
    ``DeepEvalBaseLLM``, or any ragbridge judge); ``judge=``, ``cache=`` and the other
    `Settings` fields, ``settings=`` and ``scorer=`` mean what they mean for the other
    drop-ins. ``score`` is in [0, 1], ``success`` is ``score >= threshold``, ``reason`` is the
    judge's with the steps' origin; ``last_score.details`` holds the steps, their version, the
    raw score and whether it was weighted by log-probabilities. A test case missing one of
    ``evaluation_params`` raises DeepEval's ``MissingTestCaseParamsError`` with DeepEval's
    message, before any judge call.
    """

    def __init__(
        self,
        name: str,
        evaluation_params: list[Any] | None = None,
        criteria: str | None = None,
        evaluation_steps: list[str] | None = None,
        rubric: list[Any] | None = None,
        model: Any = None,
        threshold: float = 0.5,
        top_logprobs: int = 20,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        _include_g_eval_suffix: bool = True,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        include_reason: bool = True,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        contexts_from: ContextsFrom | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        _refuse_changed_meaning(rubric, top_logprobs, evaluation_template, threshold)
        spec, source = geval_criterion(
            name,
            evaluation_params,
            criteria,
            evaluation_steps,
            threshold=threshold,
            strict_mode=strict_mode,
        )
        if contexts_from is not None and source != "auto" and contexts_from != source:
            raise ValueError(
                f"contexts_from={contexts_from!r} disagrees with evaluation_params, which "
                f"read {source!r}"
            )
        # Kept under the constructor's names: DeepEval's evaluate copies a metric by calling
        # its class again with them (`deepeval.metrics.utils.copy_metrics`).
        self.name = name
        self.evaluation_params = list(evaluation_params or [])
        self.criteria = criteria
        self.evaluation_steps = evaluation_steps
        self.rubric = rubric
        self.top_logprobs = top_logprobs
        self._include_g_eval_suffix = _include_g_eval_suffix
        self.evaluation_template = evaluation_template
        self.criterion = spec
        if metric is None:
            metric = spec.metric()
        elif getattr(metric, "spec", None) != spec:
            raise ValueError(f"metric= scores {metric.name!r}, not this GEval's criterion")
        super().__init__(
            threshold=spec.threshold,
            model=model,
            include_reason=include_reason,
            async_mode=async_mode,
            strict_mode=strict_mode,
            verbose_mode=verbose_mode,
            flaky=flaky,
            metric=metric,
            scorer=scorer,
            contexts_from=source if contexts_from is None else contexts_from,
            settings=settings,
            **options,
        )

    def _measure(self, metric: Metric | None, provider: str | None) -> Metric:
        assert metric is not None  # built in __init__
        return metric

    @property
    def __name__(self) -> str:
        return f"{self.name} [GEval]" if self._include_g_eval_suffix else self.name

    def _required(self) -> tuple[str, ...]:
        return tuple(str(p.value) for p in self.evaluation_params)

    def _apply(self, score: Score) -> float | None:
        """As for every drop-in; in ``strict_mode`` the score is the integer the judge gave
        (DeepEval's ``int(score)``), not the probability-weighted mean."""
        details = score.details if isinstance(score.details, dict) else {}
        verdict = details.get("score") if score.value is not None else None
        if not self.strict_mode or not isinstance(verdict, int):
            return super()._apply(score)
        value = super()._apply(score.model_copy(update={"value": float(verdict)}))
        self.last_score = score
        return value


def _refuse_changed_meaning(
    rubric: Any, top_logprobs: Any, evaluation_template: Any, threshold: Any
) -> None:
    """Refuse, naming the way out, the GEval arguments ragbridge would otherwise ignore while
    they change what is measured."""
    if rubric:
        raise ValueError(
            "GEval(rubric=...) is not supported: ragbridge's Rubric has one description per "
            "level and no criterion or steps, so DeepEval's criterion would be dropped. Use "
            "ragbridge.core.criteria.Rubric(name, rubrics={level: description}, reads=...) "
            "with as_deepeval_metric(...), or GEval without rubric (a 0-10 scale)"
        )
    if top_logprobs != LOGPROBS:
        raise ValueError(
            f"top_logprobs={top_logprobs!r}: ragbridge's G-Eval asks for {LOGPROBS} "
            "alternatives per token (DeepEval's default); other values are not supported"
        )
    own = _deepeval_g_eval.GEvalTemplate
    if evaluation_template is not None and evaluation_template is not own:
        raise ValueError(
            "evaluation_template= is not supported: ragbridge's G-Eval prompts are its own "
            "(the criterion and steps are data in delimited blocks)"
        )
    if threshold is None:
        raise ValueError("threshold=None is not supported: give a number in [0, 1]")
