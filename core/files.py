"""Atomic file writes: a file is either its old self or completely new, never half written.

Results, reports and exported eval sets are written at the end of runs that may have cost money.
A crash, a full disk or an exception midway through a plain ``open(path, "w")`` leaves a truncated
file that looks like a result. Here every write goes to a temporary file in the target's folder
(same file system, so the final ``os.replace`` is atomic) and replaces the target only once the
content is complete; on any failure the temporary file is removed and the old file is untouched.

Temporary files are named ``.<name>.<random>.tmp`` next to the target.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["atomic_path", "atomic_write", "write_text_atomic"]

StrPath = str | os.PathLike[str]


def _mode_for(target: Path) -> int:
    """The permission bits the finished file should get: the old file's, else 0o666 - umask.

    ``mkstemp`` creates files readable by the owner only; a results file should get the same
    permissions a plain ``open(path, "w")`` would have given it.
    """
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_path(path: StrPath) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on a clean exit it replaces ``path``.

    For writers that insist on opening the file themselves (a framework's ``save`` function).
    If the block raises, the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_write(
    path: StrPath, *, encoding: str = "utf-8", newline: str | None = None
) -> Iterator[TextIO]:
    """Open a text file for writing that appears at ``path`` only when the block succeeds."""
    with atomic_path(path) as tmp, tmp.open("w", encoding=encoding, newline=newline) as handle:
        yield handle


def write_text_atomic(path: StrPath, text: str, *, encoding: str = "utf-8") -> None:
    """``Path(path).write_text(text)``, atomically."""
    with atomic_write(path, encoding=encoding) as handle:
        handle.write(text)
