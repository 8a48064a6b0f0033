"""Seeds that are the same in every process, for draws a cached answer depends on.

Python's ``hash()`` of a string is salted per process (PYTHONHASHSEED), so a draw seeded by it
would differ between a run and its rerun, and the rerun would miss every cached pipeline answer.
"""

from __future__ import annotations

import hashlib

__all__ = ["stable_seed"]


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from ``parts`` (their ``str``), by sha256: stable across processes."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8", errors="surrogatepass")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")
