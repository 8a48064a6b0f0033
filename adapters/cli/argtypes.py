"""Numbers on the command line: argparse ``type=`` converters and the range checks after parsing.

Every command read its numbers with its own copy of the same ``try: int(text) ... except
ValueError`` block, each copy worded a little differently. The reading is here once; what a
command accepts (at least 1, within 1..100, a share, a number of days) is the one line it
passes, worded as its ``--help`` and its tests have always printed it. Imports nothing heavy:
every command's parser is built with these, and ``ragbridge --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from ragbridge.adapters.cli.errors import UserError

__all__ = [
    "COMPLETION_TOKENS",
    "add_cost_options",
    "non_negative_int",
    "number",
    "positive_int",
    "require_non_negative",
    "require_open_share",
    "whole_number",
]

N = TypeVar("N", int, float)

COMPLETION_TOKENS = 150
"""Completion tokens a dry run assumes per call when it prices the calls."""


def _reader(
    convert: Callable[[str], N], expected: str, accept: Callable[[N], bool], refusal: str
) -> Callable[[str], N]:
    """An argparse type: ``convert(text)`` when ``accept`` takes it.

    A text that is no number is ``expected …, got 'text'``; a number ``accept`` refuses is
    ``refusal`` formatted with ``value`` (and ``text``). Both reach the user as argparse's
    one-line usage error (exit 2).
    """

    def read(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(refusal.format(value=value, text=text))
        return value

    return read


def whole_number(accept: Callable[[int], bool], refusal: str) -> Callable[[str], int]:
    """A whole number ``accept`` takes: ``whole_number(lambda n: n >= 0, "must be >= 0, got
    {value}")``."""
    return _reader(int, "a whole number", accept, refusal)


positive_int = whole_number(lambda n: n >= 1, "must be at least 1, got {value}")
"""A count of at least 1 (``--concurrency``, ``--workers``, ``--size``)."""

non_negative_int = whole_number(lambda n: n >= 0, "must be 0 or more, got {value}")
"""A count that may be 0 (``--max-retries``)."""


def number(
    accept: Callable[[float], bool], refusal: str, *, expected: str = "a number"
) -> Callable[[str], float]:
    """A number (``float``) ``accept`` takes; ``expected`` names what a text that is no number
    should have been (``a number of days``)."""
    return _reader(float, expected, accept, refusal)


def require_open_share(flag: str, value: float) -> None:
    """``value`` lies strictly between 0 and 1 (a significance level, a split share)."""
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise UserError(f"{flag} must lie within (0, 1), got {value}")


def require_non_negative(flag: str, value: float) -> None:
    """``value`` is a finite number >= 0 (a tolerated drop, a smallest effect)."""
    if not (math.isfinite(value) and value >= 0):
        raise UserError(f"{flag} must be a finite number >= 0, got {value}")


def add_cost_options(
    parser: argparse.ArgumentParser,
    *,
    price: Callable[[str], float],
    tokens: Callable[[str], int],
    tokens_help: str,
    tokens_metavar: str | None = None,
) -> None:
    """``--price-in``, ``--price-out`` (read with ``price``) and ``--completion-tokens`` (read
    with ``tokens``, default `COMPLETION_TOKENS`): what a dry run's cost is priced at
    (``ragbridge estimate``, ``ragbridge testset --dry-run``)."""
    parser.add_argument("--price-in", type=price, help="USD per million prompt tokens")
    parser.add_argument("--price-out", type=price, help="USD per million completion tokens")
    parser.add_argument(
        "--completion-tokens",
        type=tokens,
        default=COMPLETION_TOKENS,
        metavar=tokens_metavar,
        help=tokens_help,
    )
