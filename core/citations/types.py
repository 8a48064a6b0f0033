"""An answer read as statements and the contexts each cites.

ALCE (Gao et al., 2023) scores citations statement by statement: is each statement supported by
what it cites (recall), and is each citation needed (precision). Parsing the markers an answer
uses into these records is `ragbridge.core.citations.parse`; the measures read only these.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Citation", "CitedAnswer", "Statement"]


@dataclass(frozen=True)
class Citation:
    """One cited source: ``marker`` as written (``[1]``; ``[1, 3]`` gives two citations with the
    same marker; ``[doc-7]``, ``(source: handbook.pdf)``, ``[^2]``, ``²``), the ``key`` it names
    (``1``, ``doc-7``, ``handbook.pdf``, ``2``) and the 0-based index of the sample's context it
    resolves to, None when it names no context."""

    marker: str
    key: str
    context: int | None


@dataclass(frozen=True)
class Statement:
    """A sentence of the answer without its markers, and what it cites."""

    text: str
    citations: tuple[Citation, ...]


@dataclass(frozen=True)
class CitedAnswer:
    """The answer's statements in order, and the citations that name no context."""

    statements: tuple[Statement, ...]
    unresolved: tuple[Citation, ...]
