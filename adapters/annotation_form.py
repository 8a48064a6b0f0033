"""The annotation form: one self-contained HTML file people open, fill in and save from.

Why a file and not a web app: annotators are colleagues, domain experts or contractors who
should need nothing but a browser — no server to run, no account, no upload. The form is one
HTML file with its CSS and script inline; it makes no network request. Answers are kept in the
browser's ``localStorage`` under the form's id (a digest of its tasks, `form_id`), so closing
the tab or reloading loses nothing, and the Save button hands the answers over as a downloaded
``labels-<annotator>.jsonl`` built in the page (a Blob URL). Each line of that file is one
`ragbridge.core.labels.human.HumanLabel`, read back by ``ragbridge annotate import``.

Every task shows the question, the numbered retrieved contexts, the answer and the reference,
then the four questions of `ragbridge.core.labels.human.QUESTIONS` (relevance, accuracy and
helpfulness 1–5 as radio buttons; grounded yes/partly/no) and a comment box. When the tasks ask
a team's own criteria (`ragbridge.core.labels.annotation.AskedCriterion`), those replace the
four: each shows the criterion's name, its text and its scale (a rubric's description beside
each level, yes/no for an aspect), and the saved label answers it in ``criteria`` under its
name — a number on its scale, or true/false. The form is plain
HTML controls with a ``<fieldset>``/``<legend>`` per question and a ``<label>`` per control, so a
keyboard (Tab between questions, arrow keys within one) and a screen reader work without help.

Safety: questions, contexts and answers are untrusted text (retrieved passages are where
hostile markup turns up). All of it is written into the page HTML-escaped, in text and
attributes alike; control names and ids are built from the task's position, never from its
ids (a criterion's controls are ``t<task>-c<k>``, its position among the criteria: the
criterion's name is data, never markup). The script gets the ids it needs from a
``<script type="application/json">`` block, read with ``textContent`` and ``JSON.parse``, in
which ``<``, ``>`` and ``&`` are written as ``\\u003c``, ``\\u003e`` and ``\\u0026`` so no
``</script>`` can close it. A Content-Security-Policy allows only the page's own inline style
and script, by hash; nothing else runs or loads.

Only the standard library and ragbridge's core are used.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragbridge.core.files import write_text_atomic
from ragbridge.core.labels.annotation import AnnotationTask, AskedCriterion, form_id
from ragbridge.core.labels.human import QUESTIONS

__all__ = ["FORM_QUESTIONS", "STORAGE_PREFIX", "render_form", "write_form"]

STORAGE_PREFIX = "ragbridge-annotation:"
"""``localStorage`` key of a form's answers: this prefix and the form's id."""

FORM_QUESTIONS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "relevance": (
        "Relevance: does the answer address the question?",
        (("1", "not at all"), ("2", ""), ("3", "partly"), ("4", ""), ("5", "fully")),
    ),
    "accuracy": (
        "Accuracy: is the answer correct (judged against the reference, where there is one)?",
        (("1", "wrong"), ("2", ""), ("3", "partly"), ("4", ""), ("5", "fully correct")),
    ),
    "grounded": (
        "Grounded: is every statement of the answer backed by the retrieved contexts?",
        (("yes", "every statement"), ("partly", "some statements"), ("no", "none")),
    ),
    "helpfulness": (
        "Helpfulness: would the answer help the person who asked?",
        (("1", "not at all"), ("2", ""), ("3", "somewhat"), ("4", ""), ("5", "very")),
    ),
}
"""Each question's legend and its answers (value, hint), in `QUESTIONS` order."""

if tuple(FORM_QUESTIONS) != tuple(QUESTIONS) or any(
    tuple(value for value, _ in FORM_QUESTIONS[q][1]) != QUESTIONS[q].scale for q in QUESTIONS
):  # pragma: no cover - a guard for whoever edits one list and not the other
    raise RuntimeError("FORM_QUESTIONS no longer matches ragbridge.core.labels.human.QUESTIONS")

_INTEGER_QUESTIONS = [q for q in QUESTIONS if QUESTIONS[q].scale[0].isdigit()]


@dataclass(frozen=True)
class _Asked:
    """One question as the form asks it: a default question, or a team's criterion."""

    key: str
    """The control's suffix: ``relevance`` ... or ``c0``, ``c1`` ... for criteria."""
    legend: str
    answers: tuple[tuple[str, str], ...]
    text: str | None = None
    criterion: str | None = None
    integer: bool = False
    binary: bool = False


def _criterion_answers(criterion: AskedCriterion) -> tuple[tuple[str, str], ...]:
    if criterion.scale is None:
        return (("yes", "meets it"), ("no", "does not"))
    low, high = criterion.scale
    ends = {low: "not at all", high: "fully"}
    return tuple(
        (str(level), criterion.levels.get(level, ends.get(level, "")))
        for level in range(low, high + 1)
    )


def _asked(tasks: Sequence[AnnotationTask]) -> list[_Asked]:
    """What every task of the form asks: the tasks' criteria, or the four default questions.
    One form asks one set of criteria (the answers' meaning must not change between tasks)."""
    criteria = tasks[0].criteria
    if any(task.criteria != criteria for task in tasks):
        raise ValueError("tasks: every task of one form must ask the same criteria")
    if not criteria:
        return [
            _Asked(q, legend, answers, integer=q in _INTEGER_QUESTIONS)
            for q, (legend, answers) in FORM_QUESTIONS.items()
        ]
    return [
        _Asked(
            f"c{k}",
            c.name,
            _criterion_answers(c),
            text=c.text,
            criterion=c.name,
            integer=c.scale is not None,
            binary=c.scale is None,
        )
        for k, c in enumerate(criteria)
    ]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _json_for_script(value: object) -> str:
    """JSON that cannot end its ``<script>`` element or start a comment inside it."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    for char, escape in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #fafbfc; color: #1d232b;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  "Noto Sans", sans-serif; }
header.bar { position: sticky; top: 0; z-index: 1; background: #fff;
  border-bottom: 1px solid #d0d7de; padding: .6rem 1.5rem; display: flex; flex-wrap: wrap;
  gap: .5rem 1rem; align-items: center; }
header.bar h1 { font-size: 1.15rem; margin: 0 1rem 0 0; }
header.bar input { font: inherit; padding: .2rem .4rem; }
header.bar progress { width: 10rem; }
button { font: inherit; padding: .3rem .8rem; border: 1px solid #8c959f; border-radius: 6px;
  background: #f6f8fa; cursor: pointer; }
button.primary { background: #2f6fb0; border-color: #2f6fb0; color: #fff; }
:focus-visible { outline: 3px solid #d9822b; outline-offset: 2px; }
#message { flex-basis: 100%; margin: 0; min-height: 1.5em; }
#message.error { color: #b42318; font-weight: 600; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem 4rem; }
.intro { color: #444c56; }
section.task { background: #fff; border: 1px solid #d0d7de; border-radius: 8px;
  padding: .5rem 1.25rem 1rem; margin: 1.25rem 0; }
section.task.done { border-left: 6px solid #3a9a5b; }
section.task h2 { font-size: 1.1rem; }
section.task h3 { font-size: .95rem; margin: .9rem 0 .2rem; color: #444c56; }
.state { font-weight: normal; color: #3a9a5b; font-size: .9rem; margin-left: .5rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.answer { background: #f3f7fc; padding: .4rem .6rem; border-radius: 4px; }
ol.contexts { padding-left: 1.6rem; margin: 0; }
ol.contexts li { margin: .3rem 0; }
.cid { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .8rem;
  color: #57606a; }
.none { color: #57606a; font-style: italic; margin: 0; }
fieldset { border: 1px solid #d0d7de; border-radius: 6px; margin: .8rem 0 0;
  padding: .3rem .8rem .5rem; }
legend { font-weight: 600; padding: 0 .3rem; }
fieldset label { display: inline-flex; align-items: center; gap: .25rem; margin: .2rem 1.1rem 0 0;
  cursor: pointer; }
.hint { color: #57606a; font-size: .85rem; }
label.comment { display: block; margin-top: .8rem; font-weight: 600; }
textarea { width: 100%; font: inherit; margin-top: .2rem; }
table.scores td, table.scores th { padding: .1rem .6rem; text-align: left; }
"""

_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("form-data").textContent);
  var KEY = data.storage_key;
  var QUESTIONS = data.questions;
  var INTEGER = data.integer_questions;
  var CRITERIA = data.criteria;
  var BINARY = data.binary_questions;
  var tasks = data.tasks;
  var nameInput = document.getElementById("annotator");
  var message = document.getElementById("message");
  var state = { annotator: "", answers: {} };
  var storage = null;

  function say(text, isError) {
    message.textContent = text;
    message.className = isError ? "error" : "";
  }

  function allowed(question, value) {
    return typeof value === "string" && QUESTIONS[question].indexOf(value) >= 0;
  }

  function load() {
    try {
      storage = window.localStorage;
      var raw = storage.getItem(KEY);
      if (!raw) { return; }
      var saved = JSON.parse(raw);
      if (saved && typeof saved.annotator === "string") { state.annotator = saved.annotator; }
      if (saved && saved.answers && typeof saved.answers === "object") {
        tasks.forEach(function (task) {
          var got = saved.answers[task.task_id];
          if (!got || typeof got !== "object") { return; }
          var kept = {};
          Object.keys(QUESTIONS).forEach(function (q) {
            if (allowed(q, got[q])) { kept[q] = got[q]; }
          });
          if (typeof got.comment === "string") { kept.comment = got.comment; }
          state.answers[task.task_id] = kept;
        });
      }
    } catch (err) {
      storage = null;
      say("This browser does not keep answers between visits here: save before closing.", true);
    }
  }

  function persist() {
    if (!storage) { return; }
    try {
      storage.setItem(KEY, JSON.stringify(state));
    } catch (err) {
      say("Could not keep the answers in the browser: save now.", true);
    }
  }

  function answersOf(index) {
    var id = tasks[index].task_id;
    if (!state.answers[id]) { state.answers[id] = {}; }
    return state.answers[id];
  }

  function isDone(index) {
    var got = state.answers[tasks[index].task_id] || {};
    return Object.keys(QUESTIONS).every(function (q) { return allowed(q, got[q]); });
  }

  function isStarted(index) {
    var got = state.answers[tasks[index].task_id] || {};
    return Object.keys(QUESTIONS).some(function (q) { return allowed(q, got[q]); }) ||
      (typeof got.comment === "string" && got.comment.trim() !== "");
  }

  function refresh() {
    var done = 0;
    tasks.forEach(function (task, index) {
      var section = document.getElementById("task-" + index);
      var finished = isDone(index);
      if (finished) { done += 1; }
      section.classList.toggle("done", finished);
      section.querySelector(".state").textContent = finished ? "done" :
        (isStarted(index) ? "started" : "");
    });
    document.getElementById("progress").textContent = done + " of " + tasks.length + " done";
    document.getElementById("progressbar").value = done;
  }

  function restore() {
    nameInput.value = state.annotator;
    tasks.forEach(function (task, index) {
      var got = state.answers[task.task_id] || {};
      Object.keys(QUESTIONS).forEach(function (q) {
        var radios = document.getElementsByName("t" + index + "-" + q);
        for (var i = 0; i < radios.length; i += 1) {
          radios[i].checked = radios[i].value === got[q];
        }
      });
      document.getElementById("t" + index + "-comment").value =
        typeof got.comment === "string" ? got.comment : "";
    });
  }

  function onChange(event) {
    var target = event.target;
    var match = /^t([0-9]+)-([a-z][a-z0-9]*)$/.exec(target.name || target.id || "");
    if (!match) { return; }
    var index = Number(match[1]);
    if (!(index >= 0 && index < tasks.length)) { return; }
    if (match[2] === "comment") {
      answersOf(index).comment = target.value;
    } else if (target.type === "radio" && target.checked && allowed(match[2], target.value)) {
      answersOf(index)[match[2]] = target.value;
    } else {
      return;
    }
    persist();
    refresh();
  }

  function fileName(name) {
    var safe = name.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^[._]+/, "");
    return "labels-" + (safe || "annotator") + ".jsonl";
  }

  function save() {
    var name = nameInput.value.trim();
    if (!name) {
      say("Type your name first: it goes into every label.", true);
      nameInput.focus();
      return;
    }
    var lines = [];
    tasks.forEach(function (task, index) {
      if (!isStarted(index)) { return; }
      var got = state.answers[task.task_id];
      var label = { sample_id: task.sample_id, annotator: name };
      Object.keys(QUESTIONS).forEach(function (q) {
        if (!allowed(q, got[q])) { return; }
        var value = INTEGER.indexOf(q) >= 0 ? Number(got[q]) : got[q];
        if (BINARY.indexOf(q) >= 0) { value = got[q] === "yes"; }
        if (Object.prototype.hasOwnProperty.call(CRITERIA, q)) {
          if (!label.criteria) { label.criteria = {}; }
          label.criteria[CRITERIA[q]] = value;
        } else {
          label[q] = value;
        }
      });
      label.comment = typeof got.comment === "string" ? got.comment.trim() : "";
      label.task_id = task.task_id;
      lines.push(JSON.stringify(label) + "\\n");
    });
    if (!lines.length) {
      say("Nothing answered yet: there is nothing to save.", true);
      return;
    }
    var blob = new Blob(lines, { type: "application/x-ndjson" });
    var url = URL.createObjectURL(blob);
    var link = document.createElement("a");
    link.href = url;
    link.download = fileName(name);
    document.body.appendChild(link);
    link.click();
    link.remove();
    window.setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
    var open = tasks.length - tasks.filter(function (t, i) { return isDone(i); }).length;
    say("Saved " + lines.length + " labels as " + fileName(name) +
      (open ? " (" + open + " tasks not complete yet)" : "") +
      ". Send that file to whoever asked you; saving again later gives a newer file.", false);
  }

  function nextOpen() {
    for (var i = 0; i < tasks.length; i += 1) {
      if (!isDone(i)) {
        var heading = document.getElementById("task-" + i + "-h");
        heading.scrollIntoView({ block: "start" });
        heading.focus();
        return;
      }
    }
    say("Every task is done. Save your labels.", false);
  }

  load();
  restore();
  refresh();
  document.querySelector("main").addEventListener("change", onChange);
  document.querySelector("main").addEventListener("input", onChange);
  nameInput.addEventListener("input", function () {
    state.annotator = nameInput.value;
    persist();
  });
  document.getElementById("save").addEventListener("click", save);
  document.getElementById("next").addEventListener("click", nextOpen);
  document.body.setAttribute("data-ready", "1");
})();
"""


def _task_html(
    index: int, total: int, task: AnnotationTask, show_scores: bool, asked: Sequence[_Asked]
) -> list[str]:
    t = f"t{index}"
    out = [
        f'<section class="task" id="task-{index}" aria-labelledby="task-{index}-h">',
        f'<h2 id="task-{index}-h" tabindex="-1">Task {index + 1} of {total}'
        '<span class="state"></span></h2>',
        "<h3>Question</h3>",
        f'<p class="text question">{_e(task.question)}</p>',
        "<h3>Retrieved contexts</h3>",
    ]
    if task.contexts:
        out.append('<ol class="contexts">')
        for context in task.contexts:
            cid = f'<span class="cid">{_e(context.id)}</span> ' if context.id else ""
            out.append(f'<li>{cid}<p class="text context">{_e(context.text)}</p></li>')
        out.append("</ol>")
    else:
        out.append('<p class="none">Nothing was retrieved.</p>')
    out.append("<h3>Answer</h3>")
    out.append(f'<p class="text answer">{_e(task.answer)}</p>')
    out.append("<h3>Reference answer</h3>")
    if task.reference is not None:
        out.append(f'<p class="text reference">{_e(task.reference)}</p>')
    else:
        out.append('<p class="none">No reference answer for this question.</p>')
    if show_scores and task.scores:
        rows = "".join(
            f"<tr><th>{_e(metric)}</th><td>{value:.3f}</td></tr>"
            for metric, value in sorted(task.scores.items())
        )
        out.append(
            "<details><summary>Judge scores</summary>"
            f'<table class="scores">{rows}</table></details>'
        )
    for question in asked:
        kind = " criterion" if question.criterion else ""
        out.append(f'<fieldset class="q{kind}"><legend>{_e(question.legend)}</legend>')
        if question.text is not None:
            out.append(f'<p class="text criterion-text">{_e(question.text)}</p>')
        for value, hint in question.answers:
            hint_html = f' <span class="hint">{_e(hint)}</span>' if hint else ""
            out.append(
                f'<label><input type="radio" name="{t}-{question.key}" value="{_e(value)}">'
                f" {_e(value)}{hint_html}</label>"
            )
        out.append("</fieldset>")
    out.append(f'<label class="comment" for="{t}-comment">Comment (optional)</label>')
    out.append(f'<textarea id="{t}-comment" rows="2"></textarea>')
    out.append("</section>")
    return out


def render_form(
    tasks: Sequence[AnnotationTask],
    *,
    title: str = "ragbridge annotation",
    show_scores: bool = False,
) -> str:
    """The form's HTML for ``tasks``, in their order.

    ``show_scores`` prints each task's judge scores under the reference; off by default, since
    an annotator who sees the judge's number tends to agree with it.
    """
    if not tasks:
        raise ValueError("tasks: nothing to annotate (no tasks)")
    if len({task.task_id for task in tasks}) != len(tasks):
        raise ValueError("tasks: task ids must be unique")
    ident = form_id(tasks)
    asked = _asked(tasks)
    payload = {
        "form_id": ident,
        "storage_key": STORAGE_PREFIX + ident,
        "questions": {q.key: [v for v, _ in q.answers] for q in asked},
        "integer_questions": [q.key for q in asked if q.integer],
        "binary_questions": [q.key for q in asked if q.binary],
        "criteria": {q.key: q.criterion for q in asked if q.criterion},
        "tasks": [{"task_id": task.task_id, "sample_id": task.sample_id} for task in tasks],
    }
    total = len(tasks)
    body: list[str] = []
    for index, task in enumerate(tasks):
        body.extend(_task_html(index, total, task, show_scores, asked))
    what = (
        "each criterion on its scale"
        if any(q.criterion for q in asked)
        else f"the {len(asked)} questions"
    )
    csp = (
        "default-src 'none'; "
        f"style-src '{_hash(_CSS)}'; script-src '{_hash(_JS)}'; "
        "base-uri 'none'; form-action 'none'"
    )
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="generator" content="ragbridge">',
        f'<meta name="ragbridge-form-id" content="{ident}">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        '<header class="bar">',
        f"<h1>{_e(title)}</h1>",
        '<label for="annotator">Your name</label>',
        '<input id="annotator" type="text" autocomplete="name" required>',
        f'<progress id="progressbar" max="{total}" value="0" aria-labelledby="progress">'
        "</progress>",
        f'<span id="progress" role="status" aria-live="polite">0 of {total} done</span>',
        '<button type="button" id="next">Next unfinished task</button>',
        '<button type="button" id="save" class="primary">Save labels</button>',
        '<p id="message" role="alert"></p>',
        "</header>",
        "<main>",
        '<section class="intro" aria-label="Instructions">',
        "<p>For each task, read the question, the retrieved contexts, the answer and the "
        f"reference answer, then answer {what}. Skip a question you cannot judge; "
        "add a comment when something is odd. Your answers stay in this browser as you go "
        "(reloading loses nothing). When you are finished — or want to hand in what you have "
        "— type your name and press <strong>Save labels</strong>: your browser downloads a "
        "file <code>labels-&lt;your name&gt;.jsonl</code> to send back.</p>",
        "<noscript><p><strong>This form needs JavaScript to record and save answers."
        "</strong></p></noscript>",
        "</section>",
        *body,
        "</main>",
        f'<script type="application/json" id="form-data">{_json_for_script(payload)}</script>',
        f"<script>{_JS}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"


def write_form(
    path: str | os.PathLike[str],
    tasks: Sequence[AnnotationTask],
    *,
    title: str = "ragbridge annotation",
    show_scores: bool = False,
) -> Path:
    """Render the form and write it atomically to ``path`` (UTF-8); returns the path."""
    target = Path(path)
    write_text_atomic(target, render_form(tasks, title=title, show_scores=show_scores))
    return target
