"""The Score of one cell, and the failure it may hold: the leaf of the results package.

A measure answers one of three things for a (sample, metric) cell: a value in [0, 1], a typed
`Failure`, or a skip with a reason (`ragbridge.core.results.evaluation` says why they are kept
apart). `Score` and what it is made of live here, apart from `Evaluation`, so that the modules
that write and read cells (`ragbridge.core.results.cell_json`) and the table that holds them
can both import them without importing each other.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .usage import Usage

__all__ = ["Failure", "FailureKind", "Score", "ScoreStatus"]

ScoreStatus = Literal["scored", "failed", "skipped"]


class FailureKind(str, Enum):
    """Why a measure produced no value. A closed set, so reports can count failures by cause."""

    JUDGE_ERROR = "judge_error"
    PARSE_ERROR = "parse_error"
    TIMEOUT = "timeout"
    MISSING_INPUT = "missing_input"
    INVALID_INPUT = "invalid_input"
    NO_CLAIMS = "no_claims"
    RATE_LIMITED = "rate_limited"
    CANCELLED = "cancelled"
    INVALID_OUTPUT = "invalid_output"
    """A provider returned something that is not a score: out of [0, 1], not a number."""


class Failure(BaseModel):
    """A measure that could not be computed. Recorded next to, never instead of, the scores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FailureKind
    message: str


class _NotPlain(Exception):
    """Internal: `_plain_copy` met something only `_json_data`'s general path handles."""


def _plain_copy(obj: Any) -> Any:
    """A copy of ``obj`` when it already is plain JSON data of exact builtin types.

    Every Score's details pass through `_json_data`; nearly all are plain dicts, lists,
    strings and numbers, for which the general path spent most of its time building the
    ``where`` path of an error that never happens. Anything else raises `_NotPlain`.
    """
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:
        return obj
    if kind is float:
        if not math.isfinite(obj):
            raise _NotPlain
        return obj
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in obj.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain_copy(item)
        return out
    if kind is list:
        return [_plain_copy(item) for item in obj]
    raise _NotPlain


def _json_data(obj: Any, where: str) -> Any:
    """Return ``obj`` as plain JSON data, or raise ValueError naming the offending path.

    ``details`` are written to JSONL and must come back equal, so they are restricted to what JSON
    holds exactly: dicts with string keys, lists, strings, booleans, None, integers and finite
    floats. Tuples become lists and numpy scalars become Python numbers; NaN is refused here too.
    """
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"{where} must be finite JSON data, got {obj!r}")
        return float(obj)
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, item in obj.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            out[key] = _json_data(item, f"{where}.{key}")
        return out
    if isinstance(obj, (list, tuple)):
        return [_json_data(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    raise ValueError(f"{where} holds {type(obj).__name__!s}, which is not JSON data")


class Score(BaseModel):
    """The outcome of one measure on one sample: a value, a typed failure, or a skip.

    ``value`` is strict: a finite number in [0, 1] (integers are accepted and become floats;
    booleans and numeric strings are refused, they are usually bugs). ``details`` hold the per-claim
    or per-context verdicts behind the value; ``provider``, ``judge_model``, ``prompt_version``,
    ``usage`` and ``latency_s`` record where the value came from and what it cost.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None = Field(default=None, strict=True)
    reason: str | None = None
    details: list[dict[str, Any]] | dict[str, Any] | None = None
    failure: Failure | None = None
    provider: str | None = None
    judge_model: str | None = None
    prompt_version: str | None = None
    usage: Usage = Usage()
    latency_s: float | None = None

    @field_validator("value")
    @classmethod
    def _value_in_unit_interval(cls, v: float | None) -> float | None:
        if v is None:
            return None
        if not math.isfinite(v):
            raise ValueError(f"Score.value must be a finite number, got {v!r}")
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"Score.value must lie within [0, 1], got {v!r}")
        return float(v)

    @field_validator("details")
    @classmethod
    def _details_are_json(cls, v: Any) -> Any:
        try:
            return _plain_copy(v)
        except _NotPlain:
            return _json_data(v, "details")

    @field_validator("latency_s")
    @classmethod
    def _latency_non_negative(cls, v: float | None) -> float | None:
        if v is not None and not (math.isfinite(v) and v >= 0.0):
            raise ValueError(f"Score.latency_s must be a finite number >= 0, got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_outcome(self) -> Score:
        if self.value is not None and self.failure is not None:
            raise ValueError(
                "a Score cannot have both a value and a failure: a failure is never a low score"
            )
        if self.value is None and self.failure is None and not self.reason:
            raise ValueError(
                "a skipped Score (neither value nor failure) must carry a reason saying why"
            )
        return self

    @property
    def status(self) -> ScoreStatus:
        if self.failure is not None:
            return "failed"
        if self.value is not None:
            return "scored"
        return "skipped"

    @classmethod
    def fail(cls, kind: FailureKind | str, message: str, **kw: Any) -> Score:
        """A failed Score: ``Score.fail("timeout", "judge did not answer in 30 s")``."""
        return cls(failure=Failure(kind=FailureKind(kind), message=message), **kw)

    @classmethod
    def skip(cls, reason: str, **kw: Any) -> Score:
        """A skipped Score: the measure does not apply to this sample, for ``reason``."""
        return cls(reason=reason, **kw)

    @classmethod
    def trusted(cls, **fields: Any) -> Score:
        """``Score(**fields)``, built without pydantic's machinery when the fields are plainly
        valid; the same Score (equal, the same fields set, the same JSON) either way.

        For code that makes many Scores of plain Python values (the model-free measures: a
        run of 100,000 samples × 6 of them makes 600,000), where validation cost more than
        the measure itself. Every rule is still checked, cheaply: the value a finite float in
        [0, 1], one outcome, text fields strings, details plain JSON data of exact builtin
        types (not copied: pass details no one else holds). Anything else (an int value, a
        tuple in the details, a bad value) goes through ``Score(**fields)``, which converts
        it or raises the usual error.
        """
        if cls is not Score or not _plainly_valid(fields):
            return cls(**fields)
        data = dict(_DEFAULTS)
        data.update(fields)
        return _built(data, set(fields))

    def stamped(self, update: dict[str, Any]) -> Score:
        """``self.model_copy(update=update)`` for the stamp a metric puts on its Score
        (``provider``, ``judge_model``, ``prompt_version``: text; ``latency_s``: a finite
        float >= 0), checked; another field or value goes through `model_copy` unchecked,
        as before."""
        if type(self) is not Score or not _plain_stamp(update):
            return self.model_copy(update=update)
        data = dict(self.__dict__)
        data.update(update)
        return _built(data, self.__pydantic_fields_set__ | update.keys())


_DEFAULTS: dict[str, Any] = {name: info.default for name, info in Score.model_fields.items()}
_TEXT_FIELDS = ("reason", "provider", "judge_model", "prompt_version")


_SCALARS = frozenset({str, int, bool, type(None)})
"""The exact types of JSON scalars that need no further check (a float must be finite)."""
_isfinite = math.isfinite


def _is_plain(obj: Any) -> bool:
    """Whether ``obj`` is JSON data of exact builtin types with finite floats (`_plain_copy`'s
    rule, without the copy). Loops rather than generators, and a scalar settled by one set
    lookup before any call: this runs on every trusted Score."""
    kind = type(obj)
    if kind is dict:
        for key, item in obj.items():
            if type(key) is not str:
                return False
            if type(item) not in _SCALARS and not _is_plain_item(item):
                return False
        return True
    if kind is list:
        for item in obj:  # noqa: SIM110 - a loop is faster than all() over a generator
            if type(item) not in _SCALARS and not _is_plain_item(item):
                return False
        return True
    return _is_plain_item(obj)


def _is_plain_item(item: Any) -> bool:
    kind = type(item)
    if kind in _SCALARS:
        return True
    if kind is float:
        return _isfinite(item)
    if kind is dict or kind is list:
        return _is_plain(item)
    return False


def _plainly_valid(fields: dict[str, Any]) -> bool:
    """Whether `Score.trusted` may build ``fields`` as they are: only what validation would
    accept unchanged (a float value, exact types), so the result is the validated one."""
    if not _DEFAULTS.keys() >= fields.keys():
        return False
    value = fields.get("value")
    failure = fields.get("failure")
    if value is not None:
        if type(value) is not float or not 0.0 <= value <= 1.0 or failure is not None:
            return False
    elif failure is None:
        if not fields.get("reason"):
            return False
    elif type(failure) is not Failure:
        return False
    for name in _TEXT_FIELDS:
        text = fields.get(name)
        if text is not None and type(text) is not str:
            return False
    latency = fields.get("latency_s")
    if latency is not None and not (type(latency) is float and 0.0 <= latency < math.inf):
        return False
    if "usage" in fields and type(fields["usage"]) is not Usage:
        return False
    details = fields.get("details")
    if details is None:
        return True
    if type(details) is dict:
        return _is_plain(details)
    if type(details) is list:
        for item in details:  # noqa: SIM110 - a loop is faster than all() over a generator
            if type(item) is not dict or not _is_plain(item):
                return False
        return True
    return False


def _plain_stamp(update: dict[str, Any]) -> bool:
    for name, value in update.items():
        if name == "latency_s":
            if not (type(value) is float and 0.0 <= value < math.inf):
                return False
        elif name not in _TEXT_FIELDS[1:] or (value is not None and type(value) is not str):
            return False
    return True


def _slot_setter(name: str) -> Any:
    """The setter of `BaseModel`'s slot ``name``: called directly, it costs a third of an
    ``object.__setattr__`` (which looks the slot up each time); a model is built per cell.
    A pydantic that no longer keeps the field in a slot gets ``object.__setattr__`` again."""
    slot = BaseModel.__dict__.get(name)
    setter = getattr(slot, "__set__", None)
    if setter is None:  # pragma: no cover - pydantic 2 keeps these four in slots
        return lambda obj, value: object.__setattr__(obj, name, value)
    return setter


_new = Score.__new__
_set_dict = object.__setattr__
_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")


def _built(data: dict[str, Any], fields_set: set[str]) -> Score:
    """A Score holding ``data`` (every field, already valid), as `BaseModel.model_construct`
    makes one, without its per-field work."""
    score = _new(Score)
    _set_dict(score, "__dict__", data)
    _set_fields_set(score, fields_set)
    _set_extra(score, None)
    _set_private(score, None)
    return score
