"""The files a command writes once its calls are paid, and what a file not written does to the
exit code.

By the time ``--out`` or ``--report`` is written the judge calls are spent, so a file that
cannot be written (a full disk, a folder removed meanwhile) must not lose the others or the
summary: each failure becomes one line ``--out PATH: not written: …`` on stderr, said after
the summary, and the exit code says the run did not fully succeed (`Written.settle`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds the parsers without it
    from ragbridge.core.results.evaluation import Evaluation

__all__ = ["Written", "write_failure_code"]


@dataclass
class Written:
    """What a command wrote (``paths``) and a line for each file it could not (``problems``)."""

    paths: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def write(self, flag: str, path: str, make: Callable[[str], object]) -> None:
        """Write ``path`` with ``make(path)``; a failure is a problem line, not an exception."""
        try:
            make(path)
        except (OSError, ValueError) as exc:
            self.problems.append(f"{flag} {path}: not written: {exc}")
        else:
            self.paths.append(path)

    def write_text(self, flag: str, path: str, text: Callable[[], str]) -> None:
        """Write ``text()`` to ``path`` atomically (no half file is left behind); ``text`` is
        made inside the guard, so a report that cannot be made is a problem line too."""
        from ragbridge.core.files import write_text_atomic

        self.write(flag, path, lambda target: write_text_atomic(target, text()))

    def lines(self) -> list[str]:
        """``wrote PATH`` for every file written, for the end of the summary."""
        return [f"wrote {path}" for path in self.paths]

    def settle(self, code: int, failed: int) -> int:
        """Say on stderr each file not written; the exit code is then ``failed``, unless the
        run stopped early (3 says more about it than a missing file)."""
        for problem in self.problems:
            console.error(problem)
        return failed if self.problems and code != EXIT_ABORTED else code


def write_failure_code(evaluation: Evaluation) -> int:
    """The exit code of a run whose results could not all be written (a full disk).

    2 promises that nothing was paid: true only when no judge or embedding call was sent.
    Once calls were paid the run failed (1), its error line says which file was not written,
    and whatever could be written was.
    """
    paid = sum(
        int((evaluation.metadata.get(key) or {}).get("calls") or 0)
        for key in ("judge_stats", "embedding_stats")
    )
    return EXIT_FAILED if paid else EXIT_USAGE
