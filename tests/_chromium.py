"""Drive a headless Chromium from a test through the DevTools protocol, with the standard library.

Why not a browser-automation package: the suite needs a handful of protocol commands (open a
page, run a script, click at a point, type, accept a download) and nothing else, and neither
Playwright nor Selenium (nor a websocket client) is a dependency of ragbridge. The DevTools
protocol is JSON over one websocket on 127.0.0.1; the websocket part a client needs — the HTTP
upgrade, masked text frames out, text/continuation/ping/close frames in (RFC 6455) — is about
a hundred lines, written here.

Chromium is started with ``--remote-debugging-port=0`` and a fresh profile; it writes the port
and the browser's websocket path to ``DevToolsActivePort`` in the profile. Commands to a page go
through a flat session (``Target.attachToTarget(flatten=True)``): one socket carries the browser's
messages and the page's, told apart by ``sessionId``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SKIP_REASON", "Browser", "BrowserError", "Page", "find_chromium"]

SKIP_REASON = (
    "no Chromium binary: install one (Debian: apt-get install -y chromium) or set "
    "RAGBRIDGE_CHROMIUM=/path/to/chromium to run the browser round trip"
)


def find_chromium() -> str | None:
    """``RAGBRIDGE_CHROMIUM``, else Debian's ``chromium``, else one on PATH; None if none."""
    configured = os.environ.get("RAGBRIDGE_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(candidate).is_file():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    """The browser did not start, answered a command with an error, or took too long."""


# ------------------------------------------------------------------------- websocket (RFC 6455)


class _WebSocket:
    """A blocking websocket client for text messages: just what the DevTools protocol needs."""

    def __init__(self, host: str, port: int, path: str, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buffer = b""
        self._parts: list[bytes] = []
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BrowserError("the DevTools endpoint closed the connection on upgrade")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise BrowserError(f"websocket upgrade refused: {status.decode(errors='replace')}")

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def _frame(self) -> tuple[int, bool, bytes] | None:
        """Take one whole frame off the buffer, or None (and take nothing) if not all there.

        Nothing is consumed until a frame is complete, so a read that times out half way
        leaves the stream in step.
        """
        buf = self.buffer
        if len(buf) < 2:
            return None
        first, second = buf[0], buf[1]
        n, pos = second & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                return None
            (n,) = struct.unpack_from("!H", buf, 2)
            pos = 4
        elif n == 127:
            if len(buf) < 10:
                return None
            (n,) = struct.unpack_from("!Q", buf, 2)
            pos = 10
        mask = b""
        if second & 0x80:
            if len(buf) < pos + 4:
                return None
            mask, pos = buf[pos : pos + 4], pos + 4
        if len(buf) < pos + n:
            return None
        payload, self.buffer = buf[pos : pos + n], buf[pos + n :]
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return first & 0x0F, bool(first & 0x80), payload

    def receive(self) -> str:
        """The next whole text message (fragments joined; pings answered).

        A socket timeout propagates as TimeoutError and loses nothing: call again.
        """
        while True:
            frame = self._frame()
            if frame is None:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise BrowserError("the DevTools connection closed")
                self.buffer += chunk
                continue
            opcode, final, payload = frame
            if opcode == 0x8:
                raise BrowserError("the browser closed the DevTools connection")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            self._parts.append(payload)
            if final:
                message, self._parts = b"".join(self._parts), []
                return message.decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send_frame(0x8, b"")
        self.sock.close()


# --------------------------------------------------------------------------------- protocol


@dataclass
class _Connection:
    ws: _WebSocket
    timeout: float
    next_id: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.receive())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)
        raise BrowserError(f"{method}: no reply within {self.timeout} s")

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float | None = None,
        *,
        since: int = 0,
    ) -> dict[str, Any]:
        """The first event from number ``since`` on (seen already or arriving) that
        ``predicate`` accepts."""
        deadline = time.monotonic() + (timeout or self.timeout)
        checked = since
        while True:
            for event in self.events[checked:]:
                if predicate(event):
                    return event
            checked = len(self.events)
            if time.monotonic() > deadline:
                raise BrowserError(f"waited {timeout or self.timeout} s for {what}")
            self.ws.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                message = json.loads(self.ws.receive())
            except TimeoutError:
                continue
            finally:
                self.ws.sock.settimeout(self.timeout)
            if "method" in message:
                self.events.append(message)


class Page:
    """One tab: evaluate scripts, click, type; `console_problems` lists what it logged."""

    def __init__(self, connection: _Connection, session: str) -> None:
        self._c = connection
        self.session = session

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._c.call(method, self.session, **params)

    def _mine(self, event: dict[str, Any]) -> bool:
        return event.get("sessionId") == self.session

    def goto(self, url: str) -> None:
        """Navigate and wait for the load event."""
        seen = len(self._c.events)
        self.call("Page.navigate", url=url)
        self._c.wait_for(
            lambda e: self._mine(e) and e["method"] == "Page.loadEventFired",
            f"the load of {url}",
            since=seen,
        )

    def reload(self) -> None:
        seen = len(self._c.events)
        self.call("Page.reload", ignoreCache=True)
        self._c.wait_for(
            lambda e: self._mine(e) and e["method"] == "Page.loadEventFired",
            "the reload",
            since=seen,
        )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (JSON-serialisable); a thrown error raises."""
        reply = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def center_of(self, selector: str) -> tuple[float, float]:
        """Scroll the element into view and return the centre of its box, in CSS pixels."""
        point = self.evaluate(
            "(function () {"
            f"  var el = document.querySelector({json.dumps(selector)});"
            "  if (!el) { return null; }"
            "  el.scrollIntoView({block: 'center'});"
            "  var r = el.getBoundingClientRect();"
            "  return [r.left + r.width / 2, r.top + r.height / 2];"
            "})()"
        )
        if point is None:
            raise BrowserError(f"no element matches {selector!r}")
        return float(point[0]), float(point[1])

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the element's centre."""
        x, y = self.center_of(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_text(self, text: str) -> None:
        """Type into the focused element, as an input method would."""
        self.call("Input.insertText", text=text)

    def press(self, key: str, code: str, key_code: int) -> None:
        """Press and release one non-printing key (``ArrowRight``, ``Tab``, ...)."""
        for kind in ("rawKeyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=key_code,
            )

    def console_problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors (CSP
        refusals among them) of this page so far."""
        problems: list[str] = []
        for event in self._c.events:
            if not self._mine(event):
                continue
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                args = params.get("args", [])
                problems.append(
                    "console."
                    + params["type"]
                    + ": "
                    + " ".join(str(a.get("value", a.get("description", ""))) for a in args)
                )
            elif event["method"] == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                text = details.get("exception", {}).get("description") or details.get("text")
                problems.append(f"uncaught: {text}")
            elif event["method"] == "Log.entryAdded":
                entry = params.get("entry", {})
                if entry.get("level") in ("error", "warning"):
                    problems.append(f"log.{entry.get('source')}: {entry.get('text')}")
        return problems


class Browser:
    """A headless Chromium with a fresh profile in ``workdir``; use as a context manager."""

    def __init__(self, binary: str, workdir: Path, timeout: float = 30.0) -> None:
        self.binary = binary
        self.workdir = workdir
        self.timeout = timeout
        self.profile = workdir / "chromium-profile"
        self.downloads = workdir / "downloads"
        self.process: subprocess.Popen[bytes] | None = None
        self._c: _Connection | None = None

    def __enter__(self) -> Browser:
        self.profile.mkdir(parents=True, exist_ok=True)
        self.downloads.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "chromium.log").open("wb")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--headless",
                "--no-sandbox",  # needed as root (containers, CI)
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        try:
            port, path = self._endpoint()
            self._c = _Connection(_WebSocket("127.0.0.1", port, path, self.timeout), self.timeout)
        except BaseException:
            self._stop()
            raise
        return self

    def _endpoint(self) -> tuple[int, str]:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                tail = (self.workdir / "chromium.log").read_text(errors="replace")[-2000:]
                raise BrowserError(f"chromium exited with {self.process.returncode}: {tail}")
            if marker.is_file():
                lines = marker.read_text().split()
                if len(lines) >= 2:
                    return int(lines[0]), lines[1]
            time.sleep(0.05)
        raise BrowserError(f"chromium wrote no DevToolsActivePort within {self.timeout} s")

    @property
    def connection(self) -> _Connection:
        if self._c is None:
            raise BrowserError("the browser is not running")
        return self._c

    def allow_downloads(self) -> None:
        """Save downloads under their suggested names in ``self.downloads``, with events."""
        self.connection.call(
            "Browser.setDownloadBehavior",
            behavior="allow",
            downloadPath=str(self.downloads),
            eventsEnabled=True,
        )

    def mark(self) -> int:
        """The number of events so far: pass it as ``since`` to wait for a later one."""
        return len(self.connection.events)

    def wait_for_download(self, since: int, timeout: float | None = None) -> Path:
        """The file of the first download begun after event ``since``, once complete."""
        started = self.connection.wait_for(
            lambda e: e["method"] == "Browser.downloadWillBegin",
            "a download to begin",
            timeout,
            since=since,
        )
        guid = started["params"]["guid"]
        self.connection.wait_for(
            lambda e: (
                e["method"] == "Browser.downloadProgress"
                and e["params"].get("guid") == guid
                and e["params"].get("state") == "completed"
            ),
            "the download to complete",
            timeout,
            since=since,
        )
        return self.downloads / started["params"]["suggestedFilename"]

    def new_page(self) -> Page:
        """A new tab with the page, runtime and log domains on (so console output is kept)."""
        target = self.connection.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.connection.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        page = Page(self.connection, session)
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            page.call(domain)
        return page

    def _stop(self) -> None:
        if self._c is not None:
            with contextlib.suppress(OSError):
                self._c.ws.close()
            self._c = None
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self._stop()
