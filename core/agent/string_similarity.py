"""String similarity of two argument values, as RAGAS's ``NonLLMStringSimilarity`` computes it.

RAGAS's tool-call accuracy can compare an argument by string similarity instead of equality
(``arg_comparison_metric=NonLLMStringSimilarity(distance_measure=...)``). That metric is
``1 - normalized_distance(reference, response)`` of rapidfuzz (Bachmann, rapidfuzz 3) for one of
four distances. The core imports no string library, so the four are written here, each to the
operation: the conformance benchmark (``benchmarks/agent_conformance.py``) and the tests require
the same float, not a close one.

* Levenshtein — unit-cost insertions, deletions and substitutions, normalised by the longer
  length (Levenshtein 1966).
* Hamming — positions that differ, the shorter string padded (rapidfuzz's ``pad=True``),
  normalised by the longer length.
* Jaro — matching characters within a window of half the longer length, and transpositions
  among them: ``(m/|a| + m/|b| + (m - t/2)/m) / 3`` (Jaro 1989).
* Jaro-Winkler — Jaro raised by a shared prefix of up to 4 characters,
  ``sim + prefix * 0.1 * (1 - sim)``, when Jaro exceeds 0.7 (Winkler 1990).

Two empty strings are identical (1.0) under all four.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["DISTANCES", "Distance", "similarity"]

Distance = Literal["levenshtein", "hamming", "jaro", "jaro_winkler"]
DISTANCES: tuple[str, ...] = get_args(Distance)


def similarity(reference: str, response: str, distance: Distance) -> float:
    """``1 - normalized_distance(reference, response)`` for ``distance``, in [0, 1]."""
    if distance == "levenshtein":
        longest = max(len(reference), len(response))
        return 1 - (_levenshtein(reference, response) / longest if longest else 0)
    if distance == "hamming":
        longest = max(len(reference), len(response))
        same = sum(1 for a, b in zip(reference, response, strict=False) if a == b)
        return 1 - ((longest - same) / longest if longest else 0)
    if distance == "jaro":
        return 1 - (1.0 - _jaro(reference, response))
    if distance == "jaro_winkler":
        return 1 - (1.0 - _jaro_winkler(reference, response))
    raise ValueError(f"unknown distance {distance!r}; use one of {', '.join(DISTANCES)}")


def _levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _jaro_formula(len_a: int, len_b: int, common: int, transpositions: int) -> float:
    # The order of the sums is rapidfuzz's: a reordered sum can differ in the last bit.
    half = transpositions // 2
    total = 0.0
    total += common / len_a
    total += common / len_b
    total += (common - half) / common
    return total / 3.0


def _jaro(a: str, b: str) -> float:
    if not a and not b:
        return 1.0
    len_a, len_b = len(a), len(b)
    if not len_a or not len_b:
        return 0.0
    if len_a == 1 and len_b == 1:
        return float(a == b)
    if len_b > len_a:
        bound = len_b // 2 - 1
        b = b[: len_a + bound]
    else:
        bound = len_a // 2 - 1
        a = a[: len_b + bound]
    flags_a = [False] * len_a
    flags_b = [False] * len_b
    common = 0
    for i, char in enumerate(a):
        for j in range(max(0, i - bound), min(i + bound, len_b - 1) + 1):
            if not flags_b[j] and b[j] == char:
                flags_a[i] = flags_b[j] = True
                common += 1
                break
    if not common:
        return 0.0
    k = transpositions = 0
    for i, flagged in enumerate(flags_a):
        if flagged:
            j = k
            while not flags_b[j]:
                j += 1
            k = j + 1
            transpositions += a[i] != b[j]
    return _jaro_formula(len_a, len_b, common, transpositions)


def _jaro_winkler(a: str, b: str, prefix_weight: float = 0.1) -> float:
    prefix = 0
    for ca, cb in zip(a[:4], b[:4], strict=False):
        if ca != cb:
            break
        prefix += 1
    sim = _jaro(a, b)
    if sim > 0.7:
        sim += prefix * prefix_weight * (1.0 - sim)
        sim = min(sim, 1.0)
    return sim
