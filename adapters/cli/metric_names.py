"""Metric names as people type them: one rule for judge-less runs, and "did you mean".

**The no-judge rule** (the command line and the pytest plugin both follow it): a measure named
without a provider (``faithfulness``) uses its judge version when a judge is given and its offline
provider when none is (``faithfulness`` → ``faithfulness:offline``), and the substitution is said
out loud — the CLI prints it once, the plugin's assertion message names the provider. A measure
that exists only as a judge measure (``correctness``) is refused with the fix.

**Unknown names** are refused with the closest known names (``fathfulness`` → ``faithfulness``,
``recal@5`` → ``recall@5``; ``recall`` alone asks for a cutoff, ``recall@5``) and the list of what
exists: judge measures, offline measures and ranking measures.

This module imports only ragbridge's core, so the pytest plugin can use it without argparse.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragbridge.core.metrics import ALL_LLM_METRICS, OFFLINE_METRICS, by_name
from ragbridge.core.metrics.base import Metric
from ragbridge.core.metrics.ranking import RankingMetric

__all__ = [
    "RANKING_NAMES",
    "JudgeOnlyError",
    "NoJudgeChoice",
    "UnknownMetricError",
    "choose_without_judge",
    "parse_metric",
    "unknown_metric_message",
]

RANKING_CUT_NAMES: tuple[str, ...] = (
    "recall",
    "precision",
    "hit_rate",
    "ndcg",
    "ndcg_exp",
    "map",
    "f1",
)
"""Ranking measures that take a cutoff: ``recall@5``."""
RANKING_PLAIN_NAMES: tuple[str, ...] = (
    "mrr",
    "ndcg",
    "ndcg_exp",
    "average_precision",
    "map",
    "r_precision",
    "no_answer",
)
"""Ranking measures over the whole ranking: ``mrr``."""
RANKING_NAMES: tuple[str, ...] = (
    *(f"{n}@k" for n in RANKING_CUT_NAMES),
    *(n for n in RANKING_PLAIN_NAMES if n not in {"ndcg", "ndcg_exp", "map"}),
)
EXAMPLE_CUTOFF = 5


class UnknownMetricError(ValueError):
    """A metric name nothing answers to; the message suggests the closest names."""


class JudgeOnlyError(ValueError):
    """Measures that exist only as judge measures were named and there is no judge."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        super().__init__(", ".join(self.names))


def _judge_names() -> list[str]:
    return [cls.name for cls in ALL_LLM_METRICS]


def _offline_names() -> list[str]:
    own = [cls.name for cls in OFFLINE_METRICS]
    return own + [f"{cls.name}:offline" for cls in ALL_LLM_METRICS if "offline" in cls.providers]


def _closest(word: str, candidates: Iterable[str]) -> list[str]:
    pool = list(dict.fromkeys(candidates))
    return difflib.get_close_matches(word.lower(), pool, n=3, cutoff=0.7)


def _suggestions(name: str) -> list[str]:
    base, colon, provider = name.strip().partition(":")
    base = base.strip()
    cut = re.fullmatch(r"(?P<base>.+?)@(?P<k>\d+)", base)
    if cut is not None:
        found = _closest(cut["base"], RANKING_CUT_NAMES)
        return [f"{f}@{cut['k']}" for f in found]
    plain = base.lower()
    if plain in RANKING_CUT_NAMES:  # "recall" alone: it needs a cutoff
        return [f"{plain}@{EXAMPLE_CUTOFF}"]
    measure_names = [*_judge_names(), *(cls.name for cls in OFFLINE_METRICS)]
    found = _closest(plain, [*measure_names, *RANKING_PLAIN_NAMES])
    close_cut = _closest(plain, RANKING_CUT_NAMES)
    found += [f"{f}@{EXAMPLE_CUTOFF}" for f in close_cut if f not in found]
    return [f"{f}{colon}{provider}" if f in measure_names else f for f in found]


def unknown_metric_message(name: str) -> str:
    """``unknown metric 'fathfulness'; did you mean faithfulness? judge measures: …``."""
    hints = _suggestions(name)
    base = name.strip().lower()
    if base in RANKING_CUT_NAMES:
        head = f"{name!r} needs a cutoff: {base}@k, e.g. {base}@{EXAMPLE_CUTOFF}"
    else:
        head = f"unknown metric {name!r}"
        if hints:
            head += f"; did you mean {' or '.join(hints)}?"
    return (
        f"{head} — judge measures: {', '.join(_judge_names())}; "
        f"offline measures: {', '.join(_offline_names())}; "
        f"ranking measures: {', '.join(RANKING_NAMES)}"
    )


def parse_metric(name: str) -> Metric:
    """The metric ``name`` names (a measure, ``measure:provider`` or a ranking measure).

    Raises `UnknownMetricError` with suggestions, or ValueError for a known measure with an
    unknown provider (its message lists the providers).
    """
    text = name.strip()
    if "@" not in text:
        try:
            return by_name(text)
        except KeyError as exc:
            message = str(exc).strip("'\"")
            if "has no provider" in message:
                raise ValueError(message) from None
    try:
        return RankingMetric(text)
    except ValueError as exc:
        if "count, not a per-sample score" in str(exc):
            raise ValueError(str(exc)) from None
        raise UnknownMetricError(unknown_metric_message(text)) from None


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
        elif "offline" in type(metric).providers:
            offline = parse_metric(f"{metric.name}:offline")
            chosen.append(offline)
            substituted.append((item.strip(), f"{metric.name}:offline"))
        else:
            judge_only.append(metric.name)
    if judge_only:
        raise JudgeOnlyError(judge_only)
    return NoJudgeChoice(chosen, substituted)
