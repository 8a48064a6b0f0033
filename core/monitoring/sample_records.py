"""What a results store keeps of a sample and of a judge's explanation, and how much of it.

``ragbridge serve`` shows a sample's question, answer, reference and contexts beside each
metric's reason and claims, long after the run's results file is gone, so the store keeps them
(schema 3, `ragbridge.core.monitoring.migrations`). A store is written by every CI run for
months, so what it keeps is bounded: a sample's record holds at most `MAX_CONTEXTS` contexts of
at most `MAX_CONTEXT_CHARS` characters each (and its question, answer and reference at most
`MAX_TEXT_CHARS`), with ``"cut": true`` when anything was left out; a cell's details (claims,
verdicts) are kept whole up to `MAX_DETAILS_CHARS` of JSON and shortened by `brief` beyond.

Both stores (SQLite and PostgreSQL) encode and decode through these functions, so the same
sample reads back the same from either.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sample import Sample

__all__ = [
    "MAX_CONTEXTS",
    "MAX_CONTEXT_CHARS",
    "MAX_DETAILS_CHARS",
    "MAX_TEXT_CHARS",
    "brief",
    "decode_details",
    "decode_record",
    "encode_details",
    "encode_record",
    "sample_record",
]

MAX_CONTEXTS = 20
MAX_CONTEXT_CHARS = 2_000
MAX_TEXT_CHARS = 8_000
"""The question, the answer and the reference are cut here (rarely reached)."""
MAX_DETAILS_CHARS = 20_000


def _cut(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit], True


def sample_record(sample: Sample) -> dict[str, Any]:
    """The compact record of ``sample`` a store keeps: question, answer, reference, and its
    contexts as ``{"id", "text"}`` (see the module docstring for the limits)."""
    cut = len(sample.contexts) > MAX_CONTEXTS
    contexts = []
    for context in sample.contexts[:MAX_CONTEXTS]:
        text, shortened = _cut(context.text, MAX_CONTEXT_CHARS)
        cut = cut or shortened
        contexts.append({"id": context.id, "text": text})
    record: dict[str, Any] = {}
    for name in ("question", "answer", "reference"):
        value, shortened = _cut(getattr(sample, name), MAX_TEXT_CHARS)
        cut = cut or shortened
        record[name] = value
    record["contexts"] = contexts
    if cut:
        record["cut"] = True
    if len(sample.contexts) > MAX_CONTEXTS:
        record["contexts_total"] = len(sample.contexts)
    return record


def encode_record(record: dict[str, Any]) -> str:
    """A sample record as the text a store keeps."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def decode_record(text: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def encode_details(details: Any) -> str | None:
    """A cell's details as the text a store keeps (None for none); past `MAX_DETAILS_CHARS`
    the details are shortened by `brief` (long lists and strings cut, saying so)."""
    if details is None:
        return None
    text = json.dumps(details, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    if len(text) <= MAX_DETAILS_CHARS:
        return text
    return json.dumps(brief(details), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def decode_details(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def brief(value: Any, *, items: int = 20, chars: int = 500) -> Any:
    """``value`` with its bulky parts cut: lists past ``items`` entries and strings past ``chars``
    characters are shortened, saying how much was left out (a run's metadata can hold every
    flipped sample id or warning; the history needs the gist)."""
    if isinstance(value, Mapping):
        return {str(k): brief(v, items=items, chars=chars) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        head = [brief(v, items=items, chars=chars) for v in value[:items]]
        if len(value) > items:
            head.append(f"… {len(value) - items} more")
        return head
    if isinstance(value, str) and len(value) > chars:
        return value[: chars - 1] + "…"
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)
