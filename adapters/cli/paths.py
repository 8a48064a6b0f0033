"""Files in and out, checked before the first judge call is paid.

A typo in ``--out`` used to surface after every judge call was made; ``--out`` naming the input
file silently replaced the eval set with results. Every path the command will read or write is
checked up front, each problem as one line naming the flag and the fix. ``--cache`` may also be
a URL of a networked cache (``redis://host:6379/0``): its scheme is checked here, the server is
reached when the run opens it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ragbridge.adapters.cli.errors import UserError

__all__ = ["check_cache", "check_cache_url", "check_distinct", "check_input", "check_output"]

SQLITE_HEADER = b"SQLite format 3\x00"


def check_input(path: str) -> Path:
    """``path`` exists, is a file, is readable and is not empty."""
    source = Path(path)
    if not source.exists():
        raise UserError(f"{path}: no such file")
    if source.is_dir():
        raise UserError(f"{path}: is a folder, not a file")
    try:
        with source.open("rb") as handle:
            first = handle.read(1)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not first:
        raise UserError(f"{path}: the file is empty")
    return source


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(path: str, flag: str, *, inputs: Iterable[Path] = ()) -> Path:
    """``path`` can be written: not a folder, its folder exists and is writable, not an input."""
    target = Path(path)
    if not path.strip():
        raise UserError(f"{flag}: the file name is empty")
    if target.is_dir():
        raise UserError(f"{flag} {path}: is a folder; name a file in it")
    folder = target.parent
    if not folder.exists():
        raise UserError(f"{flag} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: the folder {folder} is not writable")
    for source in inputs:
        if target.exists() and _same_file(target, source):
            raise UserError(
                f"{flag} {path} is the input file: writing it would destroy the input; "
                "choose another file name"
            )
    return target


def check_cache(path: str, *, inputs: Iterable[Path] = ()) -> Path | str:
    """``--cache``: a writable place for an SQLite file, an existing SQLite file, or a URL.

    A URL (``SCHEME://...``) is returned as is when a ``ragbridge.caches`` entry point serves
    its scheme; nothing connects here (the run does, and says so in one line if it cannot).
    """
    from ragbridge.core.cache.backend import is_cache_url  # not at import: it loads numpy

    if is_cache_url(path):
        check_cache_url(path)
        return path
    target = check_output(path, "--cache", inputs=inputs)
    if target.exists():
        try:
            with target.open("rb") as handle:
                head = handle.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise UserError(f"--cache {path}: cannot be read ({exc.strerror or exc})") from None
        if head and head != SQLITE_HEADER:
            raise UserError(
                f"--cache {path}: is not a ragbridge cache (not an SQLite file); "
                "name a new file or an existing cache"
            )
    return target


def check_cache_url(url: str) -> None:
    """A cache URL's scheme is one an installed backend serves (else one line, exit 2)."""
    from ragbridge.core.cache.backend import unknown_scheme

    problem = unknown_scheme(url)
    if problem is not None:
        raise UserError(f"--cache {problem}")


def _is_url(spec: str) -> bool:
    from ragbridge.core.cache.backend import is_cache_url

    return is_cache_url(spec)


def check_distinct(paths: Mapping[str, str | None]) -> None:
    """No two of the flags name the same file (``--out x --report x`` would lose one).

    A cache or store URL is not a file and takes no part.
    """
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        if not path or _is_url(path):
            continue
        key = Path(path).resolve()
        if key in seen:
            raise UserError(f"{seen[key]} and {flag} name the same file {path}; give two files")
        seen[key] = flag
