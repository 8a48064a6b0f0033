"""The errors of reading criteria files and their locks.

They live apart from `ragbridge.core.criteria.files` (which reads a file and applies its lock)
and `ragbridge.core.criteria.lock` (which reads and writes locks), because both raise them:
here, the lock raises `CriteriaFileError` for a lock it cannot read without importing the file
reader, which imports the lock (the core's imports run one way).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

__all__ = ["CriteriaFileError", "StaleStepsError"]


class CriteriaFileError(ValueError):
    """A criteria file (or its lock) that cannot be used, located:
    ``FILE:LINE: criteria[i].field: problem``."""

    def __init__(self, path: Path, line: int | None, where: str, problem: str) -> None:
        at = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{at}: {where}: {problem}" if where else f"{at}: {problem}")
        self.path = path
        self.line = line
        self.where = where
        self.problem = problem


class StaleStepsError(ValueError):
    """Frozen steps whose criterion was edited since they were frozen. ``names`` are the
    criteria, ``path`` the criteria file, ``lock`` its lock."""

    def __init__(
        self,
        names: Sequence[str],
        path: Path,
        lock: Path,
        *,
        in_file: Collection[str] = (),
    ) -> None:
        self.names = list(names)
        self.path = path
        self.lock = lock
        where = f"frozen in {path}" if set(self.names) <= set(in_file) else f"in {lock}"
        listed = ", ".join(repr(n) for n in self.names)
        noun = "criterion" if len(self.names) == 1 else "criteria"
        super().__init__(
            f"{path}: the steps of {noun} {listed} ({where}) were frozen for an earlier version "
            f"of the criterion: its steps are stale. Freeze them again with "
            f"`ragbridge criteria freeze {path}` (or delete the entry to have steps written "
            f"each run)"
        )
