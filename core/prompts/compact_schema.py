"""The reply schema as the judge sees it: a one-line JSON shape, computed once per schema class.

Why not pydantic's JSON Schema: ``model_json_schema()`` carries what a developer needs and a
judge does not — ``title``s, docstrings and ``description``s, ``$defs``/``$ref`` indirection, and
validator markings such as ``aligned_with`` — and it cost ~3.25k characters on every sample (the
instructions already say what each field means). The judge needs the keys, their order (the
reasoning field before the verdict), the value types and the allowed literals; the parser
(``schema.model_validate_json``) checks the rest. So this renders the shape in a terse,
TypeScript-like notation::

    {"verdicts":[{"reason":string,"verdict":"supported"|"contradicted"|"unsupported",
    "context":integer|null}]}

It is built from the model's field annotations (not from ``model_json_schema()``), so it is
stable across pydantic releases, and memoised per class: it ends every prompt and every repair
re-ask, and rebuilding a schema per prompt was most of the engine's CPU (issue 13).
"""

from __future__ import annotations

import collections.abc
import functools
import json
import types
import typing
from enum import Enum
from typing import Any, Literal, Union

from pydantic import BaseModel

__all__ = ["INSTRUCTION", "compact_schema", "schema_instruction"]

INSTRUCTION = "Reply with JSON only:"
"""The sentence before the shape; part of every prompt's fingerprint (see `PromptTemplate`)."""

_SCALARS: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@functools.cache
def compact_schema(schema: type[BaseModel]) -> str:
    """``schema``'s fields as a one-line JSON shape, in declaration order (see the module)."""
    return _object(schema)


@functools.cache
def schema_instruction(schema: type[BaseModel]) -> str:
    """The text every structured prompt (and every repair re-ask) ends with."""
    return f"{INSTRUCTION}\n{compact_schema(schema)}"


def _object(schema: type[BaseModel]) -> str:
    fields = ",".join(
        f"{json.dumps(info.alias or name)}:{_shape(info.annotation)}"
        for name, info in schema.model_fields.items()
        if not info.exclude
    )
    return "{" + fields + "}"


def _shape(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _shape(args[0])
    if origin is Literal:
        return "|".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return "|".join(_shape(a) for a in args)
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence):
        return f"[{_shape(args[0]) if args else 'any'}]"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return _object(annotation)
        if issubclass(annotation, Enum):
            return "|".join(json.dumps(m.value) for m in annotation)
        if annotation in _SCALARS:
            return _SCALARS[annotation]
    if annotation is None:
        return "null"
    raise TypeError(f"compact_schema cannot render the type {annotation!r}")
