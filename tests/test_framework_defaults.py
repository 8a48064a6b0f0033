"""ragbridge's defaults for the frameworks it loads: telemetry off (with an opt-in), the Hub
offline, and the frameworks' noise kept inside ragbridge's calls.

Unit tests of `ragbridge.adapters._frameworks` and `ragbridge.adapters._hub`, then
``ragbridge compare`` (RAGAS and DeepEval on a scripted judge) in a subprocess with a clean
environment and the `audit_hook`: no socket off loopback, nothing on stderr but ragbridge's own
lines. The demo gets the same checks in test_cli_demo.py.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from audit_hook import clean_env, install, off_loopback, read_log

from ragbridge.adapters._frameworks import (
    ALWAYS,
    TELEMETRY_OFF,
    TELEMETRY_OPT_IN,
    framework_noise_off,
    quiet_frameworks,
    telemetry_opted_in,
)
from ragbridge.adapters._hub import hub_offline, quiet_model_loading
from ragbridge.core.sample import Context, Sample, save_samples

SWITCHES = [*TELEMETRY_OFF, *ALWAYS]


@pytest.fixture
def no_switches(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [*SWITCHES, TELEMETRY_OPT_IN]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- quiet_frameworks -----------------------------------------------------------------------------


def test_telemetry_is_off_by_default(no_switches: pytest.MonkeyPatch) -> None:
    quiet_frameworks()
    quiet_frameworks()  # idempotent
    import os

    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"
    assert os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] == "YES"
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert os.environ["DEEPEVAL_DISABLE_DOTENV"] == "1"
    assert not telemetry_opted_in()


def test_a_users_explicit_setting_wins(no_switches: pytest.MonkeyPatch) -> None:
    no_switches.setenv("RAGAS_DO_NOT_TRACK", "false")
    quiet_frameworks()
    import os

    assert os.environ["RAGAS_DO_NOT_TRACK"] == "false"
    assert os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] == "YES"


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_the_opt_in_leaves_the_frameworks_defaults_alone(
    no_switches: pytest.MonkeyPatch, value: str
) -> None:
    no_switches.setenv(TELEMETRY_OPT_IN, value)
    quiet_frameworks()
    import os

    assert telemetry_opted_in()
    assert not [name for name in TELEMETRY_OFF if name in os.environ]
    assert os.environ["DEEPEVAL_DISABLE_DOTENV"] == "1"  # not telemetry: always set


def test_every_adapter_that_loads_a_framework_turns_telemetry_off_first() -> None:
    """Each module calls quiet_frameworks() before its framework is imported (read from the
    source, so a new adapter that forgets it fails here)."""
    root = Path(__file__).parents[1] / "adapters"
    modules = [
        "ragas/_framework.py",
        "deepeval/_framework.py",
        "compare.py",
        "local.py",
        "nli.py",
        "strings.py",
        "langsmith/_framework.py",
        "llamaindex/_framework.py",
        "demo/pipelines.py",
    ]
    for name in modules:
        source = (root / name).read_text(encoding="utf-8")
        assert "\nquiet_frameworks()" in source, name
    main = (root / "cli" / "main.py").read_text(encoding="utf-8")
    assert "    quiet_frameworks()" in main


# -- framework_noise_off --------------------------------------------------------------------------


def test_framework_warnings_stay_inside_and_levels_come_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ragas_logger = logging.getLogger("ragas.metrics._context_recall")
    before = logging.getLogger("ragas").level
    with caplog.at_level(logging.WARNING), framework_noise_off():
        ragas_logger.warning("No reference context IDs provided, cannot calculate recall.")
        ragas_logger.error("a real error still shows")
    assert [r.getMessage() for r in caplog.records] == ["a real error still shows"]
    assert logging.getLogger("ragas").level == before
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ragas_logger.warning("outside, untouched")
    assert [r.getMessage() for r in caplog.records] == ["outside, untouched"]


def test_langsmith_beta_warnings_stay_inside() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with framework_noise_off():
            warnings.warn("'upload_results' parameter is in beta.", UserWarning, stacklevel=1)
        warnings.warn("'upload_results' parameter is in beta.", UserWarning, stacklevel=1)
    assert len(seen) == 1


def test_nested_and_threaded_uses_restore_once() -> None:
    logger = logging.getLogger("deepeval")
    logger.setLevel(logging.INFO)
    try:
        with framework_noise_off():
            with framework_noise_off():
                assert logger.level == logging.ERROR
            assert logger.level == logging.ERROR
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(logging.NOTSET)


ROOT_LOGGING = """
import logging
from ragbridge.adapters.strings import RougeScore
RougeScore()  # rouge-score logs through absl, which would call logging.basicConfig()
print(len(logging.getLogger().handlers))
"""


def test_rouge_leaves_the_users_root_logger_unconfigured() -> None:
    if importlib.util.find_spec("rouge_score") is None:
        pytest.skip("needs the strings extra (rouge-score)")
    done = subprocess.run(
        [sys.executable, "-c", ROOT_LOGGING], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


# -- the Hub --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hf_hub_offline", "transformers_offline", "offline"),
    [
        (None, None, False),
        ("1", None, True),
        (None, "1", True),
        ("0", "1", False),  # huggingface_hub's rule: HF_HUB_OFFLINE first
        ("true", None, True),
        ("", "yes", True),
    ],
)
def test_hub_offline_is_read_at_call_time(
    monkeypatch: pytest.MonkeyPatch,
    hf_hub_offline: str | None,
    transformers_offline: str | None,
    offline: bool,
) -> None:
    for name, value in (
        ("HF_HUB_OFFLINE", hf_hub_offline),
        ("TRANSFORMERS_OFFLINE", transformers_offline),
    ):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert hub_offline() is offline


def test_model_loading_shows_no_progress_bar_and_restores_it() -> None:
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("needs transformers (the local-torch or nli extra)")
    from transformers.utils import logging as tf_logging

    tf_logging.enable_progress_bar()
    with quiet_model_loading():
        assert not tf_logging.is_progress_bar_enabled()
    assert tf_logging.is_progress_bar_enabled()


# -- ragbridge compare, as a user runs it ---------------------------------------------------------


def test_compare_with_ragas_and_deepeval_opens_no_socket_and_prints_no_noise(
    tmp_path: Path,
) -> None:
    """Before: DeepEval's PostHog upload retried against us.i.posthog.com and logged errors."""
    for module in ("ragas", "deepeval"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (pip install 'ragbridge[all]')")
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None
    data = tmp_path / "data.jsonl"
    save_samples(
        [
            Sample(
                id=f"q{i}",
                question=f"Where is landmark {i}?",
                answer=f"Landmark {i} is in {city}.",
                contexts=[Context(text=f"Landmark {i} stands in {city}.", id=f"d{i}")],
                reference=f"It is in {city}.",
                relevance={f"d{i}": 1} if i else {},
            )
            for i, city in enumerate(["Paris", "Rome", "Oslo"])
        ],
        data,
    )
    hooks = install(tmp_path / "hooks")
    done = subprocess.run(
        [
            exe, "compare", str(data), "--measures", "faithfulness,context_recall,rouge_l",
            "--judge", "python:ragbridge.core.testing:CountingJudge", "--embedder", "hash",
            "--cache", str(tmp_path / "cache.sqlite"),
        ],
        cwd=tmp_path, env=clean_env(tmp_path, hooks), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1 = a measure failed its bar
    assert "deepeval" in done.stdout
    audit = read_log(tmp_path)
    assert any(r["event"] == "exit" for r in audit)  # the hook was installed
    assert off_loopback(audit) == []
    for needle in ("posthog", "No reference context IDs", "is in beta", "Running teardown"):
        assert needle.lower() not in done.stderr.lower()
    foreign = [
        line for line in done.stderr.splitlines() if line and not line.startswith("ragbridge")
    ]
    assert foreign == [], done.stderr[-2000:]
