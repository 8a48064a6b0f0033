"""No "You're running DeepEval's latest <name> Metric!" banner for ragbridge's metrics.

DeepEval prints that line from ``format_metric_description`` (``deepeval.metrics.indicator``)
for every metric: ``evaluate()`` prints it once per metric before the run, and its progress bars
use it as their label. Only ``DisplayConfig(show_indicator=False)`` turns it off, for all
metrics at once, and a ragbridge metric is not DeepEval's. So the name is wrapped in the two
modules that call it (`silence_banner`): for ragbridge's metrics the banner prints nothing and a
progress bar reads "ragbridge <name> (using <judge>, ...)"; any other metric gets DeepEval's own
function, unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

__all__ = ["silence_banner"]


class _NothingToPrint:
    """A rich renderable that renders nothing: ``console.print`` of it prints no line."""

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        return iter(())

    def __str__(self) -> str:
        return ""


def _no_banner(metric: Any, async_mode: bool | None = None) -> Any:
    return _NothingToPrint()


def _progress_label(metric: Any, async_mode: bool | None = None) -> str:
    run_async = metric.async_mode if async_mode is None else async_mode
    return (
        f"ragbridge {metric.__name__} (using {metric.evaluation_model}, "
        f"strict={metric.strict_mode}, async_mode={run_async})"
    )


_OURS: list[type] = []
"""Every class `silence_banner` was called for (the wrapper reads it at call time)."""


def silence_banner(ours: type) -> None:
    """Wrap DeepEval's ``format_metric_description`` so instances of ``ours`` print no banner.

    Idempotent: a function already wrapped (``__ragbridge_wraps__``) is left as it is; a class
    given later (the conversational drop-ins) joins the classes it silences.
    """
    if ours not in _OURS:
        _OURS.append(ours)
    for module_name, own in (
        ("deepeval.evaluate.evaluate", _no_banner),
        ("deepeval.metrics.indicator", _progress_label),
    ):
        module = importlib.import_module(module_name)
        original = getattr(module, "format_metric_description", None)
        if original is None or hasattr(original, "__ragbridge_wraps__"):
            continue

        def describe(
            metric: Any,
            async_mode: bool | None = None,
            *,
            _deepeval: Any = original,
            _own: Any = own,
        ) -> Any:
            if isinstance(metric, tuple(_OURS)):
                return _own(metric, async_mode)
            return _deepeval(metric, async_mode)

        describe.__ragbridge_wraps__ = original  # type: ignore[attr-defined]
        describe.__wrapped__ = original  # type: ignore[attr-defined]
        module.format_metric_description = describe  # type: ignore[attr-defined]
