"""The form asking a team's own criteria, in a real headless Chromium: the criterion's text shows
as text (a script planted in it runs nothing), answers survive a reload, and the saved labels
answer the criteria by name — integers on a scale, true/false for a yes/no one — and import.

Runs where a Chromium binary exists (Debian: ``apt-get install -y chromium``; or
``RAGBRIDGE_CHROMIUM=/path/to/chromium``), skipped with that advice elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _chromium import SKIP_REASON, Browser, find_chromium

from ragbridge.adapters.cli import main
from ragbridge.core.labels.annotation import load_tasks
from ragbridge.core.labels.human import load_labels
from ragbridge.core.sample import Context, Sample, save_samples

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

PLANTED = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
CRITERIA = f"""\
criteria:
  - name: tone
    criteria: 'Polite and calm. {PLANTED}'
    scale: [1, 4]
  - name: cites_policy
    definition: The answer names the policy number.
  - name: depth
    rubrics:
      1: Misses the point.
      2: Covers it all.
"""


def test_criteria_are_shown_answered_saved_and_imported_in_chromium(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    samples = [
        Sample(
            id=f"q{i}",
            question=f"Which policy covers leave case {i}?",
            answer=f"Policy {i}.",
            contexts=[Context(text=f"Policy {i} covers it.")],
        )
        for i in range(2)
    ]
    data, criteria = tmp_path / "data.jsonl", tmp_path / "criteria.yaml"
    save_samples(samples, data)
    criteria.write_text(CRITERIA, encoding="utf-8")
    tasks_path, form = tmp_path / "tasks.jsonl", tmp_path / "form.html"
    argv = ["annotate", "export", str(data), "--criteria", str(criteria), "--n", "2",
            "--out", str(tasks_path), "--html", str(form)]  # fmt: skip
    assert main(argv) == 0
    tasks = load_tasks(tasks_path)
    with Browser(CHROMIUM, tmp_path) as browser:
        browser.allow_downloads()
        page = browser.new_page()
        page.goto(form.as_uri())
        assert page.evaluate("document.body.getAttribute('data-ready')") == "1"
        text = page.evaluate("document.querySelector('#task-0 .criterion-text').textContent")
        assert text == f"Polite and calm. {PLANTED}"
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.evaluate("document.querySelectorAll('fieldset').length") == 6

        for name, value in (("t0-c0", "3"), ("t0-c1", "yes"), ("t0-c2", "2"), ("t1-c1", "no")):
            page.click(f"input[name='{name}'][value='{value}']")
        page.click("#annotator")
        page.type_text("Ana")
        assert page.evaluate("document.getElementById('progress').textContent") == "1 of 2 done"
        page.reload()
        assert page.evaluate("document.getElementById('progress').textContent") == "1 of 2 done"

        since = browser.mark()
        page.click("#save")
        saved = browser.wait_for_download(since)
        problems = page.console_problems()
        assert problems == [], problems

    labels = {label.sample_id: label for label in load_labels(saved)}
    assert labels[tasks[0].sample_id].criteria == {"tone": 3, "cites_policy": True, "depth": 2}
    assert labels[tasks[1].sample_id].criteria == {"cites_policy": False}
    assert isinstance(labels[tasks[1].sample_id].criteria["cites_policy"], bool)
    assert labels[tasks[0].sample_id].relevance is None
    merged = tmp_path / "labels.jsonl"
    argv = ["annotate", "import", str(saved), "--tasks", str(tasks_path), "--out", str(merged)]
    assert main(argv) == 0
    assert len(list(load_labels(merged))) == 2
