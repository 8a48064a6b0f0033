"""Reading a judge's reply: the JSON object in it, validated against the schema, then checked
against the request.

Kept apart from the engine (`ragbridge.core.judging.engine`) because more than the engine reads
replies exactly this way: ``ragbridge cache prune --failed`` parses stored replies with
`parse_reply`, the cache key hashes the schema as `schema_key_json` gives it, and every prompt
ends with `schema_instruction`. Nothing here sends a call.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..cache.request_key import canonical_json

__all__ = [
    "Validator",
    "check",
    "extract_json",
    "parse_reply",
    "schema_instruction",
    "schema_key_json",
]

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> str | None:
    """The JSON object in a reply: a fenced block, or the first balanced ``{...}`` in prose."""
    for match in _FENCE.finditer(text):
        inner = match.group(1).strip()
        if inner.startswith("{"):
            return inner
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = False
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def parse_reply(text: str, schema: type[T]) -> tuple[T | None, str | None]:
    """Validate a reply against ``schema``; on failure return the error to show in a repair.

    Tolerates fences and prose around the object (`extract_json`). Public so that tools that
    read stored replies (``ragbridge cache prune --failed``) parse exactly as the engine does.
    """
    stripped = text.strip()
    if stripped.startswith("{") and "```" not in stripped:
        # The common case (and every reply the engine stores): the text is the object itself.
        # `extract_json` would return exactly this text, so validating it directly gives the
        # same value without scanning it character by character in Python; any failure takes
        # the general path below, so the error a repair quotes is unchanged.
        try:
            return schema.model_validate_json(stripped), None
        except ValidationError:
            pass
    candidate = extract_json(text)
    if candidate is None:
        return None, "the reply contains no JSON object"
    try:
        return schema.model_validate_json(candidate), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'object'}: {err['msg']}"
            for err in exc.errors(include_url=False)[:5]
        )
        return None, problems


S = TypeVar("S")

# Per schema class, computed once: `model_json_schema()` costs ~2 ms and leaves cyclic garbage,
# and it used to be rebuilt for every prompt and every cache key. Keyed by the class object (held
# weakly, so classes built in tests can go), never by its name: two classes named alike with
# different fields are two entries. A class whose fields change after first use (a later
# `model_rebuild`) is not supported: a schema class is fixed once its prompts are in use.
_PER_SCHEMA: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def _per_schema(func: Callable[[type[BaseModel]], S]) -> Callable[[type[BaseModel]], S]:
    """Memoise ``func(schema)`` per schema class (see `_PER_SCHEMA`)."""
    name = func.__qualname__

    @functools.wraps(func)
    def memoised(schema: type[BaseModel]) -> S:
        slot = _PER_SCHEMA.get(schema)
        if slot is None:
            slot = _PER_SCHEMA[schema] = {}
        if name not in slot:
            slot[name] = func(schema)
        value: S = slot[name]
        return value

    return memoised


@_per_schema
def schema_key_json(schema: type[BaseModel]) -> str:
    """The schema as the cache key hashes it: canonical JSON of ``model_json_schema()``.

    The key covers the full schema the reply is validated against (not just the text the judge
    is shown), so a change to the parser's schema is a miss even if the prompt stayed the same.
    """
    return canonical_json(schema.model_json_schema(), "schema")


def schema_instruction(schema: type[BaseModel]) -> str:
    """The sentence every structured prompt ends with: the reply's shape, stated in the prompt.

    The compact shape the judge needs (keys in declaration order, types, literals); memoised
    per schema class there, see `ragbridge.core.prompts.compact_schema`.
    """
    from ..prompts.compact_schema import schema_instruction as instruction

    return instruction(schema)


Validator = Callable[[Any], "str | None"]
"""A per-request check of a parsed reply: the problem as one sentence, or None when it fits.

Schema validation says a reply is well-formed; a validator says it answers *this* request (one
verdict per claim asked, context numbers that exist). A validator may carry a ``facts``
attribute (a JSON-able mapping of what it checked against, e.g. ``{"CLAIM": 3}``), which the
engine stores next to the cached reply so `ragbridge cache prune --failed` can check it again.
"""


def check(validate: Validator | None, value: Any) -> str | None:
    """Run a validator; one that raises rejects the reply (with the error) instead of the run."""
    if validate is None:
        return None
    try:
        return validate(value)
    except Exception as exc:  # a reply odd enough to break the check is not usable
        return f"the reply could not be checked ({type(exc).__name__}: {exc})"
