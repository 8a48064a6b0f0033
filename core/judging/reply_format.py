"""What one judge request expects of its reply, and the breaker for judges that never manage it.

Two things a weak judge (a 270M model on a laptop) needs from the engine, kept out of
`ragbridge.core.judging.engine` because they are small and self-contained:

* **The reply's size and shape, told to the adapter.** `ReplySpec` carries a completion budget
  (``max_tokens``, sized by the prompt template from what the reply must list: see
  `ragbridge.core.prompts.budget`) and the exact item counts of the reply's aligned lists (one
  verdict per claim). The engine sets `reply_spec` around every attempt of a request, like
  `ragbridge.core.judging.judge.attempt_timeout`; an adapter that can use it (the OpenAI-compatible
  one sends ``max_tokens`` and a grammar with the counts) reads it, and every other `Judge`
  ignores it. So the `Judge` protocol is unchanged, and a budget never enters the cache key: a
  reply that fits its budget is the reply an unbounded call would have given, and one that
  does not fit fails validation and is never cached.
* **A breaker for replies that never fit.** A judge that cannot follow the reply format fails
  every request the same way, slowly: each request is repaired and retried up to
  ``2 * (1 + max_retries)`` times before it gives up, and a local server keeps generating long
  after the client's timeout. `FormatWatch` counts, per task, replies in a row that failed the
  schema or the request's check; ``stop_after`` of them, from at least two requests (one
  impossible sample alone never stops a run), trip the engine's `ReplyBreaker`. Calls not yet
  sent are refused, the runner starts no further samples, and the CLI exits 3 with one line:
  ``judge gemma: 5 of 5 replies to answer.analyze did not follow the reply format ...``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .limits import Breaker

__all__ = ["FormatWatch", "ReplyBreaker", "ReplySpec", "reply_spec", "spec_of"]


@dataclass(frozen=True)
class ReplySpec:
    """What the reply of one request should look like, beyond its schema.

    ``max_tokens``: a completion budget with headroom (None: the adapter's own default).
    ``counts``: top-level list fields that must hold exactly this many items
    (``{"verdicts": 4}`` for four claims), for adapters that can constrain decoding.
    """

    max_tokens: int | None = None
    counts: Mapping[str, int] = field(default_factory=dict)


reply_spec: ContextVar[ReplySpec | None] = ContextVar("ragbridge_reply_spec", default=None)
"""The `ReplySpec` of the request the engine is making now (None: free text, or no engine)."""


def spec_of(validate: Any) -> ReplySpec | None:
    """The spec a request's validator carries (`ragbridge.core.prompts.base.ReplyCheck` has
    ``budget`` and ``counts``); None for validators that carry neither."""
    budget = getattr(validate, "budget", None)
    counts = getattr(validate, "counts", None)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        budget = None
    if not isinstance(counts, Mapping):
        counts = {}
    if budget is None and not counts:
        return None
    return ReplySpec(max_tokens=budget, counts=dict(counts))


@dataclass
class _Task:
    replies: int = 0
    streak: int = 0
    requests: set[object] = field(default_factory=set)
    """The requests of the current streak, held (not their ids, which a later one may reuse)."""


class FormatWatch:
    """Per task, replies in a row that did not fit; the trip line once ``stop_after`` did.

    A reply that fits resets its task's streak; replies of other tasks do not (a judge may
    manage the short task and never the long one). The streak must span two requests or more,
    so that one request the judge cannot answer (it is repaired and retried several times)
    never stops a run on its own.
    """

    def __init__(self, stop_after: int, model: str) -> None:
        if stop_after < 1:
            raise ValueError("stop_after must be >= 1")
        self.stop_after = stop_after
        self.model = model
        self._tasks: dict[str, _Task] = {}

    def note(self, task: str, request: object, problem: str | None) -> str | None:
        """Record one reply of ``task`` (``problem`` None: it fit); the trip line, or None."""
        state = self._tasks.setdefault(task, _Task())
        state.replies += 1
        if problem is None:
            state.streak = 0
            state.requests.clear()
            return None
        state.streak += 1
        state.requests.add(request)
        if state.streak < self.stop_after or len(state.requests) < 2:
            return None
        last = " ".join(problem.split())
        last = last[:120] + ("…" if len(last) > 120 else "")
        return (
            f"judge {self.model}: {state.streak} of {state.replies} replies to {task or 'a task'} "
            f"did not follow the reply format (last: {last}) — use a stronger model"
        )


class ReplyBreaker(Breaker):
    """The engine's `Breaker`, which a `FormatWatch` can also trip (with its own line).

    Everything else is the base class's: the runner sees ``tripped`` and reports ``line``.
    """

    _format_line: str | None = None

    def trip_format(self, line: str) -> None:
        """Stop sending calls: the judge's replies never fit their format."""
        if self.tripped:
            return
        self._format_line = line
        self.tripped = True
        self._wake()  # calls waiting for admission are refused at once

    @property
    def line(self) -> str | None:
        if self.tripped and self._format_line is not None:
            return self._format_line
        return super().line

    def reset(self) -> None:
        self._format_line = None
        super().reset()
