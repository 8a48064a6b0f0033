"""Test doubles for the `Judge` and `Embedder` protocols: hermetic, deterministic, countable.

* `ScriptedJudge` answers by task: each prompt's system message starts with a tag
  ``[ragbridge task: <id> v<version>]``; a script maps task ids to replies (a dict, a model
  instance, raw text, an exception to raise, a callable, or a list consumed in order).
* `CountingJudge` answers *any* schema with a minimal valid instance and counts calls, tokens and
  the largest number of calls in flight — for budgets, caps and wall-time benchmarks.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Union

from pydantic import BaseModel

from .judge import JudgeReply, Message
from .results import Usage

__all__ = ["CountingJudge", "HashEmbedder", "RecordedCall", "ScriptedJudge", "minimal_instance"]

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

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        task = task_of(messages)
        self.by_task[task] = self.by_task.get(task, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            # Count blocks over the whole conversation: a repair re-ask has none of its own.
            asked = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
            blocks = {(m["label"], m["n"]) for m in _BLOCK.finditer(asked)}
            counts: dict[str, int] = {}
            for label, _ in blocks:
                counts[label] = counts.get(label, 0) + 1
            length = max(counts.values(), default=self.list_length)
            text = (
                "ok"
                if schema is None
                else minimal_instance(schema, length, counts).model_dump_json()
            )
            prompt = sum(_tokens(m.get("content", "")) for m in messages)
            completion = _tokens(text)
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            return JudgeReply(
                text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=completion)
            )
        finally:
            self.in_flight -= 1


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
        return _minimal(args[0], list_length)
    raise TypeError(f"minimal_instance cannot build a value of type {annotation!r}")


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
