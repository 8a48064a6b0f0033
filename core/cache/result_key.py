"""The sample half of a kept Score's key: the fields its metric reads, and nothing else.

A kept Score (`ragbridge.core.cache.scores`) must be found again when nothing that decides it
changed, and missed when anything did. Hashing the whole sample gets the second half right and
the first wrong: a pipeline records volatile facts in ``metadata`` (its ``latency_s`` differs on
every run), so a rerun of the same questions missed every cell and kept a new row for each.

So each metric states the `Sample` fields it reads (`Metric.reads`, and `ProviderSpec.reads` for
a registered provider function), and the key covers exactly those, in one canonical JSON form.
A field nobody reads (a latency, a trace id) changes no key; every field a measure reads does,
including what it only copies into the Score (the context ids in ``details``), since a Score
served with a stale id would be stale too.

Where the reads cannot be trusted the key covers the whole sample, metadata included (the safe
default, which can only cost a miss):

* the metric's class does not declare ``reads`` itself (a third-party metric, or a subclass of
  a built-in that may read more than its base: the declaration is not inherited);
* it is scored by a registered provider function that does not declare ``reads``;
* a name in a declaration is not one of `FIELDS`, `CONTEXT_PARTS` or ``metadata.<key>``.

``requires`` is always read (a missing field decides a ``missing_input`` failure); a required
``contexts`` counts as ``contexts.text``, since only their number is checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic_core import to_jsonable_python

from ..metrics.base import Metric
from ..sample import Sample

__all__ = [
    "CONTEXT_PARTS",
    "FIELDS",
    "OPTIONAL_PARTS",
    "fields_read",
    "read_set_label",
    "sample_body",
]

FIELDS: tuple[str, ...] = (
    "id",
    "question",
    "answer",
    "reference",
    "reference_contexts",
    "relevance",
    "trajectory",
    "reference_tool_calls",
)
"""Sample fields a metric may name as read, besides ``contexts`` and ``metadata``."""

OPTIONAL_PARTS: tuple[str, ...] = ("history", "trajectory", "reference_tool_calls")
"""Sample fields added after results were first cached: left out of a record's bytes while None,
so keys and fingerprints made before they existed stay valid."""

CONTEXT_PARTS: tuple[str, ...] = ("text", "id", "score", "metadata")
"""Parts of a `Context` a metric may name (``contexts.text``); ``contexts`` names them all."""

_WHOLE = "*"
"""The read set of a metric whose reads are unknown: the whole sample."""


def fields_read(metric: Metric) -> frozenset[str] | None:
    """The normalised fields ``metric`` reads, or None when they are not known (see the module).

    Normalised: ``contexts`` becomes its four parts and ``metadata.<key>`` is dropped when the
    whole ``metadata`` is read, so two ways of writing one set give one key.
    """
    declared = type(metric).__dict__.get("reads")
    if declared is None or isinstance(declared, str):
        return None
    # a required field is read for its presence; for ``contexts`` that is their number, which
    # any one part gives (every part is listed per context)
    required = ["contexts.text" if name == "contexts" else name for name in metric.requires]
    names: list[str] = [*declared, *required]
    if metric._provided is not None:
        provided = getattr(metric, "_provided_reads", None)
        if provided is None:
            return None
        names += provided
    return _normalise(names)


def _normalise(names: Iterable[str]) -> frozenset[str] | None:
    out: set[str] = set()
    for name in names:
        head, dot, part = name.partition(".")
        if name in FIELDS or name == "metadata":
            out.add(name)
        elif head == "contexts" and not dot:
            out.update(f"contexts.{p}" for p in CONTEXT_PARTS)
        elif (head == "contexts" and part in CONTEXT_PARTS) or (head == "metadata" and part):
            out.add(name)
        else:
            return None  # a name we cannot read: key on everything rather than guess
    if "metadata" in out:
        out = {n for n in out if not n.startswith("metadata.")}
    return frozenset(out)


def read_set_label(reads: frozenset[str] | None) -> str:
    """A stable text for a read set (sorted; ``*`` for the whole sample)."""
    return _WHOLE if reads is None else ",".join(sorted(reads))


def sample_body(sample: Sample, reads: frozenset[str] | None) -> bytes:
    """The canonical bytes of what ``reads`` names in ``sample`` (the whole sample for None).

    The read set itself is part of the bytes, so two sets that happen to select equal values
    (an absent answer and an absent reference) never share a key. A context part is listed per
    context, in rank order, so the number and order of the contexts is always covered; a
    ``metadata.<key>`` that is absent is left out, and one that is present is kept even when its
    value is null.

    A conversation's turn (``history`` not None) always keeps its history: every judge prompt
    reads the conversation so far, and two turns that ask the same words after different
    conversations must not share a score. A sample without history keeps the bytes it had
    before samples had one.
    """
    if reads is None:
        unset = {name for name in OPTIONAL_PARTS if getattr(sample, name) is None}
        return b"sample\0" + sample.model_dump_json(exclude=unset or None).encode()
    # a measure that reads an optional part (faithfulness: an agent's trajectory) keeps the key
    # it had before the part existed on a sample without it
    reads = reads - {name for name in OPTIONAL_PARTS if getattr(sample, name) is None}
    picked: dict[str, Any] = {}
    if sample.history is not None:
        picked["history"] = sample.history
    for name in FIELDS:
        if name in reads:
            picked[name] = getattr(sample, name)
    parts = [p for p in CONTEXT_PARTS if f"contexts.{p}" in reads]
    if parts:
        picked["contexts"] = [{p: getattr(c, p) for p in parts} for c in sample.contexts]
    if "metadata" in reads:
        picked["metadata"] = sample.metadata
    else:
        keys = sorted(n.partition(".")[2] for n in reads if n.startswith("metadata."))
        if keys:
            picked["metadata"] = {k: sample.metadata[k] for k in keys if k in sample.metadata}
    text = json.dumps(
        [read_set_label(reads), to_jsonable_python(picked, fallback=repr)],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return b"fields\0" + text.encode()
