"""DeepEval's ``tools_called`` / ``expected_tools`` and a `Sample`'s ``trajectory`` /
``reference_tool_calls``, both ways (`ragbridge.adapters.deepeval.test_cases` uses it).

Why it is built this way — each side holds something the other has no field for:

* **A step is a DeepEval ``ToolCall``**: ``name``; ``args`` as ``input_parameters`` (no
  arguments is DeepEval's ``None``, as `ragbridge.adapters.deepeval.conversations` writes it);
  ``output``. What a step has beyond that — its id, the contexts a retrieval step returned, its
  latency, error and metadata — rides in the test case's ragbridge record (``metadata
  ["ragbridge"]["trajectory"]``, one object per call), so ``from_test_case(to_test_case(s))``
  gives the steps back equal.
* **What a DeepEval ``ToolCall`` has beyond a step** — a non-function ``type`` (``"MCP"``),
  ``description``, ``reasoning``, an ``output`` that is not a string, ``input_parameters={}``
  as opposed to ``None`` — lives in the step's ``metadata["deepeval"]`` (`DEEPEVAL_KEY`, as a
  conversation turn keeps DeepEval's fields), and is written back from there; a non-string
  output is also the step's ``output`` as JSON text, so ragbridge's measures read it as text.
  DeepEval's ToolCorrectnessMetric compares ``type``, ``input_parameters`` and ``output``, so
  none of them may be lost on the way through ragbridge.
* **An expected tool is a ragbridge `ToolCall`** (``name``, ``args``, ``id``). It has no
  metadata, so what DeepEval's expected tools hold beyond name and arguments (``type``,
  ``description``, ``reasoning``, the expected ``output``) lives in the sample's
  ``metadata["deepeval"]["expected_tools"]``, one object per call; the ids ride in the record.
* **None and [] differ**: a sample that is no agent's has ``trajectory=None`` (no
  ``tools_called``); an agent that called nothing has ``[]``. DeepEval's JSON writer drops an
  empty list, so the record says which it was.

Only a ``"deepeval"`` object this module could have written is read as DeepEval's fields;
anything else under that key stays plain metadata, so it comes back as it was either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _framework  # noqa: F401  (first: DeepEval through the one guard)

# isort: split
from deepeval.test_case import ToolCall as DeepEvalToolCall
from deepeval.test_case.llm_test_case import ToolCallType
from pydantic import ValidationError

from ragbridge.core.sample import Sample, validation_problems
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

__all__ = [
    "CALL_FIELDS",
    "DEEPEVAL_KEY",
    "CallView",
    "ToolFields",
    "called_views",
    "expected_views",
    "read_tools",
    "render_output",
    "tool_fields",
    "tools_payload",
    "with_expected",
]

DEEPEVAL_KEY = "deepeval"
"""The metadata key (of a step, or of a sample for its expected tools) holding DeepEval's
``ToolCall`` fields that ragbridge has no slot for."""

CALL_FIELDS = ("type", "description", "reasoning", "output", "input_parameters")
"""The DeepEval ``ToolCall`` fields kept under `DEEPEVAL_KEY`."""

_EXPECTED = "expected_tools"
_TYPES = {kind.value for kind in ToolCallType}
_STEP_RECORD = ("id", "contexts", "latency_s", "error", "metadata")


@dataclass(frozen=True)
class CallView:
    """One call as DeepEval's ToolCorrectnessMetric compares it: the exact values the DeepEval
    ``ToolCall`` written for it holds (``input_parameters`` None or a dict, the raw output)."""

    name: str
    type: str
    input_parameters: dict[str, Any] | None
    output: Any


@dataclass(frozen=True)
class ToolFields:
    """A sample's tool calls in DeepEval's fields, and what goes into its ragbridge record."""

    tools_called: list[DeepEvalToolCall] | None
    expected_tools: list[DeepEvalToolCall] | None
    record: dict[str, Any]
    """``"trajectory"`` and ``"reference_tool_calls"`` (what the calls hold beyond DeepEval's
    fields), and ``"metadata"`` when the sample's expected tools' DeepEval fields came out of it."""


def render_output(raw: Any) -> str:
    """A tool's non-string output as the text a step holds: JSON where it is JSON data."""
    return json.dumps(raw, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- what fits


def _fits(extra: Any, args: Mapping[str, Any]) -> bool:
    """Whether ``extra`` is a DeepEval-fields object this module writes for a call whose
    arguments are ``args`` (an ``input_parameters`` kept only as ``{}`` and only for none)."""
    if not isinstance(extra, Mapping) or not set(extra) <= set(CALL_FIELDS):
        return False
    if "type" in extra and (extra["type"] not in _TYPES or extra["type"] == "FUNCTION"):
        return False
    if any(k in extra and not isinstance(extra[k], str) for k in ("description", "reasoning")):
        return False
    if "output" in extra and extra["output"] is None:
        return False
    return "input_parameters" not in extra or (extra["input_parameters"] == {} and not args)


def _step_extra(step: Step) -> dict[str, Any] | None:
    """The step's DeepEval fields, when its ``metadata["deepeval"]`` is one this module wrote:
    non-empty, and an output kept there only when it is not a string and the step's output is
    its text."""
    extra = step.metadata.get(DEEPEVAL_KEY)
    if not extra or not _fits(extra, step.args):
        return None
    if "output" in extra:
        raw = extra["output"]
        if isinstance(raw, str) or render_output(raw) != step.output:
            return None
    return dict(extra)


def _expected_extras(sample: Sample) -> list[dict[str, Any]] | None:
    """The expected tools' DeepEval fields from ``metadata["deepeval"]["expected_tools"]``:
    one object per reference call, at least one non-empty; None when the metadata holds no
    such list."""
    calls = sample.reference_tool_calls
    kept = sample.metadata.get(DEEPEVAL_KEY)
    if calls is None or not isinstance(kept, Mapping):
        return None
    extras = kept.get(_EXPECTED)
    if not isinstance(extras, list) or len(extras) != len(calls) or not any(extras):
        return None
    if not all(_fits(e, c.args) for e, c in zip(extras, calls, strict=True)):
        return None
    return [dict(e) for e in extras]


def _view(name: str, args: Mapping[str, Any], extra: Mapping[str, Any], output: Any) -> CallView:
    params = dict(extra["input_parameters"]) if "input_parameters" in extra else dict(args) or None
    return CallView(
        name=name,
        type=str(extra.get("type", "FUNCTION")),
        input_parameters=params,
        output=extra.get("output", output),
    )


def called_views(steps: Sequence[Step]) -> list[CallView]:
    """Each step as the DeepEval ``ToolCall`` `tool_fields` writes for it."""
    views = []
    for step in steps:
        views.append(_view(step.name, step.args, _step_extra(step) or {}, step.output))
    return views


def expected_views(sample: Sample) -> list[CallView]:
    """The sample's reference calls as the DeepEval expected tools `tool_fields` writes."""
    calls = sample.reference_tool_calls or []
    extras = _expected_extras(sample) or [{}] * len(calls)
    return [_view(c.name, c.args, e, None) for c, e in zip(calls, extras, strict=True)]


def _deepeval_call(view: CallView, extra: Mapping[str, Any]) -> DeepEvalToolCall:
    fields = {k: extra[k] for k in ("description", "reasoning") if k in extra}
    return DeepEvalToolCall(
        name=view.name,
        type=ToolCallType(view.type),
        input_parameters=view.input_parameters,
        output=view.output,
        **fields,
    )


# --------------------------------------------------------------------------- ragbridge -> DeepEval


def tool_fields(sample: Sample) -> ToolFields:
    """``sample``'s trajectory and reference calls as DeepEval's ``tools_called`` and
    ``expected_tools`` (None where the sample has None), and its record (see the module)."""
    record: dict[str, Any] = {}
    called = None
    if sample.trajectory is not None:
        called = []
        steps: list[dict[str, Any]] = []
        for step, view in zip(sample.trajectory, called_views(sample.trajectory), strict=True):
            extra = _step_extra(step)
            called.append(_deepeval_call(view, extra or {}))
            kept = step.model_dump(include=set(_STEP_RECORD), exclude_defaults=True)
            if extra is not None:
                metadata = {k: v for k, v in step.metadata.items() if k != DEEPEVAL_KEY}
                if metadata:
                    kept["metadata"] = metadata
                else:
                    kept.pop("metadata", None)
            steps.append(kept)
        record["trajectory"] = steps
    expected = None
    if sample.reference_tool_calls is not None:
        calls = sample.reference_tool_calls
        extras = _expected_extras(sample)
        expected = [
            _deepeval_call(view, e)
            for view, e in zip(expected_views(sample), extras or [{}] * len(calls), strict=True)
        ]
        record["reference_tool_calls"] = [{"id": c.id} if c.id is not None else {} for c in calls]
        if extras is not None:
            record["metadata"] = _without_expected(sample.metadata)
    return ToolFields(called, expected, record)


def _without_expected(metadata: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(metadata)
    rest = {k: v for k, v in out.pop(DEEPEVAL_KEY).items() if k != _EXPECTED}
    if rest:
        out[DEEPEVAL_KEY] = rest
    return out


# --------------------------------------------------------------------------- DeepEval -> ragbridge


def read_tools(
    tools_called: Any, expected_tools: Any, extras: Mapping[str, Any] | None, label: str
) -> tuple[list[Step] | None, list[ToolCall] | None, list[dict[str, Any]] | None]:
    """The steps and reference calls a test case's ``tools_called`` and ``expected_tools``
    hold, with the ragbridge record ``extras`` (None for a hand-built test case); and the
    expected tools' DeepEval fields for ``metadata["deepeval"]["expected_tools"]`` (None when
    they hold none). Raises ValueError naming the test case and the field."""
    steps_record = _record_list(extras, "trajectory", tools_called, label)
    calls_record = _record_list(extras, "reference_tool_calls", expected_tools, label)
    steps = None
    raw_called = _calls(tools_called, "tools_called", label)
    if raw_called is None and steps_record == []:
        raw_called = []  # DeepEval's JSON writer drops an empty list
    if raw_called is not None:
        steps = [
            _step(call, steps_record[k] if steps_record else {}, f"{label}: tools_called[{k}]")
            for k, call in enumerate(raw_called)
        ]
    reference = None
    kept: list[dict[str, Any]] | None = None
    raw_expected = _calls(expected_tools, "expected_tools", label)
    if raw_expected is None and calls_record == []:
        raw_expected = []
    if raw_expected is not None:
        reference, kept = [], []
        for k, call in enumerate(raw_expected):
            where = f"{label}: expected_tools[{k}]"
            own = _mapping(calls_record[k] if calls_record else {}, where)
            extra = _extra_of(call, keep_text_output=True)
            reference.append(
                _built(ToolCall, {"name": call.name, "args": _args(call), **own}, where)
            )
            kept.append(extra)
        if not any(kept):
            kept = None
    return steps, reference, kept


def _calls(value: Any, field: str, label: str) -> list[DeepEvalToolCall] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, DeepEvalToolCall) for c in value):
        raise ValueError(f"{label}: {field}: expected a list of DeepEval ToolCall objects")
    return value


def _record_list(
    extras: Mapping[str, Any] | None, key: str, calls: Any, label: str
) -> list[Any] | None:
    """The record's per-call list for ``key``, checked to line up with the calls."""
    if extras is None or extras.get(key) is None:
        return None
    items = extras[key]
    count = len(calls) if isinstance(calls, list) else 0
    if not isinstance(items, list) or len(items) != count:
        field = "tools_called" if key == "trajectory" else "expected_tools"
        raise ValueError(
            f"{label}: metadata['ragbridge'].{key}: expected one entry per {field} call "
            f"({count}); were the tool calls edited after conversion?"
        )
    return items


def _args(call: DeepEvalToolCall) -> dict[str, Any]:
    return dict(call.input_parameters or {})


def _extra_of(call: DeepEvalToolCall, *, keep_text_output: bool) -> dict[str, Any]:
    """What ``call`` holds beyond a step's or a ragbridge call's fields (see the module)."""
    extra: dict[str, Any] = {}
    if call.type != ToolCallType.FUNCTION:
        extra["type"] = call.type.value
    for name in ("description", "reasoning"):
        value = getattr(call, name)
        if value is not None:
            extra[name] = value
    if call.output is not None and (keep_text_output or not isinstance(call.output, str)):
        extra["output"] = call.output
    if call.input_parameters == {}:
        extra["input_parameters"] = {}
    return extra


def _step(call: DeepEvalToolCall, raw_record: Any, where: str) -> Step:
    record = dict(_mapping(raw_record, where))
    unknown = sorted(set(record) - set(_STEP_RECORD))
    if unknown:
        raise ValueError(f"{where}: the ragbridge record has an unknown key {unknown[0]!r}")
    extra = _extra_of(call, keep_text_output=False)
    output = call.output
    if output is not None and not isinstance(output, str):
        output = render_output(output)
    metadata = dict(_mapping(record.pop("metadata", None), f"{where}: metadata"))
    if extra:
        if DEEPEVAL_KEY in metadata:
            raise ValueError(
                f"{where}: metadata key {DEEPEVAL_KEY!r} is where ragbridge keeps DeepEval's "
                "ToolCall fields, and this call sets some of them: rename the key"
            )
        metadata[DEEPEVAL_KEY] = extra
    fields = {"name": call.name, "args": _args(call), "output": output, **record}
    return _built(Step, {**fields, "metadata": metadata}, where)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: the ragbridge record: expected an object")
    return value


def _built(kind: Any, fields: dict[str, Any], where: str) -> Any:
    try:
        return kind.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"{where}: {validation_problems(exc)[0]}") from None


def with_expected(
    metadata: Mapping[str, Any], kept: list[dict[str, Any]] | None, label: str
) -> dict[str, Any]:
    """``metadata`` with the expected tools' DeepEval fields under
    ``["deepeval"]["expected_tools"]`` (unchanged when there are none)."""
    out = dict(metadata)
    if kept is None:
        return out
    current = out.get(DEEPEVAL_KEY, {})
    if not isinstance(current, Mapping) or _EXPECTED in current:
        raise ValueError(
            f"{label}: metadata[{DEEPEVAL_KEY!r}][{_EXPECTED!r}] is where ragbridge keeps what "
            "DeepEval's expected tools hold beyond name and arguments, and this test case sets "
            "some of it: rename the key"
        )
    out[DEEPEVAL_KEY] = {**current, _EXPECTED: kept}
    return out


def tools_payload(tools_called: Any, expected_tools: Any) -> dict[str, Any]:
    """The tool calls of a hand-built test case, for the hash that names it (only the fields
    that are set, so a test case without tools keeps the id it always had)."""
    payload: dict[str, Any] = {}
    for field, calls in (("tools_called", tools_called), ("expected_tools", expected_tools)):
        if isinstance(calls, list):
            payload[field] = [
                c.model_dump(mode="json", exclude_none=True)
                if isinstance(c, DeepEvalToolCall)
                else c
                for c in calls
            ]
    return payload
