"""What the adapters that run a model on this machine share: load it once, queue calls per loop.

`LocalEmbedder`, `NLIModel` and `BertScore` hold weights that take seconds and hundreds of MB to
load, and a run asks for them from many tasks at once. So:

* **Loaded once, on first use.** The first caller builds the model under a lock; callers that
  arrive meanwhile wait for it and share it instead of loading a second copy.
* **One queue per event loop.** Work runs in a worker thread (``asyncio.to_thread``) so the loop
  keeps serving judge calls; callers wait on an asyncio lock, holding no thread while they wait.
  An asyncio lock belongs to one loop, and one model may serve several (a Dask worker's loop,
  each ``asyncio.run`` of a script), so each loop gets its own.

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LoadedOnce"]

_T = TypeVar("_T")
_A = TypeVar("_A")
_R = TypeVar("_R")


class LoadedOnce(Generic[_T]):
    """The model ``build()`` returns, built by the first `get` (see the module docstring)."""

    def __init__(self, build: Callable[[], _T]) -> None:
        self._build = build
        self._value: _T | None = None
        self._lock = threading.Lock()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._value is not None

    def get(self) -> _T:
        """The model; the first caller builds it, the others wait. A failed build is raised to
        its caller and tried again by the next one."""
        value = self._value
        if value is not None:
            return value
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    async def in_thread(self, work: Callable[[_A], _R], argument: _A) -> _R:
        """``work(argument)`` in a worker thread, after the calls queued before it on this loop."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = asyncio.Lock()
        async with queue:
            return await asyncio.to_thread(work, argument)
