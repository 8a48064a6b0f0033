"""Pairing calls made with calls expected: the two alignments the tool-call measures use.

Both maximise the summed weight of the pairs, where a pair's weight (its argument score, in
[0, 1]) exists only for two calls of the same tool, and among the best choose the most pairs
(a call with wrong arguments is reported as such, not as one missing and one extra).

* `ordered_pairs` keeps the order on both sides (a weighted longest common subsequence, by
  dynamic programming): an extra or a missing call costs that call, a swap costs one of the two.
* `best_pairs` ignores order: an assignment problem per tool, solved exactly by the Hungarian
  method (Kuhn 1955, Munkres 1957) in the shortest-augmenting-path form with potentials.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

__all__ = ["Pair", "best_pairs", "ordered_pairs"]

Pair = tuple[int, int, float]
"""(index of the expected call, index of the call made, weight)."""

Weight = Callable[[int, int], float | None]
"""The weight of pairing expected call i with call j made; None when they cannot pair."""


def ordered_pairs(n_expected: int, n_made: int, weight: Weight) -> list[Pair]:
    """The order-preserving pairs of greatest total weight (then most pairs), by expected index."""
    # best[i][j]: (total, count) over expected[i:] and made[j:]
    best = [[(0.0, 0)] * (n_made + 1) for _ in range(n_expected + 1)]
    weights: dict[tuple[int, int], float] = {}
    for i in range(n_expected - 1, -1, -1):
        for j in range(n_made - 1, -1, -1):
            choice = max(best[i + 1][j], best[i][j + 1])
            w = weight(i, j)
            if w is not None:
                weights[(i, j)] = w
                total, count = best[i + 1][j + 1]
                choice = max(choice, (total + w, count + 1))
            best[i][j] = choice
    pairs: list[Pair] = []
    i = j = 0
    while i < n_expected and j < n_made:
        w = weights.get((i, j))
        if w is not None:
            total, count = best[i + 1][j + 1]
            if (total + w, count + 1) == best[i][j]:
                pairs.append((i, j, w))
                i, j = i + 1, j + 1
                continue
        if best[i + 1][j] == best[i][j]:
            i += 1
        else:
            j += 1
    return pairs


def best_pairs(
    expected: Sequence[str], made: Sequence[str], weight: Callable[[int, int], float]
) -> list[Pair]:
    """The pairs of greatest total weight in any order, one tool at a time, by expected index.

    ``expected`` and ``made`` are the tools' names; only calls of one tool pair, and every call
    of the scarcer side of a tool is paired (weights are never negative, so that costs nothing).
    """
    by_tool_expected: dict[str, list[int]] = defaultdict(list)
    by_tool_made: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(expected):
        by_tool_expected[name].append(i)
    for j, name in enumerate(made):
        by_tool_made[name].append(j)
    pairs: list[Pair] = []
    for name, rows in by_tool_expected.items():
        cols = by_tool_made.get(name, [])
        if not cols:
            continue
        table = [[weight(i, j) for j in cols] for i in rows]
        if len(rows) <= len(cols):
            for r, c in enumerate(_assignment([[-w for w in row] for row in table])):
                pairs.append((rows[r], cols[c], table[r][c]))
        else:
            flipped = [[-table[r][c] for r in range(len(rows))] for c in range(len(cols))]
            for c, r in enumerate(_assignment(flipped)):
                pairs.append((rows[r], cols[c], table[r][c]))
    return sorted(pairs)


def _assignment(cost: list[list[float]]) -> list[int]:
    """The column of each row in a least-cost assignment of every row (rows <= columns)."""
    n, m = len(cost), len(cost[0])
    inf = float("inf")
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    owner = [0] * (m + 1)  # owner[j]: the row (1-based) holding column j; 0 for none
    way = [0] * (m + 1)
    for row in range(1, n + 1):
        owner[0] = row
        j0 = 0
        slack = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0 = owner[j0]
            delta, j1 = inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = cost[i0 - 1][j - 1] - u[i0] - v[j]
                    if reduced < slack[j]:
                        slack[j], way[j] = reduced, j0
                    if slack[j] < delta:
                        delta, j1 = slack[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    slack[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    columns = [0] * n
    for j in range(1, m + 1):
        if owner[j]:
            columns[owner[j] - 1] = j - 1
    return columns
