"""The key of a judge request: a sha256 of everything that can change the judge's reply.

The first promise of the cache, a second run of the same evaluation makes zero judge calls,
rests on this key: an identical request must hash alike (key order, ``0`` vs ``0.0``, tuples vs
lists do not matter) and any change that can change the reply must hash differently. It is its
own module because every backend (the SQLite file, Redis in the adapters) and the engine compute
it the same way, and because the canonical JSON it rests on (`canonical_json`) also serialises a
schema once per class (`ragbridge.core.judging.reply_parse.schema_key_json`) and a reply's facts
(`ragbridge.core.cache.stored.facts_json`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CACHE_FORMAT_VERSION", "cache_key", "canonical_json", "canonical_value"]

#: Part of every reply key. Bump it when the canonical form of a key changes, so that entries
#: written under the old form are never mistaken for answers to the new one.
CACHE_FORMAT_VERSION = 1


def canonical_value(value: Any, where: str) -> Any:
    """``value`` rebuilt from plain JSON types, so equal requests serialise identically.

    Mappings become dicts (their key order is dropped later by ``sort_keys``), sequences become
    lists, and a float with an integral value becomes an int: ``temperature=0`` and
    ``temperature=0.0`` are the same request and must share a key. ``bool`` stays distinct from
    ``int`` because JSON keeps them apart. Non-string mapping keys are refused: JSON would turn
    ``1`` into ``"1"`` and silently merge two different requests.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: non-finite number {value!r} cannot be part of a cache key")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: mapping keys must be str, got {k!r}")
            out[k] = canonical_value(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [canonical_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return canonical_value(value.item(), where)
    raise TypeError(
        f"{where}: {type(value).__name__} is not JSON-like and cannot be part of a cache key"
    )


def canonical_json(value: Any, where: str) -> str:
    """``value`` as the canonical JSON a key hashes: `canonical_value`, sorted keys, no spaces."""
    return json.dumps(
        canonical_value(value, where),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def _messages_json(messages: Sequence[Mapping[str, str]]) -> str:
    """`canonical_json` of chat messages, without the recursive rebuild when it changes nothing.

    Messages are nearly always dicts of strings, which `canonical_value` returns as they are; the
    rebuild was a fifth of the cost of a cache hit. Anything else takes the general path.
    """
    plain = all(
        type(m) is dict and all(type(k) is str and type(v) is str for k, v in m.items())
        for m in messages
    )
    if not plain:
        return canonical_json(list(messages), "messages")
    return json.dumps(
        list(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def cache_key(
    *,
    model: str,
    template_id: str,
    template_version: str,
    messages: Sequence[Mapping[str, str]],
    schema: Mapping[str, Any] | None,
    params: Mapping[str, Any] | None = None,
    schema_json: str | None = None,
    logprobs: int | None = None,
) -> str:
    """The sha256 hex key of one judge request.

    Every input that can change the judge's reply is hashed, so a changed prompt, template
    version, model, schema or parameter is a cache miss rather than a stale hit. The parts are
    serialised as canonical JSON (sorted keys, fixed separators, UTF-8 kept as is), so dict key
    order and whitespace never matter. ``params=None`` and ``params={}`` mean the same request;
    ``schema=None`` (free text) and ``schema={}`` (any JSON) do not, and get different keys.

    ``schema_json`` is the schema already serialised by `canonical_json` (give it instead of
    ``schema``): the engine computes it once per schema class, since rebuilding and
    re-serialising a JSON Schema for every request cost more than the rest of a call. Either
    way the key is the same.

    ``logprobs`` is how many alternatives per token the request asks the judge's
    log-probabilities for (None: none, and the key is the one it always was). A request that
    asks for them is another request: its reply is stored with them, or with none when the
    judge could not give them, and is not taken for the reply of a request without them, nor
    of one asking a different number (the weighted score depends on it).
    """
    if schema_json is not None:
        if schema is not None:
            raise TypeError("give schema or schema_json, not both")
        schema_part = schema_json
    else:
        schema_part = canonical_json(schema, "schema")
    # The blob is what json.dumps(parts, sort_keys=True, ...) of the dict of parts gives: the
    # parts in sorted key order, each serialised alone, so a pre-serialised schema fits in.
    asked: tuple[tuple[str, str], ...] = ()
    if logprobs is not None:
        asked = (("logprobs", canonical_json(logprobs, "logprobs")),)
    parts = (
        ("format", str(CACHE_FORMAT_VERSION)),
        *asked,  # only when asked: every other key stays as it was
        ("messages", _messages_json(messages)),
        ("model", canonical_json(model, "model")),
        ("params", canonical_json(params if params is not None else {}, "params")),
        ("schema", schema_part),
        ("template_id", canonical_json(template_id, "template_id")),
        ("template_version", canonical_json(template_version, "template_version")),
    )
    blob = "{" + ",".join(f'"{name}":{text}' for name, text in parts) + "}"
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
