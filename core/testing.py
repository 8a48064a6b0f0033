"""Test doubles for the `Judge` and `Embedder` protocols: hermetic, deterministic, countable.

* `ScriptedJudge` answers by task: each prompt's system message starts with a tag
  ``[ragbridge task: <id> v<version>]``; a script maps task ids to replies (a dict, a model
  instance, raw text, an exception to raise, a callable, or a list consumed in order).
* `CountingJudge` answers *any* schema with a minimal valid instance and counts calls, tokens,
  prompt characters and the largest number of calls in flight — for budgets, caps, wall-time
  benchmarks and prompt-size comparisons. Prompts that pass no schema but state a JSON Schema in
  their text (as other frameworks' prompts do, parsing the reply themselves) get a minimal JSON
  instance of that schema (`minimal_json`).
* `minimal_reply` / `wrong_reply` are the reply texts a fake HTTP server (which sees only the
  messages) sends: one that fits the request, and one that parses but does not (a verdict too
  many, a context number that was never shown) — what the engine's reply checks must catch.
* `HashEmbedder` embeds text deterministically by hashing words into a small vector, so texts
  that share words are similar: enough to exercise embedding-based metrics without a model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Union

from pydantic import BaseModel

from .judging.judge import JudgeReply, Message
from .results.evaluation import Usage

__all__ = [
    "CountingJudge",
    "HashEmbedder",
    "RecordedCall",
    "ScriptedJudge",
    "block_counts",
    "find_json_schema",
    "minimal_instance",
    "minimal_json",
    "minimal_reply",
    "wrong_reply",
]

_TAG = re.compile(r"\[ragbridge task: (?P<id>[\w.\-]+) v(?P<version>[\w.\-]+)\]")
_BLOCK = re.compile(r"<<<BEGIN (?P<label>[A-Z]+) (?P<n>\d+)>>>")


def task_of(messages: Sequence[Message]) -> str | None:
    """The ragbridge task id a prompt carries, or None for a prompt that is not ours."""
    for message in messages:
        match = _TAG.search(message.get("content", ""))
        if match:
            return match["id"]
    return None


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass(frozen=True)
class RecordedCall:
    task: str | None
    messages: list[Message]
    schema: type[BaseModel] | None


Reply = Any  # dict | BaseModel | str | BaseException | Callable[[list[Message]], Reply]


@dataclass
class ScriptedJudge:
    """Replies from a script keyed by task id (``"*"`` matches any task).

    A list of replies is consumed one per call (the last one repeats), which scripts retries
    and fault injection: ``{"faithfulness.verify": [RateLimited(), {"verdicts": [...]}]}``.
    ``delay`` (seconds) makes each call take time, for concurrency tests.
    """

    script: Mapping[str, Reply | list[Reply]]
    model: str = "scripted-judge"
    delay: float = 0.0
    calls: list[RecordedCall] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _positions: dict[str, int] = field(default_factory=dict)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        task = task_of(messages)
        self.calls.append(RecordedCall(task, list(messages), schema))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            key = task if task is not None and task in self.script else "*"
            if key not in self.script:
                raise AssertionError(f"ScriptedJudge has no reply for task {task!r}")
            reply = self._next(key)
            if callable(reply) and not isinstance(reply, (BaseModel, type)):
                reply = reply(list(messages))
            if isinstance(reply, BaseException):
                raise reply
            if isinstance(reply, BaseModel):
                text = reply.model_dump_json()
            elif isinstance(reply, str):
                text = reply
            else:
                text = json.dumps(reply)
            prompt = sum(_tokens(m.get("content", "")) for m in messages)
            return JudgeReply(
                text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=_tokens(text))
            )
        finally:
            self.in_flight -= 1

    def _next(self, key: str) -> Reply:
        replies = self.script[key]
        if not isinstance(replies, list):
            return replies
        i = self._positions.get(key, 0)
        self._positions[key] = i + 1
        return replies[min(i, len(replies) - 1)]

    def tasks(self) -> list[str | None]:
        return [c.task for c in self.calls]


@dataclass
class CountingJudge:
    """Answers every schema with `minimal_instance`; counts what a run spends.

    List fields get one item per numbered block (CONTEXT/CLAIM/STATEMENT) in the prompt, so
    per-item verdicts line up with what was asked; otherwise ``list_length`` items.

    Without a ``schema``, a ragbridge prompt (one with a task tag) is answered for its template's
    schema; any other prompt with a minimal JSON instance of the first JSON Schema stated in its
    text (`find_json_schema`), or ``"ok"`` when it states none (see `minimal_reply`).
    """

    model: str = "counting-judge"
    delay: float = 0.0
    list_length: int = 1
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    by_task: dict[str | None, int] = field(default_factory=dict)
    prompt_chars: int = 0
    """Characters of every message sent, all roles: what comparisons of prompt size between
    frameworks count (``prompt_tokens`` is only ``len // 4`` of each message)."""

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        self.prompt_chars += sum(len(m.get("content", "")) for m in messages)
        task = task_of(messages)
        self.by_task[task] = self.by_task.get(task, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            text = minimal_reply(messages, schema, self.list_length)
            prompt = sum(_tokens(m.get("content", "")) for m in messages)
            completion = _tokens(text)
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            return JudgeReply(
                text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=completion)
            )
        finally:
            self.in_flight -= 1


def block_counts(messages: Sequence[Message]) -> dict[str, int]:
    """How many numbered blocks of each label (CONTEXT, CLAIM, STATEMENT) a prompt shows.

    Counted over every user message of the conversation: a repair re-ask has none of its own.
    """
    asked = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
    blocks = {(m["label"], m["n"]) for m in _BLOCK.finditer(asked)}
    counts: dict[str, int] = {}
    for label, _ in blocks:
        counts[label] = counts.get(label, 0) + 1
    return counts


def _schema_of(messages: Sequence[Message]) -> type[BaseModel] | None:
    """The reply schema of a ragbridge prompt, found from its task tag (None for others)."""
    task = task_of(messages)
    if task is None:
        return None
    from .prompts import get

    try:
        return get(task).schema
    except KeyError:
        return None


def minimal_reply(
    messages: Sequence[Message], schema: type[BaseModel] | None = None, list_length: int = 1
) -> str:
    """The text of a minimal reply that is right for the request (what `CountingJudge` says).

    The schema is ``schema``, else the registered template's (from the prompt's task tag), else
    the first JSON Schema stated in the prompt text (``"ok"`` when there is none). Lists aligned
    with numbered blocks get one item per block, so the reply passes the request's checks too.
    A fake HTTP server, which sees only the messages, answers ragbridge prompts this way.
    """
    counts = block_counts(messages)
    length = max(counts.values(), default=list_length)
    model = schema or _schema_of(messages)
    if model is not None:
        return minimal_instance(model, length, counts).model_dump_json()
    asked = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
    stated = find_json_schema(asked)
    return "ok" if stated is None else json.dumps(minimal_json(stated, length))


def wrong_reply(messages: Sequence[Message], schema: type[BaseModel] | None = None) -> str:
    """A reply that is valid JSON for the schema but wrong for this request.

    Lists aligned with numbered blocks get one item too many (a verdict count that differs
    from the claim count), every cited context number points one past the last context, and
    generated questions are left empty. For tests of reply validation: the engine must
    re-ask, never accept or cache such a reply.
    """
    model = schema or _schema_of(messages)
    if model is None:
        return minimal_reply(messages, schema)
    counts = block_counts(messages)
    off_by_one = {label: n + 1 for label, n in counts.items()} or {"CONTEXT": 2, "CLAIM": 2}
    value: Any = minimal_instance(model, 1, off_by_one).model_dump()
    beyond = counts.get("CONTEXT", 0) + 1

    def spoil(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: spoil(v) for k, v in node.items()}
            if "context" in out and (out["context"] is None or isinstance(out["context"], int)):
                out["context"] = beyond
            if isinstance(out.get("questions"), list):
                out["questions"] = []
            return out
        if isinstance(node, list):
            return [spoil(v) for v in node]
        return node

    return json.dumps(spoil(value))


def minimal_instance(
    schema: type[BaseModel], list_length: int = 1, counts: Mapping[str, int] | None = None
) -> BaseModel:
    """A valid instance of ``schema`` with the smallest value of every field.

    A list field declared with ``json_schema_extra={"aligned_with": "CLAIM"}`` gets one item per
    ``CLAIM`` block counted in ``counts``; other lists get ``list_length`` items.
    """
    values = {}
    for name, info in schema.model_fields.items():
        if not info.is_required():
            continue
        length = list_length
        extra = info.json_schema_extra
        if isinstance(extra, dict) and counts is not None:
            label = extra.get("aligned_with")
            if isinstance(label, str):
                length = counts.get(label, 0)
        values[name] = _minimal(info.annotation, length)
    return schema.model_validate(values)


def _minimal(annotation: Any, list_length: int) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return args[0]
    if origin in (Union, types.UnionType):
        if type(None) in args:
            return None
        return _minimal(args[0], list_length)
    if origin in (list, Sequence, tuple):
        return [_minimal(args[0], list_length) for _ in range(list_length)] if args else []
    if origin is dict:
        return {}
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return minimal_instance(annotation, list_length).model_dump()
        if issubclass(annotation, Enum):
            return next(iter(annotation)).value
        if annotation is bool:
            return False
        if annotation is int:
            return 0
        if annotation is float:
            return 0.0
        if annotation is str:
            return "x"
    if origin is typing.Annotated:
        least = _lower_bound(args[1:])  # a 1-based number (``ge=1``) is 1 at the least, not 0
        return least if least is not None else _minimal(args[0], list_length)
    raise TypeError(f"minimal_instance cannot build a value of type {annotation!r}")


def _lower_bound(metadata: Sequence[Any]) -> int | None:
    """The least integer ``Annotated`` metadata allows (``Field(ge=1)``, ``Ge(1)``), or None."""
    for item in metadata:
        for bound in [item, *getattr(item, "metadata", ())]:
            ge, gt = getattr(bound, "ge", None), getattr(bound, "gt", None)
            if isinstance(ge, int):
                return ge
            if isinstance(gt, int):
                return gt + 1
    return None


def find_json_schema(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that is a JSON Schema of an object, or None.

    A JSON Schema here is an object with a ``properties`` object and ``"type": "object"`` (or a
    ``$defs``/``definitions`` table), which tells it apart from example inputs and outputs that
    prompts also quote. Text may follow the schema directly (no separator is needed).
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and _is_object_schema(value):
            return value
        start = text.find("{", end)
    return None


def _is_object_schema(value: Mapping[str, Any]) -> bool:
    if not isinstance(value.get("properties"), dict):
        return False
    return value.get("type") == "object" or "$defs" in value or "definitions" in value


def minimal_json(schema: Mapping[str, Any], list_length: int = 1) -> Any:
    """A minimal JSON value valid against ``schema`` (a JSON Schema, as a dict).

    Objects get their ``required`` properties only; arrays ``list_length`` items (within
    ``minItems``/``maxItems``); strings ``"x"`` (padded to ``minLength``); integers and numbers 0
    (or their ``minimum``); booleans false; ``const``/``enum`` their (first) value; a nullable
    type ``null``; ``$ref`` into ``$defs``/``definitions`` is followed; ``anyOf``/``oneOf`` take
    the first alternative and ``allOf`` merges its parts. Enough for the schemas pydantic emits.
    """
    return _MinimalJson(schema, list_length).value(schema)


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"minimal_json follows only local $refs, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"$ref {ref!r} does not resolve in the schema")
        node = node[part]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} does not point at a schema")
    return node


_NO_VALUE: Any = object()
"""`_fixed_value`'s answer for a schema that does not fix its value."""


def _union(schema: Mapping[str, Any]) -> list[Any] | None:
    """The alternatives of the first non-empty ``anyOf`` / ``oneOf``, or None."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return options
    return None


def _fixed_value(schema: Mapping[str, Any]) -> Any:
    """The value a schema allows first when it names it: ``const``, the first ``enum`` value,
    or null when a union admits it; else `_NO_VALUE`."""
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    options = _union(schema)
    if options is not None and any(
        isinstance(o, Mapping) and o.get("type") == "null" for o in options
    ):
        return None
    return _NO_VALUE


def _merged(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """An ``allOf`` schema as one: its parts merged (properties and required lists joined),
    then the schema's own keywords on top."""
    merged: dict[str, Any] = {}
    for part in schema["allOf"]:
        resolved = _resolve_ref(part["$ref"], root) if "$ref" in part else part
        for name, value in resolved.items():
            if name in ("properties", "required") and name in merged:
                merged[name] = (
                    {**merged[name], **value} if name == "properties" else merged[name] + value
                )
            else:
                merged[name] = value
    rest = {k: v for k, v in schema.items() if k != "allOf"}
    return {**merged, **rest}


def _inner_schema(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema a composed one stands for: a union's first alternative, or the merged
    ``allOf``; None for a schema that is not composed."""
    options = _union(schema)
    if options is not None:
        inner: Mapping[str, Any] = options[0]
        return inner
    if isinstance(schema.get("allOf"), list):
        return _merged(schema, root)
    return None


def _kind_of(schema: Mapping[str, Any]) -> str | None:
    """The schema's type: the first of a list of types (``"null"`` when null is among them),
    ``"object"`` for untyped properties, else None (any JSON value)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        if "null" in kind:
            return "null"
        kind = kind[0] if kind else None
    if kind is None and "properties" in schema:
        return "object"
    return kind if isinstance(kind, str) else None


def _lowest_number(schema: Mapping[str, Any]) -> float:
    """0, or the schema's positive lower bound (one above an exclusive one)."""
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    if isinstance(low, (int, float)) and low > 0:
        return low + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else low
    return 0


_SCALARS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "string": lambda schema: "x" * max(1, int(schema.get("minLength", 1))),
    "integer": lambda schema: int(_lowest_number(schema)),
    "number": lambda schema: float(_lowest_number(schema)),
    "boolean": lambda schema: False,
    "null": lambda schema: None,
}
"""The minimal value of each scalar type (objects and arrays recurse: `_MinimalJson`)."""


@dataclass(frozen=True)
class _MinimalJson:
    """`minimal_json`'s walk over one schema (``root`` resolves its ``$ref``s)."""

    root: Mapping[str, Any]
    list_length: int

    def value(self, schema: Mapping[str, Any], depth: int = 0) -> Any:
        """In order: a ``$ref`` is followed, a fixed value is taken, a composed schema is
        replaced by the one it stands for, then the type decides."""
        if depth > 50:
            raise ValueError("minimal_json: schema nests too deeply (a recursive $ref?)")
        if "$ref" in schema:
            return self.value(_resolve_ref(str(schema["$ref"]), self.root), depth + 1)
        fixed = _fixed_value(schema)
        if fixed is not _NO_VALUE:
            return fixed
        inner = _inner_schema(schema, self.root)
        if inner is not None:
            return self.value(inner, depth + 1)
        kind = _kind_of(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        scalar = _SCALARS.get(kind or "")
        return {} if scalar is None else scalar(schema)  # {} : any JSON value is valid

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties", {})
        return {
            name: self.value(properties.get(name, {}), depth + 1)
            for name in schema.get("required", [])
        }

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        items = schema.get("items", {})
        if isinstance(items, list):  # tuple form: one schema per position
            return [self.value(item, depth + 1) for item in items]
        count = max(self.list_length, int(schema.get("minItems", 0)))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [self.value(items, depth + 1) for _ in range(count)]


@dataclass
class HashEmbedder:
    """Bag-of-words vectors by hashing (dimension ``dim``): deterministic, model-free."""

    model: str = "hash-embedder"
    dim: int = 64
    calls: int = 0
    texts_embedded: int = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
            vec[int.from_bytes(digest, "little") % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec


def scripted(**replies: Reply) -> ScriptedJudge:
    """Shorthand: ``scripted(**{"faithfulness.verify": {...}})``."""
    return ScriptedJudge(dict(replies))
