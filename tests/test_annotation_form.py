"""The annotation form's HTML, read as text: escaping, the data block, the policy, no network.

What the page does in a browser is checked in test_annotation_chromium.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from ragbridge.adapters.annotation_form import STORAGE_PREFIX, render_form, write_form
from ragbridge.core.labels.annotation import AnnotationTask, TaskContext, form_id

HOSTILE = "<script>document.body.setAttribute('data-pwned','1')</script>"

TASKS = [
    AnnotationTask(
        task_id="t1",
        sample_id='evil"</script><script>alert(1)</script>',
        question=HOSTILE,
        contexts=[
            TaskContext(text="<img src=x onerror=\"alert('ctx')\">", id='"><b>id</b>'),
            TaskContext(text="plain & simple\u2028line"),
        ],
        answer="</p><script>alert('answer')</script>",
        reference=None,
        scores={"faithfulness": 0.125},
        stratum="low",
    ),
    AnnotationTask(
        task_id="t2",
        sample_id="ok",
        question="What is leave?",
        answer="Time off.",
        reference="Paid time off.",
    ),
]


def _scripts(page: str) -> list[tuple[str, str]]:
    return re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.S)


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_untrusted_text_is_escaped_and_never_inside_a_script() -> None:
    page = render_form(TASKS)
    assert HOSTILE not in page
    assert "&lt;script&gt;document.body.setAttribute(&#x27;data-pwned&#x27;,&#x27;1&#x27;)" in page
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=&quot;alert(&#x27;ctx&#x27;)&quot;&gt;" in page
    assert "&quot;&gt;&lt;b&gt;id&lt;/b&gt;" in page  # a context id, escaped too
    assert "</p><script>alert('answer')" not in page
    scripts = _scripts(page)
    assert [attrs for attrs, _ in scripts] == [' type="application/json" id="form-data"', ""]
    data_text, code = scripts[0][1], scripts[1][1]
    assert "<" not in data_text
    assert ">" not in data_text
    assert "\u2028" not in data_text
    data = json.loads(data_text)
    assert data["tasks"][0] == {"task_id": "t1", "sample_id": TASKS[0].sample_id}
    assert data["storage_key"] == STORAGE_PREFIX + form_id(TASKS)
    assert data["questions"]["grounded"] == ["yes", "partly", "no"]
    assert data["integer_questions"] == ["relevance", "accuracy", "helpfulness"]
    # the code is ours alone: no task text reaches it
    assert "evil" not in code
    assert "leave" not in code


def test_the_policy_allows_exactly_the_inline_style_and_script() -> None:
    page = render_form(TASKS)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = csp.group(1)
    style = re.search(r"<style>(.*?)</style>", page, flags=re.S)
    assert style is not None
    code = _scripts(page)[1][1]
    assert "default-src 'none'" in policy
    assert f"style-src '{_hash(style.group(1))}'" in policy
    assert f"script-src '{_hash(code)}'" in policy
    assert "unsafe" not in policy
    # nothing to load from anywhere: no URL, no external resource
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page)


def test_every_control_has_a_label_and_names_come_from_positions() -> None:
    page = render_form(TASKS)
    radios = re.findall(r'<label><input type="radio" name="(t\d+-[a-z]+)" value="([^"]+)">', page)
    assert len(radios) == 2 * (5 + 5 + 3 + 5)
    assert {name for name, _ in radios} == {
        f"t{i}-{q}" for i in (0, 1) for q in ("relevance", "accuracy", "grounded", "helpfulness")
    }
    assert page.count("<fieldset") == 8
    assert page.count("<legend>") == 8
    assert '<label class="comment" for="t0-comment">' in page
    assert '<textarea id="t0-comment"' in page
    assert '<label for="annotator">Your name</label>' in page
    assert 'role="status" aria-live="polite">0 of 2 done<' in page


def test_task_content_and_hidden_scores() -> None:
    page = render_form(TASKS, title="Leave <policy>")
    assert "<title>Leave &lt;policy&gt;</title>" in page
    assert "Task 1 of 2" in page
    assert "Task 2 of 2" in page
    assert "No reference answer for this question." in page
    assert "Paid time off." in page
    assert "0.125" not in page
    assert "faithfulness" not in page.lower().split("<main>")[1]
    shown = render_form(TASKS, show_scores=True)
    assert "<tr><th>faithfulness</th><td>0.125</td></tr>" in shown


def test_form_refuses_no_tasks_and_repeated_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tasks"):
        render_form([])
    with pytest.raises(ValueError, match="unique"):
        render_form([TASKS[1], TASKS[1]])
    path = write_form(tmp_path / "form.html", TASKS)
    assert path.read_text(encoding="utf-8") == render_form(TASKS)
