"""The held-out check of one eval file: its lock, and leaks into dev and prompt files.

`check_file` runs both checks and returns a `HeldoutReport`; its `to_metadata` is what a run
stores as ``metadata["heldout"]`` (so it travels in the results file's header), and
`problem_lines` / `ok_line` turn that stored dict back into one-line messages. Working from the
stored dict is deliberate: ``ragbridge gate`` reads a results file written days earlier, and
must say the same thing ``eval`` said then.

File names (`split_paths`, `lock_path_for`): splitting ``DATA.jsonl`` writes
``DATA.dev.jsonl``, ``DATA.test.jsonl`` and ``DATA.test.lock.json``; the lock of any file
``X.jsonl`` is found as its sibling ``X.lock.json``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sample import Sample, load_samples
from .leaks import NEAR_DUPLICATE, Leak, find_leaks, read_prompt_file
from .lock import FindingKind, LockCheck, SplitLock, check_against_lock, dev_digest, read_lock

__all__ = [
    "LISTED",
    "SHOWN",
    "HeldoutReport",
    "check_file",
    "lock_path_for",
    "note_lines",
    "ok_line",
    "problem_lines",
    "split_paths",
    "summary",
]

LISTED = 50
"""Ids kept per kind of finding in the metadata (the counts are always complete)."""
SHOWN = 5
"""Ids named per kind of finding in a one-line message."""

StrPath = str | os.PathLike[str]
_KINDS: tuple[FindingKind, ...] = ("edited", "added", "removed", "renamed")


def _stem(path: Path) -> str:
    return path.name.removesuffix(".jsonl") if path.name.endswith(".jsonl") else path.name


def lock_path_for(data: StrPath) -> Path:
    """Where the lock of ``data`` lives: ``X.jsonl`` → ``X.lock.json`` in the same folder."""
    path = Path(data)
    return path.with_name(f"{_stem(path)}.lock.json")


def split_paths(source: StrPath, out_dir: StrPath | None = None) -> tuple[Path, Path, Path]:
    """The dev file, the test file and the test file's lock that splitting ``source`` writes."""
    path = Path(source)
    folder = Path(out_dir) if out_dir is not None else path.parent
    stem = _stem(path)
    test = folder / f"{stem}.test.jsonl"
    return folder / f"{stem}.dev.jsonl", test, lock_path_for(test)


@dataclass
class HeldoutReport:
    """Both checks of one file. ``lock`` is None when the file has no lock (then only the
    prompt files were checked); ``dev_state`` says whether the lock's dev file was read."""

    data: str
    lock_file: str | None = None
    lock: SplitLock | None = None
    lock_sha256: str | None = None
    lock_check: LockCheck | None = None
    dev_file: str | None = None
    dev_state: str | None = None
    """``checked``, ``changed`` (its questions differ from the lock's record; checked as it is
    now) or ``missing`` (not checked)."""
    prompt_files: list[str] = field(default_factory=list)
    near_duplicate: float = NEAR_DUPLICATE
    leaks: list[Leak] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.lock_check is None or self.lock_check.ok) and not self.leaks

    def to_metadata(self) -> dict[str, Any]:
        """The JSON-ready record a results header carries (lists capped at `LISTED`)."""
        meta: dict[str, Any] = {"data": self.data, "ok": self.ok, "lock": self.lock_file}
        counts: dict[str, int] = {}
        if self.lock is not None and self.lock_check is not None:
            meta.update(
                lock_sha256=self.lock_sha256,
                seed=self.lock.seed,
                dev_share=self.lock.dev_share,
                locked=self.lock_check.locked,
                checked=self.lock_check.checked,
            )
            for kind in _KINDS:
                found = self.lock_check.of(kind)
                counts[kind] = len(found)
                meta[kind] = [f.as_dict() for f in found[:LISTED]]
            meta["dev_file"] = self.dev_file
            meta["dev"] = self.dev_state
        dev_leaks = [leak for leak in self.leaks if leak.source == "dev"]
        counts["dev_leaks"] = len(dev_leaks)
        counts["prompt_leaks"] = len(self.leaks) - len(dev_leaks)
        meta["counts"] = counts
        meta["prompt_files"] = list(self.prompt_files)
        meta["near_duplicate"] = self.near_duplicate
        meta["leaks"] = [leak.as_dict() for leak in self.leaks[:LISTED]]
        return meta


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_file(
    data: StrPath,
    *,
    lock: StrPath | None = None,
    prompt_files: Sequence[StrPath] = (),
    near_duplicate: float = NEAR_DUPLICATE,
) -> HeldoutReport:
    """Check ``data`` against ``lock`` (if given) and its test questions against the lock's dev
    file and ``prompt_files``. Raises `LockError` for an unreadable lock, `ValueError` /
    `OSError` for unreadable files; a missing dev file is recorded, not raised (the lock check
    still stands)."""
    report = HeldoutReport(
        data=str(data), prompt_files=[str(p) for p in prompt_files], near_duplicate=near_duplicate
    )
    questions: dict[str, str] = {}

    def read() -> Iterator[Sample]:
        for sample in load_samples(data):
            questions[sample.id] = sample.question
            yield sample

    dev: dict[str, str] | None = None
    if lock is not None:
        lock_path = Path(lock)
        split_lock = read_lock(lock_path)
        report.lock_file = str(lock)
        report.lock = split_lock
        report.lock_sha256 = _digest(lock_path)
        report.lock_check = check_against_lock(read(), split_lock)
        dev_path = lock_path.parent / split_lock.dev_file
        report.dev_file = str(dev_path)
        if dev_path.is_file():
            dev_samples = list(load_samples(dev_path))
            dev = {s.id: s.question for s in dev_samples}
            same = dev_digest(dev_samples) == split_lock.dev_sha256
            report.dev_state = "checked" if same else "changed"
        else:
            report.dev_state = "missing"
    else:
        for _ in read():
            pass
    prompts = [read_prompt_file(p) for p in prompt_files]
    report.leaks = find_leaks(questions, dev, prompts, threshold=near_duplicate)
    return report


# --------------------------------------------------------------------------- messages


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _listed(items: list[str], total: int) -> str:
    shown = ", ".join(items[:SHOWN])
    more = total - min(len(items), SHOWN)
    return f"{shown}, … and {more} more" if more > 0 else shown


def _lock_lines(meta: Mapping[str, Any]) -> list[str]:
    counts = meta.get("counts") or {}
    since = f"since the lock {meta.get('lock')}"
    lines: list[str] = []
    edited = meta.get("edited") or []
    if counts.get("edited"):
        items = [f"{e['id']} ({', '.join(e.get('fields') or ['?'])})" for e in edited]
        n = counts["edited"]
        lines.append(f"{_plural(n, 'test sample')} edited {since}: {_listed(items, n)}")
    for kind in ("added", "removed"):
        n = counts.get(kind, 0)
        if n:
            items = [e["id"] for e in meta.get(kind) or []]
            lines.append(f"{_plural(n, 'test sample')} {kind} {since}: {_listed(items, n)}")
    n = counts.get("renamed", 0)
    if n:
        items = [f"{e.get('previous_id')} → {e['id']}" for e in meta.get("renamed") or []]
        lines.append(f"{_plural(n, 'test sample')} renamed {since}: {_listed(items, n)}")
    return lines


def _leak_item(leak: Mapping[str, Any]) -> str:
    where = f"dev {leak['where']}" if leak["source"] == "dev" else leak["where"]
    if leak["kind"] == "exact":
        return f"{leak['test_id']} (exact: {where})"
    return f"{leak['test_id']} (near duplicate {leak['similarity']:.2f}: {where})"


def _leak_lines(meta: Mapping[str, Any]) -> list[str]:
    leaks: list[Mapping[str, Any]] = meta.get("leaks") or []
    counts = meta.get("counts") or {}
    by_source: dict[str, list[Mapping[str, Any]]] = {}
    for leak in leaks:
        by_source.setdefault(leak["source"], []).append(leak)
    lines: list[str] = []
    dev = by_source.pop("dev", [])
    n_dev = counts.get("dev_leaks", len(dev))
    if n_dev:
        items = [_leak_item(leak) for leak in dev]
        lines.append(
            f"{_plural(n_dev, 'test question')} also in the dev split {meta.get('dev_file')}: "
            f"{_listed(items, n_dev)}"
        )
    listed_prompt = sum(len(v) for v in by_source.values())
    for source, found in by_source.items():
        items = [_leak_item(leak) for leak in found]
        lines.append(
            f"{_plural(len(found), 'test question')} also in the prompt file {source}: "
            f"{_listed(items, len(found))}"
        )
    unlisted = counts.get("prompt_leaks", listed_prompt) - listed_prompt
    if unlisted > 0:
        lines.append(f"{_plural(unlisted, 'more test question')} also in the prompt files")
    return lines


def problem_lines(meta: Mapping[str, Any]) -> list[str]:
    """One line per kind of problem a stored check found: lock differences, then leaks."""
    return [*_lock_lines(meta), *_leak_lines(meta)]


def summary(meta: Mapping[str, Any]) -> str:
    """Every problem of a stored check on one line (for an error that must be one line):
    ``X differs from its split lock L (1 edited: q7 (reference); 1 removed: q3) and 2 of its
    questions leak (dev split D: q4; fewshot.md: q9)``; empty when the check found none."""
    counts = meta.get("counts") or {}
    parts: list[str] = []
    for kind in _KINDS:
        n = counts.get(kind, 0)
        if not n:
            continue
        found = meta.get(kind) or []
        if kind == "edited":
            items = [f"{e['id']} ({', '.join(e.get('fields') or ['?'])})" for e in found]
        elif kind == "renamed":
            items = [f"{e.get('previous_id')} → {e['id']}" for e in found]
        else:
            items = [e["id"] for e in found]
        parts.append(f"{n} {kind}: {_listed(items, n)}")
    out: list[str] = []
    if parts:
        out.append(f"differs from its split lock {meta.get('lock')} ({'; '.join(parts)})")
    leaks: list[Mapping[str, Any]] = meta.get("leaks") or []
    n_leaks = counts.get("dev_leaks", 0) + counts.get("prompt_leaks", 0)
    if n_leaks:
        by_source: dict[str, list[str]] = {}
        for leak in leaks:
            name = (
                f"dev split {meta.get('dev_file')}" if leak["source"] == "dev" else leak["source"]
            )
            by_source.setdefault(name, []).append(leak["test_id"])
        where = "; ".join(f"{name}: {_listed(ids, len(ids))}" for name, ids in by_source.items())
        out.append(
            f"{_plural(n_leaks, 'of its questions leaks', 'of its questions leak')} ({where})"
        )
    return f"{meta.get('data')} {' and '.join(out)}" if out else ""


def note_lines(meta: Mapping[str, Any]) -> list[str]:
    """What the check could not do or found changed without it being a problem."""
    if meta.get("dev") == "missing":
        return [
            f"the dev file {meta.get('dev_file')} named by the lock is missing: the test "
            "questions were not checked against the dev split"
        ]
    if meta.get("dev") == "changed":
        return [
            f"the dev split {meta.get('dev_file')} changed since the lock "
            "(its test-leak check used it as it is now)"
        ]
    return []


def ok_line(meta: Mapping[str, Any]) -> str:
    """The line a clean check prints: what was checked against what."""
    checked: list[str] = []
    if meta.get("dev") in ("checked", "changed"):
        checked.append(f"the dev split {meta.get('dev_file')}")
    checked += [str(p) for p in meta.get("prompt_files") or []]
    leaks = f"no test question found in {' or '.join(checked)}" if checked else ""
    if meta.get("lock"):
        head = (
            f"{meta.get('data')} matches its split lock {meta.get('lock')} "
            f"({_plural(int(meta.get('checked') or 0), 'test sample')})"
        )
        return f"{head}; {leaks}" if leaks else head
    return f"{meta.get('data')}: {leaks}" if leaks else f"{meta.get('data')}: nothing to check"
