"""No packet leaves the machine: ``ragbridge demo`` and ``ragbridge eval`` watched by ``strace``.

Why strace and not only the audit hook of `audit_hook` (tests/test_cli_demo.py): native code
never passes through Python's ``socket`` module. ONNX Runtime 1.29 and later, the default
embedder's backend, start a telemetry uploader in C++ when ``onnxruntime`` is imported; it
resolved ``mobile.events.data.microsoft.com`` several times a run (DNS queries on port 53 to the
resolver, which the audit hook never saw) until ragbridge set ``ORT_DISABLE_TELEMETRY=1`` itself
(`ragbridge.adapters._hub.disable_runtime_telemetry`). The kernel sees every socket, so the
commands run as ``strace -f -e trace=connect,sendto,sendmsg,sendmmsg``; any AF_INET or AF_INET6
address outside 127.0.0.0/8 and ::1 (an IPv4-mapped ::ffff:a.b.c.d counts as its IPv4 address)
fails the test, DNS included, and the offending lines are printed.

The environment is a user's, not the suite's: the switches tests/conftest.py sets (and those
`audit_hook.NOT_GIVEN` lists) are removed, so what passes is what ragbridge sets on its own; so
are ``ORT_DISABLE_TELEMETRY`` and the CI markers (``CI``, ``GITHUB_ACTIONS`` ...): ONNX Runtime
keeps quiet on a CI machine by itself, and CI runs with ``CI=true``, which would hide the fault.
HOME is a fresh folder: ONNX Runtime's uploader writes a device id and an event queue under
``~/.cache/Microsoft`` at import, even when the process ends before its first upload (~9 s in),
so an empty HOME afterwards is a second, timing-free sign that the telemetry never started.

Skipped where strace is absent (CI installs it: .ci/run), or where the command's own extras are
not installed (the tox environments with one framework only).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from audit_hook import NOT_GIVEN
from conftest import HERMETIC_ENV

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(
    STRACE is None, reason="strace is not installed (apt-get install strace; CI installs it)"
)

DATA = Path(__file__).parent / "data" / "twelve_samples.jsonl"

DEMO_NEEDS = ("langchain_core", "llama_index", "langsmith", "ragas", "deepeval", "tokenizers")

CI_MARKERS = (
    "CI",
    "TF_BUILD",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "CIRCLECI",
    "TRAVIS",
    "JENKINS_URL",
    "CODEBUILD_BUILD_ID",
    "BUILDKITE",
    "TEAMCITY_VERSION",
    "APPVEYOR",
    "BITBUCKET_BUILD_NUMBER",
)
"""Variables whose presence keeps ONNX Runtime's telemetry off by itself (names from its
library's strings); a user's shell has none of them."""

NOT_IN_A_USERS_SHELL = frozenset(
    {*HERMETIC_ENV, *NOT_GIVEN, *CI_MARKERS, "ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME"}
)

_FAMILY = re.compile(r"sa_family=(AF_INET6|AF_INET)\b")
_IPV4 = re.compile(r'inet_addr\("([^"]*)"\)')
_IPV6 = re.compile(r'inet_pton\(AF_INET6,\s*"([^"]*)"')


def user_env(home: Path) -> dict[str, str]:
    """This process's environment as a user's shell would have it, with HOME in ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_IN_A_USERS_SHELL}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home)}


def _is_loopback(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False  # unreadable: reported, never waved through
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def off_loopback(trace: str) -> list[str]:
    """The lines of an strace log that name an AF_INET/AF_INET6 address off loopback."""
    stray = []
    for line in trace.splitlines():
        family = _FAMILY.search(line)
        if family is None:
            continue  # AF_UNIX, AF_NETLINK, a resumed call, an exit line
        found = (_IPV6 if family.group(1) == "AF_INET6" else _IPV4).search(line)
        if found is None or not _is_loopback(found.group(1)):
            stray.append(line)
    return stray


def run_traced(args: list[str], work: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``ragbridge ARGS`` in ``work`` under strace with a user's environment; the result and
    the trace."""
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None, "the ragbridge console script is not installed next to this Python"
    assert STRACE is not None
    log = work / "strace.log"
    done = subprocess.run(
        [STRACE, "-f", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-o", str(log), exe, *args],
        cwd=work, env=user_env(work / "home"), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    trace = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    assert "+++ exited with 0 +++" in trace, f"strace recorded no process exit:\n{trace[-2000:]}"
    return done, trace


def assert_stayed_home(trace: str, home: Path) -> None:
    stray = off_loopback(trace)
    assert not stray, f"{len(stray)} socket call(s) off loopback:\n" + "\n".join(stray[:40])
    telemetry = home / ".cache" / "Microsoft"
    written = sorted(str(p.relative_to(home)) for p in telemetry.rglob("*"))
    assert not written, f"ONNX Runtime's telemetry started (it wrote {written})"


def _missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


# -- the commands -----------------------------------------------------------------------------


@needs_strace
def test_the_demo_sends_nothing_off_loopback(tmp_path: Path) -> None:
    missing = _missing(DEMO_NEEDS)
    if missing:
        pytest.skip(f"the demo needs pip install 'ragbridge[all]' (missing: {', '.join(missing)})")
    _, trace = run_traced(["demo", "--out", "out"], tmp_path)
    assert_stayed_home(trace, tmp_path / "home")


@needs_strace
def test_eval_with_the_offline_providers_sends_nothing_off_loopback(tmp_path: Path) -> None:
    if _missing(("tokenizers",)):
        pytest.skip("the offline embedder needs pip install 'ragbridge[local]'")
    done, trace = run_traced(["eval", str(DATA), "--out", "scores.jsonl"], tmp_path)
    assert (tmp_path / "scores.jsonl").stat().st_size > 0, done.stdout[-2000:]
    assert_stayed_home(trace, tmp_path / "home")


# -- the switch, without strace ---------------------------------------------------------------

_SEEN_AT_IMPORT = """
import os, sys
seen = []
def hook(event, args):
    if event == "import" and str(args[0]).startswith("onnxruntime") and not seen:
        seen.append(os.environ.get("ORT_DISABLE_TELEMETRY"))
sys.addaudithook(hook)
from ragbridge.adapters.local import LocalEmbedder
LocalEmbedder(backend="onnx").load()
print("at import:", seen)
"""


def test_the_switch_is_set_before_onnxruntime_is_imported(tmp_path: Path) -> None:
    """The embedder imports onnxruntime with ``ORT_DISABLE_TELEMETRY=1`` already set, in a user's
    environment; ORT reads it only then (later is too late)."""
    if _missing(("onnxruntime", "onnx", "tokenizers")):
        pytest.skip("the onnx backend needs pip install 'ragbridge[local]'")
    done = subprocess.run(
        [sys.executable, "-c", _SEEN_AT_IMPORT], cwd=tmp_path, env=user_env(tmp_path / "home"),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "at import: ['1']" in done.stdout, done.stdout
    assert not (tmp_path / "home" / ".cache" / "Microsoft").exists()


def test_the_switch_leaves_a_users_choice_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragbridge.adapters._hub import disable_runtime_telemetry

    monkeypatch.delenv("RAGBRIDGE_FRAMEWORK_TELEMETRY", raising=False)
    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    disable_runtime_telemetry()
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"

    monkeypatch.setenv("ORT_DISABLE_TELEMETRY", "0")  # set on purpose: kept
    disable_runtime_telemetry()
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "0"

    monkeypatch.delenv("ORT_DISABLE_TELEMETRY")
    monkeypatch.setenv("RAGBRIDGE_FRAMEWORK_TELEMETRY", "1")  # the documented opt-in
    disable_runtime_telemetry()
    assert "ORT_DISABLE_TELEMETRY" not in os.environ


# -- the trace reader -------------------------------------------------------------------------

_DNS = (
    '7 connect(8, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, '
    "16) = 0"
)


@pytest.mark.parametrize(
    ("line", "stray"),
    [
        (_DNS, True),
        (_DNS.replace("10.255.255.53", "127.0.0.1"), False),
        (_DNS.replace("10.255.255.53", "127.8.9.10"), False),
        (_DNS.replace(") = 0", " <unfinished ...>"), True),
        (
            '7 sendto(3, "x", 1, 0, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo='
            'htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = 1',
            True,
        ),
        (
            "7 connect(3, {sa_family=AF_INET6, sin6_port=htons(9), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ECONNREFUSED',
            False,
        ),
        (
            "7 connect(3, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "::ffff:10.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
            True,
        ),
        (
            "7 connect(3, {sa_family=AF_INET6, sin6_port=htons(9), sin6_flowinfo=htonl(0), "
            'inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
            False,
        ),
        (
            "7 sendmsg(5, {msg_name={sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("
            '"8.8.8.8")}, msg_namelen=16, msg_iov=[...], msg_iovlen=1}, 0) = 40',
            True,
        ),
        ("7 connect(5, {sa_family=AF_INET, sin_port=htons(53), ...}, 16) = 0", True),
        ('7 connect(4, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0', False),
        ('7 sendto(8, "\\0", 1, 0, NULL, 0) = 1', False),
        ("7 <... connect resumed>) = 0", False),
    ],
)
def test_the_trace_reader_flags_every_address_off_loopback(line: str, stray: bool) -> None:
    assert off_loopback(f"1 execve(...) = 0\n{line}\n1 +++ exited with 0 +++") == (
        [line] if stray else []
    )
