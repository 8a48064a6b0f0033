"""DeepEval's agent metrics on ragbridge's measures: change the import, keep the code.

``from deepeval.metrics import ToolCorrectnessMetric, TaskCompletionMetric`` becomes ``from
ragbridge.adapters.deepeval import ToolCorrectnessMetric, TaskCompletionMetric``; the
constructors (DeepEval's arguments, in DeepEval's order, with its defaults), the results
columns (``"Tool Correctness"``, ``"Task Completion"``), the required test case fields and
DeepEval's error for a missing one, ``measure``/``a_measure``, ``deepeval.assert_test`` and
``deepeval.evaluate`` stay as they were. The test case is read with `from_test_case`, so
``tools_called`` is the sample's ``trajectory`` and ``expected_tools`` its
``reference_tool_calls`` (`ragbridge.adapters.deepeval.tool_calls`).

* `ToolCorrectnessMetric` needs no judge and gives DeepEval's number on the same test case
  (`ragbridge.adapters.deepeval.tool_correctness`: where DeepEval's definition is odd and what
  ``compat=False`` changes). ``available_tools`` (DeepEval's LLM check of whether the right
  tools were chosen from those available) is refused: ragbridge compares calls only. ``model``,
  ``system_one_model``, ``eval_mode`` and ``evaluation_template`` serve only that check in
  DeepEval, so they are accepted and unused, as DeepEval leaves them unused without
  ``available_tools``. Unlike DeepEval's, ``measure`` returns the score in async mode too.
* `TaskCompletionMetric` is ragbridge's ``task_completion`` (`ragbridge.core.agent.goal`): one
  judge call per test case (DeepEval makes two: extract the task and outcome, then judge)
  states the task, lists what it asks for and whether the outcome — the tool calls made and
  the final output — delivers each; the score is the share delivered. ``task=`` is what the
  agent had to do, judged in place of ``input`` (DeepEval likewise uses it instead of the task
  it would extract). ``model=`` is the judge (`judge_of_model`); ``system_one_model``,
  ``eval_mode`` other than ``"llm"`` and a custom ``evaluation_template`` are refused:
  ragbridge judges with its own prompt. DeepEval's traced evaluations hand the metric a trace;
  this one reads the test case's ``input``, ``actual_output`` and ``tools_called`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.metrics.base import Metric
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import LLMTestCase
from .conversation_metrics import _refuse_deepeval_only
from .dropins import DeepEvalNamedMetric
from .tool_correctness import ToolCorrectness

__all__ = ["TaskCompletionMetric", "ToolCorrectnessMetric"]


class ToolCorrectnessMetric(DeepEvalNamedMetric):
    """DeepEval's ``ToolCorrectnessMetric`` on ragbridge's `ToolCorrectness`: the test case's
    ``tools_called`` against its ``expected_tools`` — by name and type, plus
    ``evaluation_params`` (``ToolCallParams.INPUT_PARAMETERS``, ``ToolCallParams.OUTPUT``);
    in any order (default), in order (``should_consider_ordering``) or one for one
    (``should_exact_match``). The same value as DeepEval's on the same test case; ``compat=
    False`` lets two identical calls match two expected ones (see `ToolCorrectness`).
    """

    measure_name = "tool_correctness"
    deepeval_name = "Tool Correctness"
    required_fields = ("input",)

    def __init__(
        self,
        available_tools: Sequence[Any] | None = None,
        threshold: float = 0.5,
        evaluation_params: Sequence[Any] = (),
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        should_exact_match: bool = False,
        should_consider_ordering: bool = False,
        flaky: bool = False,
        evaluation_template: Any = None,
        *,
        compat: bool = True,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if available_tools:
            raise ValueError(
                "available_tools= asks DeepEval's LLM judgement of which tools should have been "
                "chosen; ragbridge's ToolCorrectnessMetric compares the calls made with "
                "expected_tools only (use DeepEval's own metric for the tool-selection check)"
            )
        self.available_tools = available_tools
        self.evaluation_params = list(evaluation_params)
        self.should_exact_match = should_exact_match
        self.should_consider_ordering = should_consider_ordering
        self.compat = compat
        # Unused without available_tools (in DeepEval too); kept for DeepEval's copies.
        self.system_one_model = system_one_model
        self.eval_mode = eval_mode
        self.evaluation_template = evaluation_template
        self._strict = strict_mode
        super().__init__(
            threshold,
            None,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            flaky=flaky,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )

    def _measure(self, metric: Metric | None, provider: str | None) -> Metric:
        wanted = ToolCorrectness(
            evaluation_params=self.evaluation_params,
            should_exact_match=self.should_exact_match,
            should_consider_ordering=self.should_consider_ordering,
            strict_mode=self._strict,
            compat=self.compat,
        )
        if metric is None:
            return wanted
        if repr(metric) != repr(wanted):
            raise ValueError(f"metric= is {metric!r}, the arguments say {wanted!r}")
        return metric

    def _required(self) -> tuple[str, ...]:
        return ("input", "tools_called", "expected_tools")


class TaskCompletionMetric(DeepEvalNamedMetric):
    """DeepEval's ``TaskCompletionMetric`` on ragbridge's ``task_completion``: the share of the
    task's requirements that the agent's outcome (its tool calls and ``actual_output``)
    delivers, from one judge call (see the module). Differs from DeepEval's: the number is
    counted from a verdict per requirement, each with its reason, where DeepEval's judge gives
    one number; a test case's ``expected_output`` is shown to the judge as the reference
    outcome (DeepEval's metric does not read it); a sample with no output and no tool call is
    an error, not a score.
    """

    measure_name = "task_completion"
    deepeval_name = "Task Completion"
    required_fields = ("input", "actual_output")

    def __init__(
        self,
        threshold: float = 0.5,
        task: str | None = None,
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
        _refuse_deepeval_only(system_one_model, eval_mode, evaluation_template)
        if task is not None and not task.strip():
            raise ValueError("task= must say what the agent had to do (got an empty string)")
        self.task = task
        self.system_one_model = None
        self.eval_mode = eval_mode
        self.evaluation_template = None
        super().__init__(
            threshold,
            model,
            include_reason,
            async_mode,
            strict_mode,
            verbose_mode,
            flaky=flaky,
            provider=provider,
            metric=metric,
            scorer=scorer,
            settings=settings,
            **options,
        )

    def _sample(self, test_case: LLMTestCase) -> Sample:
        sample = super()._sample(test_case)
        if self.task is None:
            return sample
        return sample.model_copy(update={"question": self.task})
