"""OpenAI-compatible HTTP adapter: any Chat Completions / Embeddings endpoint as a ragbridge
`Judge` / `Embedder` — OpenAI itself, vLLM, Ollama, llama.cpp's server, LiteLLM proxies.

Why it is built this way:

* **httpx, not the openai SDK.** The wire protocol is small and stable; speaking it directly
  keeps the extra to one light dependency and lets tests inject an ``httpx.MockTransport``.
* **Constrained replies, in the server's dialect.** ``structured="auto"`` (the default) asks
  for the reply's JSON schema as strictly as the server allows: OpenAI's strict ``json_schema``,
  else llama-cpp-python's grammar-constrained ``json_object`` with a ``schema``, else JSON mode,
  else plain chat. The rung is detected by the first call to an endpoint and remembered per base
  URL and model for the process (`ragbridge.adapters.openai_dialect`): a refused rung (llama-cpp-
  python answers ``json_schema`` with an HTTP 500) is a dialect, not a fault to retry. The
  engine's prompts state the schema too, so messages go out as given and the engine parses and
  checks the text. ``structured="json_object"`` keeps JSON mode with a forced tool call as the
  fallback of a server that refuses ``response_format`` with a 400; tool arguments that do not
  validate are handed back as text with ``parsed=None``, so the engine's repair quotes them.
* **A completion budget per request, as ``max_tokens``.** The engine passes each request's
  budget (`ragbridge.core.judging.reply_format.reply_spec`, sized by its prompt template from what
  the reply lists); an explicit ``max_tokens`` is a ceiling on it, and 1024 applies when a request
  has none. A weak model that never closes its JSON then stops at its budget instead of at the
  context limit, long past the timeout. ``max_tokens``, not ``max_completion_tokens``:
  llama.cpp ignores the newer name.
* **Errors say what to do next.** Timeouts, 429 (with ``Retry-After``), 5xx, resets and broken
  replies are the engine's transient errors and get retried. A wrong key (401), no access
  (403), an unknown model or path (404), an exhausted quota, a host that does not resolve and a
  base URL without a scheme are `ProviderUnusable`: not retried, and each carries a ``cause``
  and a ``hint`` ("check OPENAI_API_KEY") so a run that cannot succeed stops early with one
  line. A refused connection is retried once, then treated the same way. Other 4xx belong to
  one request and carry the server's own message, usually the only useful diagnosis.
* **Log-probabilities when the engine asks.** A request asking for them
  (`ragbridge.core.judging.judge.logprobs_wanted`: a scored criterion) sends ``"logprobs": true,
  "top_logprobs": k`` (k at most 20, OpenAI's limit) and reads ``choices[0].logprobs.content``
  into the reply's `TokenLogprob`s. A server that refuses them with a 400 naming them gets the
  call again without, once, and is remembered (`ragbridge.adapters.openai_dialect`); a forced
  tool call asks for none (its arguments have no content tokens).
* **The engine's timeout is the timeout.** ``timeout=None`` (default) makes every request use
  the attempt timeout of the engine running it, so ``Settings(timeout=...)``/``--timeout``
  bound a hung server; an explicit ``timeout`` is a ceiling on top.
* **The API key never leaves the Authorization header.** It is not in ``repr``, not in any error
  message (server messages are redacted: some echo the key back), and httpx exceptions, whose
  request objects hold the header, are not chained onto the errors raised here.

Importing this module without ``httpx`` raises an ImportError naming the extra.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT",
    "INSTALL_HINT",
    "Connection",
    "OpenAIEmbedder",
    "OpenAIJudge",
    "Structured",
]

import email.utils
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict, Unpack

from ragbridge.adapters._extras import install_hint, missing_extra
from ragbridge.adapters.openai_dialect import (
    LADDER,
    MAX_TOP_LOGPROBS,
    Mode,
    dialects,
    refuses_format,
    refuses_logprobs,
    response_format,
)
from ragbridge.core.judging.error_text import describe_error
from ragbridge.core.judging.judge import (
    ConnectionRefused,
    JudgeError,
    JudgeReply,
    JudgeTimeout,
    Message,
    PermanentJudgeError,
    ProviderUnusable,
    RateLimited,
    ServerError,
    attempt_timeout,
    classify_error,
    logprobs_wanted,
)
from ragbridge.core.judging.logprobs import openai_logprobs
from ragbridge.core.judging.reply_format import reply_spec
from ragbridge.core.results.evaluation import Usage
from ragbridge.core.scoring.partitions import readable_url

INSTALL_HINT = install_hint("openai")
"""What to run when the ``openai`` extra is missing."""

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ragbridge.adapters.openai", "httpx", "openai", exc) from exc


DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint; for a local server point ``base_url`` at ``http://127.0.0.1:8000/v1``."""

DEFAULT_TIMEOUT = 60.0
"""Seconds per request when no engine sets one (``timeout=None`` follows the engine's)."""

DEFAULT_MAX_TOKENS = 1024
"""Completion tokens of a request that carries no budget (free text, other frameworks' prompts)."""

KEY_HINT = "check OPENAI_API_KEY (or RAGBRIDGE_API_KEY)"
"""What to do about a 401: where ragbridge reads the key from."""

Structured = Literal["auto", "json_object", "tool", "none"]
"""How a schema is requested: the most constrained form the server takes (detected), JSON mode,
a forced tool call, or plain chat (the engine parses)."""

_STRUCTURED: tuple[str, ...] = ("auto", "json_object", "tool", "none")
_REDACTED = "[REDACTED]"
_MAX_MESSAGE = 500


_DOING = {
    "ConnectError": "connecting to",
    "ReadError": "reading the reply from",
    "WriteError": "sending the request to",
}
"""What an httpx transport error interrupted, for a failure whose exception has no message."""


class Connection(TypedDict, total=False):
    """Where and how `OpenAIJudge` and `OpenAIEmbedder` connect: keywords both take.

    ``base_url`` (default `DEFAULT_BASE_URL`); ``api_key`` (default ``OPENAI_API_KEY``; none sends
    no Authorization header, which is what local servers expect); ``timeout`` (seconds per
    request: None follows the engine's attempt timeout, a number is a ceiling on it);
    ``extra_body`` (merged into every request last); ``client`` (an ``httpx.AsyncClient`` to
    use, then the caller's to close).
    """

    base_url: str
    api_key: str | None
    timeout: float | None
    extra_body: Mapping[str, Any] | None
    client: httpx.AsyncClient | None


class _OpenAIHTTP:
    """What the judge and the embedder share: the client, the key, the request and the error
    mapping. Not public: the two classes are the API."""

    _path: str = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds (or None), got {timeout!r}")
        self.model: str = model
        self.base_url: str = _checked_base_url(base_url)
        # what messages show of it: no password, no ?api-key= (a URL may carry credentials)
        self._shown_url: str = readable_url(self.base_url) or self.base_url
        self.timeout: float | None = timeout
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        # Kept private and out of repr; an empty key (local servers) sends no Authorization.
        self._api_key: str | None = api_key or os.environ.get("OPENAI_API_KEY") or None
        # A client passed in belongs to the caller, who closes it; one made here is ours.
        self._owns_client = client is None
        self._client: httpx.AsyncClient = client or httpx.AsyncClient(
            timeout=timeout or DEFAULT_TIMEOUT
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._shown_url!r})"

    @property
    def rate_key(self) -> str:
        """What the provider's rate limits are counted against: the endpoint and the key,
        hashed (the engine's limiter shares one ledger per rate key; the key never shows)."""
        seed = f"{self.base_url}\0{self._api_key or ''}".encode()
        return "openai:" + hashlib.sha256(seed).hexdigest()[:32]

    # -- lifecycle ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it (an injected client is the caller's)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- transport ------------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        """``text`` with the API key blanked out: servers sometimes quote a rejected key."""
        if self._api_key:
            text = text.replace(self._api_key, _REDACTED)
        if self._shown_url != self.base_url:
            text = text.replace(self.base_url, self._shown_url)
        return text

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _request_timeout(self) -> float:
        """Seconds for this request: the engine's attempt timeout when one is running it.

        ``timeout=None`` (the default) follows the engine
        (`ragbridge.core.judging.judge.attempt_timeout`), so ``Settings(timeout=2)`` or ``--timeout
        2`` bounds a hung server at 2 s per attempt; an explicit ``timeout`` is a ceiling; outside
        an engine it is `DEFAULT_TIMEOUT`.
        """
        engine = attempt_timeout.get()
        if self.timeout is None:
            return engine if engine is not None else DEFAULT_TIMEOUT
        return self.timeout if engine is None else min(self.timeout, engine)

    async def _post(self, payload: Mapping[str, Any]) -> httpx.Response:
        """POST ``payload``; transport failures become the engine's errors, each with the fix.

        A refused connection is `ConnectionRefused` (retried once, then permanent), a host that
        does not resolve or a URL without a scheme is `ProviderUnusable`, a timeout
        `JudgeTimeout`, anything else on the wire (a reset, a broken reply) a `ServerError`.
        The httpx exception is not chained (``from None``): its request carries the key.
        """
        url = f"{self.base_url}{self._path}"
        seconds = self._request_timeout()
        try:
            return await self._client.post(
                url, json=dict(payload), headers=self._headers(), timeout=seconds
            )
        except httpx.TimeoutException as exc:
            message = self._redact(f"{type(exc).__name__} after {seconds:g} s: {exc}")
            raise JudgeTimeout(
                f"{self.model}: {message}",
                cause=f"no reply within {seconds:g} s",
                hint=f"is the server at {self._shown_url} overloaded or hung? "
                "A slow model needs a longer --timeout",
            ) from None
        except httpx.TransportError as exc:  # connect/read/protocol errors: the server's side
            doing = _DOING.get(type(exc).__name__, "sending the request to")
            message = f"{self.model}: " + self._redact(describe_error(exc, f"{doing} {url}"))
            known = classify_error(exc)
            if isinstance(known, ConnectionRefused):
                raise ConnectionRefused(
                    message,
                    cause=f"connection refused at {self._shown_url}",
                    hint=f"is the server at {self._shown_url} running?",
                ) from None
            if isinstance(known, ProviderUnusable):
                if known.cause and "resolve" in known.cause:
                    host = httpx.URL(self.base_url).host
                    cause, hint = f"cannot resolve host {host!r}", "check the host in --base-url"
                else:
                    cause, hint = "invalid base URL", _SCHEME_HINT
                raise ProviderUnusable(message, cause=cause, hint=hint) from None
            raise ServerError(
                message,
                cause=f"connection failed ({type(exc).__name__})",
                hint=f"the connection to {self._shown_url} keeps failing",
            ) from None

    def _error_for(self, response: httpx.Response) -> JudgeError:
        """The ragbridge error for a non-2xx response, with the server's message (redacted).

        401/403/404 mean this provider cannot be used as configured (`ProviderUnusable`, with
        the fix); a 429 that says the quota is exhausted too. Other 4xx belong to the request.
        """
        status = response.status_code
        server = self._server_message(response)
        detail = f"{self.model}: HTTP {status}: {server}"
        lowered = server.lower()
        if status == 429:
            if "quota" in lowered or "insufficient_quota" in response.text:
                return ProviderUnusable(
                    detail,
                    cause="429 quota exceeded",
                    hint="the account has no quota left: check its plan and billing",
                )
            return RateLimited(
                detail,
                retry_after=_retry_after(response.headers),
                cause="429 rate limited",
                hint="lower --concurrency, or check the account's rate limits",
                headers=_rate_headers(response.headers),
            )
        if status == 408:  # the server gave up waiting: a timeout, worth another try
            return JudgeTimeout(
                detail, cause="408 request timeout", hint="the server is overloaded"
            )
        if status >= 500:
            return ServerError(
                detail,
                cause=f"HTTP {status}",
                hint=f"the server at {self._shown_url} keeps failing",
            )
        if status == 401:
            return ProviderUnusable(detail, cause="401 Unauthorized", hint=KEY_HINT)
        if status == 403:
            return ProviderUnusable(
                detail,
                cause="403 Forbidden",
                hint="the API key has no access to this model or endpoint",
            )
        if status == 404:
            if "model" in lowered:
                return ProviderUnusable(
                    detail,
                    cause=f"404 unknown model {self.model!r}",
                    hint="unknown model: check the model name",
                )
            return ProviderUnusable(
                detail,
                cause=f"404 Not Found at {self._shown_url}{self._path}",
                hint="check --base-url (it usually ends in /v1)",
            )
        return PermanentJudgeError(detail)

    def _server_message(self, response: httpx.Response) -> str:
        """The ``error.message`` of an OpenAI-style error body, else the body's start."""
        try:
            body = response.json()
        except ValueError:
            message = response.text.strip() or response.reason_phrase
        else:
            message = _error_message(body) or json.dumps(body)[:_MAX_MESSAGE]
        message = self._redact(message)
        return message[:_MAX_MESSAGE] + ("…" if len(message) > _MAX_MESSAGE else "")

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        """A 2xx body as a dict; anything else is a broken reply, worth one more try."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ServerError(
                f"{self.model}: HTTP {response.status_code} reply is not a JSON object"
            )
        return body


class OpenAIJudge(_OpenAIHTTP):
    """An OpenAI-compatible chat endpoint as a ragbridge `Judge`.

    ``structured`` chooses how a schema is requested: ``"auto"`` (the JSON schema as strictly as
    the server takes it, detected once per endpoint: see the module), ``"json_object"`` (JSON
    mode, falling back to a forced tool call when the server refuses ``response_format``),
    ``"tool"`` (always a forced tool call), or ``"none"`` (plain chat; the engine parses the
    text). ``max_tokens`` caps every reply; without it a request's own budget applies (from
    the engine), else `DEFAULT_MAX_TOKENS`. ``extra_body`` is merged into every request last,
    for server-specific knobs (``seed``, ``top_p``, ...).
    The key comes from ``api_key`` or ``OPENAI_API_KEY``; without one no Authorization header is
    sent, which is what local servers expect. ``client`` injects an ``httpx.AsyncClient`` (tests,
    proxies, connection limits); it is then the caller's to close.
    """

    _path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        structured: Structured = "auto",
        **connection: Unpack[Connection],
    ) -> None:
        if structured not in _STRUCTURED:
            raise ValueError(f"structured must be one of {_STRUCTURED}, got {structured!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be >= 1 (or None: each request's budget)")
        super().__init__(model, **connection)
        self.max_tokens: int | None = max_tokens
        self.temperature = temperature
        self.structured: Structured = structured
        # Set when the server refused JSON mode once, so later calls go straight to tools.
        self._json_mode_refused = False

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={self._shown_url!r}, "
            f"structured={self.structured!r})"
        )

    async def __aenter__(self) -> OpenAIJudge:
        return self

    @property
    def dialect(self) -> Mode | None:
        """The rung this endpoint answered on (``structured="auto"``), None until detected."""
        return dialects.known(self.base_url, self.model)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        """One chat completion; with a schema, constrained as ``structured`` says.

        With log-probabilities asked (`logprobs_wanted`) and refused by the server, the call is
        made once more without them (the endpoint remembers): a reply without them beats none.
        """
        try:
            return await self._generate(messages, schema)
        except _LogprobsRefused:
            return await self._generate(messages, schema)

    @property
    def logprobs_refused(self) -> bool:
        """Whether this endpoint refused log-probabilities (later calls ask for none)."""
        return dialects.endpoint(self.base_url, self.model).logprobs_refused

    def _top_logprobs(self, mode: str) -> int | None:
        """Alternatives per token to ask for on this call, or None to ask for no logprobs."""
        wanted = logprobs_wanted.get()
        if wanted is None or mode == "tool" or self.logprobs_refused:
            return None
        return min(wanted, MAX_TOP_LOGPROBS)

    async def _generate(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> JudgeReply:
        if schema is None or self.structured == "none":
            return await self._complete(messages, None, mode="none")
        if self.structured == "auto":
            return await self._auto(messages, schema)
        if self.structured == "tool" or self._json_mode_refused:
            return await self._complete(messages, schema, mode="tool")
        try:
            return await self._complete(messages, schema, mode="json_object")
        except _ResponseFormatRefused:
            self._json_mode_refused = True
            return await self._complete(messages, schema, mode="tool")

    async def _auto(self, messages: Sequence[Message], schema: type[BaseModel]) -> JudgeReply:
        """The request on the endpoint's remembered rung; the first call detects it.

        While the rung is unknown, one call per endpoint and event loop climbs down the ladder
        and the others wait for it (at most half their attempt timeout), then use what it
        found. A remembered rung refused later (another server behind the URL) is detected
        again from the rung below.
        """
        endpoint = dialects.endpoint(self.base_url, self.model)
        if endpoint.mode is None:
            engine = attempt_timeout.get()
            async with endpoint.detecting(None if engine is None else engine / 2) as detect:
                if detect:
                    return await self._climb(messages, schema, LADDER)
        mode = endpoint.mode
        assert mode is not None
        try:
            return await self._complete(messages, schema, mode=mode)
        except _ResponseFormatRefused:
            return await self._climb(messages, schema, LADDER[LADDER.index(mode) + 1 :])

    async def _climb(
        self, messages: Sequence[Message], schema: type[BaseModel], rungs: Sequence[Mode]
    ) -> JudgeReply:
        """Try ``rungs`` in order; remember the first that gets a reply (the last never fails
        for its format: it sends none)."""
        endpoint = dialects.endpoint(self.base_url, self.model)
        for mode in rungs:
            try:
                reply = await self._complete(messages, schema, mode=mode)
            except _ResponseFormatRefused:
                continue
            endpoint.mode = mode
            return reply
        raise AssertionError("the plain rung cannot be refused")  # pragma: no cover

    def _max_tokens(self) -> int:
        """This request's budget (from the engine), capped by an explicit ``max_tokens``."""
        spec = reply_spec.get()
        budget = spec.max_tokens if spec is not None else None
        if budget is None:
            return self.max_tokens if self.max_tokens is not None else DEFAULT_MAX_TOKENS
        return budget if self.max_tokens is None else min(budget, self.max_tokens)

    def _payload(
        self,
        messages: Sequence[Message],
        schema: type[BaseModel] | None,
        mode: str,
        top_logprobs: int | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": self._max_tokens(),
            "temperature": self.temperature,
        }
        if schema is not None and mode in LADDER:
            spec = reply_spec.get()
            counts = spec.counts if spec is not None else None
            shape = response_format(cast(Mode, mode), schema, _tool_name(schema), counts)
            if shape is not None:
                payload["response_format"] = shape
        elif schema is not None and mode == "tool":
            name = _tool_name(schema)
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": (schema.__doc__ or f"Reply as {name}.").strip()[:1000],
                        "parameters": schema.model_json_schema(),
                    },
                }
            ]
            payload["tool_choice"] = {"type": "function", "function": {"name": name}}
        if top_logprobs is not None:
            payload["logprobs"] = True
            payload["top_logprobs"] = top_logprobs
        payload.update(self.extra_body)
        return payload

    async def _complete(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, *, mode: str
    ) -> JudgeReply:
        top = self._top_logprobs(mode)
        response = await self._post(self._payload(messages, schema, mode, top))
        if response.is_error:
            error = self._error_for(response)
            if top is not None and refuses_logprobs(response.status_code, response.text):
                dialects.endpoint(self.base_url, self.model).logprobs_refused = True
                raise _LogprobsRefused(str(error))
            if self.structured == "auto":
                if mode != "none" and refuses_format(response.status_code, response.text):
                    raise _ResponseFormatRefused(str(error))
            elif mode == "json_object" and _refuses_response_format(response, str(error)):
                raise _ResponseFormatRefused(str(error))
            raise error
        body = self._json(response)
        usage = _usage(body.get("usage"))
        message = _first_message(body, self.model)
        calls = message.get("tool_calls") or []
        headers = _rate_headers(response.headers)
        if mode == "tool" and schema is not None and calls:
            arguments = _tool_arguments(calls[0])
            return JudgeReply(
                text=arguments,
                parsed=_validate(arguments, schema),
                usage=usage,
                headers=headers,
            )
        # JSON mode and plain chat: the engine extracts and validates the object (and repairs).
        logprobs = openai_logprobs(body["choices"][0].get("logprobs")) if top is not None else None
        return JudgeReply(
            text=_content_text(message.get("content")),
            usage=usage,
            logprobs=logprobs,
            headers=headers,
        )


class OpenAIEmbedder(_OpenAIHTTP):
    """An OpenAI-compatible ``/embeddings`` endpoint as a ragbridge `Embedder`.

    One request per call with the whole batch (the engine already batches); vectors are
    returned in input order, by each item's ``index``. ``dimensions`` is sent only when given
    (text-embedding-3 models can shorten their vectors; most servers reject the field).
    """

    _path = "/embeddings"

    def __init__(
        self,
        model: str,
        *,
        dimensions: int | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        super().__init__(model, **connection)
        self.dimensions = dimensions

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors aligned with ``texts``; no request for an empty list."""
        items = list(texts)
        if not items:
            return []
        payload: dict[str, Any] = {"model": self.model, "input": items}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        payload.update(self.extra_body)
        response = await self._post(payload)
        if response.is_error:
            raise self._error_for(response)
        data = self._json(response).get("data")
        if not isinstance(data, list) or len(data) != len(items):
            got = len(data) if isinstance(data, list) else "no"
            raise ServerError(f"{self.model}: {got} embeddings for {len(items)} texts")
        try:
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            return [[float(x) for x in d["embedding"]] for d in ordered]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ServerError(f"{self.model}: malformed embeddings reply ({exc})") from None


# --------------------------------------------------------------------------- helpers


class _LogprobsRefused(Exception):
    """Internal: the server said no to ``logprobs``; the call is made again without them."""


class _ResponseFormatRefused(Exception):
    """Internal: the server said no to this ``response_format``; take the next rung (or, with
    ``structured="json_object"``, a forced tool call)."""


_SCHEME_HINT = "--base-url must start with http:// or https://"


def _checked_base_url(base_url: str) -> str:
    """``base_url`` without its trailing slash, or a ValueError naming what is wrong with it.

    Checked when the judge is built, so a URL without a scheme (``localhost:8000/v1``) is a
    one-line error before any call, not a failure on every call of the run.
    """
    url = base_url.strip().rstrip("/")
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError(f"base URL {base_url!r} has no http:// or https:// scheme: {_SCHEME_HINT}")
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL as exc:
        raise ValueError(f"base URL {base_url!r} is not a valid URL: {exc}") from None
    if not host:
        raise ValueError(f"base URL {base_url!r} names no host: {_SCHEME_HINT}")
    return url


_REFUSAL_WORDS = ("response_format", "response format", "json_object", "json mode")
_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


def _tool_name(schema: type[BaseModel]) -> str:
    """The schema's class name made a legal function name (``^[A-Za-z0-9_-]{1,64}$``)."""
    return _TOOL_NAME_BAD.sub("_", schema.__name__)[:64] or "reply"


def _refuses_response_format(response: httpx.Response, message: str) -> bool:
    """Does this error say the server cannot do ``response_format``?

    Only a 400/422 that mentions the field (or JSON mode) counts: a 401 or an unrelated
    bad request must surface as itself, not be retried in another mode.
    """
    if response.status_code not in (400, 422):
        return False
    text = message.lower()
    return any(
        s in text for s in ("response_format", "response format", "json_object", "json mode")
    )


def _error_message(body: Any) -> str | None:
    """``{"error": {"message": ...}}`` (OpenAI, vLLM), ``{"error": "..."}`` (Ollama) or
    ``{"message": ...}`` / ``{"detail": ...}`` (assorted proxies)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    for key in ("message", "detail"):
        if isinstance(body.get(key), str):
            return str(body[key])
    return None


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``."""
    value = headers.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            return None
    return None


def _rate_headers(headers: httpx.Headers) -> dict[str, str]:
    """The reply's ``x-ratelimit-*`` headers, names lower-case: the core's limiter reads them
    as a plain mapping (it knows nothing of httpx)."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-ratelimit-")}


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    return Usage(prompt_tokens=count("prompt_tokens"), completion_tokens=count("completion_tokens"))


def _first_message(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ServerError(f"{model}: reply has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ServerError(f"{model}: reply has no message")
    return message


def _content_text(content: Any) -> str:
    """Message content as text: a string, nothing, or a list of ``{"type": "text"}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _tool_arguments(call: Any) -> str:
    """A tool call's arguments as a JSON string (some servers send an object, not a string)."""
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments)


def _validate(arguments: str, schema: type[BaseModel]) -> BaseModel | None:
    """The arguments as a schema instance, or None so the engine repairs from the text."""
    try:
        return schema.model_validate_json(arguments)
    except ValidationError:
        return None
