"""What the command prints, and where: results on stdout, everything about the run on stderr.

stdout carries the summary table, so ``ragbridge eval ... | head -1`` must work: a reader that
closes the pipe early is not an error. `say` swallows the broken pipe, points stdout at the null
device (so Python's flush at exit cannot fail either) and lets the command finish and exit with
its own code; files were written before anything was printed.

stderr carries one-line messages, each starting ``ragbridge:``: ``ragbridge: warning: …`` for a
likely mistake, ``ragbridge: error: …`` for what decides the exit code, ``ragbridge: …`` for a
note about what the command chose for the user.
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["error", "note", "reset", "say", "silence_stdout", "stdout_closed", "warn"]

_closed = False


def reset() -> None:
    """Forget an earlier broken pipe (``main`` may run several times in one process)."""
    global _closed
    _closed = False


def stdout_closed() -> bool:
    """Whether the reader of stdout went away (e.g. ``| head -1``)."""
    return _closed


def silence_stdout() -> None:
    """After a broken pipe: send the rest of stdout to the null device, quietly."""
    global _closed
    _closed = True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stdout (tests): nothing to flush
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def say(*lines: str) -> None:
    """Print ``lines`` on stdout; a closed pipe ends the printing, not the command."""
    if _closed:
        return
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def _stderr(text: str) -> None:
    with contextlib.suppress(BrokenPipeError):  # stderr piped away and closed
        print(text, file=sys.stderr)


def warn(text: str) -> None:
    """``ragbridge: warning: text`` on stderr: a likely input mistake, said out loud."""
    _stderr(f"ragbridge: warning: {text}")


def error(text: str) -> None:
    """``ragbridge: error: text`` on stderr: what made the command fail."""
    _stderr(f"ragbridge: error: {text}")


def note(text: str) -> None:
    """``ragbridge: text`` on stderr: a choice the command made for the user."""
    _stderr(f"ragbridge: {text}")
