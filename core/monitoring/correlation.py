"""Is thumbs-down feedback linked to how retrieval went? A small report with a test per factor.

The common practice in RAG monitoring is to read user feedback against retrieval: are answers
built on a retrieval miss disliked more often, do answers that used fewer chunks fare worse,
is one source behind most complaints? `feedback_report` answers each of these as a test of
independence between the thumbs-down outcome (feedback below ``down_below``) and a grouping
of the requests that carry feedback:

* ``retrieval_miss`` — ``miss`` / ``hit``;
* ``chunks_used`` — ``0``, ``1``, ``2``, ``3+`` chunks above the relevance threshold;
* ``source`` — the top retrieved source: the first of ``source_keys`` present in the request's
  ``attributes`` (the first item when it is a list). By default ``top_source`` when the pipeline
  records one, else ``context_ids`` (which the shadow wrappers record, top chunk first);
  sources with fewer than ``min_group`` rated requests are pooled as ``(other)``.

Each factor gets Pearson's chi-square over its groups with a seeded permutation p-value
(`permutation_independence`: valid with a group of five requests, where the chi-square
approximation is not), and the p-values of the factors tested together are Holm-adjusted, so
testing three factors does not triple the chance of a spurious link. A factor is *linked* when
its adjusted p is below ``alpha``. Requests without feedback, or without the factor's value,
are left out of that factor (never counted as a zero).

Other factors are a mapping of name to ``record -> group label | None``.

Usage: ``print(feedback_report(MonitorStore("ragbridge-monitor.sqlite")).text())``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .records import RequestRecord
from .significance import holm, permutation_independence
from .store_api import ResultsStore

__all__ = ["FactorLink", "FeedbackReport", "GroupRate", "feedback_report"]

Factor = Callable[[RequestRecord], str | None]
OTHER = "(other)"


@dataclass(frozen=True)
class GroupRate:
    """One group's rated requests and how many of them got a thumbs down."""

    group: str
    n: int
    down: int

    @property
    def rate(self) -> float:
        return self.down / self.n if self.n else 0.0


@dataclass(frozen=True)
class FactorLink:
    """The thumbs-down rate by one factor's groups and the test of their difference."""

    factor: str
    groups: tuple[GroupRate, ...]
    chi2: float
    p_value: float
    p_adjusted: float
    linked: bool

    @property
    def worst(self) -> GroupRate | None:
        """The group with the highest thumbs-down rate (None with no group)."""
        return max(self.groups, key=lambda g: (g.rate, g.n), default=None)


@dataclass(frozen=True)
class FeedbackReport:
    """Thumbs-down against retrieval patterns; `text` is the summary to print or post."""

    n_requests: int
    n_feedback: int
    n_down: int
    factors: tuple[FactorLink, ...]
    alpha: float
    n_resamples: int
    seed: int

    @property
    def down_rate(self) -> float:
        return self.n_down / self.n_feedback if self.n_feedback else 0.0

    def factor(self, name: str) -> FactorLink:
        for f in self.factors:
            if f.factor == name:
                return f
        raise KeyError(f"no factor {name!r}; tested: {[f.factor for f in self.factors]}")

    @property
    def linked(self) -> list[FactorLink]:
        return [f for f in self.factors if f.linked]

    def text(self) -> str:
        head = (
            f"Thumbs-down vs retrieval: {self.n_feedback} of {self.n_requests} requests rated, "
            f"{self.down_rate:.1%} down (permutation chi-square, {self.n_resamples} resamples, "
            f"seed {self.seed}; Holm-adjusted, alpha {self.alpha:g})"
        )
        if not self.factors:
            return head + "\n  no factor to test (no rated request carries one)"
        lines = [head]
        width = max(len(f.factor) for f in self.factors)
        for f in self.factors:
            verdict = "LINKED" if f.linked else "no link"
            groups = "  ".join(f"{g.group} {g.rate:.1%} (n={g.n})" for g in f.groups)
            lines.append(f"  {f.factor:<{width}}  {verdict:<7}  p={f.p_adjusted:<7.2g} {groups}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _miss(record: RequestRecord) -> str | None:
    return None if record.retrieval_miss is None else ("miss" if record.retrieval_miss else "hit")


def _chunks(record: RequestRecord) -> str | None:
    n = record.chunks_used
    return None if n is None else (str(n) if n < 3 else "3+")


def _source(keys: Sequence[str]) -> Factor:
    def group(record: RequestRecord) -> str | None:
        for key in keys:
            value = record.attributes.get(key)
            if isinstance(value, (list, tuple)):
                value = value[0] if value else None
            if value is not None:
                return str(value)
        return None

    return group


def feedback_report(
    records: Iterable[RequestRecord] | ResultsStore,
    *,
    factors: Mapping[str, Factor] | None = None,
    source_keys: Sequence[str] = ("top_source", "context_ids"),
    down_below: float = 0.5,
    alpha: float = 0.05,
    min_group: int = 10,
    n_resamples: int = 2000,
    seed: int = 0,
) -> FeedbackReport:
    """Test thumbs-down feedback against each factor (default: miss, chunks used, source)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    rows = list(records.requests() if isinstance(records, ResultsStore) else records)
    if factors is None:
        factors = {"retrieval_miss": _miss, "chunks_used": _chunks}
        if source_keys:
            factors["source"] = _source(source_keys)
    rated = [r for r in rows if r.feedback is not None]
    down = [r.feedback is not None and r.feedback < down_below for r in rated]
    tested: list[tuple[str, tuple[GroupRate, ...], float, float]] = []
    for name, factor in factors.items():
        labels: list[str] = []
        outcome: list[bool] = []
        for record, is_down in zip(rated, down, strict=True):
            label = factor(record)
            if label is not None:
                labels.append(label)
                outcome.append(is_down)
        if not labels:
            continue
        labels = _pool_small(labels, min_group)
        names = sorted(set(labels), key=lambda g: (g == OTHER, g))
        code = {g: i for i, g in enumerate(names)}
        groups = tuple(
            GroupRate(
                g,
                sum(1 for lab in labels if lab == g),
                sum(1 for lab, d in zip(labels, outcome, strict=True) if lab == g and d),
            )
            for g in names
        )
        chi2, p = permutation_independence(
            [code[lab] for lab in labels], outcome, n_resamples=n_resamples, seed=seed
        )
        tested.append((name, groups, chi2, p))
    adjusted = holm([p for *_, p in tested])
    links = tuple(
        FactorLink(name, groups, chi2, p, q, q < alpha)
        for (name, groups, chi2, p), q in zip(tested, adjusted, strict=True)
    )
    return FeedbackReport(
        n_requests=len(rows),
        n_feedback=len(rated),
        n_down=sum(down),
        factors=links,
        alpha=alpha,
        n_resamples=n_resamples,
        seed=seed,
    )


def _pool_small(labels: list[str], min_group: int) -> list[str]:
    """Pool groups under ``min_group`` into ``(other)`` when the factor has more than two."""
    counts: dict[str, int] = {}
    for lab in labels:
        counts[lab] = counts.get(lab, 0) + 1
    if len(counts) <= 2:
        return labels
    small = {g for g, c in counts.items() if c < min_group}
    if not small:
        return labels
    return [OTHER if lab in small else lab for lab in labels]
