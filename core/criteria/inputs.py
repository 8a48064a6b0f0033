"""What a criterion's judge call is given: the sample fields it reads, and how many
log-probability alternatives a scored criterion asks for.

These are shared by the call of one criterion (`ragbridge.core.criteria.measures`) and the
call of several at once (`ragbridge.core.criteria.batch`), and live apart from both so that
neither imports the other for them: measures builds batches, and a batch must not reach back
into measures (the core's imports run one way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..prompts.history import asked
from ..sample import Sample
from .spec import FIELD_NAMES

__all__ = ["LOGPROBS", "missing_field", "sample_values"]

LOGPROBS = 20
"""Alternatives per token a scored criterion asks for (OpenAI's most): enough to see every
level of a scale up to 1-10 at the score's position."""


def sample_values(reads: Sequence[str], sample: Sample) -> dict[str, Any]:
    """The render values of the fields ``reads`` names (contexts as their texts)."""
    values: dict[str, Any] = {}
    for name in reads:
        if name == "contexts":
            values[name] = [c.text for c in sample.contexts]
        elif name == "question":
            values[name] = asked(sample)  # a turn's question with the conversation so far
        elif name in FIELD_NAMES:
            values[name] = getattr(sample, name) or ""
        else:
            values[name] = sample.metadata.get(name.partition(".")[2])
    return values


def missing_field(reads: Sequence[str], sample: Sample) -> str | None:
    """The first field of ``reads`` the sample lacks (absent, blank, no contexts), or None."""
    for name in reads:
        if name == "contexts":
            value: Any = sample.contexts
        elif name in FIELD_NAMES:
            value = getattr(sample, name)
        else:
            value = sample.metadata.get(name.partition(".")[2])
        if value is None or (isinstance(value, (str, list)) and not _nonblank(value)):
            return name
    return None


def _nonblank(value: str | list[Any]) -> bool:
    return bool(value.strip()) if isinstance(value, str) else bool(value)
