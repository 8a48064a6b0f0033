"""``ragbridge serve``: a read-only web explorer of a results store, for a team.

`create_app` builds the Starlette application (install the ``serve`` extra: Starlette and
uvicorn); `ragbridge.adapters.cli.serve_command` runs it on uvicorn. Importing this package
imports no web framework: `create_app` does, and names the extra when it is missing.
"""

from __future__ import annotations

from .app import COOKIE, ServeError, create_app

__all__ = ["COOKIE", "ServeError", "create_app"]
