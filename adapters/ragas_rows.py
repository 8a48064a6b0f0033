"""RAGAS's dataset rows, written without importing RAGAS.

Why a module of its own: `ragbridge.adapters.ragas` imports RAGAS (and with it datasets, and
through it torch's and pyarrow's start-up) as it loads, which takes seconds; writing RAGAS's
JSONL form needs none of it, since the form is plain JSON (`to_ragas_jsonl`, what
``EvaluationDataset.to_jsonl`` writes, which ``EvaluationDataset.from_jsonl`` reads back). So
``ragbridge demo``, which writes the file on every run, imports RAGAS only when RAGAS computes
something. `ragbridge.adapters.ragas` re-exports every name here; the tests load the file in
RAGAS.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragbridge.core.sample import Sample

__all__ = ["EXTRAS_KEY", "RAGAS_FIELDS", "ragas_extras", "to_ragas_jsonl"]

StrPath = str | os.PathLike[str]

RAGAS_FIELDS: tuple[str, ...] = (
    "user_input",
    "retrieved_contexts",
    "retrieved_context_ids",
    "reference_contexts",
    "reference_context_ids",
    "response",
    "reference",
)
"""The `SingleTurnSample` fields ragbridge maps, in the column order the writers use."""

EXTRAS_KEY = "ragbridge"
"""The JSONL key / HF column holding what RAGAS has no field for (see `ragas_extras`)."""

# SingleTurnSample fields with no ragbridge slot: kept in Sample.metadata["ragas"].
_PASSTHROUGH = ("multi_responses", "rubrics", "persona_name", "query_style", "query_length")
_RAGAS_META = "ragas"


def ragas_extras(sample: Sample) -> dict[str, Any]:
    """What RAGAS cannot carry for ``sample``: its id, each context's id/score/metadata, the exact
    ``relevance`` and ``metadata``. JSON data; `from_ragas_dataset` takes a list of these back."""
    return {
        "id": sample.id,
        "contexts": [
            {"id": c.id, "score": c.score, "metadata": c.metadata} for c in sample.contexts
        ],
        "relevance": sample.relevance,
        "metadata": sample.metadata,
    }


def _ragas_row(sample: Sample) -> dict[str, Any]:
    """``sample`` in RAGAS's schema, with None for absent fields."""
    ids = [c.id for c in sample.contexts]
    relevant = (
        None
        if sample.relevance is None
        else [doc for doc, grade in sample.relevance.items() if grade > 0]
    )
    row: dict[str, Any] = {
        "user_input": sample.question,
        "retrieved_contexts": [c.text for c in sample.contexts],
        "retrieved_context_ids": ids if ids and all(i is not None for i in ids) else None,
        "reference_contexts": (
            list(sample.reference_contexts) if sample.reference_contexts is not None else None
        ),
        "reference_context_ids": relevant,
        "response": sample.answer,
        "reference": sample.reference,
    }
    passthrough = sample.metadata.get(_RAGAS_META)
    if isinstance(passthrough, Mapping):
        for key in _PASSTHROUGH:
            if passthrough.get(key) is not None:
                row[key] = passthrough[key]
    return row


def to_ragas_jsonl(samples: Iterable[Sample], path: StrPath) -> int:
    """Write RAGAS's JSONL form (what ``EvaluationDataset.to_jsonl`` writes: absent fields are
    omitted) plus a ``ragbridge`` key per line holding `ragas_extras`; returns the count.

    ``EvaluationDataset.from_jsonl`` reads the file as is (it ignores the extra key).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with target.open("w", encoding="utf-8") as handle:
        for i, sample in enumerate(samples):
            _check_sample(sample, i)
            row = {k: v for k, v in _ragas_row(sample).items() if v is not None}
            row[EXTRAS_KEY] = ragas_extras(sample)
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def _check_sample(sample: Any, index: int) -> Sample:
    if not isinstance(sample, Sample):
        raise TypeError(f"sample {index}: expected a ragbridge Sample, got {type(sample).__name__}")
    return sample
