"""OpenAI-compatible HTTP adapter: any Chat Completions / Embeddings endpoint as a ragbridge
`Judge` / `Embedder` — OpenAI itself, vLLM, Ollama, llama.cpp's server, LiteLLM proxies.

Why it is built this way:

* **httpx, not the openai SDK.** The wire protocol is small and stable; speaking it directly
  keeps the extra to one light dependency and lets tests inject an ``httpx.MockTransport``.
* **JSON mode first, forced tool call as fallback.** ``response_format={"type": "json_object"}``
  is the structured mode most compatible servers accept (llama.cpp answers HTTP 500 to
  ``json_schema``); the engine's prompts already state the schema, so messages go out as given.
  A server that refuses ``response_format`` with a 400 is asked again with a forced tool call,
  and the judge remembers that for later calls. Tool arguments that do not validate are handed
  back as text with ``parsed=None``, so the engine's repair re-ask quotes what was wrong.
* **``max_tokens``, not ``max_completion_tokens``.** llama.cpp ignores the newer name, and an
  uncapped local model can ramble until the timeout.
* **Errors say what to do next.** Timeouts, 429 (with ``Retry-After``), 5xx and connection
  failures are the engine's transient errors and get retried; other 4xx are permanent and carry
  the server's own message, which is usually the only useful diagnosis.
* **The API key never leaves the Authorization header.** It is not in ``repr``, not in any error
  message (server messages are redacted: some echo the key back), and httpx exceptions, whose
  request objects hold the header, are not chained onto the errors raised here.

Importing this module without ``httpx`` raises an ImportError naming the extra.
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ragbridge.core.judge import (
    JudgeError,
    JudgeReply,
    JudgeTimeout,
    Message,
    PermanentJudgeError,
    RateLimited,
    ServerError,
)
from ragbridge.core.results import Usage

INSTALL_HINT = 'pip install "ragbridge[openai]"'
"""What to run when the ``openai`` extra is missing."""

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"ragbridge.adapters.openai needs httpx, which is not installed: {INSTALL_HINT}"
    ) from exc

__all__ = ["DEFAULT_BASE_URL", "INSTALL_HINT", "OpenAIEmbedder", "OpenAIJudge", "Structured"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint; for a local server point ``base_url`` at ``http://127.0.0.1:8000/v1``."""

Structured = Literal["json_object", "tool", "none"]
"""How a schema is requested: JSON mode, a forced tool call, or plain chat (the engine parses)."""

_STRUCTURED: tuple[str, ...] = ("json_object", "tool", "none")
_REDACTED = "[REDACTED]"
_MAX_MESSAGE = 500


class _OpenAIHTTP:
    """What the judge and the embedder share: the client, the key, the request and the error
    mapping. Not public: the two classes are the API."""

    _path: str = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout: float,
        extra_body: Mapping[str, Any] | None,
        client: httpx.AsyncClient | None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty string")
        self.model: str = model
        self.base_url: str = base_url.rstrip("/")
        self.timeout: float = timeout
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        # Kept private and out of repr; an empty key (local servers) sends no Authorization.
        self._api_key: str | None = api_key or os.environ.get("OPENAI_API_KEY") or None
        # A client passed in belongs to the caller, who closes it; one made here is ours.
        self._owns_client = client is None
        self._client: httpx.AsyncClient = client or httpx.AsyncClient(timeout=timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

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
        return text

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _post(self, payload: Mapping[str, Any]) -> httpx.Response:
        """POST ``payload``; transport failures become the engine's transient errors.

        The httpx exception is not chained (``from None``): its request carries the key.
        """
        url = f"{self.base_url}{self._path}"
        try:
            return await self._client.post(
                url, json=dict(payload), headers=self._headers(), timeout=self.timeout
            )
        except httpx.TimeoutException as exc:
            message = self._redact(f"{type(exc).__name__} after {self.timeout:g} s: {exc}")
            raise JudgeTimeout(f"{self.model}: {message}") from None
        except httpx.TransportError as exc:  # connect/read/protocol errors: the server's side
            message = self._redact(f"{type(exc).__name__}: {exc}")
            raise ServerError(f"{self.model}: {message}") from None

    def _error_for(self, response: httpx.Response) -> JudgeError:
        """The ragbridge error for a non-2xx response, with the server's message (redacted)."""
        status = response.status_code
        detail = f"{self.model}: HTTP {status}: {self._server_message(response)}"
        if status == 429:
            return RateLimited(detail, retry_after=_retry_after(response.headers))
        if status == 408:  # the server gave up waiting: a timeout, worth another try
            return JudgeTimeout(detail)
        if status >= 500:
            return ServerError(detail)
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

    ``structured`` chooses how a schema is requested: ``"json_object"`` (JSON mode, falling back
    to a forced tool call when the server refuses ``response_format``), ``"tool"`` (always a
    forced tool call), or ``"none"`` (plain chat; the engine parses the text). ``extra_body`` is
    merged into every request last, for server-specific knobs (``seed``, ``top_p``, ...).
    The key comes from ``api_key`` or ``OPENAI_API_KEY``; without one no Authorization header is
    sent, which is what local servers expect. ``client`` injects an ``httpx.AsyncClient`` (tests,
    proxies, connection limits); it is then the caller's to close.
    """

    _path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        structured: Structured = "json_object",
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if structured not in _STRUCTURED:
            raise ValueError(f"structured must be one of {_STRUCTURED}, got {structured!r}")
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            extra_body=extra_body,
            client=client,
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.structured: Structured = structured
        # Set when the server refused JSON mode once, so later calls go straight to tools.
        self._json_mode_refused = False

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={self.base_url!r}, "
            f"structured={self.structured!r})"
        )

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        """One chat completion; with a schema, constrained as ``structured`` says."""
        if schema is None or self.structured == "none":
            return await self._complete(messages, None, mode="none")
        if self.structured == "tool" or self._json_mode_refused:
            return await self._complete(messages, schema, mode="tool")
        try:
            return await self._complete(messages, schema, mode="json_object")
        except _ResponseFormatRefused:
            self._json_mode_refused = True
            return await self._complete(messages, schema, mode="tool")

    def _payload(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, mode: str
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if schema is not None and mode == "json_object":
            payload["response_format"] = {"type": "json_object"}
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
        payload.update(self.extra_body)
        return payload

    async def _complete(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, *, mode: str
    ) -> JudgeReply:
        response = await self._post(self._payload(messages, schema, mode))
        if response.is_error:
            error = self._error_for(response)
            if mode == "json_object" and _refuses_response_format(response, str(error)):
                raise _ResponseFormatRefused(str(error))
            raise error
        body = self._json(response)
        usage = _usage(body.get("usage"))
        message = _first_message(body, self.model)
        calls = message.get("tool_calls") or []
        if mode == "tool" and schema is not None and calls:
            arguments = _tool_arguments(calls[0])
            return JudgeReply(text=arguments, parsed=_validate(arguments, schema), usage=usage)
        # JSON mode and plain chat: the engine extracts and validates the object (and repairs).
        return JudgeReply(text=_content_text(message.get("content")), usage=usage)


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
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60.0,
        dimensions: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            extra_body=extra_body,
            client=client,
        )
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


class _ResponseFormatRefused(Exception):
    """Internal: the server said no to JSON mode; switch to a forced tool call."""


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
