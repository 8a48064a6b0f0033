"""Counts with their noun, as the command line prints them: ``1 run``, ``2 runs``, ``0 runs``.

One helper so that no message says "1 runs" or "1 samples": every count printed with a noun
goes through `plural` (or `noun`, when the number is printed apart from its noun).
Imports nothing, so any command module can use it without slowing ``ragbridge --help``.
"""

from __future__ import annotations

__all__ = ["noun", "plural"]


def noun(n: int, one: str, many: str | None = None) -> str:
    """``one`` when ``n`` is 1, else ``many`` (default: ``one`` + "s")."""
    return one if n == 1 else (many if many is not None else f"{one}s")


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``plural(1, "run") == "1 run"``, ``plural(3, "reply", "replies")``."""
    return f"{n} {noun(n, one, many)}"
