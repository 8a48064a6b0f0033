"""`create_app`: the Starlette application of ``ragbridge serve`` over one results store.

Read-only: every route is a GET; nothing here calls a write of the store. Pages are HTML
rendered on the server (`pages`), and the JSON API under ``/api/`` serves the same data to the
page's script (and to anyone's scripts). Three guards wrap every route:

* **Who may ask.** With a ``token``, a request needs it — as ``Authorization: Bearer T``, or
  once as ``?token=T``, which answers with a redirect to the same URL without it and sets an
  HttpOnly, SameSite=Strict cookie the browser then sends (the token does not stay in the
  address bar or its history). Without a token the app answers only requests addressed to a
  loopback name (``Host: 127.0.0.1``/``localhost``/``[::1]``), so a web page that rebinds its
  DNS name to 127.0.0.1 cannot read the store through the user's browser.
* **What a page may run.** Every response carries a Content-Security-Policy that allows
  scripts and styles from this app only (`pages.CSP`), ``nosniff`` and no framing.
* **What is there.** A run or sample id that names nothing is a 404 page naming it; an SQLite
  file that disappears (or a store that stops answering) is a 503, not a traceback.
"""

from __future__ import annotations

import hmac
import math
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ragbridge.adapters._extras import require
from ragbridge.core.monitoring.store import StoreError
from ragbridge.core.monitoring.store_api import ResultsStore, is_store_url, open_store

from . import pages
from .data import MAX_PAGE, STATUSES, StoreView, TableQuery, UnknownRun, query_table, sample_detail
from .static import CSS, JS

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "LOOPBACK_HOSTS", "SECURITY_HEADERS", "ServeError", "create_app"]

COOKIE = "ragbridge_token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SECURITY_HEADERS = (
    ("content-security-policy", pages.CSP),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
)


class ServeError(RuntimeError):
    """The store cannot be served: no such file, not a store, or a store of a newer schema."""


class _BadQuery(ValueError):
    """A query parameter that cannot be read: a 400 naming it."""


def _starlette() -> None:
    require("starlette", extra="serve", what="ragbridge serve")


def _host(scope: Scope) -> str:
    for key, value in scope.get("headers", []):
        if key == b"host":
            text = bytes(value).decode("latin-1").strip().lower()
            if text.startswith("["):  # [::1]:8765
                return text[1 : text.find("]")] if "]" in text else text
            return text.rsplit(":", 1)[0] if text.count(":") == 1 else text
    return ""


class _Guard:
    """The pure ASGI middleware of the module docstring: host, token, security headers."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])]
                names = {k.decode("latin-1").lower() for k, _ in headers}
                for name, value in SECURITY_HEADERS:
                    if name not in names:
                        headers.append((name.encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, sending)
            return
        await self.app(scope, receive, sending)

    def _refusal(self, scope: Scope) -> Response | None:
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, RedirectResponse

        if self.hosts is not None and _host(scope) not in self.hosts:
            return HTMLResponse(
                pages.page(
                    "Not served to this host",
                    pages.error_body(
                        "This server answers requests to 127.0.0.1 or localhost only; start "
                        "it with --host and --token to serve other hosts."
                    ),
                    store="",
                ),
                status_code=421,
            )
        if self.token is None:
            return None
        request = Request(scope)
        given = request.headers.get("authorization", "")
        if given.lower().startswith("bearer ") and _same(given[7:].strip(), self.token):
            return None
        if _same(request.cookies.get(COOKIE, ""), self.token):
            return None
        offered = request.query_params.get("token")
        if offered is not None and _same(offered, self.token):
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(
                COOKIE, self.token, httponly=True, samesite="strict", path="/",
                secure=request.url.scheme == "https",
            )  # fmt: skip
            return response
        return HTMLResponse(
            pages.page(
                "Token required",
                pages.error_body(
                    "This store is served with an access token: send it as a bearer token, or open "
                    "the address once with ?token=..."
                ),
                store="",
            ),
            status_code=401,
            headers={"www-authenticate": "Bearer"},
        )


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _number(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise _BadQuery(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise _BadQuery(f"{name} must be a finite number, got {raw!r}")
    return value


def _whole(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadQuery(f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise _BadQuery(f"{name} must lie within [{low}, {high}], got {value}")
    return value


def _table_query(request: Request) -> TableQuery:
    status = request.query_params.get("status", "all") or "all"
    if status not in STATUSES:
        raise _BadQuery(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    return TableQuery(
        sort=request.query_params.get("sort", "id") or "id",
        desc=request.query_params.get("desc", "") in ("1", "true", "on"),
        q=request.query_params.get("q", ""),
        status=status,
        metric=request.query_params.get("metric") or None,
        low=_number(request, "low"),
        high=_number(request, "high"),
        offset=_whole(request, "offset", 0, 0, 10**12),
        limit=_whole(request, "limit", 50, 1, MAX_PAGE),
    )


def create_app(
    store_spec: str | os.PathLike[str] | ResultsStore,
    *,
    token: str | None = None,
    hosts: Sequence[str] | None = None,
) -> Starlette:
    """The app serving ``store_spec`` (an SQLite path, a ``SCHEME://`` URL or an open store).

    ``token``: required of every request (see the module docstring); an empty token is refused.
    ``hosts``: the Host names answered; default loopback names without a token, any with one.
    A path that is no file raises `ServeError` here, before anything is served.
    """
    _starlette()
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    if token is not None and not token.strip():
        raise ValueError("the access token must not be empty")
    path: Path | None = None
    if isinstance(store_spec, str | os.PathLike) and not is_store_url(store_spec):
        path = Path(store_spec)
        if not path.is_file():
            raise ServeError(f"no results store at {path}: the file does not exist")
    try:
        store = open_store(store_spec)
    except (StoreError, sqlite3.Error) as exc:
        raise ServeError(str(exc)) from None
    view = StoreView(store)
    location = store.location
    allowed = frozenset(h.lower() for h in hosts) if hosts is not None else None
    if allowed is None and token is None:
        allowed = LOOPBACK_HOSTS

    def html(title: str, body: Sequence[str], status: int = 200) -> Response:
        return HTMLResponse(pages.page(title, body, store=location), status_code=status)

    def guarded(
        render: Callable[[Request], Response], *, api: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        from starlette.concurrency import run_in_threadpool

        def problem(status: int, title: str, message: str) -> Response:
            if api:
                return JSONResponse({"error": message}, status_code=status)
            return html(title, pages.error_body(message), status)

        def call(request: Request) -> Response:
            if path is not None and not path.is_file():
                return problem(503, "Store unavailable", f"the results store {path} is gone")
            try:
                return render(request)
            except UnknownRun as exc:
                text = str(exc)
                where = "" if location in text else f" in {location}"
                return problem(404, "Not found", f"{text}{where}")
            except _BadQuery as exc:
                return problem(400, "Bad request", str(exc))
            except (StoreError, sqlite3.Error, OSError) as exc:
                return problem(503, "Store unavailable", f"the results store failed: {exc}")

        async def endpoint(request: Request) -> Response:
            return await run_in_threadpool(call, request)

        return endpoint

    def p(request: Request, name: str) -> str | None:
        return request.query_params.get(name) or None

    # -- pages ----------------------------------------------------------------------------

    def runs_page(request: Request) -> Response:
        every = view.runs()
        branch, source = p(request, "branch"), p(request, "source")
        shown = view.runs(branch=branch, source=source) if branch or source else every
        return html("Runs", pages.runs_body(shown, every, branch=branch, source=source))

    def run_page(request: Request) -> Response:
        table = view.table(request.query_params.get("id", ""))
        query = _table_query(request)
        result = query_table(table, query)
        run = table.run
        previous = view.previous(run)
        return html(f"Run {run.run_id[:16]}", pages.run_body(table, result, query, previous))

    def sample_page(request: Request) -> Response:
        detail = _detail(request)
        table = view.table(detail["run"])
        return html(f"Sample {detail['id'][:40]}", pages.sample_body(table.run, detail))

    def _detail(request: Request) -> dict[str, Any]:
        table = view.table(request.query_params.get("run", ""))
        before = view.previous(table.run)
        previous = view.table(before.run_id) if before is not None else None
        sample_id = request.query_params.get("id", "")
        table.row(sample_id)  # an unknown sample is a 404 before the store is asked
        record = view.sample_record(table.run.run_id, sample_id)
        return sample_detail(table, sample_id, previous, record)

    def compare_page(request: Request) -> Response:
        runs = view.runs()
        a, b = p(request, "a"), p(request, "b")
        if a is None and b is None:
            a = runs[1].run_id if len(runs) > 1 else None
            b = runs[0].run_id if runs else None
            return html("Compare two runs", pages.compare_body(runs, None, a, b))
        result = view.compare(a or "", b or "")
        return html("Compare two runs", pages.compare_body(runs, result, result["a"], result["b"]))

    def trends_page(request: Request) -> Response:
        source = p(request, "source")
        sources = sorted({r.source for r in view.store.runs() if r.source})
        return html("Trends", pages.trends_body(view.trends(source), sources, source))

    def production_page(request: Request) -> Response:
        days = _number(request, "days")
        data = view.production(days=7.0 if days is None else max(0.0, days))
        return html("Production", pages.production_body(data))

    # -- JSON -----------------------------------------------------------------------------

    def api_runs(request: Request) -> Response:
        runs = view.runs(branch=p(request, "branch"), source=p(request, "source"))
        return JSONResponse([r.model_dump(mode="json") for r in runs])

    def api_run(request: Request) -> Response:
        return JSONResponse(view.run(request.query_params.get("id", "")).model_dump(mode="json"))

    def api_samples(request: Request) -> Response:
        table = view.table(request.query_params.get("run", ""))
        return JSONResponse(query_table(table, _table_query(request)))

    def api_sample(request: Request) -> Response:
        return JSONResponse(_detail(request))

    def api_compare(request: Request) -> Response:
        return JSONResponse(view.compare(p(request, "a") or "", p(request, "b") or ""))

    def api_trends(request: Request) -> Response:
        return JSONResponse(view.trends(p(request, "source")))

    def api_production(request: Request) -> Response:
        days = _number(request, "days")
        return JSONResponse(view.production(days=7.0 if days is None else max(0.0, days)))

    async def script(request: Request) -> Response:
        return Response(JS, media_type="text/javascript")

    async def style(request: Request) -> Response:
        return Response(CSS, media_type="text/css")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # browsers ask; a 404 would be logged as an error

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        message = f"nothing at {request.url.path}" if status == 404 else str(exc)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return html("Not found" if status == 404 else "Not allowed", pages.error_body(message),
                    status)  # fmt: skip

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            store.close()

    routes = [
        Route("/", guarded(runs_page), methods=["GET"]),
        Route("/run", guarded(run_page), methods=["GET"]),
        Route("/sample", guarded(sample_page), methods=["GET"]),
        Route("/compare", guarded(compare_page), methods=["GET"]),
        Route("/trends", guarded(trends_page), methods=["GET"]),
        Route("/production", guarded(production_page), methods=["GET"]),
        Route("/api/runs", guarded(api_runs, api=True), methods=["GET"]),
        Route("/api/run", guarded(api_run, api=True), methods=["GET"]),
        Route("/api/samples", guarded(api_samples, api=True), methods=["GET"]),
        Route("/api/sample", guarded(api_sample, api=True), methods=["GET"]),
        Route("/api/compare", guarded(api_compare, api=True), methods=["GET"]),
        Route("/api/trends", guarded(api_trends, api=True), methods=["GET"]),
        Route("/api/production", guarded(api_production, api=True), methods=["GET"]),
        Route("/static/serve.js", script, methods=["GET"]),
        Route("/static/serve.css", style, methods=["GET"]),
        Route("/favicon.ico", no_icon, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(_Guard, token=token, hosts=allowed)],
        exception_handlers={404: not_found, 405: not_found},
        lifespan=lifespan,
    )
    app.state.view = view
    return app
