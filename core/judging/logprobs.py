"""Token log-probabilities as a judge returns them: read once, checked once, for every adapter.

A scored criterion weights its score by the probability of each point of its scale (G-Eval), so
a judge's reply may carry its tokens' log-probabilities (`TokenLogprob`, asked for through
`logprobs_wanted`). OpenAI-compatible servers give them as ``choices[0].logprobs`` =
``{"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}, ...]}``, and
LangChain's ChatOpenAI hands the same object on as ``response_metadata["logprobs"]``; both
adapters read it here (`openai_logprobs`), so they cannot read it differently.

The numbers are checked on the way in (`usable_logprobs`), because they end up in a cache entry
and in a probability-weighted mean: a NaN would make a score NaN, an infinity would not survive
the cache's JSON. A chosen token whose log-probability is not a number makes the whole list
unusable (None: the caller falls back to the integer it parsed); an alternative that is not one
is dropped; ``-inf`` and anything below `FLOOR` become `FLOOR` (OpenAI's own "no probability",
``-9999.0``); a value above 0 (rounding) becomes 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .judge import TokenLogprob

__all__ = ["FLOOR", "openai_logprobs", "usable_logprobs"]

FLOOR = -9999.0
"""The lowest log-probability kept: what OpenAI reports for a token with no probability left."""


def _number(value: Any) -> float | None:
    """``value`` as a log-probability in [`FLOOR`, 0], or None when it is not a real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if math.isnan(number):
        return None
    return min(0.0, max(FLOOR, number))


def usable_logprobs(items: Iterable[TokenLogprob] | None) -> tuple[TokenLogprob, ...] | None:
    """``items`` with every number checked (see the module), or None when they cannot be used.

    What the engine keeps of a judge's reply, whichever adapter made it: a judge written
    against the protocol may build `TokenLogprob` itself.
    """
    if items is None:
        return None
    kept: list[TokenLogprob] = []
    for item in items:
        if not isinstance(item, TokenLogprob) or not isinstance(item.token, str):
            return None
        chosen = _number(item.logprob)
        if chosen is None:
            return None
        top: dict[str, float] = {}
        for alternative, logprob in dict(item.top).items():
            number = _number(logprob)
            if isinstance(alternative, str) and number is not None:
                top[alternative] = number
        kept.append(TokenLogprob(item.token, chosen, top))
    return tuple(kept)


def openai_logprobs(raw: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of an OpenAI-compatible ``logprobs`` object (``{"content": [...]}``), in
    order, or None when it holds none (absent, ``null``, a tool call's ``content: null``) or
    is not that shape: a list that cannot be trusted token by token is no list.

    An alternative listed twice keeps its first (highest-ranked) value.
    """
    content = raw.get("content") if isinstance(raw, Mapping) else None
    if not isinstance(content, list):
        return None
    tokens: list[TokenLogprob] = []
    for entry in content:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            return None
        top: dict[str, Any] = {}
        alternatives = entry.get("top_logprobs")
        if isinstance(alternatives, list):
            for alternative in alternatives:
                if isinstance(alternative, Mapping) and isinstance(alternative.get("token"), str):
                    top.setdefault(alternative["token"], alternative.get("logprob"))
        logprob: Any = entry.get("logprob")  # checked below, with every alternative's
        tokens.append(TokenLogprob(entry["token"], logprob, top))
    return usable_logprobs(tokens)
