"""ragbridge eval sets as LangSmith dataset examples.

The keys are the ones `ragbridge.adapters.langsmith.evaluators` reads by default — the question
in ``inputs["question"]``, the reference answer, reference passages and relevance labels in
``outputs`` — so an eval set exported here and run with ``langsmith.evaluate(target,
data=examples, evaluators=evaluators([...]))`` needs no key overrides. Example ids are UUIDv5s of
the sample ids: exporting the same eval set twice gives the same examples, and every LangSmith
result traces back to its ragbridge sample (also kept in ``metadata["ragbridge_id"]``).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragbridge.core.sample import Sample

from ._framework import Example

__all__ = ["example_id", "example_records", "save_examples", "to_examples"]

_NAMESPACE = uuid.UUID("6f0b9d3e-3c55-4f0a-9a53-5b7c1e2f4a10")


def example_id(sample_id: str) -> uuid.UUID:
    """The stable LangSmith example id of a ragbridge sample id."""
    return uuid.uuid5(_NAMESPACE, sample_id)


def example_records(samples: Iterable[Sample]) -> list[dict[str, Any]]:
    """One ``{"id", "inputs", "outputs", "metadata"}`` dict per sample (JSON-ready)."""
    records = []
    seen: set[str] = set()
    for sample in samples:
        if sample.id in seen:
            raise ValueError(f"duplicate sample id {sample.id!r}")
        seen.add(sample.id)
        outputs: dict[str, Any] = {}
        if sample.reference is not None:
            outputs["reference"] = sample.reference
        if sample.reference_contexts is not None:
            outputs["reference_contexts"] = list(sample.reference_contexts)
        if sample.relevance is not None:
            outputs["relevance"] = dict(sample.relevance)
        records.append(
            {
                "id": str(example_id(sample.id)),
                "inputs": {"question": sample.question},
                "outputs": outputs,
                "metadata": {**sample.metadata, "ragbridge_id": sample.id},
            }
        )
    return records


def to_examples(samples: Iterable[Sample]) -> list[Example]:
    """LangSmith `Example` objects for ``langsmith.evaluate(..., data=...)``."""
    return [
        Example(
            id=uuid.UUID(r["id"]),
            inputs=r["inputs"],
            outputs=r["outputs"],
            metadata=r["metadata"],
        )
        for r in example_records(samples)
    ]


def save_examples(samples: Iterable[Sample], path: str | os.PathLike[str]) -> int:
    """Write the examples as JSONL (one example per line); returns how many were written."""
    records = example_records(samples)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(target)
    return len(records)
