"""Reading a LangSmith trace: a run's fields, its retriever runs, their documents as `Context`s.

Why a module of its own: both sides of the adapter read traces the same way. The source side
(`ragbridge.adapters.langsmith.runs`) turns whole traces into samples; the sink side
(`ragbridge.adapters.langsmith.fields`, behind the evaluators) reads the run an evaluator is
handed. Both accept the same run shapes (a live ``RunTree``, a ``schemas.Run``, an exported dict)
and the same document shapes, and word a trace that does not fit the same way: naming the run
id (searchable in the LangSmith UI) and what was found instead.

Retrieved documents come in several shapes, all accepted: a LangChain retriever writes
``{"documents": [Document, ...]}`` (dicts with ``page_content``/``metadata``/``id`` once
serialised, or LangChain's ``{"lc": 1, "type": "constructor", ...}`` form); a ``@traceable``
function returning a list writes ``{"output": [...]}``, whose items may be Documents, dicts with
``page_content``, ``text`` or ``content``, or bare strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragbridge.core.sample import Context

__all__ = [
    "RetrieverSelector",
    "context_of",
    "descendants",
    "document_list",
    "example_id_of",
    "field_of",
    "find_text",
    "keys_of",
    "reference_contexts_of",
    "retrieved_contexts",
    "run_label",
    "select_retrievers",
    "start_key",
]

RetrieverSelector = str | Callable[[Any], bool] | None
"""A retriever run's name, a predicate over runs, or None for ``run_type == "retriever"``."""

_DOC_LIST_KEYS = ("documents", "output", "docs", "contexts", "results")
_ID_METADATA_KEYS = ("id", "doc_id", "document_id")
_SCORE_KEYS = ("score", "relevance_score", "similarity")
_TEXT_KEYS = ("page_content", "text", "content")


# --------------------------------------------------------------------------- run access


def field_of(run: Any, name: str, default: Any = None) -> Any:
    """Read a field from a RunTree, a schemas.Run, an Example or a plain dict alike (``run``
    None, as when a run has no example, reads as ``default``)."""
    if isinstance(run, Mapping):
        return run.get(name, default)
    return getattr(run, name, default)


def example_id_of(run: Any, example: Any) -> Any:
    """The dataset example a run answers: ``example``'s id, else the run's
    ``reference_example_id`` (the link an experiment run keeps to its dataset row), else None."""
    found = field_of(example, "id")
    return found if found is not None else field_of(run, "reference_example_id")


def reference_contexts_of(example: Any) -> list[str] | None:
    """The example's ``outputs["reference_contexts"]`` as texts, or None when it has none."""
    outputs = field_of(example, "outputs")
    contexts = outputs.get("reference_contexts") if isinstance(outputs, Mapping) else None
    return [str(c) for c in contexts] if isinstance(contexts, (list, tuple)) else None


def keys_of(value: Any) -> str:
    """The keys of a run's inputs or outputs, as error messages list them (``none`` if none)."""
    return ", ".join(map(str, value)) or "none" if isinstance(value, Mapping) else "none"


def start_key(run: Any) -> tuple[str, str]:
    """Sort key putting runs in start order (exports and list_runs do not promise any order)."""
    start = field_of(run, "start_time")
    stamp = start.isoformat() if hasattr(start, "isoformat") else str(start or "")
    return (stamp, str(field_of(run, "dotted_order") or ""))


def run_label(run: Any) -> str:
    """How errors name a run: its id (searchable in the LangSmith UI) and its name."""
    return f"run {field_of(run, 'id')} ({field_of(run, 'name')!r})"


def descendants(run: Any) -> list[Any]:
    """The run and all runs below it, depth-first, children in start order."""
    found = [run]
    for child in sorted(field_of(run, "child_runs") or [], key=start_key):
        found.extend(descendants(child))
    return found


# --------------------------------------------------------------------------- retriever


def select_retrievers(root: Any, retriever: RetrieverSelector) -> list[Any]:
    """Every run matching the selector, in start order; raises naming what the trace holds."""
    runs = descendants(root)
    if retriever is None:
        matches = [r for r in runs if field_of(r, "run_type") == "retriever"]
        if not matches:
            seen = sorted({str(field_of(r, "run_type")) for r in runs})
            raise ValueError(
                f"{run_label(root)}: no retriever child run (run_types seen: {', '.join(seen)}); "
                "pass retriever=<run name> or a selector function"
            )
    elif isinstance(retriever, str):
        matches = [r for r in runs if field_of(r, "name") == retriever]
        if not matches:
            seen = sorted({str(field_of(r, "name")) for r in runs})
            raise ValueError(
                f"{run_label(root)}: no child run named {retriever!r} "
                f"(run names seen: {', '.join(seen)})"
            )
    elif callable(retriever):
        matches = [r for r in runs if retriever(r)]
        if not matches:
            raise ValueError(f"{run_label(root)}: no run matched the retriever selector")
    else:
        raise TypeError(f"retriever must be a run name, a callable or None, got {retriever!r}")
    return sorted(matches, key=start_key)


def document_list(run: Any) -> list[Any]:
    """The list of retrieved items in a retriever run's outputs, whatever key holds it."""
    outputs = field_of(run, "outputs")
    error = field_of(run, "error")
    if not outputs and (outputs is None or error):  # a failed run ends with {} or None
        why = f" (it failed: {str(error).splitlines()[0]})" if error else ""
        raise ValueError(f"{run_label(run)}: retriever run has no outputs{why}")
    if isinstance(outputs, list):
        return outputs
    if not isinstance(outputs, Mapping):
        raise ValueError(
            f"{run_label(run)}: retriever outputs are {type(outputs).__name__}, expected a dict "
            "with 'documents' or 'output'"
        )
    for key in _DOC_LIST_KEYS:
        if key in outputs:
            value = outputs[key]
            if value is None:
                return []
            if isinstance(value, (list, tuple)):
                return list(value)
            raise ValueError(
                f"{run_label(run)}: retriever outputs[{key!r}] is {type(value).__name__}, "
                "expected a list of documents"
            )
    lists = [v for v in outputs.values() if isinstance(v, (list, tuple))]
    if len(lists) == 1:
        return list(lists[0])
    raise ValueError(
        f"{run_label(run)}: retriever outputs have no documents list "
        f"(keys: {keys_of(outputs)}); expected 'documents' or 'output'"
    )


def _score_of(*sources: Mapping[str, Any]) -> float | None:
    for source in sources:
        for key in _SCORE_KEYS:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                number = float(value)
                if math.isfinite(number):
                    return number
    return None


def _as_mapping(run: Any, index: int, item: Any) -> Mapping[str, Any]:
    """A retrieved item that is not a string as a dict (a live Document is read as one)."""
    if not isinstance(item, Mapping) and hasattr(item, "page_content"):  # a live Document
        item = {
            "page_content": item.page_content,
            "metadata": getattr(item, "metadata", None) or {},
            "id": getattr(item, "id", None),
        }
    if not isinstance(item, Mapping):
        raise ValueError(
            f"{run_label(run)}: documents output item {index} is {type(item).__name__}, "
            "expected a Document, a dict or a string"
        )
    if item.get("lc") == 1 and isinstance(item.get("kwargs"), Mapping):
        return dict(item["kwargs"])  # LangChain's serialised-constructor form of a Document
    return item


def context_of(run: Any, index: int, item: Any) -> Context:
    """One retrieved item as a `Context`; raises naming the run and item when it has no text."""
    if isinstance(item, str):
        return Context(text=item)
    data = _as_mapping(run, index, item)
    text = next((data[k] for k in _TEXT_KEYS if isinstance(data.get(k), str)), None)
    if text is None:
        raise ValueError(
            f"{run_label(run)}: documents output has no page_content in item {index} "
            f"(keys: {keys_of(data)})"
        )
    metadata = dict(data.get("metadata") or {})
    doc_id = data.get("id")
    if doc_id is None:
        doc_id = next((metadata[k] for k in _ID_METADATA_KEYS if metadata.get(k) is not None), None)
    return Context(
        text=text,
        id=None if doc_id is None else str(doc_id),
        score=_score_of(data, metadata),
        metadata=metadata,
    )


def retrieved_contexts(run: Any) -> list[Context]:
    """A retriever run's documents as ranked `Context`s (see `document_list`, `context_of`)."""
    return [context_of(run, i, item) for i, item in enumerate(document_list(run))]


# --------------------------------------------------------------------------- text fields


def find_text(value: Any, keys: Sequence[str], depth: int = 0) -> str | None:
    """A string in ``value``: itself, under one of ``keys``, or its only string field.

    Nested dicts are searched because ``langsmith.evaluate`` passes the example inputs dict as
    the target's first argument, so a traced ``pipeline(inputs)`` records
    ``{"inputs": {"question": ...}}``.
    """
    if isinstance(value, str):
        return value
    if depth > 3:
        return None
    content = getattr(value, "content", None)  # a chat message (AIMessage) answer
    if isinstance(content, str) and not isinstance(value, Mapping):
        return content
    if not isinstance(value, Mapping):
        return None
    for key in keys:
        if key in value:
            found = find_text(value[key], keys, depth + 1)
            if found is not None:
                return found
    strings = [v for v in value.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    if len(value) == 1:
        return find_text(next(iter(value.values())), keys, depth + 1)
    return None
