"""Question styles, the proportions a user states, and how a test set's size is divided.

Styles of answerable questions:

* ``single`` — one fact of one chunk answers it (``metadata["kind"] == "single-hop"``);
* ``multi`` — two related chunks are needed together, both graded (``"multi-hop"``);
* ``reasoning`` — one chunk answers it, but only through a step of inference (``"reasoning"``).

No-answer questions (``"no-answer"``, ``relevance == {}``) are not a style share but a separate
share of the whole set (`no_answer_count`), at least 10% by default: a RAG system that never
meets a question its documents cannot answer is never tested on saying so.

Counts are exact, not sampled: ``size=40, no_answer_share=0.1`` gives 4 no-answer questions and
36 others split by the largest-remainder method, so the proportions hold as closely as whole
numbers allow, and the same arguments always give the same counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = [
    "DEFAULT_NO_ANSWER_SHARE",
    "DEFAULT_STYLES",
    "KINDS",
    "NO_ANSWER",
    "STYLES",
    "allocate",
    "check_styles",
    "no_answer_count",
    "parse_styles",
]

STYLES = ("single", "multi", "reasoning")
"""The answerable question styles, in the order counts are reported."""

NO_ANSWER = "no-answer"
"""``metadata["style"]`` and ``metadata["kind"]`` of a no-answer question."""

KINDS = {
    "single": "single-hop",
    "multi": "multi-hop",
    "reasoning": "reasoning",
    NO_ANSWER: NO_ANSWER,
}
"""``metadata["kind"]`` per style; the words the shipped handbook's questions use."""

DEFAULT_STYLES: Mapping[str, float] = {"single": 0.5, "multi": 0.25, "reasoning": 0.25}
DEFAULT_NO_ANSWER_SHARE = 0.1


def parse_styles(text: str) -> dict[str, float]:
    """``"single=0.5,multi=0.25,reasoning=0.25"`` as a mapping; shares are normalised to sum 1.

    Weights need not sum to 1 (``single=2,multi=1`` is two thirds single); a style left out gets
    none. Raises ValueError naming the problem.
    """
    out: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"{part.strip()!r}: expected STYLE=SHARE, e.g. single=0.5")
        try:
            share = float(value)
        except ValueError:
            raise ValueError(f"{name}: expected a number, got {value.strip()!r}") from None
        if name in out:
            raise ValueError(f"{name} is given twice")
        out[name] = share
    return check_styles(out)


def check_styles(styles: Mapping[str, float]) -> dict[str, float]:
    """Known styles with finite, non-negative shares, normalised to sum 1."""
    for name, share in styles.items():
        if name not in STYLES:
            hint = (
                " (no-answer questions have their own share: no_answer_share)"
                if name in {"no-answer", "no_answer", "none"}
                else ""
            )
            raise ValueError(f"unknown style {name!r}{hint}; styles are {', '.join(STYLES)}")
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            raise ValueError(f"{name}: share must be a number, got {share!r}")
        if not math.isfinite(share) or share < 0:
            raise ValueError(f"{name}: share must be a finite number >= 0, got {share}")
    total = sum(styles.values())
    if total <= 0:
        raise ValueError("the style shares sum to 0: give at least one style a share above 0")
    return {name: styles[name] / total for name in STYLES if name in styles}


def no_answer_count(size: int, share: float) -> int:
    """No-answer questions in a set of ``size``: ``share`` of it, rounded *up* so the share is
    never below the one asked for (``size=25, share=0.1`` gives 3, not 2)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"no_answer_share must lie within [0, 1], got {share}")
    return min(size, math.ceil(size * share - 1e-9))


def allocate(total: int, shares: Mapping[str, float]) -> dict[str, int]:
    """``total`` split by ``shares`` (largest remainder; ties go to the earlier style)."""
    if total < 0:
        raise ValueError("total must be >= 0")
    exact = {name: total * share for name, share in shares.items()}
    counts = {name: math.floor(value) for name, value in exact.items()}
    left = total - sum(counts.values())
    order = sorted(shares, key=lambda n: (-(exact[n] - counts[n]), STYLES.index(n)))
    for name in order[:left]:
        counts[name] += 1
    return {name: counts[name] for name in STYLES if name in counts}
