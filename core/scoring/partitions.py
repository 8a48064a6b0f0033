"""Cut JSONL eval sets into partitions, keep each scored partition, and put the run back together.

A run spread over many processes (`ragbridge.adapters.dask`) scores one partition per task. Three
things must hold for its result to equal a local run's, and are kept here, free of any engine:

* **Input order and ids.** Partitions are consecutive runs of lines, numbered in input order
  (files in the order given, globs sorted), so joining finished partitions by index gives the
  local run's order. Sample ids must be unique across *all* shards, as they are within one file:
  `plan_partitions` reads every id once and refuses a duplicate naming both places, in
  bounded memory (`IdLedger`: ids spill to sorted runs on disk past a threshold).
* **Nothing lost, nothing twice.** A finished partition is one results file written atomically
  (`Evaluation.to_jsonl`: temporary file, then rename), so a worker killed mid-partition leaves
  no half file, and the partition is simply scored again; the index names the file, so a retry
  replaces rather than adds.
* **A rerun skips finished work, and only finished work.** Each partition has a fingerprint: a
  hash of its bytes and of the run's scoring configuration (metrics, models, settings that
  change values). A part file is reused only when its fingerprint matches; change the judge or
  one line of the partition, and that partition is scored again; so is one that stopped early
  (its judge was unusable: its cells are refusals, not scores). The header keeps that
  configuration in readable form too (secrets masked, `readable_url`), so a rerun that does not
  reuse kept partitions can say why (`not_reused_reason`): re-paying is right when the judge's
  endpoint changed (the same model name elsewhere may answer otherwise), but it must be said.

`combine_metadata` adds the partitions' counts (judge calls, cost, reused results) into the
run's metadata, so the header of the joined results says what the whole run spent.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache.backend import redact_url
from ..id_spill import Duplicate, IdLedger
from ..judging.self_preference import METADATA_KEY as SELF_JUDGED
from ..results.evaluation import Evaluation
from ..sample import Sample, SampleValidationError, parse_sample_lines

__all__ = [
    "PART_KEY",
    "PartStore",
    "Partition",
    "combine_metadata",
    "config_digest",
    "expand_shards",
    "not_reused_reason",
    "plan_partitions",
    "raw_id",
    "readable_url",
]

PART_KEY = "partition"
"""Metadata key of a part file's header: index, fingerprint, samples, cells, config."""

_SECRET_PARAMS = re.compile(
    r"([?&](?:api[-_]?key|key|token|access[-_]?token|secret|sig|signature|password)=)[^&#]*",
    re.IGNORECASE,
)

_SUMMED = ("judge_stats", "embedding_stats", "results_reused")
"""Metadata counters a run's total is the sum of over its partitions."""


@dataclass(frozen=True)
class Partition:
    """Consecutive lines ``[start, end)`` (bytes) of one shard, scored by one task."""

    index: int
    source: str
    start: int
    end: int
    first_line: int
    samples: int
    fingerprint: str

    def read_bytes(self) -> bytes:
        """The partition's raw lines, read from its shard (on whichever machine scores it)."""
        with open(self.source, "rb") as handle:
            handle.seek(self.start)
            return handle.read(self.end - self.start)

    def samples_in(self, data: bytes) -> Iterator[Sample]:
        """The samples of ``data`` (this partition's bytes), with ``file:line:`` errors."""
        numbered = enumerate(data.splitlines(keepends=True), start=self.first_line)
        return parse_sample_lines(self.source, numbered)


def config_digest(config: Mapping[str, Any]) -> str:
    """A short hash of what decides a partition's scores (part of every fingerprint)."""
    text = json.dumps(config, sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def readable_url(url: str | None) -> str | None:
    """``url`` as it may be printed and kept in a file: no password, no key or token.

    `redact_url` masks a password (``//user:***@host``, ``password=***``); query parameters
    that carry a key or a token (``?api-key=``, ``?key=``, ``?token=``, ``?sig=``) are masked
    here too. A credential decides who pays, not what the model answers.
    """
    if url is None:
        return None
    return _SECRET_PARAMS.sub(r"\1***", redact_url(url))


def not_reused_reason(kept: Mapping[str, Any] | None, now: Mapping[str, Any]) -> str:
    """Why a kept partition's fingerprint differs from this run's, in a few words.

    ``kept`` is the partition's header (`PartStore.header`), ``now`` the readable configuration
    of this run. Settings that differ are named with both values (``base_url changed (A ->
    B)``); when none does, the partition's samples changed (an edited line, another partition
    size). A part kept by a version that did not record its configuration says so.
    """
    if kept is not None and kept.get("aborted"):
        return "stopped early (the judge or the embedder was unusable)"
    before = kept.get("config") if kept is not None else None
    if not isinstance(before, Mapping):
        return "kept without a readable configuration (an older ragbridge): cannot say what changed"
    changes = [
        _change(key, _jsonable(before.get(key)), _jsonable(now.get(key)))
        for key in sorted(set(before) | set(now))
        if _jsonable(before.get(key)) != _jsonable(now.get(key))
    ]
    if changes:
        return "; ".join(changes)
    return "their samples changed (an edited line, or another partition size)"


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from a header (tuples become lists)."""
    return json.loads(json.dumps(value, default=repr))


def _change(key: str, before: Any, now: Any) -> str:
    """``key changed (A -> B)``; for two lists, what left and what came (``-mrr, +ndcg@10``)."""
    if isinstance(before, list) and isinstance(now, list):
        gone = [f"-{_shown(v)}" for v in before if v not in now]
        came = [f"+{_shown(v)}" for v in now if v not in before]
        return f"{key} changed ({', '.join(gone + came) or 'order'})"
    return f"{key} changed ({_shown(before)} -> {_shown(now)})"


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):  # a metric: name, class, provider
        return "/".join(str(v) for v in value if v is not None)
    return str(value)


def expand_shards(shards: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """Paths from paths and glob patterns, in the order given (each glob sorted).

    A pattern that matches nothing, or a path that does not exist, is an error naming it: a
    typo in a shard list must not shrink the eval set silently.
    """
    items = [shards] if isinstance(shards, str | os.PathLike) else list(shards)
    if not items:
        raise ValueError("no shards given")
    found: list[str] = []
    for item in items:
        text = os.fspath(item)
        if glob.has_magic(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise FileNotFoundError(f"{text}: no file matches this pattern")
            found.extend(matches)
        elif not Path(text).is_file():
            raise FileNotFoundError(f"{text}: no such file")
        else:
            found.append(text)
    return list(dict.fromkeys(found))


def plan_partitions(
    shards: Sequence[str], size: int, config: str, *, spill_at: int | None = None
) -> Iterator[Partition]:
    """Partitions of at most ``size`` samples over ``shards``, in input order.

    Reads every line once: to cut at line boundaries, to fingerprint the bytes with ``config``
    (`config_digest`), and to refuse a line that is not JSON or an id seen before (anywhere in
    the shards) with ``file:line:``. Ids are checked by an `IdLedger`: in memory up to
    ``spill_at`` ids (default `id_spill.SPILL_AT`), then in sorted runs on disk, so 10 million
    samples do not need 1 GB on the planning machine. Past the spill a repeat is found when the
    pass ends, after the last partition is yielded: consume every partition before scoring any
    (the cluster run does). The error is the one a single in-memory pass raises: the first line
    that repeats an id, naming where it was first seen; a bad line stops the pass with its own
    error unless an earlier line repeated an id.
    """
    if size < 1:
        raise ValueError(f"partition size must be >= 1, got {size}")
    with IdLedger(spill_at) as ids:
        try:
            yield from _cut(shards, size, config, ids)
        except SampleValidationError:
            _refuse(shards, ids.finish())  # a repeat on an earlier line is what a pass meets first
            raise
        _refuse(shards, ids.finish())


def _cut(shards: Sequence[str], size: int, config: str, ids: IdLedger) -> Iterator[Partition]:
    index = 0
    for number_of_shard, source in enumerate(shards):
        with open(source, "rb") as handle:
            start = offset = 0
            first_line = 1
            count = 0
            digest = hashlib.blake2b(digest_size=16)  # replaced at each partition's first line
            for number, line in enumerate(handle, start=1):
                if count == 0:
                    start, first_line = offset, number
                    digest = hashlib.blake2b(config.encode("utf-8"), digest_size=16)
                offset += len(line)
                digest.update(line)
                if not line.strip():
                    continue
                sample_id = _line_id(source, number, line)
                _refuse(shards, ids.add(sample_id, (number_of_shard, number)))
                count += 1
                if count == size:
                    yield Partition(
                        index, source, start, offset, first_line, count, digest.hexdigest()
                    )
                    index += 1
                    count = 0
            if count:
                yield Partition(index, source, start, offset, first_line, count, digest.hexdigest())
                index += 1


def _refuse(shards: Sequence[str], found: Duplicate | None) -> None:
    """Raise the ``file:line: id: duplicate sample id`` error for a repeat, naming the first."""
    if found is None:
        return
    (shard, line), (first_shard, first_line) = found.again, found.first
    raise SampleValidationError(
        shards[shard],
        line,
        [
            f"id: duplicate sample id {found.sample_id!r} "
            f"(first in {shards[first_shard]}:{first_line})"
        ],
    )


def _line_id(source: str, number: int, line: bytes) -> str:
    """The ``id`` of one raw line, as `Sample` reads it (numbers become strings)."""
    try:
        obj = json.loads(line.removeprefix(b"\xef\xbb\xbf"))
    except ValueError as exc:
        raise SampleValidationError(source, number, [f"invalid JSON: {exc}"]) from None
    found = raw_id(obj)
    if found is None:
        raise SampleValidationError(source, number, ["id: a non-empty string is required"])
    return found


def raw_id(obj: object) -> str | None:
    """The ``id`` of one sample dict (or `Sample`) as `Sample` reads it, or None when it has
    none a `Sample` would accept (numbers become strings; a bool or an empty string is none)."""
    if isinstance(obj, Sample):
        return obj.id
    value = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return None
    return str(value)


class PartStore:
    """A folder of finished partitions, ``part-000042.jsonl`` each (see the module)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, index: int) -> Path:
        return self.folder / f"part-{index:06d}.jsonl"

    def header(self, index: int) -> dict[str, Any] | None:
        """Partition ``index``'s part header (fingerprint, samples, cells, config), or None
        (none kept, unreadable). Only the first line of the file is read."""
        try:
            with self.path(index).open(encoding="utf-8") as handle:
                header = json.loads(handle.readline())
        except (OSError, ValueError):
            return None
        part = header.get("metadata", {}).get(PART_KEY) if isinstance(header, dict) else None
        return part if isinstance(part, dict) else None

    def fingerprint(self, index: int) -> str | None:
        """The fingerprint partition ``index`` was kept under, or None (none kept, unreadable)."""
        found = (self.header(index) or {}).get("fingerprint")
        return found if isinstance(found, str) else None

    def finished(self, index: int, fingerprint: str) -> bool:
        """Whether partition ``index`` was scored, complete, from the same bytes and config;
        a file from another input or config is "not finished" and will be replaced."""
        return self.fingerprint(index) == fingerprint

    def write(
        self,
        index: int,
        fingerprint: str,
        samples: int,
        evaluation: Evaluation,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep one scored partition, atomically (a killed writer leaves the old state).

        ``config`` is the run's configuration in readable form, secrets masked: what a later
        run names when it cannot reuse this part (`not_reused_reason`).
        """
        header: dict[str, Any] = {
            "index": index,
            "fingerprint": fingerprint,
            "samples": samples,
            "cells": len(evaluation),
        }
        if evaluation.metadata.get("aborted"):
            header["aborted"] = True  # its cells are refusals: a rerun scores it again
        if config is not None:
            header["config"] = dict(config)
        evaluation.metadata[PART_KEY] = header
        evaluation.to_jsonl(self.path(index))

    def read(self, index: int) -> Evaluation:
        """A finished partition's cells and metadata, as written."""
        return Evaluation.from_jsonl(self.path(index))


def combine_metadata(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One run's metadata from its partitions': counters summed, the rest from the first.

    Summed: judge and embedding call counts, reused results, ``cost_usd`` and the answers the
    judge's own model wrote (``self_judged``). ``max_in_flight`` is per process and is dropped
    (the cluster's cap is reported by the caller). The first ``aborted`` line is kept; warnings
    are joined without repeats, in order.
    """
    if not parts:
        return {}
    merged = (*_SUMMED, PART_KEY, "max_in_flight", "warnings", "cost_usd", "aborted", SELF_JUDGED)
    out: dict[str, Any] = {k: v for k, v in parts[0].items() if k not in merged}
    for key in _SUMMED:
        found = [p[key] for p in parts if isinstance(p.get(key), Mapping)]
        if found:
            out[key] = _summed_counts(found)
    judged = [p[SELF_JUDGED] for p in parts if isinstance(p.get(SELF_JUDGED), Mapping)]
    if judged:  # the judge's own answers, counted over every partition
        answers = sum(int(j.get("answers") or 0) for j in judged)
        out[SELF_JUDGED] = {"model": judged[0].get("model"), "answers": answers}
    costs = [p["cost_usd"] for p in parts if isinstance(p.get("cost_usd"), int | float)]
    if costs:
        out["cost_usd"] = round(sum(costs), 6)
    aborted = next((p["aborted"] for p in parts if p.get("aborted")), None)
    if aborted is not None:
        out["aborted"] = aborted
    warnings = list(dict.fromkeys(line for p in parts for line in p.get("warnings") or []))
    if warnings:
        out["warnings"] = warnings
    return out


def _summed_counts(found: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counters of several partitions added up; ``max_in_flight``, a peak, is the largest."""
    total: dict[str, Any] = {}
    for counts in found:
        for name, value in counts.items():
            if name == "max_in_flight":
                total[name] = max(total.get(name, 0), value)
            else:
                total[name] = total.get(name, 0) + value
    return total
