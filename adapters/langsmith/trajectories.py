"""LangSmith trace trees as agent trajectories: tool and retriever runs become `Step`s.

Why it exists: an agent traced with LangSmith records every tool it called as a ``tool`` run
and every search as a ``retriever`` run — LangSmith's "intermediate steps". Read as a plain
sample (`ragbridge.adapters.langsmith.runs`), an agent that searched twice keeps only its last
retrieval; read here, each call is a step of the sample's ``trajectory`` (tool, arguments,
output, error, time, and the passages a retrieval step found), so the steps themselves can be
measured (`ragbridge.core.trajectory`).

How a trace is read:

* **Which runs are steps.** Every ``tool`` run at any depth below the root (``tool=`` picks
  others: a run name or a predicate over runs), and every ``retriever`` run that is not inside
  a tool run (``retriever=``, as `sample_from_run` takes it). Steps are in execution order:
  start time, then LangSmith's ``dotted_order`` (which breaks ties the way the trace tree
  nests), whatever the depth — a LangGraph ``tools`` node, a sub-agent, parallel calls.
* **A step.** Its ``name`` is the run's name, ``args`` the run's inputs (as LangChain records
  a tool call's arguments; made JSON-safe), ``output`` the text it returned (a ``ToolMessage``'s
  content, a string, else the outputs' JSON), ``error`` the exception it raised (its first line,
  without the traceback LangChain appends), ``latency_s`` end minus start, ``id`` the tool call
  id LangChain records in the run's ``extra`` (or in the returned ``ToolMessage``).
  ``metadata["langsmith"]`` names the run (id, type) and the retriever runs read for it.
* **Retrievals.** The documents of the retriever runs inside a tool run (a LangChain retriever
  tool, at any depth below it) are that step's ``contexts``, read as every LangSmith reader here
  reads them (`ragbridge.adapters.langsmith.reading`). A retriever run outside any tool run is a
  step of its own (``args`` its inputs, usually ``{"query": ...}``; no ``output``). A retriever
  inside another retriever (a multi-query, ensemble or compression retriever's inner searches)
  is part of the outer one: only the outer's documents count, as the agent only saw those. A
  failed retriever run gives no contexts; its error is kept in the step's metadata.
* **The sample.** The question and answer are read as `sample_from_run` and the thread reader
  read them (a ``messages`` list in the inputs or outputs, as a LangGraph agent records, gives
  the last user message and the last assistant reply); an example gives ``reference``,
  ``reference_contexts`` and ``relevance`` as for samples, and ``reference_tool_calls`` from its
  outputs' ``reference_tool_calls`` or from the tool calls of a ``messages`` reference
  trajectory (agentevals' shape). The sample's ``contexts`` are the union of every retrieval
  step's contexts in step order, each passage once (by id, else by text): what the answer
  could have been written from.

`conversation_from_trace` gives the same trace in conversation form (the user's question, one
assistant tool-call turn and one tool turn per step, the answer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from typing_extensions import TypedDict, Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.sample import Context, Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall, Turn

from .messages import (
    last_text,
    message_fields,
    message_role,
    message_text,
    message_tool_call,
    messages_in,
)
from .reading import (
    RetrieverSelector,
    descendants,
    example_id_of,
    field_of,
    retrieved_contexts,
    start_key,
)
from .runs import build_run_trees, example_fields, examples_by_id, run_model_names
from .threads import thread_answer, thread_question

__all__ = [
    "RunSelector",
    "TraceReading",
    "conversation_from_trace",
    "sample_from_trace",
    "samples_from_traces",
    "trajectory_from_run",
]

RunSelector = RetrieverSelector
"""A run's name, a predicate over runs, or None for the run type's default."""


class TraceReading(TypedDict, total=False):
    """How a trace is read into a trajectory sample: `sample_from_trace`'s keyword arguments,
    which `samples_from_traces` passes on to it for every trace."""

    tool: RunSelector
    retriever: RunSelector
    question_key: str | None
    answer_key: str | None
    answer_run: str | None


_TRACEBACK = "Traceback (most recent call last)"


# --------------------------------------------------------------------------- finding the steps


def _selects(run: Any, selector: RunSelector, run_type: str) -> bool:
    if selector is None:
        return bool(field_of(run, "run_type") == run_type)
    if isinstance(selector, str):
        return bool(field_of(run, "name") == selector)
    if callable(selector):
        return bool(selector(run))
    raise TypeError(f"a run selector is a run name, a callable or None, got {selector!r}")


@dataclass
class _Found:
    """A run that is a step, and the retriever runs whose documents are its contexts."""

    run: Any
    retrievers: list[Any] = field(default_factory=list)


def _walk(
    run: Any,
    owner: _Found | None,
    in_retriever: bool,
    found: list[_Found],
    tool: RunSelector,
    retriever: RunSelector,
) -> None:
    """Collect the steps below ``run`` (depth-first; `trajectory_from_run` orders them)."""
    is_retriever = not in_retriever and _selects(run, retriever, "retriever")
    if _selects(run, tool, "tool"):
        owner = _Found(run)
        found.append(owner)
        if is_retriever:  # a run picked as both: a tool whose own outputs are documents
            owner.retrievers.append(run)
            in_retriever = True
    elif is_retriever:
        if owner is None:
            found.append(_Found(run, [run]))
        else:
            owner.retrievers.append(run)
        in_retriever = True
    for child in sorted(field_of(run, "child_runs") or [], key=start_key):
        _walk(child, owner, in_retriever, found, tool, retriever)


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def json_safe(value: Any) -> Any:
    """``value`` as JSON would carry it (what a saved sample, RAGAS and agentevals compare)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=_jsonable))


def _args(run: Any) -> dict[str, Any]:
    inputs = field_of(run, "inputs")
    if inputs is None:
        return {}
    safe = json_safe(inputs)
    return dict(safe) if isinstance(safe, dict) else {"input": safe}


def _returned(outputs: Any) -> Any:
    """What a run returned: LangSmith wraps a function's return value as ``{"output": ...}``."""
    if isinstance(outputs, Mapping) and set(outputs) == {"output"}:
        return outputs["output"]
    return outputs


def _output_text(outputs: Any) -> str | None:
    value = _returned(outputs)
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    if isinstance(value, str):
        return value
    if message_role(value) is not None:
        text = message_text(value)
        if text is not None:
            return text
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def _call_id(run: Any) -> str | None:
    extra = field_of(run, "extra")
    found = extra.get("tool_call_id") if isinstance(extra, Mapping) else None
    if found is None:
        message = message_fields(_returned(field_of(run, "outputs")))
        found = message.get("tool_call_id") if message is not None else None
    return None if found is None or found == "" else str(found)


def _error_text(error: Any) -> str | None:
    """The exception a run raised, without the traceback LangChain appends to it."""
    if error is None or error == "":
        return None
    text = str(error).split(_TRACEBACK, 1)[0].strip()
    return text or str(error).strip().splitlines()[0]


def _seconds(when: Any) -> datetime | None:
    if isinstance(when, datetime):
        return when
    if isinstance(when, str):
        try:
            return datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _latency(run: Any) -> float | None:
    start, end = _seconds(field_of(run, "start_time")), _seconds(field_of(run, "end_time"))
    if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds >= 0 else None


def _ref(run: Any) -> dict[str, Any]:
    return {"id": str(field_of(run, "id")), "name": field_of(run, "name")}


def _step(found: _Found) -> Step:
    run = found.run
    contexts: list[Context] = []
    failed: list[dict[str, Any]] = []
    for retrieval in found.retrievers:
        error = field_of(retrieval, "error")
        if error and not field_of(retrieval, "outputs"):
            failed.append({**_ref(retrieval), "error": _error_text(error)})
            continue
        contexts.extend(retrieved_contexts(retrieval))
    info: dict[str, Any] = {
        "run_id": str(field_of(run, "id")),
        "run_type": field_of(run, "run_type"),
    }
    if found.retrievers:
        info["retriever_runs"] = [_ref(r) for r in found.retrievers]
    if failed:
        info["failed_retriever_runs"] = failed
    only_retrieval = found.retrievers == [run]
    return Step(
        name=str(field_of(run, "name") or field_of(run, "run_type") or "tool"),
        args=_args(run),
        id=_call_id(run),
        output=None if only_retrieval else _output_text(field_of(run, "outputs")),
        contexts=contexts,
        latency_s=_latency(run),
        error=_error_text(field_of(run, "error")),
        metadata={"langsmith": info},
    )


def trajectory_from_run(
    run: Any, *, tool: RunSelector = None, retriever: RunSelector = None
) -> list[Step]:
    """The steps of one trace (a live ``RunTree``, a ``schemas.Run`` with children, or a tree
    from `load_runs`), in execution order; ``[]`` when the agent called no tool.

    ``tool`` picks the runs that are tool calls (None: ``run_type == "tool"``; a run name; a
    predicate), ``retriever`` the runs whose documents are contexts (None: ``run_type ==
    "retriever"``). See the module doc for what each step holds. Raises ValueError naming the
    run when a retriever's outputs hold no readable documents.
    """
    if run is None:
        raise ValueError("trajectory_from_run() got None instead of a run")
    found: list[_Found] = []
    _walk(run, None, False, found, tool, retriever)
    found.sort(key=lambda f: start_key(f.run))
    return [_step(f) for f in found]


# --------------------------------------------------------------------------- samples


def _union(steps: Iterable[Step]) -> list[Context]:
    """Every retrieved passage once, in step order then rank order (by id, else by text)."""
    seen: set[tuple[str, str]] = set()
    out: list[Context] = []
    for step in steps:
        for ctx in step.contexts:
            key = ("id", ctx.id) if ctx.id is not None else ("text", ctx.text)
            if key not in seen:
                seen.add(key)
                out.append(ctx)
    return out


def _calls_of(messages: Iterable[Any], where: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for index, message in enumerate(messages):
        fields = message_fields(message)
        if message_role(message) == "assistant" and fields is not None:
            raw = fields.get("tool_calls") or []
            calls.extend(message_tool_call(c, f"{where}[{index}]") for c in raw)
    return calls


def _reference_calls(example: Any) -> list[ToolCall] | None:
    """An example's expected tool calls: ``reference_tool_calls`` (calls as LangChain or
    OpenAI write them), else the calls of a ``messages`` reference trajectory; None if none."""
    outputs = field_of(example, "outputs")
    if not isinstance(outputs, Mapping):
        return None
    given = outputs.get("reference_tool_calls")
    if isinstance(given, (list, tuple)):
        return [message_tool_call(c, f"reference_tool_calls[{i}]") for i, c in enumerate(given)]
    trajectory = messages_in(outputs)
    if trajectory is not None:
        return _calls_of(trajectory, "reference messages") or None
    return None


def _reference(example: Any, reference: str | None) -> str | None:
    """The expected outcome: the example's reference text, else the last assistant reply of a
    ``messages`` reference trajectory."""
    if reference is not None:
        return reference
    trajectory = messages_in(field_of(example, "outputs"))
    return None if trajectory is None else last_text(trajectory, "assistant")


def sample_from_trace(
    run: Any,
    example: Any = None,
    *,
    tool: RunSelector = None,
    retriever: RunSelector = None,
    question_key: str | None = None,
    answer_key: str | None = None,
    answer_run: str | None = None,
    sample_id: str | None = None,
) -> Sample:
    """The agent `Sample` one trace records: its ``trajectory`` (`trajectory_from_run`), the
    union of its retrievals as ``contexts``, the question and answer, and with an ``example``
    the references (see the module doc). The id is ``sample_id``, else the example id, else
    the root run id, as for `sample_from_run`.

    Raises ValueError naming the run id when the trace has no question or a retrieval cannot
    be read.
    """
    if run is None:
        raise ValueError("sample_from_trace() got None instead of a run")
    steps = trajectory_from_run(run, tool=tool, retriever=retriever)
    question, sent = thread_question(run, question_key)
    answer = thread_answer(run, answer_key, answer_run)
    reference = reference_contexts = relevance = None
    reference_calls = None
    if example is not None:
        reference, reference_contexts, relevance = example_fields(example)
        reference = _reference(example, reference)
        reference_calls = _reference_calls(example)
    example_id = example_id_of(run, example)
    trace = field_of(run, "trace_id")
    info: dict[str, Any] = {
        "run_id": str(field_of(run, "id")),
        "run_name": field_of(run, "name"),
        "trace_id": None if trace is None else str(trace),
        "step_runs": [s.metadata["langsmith"]["run_id"] for s in steps],
    }
    if example_id is not None:
        info["example_id"] = str(example_id)
    if sent is not None:
        info["messages_in"] = sent
    metadata: dict[str, Any] = {"langsmith": info}
    models = run_model_names(run)
    if models:
        metadata["generator_model"] = models[-1]
        if len(models) > 1:
            metadata["generator_models"] = models
    return Sample(
        id=sample_id or str(example_id if example_id is not None else field_of(run, "id")),
        question=question,
        answer=answer,
        contexts=_union(steps),
        reference=reference,
        reference_contexts=reference_contexts,
        relevance=relevance,
        metadata=metadata,
        trajectory=steps,
        reference_tool_calls=reference_calls,
    )


def _named_selector_seen(
    roots: list[Any], selector: RunSelector, run_type: str, argument: str
) -> None:
    """A named selector that matches no run of any trace is a typo, not an agent that never
    called the tool: say so (as the thread reader does for ``retriever=``)."""
    if not isinstance(selector, str) or not roots:
        return
    names = {str(field_of(r, "name")) for root in roots for r in descendants(root)}
    if selector not in names:
        raise ValueError(
            f"{argument}={selector!r} names no run in any of the {len(roots)} traces "
            f"({run_type} runs are found by name; names seen: {', '.join(sorted(names))})"
        )


def samples_from_traces(
    runs: Iterable[Any],
    examples: Iterable[Any] | Mapping[str, Any] | None = None,
    **reading: Unpack[TraceReading],
) -> list[Sample]:
    """One agent `Sample` per root run (see `sample_from_trace` for the ``reading`` arguments).

    As `samples_from_runs`: ``runs`` may be trees or a flat list linked by ``parent_run_id``
    (rebuilt first), and ``examples`` are matched to runs by ``reference_example_id``.
    """
    unknown = sorted(set(reading) - set(TraceReading.__annotations__))
    if unknown:
        raise TypeError(f"samples_from_traces() got unexpected keyword arguments: {unknown}")
    items = list(runs)
    ids = {str(field_of(r, "id")) for r in items}
    if any(str(field_of(r, "parent_run_id")) in ids for r in items):
        items = build_run_trees(items)
    roots = [
        r
        for r in items
        if field_of(r, "parent_run_id") is None or str(field_of(r, "parent_run_id")) not in ids
    ]
    _named_selector_seen(roots, reading.get("tool"), "tool", "tool")
    _named_selector_seen(roots, reading.get("retriever"), "retriever", "retriever")
    by_id = examples_by_id(examples)
    samples = []
    for root in roots:
        ref = field_of(root, "reference_example_id")
        example = by_id.get(str(ref)) if ref is not None else None
        samples.append(sample_from_trace(root, example, **reading))
    return samples


# --------------------------------------------------------------------------- conversation form


def conversation_from_trace(
    run: Any,
    example: Any = None,
    **reading: Unpack[TraceReading],
) -> Conversation:
    """The trace as a `Conversation`: the question, then per step an assistant turn calling the
    tool and a tool turn answering it (its output, empty for a call that failed with none; the
    step's contexts, and ``latency_s`` and ``error`` in its metadata), then the answer with the
    example's reference and reference tool calls. ``turn_sample`` of its last turn gives back
    the trajectory. A step without a recorded call id is given its run id, which a tool turn
    needs.
    """
    sample = sample_from_trace(run, example, **reading)
    turns: list[Turn] = [Turn(role="user", content=sample.question)]
    for step in sample.trajectory or []:
        call_id = step.id or str(step.metadata["langsmith"]["run_id"])
        meta: dict[str, Any] = dict(step.metadata)
        if step.latency_s is not None:
            meta["latency_s"] = step.latency_s
        if step.error is not None:
            meta["error"] = step.error
        turns.append(
            Turn(
                role="assistant",
                content=None,
                tool_calls=[ToolCall(name=step.name, args=dict(step.args), id=call_id)],
            )
        )
        turns.append(
            Turn(
                role="tool",
                content=step.output if step.output is not None else "",
                tool_call_id=call_id,
                contexts=list(step.contexts),
                metadata=meta,
            )
        )
    turns.append(
        Turn(
            role="assistant",
            content=sample.answer,
            id=str(field_of(run, "id")),
            reference=sample.reference,
            reference_contexts=sample.reference_contexts,
            relevance=sample.relevance,
            reference_tool_calls=sample.reference_tool_calls,
            metadata=dict(sample.metadata),
        )
    )
    return Conversation(id=sample.id, turns=turns)
