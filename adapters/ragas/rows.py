"""`Sample`s as RAGAS's single-turn rows and back, in plain data: this module imports no RAGAS.

RAGAS's ``SingleTurnSample`` holds ``user_input``, ``response``, ``retrieved_contexts``,
``retrieved_context_ids``, ``reference``, ``reference_contexts`` and ``reference_context_ids``;
it has no sample id, no context scores or metadata, no graded relevance and no metadata, and it
silently ignores unknown keys (pydantic ``extra="ignore"``). So:

* ``relevance`` maps onto ``reference_context_ids`` (the ids graded > 0; grades are lost there);
* ``retrieved_context_ids`` is filled only when *every* context has an id: RAGAS's id-based
  metrics compare ids position by position, and a made-up placeholder id would be scored as a real
  one. With some ids missing the field stays empty (the ids travel in the extras below);
* everything else — the sample id, every context's id/score/metadata, the exact ``relevance`` and
  ``metadata`` — goes into a ``ragbridge`` record (`ragas_extras`). In the JSONL and HF forms it is
  one more key/column (``ragbridge``), which RAGAS itself ignores when it reads the file, so the
  files stay valid RAGAS datasets. An in-memory ``EvaluationDataset`` cannot hold it: pass
  ``extras=ragas_extras(samples)`` (or just ``ids=``) to
  `ragbridge.adapters.ragas.datasets.from_ragas_dataset`.

The fields go both ways through the mapping every framework shares
(`ragbridge.core.sample_fields`, with RAGAS's names: `FIELDS`); what is RAGAS's own is done here.
Reading is strict: RAGAS's legacy column names (``question``, ``answer``, ``contexts``,
``ground_truth``) would be dropped silently by RAGAS; here they raise a `ValueError` naming the
row and the key to use. Unknown keys and ill-typed fields raise too, naming the row and field.
RAGAS fields ragbridge has no slot for (``rubrics``, ``persona_name``, ...) are kept in
``Sample.metadata["ragas"]`` and written back from there.

Why no RAGAS here: importing RAGAS (and with it datasets, and through it torch's and pyarrow's
start-up) takes seconds, and RAGAS's JSONL form is plain JSON (`to_ragas_jsonl` writes what
``EvaluationDataset.to_jsonl`` writes, which ``EvaluationDataset.from_jsonl`` reads back). So
``ragbridge demo``, which writes the file on every run, imports RAGAS only when RAGAS computes
something; the tests load the file in RAGAS.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragbridge.core import sample_fields
from ragbridge.core.conversation import Conversation
from ragbridge.core.files import StrPath
from ragbridge.core.sample import Sample
from ragbridge.core.sample_fields import FieldError, extras_of, fields_of, sample_from_fields

__all__ = [
    "EXTRAS_KEY",
    "FIELDS",
    "LEGACY_NAMES",
    "PASSTHROUGH",
    "RAGAS_FIELDS",
    "check_sample",
    "from_ragas_jsonl",
    "ragas_extras",
    "ragas_row",
    "sample_from_row",
    "samples_from_rows",
    "to_ragas_jsonl",
]

FIELDS = sample_fields.RAGAS_FIELDS
"""What RAGAS calls each `Sample` field (the mapping every framework shares)."""

RAGAS_FIELDS: tuple[str, ...] = FIELDS.names()
"""The `SingleTurnSample` fields ragbridge maps, in the column order the writers use."""

EXTRAS_KEY = "ragbridge"
"""The JSONL key / HF column holding what RAGAS has no field for (see `ragas_extras`)."""

PASSTHROUGH = ("multi_responses", "rubrics", "persona_name", "query_style", "query_length")
"""``SingleTurnSample`` fields with no ragbridge slot: kept in ``Sample.metadata["ragas"]``."""
_RAGAS_META = "ragas"

LEGACY_NAMES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
    "ground_truths": "reference",
}
"""Pre-0.2 RAGAS column names, which RAGAS now drops silently, and the names to use instead."""

_KNOWN = {*RAGAS_FIELDS, *PASSTHROUGH, EXTRAS_KEY}

# --------------------------------------------------------------------------- writing


def ragas_extras(sample: Sample) -> dict[str, Any]:
    """What RAGAS cannot carry for ``sample``: its id, each context's id/score/metadata, the exact
    ``relevance`` and ``metadata`` (`ragbridge.core.sample_fields.extras_of`). JSON data;
    `from_ragas_dataset` takes a list of these back."""
    return extras_of(sample)


def ragas_row(sample: Sample) -> dict[str, Any]:
    """``sample`` in RAGAS's schema (`ragbridge.core.sample_fields.fields_of`), with None for
    absent fields, in `RAGAS_FIELDS` order, plus the RAGAS fields kept in its metadata."""
    fields = fields_of(sample, FIELDS)
    row: dict[str, Any] = {name: fields[name] for name in RAGAS_FIELDS}
    passthrough = sample.metadata.get(_RAGAS_META)
    if isinstance(passthrough, Mapping):
        for key in PASSTHROUGH:
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
            check_sample(sample, i)
            row = {k: v for k, v in ragas_row(sample).items() if v is not None}
            row[EXTRAS_KEY] = ragas_extras(sample)
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def check_sample(sample: Any, index: int) -> Sample:
    """``sample``, refused with its position when it is not a ragbridge `Sample`."""
    if not isinstance(sample, Sample):
        hint = (
            " (a conversation goes to RAGAS as a MultiTurnSample: "
            "ragbridge.adapters.ragas.to_multi_turn_dataset)"
            if isinstance(sample, Conversation)
            else ""
        )
        raise TypeError(
            f"sample {index}: expected a ragbridge Sample, got {type(sample).__name__}{hint}"
        )
    return sample


# --------------------------------------------------------------------------- reading


def from_ragas_jsonl(path: StrPath, *, ids: Sequence[str] | None = None) -> list[Sample]:
    """`Sample`s from a RAGAS JSONL file (ours, with ``ragbridge`` extras, or RAGAS's own).

    Errors name the file, line and field: legacy column names, unknown keys, bad types.
    """
    source = str(path)
    rows: list[dict[str, Any]] = []
    with Path(path).open("r", encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{source}: row {len(rows)} (line {number}): invalid JSON: {exc}"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(
                    f"{source}: row {len(rows)} (line {number}): expected a JSON object, "
                    f"got {type(row).__name__}"
                )
            rows.append(row)
    return samples_from_rows(rows, ids=ids, extras=None, source=source)


def samples_from_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    ids: Sequence[str] | None,
    extras: Sequence[Mapping[str, Any] | None] | None,
    source: str,
) -> list[Sample]:
    """One `Sample` per RAGAS row (see `sample_from_row`); sample ids must be unique."""
    for name, given in (("ids", ids), ("extras", extras)):
        if given is not None and len(given) != len(rows):
            raise ValueError(f"{name} has {len(given)} entries for {len(rows)} rows")
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        extra = extras[index] if extras is not None else None
        default_id = ids[index] if ids is not None else str(index)
        sample = sample_from_row(row, index, extra, default_id, source)
        if sample.id in seen:
            raise ValueError(
                f"{source}: row {index}: id: duplicate sample id {sample.id!r} "
                f"(first in row {seen[sample.id]})"
            )
        seen[sample.id] = index
        samples.append(sample)
    return samples


def sample_from_row(
    row: Mapping[str, Any],
    index: int,
    extra: Mapping[str, Any] | None,
    default_id: str,
    source: str,
) -> Sample:
    """One RAGAS row (a ``SingleTurnSample``'s fields) as a `Sample`.

    ``extra`` is the row's ``ragbridge`` record when it travels apart from the row (an in-memory
    dataset); else the row's own ``ragbridge`` key is read. What is RAGAS's own is checked here
    (legacy and unknown keys, multi-turn rows, the record as a JSON string, the fields with no
    ragbridge slot); the fields are read by the mapping every framework shares
    (`ragbridge.core.sample_fields`). The first problem raises a `FieldError` (a `ValueError`)
    naming ``source``, the row and the field.
    """
    where = f"{source}: row {index}"
    if isinstance(row.get("user_input"), list):  # before the keys: its own are no single-turn keys
        raise FieldError(
            where,
            "user_input",
            "multi-turn sample (a list of messages), which ragbridge reads as a conversation: "
            "load the rows into RAGAS's EvaluationDataset (from_jsonl, from_list) and read it "
            "with ragbridge.adapters.ragas.from_multi_turn_dataset",
        )
    _check_keys(row, where)
    return sample_from_fields(
        row,
        FIELDS,
        where=where,
        default_id=default_id,
        extras=_with_passthrough(row, _extras_in(row, extra, where)),
        extras_name=EXTRAS_KEY,
    )


def _check_keys(row: Mapping[str, Any], where: str) -> None:
    """Refuse RAGAS's legacy names (RAGAS would drop them silently) and unknown keys."""
    for key in row:
        if key in LEGACY_NAMES:
            raise FieldError(
                where,
                key,
                f"legacy RAGAS name, which RAGAS silently drops; use {LEGACY_NAMES[key]!r}",
            )
        if key not in _KNOWN:
            raise FieldError(
                where, key, f"unknown key (RAGAS single-turn fields are {', '.join(RAGAS_FIELDS)})"
            )


def _extras_in(row: Mapping[str, Any], given: Mapping[str, Any] | None, where: str) -> Any:
    """The ``ragbridge`` record: ``given``, else the row's own (a JSON string in the HF form)."""
    if given is not None or EXTRAS_KEY not in row:
        return given
    extras = row[EXTRAS_KEY]
    if isinstance(extras, str):
        try:
            return json.loads(extras)
        except json.JSONDecodeError as exc:
            raise FieldError(where, EXTRAS_KEY, f"invalid JSON: {exc}") from None
    return extras


def _with_passthrough(row: Mapping[str, Any], extras: Any) -> Any:
    """``extras`` with the row's RAGAS fields that have no ragbridge slot (`PASSTHROUGH`) put
    into ``metadata["ragas"]``, over what the extras kept there: the row's values are the ones
    RAGAS shows and a user edits. A record that is not an object is left for
    `sample_from_fields` to refuse."""
    kept = {k: row[k] for k in PASSTHROUGH if row.get(k) is not None}
    if not kept or not isinstance(extras, (Mapping, type(None))):
        return extras
    metadata = (extras or {}).get("metadata") or {}
    if not isinstance(metadata, Mapping):
        return extras
    ragas = metadata.get(_RAGAS_META)
    merged = {**(ragas if isinstance(ragas, Mapping) else {}), **kept}
    return {**(extras or {}), "metadata": {**metadata, _RAGAS_META: merged}}
