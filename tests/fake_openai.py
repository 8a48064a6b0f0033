"""A real OpenAI-compatible HTTP server on 127.0.0.1, scripted per route, for failure tests.

`httpx.MockTransport` tests the adapter's parsing; this server tests what only a socket shows:
a client timeout against a server that hangs, a connection reset mid-request, a 429 whose
``Retry-After`` must be honoured, a CLI run in a subprocess against a dead key. It listens on a
free port, answers each request on its own thread, and records every request it saw.

Routes: ``/v1/chat/completions`` (``"chat"``) and ``/v1/embeddings`` (``"embeddings"``). Each
route follows a script of modes, one per request, the last repeating (`FakeOpenAI.script`):

``ok``         a right answer: for chat, ``answer(messages)`` if given, else the minimal reply
               that fits the ragbridge prompt (`ragbridge.core.testing.minimal_reply`); for
               embeddings, a deterministic vector per input (`HashEmbedder`'s)
``401``        ``Incorrect API key provided`` (OpenAI's body)
``404``        ``The model `…` does not exist`` (OpenAI's unknown-model body)
``500``        an internal server error
``429``        rate limited, with ``Retry-After: <retry_after>`` seconds
``hang``       sleeps ``hang_seconds`` before answering (past any client timeout); released at
               once by `close`, so teardown never waits for it
``reset``      reads the request, then closes the socket with a TCP reset (no response)
``garbage``    HTTP 200 with a body that is not JSON
``truncated``  HTTP 200 with the first half of a valid JSON reply
``wrong``      HTTP 200, valid JSON, wrong for the request: chat replies that parse but do not
               fit the prompt (`ragbridge.core.testing.wrong_reply`: one verdict too many, a
               context number that does not exist); embeddings one vector short

``formats`` makes the chat route speak one server's dialect of ``response_format``: the kinds
it accepts among ``json_schema`` (OpenAI's strict form), ``json_object_schema`` (llama-cpp-
python's ``{"type": "json_object", "schema": ...}``) and ``json_object`` (JSON mode); a request
asking for another is refused before its mode is taken, with ``refuse="llamacpp"`` as
llama-cpp-python's server does (HTTP 500, a pydantic validation error in the body) or with
``refuse="400"`` (a 400 naming ``response_format``). None (the default) accepts anything.

Log-probabilities: a chat request with ``"logprobs": true`` gets ``choices[0].logprobs.content``
as OpenAI sends it, each token with its ``top_logprobs`` (at most the request's ``top_logprobs``).
``logprobs`` scripts them: one token list per reply that asks (the last repeats), or a function
of the messages giving one; a token is ``"text"``, ``("text", logprob)`` or ``("text", logprob,
{alternative: logprob, ...})`` (alternatives best first), and the reply's content is then the
tokens' text joined. Without a script the content is cut into words, spaces and signs, each at
`DEFAULT_LOGPROB` with made-up alternatives. ``refuse_logprobs=True`` answers any request asking
for them with OpenAI's 400 for a model without them (kept in ``refused_logprobs``).

Rate limits (off by default): ``rpm``/``tpm`` make the chat route enforce requests and tokens per
``window`` seconds (60: the providers' minute) over a sliding window of the requests it admitted,
a request's tokens being its reply's ``total_tokens``. A request that does not fit is answered
429 with the ``Retry-After`` that makes it fit (logged with mode ``"limited"``, its arrival time
in ``limited_at``); ``admitted`` holds ``(arrival, tokens, answered)`` of the others. With
``rate_headers=True`` every chat reply carries OpenAI's ``x-ratelimit-limit/remaining/reset-
requests`` and ``-tokens`` headers.

Use it as a context manager or through a fixture::

    with FakeOpenAI() as server:
        server.script("chat", "401")
        judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key="dummy")
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import pytest

from ragbridge.core.judging.judge import Message
from ragbridge.core.testing import HashEmbedder, minimal_reply, wrong_reply

__all__ = [
    "DEFAULT_LOGPROB",
    "MODES",
    "FakeOpenAI",
    "LogprobScript",
    "Request",
    "ScriptedToken",
    "fake_openai",
    "free_port",
    "response_format_kind",
]

MODES = (
    "ok",
    "401",
    "404",
    "500",
    "429",
    "hang",
    "reset",
    "garbage",
    "truncated",
    "wrong",
)
ROUTES = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}

Answer = Callable[[list[Message]], str]

ScriptedToken = str | tuple[str, float] | tuple[str, float, Mapping[str, float]]
"""One token of a scripted reply: its text, with its log-probability and alternatives if given."""

LogprobScript = (
    Sequence[Sequence[ScriptedToken]] | Callable[[list[Message]], Sequence[ScriptedToken]]
)
"""Token lists, one per reply asking for log-probabilities (the last repeats), or a function."""

DEFAULT_LOGPROB = -0.25
"""The log-probability of a token nobody scripted (its made-up alternatives are lower)."""

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass(frozen=True)
class Request:
    """One request the server received: its route, the mode it was answered with, its body."""

    route: str
    mode: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


@dataclass
class _Script:
    modes: list[str] = field(default_factory=lambda: ["ok"])
    position: int = 0

    def next(self) -> str:
        mode = self.modes[min(self.position, len(self.modes) - 1)]
        self.position += 1
        return mode


class _DeepQueueServer(ThreadingHTTPServer):
    request_queue_size = 256


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for connection-refused tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class FakeOpenAI:
    """The server. ``base_url`` is ``http://127.0.0.1:PORT/v1``; ``requests`` the log."""

    def __init__(
        self,
        *,
        answer: Answer | None = None,
        retry_after: float = 1.0,
        hang_seconds: float = 60.0,
        delay: float = 0.0,
        formats: Collection[str] | None = None,
        refuse: str = "llamacpp",
        logprobs: LogprobScript | None = None,
        refuse_logprobs: bool = False,
        rpm: int | None = None,
        tpm: int | None = None,
        window: float = 60.0,
        rate_headers: bool = False,
    ) -> None:
        self.answer = answer
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.rate_headers = rate_headers
        self.admitted: list[tuple[float, int, float]] = []
        """``(arrival, tokens, answered)`` of each chat request admitted within the limits."""
        self.limited_at: list[float] = []
        """Arrival times of the chat requests refused for going over ``rpm``/``tpm``."""
        self._window_log: list[tuple[float, int]] = []
        self.logprobs = logprobs
        self.refuse_logprobs = refuse_logprobs
        self.refused_logprobs: list[dict[str, Any]] = []
        """Bodies of chat requests refused for asking for log-probabilities."""
        self._logprob_replies = 0
        self.formats = None if formats is None else frozenset(formats)
        self.refuse = refuse
        self.refused: list[dict[str, Any]] = []
        """Bodies of chat requests refused for their ``response_format`` (see ``formats``)."""
        self.delay = delay
        """Seconds every request waits before it is answered, like a real endpoint's latency."""
        self.in_flight = 0
        self.max_in_flight = 0
        """Requests being answered at once, at most: what a client's in-flight cap allows."""
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self.requests: list[Request] = []
        self._scripts = {"chat": _Script(), "embeddings": _Script()}
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._embedder = HashEmbedder(dim=16)
        # With limits on, many clients connect at once: a deeper listen queue than the default
        # 5, so a burst is answered 429 by the limit rather than reset by the kernel.
        server_class = (
            _DeepQueueServer if rpm is not None or tpm is not None else ThreadingHTTPServer
        )
        self._httpd = server_class(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    # -- control -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        port: int = self._httpd.server_address[1]
        return port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, route: str, *modes: str) -> None:
        """Answer the next requests on ``route`` ("chat" or "embeddings") with ``modes`` in
        order; the last mode repeats. Resets the route's position."""
        if route not in self._scripts:
            raise ValueError(f"unknown route {route!r}; use 'chat' or 'embeddings'")
        unknown = [m for m in modes if m not in MODES]
        if unknown or not modes:
            raise ValueError(f"modes must be among {MODES}, got {modes!r}")
        with self._lock:
            self._scripts[route] = _Script(list(modes))

    def count(self, route: str | None = None, mode: str | None = None) -> int:
        """Requests received on ``route`` (all routes when None), answered with ``mode``."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (route is None or r.route == route) and (mode is None or r.mode == mode)
            )

    def close(self) -> None:
        """Release hanging handlers, stop serving and free the port."""
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- answering (called on handler threads) --------------------------------------------

    def _take(self, route: str, body: dict[str, Any], headers: dict[str, str]) -> str:
        with self._lock:
            mode = self._scripts[route].next()
            self.requests.append(Request(route, mode, body, headers, time.monotonic()))
        return mode

    def _rate_check(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[bool, dict[str, str], int, float]:
        """Admit a chat request within ``rpm``/``tpm`` (or not): ``(admitted, headers, tokens,
        arrival)``.

        Only a request the script answers ``ok``/``wrong`` is counted (its reply's tokens are
        known on arrival); the others pass. The headers are empty unless ``rate_headers``."""
        with self._lock:
            script = self._scripts["chat"]
            upcoming = script.modes[min(script.position, len(script.modes) - 1)]
        if (self.rpm is None and self.tpm is None) or upcoming not in ("ok", "wrong"):
            return True, {}, 0, time.monotonic()
        usage = self._chat_ok(body, upcoming == "wrong")["usage"]
        tokens = int(usage["total_tokens"])
        with self._lock:
            now = time.monotonic()
            log = [e for e in self._window_log if e[0] > now - self.window]
            wait = 0.0
            if self.rpm is not None and len(log) + 1 > self.rpm:
                wait = log[len(log) - self.rpm][0] + self.window - now
            if self.tpm is not None:
                used, freed = sum(t for _, t in log), 0
                for at, spent in log:
                    if used - freed + tokens <= self.tpm:
                        break
                    freed += spent
                    wait = max(wait, at + self.window - now)
            fits = wait <= 0
            if fits:
                log.append((now, tokens))
            else:
                self.limited_at.append(now)
                self.requests.append(Request("chat", "limited", body, headers, now))
            self._window_log = log
            sent = self._limit_headers(log, now) if self.rate_headers else {}
        if not fits:
            sent["Retry-After"] = f"{max(wait, 0.001):.3f}"
        return fits, sent, tokens, now

    def _limit_headers(self, log: list[tuple[float, int]], now: float) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers for the window ``log`` (under ``_lock``)."""
        headers: dict[str, str] = {}
        reset = f"{(log[0][0] + self.window - now) if log else 0.0:.3f}s"
        if self.rpm is not None:
            headers["x-ratelimit-limit-requests"] = str(self.rpm)
            headers["x-ratelimit-remaining-requests"] = str(max(0, self.rpm - len(log)))
            headers["x-ratelimit-reset-requests"] = reset
        if self.tpm is not None:
            headers["x-ratelimit-limit-tokens"] = str(self.tpm)
            used = sum(t for _, t in log)
            headers["x-ratelimit-remaining-tokens"] = str(max(0, self.tpm - used))
            headers["x-ratelimit-reset-tokens"] = reset
        return headers

    def _refuses(self, body: dict[str, Any]) -> bool:
        """Does this dialect refuse the request's ``response_format``?"""
        if self.formats is None:
            return False
        kind = response_format_kind(body)
        return kind is not None and kind not in self.formats

    def _hang(self) -> None:
        self._release.wait(self.hang_seconds)

    def _chat_ok(self, body: dict[str, Any], wrong: bool = False) -> dict[str, Any]:
        messages = [dict(m) for m in body.get("messages", [])]
        if wrong:
            content = wrong_reply(messages)
        elif self.answer is not None:
            content = self.answer(messages)
        else:
            content = minimal_reply(messages)
        logprobs = None
        if body.get("logprobs") is True:
            content, tokens = self._tokens(messages, content, int(body.get("top_logprobs") or 0))
            logprobs = {"content": tokens, "refusal": None}
        prompt = sum(len(str(m.get("content", ""))) for m in messages) // 4
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": logprobs,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": max(1, prompt),
                "completion_tokens": max(1, len(content) // 4),
                "total_tokens": max(1, prompt) + max(1, len(content) // 4),
            },
        }

    def _tokens(
        self, messages: list[Message], content: str, top: int
    ) -> tuple[str, list[dict[str, Any]]]:
        """The reply's content and its ``logprobs.content``: scripted, else made up."""
        scripted: Sequence[ScriptedToken] | None = None
        if callable(self.logprobs):
            scripted = self.logprobs(messages)
        elif self.logprobs is not None:
            with self._lock:
                position = min(self._logprob_replies, len(self.logprobs) - 1)
                self._logprob_replies += 1
            scripted = self.logprobs[position]
        if scripted is None:
            scripted = [_made_up(text, top) for text in _TOKEN.findall(content)]
        tokens = [_token_entry(token, top) for token in scripted]
        return "".join(t["token"] for t in tokens), tokens

    def _embeddings_ok(self, body: dict[str, Any], wrong: bool = False) -> dict[str, Any]:
        raw = body.get("input", [])
        texts: Sequence[str] = [raw] if isinstance(raw, str) else list(raw)
        vectors = [self._embedder._vector(str(t)) for t in texts]
        if wrong:
            vectors = vectors[:-1]
        return {
            "object": "list",
            "model": body.get("model"),
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }


def _made_up(text: str, top: int) -> ScriptedToken:
    """An unscripted token: itself at `DEFAULT_LOGPROB`, then ``top - 1`` lower alternatives."""
    alternatives = {text: DEFAULT_LOGPROB}
    alternatives.update({f"{text}~{i}": DEFAULT_LOGPROB - 1.0 - i for i in range(1, top)})
    return (text, DEFAULT_LOGPROB, alternatives)


def _token_entry(token: ScriptedToken, top: int) -> dict[str, Any]:
    """One ``logprobs.content`` item as OpenAI sends it, with at most ``top`` alternatives."""
    if isinstance(token, str):
        token = (token, DEFAULT_LOGPROB, {token: DEFAULT_LOGPROB})
    text, logprob = token[0], token[1]
    alternatives: Mapping[str, float] = token[2] if len(token) == 3 else {}
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode("utf-8")),
        "top_logprobs": [
            {"token": alt, "logprob": value, "bytes": list(alt.encode("utf-8"))}
            for alt, value in list(alternatives.items())[:top]
        ],
    }


def response_format_kind(body: dict[str, Any]) -> str | None:
    """``json_schema``, ``json_object_schema``, ``json_object`` (or another ``type``) for the
    request's ``response_format``; None when it has none."""
    shape = body.get("response_format")
    if not isinstance(shape, dict):
        return None
    kind = str(shape.get("type"))
    return "json_object_schema" if kind == "json_object" and "schema" in shape else kind


def _format_refusal(style: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The error a server of this ``style`` answers a response format it does not take with."""
    kind = str(body["response_format"].get("type"))
    if style == "llamacpp":  # its route's 500 for the pydantic error of the request (0.3.x)
        message = (
            "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
            f"'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': '{kind}', "
            "'ctx': {'expected': \"'text' or 'json_object'\"}}"
        )
        return 500, _error_body(message, "internal_server_error", None)
    message = f"Invalid parameter: 'response_format' of type '{kind}' is not supported."
    return 400, _error_body(message, "invalid_request_error", None)


def _error_body(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: resets stay per request

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

        def do_POST(self) -> None:
            route = ROUTES.get(self.path.split("?")[0])
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if route is None:
                self._send(404, _error_body(f"no route {self.path}", "invalid_request", None))
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            headers = {k.lower(): v for k, v in self.headers.items()}
            if route == "chat" and server.refuse_logprobs and body.get("logprobs"):
                with server._lock:
                    server.refused_logprobs.append(body)
                message = "Unsupported parameter: 'logprobs' is not supported with this model."
                error = _error_body(message, "invalid_request_error", "unsupported_parameter")
                error["error"]["param"] = "logprobs"
                self._send(400, error)
                return
            if route == "chat" and server._refuses(body):
                with server._lock:
                    server.refused.append(body)
                self._send(*_format_refusal(server.refuse, body))
                return
            limit_headers: dict[str, str] = {}
            tokens, arrival = 0, 0.0
            if route == "chat":
                fits, limit_headers, tokens, arrival = server._rate_check(body, headers)
                if not fits:
                    message = "Rate limit reached for requests or tokens per minute"
                    error = _error_body(message, "requests", "rate_limit_exceeded")
                    self._send(429, error, limit_headers)
                    return
            mode = server._take(route, body, headers)
            with server._lock:
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            self._counted = True
            try:
                if server.delay:
                    time.sleep(server.delay)
                self._answer(route, mode, body, limit_headers)
                if tokens and route == "chat" and mode in ("ok", "wrong"):
                    with server._lock:
                        server.admitted.append((arrival, tokens, time.monotonic()))
            finally:
                self._leave()

        def _leave(self) -> None:
            """The request is no longer in flight: counted down once, *before* its reply is
            written. Counting down after the write let a loaded machine's client read the reply,
            free its slot and send the next request before this thread ran again, so two calls
            a client never overlapped were counted as overlapping (a bound of 8 seen as 9)."""
            if getattr(self, "_counted", False):
                self._counted = False
                with server._lock:
                    server.in_flight -= 1

        def _answer(
            self,
            route: str,
            mode: str,
            body: dict[str, Any],
            limit_headers: dict[str, str] | None = None,
        ) -> None:
            model = str(body.get("model", ""))
            if mode == "hang":
                server._hang()
                mode = "ok"
            if mode == "ok" or mode == "wrong":
                wrong = mode == "wrong"
                reply = (
                    server._chat_ok(body, wrong)
                    if route == "chat"
                    else server._embeddings_ok(body, wrong)
                )
                self._send(200, reply, limit_headers)
            elif mode == "401":
                message = "Incorrect API key provided: dummy. You can find your API key at ..."
                self._send(401, _error_body(message, "invalid_request_error", "invalid_api_key"))
            elif mode == "404":
                message = f"The model `{model}` does not exist or you do not have access to it."
                self._send(404, _error_body(message, "invalid_request_error", "model_not_found"))
            elif mode == "500":
                self._send(500, _error_body("The server had an error", "server_error", None))
            elif mode == "429":
                self._send(
                    429,
                    _error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
                    {"Retry-After": f"{server.retry_after:g}"},
                )
            elif mode == "reset":
                # SO_LINGER 0: close() sends RST instead of FIN, as a crashed proxy would.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self._leave()
                self.connection.close()
                self.close_connection = True
            elif mode == "garbage":
                self._send_raw(200, b"<html>502 Bad Gateway (but with status 200)</html>")
            elif mode == "truncated":
                whole = json.dumps(
                    server._chat_ok(body) if route == "chat" else server._embeddings_ok(body)
                ).encode()
                self._send_raw(200, whole[: len(whole) // 2])

        def _send(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_raw(
            self, status: int, data: bytes, headers: dict[str, str] | None = None
        ) -> None:
            self._leave()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout): nothing to answer
                self.close_connection = True

        def finish(self) -> None:
            with contextlib.suppress(OSError, ValueError):  # reset or closed on purpose
                super().finish()

    return Handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running `FakeOpenAI`, closed after the test (hanging handlers are released)."""
    with FakeOpenAI() as server:
        yield server
