"""RAGAS's ``EvaluationDataset`` and the Hugging Face ``Dataset`` form, built from `Sample`s and
read back into them.

The rows are `ragbridge.adapters.ragas.rows`' (what RAGAS can hold, and the ``ragbridge`` record
for the rest); this module puts them into RAGAS's and Hugging Face's containers, which need
RAGAS (and ``datasets``) installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from ragas.dataset_schema import EvaluationDataset, MultiTurnSample, SingleTurnSample

from ragbridge.adapters._extras import require
from ragbridge.core.sample import Sample

from .rows import (
    EXTRAS_KEY,
    LEGACY_NAMES,
    PASSTHROUGH,
    RAGAS_FIELDS,
    check_sample,
    ragas_extras,
    ragas_row,
    samples_from_rows,
)

__all__ = ["from_hf_dataset", "from_ragas_dataset", "to_hf_dataset", "to_ragas_dataset"]


def to_ragas_dataset(samples: Iterable[Sample]) -> EvaluationDataset:
    """An ``EvaluationDataset`` of ``SingleTurnSample``s, one per sample, in order.

    See `ragbridge.adapters.ragas.rows` for what RAGAS cannot hold; keep ``ragas_extras`` of
    each sample (or at least the ids) to come back losslessly.
    """
    rows = [SingleTurnSample(**ragas_row(check_sample(s, i))) for i, s in enumerate(samples)]
    return EvaluationDataset(samples=list(rows))


def to_hf_dataset(samples: Iterable[Sample]) -> Any:
    """A Hugging Face ``datasets.Dataset`` in RAGAS's column names, plus a ``ragbridge`` column
    (`ragas_extras` as a JSON string: Arrow needs one type per column, metadata varies).

    Every column is present in every row (None where absent). RAGAS's own ``to_hf_dataset`` goes
    through ``Dataset.from_list``, which takes its columns from the *first* row only, so a field
    absent from the first sample is dropped for all samples; this writer does not do that.
    """
    hf = require("datasets", extra="ragas", what="to_hf_dataset")
    rows = []
    for i, sample in enumerate(samples):
        row = ragas_row(check_sample(sample, i))
        rows.append(row | {EXTRAS_KEY: json.dumps(ragas_extras(sample), ensure_ascii=False)})
    columns: dict[str, list[Any]] = {key: [] for key in (*RAGAS_FIELDS, EXTRAS_KEY)}
    for key in PASSTHROUGH:
        if any(key in row for row in rows):
            columns[key] = []
    for row in rows:
        for key, column in columns.items():
            column.append(row.get(key))
    return hf.Dataset.from_dict(columns)


def from_ragas_dataset(
    dataset: EvaluationDataset | Iterable[SingleTurnSample],
    *,
    ids: Sequence[str] | None = None,
    extras: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[Sample]:
    """`Sample`s from a RAGAS ``EvaluationDataset`` (single-turn samples).

    Sample ids come from ``extras`` (see `ragas_extras`), else ``ids``, else the row index
    (``"0"``, ``"1"``, ...). Without extras, ``relevance`` is rebuilt from
    ``reference_context_ids`` with grade 1, and contexts have no score or metadata.
    """
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(dataset):
        if not isinstance(item, SingleTurnSample):
            hint = (
                " (a multi-turn sample is a conversation: read it with "
                "ragbridge.adapters.ragas.from_multi_turn_dataset)"
                if isinstance(item, MultiTurnSample)
                else ""
            )
            raise ValueError(
                f"row {index}: expected a SingleTurnSample, got {type(item).__name__}{hint}"
            )
        rows.append(item.model_dump(exclude_none=True))
    return samples_from_rows(rows, ids=ids, extras=extras, source="dataset")


def from_hf_dataset(dataset: Any, *, ids: Sequence[str] | None = None) -> list[Sample]:
    """`Sample`s from a Hugging Face ``Dataset`` in RAGAS's column names (a ``ragbridge`` column,
    as `to_hf_dataset` writes, restores what RAGAS cannot carry). None cells count as absent."""
    legacy = [c for c in dataset.column_names if c in LEGACY_NAMES]
    if legacy:
        name = legacy[0]
        raise ValueError(
            f"column {name!r} is a legacy RAGAS name that RAGAS silently drops; "
            f"rename it to {LEGACY_NAMES[name]!r}"
        )
    rows = [{k: v for k, v in row.items() if v is not None} for row in dataset.to_list()]
    return samples_from_rows(rows, ids=ids, extras=None, source="dataset")
