"""The lock of a held-out test split: what the test file held when it was split off.

A held-out set stays held out only while nobody edits it after seeing results: a reference
"fixed" where the system was marked wrong, a hard question dropped, an easy one added. The lock,
written by ``ragbridge split`` next to the test file, records a content hash of every test
sample, so `check_against_lock` can say later which samples were edited (and in which fields),
added, removed or renamed.

**What is hashed.** The fields that define the test: `LOCKED_FIELDS` (``question``,
``reference``, ``reference_contexts``, ``relevance``), with the id. Not ``answer`` or
``contexts``: those are what the system under test produces, and a test file run through a new
pipeline version is the same test with new outputs, not an edited test. Not ``metadata``:
tools and pipelines add notes to it. Each value is hashed over its canonical JSON (keys sorted,
no spaces, UTF-8), so a missing field and ``null`` are the same, and so are two orders of the
keys of ``relevance``; a changed character is not.

The lock also records the seed, the dev share, the sizes per stratum (so the split can be
re-made and checked), a hash of the dev split's ids and questions, when and by which ragbridge
version it was made. It is JSON with one test sample per line, so it diffs well in version
control; committing it is what makes an edit of the test split visible in review.

The lock guards against accidents and quiet drift, not against a determined user: whoever can
edit the test file can re-split with ``--force`` or edit the lock.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..files import write_text_atomic
from ..sample import Sample
from .split import Split

__all__ = [
    "LOCKED_FIELDS",
    "LOCK_FORMAT",
    "LOCK_VERSION",
    "FindingKind",
    "LockCheck",
    "LockError",
    "LockFinding",
    "SampleHash",
    "SplitLock",
    "check_against_lock",
    "dev_digest",
    "make_lock",
    "read_lock",
    "sample_hash",
    "write_lock",
]

LOCK_FORMAT: Literal["ragbridge-split-lock"] = "ragbridge-split-lock"
LOCK_VERSION = 1
LOCKED_FIELDS = ("question", "reference", "reference_contexts", "relevance")
"""The fields whose change is an edit of the held-out test (see the module docstring)."""
_FIELD_HASH_LENGTH = 16
"""Hex digits kept of a field's hash: enough to tell which field changed, short per line."""


class SampleHash(BaseModel):
    """One test sample in the lock: the hash of its locked content and of each locked field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str
    fields: dict[str, str]


class SplitLock(BaseModel):
    """The lock file's content. File names are relative to the lock's folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["ragbridge-split-lock"] = LOCK_FORMAT
    version: int = LOCK_VERSION
    ragbridge_version: str
    created_at: str
    source: str
    dev_file: str
    test_file: str
    seed: int
    dev_share: float
    near_duplicate: float
    """The near-duplicate threshold the split kept duplicates together by."""
    sizes: dict[str, int]
    strata: dict[str, dict[str, int]]
    duplicate_groups: int
    locked_fields: list[str]
    dev_sha256: str
    """`dev_digest` of the dev split: whether the dev file still holds the questions it had."""
    test_samples: dict[str, SampleHash]


class LockError(ValueError):
    """A lock file that cannot be read; the message starts with the file's name."""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def sample_hash(sample: Sample, fields: Iterable[str] = LOCKED_FIELDS) -> SampleHash:
    """The hash of ``sample``'s id and ``fields`` together, and a short hash of each field."""
    data = sample.model_dump(mode="json")
    locked = {name: data.get(name) for name in fields}
    return SampleHash(
        sha256=hashlib.sha256(_canonical({"id": sample.id, **locked})).hexdigest(),
        fields={
            name: hashlib.sha256(_canonical(value)).hexdigest()[:_FIELD_HASH_LENGTH]
            for name, value in locked.items()
        },
    )


def dev_digest(samples: Iterable[Sample]) -> str:
    """sha256 over the (id, question) pairs of a split, sorted: independent of line order."""
    pairs = sorted((s.id, s.question) for s in samples)
    return hashlib.sha256(_canonical(pairs)).hexdigest()


def _ragbridge_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ragbridge")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


def make_lock(
    split: Split,
    *,
    source: str,
    dev_file: str,
    test_file: str,
    near_duplicate: float,
    created_at: datetime | None = None,
) -> SplitLock:
    """The lock of ``split``, whose halves are written to ``dev_file`` and ``test_file``."""
    when = created_at or datetime.now(timezone.utc)
    return SplitLock(
        ragbridge_version=_ragbridge_version(),
        created_at=when.isoformat(timespec="seconds"),
        source=source,
        dev_file=dev_file,
        test_file=test_file,
        seed=split.seed,
        dev_share=split.dev_share,
        near_duplicate=near_duplicate,
        sizes={"dev": len(split.dev), "test": len(split.test)},
        strata=split.counts(),
        duplicate_groups=len(split.duplicate_groups),
        locked_fields=list(LOCKED_FIELDS),
        dev_sha256=dev_digest(split.dev),
        test_samples={s.id: sample_hash(s) for s in split.test},
    )


def lock_text(lock: SplitLock) -> str:
    """The lock as JSON: the header fields indented, then one test sample per line."""
    data = lock.model_dump(mode="json")
    samples = data.pop("test_samples")
    head = json.dumps(data, indent=2, ensure_ascii=False)
    rows = ",\n".join(
        f"    {json.dumps(sid, ensure_ascii=False)}: {json.dumps(entry, ensure_ascii=False)}"
        for sid, entry in samples.items()
    )
    body = f"{{\n{rows}\n  }}" if rows else "{}"
    return f'{head.removesuffix("}").rstrip()},\n  "test_samples": {body}\n}}\n'


def write_lock(lock: SplitLock, path: str | os.PathLike[str]) -> None:
    """Write the lock atomically (a crash never leaves half a lock)."""
    write_text_atomic(path, lock_text(lock))


def read_lock(path: str | os.PathLike[str]) -> SplitLock:
    """Read a lock file; anything else (or a lock of a newer format) raises `LockError`."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise LockError(f"{source}: not UTF-8 text; is it a split lock?") from None
    except json.JSONDecodeError as exc:
        raise LockError(f"{source}: not a split lock (invalid JSON: {exc.msg})") from None
    if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT:
        raise LockError(f'{source}: not a ragbridge split lock (no "format": "{LOCK_FORMAT}")')
    version = data.get("version")
    if version != LOCK_VERSION:
        raise LockError(
            f"{source}: split lock format version {version!r}; this ragbridge reads version "
            f"{LOCK_VERSION} (upgrade ragbridge to read a newer lock)"
        )
    try:
        return SplitLock.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "<lock>"
        raise LockError(f"{source}: damaged split lock: {where}: {err['msg']}") from None


# --------------------------------------------------------------------------- checking

FindingKind = Literal["edited", "added", "removed", "renamed"]


@dataclass(frozen=True)
class LockFinding:
    """One difference from the lock. ``fields`` names the locked fields an edit changed;
    ``previous_id`` the id a renamed sample had (same locked content, new id)."""

    kind: FindingKind
    sample_id: str
    fields: tuple[str, ...] = ()
    previous_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.sample_id}
        if self.fields:
            out["fields"] = list(self.fields)
        if self.previous_id is not None:
            out["previous_id"] = self.previous_id
        return out


@dataclass(frozen=True)
class LockCheck:
    """What `check_against_lock` found: the differences, in file order (removed ones in the
    lock's order), and how many samples were read."""

    findings: tuple[LockFinding, ...]
    checked: int
    locked: int

    @property
    def ok(self) -> bool:
        return not self.findings

    def of(self, kind: FindingKind) -> list[LockFinding]:
        return [f for f in self.findings if f.kind == kind]


def check_against_lock(samples: Iterable[Sample], lock: SplitLock) -> LockCheck:
    """Compare ``samples`` (streamed once) with the test split ``lock`` recorded."""
    fields = tuple(lock.locked_fields)
    edited: list[LockFinding] = []
    added: list[tuple[str, SampleHash]] = []
    seen: set[str] = set()
    checked = 0
    for sample in samples:
        checked += 1
        seen.add(sample.id)
        now = sample_hash(sample, fields)
        then = lock.test_samples.get(sample.id)
        if then is None:
            added.append((sample.id, now))
        elif now.sha256 != then.sha256:
            changed = tuple(f for f in fields if now.fields.get(f) != then.fields.get(f))
            edited.append(LockFinding("edited", sample.id, changed))
    removed = [sid for sid in lock.test_samples if sid not in seen]
    # Same locked content under a new id: a rename, said as one, not as a removal and an addition.
    by_content: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for sid in removed:
        by_content.setdefault(tuple(sorted(lock.test_samples[sid].fields.items())), []).append(sid)
    renamed: list[LockFinding] = []
    still_added: list[LockFinding] = []
    for sid, now in added:
        olds = by_content.get(tuple(sorted(now.fields.items())))
        if olds:
            old = olds.pop(0)
            removed.remove(old)
            renamed.append(LockFinding("renamed", sid, previous_id=old))
        else:
            still_added.append(LockFinding("added", sid))
    findings = (*edited, *still_added, *(LockFinding("removed", sid) for sid in removed), *renamed)
    return LockCheck(findings=tuple(findings), checked=checked, locked=len(lock.test_samples))
