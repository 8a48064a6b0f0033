"""Keep Dask's own log lines off stderr during a run; ``verbose`` shows them.

A cluster run is judged by its own lines (what was scored, what was kept, what it cost). Dask's
scheduler, nanny and workers log at WARNING and ERROR for events that are routine in our runs:
a worker restarted by its nanny after a crash (its partition is simply scored again), a lease
released while the cluster shuts down after Ctrl-C, a semaphore closed with leases still out.
Measured before this module, one Ctrl-C on a 2-worker run printed 100 to 160 such lines with 6
to 10 tracebacks, and a run that lost a worker and exited 0 printed two warnings.

`quiet_dask` silences them in this process for the run (and restores the levels after);
`dask_setup` is the worker preload of a ``LocalCluster`` made for the run: the worker processes
are ours, so they are quieted for their whole life, and they ignore SIGINT: a Ctrl-C in a
terminal reaches every process of the group, and a worker that dies of it is restarted by its
nanny mid-shutdown (the tracebacks above); the client stops them in order instead. What Dask
reports that matters (a task that failed, a scheduler that cannot be reached) still reaches the
client as an exception.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["PRELOAD", "SILENT", "dask_setup", "quiet_dask"]

SILENT = logging.CRITICAL + 1
"""A level no record reaches."""

PRELOAD = __name__
"""This module, as a worker preload (``LocalCluster(preload=[PRELOAD])``)."""

_ROOTS = ("distributed", "tornado", "bokeh")


def _loggers() -> list[logging.Logger]:
    """The frameworks' loggers whose level decides what reaches stderr.

    The roots, and every child that has a level of its own (Dask sets one on
    ``distributed.client`` and ``distributed.gc``, a nanny on ``distributed.nanny``): a child's
    own level, not its parent's, decides whether its records are made at all.
    """
    found = [logging.getLogger(name) for name in _ROOTS]
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (
            isinstance(logger, logging.Logger)
            and name.split(".", 1)[0] in _ROOTS
            and logger.level != logging.NOTSET
            and logger not in found
        ):
            found.append(logger)
    return found


@contextlib.contextmanager
def quiet_dask(verbose: bool = False) -> Iterator[None]:
    """Dask's log records and Python warnings are dropped in this process for the block.

    With ``verbose`` nothing changes. The loggers' levels and the warning filters are put
    back on exit, so a program that calls the cluster run keeps its own logging.
    """
    if verbose:
        yield
        return
    loggers = _loggers()
    levels = [(logger, logger.level) for logger in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"distributed(\.|$)")
        for logger in loggers:
            logger.setLevel(SILENT)
        try:
            yield
        finally:
            for logger, level in levels:
                logger.setLevel(level)


def dask_setup(worker: Any) -> None:
    """Worker preload: no Dask log lines, no warnings, and no death by Ctrl-C, for good.

    Runs in the worker process's main thread as the worker starts (a worker restarted after a
    crash runs it again), where a signal handler may be set.
    """
    for logger in _loggers():
        logger.setLevel(SILENT)
    warnings.filterwarnings("ignore", module=r"distributed(\.|$)")
    with contextlib.suppress(ValueError):  # not the main thread: keep Python's handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
