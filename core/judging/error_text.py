"""An exception as the one line a failed cell carries, also when the exception says nothing.

``f"{type(exc).__name__}: {exc}"`` is the usual form, and for most errors it is right. Some
transport errors carry no message at all: httpx's ``ReadError`` on a reset connection is
``ReadError('')``, and a failed cell then read ``ReadError: `` — no hint of what was being done
or why. The reason is usually further down the exception chain (``ConnectionResetError: [Errno
104] Connection reset by peer``), so `describe_error` names the class, what the caller was
doing, and the first message found below.
"""

from __future__ import annotations

__all__ = ["describe_error"]

_MAX_DEPTH = 8
"""Exceptions followed down a chain at most (chains are short; a cycle must not hang us)."""


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _below(exc: BaseException) -> list[BaseException]:
    """The exceptions ``exc`` was raised from or while handling, nearest first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(found) < _MAX_DEPTH:
        # A suppressed context is followed too: libraries re-raise ``from None`` to shorten
        # tracebacks, and the reason may be all that is left down there.
        nxt = current.__cause__ or current.__context__
        if nxt is None or nxt is exc or nxt in found:
            break
        found.append(nxt)
        current = nxt
    return found


def describe_error(exc: BaseException, doing: str) -> str:
    """``Class: message``, or for an exception without a message, what it interrupted and why.

    ``doing`` says what the caller was doing, as a phrase after "while" ("reading the reply
    from http://host/v1/chat/completions"). An empty ``ReadError`` becomes ``ReadError while
    reading the reply from …: ConnectionResetError: [Errno 104] Connection reset by peer``;
    with nothing below it, just the class and the phrase.
    """
    name = type(exc).__name__
    text = _text(exc)
    if text:
        return f"{name}: {text}"
    said = f"{name} while {doing}"
    reason = next(((type(e).__name__, _text(e)) for e in _below(exc) if _text(e)), None)
    if reason is not None:
        said += f": {reason[0]}: {reason[1]}"
    return said
