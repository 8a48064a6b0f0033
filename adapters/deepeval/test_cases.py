"""`Sample`s to and from DeepEval's `LLMTestCase`, `Golden`, `EvaluationDataset` and JSON files.

Why it is built this way:

* **Lossless through one namespaced metadata key.** DeepEval's fields hold the question
  (``input``), answer (``actual_output``), reference (``expected_output``), retrieved passages
  (``retrieval_context``, texts only) and reference passages (``context``). Everything else a
  `Sample` holds — its id, each context's id/score/metadata, the relevance labels (``None`` and
  ``{}`` differ), the sample's metadata — goes under ``metadata["ragbridge"]`` (`META_KEY`), so
  ``from_test_case(to_test_case(s)) == s``. Passage texts stay in ``retrieval_context`` only;
  the per-passage extras are a list aligned with it, and a test case edited so the two no longer
  line up is refused rather than mis-attributed.
* **Hand-built test cases convert too.** Without ragbridge metadata the id is the ``id``
  argument, else the test case's ``name``, else ``"deepeval-"`` plus a hash of its content (the
  same test case always gets the same id). A `RetrievedContextData` passage becomes a context
  whose metadata holds its ``source``. A malformed test case raises ValueError naming the test
  case and the field.
* **``context`` stands in for an empty ``retrieval_context``** (``contexts_from="auto"``):
  DeepEval's HallucinationMetric reads ``context``, so a hand-built test case with passages
  there only gets them as its contexts (marked ``metadata["deepeval_field"] = "context"``) and
  as its ``reference_contexts``. When both are set, ``retrieval_context`` (what the generator
  was given) is checked and ``context`` stays the reference passages; ``contexts_from="context"``
  checks against ``context`` as DeepEval's HallucinationMetric does.
* **An agent's tool calls** are DeepEval's ``tools_called`` (the sample's ``trajectory``) and
  ``expected_tools`` (its ``reference_tool_calls``): what each side holds beyond the other's
  fields rides in the record or in ``metadata["deepeval"]`` (`ragbridge.adapters.deepeval.
  tool_calls`), so both round trips are exact.
* **Datasets hold goldens**, because that is what DeepEval persists with their metadata:
  ``save_as("json")`` writes goldens and ``add_goldens_from_json_file`` reads their
  ``additional_metadata`` back, while ``add_test_cases_from_json_file`` (4.3) drops test case
  metadata. Files are DeepEval's JSON format: its CSV/JSONL writers join list fields with ``|``,
  which splits any passage containing one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from ragbridge.adapters._samples import distinct_samples
from ragbridge.core.sample import Sample
from ragbridge.core.sample_fields import (
    DEEPEVAL_FIELDS,
    extras_of,
    fields_of,
    sample_from_fields,
)

from ._framework import EvaluationDataset, Golden, LLMTestCase, RetrievedContextData
from .tool_calls import read_tools, tool_fields, tools_payload, with_expected

__all__ = [
    "CONTEXTS_FROM",
    "META_KEY",
    "ContextsFrom",
    "check_contexts_from",
    "from_dataset",
    "from_golden",
    "from_test_case",
    "load_test_cases",
    "save_test_cases",
    "to_dataset",
    "to_golden",
    "to_test_case",
]

META_KEY = "ragbridge"
"""The key of a test case's ``metadata`` that carries what DeepEval has no field for."""

_FORMAT = 1

ContextsFrom = Literal["auto", "retrieval_context", "context"]
"""Which test case field becomes a sample's contexts (see `from_test_case`)."""

CONTEXTS_FROM: tuple[ContextsFrom, ...] = ("auto", "retrieval_context", "context")


def check_contexts_from(value: str) -> None:
    """Refuse a ``contexts_from`` that is not one of `CONTEXTS_FROM`, naming the choices."""
    if value not in CONTEXTS_FROM:
        raise ValueError(f"contexts_from must be one of {', '.join(CONTEXTS_FROM)}, got {value!r}")


# --------------------------------------------------------------------------- Sample -> DeepEval


def _extras(sample: Sample) -> dict[str, Any]:
    return {"format": _FORMAT, **extras_of(sample), **tool_fields(sample).record}


def _fields(sample: Sample) -> dict[str, Any]:
    if not isinstance(sample, Sample):
        raise TypeError(f"expected a Sample, got {type(sample).__name__}")
    fields = fields_of(sample, DEEPEVAL_FIELDS)
    # DeepEval reads a None field as missing: no passages is None, not [].
    fields["retrieval_context"] = fields["retrieval_context"] or None
    tools = tool_fields(sample)
    fields["tools_called"] = tools.tools_called
    fields["expected_tools"] = tools.expected_tools
    return {**fields, "name": sample.id}


def to_test_case(sample: Sample) -> LLMTestCase:
    """The `LLMTestCase` of ``sample``; ``from_test_case`` gives the sample back unchanged."""
    return LLMTestCase(**_fields(sample), metadata={META_KEY: _extras(sample)})


def to_golden(sample: Sample) -> Golden:
    """The `Golden` of ``sample`` (its ``additional_metadata`` carries the ragbridge extras)."""
    return Golden(**_fields(sample), additional_metadata={META_KEY: _extras(sample)})


# --------------------------------------------------------------------------- DeepEval -> Sample


def from_test_case(
    test_case: LLMTestCase | Golden,
    *,
    id: str | None = None,
    where: str | None = None,
    contexts_from: ContextsFrom = "auto",
) -> Sample:
    """The `Sample` a DeepEval `LLMTestCase` (or `Golden`) describes.

    ``id`` overrides the sample id; ``where`` (e.g. ``"goldens[3]"``) is added to error messages.
    ``contexts_from`` says which field becomes the sample's (retrieved) contexts: ``"auto"``
    takes ``retrieval_context``, or ``context`` when a hand-built test case has no
    ``retrieval_context`` (see the module docstring); ``"retrieval_context"`` and ``"context"``
    take that field only. Raises ValueError naming the test case and the field when a field has
    the wrong type. The fields are read by the mapping every framework sink shares
    (`ragbridge.core.sample_fields`); what is DeepEval's own is done here first: its
    ``RetrievedContextData`` passages, ``context`` standing in, and the id of a hand-built case.
    """
    if not isinstance(test_case, (LLMTestCase, Golden)):
        hint = (
            "; a conversation reads with from_conversational_test_case"
            if type(test_case).__name__.startswith("Conversational")
            else ""
        )
        raise TypeError(f"expected an LLMTestCase or Golden, got {type(test_case).__name__}{hint}")
    check_contexts_from(contexts_from)
    label = _label(test_case, where)
    metadata, extras = _split_metadata(test_case, label)
    ours = extras is not None  # written by to_test_case / to_golden
    passages = _retrieved(test_case.retrieval_context, label, ours=ours)
    stands_in = contexts_from == "context" or (
        contexts_from == "auto" and not ours and not passages
    )
    if stands_in:
        passages = _from_context(test_case.context)
    if stands_in or not ours:
        # A passage's metadata rides in as extras; ragbridge's own belong to retrieval_context.
        extras = {**(extras or {}), "contexts": [_meta_only(p) for p in passages]}
    if id is not None:
        extras = {**(extras or {}), "id": id}
    values = {
        "input": test_case.input,
        "actual_output": test_case.actual_output,
        "expected_output": test_case.expected_output,
        "retrieval_context": [p["text"] for p in passages],
        "context": test_case.context,
    }
    sample = sample_from_fields(
        values,
        DEEPEVAL_FIELDS,
        where=label,
        default_id=_own_id(test_case),
        extras=extras,
        extras_name=f"metadata[{META_KEY!r}]",
        metadata=metadata,
    )
    steps, calls, expected = read_tools(
        test_case.tools_called, test_case.expected_tools, extras, label
    )
    if steps is None and calls is None:
        return sample
    return sample.model_copy(
        update={
            "trajectory": steps,
            "reference_tool_calls": calls,
            "metadata": with_expected(sample.metadata, expected, label),
        }
    )


def from_golden(golden: Golden, *, id: str | None = None, where: str | None = None) -> Sample:
    """The `Sample` a DeepEval `Golden` describes (same rules as `from_test_case`)."""
    return from_test_case(golden, id=id, where=where)


def _label(record: Any, where: str | None) -> str:
    """How error messages name ``record``: its kind, ``where``, and its name or input."""
    kind = "golden" if isinstance(record, Golden) else "test case"
    name = getattr(record, "name", None)
    parts = [where] if where else []
    if name:
        parts.append(f"name={name!r}")
    else:
        text = getattr(record, "input", None)
        if isinstance(text, str):
            parts.append(f"input={text[:40]!r}")
    return f"{kind} {' '.join(parts)}".strip()


def _split_metadata(
    record: LLMTestCase | Golden, label: str
) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """The record's own metadata, and apart from it the ragbridge extras (`META_KEY`) if any."""
    meta = record.additional_metadata if isinstance(record, Golden) else record.metadata
    if meta is not None and not isinstance(meta, Mapping):
        raise ValueError(f"{label}: metadata: expected an object, got {type(meta).__name__}")
    own = dict(meta or {})
    extras = own.pop(META_KEY, None)
    if extras is not None and not isinstance(extras, Mapping):
        raise ValueError(f"{label}: metadata[{META_KEY!r}]: expected an object")
    return own, extras


def _retrieved(raw: Any, label: str, *, ours: bool) -> list[dict[str, Any]]:
    """``retrieval_context`` as passages (a text, and its source when DeepEval knows it)."""
    if raw is not None and not isinstance(raw, list):
        raise ValueError(f"{label}: retrieval_context: expected a list of strings")
    return [
        _passage(item, f"{label}: retrieval_context[{i}]", ours=ours)
        for i, item in enumerate(raw or [])
    ]


def _passage(item: Any, where: str, *, ours: bool) -> dict[str, Any]:
    if isinstance(item, str):
        return {"text": item}
    if not isinstance(item, RetrievedContextData):
        raise ValueError(f"{where}: expected a string, got {type(item).__name__}")
    if ours:
        # DeepEval's file loader turns a passage that looks like its source marker into
        # RetrievedContextData; ragbridge only ever writes strings, so undo it.
        return {"text": f"deepeval_source={item.source},deepeval_context={item.context}"}
    return {"text": item.context, "metadata": {"source": item.source}}


def _from_context(context: Any) -> list[dict[str, Any]]:
    """``context``'s passages standing in for the retrieved ones, each marked as such; none
    when ``context`` is not a list of strings (the shared mapping then reports it)."""
    if not isinstance(context, list) or not all(isinstance(text, str) for text in context):
        return []
    return [{"text": text, "metadata": {"deepeval_field": "context"}} for text in context]


def _meta_only(passage: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": passage["metadata"]} if "metadata" in passage else {}


def _own_id(record: LLMTestCase | Golden) -> str:
    """The id of a test case that carries none: its ``name``, else a hash of its content."""
    name = record.name
    return name if isinstance(name, str) and name else _content_id(record)


def _content_id(record: Any) -> str:
    """A deterministic id for a hand-built test case: a hash of what it says."""
    payload = {
        "input": record.input,
        "actual_output": record.actual_output,
        "expected_output": record.expected_output,
        "retrieval_context": [
            item if isinstance(item, str) else [item.source, item.context]
            for item in record.retrieval_context or []
        ],
        "context": record.context,
        **tools_payload(record.tools_called, record.expected_tools),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return "deepeval-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------- datasets and files


def to_dataset(samples: Iterable[Sample], *, as_test_cases: bool = False) -> EvaluationDataset:
    """An `EvaluationDataset` of ``samples`` as goldens (default) or as test cases.

    Goldens are what DeepEval saves and loads with their metadata intact (see the module
    docstring); pass ``as_test_cases=True`` to hand ``dataset.test_cases`` to
    ``deepeval.evaluate``. Sample ids must be unique.
    """
    items = distinct_samples(samples)
    if as_test_cases:
        dataset = EvaluationDataset()
        for sample in items:
            dataset.add_test_case(to_test_case(sample))
        return dataset
    return EvaluationDataset(goldens=[to_golden(s) for s in items])


def from_dataset(dataset: EvaluationDataset) -> list[Sample]:
    """Every golden, then every test case, of a single-turn ``dataset`` as `Sample`s.

    Sample ids must come out unique: a dataset holding the same records both as goldens and as
    test cases raises ValueError naming both positions.
    """
    if not isinstance(dataset, EvaluationDataset):
        raise TypeError(f"expected an EvaluationDataset, got {type(dataset).__name__}")
    records: list[tuple[str, Any]] = [(f"goldens[{i}]", g) for i, g in enumerate(dataset.goldens)]
    records += [(f"test_cases[{i}]", t) for i, t in enumerate(dataset.test_cases)]
    out: list[Sample] = []
    seen: dict[str, str] = {}
    for where, record in records:
        if not isinstance(record, (LLMTestCase, Golden)):
            raise ValueError(
                f"dataset {where}: {type(record).__name__} is multi-turn, not a sample; "
                "read conversational test cases with from_conversational_test_case "
                "(ragbridge.adapters.deepeval.conversations)"
            )
        sample = from_test_case(record, where=f"dataset {where}")
        if sample.id in seen:
            raise ValueError(
                f"dataset {where}: duplicate sample id {sample.id!r} (also {seen[sample.id]})"
            )
        seen[sample.id] = where
        out.append(sample)
    return out


def save_test_cases(samples: Iterable[Sample], path: str | os.PathLike[str]) -> Path:
    """Write ``samples`` as a DeepEval dataset JSON file (goldens) at ``path``; returns it.

    The file is written by DeepEval's own ``EvaluationDataset.save_as("json", ...)``, so DeepEval
    reads it with ``add_goldens_from_json_file``; the write is atomic (a crash never leaves half a
    file). Metadata must be JSON data: anything else raises ValueError naming the sample.
    """
    items = list(samples)
    for sample in items:
        try:
            json.dumps(_extras(sample), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"sample {sample.id!r}: metadata must be JSON data to be saved ({exc})"
            ) from None
    dataset = to_dataset(items)
    if not items:
        raise ValueError("no samples to save: DeepEval does not write an empty dataset")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as tmp:
        with contextlib.redirect_stdout(io.StringIO()):  # DeepEval prints "dataset saved at"
            written = dataset.save_as("json", directory=tmp, file_name="dataset")
        os.replace(written, target)
    return target


def load_test_cases(path: str | os.PathLike[str]) -> list[Sample]:
    """Read a DeepEval dataset JSON file (as `save_test_cases` or ``save_as("json")`` write it)."""
    dataset = EvaluationDataset()
    dataset.add_goldens_from_json_file(str(path))
    return from_dataset(dataset)
