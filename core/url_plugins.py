"""Things a user names by URL, served by whichever installed package claims the URL's scheme.

Three kinds of shared state live on a server: the judge cache (``ragbridge.caches``:
``redis://``), the results store (``ragbridge.stores``: ``postgresql://``) and the rate ledger
(``ragbridge.rate_ledgers``: ``redis://``, ``dask://``). The core names none of their clients:
a spec that looks like ``SCHEME://...`` is handed to the entry point of that scheme in the
kind's group, so a new backend is a package with an entry point, and the core imports no
database driver. The lookup, and the one-line refusal of an unknown scheme, are the same for
every kind, so they live here once.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from typing import Any

__all__ = ["entry_point_for", "is_url", "redact_url", "scheme_of", "schemes", "unknown_scheme"]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(spec: object) -> bool:
    """Whether ``spec`` is a ``SCHEME://...`` string rather than a file's path."""
    return isinstance(spec, str) and _URL.match(spec) is not None


def scheme_of(spec: str | os.PathLike[str]) -> str | None:
    """The lower-cased scheme of a ``SCHEME://...`` spec; None for a path."""
    match = _URL.match(spec) if isinstance(spec, str) else None
    return None if match is None else match.group(1).lower()


def schemes(group: str) -> list[str]:
    """The URL schemes the installed entry points of ``group`` serve, sorted."""
    return sorted({ep.name.lower() for ep in metadata.entry_points(group=group)})


def unknown_scheme(group: str, url: str, *, label: str, noun: str, hint: str = "") -> str | None:
    """Why no entry point of ``group`` serves ``url`` — one line, the URL without its password,
    naming the known schemes: ``"{label} {url}: no {noun} for x:// (known: a://, b://){hint}"`` —
    or None when one does. Loads and connects nothing."""
    scheme = scheme_of(url)
    if scheme is None:
        return f"{label} {redact_url(url)} is not a URL (SCHEME://...)"
    known = schemes(group)
    if scheme in known:
        return None
    listed = ", ".join(f"{name}://" for name in known) or "none installed"
    return f"{label} {redact_url(url)}: no {noun} for {scheme}:// (known: {listed}){hint}"


def entry_point_for(group: str, url: str, *, label: str, noun: str, hint: str = "") -> Any:
    """The loaded entry point of ``group`` that serves ``url``'s scheme (the opener a backend
    registered); ValueError with `unknown_scheme`'s line when none does. A known scheme whose
    package lacks its extra raises that package's ImportError, which names the extra."""
    why = unknown_scheme(group, url, label=label, noun=noun, hint=hint)
    if why is not None:
        raise ValueError(why)
    scheme = scheme_of(url)
    found = {ep.name.lower(): ep for ep in metadata.entry_points(group=group)}
    return found[str(scheme)].load()


def redact_url(url: str) -> str:
    """``url`` without a password, for messages, logs and a backend's ``location``.

    Both places a URL can carry one are masked: the user-info part (``//user:secret@host``)
    and a ``password=`` query parameter (which redis-py, for one, accepts).
    """
    url = re.sub(r"//([^/@:]*):[^/?#]*@", r"//\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)
