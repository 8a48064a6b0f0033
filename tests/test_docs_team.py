"""The page "ragbridge for a team" (docs/how-to/team.md) runs as written.

Its ```bash blocks are run line by line, in order, in an empty folder (holding the repository's
``adapters`` folder, whose demo data the commands read): the throwaway PostgreSQL server is
started by the page's own ``initdb``/``pg_ctl`` lines, the runs are recorded in it, the gate and
the history read it, ``ragbridge serve`` is started, asked for its runs page and stopped, and the
page's last line stops the server. ``export`` lines set the environment of the lines after them,
as in a shell. As root (CI containers), the server's lines run as the ``postgres`` user, since
``initdb`` refuses root; everything else runs as the test's user.

What the page says of the results is checked too: the gate passes with recall@4 down 0.041 at
p = 0.25, and the runs page lists both branches.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import SKIP_REASON, find_binaries

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "team.md"
PORT = 55439
SERVER_TOOLS = ("initdb", "pg_ctl")


def page_lines() -> list[str]:
    """The lines of the page's ```bash blocks, in order (a trailing ``\\`` joins the next)."""
    lines: list[str] = []
    inside = False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```bash" if not inside else False
            continue
        if inside and line.strip() and not line.lstrip().startswith("#"):
            if lines and lines[-1].endswith("\\"):
                lines[-1] = lines[-1][:-1] + line.strip()
            else:
                lines.append(line.strip())
    return lines


def test_the_page_has_the_lines_this_test_runs() -> None:
    lines = page_lines()
    firsts = [shlex.split(line)[0] for line in lines]
    assert firsts[:2] == ["initdb", "pg_ctl"]
    assert firsts[-1] == "pg_ctl"
    assert sum(1 for line in lines if line.startswith("ragbridge serve ")) == 1
    assert any(line.startswith("ragbridge gate ") and "--markdown" in line for line in lines)
    assert all(f"127.0.0.1:{PORT}" in line for line in lines if "postgresql://" in line)


def _owner() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root without a postgres user: initdb refuses root")
    if shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: initdb refuses root")
    return "postgres"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _get(url: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                body: bytes = reply.read()
                return body.decode("utf-8")
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.fixture
def folder() -> Iterator[Path]:
    """An empty folder the server's user can enter (pytest's own is root's alone, mode 700)."""
    with tempfile.TemporaryDirectory(prefix="ragbridge-team-") as name:
        work = Path(name)
        (work / "adapters").symlink_to(ROOT / "adapters")
        owner = _owner()
        if owner is not None:
            record = pwd.getpwnam(owner)
            os.chown(work, record.pw_uid, record.pw_gid)
        try:
            yield work
        finally:
            _stop_if_running(work, owner)


def _stop_if_running(work: Path, owner: str | None) -> None:
    if (work / "team-store" / "postmaster.pid").exists():  # the page's stop did not run
        found = find_binaries()
        assert found is not None
        stop = [found[1], "-D", "team-store", "-m", "immediate", "-w", "stop"]
        if owner is not None:
            stop = ["runuser", "-u", owner, "--", *stop]
        subprocess.run(stop, cwd=work, capture_output=True, check=False, timeout=60)


def test_the_team_page_runs_as_written(folder: Path) -> None:
    found = find_binaries()
    if found is None:
        pytest.skip(SKIP_REASON)
    pytest.importorskip("psycopg", reason='psycopg missing: pip install ".[postgres]"')
    pytest.importorskip("starlette", reason='starlette missing: pip install ".[serve]"')
    if not _port_free(PORT):
        pytest.fail(f"port {PORT}, which the page uses, is taken on 127.0.0.1")
    owner = _owner()
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(found[0]).parent), env.get("PATH", "")])
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in page_lines():
        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            continue
        if words[:2] == ["ragbridge", "serve"]:
            _check_serve(line, folder, env)
            continue
        args = ["bash", "-c", line]
        if owner is not None and words[0] in SERVER_TOOLS:
            args = ["runuser", "-u", owner, "--", "env", f"PATH={env['PATH']}", *args]
        done = subprocess.run(
            args, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stderr[-2000:]}"
        outputs[words[0] + " " + words[1]] = done
    gate = outputs["ragbridge gate"].stdout
    assert gate.startswith("**✓ ragbridge gate passed**")
    recall = next(row for row in gate.splitlines() if row.startswith("| recall@4 |"))
    assert "| -0.041 |" in recall
    assert "| 0.252 |" in recall
    assert "| 37 |" in recall
    assert "postgresql://ragbridge@127.0.0.1" in outputs["ragbridge history"].stdout
    assert re.search(r"3 runs|2 runs", outputs["ragbridge history"].stdout)


def _check_serve(line: str, folder: Path, env: dict[str, str]) -> None:
    """Start the page's ``serve`` line, read its runs page and a filtered one, stop it."""
    server = subprocess.Popen(
        ["bash", "-c", f"exec {line}"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        home = _get("http://127.0.0.1:8765/")
        assert "main" in home
        assert "new-retriever" in home
        only = _get("http://127.0.0.1:8765/?branch=new-retriever")
        assert only.count(">run<") + only.count(">gate<") >= 1
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
