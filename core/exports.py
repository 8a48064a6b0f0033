"""Lazy exports for a package's ``__init__``: names resolve on first use (PEP 562).

Why: ``import ragbridge.core`` must stay cheap (a few milliseconds), and a program should pay for
pydantic, numpy or SQLite only when it touches a name that needs them. Each package that exports
names from its modules builds its ``__getattr__`` and ``__dir__`` here instead of carrying its own
copy of the same dozen lines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A ``(__getattr__, __dir__)`` pair for ``package`` that imports each name from its module.

    ``exports`` maps a public name to the module (relative to ``package``) that defines it;
    ``namespace`` is the package's ``globals()``, where a resolved name is kept so the module is
    looked up once. An unknown name raises the AttributeError Python itself would.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        source = importlib.import_module(f".{module}", package)
        value = getattr(source, name)
        # A name the module serves through its own __getattr__ (a deprecated alias that warns) is
        # not kept: it is looked up again on each use, so each use warns.
        if name in vars(source):
            namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *exports])

    return __getattr__, __dir__
