"""The annotation form round trip in a real headless Chromium: export, fill, reload, save, import.

Runs where a Chromium binary exists (Debian: ``apt-get install -y chromium``; or
``RAGBRIDGE_CHROMIUM=/path/to/chromium``), skipped with that advice elsewhere. The browser is
driven through the DevTools protocol (`_chromium`, standard library only): radios are clicked and
the comment and name typed with real input events, one answer is chosen with the arrow keys,
the page is reloaded to show the answers survive, and the Save button's download is caught in a
temporary folder and imported with ``ragbridge annotate import``. Along the way: no console
error, warning or policy refusal, and the script and handlers planted in a question, a context
and an answer stay text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _chromium import SKIP_REASON, Browser, Page, find_chromium

from ragbridge.adapters.cli import main
from ragbridge.core.labels.annotation import AnnotationTask, load_tasks
from ragbridge.core.labels.human import HumanLabel, load_labels
from ragbridge.core.sample import Context, Sample, save_samples

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

PLANTED_QUESTION = (
    "<script>document.body.setAttribute('data-pwned','1'); window.pwned = 1</script>"
    "Is this <b>bold</b>?"
)
PLANTED_CONTEXT = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"
PLANTED_ANSWER = "</p></section><script>window.pwned = 3</script>"
HOSTILE_ID = "evil\"'</script><script>window.pwned = 4</script>"


def _export(tmp_path: Path) -> tuple[Path, Path, list[AnnotationTask]]:
    samples = [
        Sample(
            id=HOSTILE_ID,
            question=PLANTED_QUESTION,
            answer=PLANTED_ANSWER,
            contexts=[Context(text=PLANTED_CONTEXT, id="h1"), Context(text="Plain text.")],
        ),
        *[
            Sample(
                id=f"leave-{i}",
                question=f"How many days of leave does policy {i} grant?",
                answer=f"{20 + i} days.",
                contexts=[Context(text=f"Policy {i}: {20 + i} days of paid leave.", id=f"p{i}")],
                reference=f"{20 + i} days.",
            )
            for i in range(3)
        ],
    ]
    data = tmp_path / "eval.jsonl"
    save_samples(samples, data)
    tasks, form = tmp_path / "tasks.jsonl", tmp_path / "form.html"
    argv = ["annotate", "export", str(data), "--n", "4", "--out", str(tasks), "--html", str(form)]
    assert main(argv) == 0
    return tasks, form, load_tasks(tasks)


def _checked(page: Page) -> dict[str, str]:
    """Every checked radio: control name → value."""
    value: dict[str, str] = page.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('input[type=radio]:checked'))"
        ".map(function (r) { return [r.name, r.value]; }))"
    )
    return value


def _text(page: Page, selector: str) -> Any:
    return page.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")


def test_fill_reload_save_and_import_in_chromium(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    tasks_path, form, tasks = _export(tmp_path)
    index = {task.sample_id: i for i, task in enumerate(tasks)}
    evil, plain = index[HOSTILE_ID], index["leave-0"]
    partial, untouched = index["leave-1"], index["leave-2"]
    comment = 'Odd "quote", ünïcode & <tags>'
    with Browser(CHROMIUM, tmp_path) as browser:
        browser.allow_downloads()
        page = browser.new_page()
        page.goto(form.as_uri())
        assert page.evaluate("document.body.getAttribute('data-ready')") == "1"

        # The planted markup is on the page as text and ran nothing.
        assert _text(page, f"#task-{evil} .question") == PLANTED_QUESTION
        assert _text(page, f"#task-{evil} .answer") == PLANTED_ANSWER
        assert _text(page, f"#task-{evil} .context") == PLANTED_CONTEXT
        assert page.evaluate("document.querySelectorAll('img, b').length") == 0
        assert page.evaluate("document.body.hasAttribute('data-pwned')") is False
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('script').length") == 2

        # Saving with no name asks for one and downloads nothing.
        page.click(f"input[name='t{plain}-relevance'][value='2']")
        page.click("#save")
        assert "Type your name first" in _text(page, "#message")
        assert page.evaluate("document.activeElement.id") == "annotator"

        # Fill two tasks completely, one partly, leave one alone.
        for t, answers in ((evil, ("1", "2", "no", "1")), (plain, ("5", "4", "yes", "5"))):
            for question, value in zip(
                ("relevance", "accuracy", "grounded", "helpfulness"), answers, strict=True
            ):
                page.click(f"input[name='t{t}-{question}'][value='{value}']")
        page.click(f"#t{evil}-comment")
        page.type_text(comment)
        # keyboard: focus the first grounded radio, then arrow right twice: yes → partly → no
        page.click(f"input[name='t{partial}-grounded'][value='yes']")
        page.press("ArrowRight", "ArrowRight", 39)
        page.press("ArrowRight", "ArrowRight", 39)
        assert _checked(page)[f"t{partial}-grounded"] == "no"
        page.click("#annotator")
        page.type_text("Ann O'Neil")
        assert _text(page, "#progress") == "2 of 4 done"
        assert page.evaluate(f"document.getElementById('task-{plain}').className") == "task done"

        # A reload loses nothing: answers, comment, name and progress come back from storage.
        before = _checked(page)
        page.reload()
        assert _checked(page) == before
        assert page.evaluate(f"document.getElementById('t{evil}-comment').value") == comment
        assert page.evaluate("document.getElementById('annotator').value") == "Ann O'Neil"
        assert _text(page, "#progress") == "2 of 4 done"
        assert _text(page, f"#task-{partial} .state") == "started"

        since = browser.mark()
        page.click("#save")
        saved = browser.wait_for_download(since)
        assert saved.name == "labels-Ann_O_Neil.jsonl"
        assert "Saved 3 labels as labels-Ann_O_Neil.jsonl (2 tasks not complete yet)" in _text(
            page, "#message"
        )
        problems = page.console_problems()
        assert problems == [], problems
        assert page.evaluate("typeof window.pwned") == "undefined"

    who = "Ann O'Neil"
    expected = [
        HumanLabel(
            sample_id=HOSTILE_ID,
            annotator=who,
            relevance=1,
            accuracy=2,
            grounded="no",
            helpfulness=1,
            comment=comment,
            task_id=tasks[evil].task_id,
        ),
        HumanLabel(
            sample_id="leave-0",
            annotator=who,
            relevance=5,
            accuracy=4,
            grounded="yes",
            helpfulness=5,
            task_id=tasks[plain].task_id,
        ),
        HumanLabel(
            sample_id="leave-1", annotator=who, grounded="no", task_id=tasks[partial].task_id
        ),
    ]
    assert untouched not in (evil, plain, partial)
    assert sorted(load_labels(saved), key=lambda lab: lab.sample_id) == sorted(
        expected, key=lambda lab: lab.sample_id
    )
    merged = tmp_path / "labels.jsonl"
    argv = ["annotate", "import", str(saved), "--tasks", str(tasks_path), "--out", str(merged)]
    assert main(argv) == 0
    order = {task.task_id: i for i, task in enumerate(tasks)}
    assert list(load_labels(merged)) == sorted(expected, key=lambda lab: order[lab.task_id or ""])


def test_the_console_check_does_catch_page_errors(tmp_path: Path) -> None:
    # A control: the console check above must be able to fail.
    assert CHROMIUM is not None
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
        "<script>console.error('boom'); notDefined();</script>"
        "<img src='x.png'></body></html>",
        encoding="utf-8",
    )
    with Browser(CHROMIUM, tmp_path) as browser:
        page = browser.new_page()
        page.goto(bad.as_uri())
        problems = page.console_problems()
    assert any("boom" in p for p in problems), problems
    assert any("ReferenceError" in p for p in problems), problems
    assert any("Content Security Policy" in p for p in problems), problems
