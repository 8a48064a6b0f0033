"""One provider call and what a failed attempt leads to: the policy both engines share.

The judge engine (`ragbridge.core.judging.engine`) and the embedding engine
(`ragbridge.core.judging.embedding`) send different requests but must retry, time out, back off,
count and stop alike, or a run would treat a 429 from its embedder differently from the same
429 from its judge. So the pieces of that policy live here, once:

* `on_the_wire`: one call holding a slot: counted in flight, bounded by the attempt's timeout
  (`within`), not sent at all when the breaker tripped while it waited (`NotSent`);
* `next_step`: what a failed attempt leads to (retry, unusable, permanent, exhausted), and
  `backoff`: how long to wait before the retry (full jitter, or the provider's ``retry_after``);
* `cause_of`, `exhausted`, `transient_kind`, `with_fix`, `refusal`: what a failure tells the
  breaker and the person reading the Score.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from ..results.evaluation import Failure, FailureKind
from .judge import (
    ConnectionRefused,
    JudgeError,
    JudgeTimeout,
    ProviderUnusable,
    RateLimited,
    ServerError,
    TransientJudgeError,
    attempt_timeout,
)
from .limits import Breaker, Outcome

__all__ = [
    "CallStats",
    "Ending",
    "NotSent",
    "Step",
    "backoff",
    "cause_of",
    "exhausted",
    "gave_up",
    "next_step",
    "on_the_wire",
    "refusal",
    "transient_kind",
    "with_fix",
    "within",
]

V = TypeVar("V")


@dataclass
class CallStats:
    """What an engine counts of its calls (`JudgeEngine.stats`, `EmbeddingEngine.stats`)."""

    in_flight: int = 0
    max_in_flight: int = 0
    calls: int = 0
    cached: int = 0
    retries: int = 0
    failures: int = 0
    refused: int = 0
    stale: int = 0
    """Cache entries that no longer pass validation (re-asked, then replaced)."""


class NotSent(Exception):
    """The breaker tripped while this call waited for a slot: it was not sent."""


def cause_of(exc: JudgeError, timeout: float | None) -> tuple[str, str | None]:
    """The breaker's (cause, hint) of a failure the error class alone describes."""
    if exc.cause is not None:
        return exc.cause, exc.hint
    if isinstance(exc, JudgeTimeout):
        limit = f" within {timeout:g} s" if timeout is not None else ""
        return f"no reply{limit}", "the server is slow or hung: check it, or raise the timeout"
    if isinstance(exc, RateLimited):
        return "429 rate limited", "lower the concurrency, or check the account's rate limits"
    if isinstance(exc, ConnectionRefused):
        return "connection refused", "is the server running?"
    if isinstance(exc, ServerError):
        return f"server error ({type(exc).__name__})", "the provider keeps failing"
    return f"{type(exc).__name__}: {exc}", None


def exhausted(replied: Outcome, attempts: int) -> Outcome:
    """What a call that spent its retry budget on transient errors tells the breaker.

    Every attempt failed (timeouts, 429s, 5xx): after ``stop_after`` such calls in a row, with
    no reply in between, the provider is as good as down (a hung server, an exhausted quota),
    so they count. A call with a single attempt (``max_retries=0``) does not: at a high fault
    rate, single failures line up by chance.
    """
    if replied is Outcome.REPLIED:
        return replied
    return Outcome.UNUSABLE if attempts > 1 else Outcome.NEUTRAL


Step = Literal["retry", "unusable", "permanent", "exhausted"]


def next_step(error: JudgeError, *, refused_once: bool, retries_left: int) -> Step:
    """What a failed attempt leads to: the one retry policy of the judge and embedding engines.

    ``unusable``: the provider cannot be used (a wrong key, an unknown model, no scheme, a
    refused connection that a retry did not cure) — not retried, and counted by the breaker.
    ``permanent``: this request cannot succeed (e.g. a 400), the provider may be fine.
    ``exhausted``: a transient error with no retry left. ``retry``: try again after a backoff.
    """
    if isinstance(error, ProviderUnusable):
        return "unusable"
    if isinstance(error, ConnectionRefused):
        return "unusable" if refused_once or retries_left == 0 else "retry"
    if isinstance(error, TransientJudgeError):
        return "retry" if retries_left else "exhausted"
    return "permanent"


Ending = tuple[Failure, Outcome, str | None, str | None]
"""How a call ends in failure: its typed failure, what it tells the breaker, and the breaker's
cause and hint (None when the failure says nothing about the provider)."""


def gave_up(
    step: Step,
    error: JudgeError,
    *,
    attempts: int,
    replied: Outcome,
    timeout: float | None,
    what: str = "",
    refused: str = "",
) -> Ending:
    """The end of a call whose last attempt failed with ``error`` and a ``step`` other than
    ``retry`` (see `next_step`): the one wording both engines give it.

    ``permanent``: a judge_error that says nothing about the provider. ``unusable``: a
    judge_error ending with the fix, counted by the breaker. ``exhausted``: the transient
    error's kind (timeout, rate_limited, judge_error) with the number of attempts. ``what``
    starts the message (``"embedding failed: "``); ``refused`` follows the error of an unusable
    provider (``" (refused twice)"``).
    """
    if step == "permanent":
        return Failure(kind=FailureKind.JUDGE_ERROR, message=f"{what}{error}"), replied, None, None
    cause, hint = cause_of(error, timeout)
    if step == "unusable":
        message = with_fix(f"{what}{error}{refused}", hint)
        return Failure(kind=FailureKind.JUDGE_ERROR, message=message), Outcome.UNUSABLE, cause, hint
    message = f"{what}{error} (gave up after {attempts} attempts)"
    failure = Failure(kind=transient_kind(error), message=message)
    return failure, exhausted(replied, attempts), cause, hint


async def on_the_wire(
    stats: CallStats,
    breaker: Breaker,
    timeout: float | None,
    start: Callable[[], Awaitable[V]],
    what: str,
) -> V:
    """One provider call, holding a slot already: counted in flight, bounded by ``timeout``.

    ``start`` makes the call only once it is certain to be sent: a call whose breaker tripped
    while it waited for its slot is not sent at all (`NotSent`).
    """
    if breaker.tripped:
        raise NotSent
    stats.in_flight += 1
    stats.calls += 1
    stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
    token = attempt_timeout.set(timeout)
    try:
        return await within(start(), timeout, what)
    finally:
        attempt_timeout.reset(token)
        stats.in_flight -= 1


def with_fix(message: str, hint: str | None) -> str:
    """A failure message that ends with what to do about it (when the error says)."""
    return f"{message} — {hint}" if hint and hint not in message else message


def transient_kind(exc: JudgeError) -> FailureKind:
    """The failure kind of a transient error that used up the retries: a Score says which."""
    if isinstance(exc, JudgeTimeout):
        return FailureKind.TIMEOUT
    if isinstance(exc, RateLimited):
        return FailureKind.RATE_LIMITED
    return FailureKind.JUDGE_ERROR


def refusal(line: str | None, verb: str = "not sent") -> Failure:
    """The failure of a call the tripped breaker stopped, quoting the breaker's one line."""
    return Failure(kind=FailureKind.CANCELLED, message=f"{verb}: {line}")


async def within(call: Awaitable[V], timeout: float | None, what: str) -> V:
    """Await one provider call, bounded by the per-attempt ``timeout`` (None: unbounded)."""
    if timeout is None:
        return await call
    if _HAS_TIMEOUT_SCOPE:
        # Python 3.11+: a deadline on this task, instead of `wait_for`'s extra task and its
        # scheduling per call (measurable at thousands of calls a second).
        try:
            async with asyncio.timeout(timeout):  # type: ignore[attr-defined,unused-ignore]
                return await call
        except TimeoutError:
            raise JudgeTimeout(f"no {what} within {timeout:g} s") from None
    try:
        return await asyncio.wait_for(call, timeout)
    except asyncio.TimeoutError:
        raise JudgeTimeout(f"no {what} within {timeout:g} s") from None


_HAS_TIMEOUT_SCOPE = sys.version_info >= (3, 11)


def backoff(
    rng: random.Random, base: float, ceiling_max: float, attempt: int, error: Exception | None
) -> float:
    """Seconds to wait before retry ``attempt``: the provider's ``retry_after`` when a 429 gave
    one, else a uniform draw below ``base * 2**(attempt - 1)`` (capped at ``ceiling_max``)."""
    if isinstance(error, RateLimited) and error.retry_after is not None:
        return min(ceiling_max, error.retry_after)
    ceiling = min(ceiling_max, base * 2 ** (attempt - 1))
    return rng.uniform(0, ceiling)  # "full jitter": spreads a thundering herd
