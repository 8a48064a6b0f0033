"""G-Eval's probability-weighted score: the mean of the scale's levels, each weighted by the
probability the judge gave its token where it wrote the score.

Why: an integer score on a 1-5 scale is coarse and ties often (most answers get a 4), and the
integer a judge samples is one draw from what it believes. G-Eval (Liu et al., 2023, "G-Eval:
NLG Evaluation using GPT-4 with Better Human Alignment", §2.3) scores
``Σ_i p(s_i) · s_i`` over the scale's levels ``s_i`` instead, with ``p`` read from the model's
token probabilities, which correlates better with people than the integer does.

Here the probabilities are the ``top_logprobs`` at the position of the score's value in the
reply's JSON: the alternatives that are integers of the scale are kept (`` 4`` and ``4`` count
as one level), their probabilities renormalised to sum to 1 (the mass on other tokens is
dropped, as G-Eval does), and the mean taken. There is no weighted score (None: the caller
keeps the integer) when the reply carries no log-probabilities, when the value cannot be found,
when it spans several tokens (``10`` written as ``1`` then ``0``: the alternatives at the first
token are not levels) or when no alternative at that position is a level of the scale.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..judging.judge import TokenLogprob

__all__ = ["value_offset", "weighted_score"]

_LEVEL = re.compile(r"[\s:\"']*(?P<n>-?\d+)[\s,}\]\"']*")


def value_offset(text: str, field: str) -> int | None:
    """Where the value of ``field`` starts in the JSON object in ``text``, or None.

    ``field`` is a key of the outermost object, or a dotted path into nested objects
    (``"tone.score"``). Keys are matched as JSON strings outside other strings, so a reason
    that mentions ``"score":`` is never mistaken for the score.
    """
    path = field.split(".")
    start = text.find("{")
    if start < 0:
        return None
    depth = 0
    stack: list[str | None] = []  # the key each open object was the value of
    i = start
    pending: str | None = None  # the last key read, waiting for its value
    while i < len(text):
        ch = text[i]
        if ch == '"':
            end = _string_end(text, i)
            if end is None:
                return None
            word = text[i + 1 : end]
            j = _skip_space(text, end + 1)
            if j < len(text) and text[j] == ":":
                pending = word
                value_at = _skip_space(text, j + 1)
                trail = [k for k in stack[1:] if k is not None]
                if [*trail, word] == path and len(stack) == len(path):
                    return value_at if value_at < len(text) else None
                i = value_at
                continue
            i = end + 1
            continue
        if ch == "{":
            depth += 1
            stack.append(pending)
            pending = None
        elif ch == "}":
            depth -= 1
            stack.pop()
            if depth == 0:
                return None
        elif ch == "[":
            stack.append(None)
            pending = None
        elif ch == "]":
            stack.pop()
        i += 1
    return None


def _string_end(text: str, start: int) -> int | None:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _level(token: str) -> int | None:
    match = _LEVEL.fullmatch(token)
    return int(match["n"]) if match else None


def weighted_score(
    text: str,
    logprobs: Sequence[TokenLogprob] | None,
    *,
    field: str,
    scale: tuple[int, int],
) -> tuple[float, str] | None:
    """``(Σ p(level) · level, "logprobs")`` at the score ``field`` of the reply, or None.

    ``text`` is the reply that was parsed; ``logprobs`` its tokens in order (their
    concatenation is the reply as generated, which may carry a fence or prose around the
    JSON; offsets are read there, and a score that differs from the one in ``text`` gives
    None). ``scale`` is ``(low, high)``, inclusive. See the module for when there is none.
    """
    if not logprobs:
        return None
    source = "".join(t.token for t in logprobs)
    at = value_offset(source, field)
    if at is None:
        return None
    number = re.match(r"-?\d+", source[at:])
    if number is None:
        return None
    used = value_offset(text, field)
    if used is not None and not text[used:].startswith(number.group(0)):
        return None  # the log-probabilities are of another reply than the one used
    position = 0
    for token in logprobs:
        end = position + len(token.token)
        if position <= at < end:
            chosen = _level(token.token)
            # the value must be this token's whole number (not "1" of a "10" in two tokens)
            if chosen is None or str(chosen) != number.group(0).lstrip("+"):
                return None
            return _mean(token, scale)
        position = end
    return None


def _mean(token: TokenLogprob, scale: tuple[int, int]) -> tuple[float, str] | None:
    low, high = scale
    mass: dict[int, float] = {}
    alternatives = dict(token.top)
    alternatives.setdefault(token.token, token.logprob)
    for alt, logprob in alternatives.items():
        level = _level(alt)
        if level is None or not low <= level <= high or not math.isfinite(logprob):
            continue
        mass[level] = mass.get(level, 0.0) + math.exp(logprob)
    if not token.top or not mass:
        return None
    total = sum(mass.values())
    if not total > 0.0:
        return None
    score = sum(level * p for level, p in mass.items()) / total
    return min(float(high), max(float(low), score)), "logprobs"
