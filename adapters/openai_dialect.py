"""How an OpenAI-compatible server wants a constrained reply asked for: detected once, kept.

"OpenAI-compatible" servers disagree on the one field that decides whether a small model can
answer at all, ``response_format``:

* OpenAI, vLLM, Ollama and llama.cpp's own ``llama-server`` take OpenAI's structured outputs,
  ``{"type": "json_schema", "json_schema": {"name", "strict": true, "schema"}}``, and decode
  only tokens the schema allows;
* llama-cpp-python's server (``python -m llama_cpp.server``) rejects that form with HTTP 500 and
  a pydantic validation error in the body, yet constrains decoding by a grammar when the schema
  comes as ``{"type": "json_object", "schema": {...}}``;
* some servers know only JSON mode (``{"type": "json_object"}``: valid JSON, any shape — Gemma 3
  270M answers ``{"claims": [true], ...}``), and some refuse ``response_format`` altogether.

So the judge climbs down a ladder (`LADDER`): strict JSON schema, JSON object with the schema,
JSON mode, plain text (the schema is in every prompt anyway). A rung the server refuses — a
400/415/422, or a 500 whose body is about the response format (`refuses_format`) — is a dialect
to step past, not a fault to retry. The first rung that gets a reply is remembered per endpoint
(base URL and model) for the life of the process (`Dialects`), and while it is unknown only one
call per endpoint and event loop probes: the others wait for its answer, so a run pays for one
detection, not one per call in flight.

Log-probabilities are a dialect too: OpenAI returns them (``"logprobs": true, "top_logprobs":
k``, at most `MAX_TOP_LOGPROBS` alternatives), some models and servers refuse the fields with a
400 naming them (`refuses_logprobs`). The judge then asks once more without them and the endpoint
remembers (`_Endpoint.logprobs_refused`): its replies carry none, and a scored criterion weights
nothing, falling back to the integer it read.

The schema sent is the reply model's JSON Schema made self-contained (``$ref`` inlined) and, for
strict mode, closed: every object lists all its properties as required and allows no others, as
OpenAI's strict mode demands (`strict_schema`). Where the request fixes a list's length (one
verdict per claim: `ragbridge.core.judging.reply_format.ReplySpec.counts`), the grammar rung also
gets ``minItems``/``maxItems``, which llama.cpp's grammar honours; the strict rung does not, since
OpenAI's strict subset may refuse length keywords.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import threading
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, Literal

from pydantic import BaseModel

__all__ = [
    "LADDER",
    "MAX_TOP_LOGPROBS",
    "Dialects",
    "Mode",
    "dialects",
    "forget_dialects",
    "refuses_format",
    "refuses_logprobs",
    "response_format",
    "strict_schema",
]

Mode = Literal["json_schema", "json_object_schema", "json_object", "none"]
"""A rung: how the reply's shape is asked for (``none``: plain chat, the prompt states it)."""

LADDER: tuple[Mode, ...] = ("json_schema", "json_object_schema", "json_object", "none")
"""The rungs, most constrained first."""

_FORMAT_WORDS = (
    "response_format",
    "response format",
    "json_schema",
    "json schema",
    "json_object",
    "json mode",
    "structured output",
)


def refuses_format(status: int, body: str) -> bool:
    """Does this error refuse the way the reply was asked for (rather than the request)?

    A 400/415/422 that names the response format, or a 500 that does: llama-cpp-python's server
    answers OpenAI's ``json_schema`` with a 500 carrying pydantic's validation error (which
    names ``response_format``). A 500 that says nothing of it stays a server fault (retried).
    """
    if status not in (400, 415, 422, 500):
        return False
    text = body[:8000].lower()
    return any(word in text for word in _FORMAT_WORDS)


MAX_TOP_LOGPROBS = 20
"""The most alternatives per token OpenAI's ``top_logprobs`` takes (a larger value is a 400)."""


def refuses_logprobs(status: int, body: str) -> bool:
    """Does this error refuse the log-probabilities the request asked for?

    A 400/415/422 (or a 500: a server that fails on the field) whose body names them, as
    OpenAI's "Unsupported parameter: 'logprobs' is not supported with this model." does. Only
    asked when the request carried them; the judge then retries it once without.
    """
    return status in (400, 415, 422, 500) and "logprob" in body[:8000].lower()


def _closed(node: Any, defs: Mapping[str, Any], strict: bool, depth: int = 0) -> Any:
    """``node`` with ``$ref`` inlined, developer-only keywords dropped, and (``strict``) every
    object closed with all its properties required."""
    if depth > 32:
        raise ValueError("reply schema nests too deep (a recursive model?)")
    if isinstance(node, list):
        return [_closed(item, defs, strict, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if target is None:
            raise ValueError(f"reply schema has an unresolved $ref {ref!r}")
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _closed(merged, defs, strict, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$defs", "definitions", "title", "description", "default", "examples"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _closed(sub, defs, strict, depth + 1) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "additionalProperties"):
            out[key] = _closed(value, defs, strict, depth + 1)
        else:
            out[key] = copy.deepcopy(value)
    if strict and out.get("type") == "object":
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties", {}))
    return out


@functools.lru_cache(maxsize=256)
def strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The reply model's JSON Schema, self-contained and closed (see the module); memoised."""
    raw = schema.model_json_schema()
    closed: dict[str, Any] = _closed(raw, raw.get("$defs", {}), strict=True)
    return closed


def _with_counts(schema: dict[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    """``schema`` with each counted top-level list held to exactly its count of items."""
    if not counts:
        return schema
    out = copy.deepcopy(schema)
    properties = out.get("properties", {})
    for name, count in counts.items():
        prop = properties.get(name)
        if isinstance(prop, dict) and prop.get("type") == "array" and count >= 0:
            prop["minItems"] = prop["maxItems"] = count
    return out


def response_format(
    mode: Mode, schema: type[BaseModel], name: str, counts: Mapping[str, int] | None = None
) -> dict[str, Any] | None:
    """The ``response_format`` field of a request on this rung (None: send none)."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": strict_schema(schema)},
        }
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": _with_counts(strict_schema(schema), counts or {})}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


class _Endpoint:
    """One endpoint's remembered rung, and the probe in progress on each event loop."""

    def __init__(self) -> None:
        self.mode: Mode | None = None
        self.logprobs_refused = False
        """Set when the endpoint refused ``logprobs``: later calls no longer ask for them."""
        self.probes = 0
        """Detection rounds started (a test and a report read it)."""
        self._probing: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
            weakref.WeakKeyDictionary()
        )
        self._guard = threading.Lock()

    @asynccontextmanager
    async def detecting(self, wait: float | None) -> AsyncIterator[bool]:
        """Whether this call must detect the rung itself (True) or may use ``mode``.

        The first call on an event loop detects, the others wait for it — at most ``wait``
        seconds (None: as long as it takes), so that a probe stuck on a hung server does not
        spend their whole attempt timeout: past that, or when the probe learned nothing (its
        call failed), they detect for themselves.
        """
        loop = asyncio.get_running_loop()
        with self._guard:
            running = self._probing.get(loop)
            mine = None
            if running is None and self.mode is None:
                mine = self._probing[loop] = asyncio.Event()
        if mine is not None:
            self.probes += 1
            try:
                yield True
            finally:
                with self._guard:
                    if self._probing.get(loop) is mine:
                        del self._probing[loop]
                mine.set()
            return
        if running is not None:
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(running.wait(), wait)
        if self.mode is None:
            self.probes += 1
            yield True
        else:
            yield False


class Dialects:
    """The rung each endpoint (base URL, model) answered on, for the life of the process."""

    def __init__(self) -> None:
        self._endpoints: dict[tuple[str, str], _Endpoint] = {}
        self._guard = threading.Lock()

    def endpoint(self, base_url: str, model: str) -> _Endpoint:
        with self._guard:
            found = self._endpoints.get((base_url, model))
            if found is None:
                found = self._endpoints[(base_url, model)] = _Endpoint()
            return found

    def known(self, base_url: str, model: str) -> Mode | None:
        """The remembered rung of an endpoint, or None while it is undetected."""
        with self._guard:
            found = self._endpoints.get((base_url, model))
        return None if found is None else found.mode

    def forget(self) -> None:
        """Forget every endpoint (tests; a server replaced behind the same URL)."""
        with self._guard:
            self._endpoints.clear()


dialects = Dialects()
"""The process's memory of endpoints' dialects (shared by every `OpenAIJudge`)."""


def forget_dialects() -> None:
    """Forget every remembered dialect: the next call to each endpoint detects it again."""
    dialects.forget()
