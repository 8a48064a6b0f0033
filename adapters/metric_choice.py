"""Metric names as people type them: one rule for judge-less runs, and "did you mean".

**The no-judge rule** (the command line and the pytest plugin both follow it): a measure named
without a provider (``faithfulness``) uses its judge version when a judge is given and its offline
provider when none is (``faithfulness`` → ``faithfulness:offline``), and the substitution is said
out loud — the CLI prints it once, the plugin's assertion message names the provider. A measure
that exists only as a judge measure (``correctness``) is refused with the fix.

**Unknown names** are refused with the closest known names (``fathfulness`` → ``faithfulness``,
``recal@5`` → ``recall@5``; ``recall`` alone asks for a cutoff, ``recall@5``) and the list of what
exists: judge measures, offline measures and ranking measures.

This module imports only ragbridge's core: the command line, the pytest plugin and anything else
that takes metric names share it without importing the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragbridge.core.metrics import resolve
from ragbridge.core.metrics.base import Metric
from ragbridge.core.registry import REGISTRY, UnknownMeasureError

__all__ = [
    "RANKING_NAMES",
    "JudgeOnlyError",
    "NoJudgeChoice",
    "UnknownMetricError",
    "choose_without_judge",
    "parse_metric",
    "unknown_metric_message",
]

EXAMPLE_CUTOFF = 5


def _names(kind: str, *, plugins: bool = True) -> list[str]:
    return [m.name for m in REGISTRY.measures(kind=kind, plugins=plugins)]


# Built in: listing them at import must not load the plugins (an import of each adapter).
RANKING_NAMES: tuple[str, ...] = tuple(_names("ranking", plugins=False))
"""The ranking measures as the messages list them: ``recall@k``, ``mrr``, ..."""


class UnknownMetricError(ValueError):
    """A metric name nothing answers to; the message suggests the closest names."""


class JudgeOnlyError(ValueError):
    """Measures that exist only as judge measures were named and there is no judge."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        super().__init__(", ".join(self.names))


def _groups() -> dict[str, list[str]]:
    """Names by what they need: judge measures, offline ones (with their provider), the rest."""
    judge: list[str] = []
    offline_only: list[str] = []
    offline_variants: list[str] = []
    for measure, provider in REGISTRY.pairs():
        if measure.kind != "judge":
            continue
        default = REGISTRY.providers(measure.name)[0].name
        if provider.name == default and "judge" in provider.needs:
            judge.append(measure.name)
        elif provider.name == "offline" and provider.name == default:
            offline_only.append(measure.name)
        elif provider.name == "offline":
            offline_variants.append(provider.key)
    return {
        "judge measures": judge,
        "offline measures": offline_only + offline_variants,
        "string measures": _names("string"),
        "ranking measures": list(RANKING_NAMES),
    }


def unknown_metric_message(name: str) -> str:
    """``unknown metric 'fathfulness'; did you mean faithfulness? judge measures: …``."""
    hints = REGISTRY.suggest(name, cutoff_example=EXAMPLE_CUTOFF)
    base = name.strip().lower()
    if f"{base}@k" in RANKING_NAMES and base not in RANKING_NAMES:
        head = f"{name!r} needs a cutoff: {base}@k, e.g. {base}@{EXAMPLE_CUTOFF}"
    else:
        head = f"unknown metric {name!r}"
        if hints:
            head += f"; did you mean {' or '.join(hints)}?"
    listed = "; ".join(
        f"{group}: {', '.join(names)}" for group, names in _groups().items() if names
    )
    return f"{head} — {listed}"


def parse_metric(name: str) -> Metric:
    """The metric ``name`` names (`ragbridge.core.metrics.resolve`).

    Raises `UnknownMetricError` with suggestions, or ValueError for a known measure with an
    unknown provider (its message lists the providers).
    """
    try:
        return resolve(name)
    except UnknownMeasureError as exc:
        if "has no provider" in str(exc):
            raise ValueError(str(exc)) from None
        raise UnknownMetricError(unknown_metric_message(name.strip())) from None


@dataclass(frozen=True)
class NoJudgeChoice:
    """What `choose_without_judge` picked: the metrics and the substitutions it made."""

    metrics: list[Metric]
    substituted: list[tuple[str, str]]

    def note(self) -> str | None:
        """``faithfulness → faithfulness:offline (no --judge)``, or None when nothing changed."""
        if not self.substituted:
            return None
        pairs = ", ".join(f"{a} → {b}" for a, b in self.substituted)
        return f"{pairs} (no --judge)"


def choose_without_judge(items: Iterable[Metric | str], *, have_judge: bool) -> NoJudgeChoice:
    """Apply the no-judge rule to names and metric objects (objects are kept as given).

    With a judge every name means its default (judge) version. Without one, a judge measure
    named without a provider becomes its offline version; one without an offline provider
    raises `JudgeOnlyError` naming all such measures.
    """
    chosen: list[Metric] = []
    substituted: list[tuple[str, str]] = []
    judge_only: list[str] = []
    for item in items:
        if isinstance(item, Metric):
            chosen.append(item)
            continue
        metric = parse_metric(item)
        if have_judge or not metric.needs_judge or ":" in item:
            chosen.append(metric)
        elif "offline" in metric.providers:
            offline = parse_metric(f"{metric.name}:offline")
            chosen.append(offline)
            substituted.append((item.strip(), f"{metric.name}:offline"))
        else:
            judge_only.append(metric.name)
    if judge_only:
        raise JudgeOnlyError(judge_only)
    return NoJudgeChoice(chosen, substituted)
