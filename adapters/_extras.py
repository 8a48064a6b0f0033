"""The one optional-import guard: import a framework, or say in one line which extra installs it.

Why one: every adapter imports its framework lazily, and a user who lacks it should read the same
kind of sentence everywhere — what needs the package, which package is missing, and the command
that installs the extra. ragbridge is installed from a clone (it is not on PyPI), so the command
is ``pip install ".[extra]"`` run in that clone, which is what `install_hint` says.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["install_hint", "missing_extra", "require"]


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, as a user of a ragbridge clone runs it."""
    return f'pip install ".[{extra}]" (in your ragbridge clone)'


def missing_extra(
    what: str, package: str, extra: str, cause: BaseException | None = None
) -> ImportError:
    """The ImportError for ``what`` (a module or class) when ``package`` is not importable.

    ``cause``'s own message is kept after the hint: a package that is installed but broken
    (a version conflict, a missing shared library) must not read as "not installed" alone.
    """
    detail = f" ({cause})" if cause is not None and str(cause) else ""
    return ImportError(
        f"{what} needs {package}, which is not installed or failed to import; "
        f"install the {extra} extra: {install_hint(extra)}{detail}"
    )


def require(module: str, *, extra: str, what: str, package: str | None = None) -> ModuleType:
    """``importlib.import_module(module)``, or `missing_extra` naming ``extra`` when it fails.

    ``package`` is the distribution name the user would recognise (``langchain-core`` for
    ``langchain_core``); it defaults to the module's top-level name.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(what, package or module.split(".")[0], extra, exc) from exc
