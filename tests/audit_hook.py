"""Watch a ``ragbridge`` subprocess's sockets from inside it: an audit hook via ``sitecustomize``.

Why: the suite's own socket guard (conftest.py) covers the test process only, and the commands
must be shown to stay offline with a user's environment, not the suite's. `install` writes a
``sitecustomize.py`` that `clean_env` puts on ``PYTHONPATH``; every Python process started with
that environment (and its Python children) then records each ``socket.connect`` and host
lookup (``getaddrinfo``, ``gethostbyname``, ``gethostbyaddr``) to a JSON-lines log, refuses
those off loopback (so nothing reaches the network even if the check is about to fail), and
notes at exit whether a model was loaded.
"""

from __future__ import annotations

import ipaddress
import json
import os
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["NOT_GIVEN", "SITECUSTOMIZE", "clean_env", "install", "off_loopback", "read_log"]

NOT_GIVEN = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "RAGAS_DO_NOT_TRACK",
    "DEEPEVAL_TELEMETRY_OPT_OUT",
    "DEEPEVAL_DISABLE_DOTENV",
    "LANGSMITH_TEST_TRACKING",
    "ANONYMIZED_TELEMETRY",
    "DO_NOT_TRACK",
    "RAGBRIDGE_FRAMEWORK_TELEMETRY",
    "ORT_DISABLE_TELEMETRY",
    "PYTHONPATH",
)
"""What the suite (or a developer's shell) sets that ragbridge must manage without."""

SITECUSTOMIZE = textwrap.dedent(
    '''
    """Test-only: record every socket connection and host lookup; refuse those off loopback."""
    import atexit, ipaddress, json, os, socket, sys

    _LOG = os.environ["RAGBRIDGE_TEST_AUDIT_LOG"]
    _LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
    _UNIX = getattr(socket, "AF_UNIX", -1)


    def _local(host):
        if host is None:
            return True
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        name = str(host).strip().lower().rstrip(".")
        if name in _LOCAL_NAMES or name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
        except ValueError:
            return False


    def _write(record):
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\\n")


    def _hook(event, args):
        if event == "socket.connect":
            sock, address = args
            if getattr(sock, "family", None) == _UNIX or not isinstance(address, tuple):
                target, local = address, True
            else:
                target, local = address[0], _local(address[0])
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
            target, local = args[0], _local(args[0])
        else:
            return
        _write({"pid": os.getpid(), "event": event, "target": repr(target), "local": local})
        if not local:
            raise ConnectionRefusedError(f"test audit hook: {event} {target!r} refused")


    def _at_exit():
        models = ("torch", "sentence_transformers", "ragbridge.adapters._bert_numpy")
        loaded = [m for m in models if m in sys.modules]
        _write({"pid": os.getpid(), "event": "exit", "argv": sys.argv[:2], "loaded": loaded})


    sys.addaudithook(_hook)
    atexit.register(_at_exit)
    '''
)


def install(folder: Path) -> Path:
    """Write the ``sitecustomize.py`` into ``folder``; returns the folder (for PYTHONPATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def clean_env(work: Path, hooks: Path) -> dict[str, str]:
    """This environment minus `NOT_GIVEN`, with HOME in ``work`` (RAGAS and DeepEval keep state
    there), the hook on PYTHONPATH and its log at ``work/audit.jsonl``."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_GIVEN}
    return {
        **env,
        "HOME": str(work / "home"),
        "PYTHONPATH": str(hooks),
        "RAGBRIDGE_TEST_AUDIT_LOG": str(work / "audit.jsonl"),
    }


def read_log(work: Path) -> list[dict[str, Any]]:
    """The records the hook wrote for processes run with ``clean_env(work, ...)``."""
    log = work / "audit.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def off_loopback(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The socket records that left (or tried to leave) the machine."""
    stray = []
    for record in records:
        if record["event"] == "exit" or record["local"]:
            continue
        try:  # belt and braces: re-check what the hook did not call local
            if ipaddress.ip_address(record["target"].strip("'")).is_loopback:
                continue
        except ValueError:
            pass
        stray.append(record)
    return stray
