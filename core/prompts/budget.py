"""Completion budgets: how many tokens a task's reply may need, from what it must list.

Why every request carries one: a judge that does not stop (a small local model repeating
itself, or one that never closes its JSON) otherwise generates until the server's limit —
1,023 tokens, 135–155 s each on a 2-core CPU for Gemma 3 270M — past the client's timeout,
while the server keeps generating and queues the next calls. A ``max_tokens`` sized to the
reply bounds the cost of a bad reply and leaves a good one untouched.

A budget is computed from the render values of one request, by the template that knows what
its reply lists: one verdict per claim, context or statement (`VERDICT` tokens each: a
one-sentence reason, the verdict, a context number), plus the text a reply restates (claims
split from an answer, statements from a reference: about `RESTATE` times the source's tokens).
Tokens are counted pessimistically (`tokens`: 3 characters a token, where English averages
about 4), and every budget is kept between `FLOOR` and `CEILING`. The budget is a bound with
headroom, not a prediction: a fitting reply uses a half to a third of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "CEILING",
    "FLOOR",
    "OVERHEAD",
    "RESTATE",
    "SENTENCE",
    "VERDICT",
    "Budget",
    "bounded",
    "flat",
    "items",
    "per_item",
    "restating",
    "summed",
    "tokens",
]

Budget = Callable[[Mapping[str, Any]], int]
"""A template's budget function: render values in, completion tokens out."""

FLOOR = 128
"""The least any reply is given: braces, keys and a sentence."""

CEILING = 8192
"""The most any reply is given, whatever it lists (the attempt timeout bounds it too)."""

OVERHEAD = 48
"""The object's braces, keys and list brackets."""

VERDICT = 96
"""One list item of reason + verdict (+ context): ~30–50 tokens written, doubled."""

SENTENCE = 64
"""One free sentence (an explanation, a generated question), with headroom."""

RESTATE = 2.0
"""Tokens of a reply that restates a text, per token of the text (claims resolve pronouns)."""

CHARS_PER_TOKEN = 3.0
"""Characters a token, counted low (English text averages about 4 in current tokenizers)."""


def tokens(text: str | Iterable[str]) -> int:
    """A pessimistic token count of ``text`` (or of several texts together)."""
    joined = text if isinstance(text, str) else "\n".join(text)
    return math.ceil(len(joined) / CHARS_PER_TOKEN)


def items(values: Mapping[str, Any], name: str) -> int:
    """How many ``name`` items (claims, contexts, statements) the request shows."""
    value = values.get(name)
    if value is None or isinstance(value, str):
        return 0
    return len(list(value))


def bounded(budget: float) -> int:
    """``budget`` rounded up and kept within `FLOOR`..`CEILING`."""
    return max(FLOOR, min(CEILING, math.ceil(budget)))


def per_item(name: str, *, extra: int = 0) -> Budget:
    """The budget of a reply with one verdict per ``name`` item, plus ``extra`` tokens."""

    def budget(values: Mapping[str, Any]) -> int:
        return bounded(OVERHEAD + extra + VERDICT * items(values, name))

    budget.__doc__ = f"{VERDICT} tokens per {name} item, plus {OVERHEAD + extra}."
    return budget


def restating(name: str, *, per_fact: int = 0, extra: int = 0) -> Budget:
    """The budget of a reply that splits the text ``name`` into facts and restates them.

    ``per_fact`` tokens are added per expected fact (one per ~60 characters of the text), for
    replies that attach a reason and a verdict to each.
    """

    def budget(values: Mapping[str, Any]) -> int:
        text = values.get(name) or ""
        source = text if isinstance(text, str) else "\n".join(str(t) for t in text)
        facts = max(1, math.ceil(len(source) / 60))
        return bounded(OVERHEAD + extra + RESTATE * tokens(source) + per_fact * facts)

    return budget


def flat(sentences: int) -> Budget:
    """The budget of a reply of ``sentences`` free sentences and a verdict (a grader's)."""

    def budget(values: Mapping[str, Any]) -> int:
        return bounded(OVERHEAD + SENTENCE * sentences)

    return budget


def summed(*parts: Budget) -> Budget:
    """The budget of a reply made of several parts, each with its own budget."""

    def budget(values: Mapping[str, Any]) -> int:
        return bounded(sum(part(values) for part in parts))

    return budget
