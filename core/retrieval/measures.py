"""What a ranking measure *is*, apart from who computes it.

A `Measure` is a small declarative value — family, cutoff, gain — in the manner of ir_measures.
It has two spellings: trec_eval's (``P_5``, ``ndcg_cut_10``, ``recip_rank``) for the ``trec``
command and conformance, and ragbridge's per-sample names (``precision@5``, ``ndcg@10``, ``mrr``)
used in results, thresholds and reports. Both parse to the same value, so a threshold written as
``recall@5`` and a trec_eval column ``recall_5`` are the same measure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "DEFAULT_CUTOFFS",
    "TREC_FAMILIES",
    "Measure",
    "parse_measure",
    "parse_measures",
    "parse_trec_measures",
]

Family = Literal[
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "Rprec",
    "recip_rank",
    "P",
    "recall",
    "F1",
    "ndcg",
    "ndcg_cut",
    "map_cut",
    "success",
    "no_answer",
]
"""The measure families, in trec_eval's print order (its measure table); `_NOT_TREC` are ours."""

_NOT_TREC = frozenset({"F1", "no_answer"})

# trec_eval's print order, restricted to the families implemented here: `trec` output follows it
# so that our lines are a byte-identical subset of trec_eval's.
TREC_FAMILIES: tuple[str, ...] = tuple(f for f in get_args(Family) if f not in _NOT_TREC)
_CUT_FAMILIES = frozenset({"P", "recall", "ndcg_cut", "map_cut", "success", "F1"})
_COUNT_FAMILIES = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret"})
DEFAULT_CUTOFFS: dict[str, tuple[int, ...]] = {
    "P": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "recall": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "ndcg_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "map_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "success": (1, 5, 10),
}

# ragbridge per-sample name <-> family
_RAG_CUT_NAMES = {
    "hit_rate": "success",
    "precision": "P",
    "recall": "recall",
    "f1": "F1",
    "ndcg": "ndcg_cut",
    "ndcg_exp": "ndcg_cut",
    "map": "map_cut",
}
_RAG_PLAIN_NAMES = {
    "mrr": "recip_rank",
    "average_precision": "map",
    "map": "map",
    "r_precision": "Rprec",
    "ndcg": "ndcg",
    "ndcg_exp": "ndcg",
    "no_answer": "no_answer",
}
_FAMILY_TO_RAG = {
    "success": "hit_rate",
    "P": "precision",
    "recall": "recall",
    "F1": "f1",
    "ndcg_cut": "ndcg",
    "map_cut": "average_precision",
    "recip_rank": "mrr",
    "map": "average_precision",
    "Rprec": "r_precision",
    "ndcg": "ndcg",
    "no_answer": "no_answer",
}


@dataclass(frozen=True, order=True)
class Measure:
    """One ranking measure.

    ``gain`` is the gain of a relevance grade g in (n)DCG: ``linear`` = g, as trec_eval computes it;
    ``exponential`` = 2^g − 1, as in Burges et al. (2005) and most RAG write-ups. The two agree on
    binary qrels. ``gain_map`` is trec_eval's ``ndcg.1=3,2=9`` override for the uncut ``ndcg``;
    ``params`` keeps its text so the printed name matches trec_eval's exactly.
    """

    family: str
    cutoff: int | None = None
    gain: Literal["linear", "exponential"] = "linear"
    gain_map: tuple[tuple[int, float], ...] = ()
    params: str = ""

    def __post_init__(self) -> None:
        if self.family not in _FAMILY_TO_RAG and self.family not in _COUNT_FAMILIES:
            raise ValueError(f"unknown measure family {self.family!r}")
        if (self.family in _CUT_FAMILIES) != (self.cutoff is not None):
            need = "needs" if self.family in _CUT_FAMILIES else "takes no"
            raise ValueError(f"measure {self.family!r} {need} a cutoff")
        if self.cutoff is not None and self.cutoff <= 0:
            raise ValueError(f"cutoff must be a positive integer, got {self.cutoff}")

    @property
    def is_count(self) -> bool:
        """Counts (num_ret, ...) are summed, not averaged, and printed as integers."""
        return self.family in _COUNT_FAMILIES

    @property
    def trec_name(self) -> str:
        """trec_eval's column name, e.g. ``P_5``, ``ndcg_cut_10``, ``ndcg_1=3,2=9``."""
        if self.family in {"F1", "no_answer"} or self.gain == "exponential":
            raise ValueError(f"{self.name} has no trec_eval equivalent")
        if self.cutoff is not None:
            return f"{self.family}_{self.cutoff}"
        if self.params:
            return f"{self.family}_{self.params}"
        return self.family

    @property
    def name(self) -> str:
        """ragbridge's per-sample name, e.g. ``precision@5``, ``ndcg@10``, ``mrr``."""
        if self.family in _COUNT_FAMILIES:
            return self.family
        base = _FAMILY_TO_RAG[self.family]
        if self.family in {"ndcg", "ndcg_cut"} and self.gain == "exponential":
            base = "ndcg_exp"
        if self.family == "map_cut":
            return f"map@{self.cutoff}"
        if self.cutoff is not None:
            return f"{base}@{self.cutoff}"
        return base

    def __str__(self) -> str:
        return self.name


_CUT_RE = re.compile(r"^(?P<base>[A-Za-z_0-9]+?)@(?P<k>\d+)$")


def parse_measure(text: str | Measure) -> Measure:
    """Parse a per-sample name (``recall@5``, ``mrr``) or a trec_eval name (``recall_5``)."""
    measures = _expand(text)
    if len(measures) != 1:
        raise ValueError(f"{text!r} names {len(measures)} measures; give one")
    return measures[0]


def parse_measures(names: Iterable[str | Measure]) -> list[Measure]:
    """Parse several names, keeping order and dropping duplicates.

    trec_eval groups expand: ``P.5,10`` gives two measures, ``all_trec`` every implemented one.
    """
    out: list[Measure] = []
    for item in names:
        for measure in _expand(item):
            if measure not in out:
                out.append(measure)
    return out


def _expand(text: str | Measure) -> list[Measure]:
    if isinstance(text, Measure):
        return [text]
    name = text.strip()
    match = _CUT_RE.match(name)
    if match:
        base, k = match["base"], int(match["k"])
        family = _RAG_CUT_NAMES.get(base)
        if family is None:
            raise ValueError(_unknown(name))
        if k <= 0:
            raise ValueError(f"{name}: cutoff must be a positive integer")
        gain: Literal["linear", "exponential"] = "exponential" if base == "ndcg_exp" else "linear"
        return [Measure(family, k, gain=gain)]
    if name in _RAG_PLAIN_NAMES:
        gain = "exponential" if name == "ndcg_exp" else "linear"
        return [Measure(_RAG_PLAIN_NAMES[name], gain=gain)]
    try:
        return parse_trec_measures([name])
    except ValueError as exc:
        if "unknown or unsupported" in str(exc):
            raise ValueError(_unknown(name)) from None
        raise


def _unknown(name: str) -> str:
    known = ", ".join(
        [
            *("hit_rate@k", "mrr", "ndcg@k", "ndcg_exp@k", "precision@k", "recall@k", "f1@k"),
            *("average_precision", "map@k", "r_precision", "no_answer"),
        ]
    )
    trec = ", ".join(f for f in TREC_FAMILIES)
    return f"unknown measure {name!r}; ragbridge names: {known}; trec_eval names: {trec}"


def _parse_cutoffs(family: str, text: str, original: str) -> list[int]:
    cutoffs: list[int] = []
    for part in text.split(","):
        try:
            value = int(float(part))  # trec_eval truncates: ndcg_cut.23.4 is ndcg_cut_23
        except ValueError:
            raise ValueError(f"{original}: cutoff {part!r} is not a number") from None
        if value <= 0:
            raise ValueError(f"{original}: cutoffs must be positive")
        cutoffs.append(value)
    if len(set(cutoffs)) != len(cutoffs):
        raise ValueError(f"{original}: duplicate cutoffs")
    return sorted(cutoffs)


def _parse_gain_map(text: str, original: str) -> tuple[tuple[int, float], ...]:
    pairs: list[tuple[int, float]] = []
    for part in text.split(","):
        level, sep, gain = part.partition("=")
        try:
            if not sep:
                raise ValueError
            pairs.append((int(level), float(gain)))
        except ValueError:
            raise ValueError(f"{original}: expected level=gain pairs like ndcg.1=3,2=9") from None
    return tuple(pairs)


def parse_trec_measures(specs: Iterable[str]) -> list[Measure]:
    """Parse trec_eval ``-m`` arguments into measures in trec_eval's print order.

    Accepts ``P.5,10`` (trec_eval's parameter syntax), ``P_5`` (its output name), ``P`` (default
    cutoffs), ``ndcg.1=3,2=9`` (gain overrides) and ``all_trec`` (every family implemented here).
    """
    by_family: dict[str, list[Measure]] = {}

    def add(measure: Measure) -> None:
        bucket = by_family.setdefault(measure.family, [])
        if measure not in bucket:
            bucket.append(measure)

    for spec in specs:
        text = spec.strip()
        if text in {"all_trec", "all"}:
            for family in TREC_FAMILIES:
                for measure in _defaults(family):
                    add(measure)
            continue
        family, dot, params = text.partition(".")
        if not dot or family not in TREC_FAMILIES:
            family, params = _split_output_name(text)
        if family not in TREC_FAMILIES:
            raise ValueError(
                f"unknown or unsupported trec_eval measure {text!r}; "
                f"supported: {', '.join(TREC_FAMILIES)} (and all_trec)"
            )
        if family in DEFAULT_CUTOFFS:
            cutoffs = _parse_cutoffs(family, params, text) if params else DEFAULT_CUTOFFS[family]
            for k in cutoffs:
                add(Measure(family, k))
        elif family == "ndcg" and params:
            add(Measure("ndcg", gain_map=_parse_gain_map(params, text), params=params))
        elif params:
            raise ValueError(f"{text}: measure {family!r} takes no parameters")
        else:
            add(Measure(family))
    ordered: list[Measure] = []
    for family in TREC_FAMILIES:
        bucket = by_family.get(family, [])
        ordered.extend(sorted(bucket, key=lambda m: (m.cutoff or 0, m.params)))
    return ordered


def _defaults(family: str) -> list[Measure]:
    if family in DEFAULT_CUTOFFS:
        return [Measure(family, k) for k in DEFAULT_CUTOFFS[family]]
    return [Measure(family)]


def _split_output_name(text: str) -> tuple[str, str]:
    """``ndcg_cut_10`` -> (``ndcg_cut``, ``10``); ``num_rel_ret`` -> (``num_rel_ret``, ``""``)."""
    if text in TREC_FAMILIES:
        return text, ""
    head, _, tail = text.rpartition("_")
    if head in DEFAULT_CUTOFFS and tail:
        return head, tail
    if head == "ndcg" and "=" in tail:
        return head, tail
    return text, ""
