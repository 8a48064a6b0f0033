"""``ragbridge serve``: the read-only web explorer of a results store.

::

    ragbridge serve runs.sqlite                       # http://127.0.0.1:8765/, this machine only
    ragbridge serve postgresql://ci@db/evals --host 0.0.0.0 --token "$TOKEN"

STORE is what ``--history`` takes: an SQLite file (it must exist: serving never creates one) or
a store URL. The server binds 127.0.0.1 unless ``--host`` says otherwise, and any other address
needs an access token (``--token`` or ``RAGBRIDGE_SERVE_TOKEN``; the environment keeps it out
of the process list): the runs of a team's store are not for whoever reaches the port. Exit
codes: 0 stopped, 2 a bad store, host or missing extra.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from typing import Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import whole_number
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError

__all__ = ["TOKEN_VARIABLE", "is_loopback", "register"]

TOKEN_VARIABLE = "RAGBRIDGE_SERVE_TOKEN"
DEFAULT_PORT = 8765

_port = whole_number(lambda n: 0 <= n <= 65535, "must be a port number (0-65535), got {value}")


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "serve",
        "Serve a results store (ragbridge ... --history STORE) as a read-only web app: runs by "
        "branch, commit and time; a run's summary and sample table; a sample's cells; two runs "
        "side by side (paired differences, CIs and p-values of ragbridge's compare); trends "
        "with the run that changed a metric marked; production requests and alerts. Binds "
        "127.0.0.1 by default; any other --host needs --token. Exit codes: 0 stopped, 2 a bad "
        "store, host or missing extra (pip install '.[serve]').",
    )
    parser.add_argument("store", metavar="STORE", help="an SQLite store file or a store URL")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--token",
        metavar="T",
        help=f"access token every request must carry (default: ${TOKEN_VARIABLE}); required "
        "for a --host other than loopback",
    )
    parser.set_defaults(handler=run_serve)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_serve(args: argparse.Namespace) -> int:
    from ragbridge.adapters._extras import require
    from ragbridge.core.cache.backend import redact_url

    token = args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE) or None
    if token is not None and not token.strip():
        raise UserError("--token must not be empty")
    if not is_loopback(args.host) and token is None:
        raise UserError(
            f"--host {args.host} serves the store beyond this machine: give an access token "
            f"(--token T or ${TOKEN_VARIABLE}), or keep the default --host 127.0.0.1"
        )
    uvicorn = require("uvicorn", extra="serve", what="ragbridge serve")
    from ragbridge.adapters.serve import ServeError, create_app

    shown = redact_url(args.store)
    try:
        app = create_app(args.store, token=token)
    except ServeError as exc:
        raise UserError(str(exc)) from None
    where = f"[{args.host}]" if ":" in args.host else args.host
    how = " (send the token as a bearer header, or open the address once with ?token=)"
    console.say(f"serving {shown} (read-only) at http://{where}:{args.port}/{how if token else ''}")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return EXIT_OK
