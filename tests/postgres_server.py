"""A real PostgreSQL server for tests: Debian's ``initdb`` + ``pg_ctl`` on 127.0.0.1, nothing else.

The shared results store (`ragbridge.adapters.postgres_store`) is tested against the real
server, not a fake: what matters is what PostgreSQL does with concurrent transactions, COPY and
collations. A throwaway cluster is created in a temporary folder, listens on a free port of
127.0.0.1 (its socket in that folder too), takes a password over TCP (so the tests see that it
is never printed), and is stopped and deleted when the block (or the test session) ends.
Without the binaries the tests skip, saying how to install them; CI installs them (.ci/run).

``initdb`` refuses to run as root. When the tests run as root (a CI container), the cluster
belongs to the ``postgres`` user (Debian's package creates it), else ``nobody``, and the server
commands run through ``runuser``; the tests themselves connect over TCP as any user.

    pytest_plugins = ["postgres_server"]  # in the test module: its fixtures, for the session

    def test_something(postgres_url: str) -> None:
        store = open_store(postgres_url)  # a database of its own on the session's one cluster

Import the helpers inside the tests, not at the top of a test module (as for redis_server).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = [
    "PASSWORD",
    "SKIP_REASON",
    "USER",
    "create_database",
    "find_binaries",
    "free_port",
    "postgres_server",
    "postgres_server_url",
    "postgres_url",
]

SKIP_REASON = "PostgreSQL not installed: apt-get install postgresql (CI installs it)"

USER = "ragbridge"
"""The cluster's superuser."""

PASSWORD = "s3cret-Pw-never-shown"
"""Its password over TCP: a test can check the text appears in no output."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def find_binaries() -> tuple[str, str] | None:
    """``(initdb, pg_ctl)`` on PATH, else in Debian's ``/usr/lib/postgresql/<version>/bin``
    (the newest version), else None."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    folders = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda f: [int(p) if p.isdigit() else 0 for p in Path(f).parent.name.split(".")],
    )
    for folder in reversed(folders):
        initdb_path, pg_ctl_path = Path(folder, "initdb"), Path(folder, "pg_ctl")
        if initdb_path.exists() and pg_ctl_path.exists():
            return str(initdb_path), str(pg_ctl_path)
    return None


def _owner() -> str | None:
    """The user the cluster runs as when we are root (``initdb`` refuses root); None otherwise."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    pytest.skip("running as root with neither a postgres nor a nobody user for initdb")


def _run(args: list[str], owner: str | None, folder: Path) -> subprocess.CompletedProcess[str]:
    if owner is not None:
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser: initdb refuses root")
        args = [runuser, "-u", owner, "--", *args]
    return subprocess.run(
        args, cwd=folder, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        timeout=120,
    )  # fmt: skip


@contextmanager
def postgres_server(*, durable: bool = False) -> Iterator[str]:
    """Create and start a cluster; yield ``postgresql://ragbridge:PASSWORD@127.0.0.1:PORT``
    (no database: add ``/NAME``, e.g. from `create_database`; ``/postgres`` exists).

    ``durable=False`` (tests) turns fsync off: nothing outlives the block anyway. The benchmark
    passes True, so its figures are a real server's. Skips the calling test when the binaries
    are missing.
    """
    found = find_binaries()
    if found is None:
        pytest.skip(SKIP_REASON)
    initdb, pg_ctl = found
    owner = _owner()
    with tempfile.TemporaryDirectory(prefix="ragbridge-pg-") as name:
        folder = Path(name)
        data = folder / "data"
        secret = folder / "pw"
        secret.write_text(PASSWORD + "\n")
        if owner is not None:
            record = pwd.getpwnam(owner)
            for path in (folder, secret):
                os.chown(path, record.pw_uid, record.pw_gid)
        done = _run(
            [initdb, "-D", str(data), "-U", USER, "--pwfile", str(secret), "-A", "trust",
             "--auth-host", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8", "--no-sync"],
            owner, folder,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {(done.stderr or done.stdout).strip()[-800:]}")
        settings = "" if durable else " -c fsync=off -c synchronous_commit=off"
        log = folder / "server.log"
        for attempt in range(3):
            port = free_port()
            options = f"-k {folder} -h 127.0.0.1 -p {port} -c max_connections=200{settings}"
            done = _run(
                [pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60",
                 "start"],
                owner, folder,
            )  # fmt: skip
            if done.returncode == 0:
                try:
                    yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}"
                finally:
                    _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], owner, folder)
                return
            if attempt == 2:
                output = log.read_text(errors="replace") if log.exists() else done.stderr
                raise RuntimeError(f"pg_ctl start failed: {output.strip()[-800:]}")


def create_database(server_url: str, name: str | None = None) -> str:
    """A new empty database on the server at ``server_url``; its URL."""
    psycopg = pytest.importorskip("psycopg", reason='psycopg missing: pip install ".[postgres]"')
    name = name or f"t_{secrets.token_hex(6)}"
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server_url}/{name}"


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """One cluster for the whole session, started when a test first needs it (no database)."""
    with postgres_server() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server_url: str) -> str:
    """A database of the test's own on the session's cluster: ``postgresql://...:PORT/t_...``."""
    return create_database(postgres_server_url)
