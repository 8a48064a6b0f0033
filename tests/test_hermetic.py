"""The suite is hermetic by itself (tests/conftest.py): no network off loopback, no keys, offline
switches set, and ``--shuffle`` orders the tests reproducibly.

The guard is exercised directly (a connection to a public address is refused, loopback and Unix
sockets work) and through a copy of the conftest in a pytest subprocess (an attempt the code
under test swallows still fails the test; the shuffle seed is printed and repeatable).
"""

from __future__ import annotations

import http.server
import os
import socket
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")
PUBLIC = ("203.0.113.7", 443)  # TEST-NET-3: documentation-only, and not this machine


@pytest.fixture
def http_server() -> Iterator[int]:
    """A tiny HTTP server on 127.0.0.1 (as the suite's fake judge servers are); yields its port."""

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


# -- refused ------------------------------------------------------------------------------------


def test_connecting_to_a_public_address_is_refused_naming_it(network_guard: Any) -> None:
    with network_guard.expecting_refusals() as refused:
        with pytest.raises(ConnectionRefusedError, match=r"203\.0\.113\.7.*blocked"):
            socket.create_connection(PUBLIC, timeout=1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            with pytest.raises(OSError, match="blocked"):
                sock.connect(PUBLIC)
            with pytest.raises(OSError, match="blocked"):
                sock.connect_ex(PUBLIC)
    assert len(refused) == 3
    assert all("203.0.113.7" in r for r in refused)


def test_resolving_a_public_host_is_refused_naming_it(network_guard: Any) -> None:
    with network_guard.expecting_refusals() as refused:
        with pytest.raises(OSError, match=r"huggingface\.co"):
            socket.getaddrinfo("huggingface.co", 443)
        with pytest.raises(OSError, match=r"us\.i\.posthog\.com"):
            socket.gethostbyname("us.i.posthog.com")
        with pytest.raises(urllib.error.URLError, match=r"t\.explodinggradients\.com"):
            urllib.request.urlopen("https://t.explodinggradients.com/", timeout=1)
    assert ["huggingface.co" in r for r in refused][:1] == [True]
    assert len(refused) == 3


def test_an_http_client_cannot_leave_the_machine(network_guard: Any) -> None:
    httpx = pytest.importorskip("httpx")
    with (
        network_guard.expecting_refusals() as refused,
        pytest.raises(httpx.ConnectError, match="blocked"),
    ):
        httpx.get("https://api.openai.com/v1/models", timeout=1)
    assert refused == ["'api.openai.com' port 443"]


# -- allowed ------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_http_works(http_server: int, host: str) -> None:
    with urllib.request.urlopen(f"http://{host}:{http_server}/", timeout=5) as reply:
        assert reply.read() == b"hello"


def test_loopback_raw_socket_and_the_whole_127_block_are_allowed(http_server: int) -> None:
    with socket.create_connection(("127.0.0.1", http_server), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert b"hello" in sock.recv(4096) + sock.recv(4096)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        # 127.0.0.2 is loopback too: nothing listens there, so the kernel refuses, not the guard.
        code = sock.connect_ex(("127.0.0.2", http_server))
        assert code != 0 or sock.getpeername()[0] == "127.0.0.2"


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets on this platform")
def test_unix_sockets_are_allowed() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "s")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(path)
            server.listen(1)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(path)
                peer, _ = server.accept()
                with peer:
                    client.sendall(b"ok")
                    assert peer.recv(2) == b"ok"


# -- environment --------------------------------------------------------------------------------


def test_offline_and_opt_out_switches_are_set_and_no_key_is_visible() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"
    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"
    assert os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] == "YES"
    assert os.environ["DEEPEVAL_DISABLE_DOTENV"] == "1"
    assert os.environ["LANGSMITH_TEST_TRACKING"] == "false"
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "OPENAI_BASE_URL"):
        assert name not in os.environ
    assert not [n for n in os.environ if n.endswith("_API_KEY")]


# -- through pytest itself (subprocesses with a copy of the conftest) ---------------------------


def _project(pytester: pytest.Pytester, tests: str) -> None:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(test_inner=tests)


def test_a_swallowed_attempt_still_fails_the_test(pytester: pytest.Pytester) -> None:
    _project(
        pytester,
        """
import socket

def test_sneaky():
    try:  # a library that catches the error and carries on
        socket.create_connection(("203.0.113.7", 80), timeout=1)
    except OSError:
        pass

def test_local_only():
    socket.getaddrinfo("localhost", 80)
""",
    )
    result = pytester.runpytest_subprocess("-p", "no:deepeval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*tried to reach the network (blocked) during the test: '203.0.113.7' port 80"]
    )


def _order(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[1] for line in result.outlines if "::test_" in line]


def test_shuffle_prints_its_seed_and_repeats_an_order(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    for module in "ab":
        pytester.makepyfile(
            **{
                f"test_{module}": "\n".join(
                    f"def test_{module}_{i}():\n    pass\n" for i in range(8)
                )
            }
        )
    base = ("--collect-only", "-q", "-p", "no:deepeval", "-p", "no:cacheprovider")
    plain = _order(pytester.runpytest_subprocess(*base))
    first = pytester.runpytest_subprocess(*base, "--shuffle=1234")
    again = pytester.runpytest_subprocess(*base, "--shuffle=1234")
    random_seed = pytester.runpytest_subprocess(*base, "--shuffle")
    assert plain == [f"test_{m}_{i}" for m in "ab" for i in range(8)]
    assert _order(first) == _order(again)
    assert _order(first) != plain
    assert sorted(_order(first)) == sorted(plain)
    # Modules stay together, so each module's fixtures are built once.
    modules = [name.split("_")[1] for name in _order(first)]
    assert modules in (["a"] * 8 + ["b"] * 8, ["b"] * 8 + ["a"] * 8)
    first.stdout.fnmatch_lines(["shuffle seed: 1234 (repeat with --shuffle=1234)"])
    random_seed.stdout.fnmatch_lines(["shuffle seed: * (repeat with --shuffle=*)"])
    bad = pytester.runpytest_subprocess(*base, "--shuffle=abc")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*--shuffle takes an integer seed*"])
