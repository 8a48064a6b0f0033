"""A real Redis server for tests: Debian's ``redis-server`` binary on 127.0.0.1, nothing else.

The networked cache (`ragbridge.adapters.redis_cache`) is tested against the real server, not a
fake: what matters is what Redis does with MGET, MULTI and SCAN. The server runs in a temporary
folder with persistence off, on a free port, and stops when the block (or the test session)
ends. Without the binary the tests skip, saying how to install it; CI installs it (.ci/run).

    pytest_plugins = ["redis_server"]  # in the test module: its fixtures, for the session

    def test_something(redis_url: str) -> None:
        cache = open_cache(redis_url)  # an empty database on the session's one server

    def test_other() -> None:
        from redis_server import redis_server  # inside the test: see below

        with redis_server() as url:  # a server of its own, e.g. to stop it mid-test
            ...

Import the helpers inside the tests, not at the top of a test module: imported before pytest
loads this file as a plugin, it would miss pytest's assertion rewriting, and pytest warns.

Talks RESP over a plain socket (PING, FLUSHALL), so it needs no Redis client library.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = [
    "SKIP_REASON",
    "flush",
    "free_port",
    "ping",
    "redis_server",
    "redis_server_url",
    "redis_url",
]

SKIP_REASON = "redis-server not installed: apt-get install redis-server (CI installs it)"

_START_TIMEOUT_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _command(port: int, *words: str, timeout: float = 2.0) -> bytes:
    """One RESP command to the server on ``port``; its first reply line."""
    payload = f"*{len(words)}\r\n".encode() + b"".join(
        f"${len(w.encode())}\r\n{w}\r\n".encode() for w in words
    )
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.strip()


def ping(port: int) -> bool:
    """Whether a Redis server answers PING on ``port``."""
    try:
        return _command(port, "PING", timeout=0.5) == b"+PONG"
    except OSError:
        return False


def flush(port: int) -> None:
    """Empty every database of the server on ``port``."""
    reply = _command(port, "FLUSHALL")
    if reply != b"+OK":
        raise RuntimeError(f"FLUSHALL on port {port}: {reply!r}")


@contextmanager
def redis_server() -> Iterator[str]:
    """Start ``redis-server`` on a free port of 127.0.0.1; yield ``redis://127.0.0.1:PORT/0``.

    Persistence is off (``--save '' --appendonly no``) and the working folder is temporary, so
    nothing outlives the block. Skips the calling test when the binary is missing. A port taken
    between choosing and binding it is retried on another.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(SKIP_REASON)
    with tempfile.TemporaryDirectory(prefix="ragbridge-redis-") as folder:
        log = Path(folder) / "redis.log"
        for attempt in range(3):
            port = free_port()
            # The folder is the working directory, not --dir, so no path is on the command
            # line; with persistence off the server writes nothing there but its log.
            args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
                    "--logfile", log.name]  # fmt: skip
            process = subprocess.Popen(args, cwd=folder, stdin=subprocess.DEVNULL)
            try:
                if _wait_ready(process, port):
                    yield f"redis://127.0.0.1:{port}/0"
                    return
            finally:
                _stop(process)
            if attempt == 2:
                output = log.read_text(errors="replace") if log.exists() else ""
                raise RuntimeError(f"redis-server did not start: {output.strip()[-500:]}")


def _wait_ready(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the server answers PING before it exits or the time is up."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not ping(port):
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    """One server for the whole session, started when a test first needs it."""
    with redis_server() as url:
        yield url


@pytest.fixture
def redis_url(redis_server_url: str) -> str:
    """The session's server, emptied before the test: ``redis://127.0.0.1:PORT/0``."""
    flush(int(redis_server_url.rsplit(":", 1)[1].split("/", 1)[0]))
    return redis_server_url
