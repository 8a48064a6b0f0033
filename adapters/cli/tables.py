"""Plain-text tables as the commands print them: columns left-aligned, two spaces apart.

One function so that every table (``history``, ``cache stats``, ``metrics``, the repeatability
and agreement tables) lines up the same way and no line ends in padding. Imports nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["aligned"]


def aligned(rows: Sequence[Sequence[str]], *, indent: str = "") -> list[str]:
    """One line per row, each column as wide as its widest cell, trailing blanks cut.

    ``rows`` is the header and the body; every row has the same number of cells.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
