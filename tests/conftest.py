"""What makes the suite hermetic by itself, the ``--shuffle`` option, and shared fixtures.

Hermetic with no help from the shell (``python -m pytest -q`` exactly as the README says):

* **Environment**, set when this file is imported, before any test module imports a framework:
  the Hugging Face libraries offline, the frameworks' telemetry off, LangSmith's tracing and
  test tracking off, and no API key or endpoint of the developer's shell visible to a test.
* **Sockets**: every connection that is not loopback (127.0.0.0/8, ::1, localhost) or a Unix
  socket is refused, and so is resolving any other host name, with an error naming the host.
  A library may swallow that error (the Hugging Face client retries, then reports a missing
  model), so each refused attempt is also recorded and fails the test it happened in.
  Fake servers on 127.0.0.1 keep working.

``--shuffle`` runs the tests in a random order (modules shuffled, then the tests inside each
module), ``--shuffle=SEED`` in a given one; the seed is printed in the header and the summary.
Shuffling within modules, not across them, keeps each module's fixtures built once.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# -- environment: before any framework is imported ------------------------------------------

HERMETIC_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "RAGAS_DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "LANGSMITH_TEST_TRACKING": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
}
"""Set for the whole run: offline model hubs, telemetry off, LangSmith's pytest plugin local."""

UNSET_ENV = (
    "LANGSMITH_TRACING",
    "LANGSMITH_TRACING_V2",
    "LANGCHAIN_TRACING",
    "LANGCHAIN_TRACING_V2",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "RAGBRIDGE_FRAMEWORK_TELEMETRY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
"""Removed for the whole run: tracing that would post runs, endpoints and tokens of the shell."""


def _is_secret(name: str) -> bool:
    return name.endswith(("_API_KEY", "_API_TOKEN", "_ACCESS_TOKEN")) or name in UNSET_ENV


for _name in [n for n in os.environ if _is_secret(n)]:
    del os.environ[_name]
os.environ.update(HERMETIC_ENV)


# -- sockets: loopback only -----------------------------------------------------------------

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class NetworkBlocked(ConnectionRefusedError):
    """A test tried to reach a host that is not this machine (the suite is hermetic)."""


def is_local_host(host: Any) -> bool:
    """Whether ``host`` (a name, an address, bytes or None) means this machine."""
    if host is None:
        return True  # passive lookups (bind to any address)
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip().lower().rstrip(".")
    if name in LOCAL_NAMES or name.endswith(".localhost") or name in ("", "0.0.0.0", "::"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def is_local_address(family: int, address: Any) -> bool:
    """Whether a ``connect`` address stays on this machine (loopback or a Unix socket)."""
    if family == getattr(socket, "AF_UNIX", None) or isinstance(address, (str, bytes)):
        return True
    if isinstance(address, tuple) and address:
        return is_local_host(address[0])
    return False


class SocketGuard:
    """Patches ``socket`` so only loopback is reachable; records every refused attempt."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self._connect = socket.socket.connect
        self._connect_ex = socket.socket.connect_ex
        self._getaddrinfo = socket.getaddrinfo
        self._create_connection = socket.create_connection
        self._gethostbyname = socket.gethostbyname
        self._gethostbyname_ex = socket.gethostbyname_ex

    @staticmethod
    def _where(address: Any) -> str:
        if isinstance(address, tuple) and len(address) >= 2:
            return f"{address[0]!r} port {address[1]}"
        return repr(address)

    def _refuse(self, what: str) -> NetworkBlocked:
        self.refused.append(what)
        return NetworkBlocked(
            f"hermetic test suite: network access to {what} is blocked (only loopback and Unix "
            "sockets are allowed; see tests/conftest.py)"
        )

    def install(self) -> None:
        guard = self

        def connect(sock: socket.socket, address: Any) -> None:
            if not is_local_address(sock.family, address):
                raise guard._refuse(guard._where(address))
            guard._connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if not is_local_address(sock.family, address):
                raise guard._refuse(guard._where(address))
            result: int = guard._connect_ex(sock, address)
            return result

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_local_host(host):
                raise guard._refuse(f"host {host!r}")
            return guard._getaddrinfo(host, *args, **kwargs)

        def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
            if not (isinstance(address, tuple) and address and is_local_host(address[0])):
                raise guard._refuse(guard._where(address))
            return guard._create_connection(address, *args, **kwargs)

        def resolver(real: Any) -> Any:
            def resolve(host: Any) -> Any:
                if not is_local_host(host):
                    raise guard._refuse(f"host {host!r}")
                return real(host)

            return resolve

        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = getaddrinfo
        socket.create_connection = create_connection
        socket.gethostbyname = resolver(self._gethostbyname)
        socket.gethostbyname_ex = resolver(self._gethostbyname_ex)

    @contextmanager
    def expecting_refusals(self) -> Iterator[list[str]]:
        """For tests of the guard itself: refusals inside the block are expected, so they are
        handed to the caller instead of failing the test."""
        start = len(self.refused)
        seen: list[str] = []
        try:
            yield seen
        finally:
            seen.extend(self.refused[start:])
            del self.refused[start:]


GUARD = SocketGuard()
GUARD.install()  # now, so collection-time imports are covered too


@pytest.fixture
def network_guard() -> SocketGuard:
    """The suite's socket guard (to test it, or to expect a refusal on purpose)."""
    return GUARD


@contextmanager
def _no_network_attempt(phase: str) -> Iterator[None]:
    """Fail the phase (setup, call or teardown) in which something tried to leave the machine,
    even if the code under test swallowed the refusal (the Hugging Face client, posthog and
    urllib3 all catch connection errors and carry on)."""
    before = len(GUARD.refused)
    yield
    attempts = GUARD.refused[before:]
    if attempts:
        del GUARD.refused[before:]
        pytest.fail(
            f"the test tried to reach the network (blocked) during {phase}: "
            + "; ".join(attempts[:5]),
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _no_network_attempt("setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _no_network_attempt("the test"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _no_network_attempt("teardown"):
        return (yield)


# -- --shuffle -------------------------------------------------------------------------------


def _seed(value: str) -> int | str:
    if value == "random":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shuffle takes an integer seed, got {value!r}; write --shuffle=SEED, or put a bare "
            "--shuffle after the test paths"
        ) from None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle",
        nargs="?",
        const="random",
        default=None,
        type=_seed,
        metavar="SEED",
        help="run the tests in a random order (modules, then the tests within each module); "
        "--shuffle=SEED repeats an order. The seed is printed in the header and the summary.",
    )


def _shuffle_seed(config: pytest.Config) -> int | None:
    value = config.getoption("shuffle")
    if value is None:
        return None
    if value == "random":
        # Chosen once, in the process that parses the command line: pytest-xdist hands the
        # options to its workers, so every worker collects the same order.
        value = random.SystemRandom().randrange(10**8)
        config.option.shuffle = value
    seed: int = value
    return seed


def pytest_configure(config: pytest.Config) -> None:
    _shuffle_seed(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed = _shuffle_seed(config)
    return [] if seed is None else [f"shuffle seed: {seed} (repeat with --shuffle={seed})"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = _shuffle_seed(config)
    if seed is None:
        return
    rng = random.Random(seed)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = list(modules.values())
    rng.shuffle(order)
    for group in order:
        rng.shuffle(group)
    items[:] = [item for group in order for item in group]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    seed = _shuffle_seed(config)
    if seed is not None:
        terminalreporter.write_line(f"shuffle seed: {seed} (repeat with --shuffle={seed})")


# -- shared fixtures -------------------------------------------------------------------------

DATA = Path(__file__).parent / "data"
TREC_DATA = DATA / "trec_eval"


@pytest.fixture
def trec_data() -> Path:
    return TREC_DATA


@pytest.fixture(autouse=True)
def _no_remembered_reply_dialect() -> None:
    """Each test starts with no reply format remembered for any endpoint.

    `OpenAIJudge` remembers per base URL and model which ``response_format`` the server took.
    Fake servers on a reused loopback port can speak another dialect than an earlier test's,
    so a memory carried across tests would make the suite's outcome depend on its order.
    Imported only when a test already loaded the adapter (no import cost elsewhere).
    """
    import sys

    module = sys.modules.get("ragbridge.adapters.openai_dialect")
    if module is not None:
        module.forget_dialects()


@pytest.fixture(autouse=True)
def _no_criteria_left_registered() -> Iterator[None]:
    """A team's criteria registered by a test (``eval --criteria`` in process,
    `register_criteria`) are taken out of the global registry after it.

    The registry is process-wide, so a criterion one test registers would otherwise be listed,
    resolved and gated by every later test, and the suite's outcome would depend on its order.
    Nothing is imported unless a test already loaded the criteria package.
    """
    import sys

    yield
    if "ragbridge.core.criteria" not in sys.modules:
        return
    from ragbridge.core.registry import REGISTRY

    for measure in REGISTRY.measures(kind="criteria", plugins=False):
        REGISTRY.remove_measure(measure.name)
