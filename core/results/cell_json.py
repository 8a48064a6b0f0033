"""One results-file cell line, written field by field: the bytes `cell_line` writes, faster.

`cell_line` dumps the Score to a dict (``model_dump(mode="json")``) and encodes the whole line
with `json.dumps`; for a run of cheap measures that was a third of ``ragbridge eval --out``'s
time per cell (100,000 samples × 6 measures: 600,000 lines). A Score's fields are known, and most
of them are the same in every cell of such a run (no judge model, no prompt version, zero
usage), so `cell_json` writes each field with the same encoder and the same separators, and the
constant parts from text made once. The line is byte for byte the one `cell_line` writes
(`tests/test_batched_scoring.py` checks it on thousands of cells); a Score of a subclass, or
holding anything but the plain types, goes through `cell_line` itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _json_encoder
from typing import Any

from .score import Failure, Score
from .usage import Usage

__all__ = ["cell_json", "cell_line"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_encode = _ENCODER.encode
"""What `json.dumps(obj, ensure_ascii=False, allow_nan=False)` does, without building an
encoder per call."""


def _data_encoder() -> Callable[[Any], str]:
    """`_encode` for details (plain JSON data without cycles: `Score` copied them), with
    json's C encoder made once rather than once per call as `JSONEncoder.encode` makes it;
    `_encode` itself where there is no C encoder."""
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:
        return _encode
    iterate = make(
        None, _ENCODER.default, _json_encoder.encode_basestring, None, ": ", ", ", False, False,
        False,
    )  # fmt: skip

    def encode(obj: Any) -> str:
        return "".join(iterate(obj, 0))

    return encode


_encode_data = _data_encoder()

_NO_USAGE: Usage = Score.model_fields["usage"].default  # what most cells hold: one `is` test
_NO_USAGE_JSON = _encode(_NO_USAGE.model_dump(mode="json"))
_string = _json_encoder.encode_basestring
"""`_encode` of a str (what `JSONEncoder.encode` calls for one), without its Python frame."""

_KEPT = 256
"""Distinct metric names and providers whose encoded text is remembered (a run has a few)."""
_METRIC_HEADS: dict[str, str] = {}
_TEXTS: dict[str, str] = {}


def _metric_head(metric: str) -> str:
    """The line's text from after the sample id to the value: the same for a metric's cells."""
    head = _METRIC_HEADS.get(metric)
    if head is None:
        head = ', "metric": ' + _string(metric) + ', "score": {"value": '
        if len(_METRIC_HEADS) < _KEPT:
            _METRIC_HEADS[metric] = head
    return head


def _float(x: Any) -> str:
    """A finite float as `json` writes it (its ``repr``); None as null (Score validated both)."""
    if x is None:
        return "null"
    if type(x) is float:
        return float.__repr__(x)
    return _encode(x)


def _text(x: str | None) -> str:
    return "null" if x is None else _string(x)


def _name(x: str | None) -> str:
    """`_text` of a provider, model or prompt version: a few values, encoded once each."""
    if x is None:
        return "null"
    text = _TEXTS.get(x)
    if text is None:
        text = _string(x)
        if len(_TEXTS) < _KEPT:
            _TEXTS[x] = text
    return text


def _failure(failure: Failure | None) -> str:
    if failure is None:
        return "null"
    kind = _encode(failure.kind.value)
    return '{"kind": ' + kind + ', "message": ' + _encode(failure.message) + "}"


def _usage(usage: Usage) -> str:
    if usage is _NO_USAGE or not (
        usage.calls or usage.cached_calls or usage.prompt_tokens or usage.completion_tokens
    ):
        return _NO_USAGE_JSON
    return _encode(usage.model_dump(mode="json"))


def cell_line(sample_id: str, metric: str, score: Score) -> str:
    """One cell of a results file, as `Evaluation.from_jsonl` reads it back: the reference
    encoding (the Score's JSON dump in one `json.dumps`), which `cell_json` writes faster."""
    line = {"sample_id": sample_id, "metric": metric, "score": score.model_dump(mode="json")}
    return _encode(line) + "\n"


def cell_json(sample_id: str, metric: str, score: Score) -> str:
    """The results-file line of one cell, equal to ``cell_line(sample_id, metric, score)``.

    One f-string over the Score's field dict: a chain of ``+`` made a new string per field,
    and attribute reads through the model cost more than the dict's."""
    if (
        type(score) is not Score
        or type(score.usage) is not Usage
        or (score.failure is not None and type(score.failure) is not Failure)
    ):
        return cell_line(sample_id, metric, score)
    field = score.__dict__
    details = field["details"]
    value = field["value"]
    return (
        f'{{"sample_id": {_string(sample_id)}{_metric_head(metric)}'
        f"{float.__repr__(value) if type(value) is float else _float(value)}"
        f', "reason": {_text(field["reason"])}'
        f', "details": {"null" if details is None else _encode_data(details)}'
        f', "failure": {_failure(field["failure"])}'
        f', "provider": {_name(field["provider"])}'
        f', "judge_model": {_name(field["judge_model"])}'
        f', "prompt_version": {_name(field["prompt_version"])}'
        f', "usage": {_usage(field["usage"])}'
        f', "latency_s": {_float(field["latency_s"])}}}}}\n'
    )
