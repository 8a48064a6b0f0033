"""Correlation within groups, then averaged: the "summary-level" figure of summarization
meta-evaluation.

SummEval rates 16 systems' summaries of each of 100 documents. Pooling all 1,600 pairs into one
Spearman mixes two questions: does the judge rank the summaries *of one document* as people do,
and does it rank easy documents above hard ones? Summary-level meta-evaluation (Fabbri et al.
2021; the G-Eval paper, Liu et al. 2023, Table 1) answers the first: Spearman's rho between the
judge's scores and the people's over the summaries of each document, then the mean over
documents. A document where people or the judge gave every summary the same score has no rank
correlation and is left out, as the G-Eval authors' script leaves it out; how many were left out
is reported next to the mean.

ragbridge's agreement table reports the pooled Spearman for every metric; this is the per-group
figure beside it, for sets whose samples come in groups (a labelled set says which).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..results.stats import spearman

__all__ = ["GroupedSpearman", "per_group_spearman"]


@dataclass(frozen=True)
class GroupedSpearman:
    """The mean per-group Spearman (None with ``reason`` when no group has one)."""

    value: float | None
    groups: int
    """Groups with a defined rho: the mean's n."""
    left_out: int
    """Groups with two or more pairs where people or the judge did not vary."""
    reason: str | None = None


def per_group_spearman(
    ids: Sequence[str],
    people: Sequence[float],
    judge: Sequence[float],
    groups: Mapping[str, str],
) -> GroupedSpearman:
    """Mean over groups of Spearman's rho between ``people`` and ``judge`` (aligned with
    ``ids``); ``groups`` maps a sample id to its group (ids it lacks are not used)."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, sample_id in enumerate(ids):
        group = groups.get(sample_id)
        if group is not None:
            members[group].append(index)
    p = np.asarray(people, dtype=np.float64)
    j = np.asarray(judge, dtype=np.float64)
    rhos: list[float] = []
    left_out = 0
    for indices in members.values():
        if len(indices) < 2:
            continue
        gp, gj = p[indices], j[indices]
        if np.all(gp == gp[0]) or np.all(gj == gj[0]):
            left_out += 1
            continue
        rhos.append(float(spearman(gp, gj)))
    if not rhos:
        reason = (
            "no group has two paired samples"
            if not left_out
            else f"in all {left_out} groups people or the judge gave one score to every sample"
        )
        return GroupedSpearman(None, 0, left_out, reason)
    return GroupedSpearman(float(np.mean(rhos)), len(rhos), left_out)
