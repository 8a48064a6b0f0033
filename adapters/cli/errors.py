"""Exit codes of the ``ragbridge`` command and the error a user can fix.

=====  ===================================================================================
code   meaning
=====  ===================================================================================
0      the work ran and passed
1      the work ran but failed its bar: a requested metric had every non-skipped cell fail,
       or more than ``--max-failed-share`` of them; for ``gate``, a check missed; or a
       file asked for could not be written after calls were paid
2      usage or input error, reported before any judge call was paid (one line)
3      the judge or embedder is unusable: the same permanent error stopped the run early, or
       failed every call it sent however few (one line: cause and fix)
130    interrupted (Ctrl-C)
=====  ===================================================================================

Files asked for with ``--out``/``--report`` are written with whatever was scored, also on 1 and 3.
"""

from __future__ import annotations

__all__ = [
    "EXIT_ABORTED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UserError",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 3
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""
