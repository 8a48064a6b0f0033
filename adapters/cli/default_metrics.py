"""The default metric set, fitted to the fields the samples carry.

``ragbridge eval data.jsonl`` with no ``--metrics`` must not fail on a valid file: a file of
answers without relevance labels has no use for ``recall@5``, and three failed ranking columns
would turn a first run into an error about measures nobody asked for. So the *default* set keeps
a measure only when some sample has every field the measure reads (its ``requires``), and the
command says, on one line, what it chose and what it left out for which missing field.

Names given with ``--metrics`` are never changed here: a measure the user asked for and the data
cannot support is a ``missing_input`` failure with the fix, as before.

When only *some* samples carry a field (relevance labels on 30 of 40 questions), the measure is
kept: the field is there, so the measure is meant; the samples without it are failures of that
measure (``missing_input``), which the failure bar reports with the fix, and the choice line says
up front how many samples lack it. Dropping the measure would hide the labelled 30; skipping the
unlabelled 10 would hide a half-labelled file.

This module imports nothing from ragbridge's core at import time (the parsers of every
subcommand are built without it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:
    from ragbridge.core.sample import Sample

__all__ = ["DefaultMetrics", "FieldCounts", "MetricsChoice", "fit_default"]

FIELDS: tuple[str, ...] = (
    "question",
    "answer",
    "contexts",
    "reference",
    "reference_contexts",
    "relevance",
)
"""The `Sample` fields a measure can require, in the order the choice line names them."""

_SPOKEN = {
    "relevance": "relevance labels",
    "reference": "a reference",
    "reference_contexts": "reference contexts",
    "contexts": "contexts",
    "answer": "an answer",
    "question": "a question",
}


class DefaultMetrics(str):
    """A ``--metrics`` value the user did not type: the command's default list.

    argparse hands a string default back as the same object, so ``isinstance(args.metrics,
    DefaultMetrics)`` tells the default apart from the same names typed on the command line.
    """

    __slots__ = ()


def _present(value: object) -> bool:
    """The rule `Metric.missing_input` applies: None, a blank string or an empty list is absent
    (``relevance == {}`` is present: labelled, with no relevant document)."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list):
        return bool(value)
    return True


@dataclass
class FieldCounts:
    """How many samples carry each field, counted in one pass without keeping the samples."""

    total: int = 0
    present: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))

    def add(self, sample: Sample) -> None:
        self.total += 1
        for name in FIELDS:
            if _present(getattr(sample, name)):
                self.present[name] += 1

    @classmethod
    def of(cls, samples: Iterable[Sample], *, produced: Sequence[str] = ()) -> FieldCounts:
        """The counts of ``samples``; the ``produced`` fields count as present in every one
        (``ragbridge run``: the pipeline writes the answer and the contexts)."""
        counts = cls()
        for sample in samples:
            counts.add(sample)
        for name in produced:
            counts.present[name] = counts.total
        return counts


@dataclass(frozen=True)
class MetricsChoice:
    """The fitted default: the names kept, and the one line that says why."""

    names: list[str]
    line: str | None


def _requires(name: str) -> tuple[str, ...]:
    """The fields measure ``name`` reads: its metric's ``requires`` and its registry entry's
    (a ranking metric checks its labels itself, so only the registry names them)."""
    from ragbridge.adapters.metric_choice import parse_metric
    from ragbridge.core.registry import REGISTRY, UnknownMeasureError

    metric = parse_metric(name)
    needs = set(metric.requires)
    # ranking measures are listed once per family: ``recall@k`` stands for ``recall@5``
    with contextlib.suppress(UnknownMeasureError):
        needs.update(REGISTRY.measure(re.sub(r"@\d+$", "@k", metric.name)).requires)
    return tuple(f for f in FIELDS if f in needs)


def fit_default(
    names: Sequence[str],
    fields: FieldCounts,
    *,
    record: str = "sample",
    notes: Sequence[str] = (),
    label: str = "default",
) -> MetricsChoice:
    """Keep each default measure that some sample can feed; say what was left out and why.

    A measure is left out when no sample has one of the fields it requires; it is kept, with the
    samples lacking a field counted on the line, when some do. The line is None when every
    measure fits every sample and there are no ``notes``. Raises ValueError when nothing is left
    (the message names the missing fields and ``--metrics``).

    ``record`` is what ``fields`` counted, as the line names it (a conversations run counts its
    turns); ``notes`` are more reasons in the line's parentheses (a conversation measure left
    out for want of a judge), ``label`` the word that opens them.
    """
    absent = [f for f in FIELDS if fields.present[f] == 0]
    kept: list[str] = []
    dropped: list[str] = []
    partial: dict[str, list[str]] = {}
    for name in names:
        needs = _requires(name)
        if any(f in absent for f in needs):
            dropped.append(name)
            continue
        kept.append(name)
        for f in needs:
            if fields.present[f] < fields.total:
                partial.setdefault(f, []).append(name)
    why_dropped = [_SPOKEN[f] for f in absent if any(f in _requires(n) for n in dropped)]
    if not kept:
        raise ValueError(
            f"no default metric fits these {record}s: no {record} has {_or(why_dropped)}; "
            "name the metrics with --metrics"
        )
    if not dropped and not partial and not notes:
        return MetricsChoice(kept, None)
    parts: list[str] = []
    if dropped:
        parts.append(f"no {record} has {_or(why_dropped)}: {', '.join(dropped)} left out")
    for f, measures in partial.items():
        lacking = fields.total - fields.present[f]
        parts.append(
            f"{lacking} of {plural(fields.total, record)} {'lacks' if lacking == 1 else 'lack'} "
            f"{_SPOKEN[f]}: "
            f"{', '.join(measures)} fail there (missing_input)"
        )
    parts.extend(notes)
    return MetricsChoice(kept, f"metrics: {', '.join(kept)} ({label}; {'; '.join(parts)})")


def _or(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"
