"""Pinned steps: the judge's evaluation steps frozen so every machine and run uses the same.

Users of the peers report that steps regenerated on every run move the yardstick: the same
answer passes one run and fails the next, and steps drift from the criterion they came from.
`freeze` writes the steps of a criteria file's scored criteria into a lock beside it
(``criteria.yaml`` -> ``criteria.lock.json``), or into the file itself, each with the hash
of the criterion they were written for (`criteria_sha`: its words, scale and fields).
`load_criteria` applies them; when the criterion has been edited since, its steps are
**stale**, and loading fails loudly (`StaleStepsError`) naming the criterion, the lock and the
command that freezes it again, ``ragbridge criteria freeze FILE``, rather than scoring a new
criterion with old steps. This module reads and writes locks only: `stale_steps`, which must
load a file to answer, is with the file reader (`ragbridge.core.criteria.files`), which
imports this module and not the other way round.

The lock is JSON, one entry per criterion, sorted, so it diffs cleanly under version control::

    {"tone": {"criteria_sha": "...", "model": "gpt-4o-mini", "steps": ["...", "..."]}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..files import write_text_atomic
from .errors import CriteriaFileError
from .spec import Criterion
from .steps import criteria_sha

if TYPE_CHECKING:  # files imports this module; freeze only reads a loaded file's fields
    from .files import CriteriaFile

__all__ = [
    "FROZEN_FOR",
    "LOCK_SUFFIX",
    "FrozenSteps",
    "freeze",
    "lock_path_for",
    "read_lock",
]

LOCK_SUFFIX = ".lock.json"

FROZEN_FOR = "steps_frozen_for"
"""The key beside ``evaluation_steps`` in an entry whose steps were frozen into the file: the
hash of the criterion they were written for (`criteria_sha`). Written here, read by
`ragbridge.core.criteria.files`."""


def lock_path_for(path: str | os.PathLike[str]) -> Path:
    """The lock beside a criteria file: ``criteria.yaml`` -> ``criteria.lock.json``."""
    file = Path(path)
    return file.with_name(file.stem + LOCK_SUFFIX)


@dataclass(frozen=True)
class FrozenSteps:
    """One lock entry: the steps, the criterion hash they were written for, the model."""

    criteria_sha: str
    steps: tuple[str, ...]
    model: str | None = None


def read_lock(path: str | os.PathLike[str]) -> dict[str, FrozenSteps]:
    """The entries of a lock (none when it does not exist). A lock that cannot be read is an
    error naming it: silently ignoring it would unpin every criterion."""
    lock = Path(path)
    if not lock.exists():
        return {}
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CriteriaFileError(lock, None, "", f"not a readable criteria lock: {exc}") from None
    if not isinstance(data, dict):
        raise CriteriaFileError(lock, None, "", "a criteria lock is a JSON object of entries")
    out: dict[str, FrozenSteps] = {}
    for name, entry in data.items():
        steps = entry.get("steps") if isinstance(entry, dict) else None
        sha = entry.get("criteria_sha") if isinstance(entry, dict) else None
        if (
            not isinstance(sha, str)
            or not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, str) and s.strip() for s in steps)
        ):
            raise CriteriaFileError(
                lock, None, str(name), "needs criteria_sha (text) and steps (a list of text)"
            )
        model = entry.get("model")
        out[str(name)] = FrozenSteps(sha, tuple(steps), model if isinstance(model, str) else None)
    return out


def _write_lock(lock: Path, entries: Mapping[str, FrozenSteps]) -> None:
    data: dict[str, Any] = {}
    for name in sorted(entries):
        entry = entries[name]
        data[name] = {"criteria_sha": entry.criteria_sha, "steps": list(entry.steps)}
        if entry.model is not None:
            data[name]["model"] = entry.model
    write_text_atomic(lock, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _criteria_of(file: CriteriaFile, steps: Mapping[str, Sequence[str]]) -> dict[str, Criterion]:
    by_name = {spec.name: spec for spec in file.specs}
    out: dict[str, Criterion] = {}
    for name, written in steps.items():
        spec = by_name.get(name)
        if spec is None:
            raise ValueError(f"{file.path} has no criterion named {name!r}")
        if not isinstance(spec, Criterion):
            raise ValueError(f"{name!r} is a {spec.kind}; only a scored criterion has steps")
        if (
            isinstance(written, str)
            or not written
            or not all(isinstance(s, str) and s.strip() for s in written)
        ):
            raise ValueError(f"the steps of {name!r} must be a non-empty list of text")
        out[name] = spec
    return out


def freeze(
    file: CriteriaFile,
    steps: Mapping[str, Sequence[str]],
    *,
    in_file: bool = False,
    model: str | None = None,
) -> Path:
    """Pin ``steps`` (criterion name -> its steps) for ``file``; returns the file written.

    Into the lock beside the file (the default: the criteria file stays as its authors wrote
    it; other entries of the lock are kept), or ``in_file`` as ``evaluation_steps`` plus
    ``steps_frozen_for`` in each criterion's entry. ``model`` records the judge that wrote
    them (lock only). Steps are frozen for the criterion as the file has it now.
    """
    specs = _criteria_of(file, steps)
    if in_file:
        if file.path.suffix.lower() == ".json":
            _freeze_into_json(file.path, specs, steps)
        else:
            _freeze_into_yaml(file.path, specs, steps)
        return file.path
    entries = read_lock(file.lock_path)
    for name, spec in specs.items():
        entries[name] = FrozenSteps(
            criteria_sha(spec), tuple(s.strip() for s in steps[name]), model
        )
    _write_lock(file.lock_path, entries)
    return file.lock_path


# ---------------------------------------------------------------------------- into the file


def _freeze_into_json(
    path: Path, specs: Mapping[str, Criterion], steps: Mapping[str, Sequence[str]]
) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = data["criteria"] if isinstance(data, dict) else data
    for entry in entries:
        name = entry.get("name")
        if name in specs:
            _refuse_own_steps(entry, name)
            entry["evaluation_steps"] = [s.strip() for s in steps[name]]
            entry[FROZEN_FOR] = criteria_sha(specs[name])
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _refuse_own_steps(entry: Mapping[str, Any], name: str) -> None:
    if "evaluation_steps" in entry and FROZEN_FOR not in entry:
        raise ValueError(f"{name!r} has evaluation steps of its own in the file; nothing to freeze")


def _last_line(node: yaml.Node) -> int:
    """The 0-based last line holding ``node``'s text."""
    if isinstance(node, yaml.ScalarNode):
        end, start = int(node.end_mark.line), int(node.start_mark.line)
        return end if node.end_mark.column > 0 or end == start else end - 1
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    return max([int(node.start_mark.line), *(_last_line(c) for c in children)])


def _freeze_into_yaml(
    path: Path, specs: Mapping[str, Criterion], steps: Mapping[str, Sequence[str]]
) -> None:
    """Write the steps into each entry by editing lines, so the authors' comments, order and
    layout stay as they were (a YAML dump would drop every comment)."""
    text = path.read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    seq = root
    if isinstance(root, yaml.MappingNode):
        seq = next(v for k, v in root.value if k.value == "criteria")
    assert isinstance(seq, yaml.SequenceNode)
    lines = text.splitlines()
    edits: list[tuple[int, int, list[str]]] = []  # (first line, past last line, new lines)
    for entry in seq.value:
        if not isinstance(entry, yaml.MappingNode) or entry.flow_style:
            continue
        keys = {k.value: (k, v) for k, v in entry.value}
        name_node = keys.get("name")
        if name_node is None or name_node[1].value not in specs:
            continue
        name = name_node[1].value
        _refuse_own_steps({k: True for k in keys}, name)
        indent = " " * entry.value[0][0].start_mark.column
        for old in ("evaluation_steps", FROZEN_FOR):
            if old in keys:
                key, value = keys[old]
                edits.append((key.start_mark.line, _last_line(value) + 1, []))
        written = [f"{indent}evaluation_steps:"]
        written += [f"{indent}  - {json.dumps(s.strip(), ensure_ascii=False)}" for s in steps[name]]
        written.append(f"{indent}{FROZEN_FOR}: {criteria_sha(specs[name])}")
        after = _last_line(entry) + 1
        edits.append((after, after, written))
    missing = set(specs) - {e for e in _names_in(seq)}
    if missing:
        raise ValueError(
            f"{path}: cannot write into the entries of {sorted(missing)} (flow style); "
            "freeze into the lock instead"
        )
    for first, past, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[first:past] = new
    write_text_atomic(path, "\n".join(lines) + "\n")


def _names_in(seq: yaml.SequenceNode) -> list[str]:
    out = []
    for entry in seq.value:
        if isinstance(entry, yaml.MappingNode) and not entry.flow_style:
            for key, value in entry.value:
                if key.value == "name" and isinstance(value, yaml.ScalarNode):
                    out.append(str(value.value))
    return out
