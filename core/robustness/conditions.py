"""The retrieval conditions a robustness run answers every question under.

RGB (Chen et al., 2023) asks three things of a RAG system whose retrieval goes wrong: does it
still answer when relevant passages are mixed with noise (at rising ratios), does it decline when
nothing relevant was retrieved, and does it notice (or follow) passages that state a wrong fact.
A `Condition` names one such retrieval fault; ``noise@0`` is the clean run every other condition
is compared with (and the one the noise pool and the counterfactuals are built from).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CLEAN", "DEFAULT_RATIOS", "Condition", "ConditionKind", "default_conditions"]

ConditionKind = Literal["noise", "negative", "counterfactual"]

DEFAULT_RATIOS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8)
"""Noise ratios of a default run: the share of the top-k replaced by passages of other questions."""

_KINDS: tuple[ConditionKind, ...] = ("noise", "negative", "counterfactual")


@dataclass(frozen=True)
class Condition:
    """One retrieval fault: ``noise`` at ``ratio`` (0.0 is the clean run), ``negative`` (no
    relevant passage at all) or ``counterfactual`` (the relevant passages state a wrong fact)."""

    kind: ConditionKind
    ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown condition kind {self.kind!r}; expected one of {_KINDS}")
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)):
            raise ValueError(f"noise ratio must be a number in [0, 1), got {self.ratio!r}")
        if self.kind == "noise" and not (0.0 <= self.ratio < 1.0 and math.isfinite(self.ratio)):
            # a ratio of 1 is the negative condition: every passage is noise
            raise ValueError(
                f"noise ratio must be in [0, 1), got {self.ratio!r} "
                "(all passages replaced is the 'negative' condition)"
            )
        if self.kind != "noise" and self.ratio != 0.0:
            raise ValueError(f"only a noise condition has a ratio, got {self.kind}@{self.ratio}")

    @property
    def name(self) -> str:
        """``noise@0``, ``noise@0.2``, ``negative``, ``counterfactual``: ids in results."""
        if self.kind != "noise":
            return self.kind
        return f"noise@{self.ratio:g}"

    @property
    def clean(self) -> bool:
        """Whether this is the unperturbed run."""
        return self.kind == "noise" and self.ratio == 0.0

    @classmethod
    def parse(cls, name: str) -> Condition:
        """The condition `name` names (its inverse); a ValueError naming the text otherwise."""
        text = name.strip()
        kind, at, ratio = text.partition("@")
        if kind in ("negative", "counterfactual") and not at:
            return cls(kind)  # type: ignore[arg-type]
        if kind == "noise" and at:
            try:
                value = float(ratio)
            except ValueError:
                raise ValueError(f"bad noise ratio in condition {name!r}") from None
            return cls("noise", value)
        raise ValueError(
            f"unknown condition {name!r}; expected noise@RATIO, negative or counterfactual"
        )


CLEAN = Condition("noise", 0.0)
"""The unperturbed run."""


def default_conditions(
    ratios: Sequence[float] = DEFAULT_RATIOS, *, negative: bool = True, counterfactual: bool = True
) -> list[Condition]:
    """The clean run first, then noise at each of ``ratios`` (duplicates and 0 dropped), then the
    negative and counterfactual conditions when asked for."""
    out = [CLEAN]
    for r in ratios:
        cond = Condition("noise", float(r))
        if cond not in out:
            out.append(cond)
    if negative:
        out.append(Condition("negative"))
    if counterfactual:
        out.append(Condition("counterfactual"))
    return out
