"""Opt-in: open the HTML report in a real headless Chromium and check what a reader would get.

Runs only where a Chromium binary exists (``/usr/bin/chromium``, or ``RAGBRIDGE_CHROMIUM`` naming
one; on Debian ``apt-get install -y chromium``). It checks that the page renders with its
sections, logs nothing to the console (a CSP violation or a script error would), that the
report's own script runs (it opens the ``<details>`` a URL fragment points at), and that a
``<script>`` planted in a retrieved context does not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ragbridge.adapters.report import sample_anchor, write_report
from ragbridge.core.results.crosscheck import compare_frameworks
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall, Turn


def _chromium() -> str | None:
    configured = os.environ.get("RAGBRIDGE_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(candidate).is_file():
            return candidate
    return shutil.which("chromium")


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary: install one (Debian: apt-get install -y chromium) or set "
    "RAGBRIDGE_CHROMIUM=/path/to/chromium to run the browser checks of the HTML report",
)

PLANTED = "<script>document.body.setAttribute('data-pwned','1')</script>"
HOSTILE = [
    PLANTED,
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">",
    "\"><svg onload=\"document.body.setAttribute('data-pwned','3')\">",
    "</details><script>document.body.setAttribute('data-pwned','4')</script>",
]


def _dump_dom(page: Path, tmp_path: Path, fragment: str = "") -> tuple[str, str]:
    """Run Chromium headless on ``page`` and return (serialised DOM, stderr log)."""
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _console_lines(stderr: str, page: Path) -> list[str]:
    """Console messages (errors, CSP refusals, uncaught exceptions) the page produced."""
    uri = page.resolve().as_uri()
    return [
        line
        for line in stderr.splitlines()
        if (":CONSOLE" in line or "Uncaught" in line) and (uri in line or "source: " not in line)
    ]


def _report(tmp_path: Path) -> Path:
    samples = [
        Sample(
            id="safe",
            question="What is the capital of France?",
            answer="Paris.",
            contexts=[Context(text="Paris is the capital of France.", id="d1")],
            relevance={"d1": 1},
        ),
        Sample(
            id='evil"><script>document.body.setAttribute("data-pwned","5")</script>',
            question="Hostile?",
            answer="</details></section><script>document.body.setAttribute('data-pwned','6')"
            "</script>",
            contexts=[Context(text=t, id=f"h{i}") for i, t in enumerate(HOSTILE)],
            relevance={"h9": 1},
            # a conversation's turn: its history is shown turn by turn, all of it escaped
            history=[
                Turn(role="user", content=HOSTILE[1]),
                Turn(
                    role="assistant",
                    content=HOSTILE[3],
                    contexts=[Context(text=HOSTILE[2])],
                    tool_calls=[ToolCall(name=PLANTED, id="c1")],
                ),
                Turn(role="tool", content=PLANTED, tool_call_id="c1"),
            ],
            metadata={"conversation": {"id": HOSTILE[2], "turn": 4}},
            # an agent's sample: its steps are shown one by one, all of it escaped
            trajectory=[
                Step(
                    name=HOSTILE[0],
                    args={HOSTILE[1]: HOSTILE[3]},
                    output=PLANTED,
                    error=HOSTILE[2],
                    contexts=[Context(text=HOSTILE[1], id=HOSTILE[0])],
                )
            ],
            reference_tool_calls=[ToolCall(name=HOSTILE[3], args={"q": PLANTED})],
        ),
    ]
    a = Evaluation(metadata={"judge_model": "<script>x</script>"})
    b = Evaluation()
    for ev, shift in ((a, 0.0), (b, 0.2)):
        ev.add("safe", "recall@5", Score(value=1.0))
        ev.add("safe", "faithfulness", Score(value=0.9 - shift, reason="fine"))
        ev.add(samples[1].id, "recall@5", Score(value=0.0))
        ev.add(samples[1].id, "faithfulness", Score(value=0.8, reason=PLANTED))
    comparison = compare_frameworks({"a": a, "b": b})
    return write_report(
        tmp_path / "report.html",
        {"a": a, "b": b},
        samples=samples,
        comparison=comparison,
        title="Browser check",
    )


def test_report_renders_without_console_errors_and_planted_script_does_not_run(
    tmp_path: Path,
) -> None:
    page = _report(tmp_path)
    dom, stderr = _dump_dom(page, tmp_path)
    for section in ("overview", "summary", "distributions", "quadrants", "comparison", "samples"):
        assert f'<section id="{section}">' in dom, section
    assert "<h1>Browser check</h1>" in dom
    assert dom.count('<details class="sample"') == 4  # two samples × two pipelines
    assert dom.count('<circle class="pt') == 4
    # the planted scripts and handlers stayed text: nothing set the attribute on <body>
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert "data-pwned" not in body.group(0)
    assert not re.search(r"data-pwned=\"\d\"", dom)
    assert "&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt;" in dom
    assert _console_lines(stderr, page) == []
    assert "Conversation so far" in dom  # the hostile history was rendered, as text
    assert "Reference tool calls" in dom  # and the hostile trajectory


def test_the_reports_own_script_runs_under_its_content_security_policy(tmp_path: Path) -> None:
    page = _report(tmp_path)
    anchor = sample_anchor("safe", "b")
    dom, stderr = _dump_dom(page, tmp_path, fragment=f"#{anchor}")
    opened = re.search(rf'<details class="sample" id="{anchor}"[^>]*>', dom)
    assert opened is not None
    assert "open" in opened.group(0)  # our inline script (allowed by its CSP hash) ran
    closed = re.search(rf'<details class="sample" id="{sample_anchor("safe", "a")}"[^>]*>', dom)
    assert closed is not None
    assert "open" not in closed.group(0)
    assert _console_lines(stderr, page) == []


def test_the_conversations_section_keeps_hostile_ids_and_reasons_as_text(tmp_path: Path) -> None:
    # The roll-up table shows conversation ids, metric names and a failing turn's reason (a
    # title attribute): user text the rest of the report does not show in those places.
    from ragbridge.core.conversation import Conversation
    from ragbridge.core.multiturn import LEVELS_KEY

    metric = HOSTILE[1]
    conversations = [
        Conversation(
            id=text,
            turns=[
                Turn(role="user", content=HOSTILE[0]),
                Turn(role="assistant", content=HOSTILE[3], contexts=[Context(text=HOSTILE[2])]),
            ],
        )
        for text in (HOSTILE[0], HOSTILE[2])
    ]
    ev = Evaluation(metadata={LEVELS_KEY: {metric: "turn", "recall@5": "conversation"}})
    for c in conversations:
        ev.add(f"{c.id}#1", metric, Score.fail("parse_error", PLANTED))
        ev.add(c.id, "recall@5", Score(value=0.5))
    samples = [c.turn_sample(1) for c in conversations]
    page = write_report(tmp_path / "conversations.html", ev, samples=samples)
    dom, stderr = _dump_dom(page, tmp_path)
    assert '<section id="conversations">' in dom
    assert dom.count("<tr data-conversation=") == 2
    assert not re.search(r"data-pwned=\"\d\"", dom)
    assert _console_lines(stderr, page) == []


def test_the_console_check_does_catch_page_errors(tmp_path: Path) -> None:
    # A control: the check above must be able to fail.
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><p>x</p>"
        "<script>console.error('boom'); notDefined();</script></body></html>",
        encoding="utf-8",
    )
    _, stderr = _dump_dom(bad, tmp_path)
    lines = _console_lines(stderr, bad)
    assert any("boom" in line for line in lines)
    assert any("Uncaught ReferenceError" in line for line in lines)
