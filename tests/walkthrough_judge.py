"""The judge and the two annotators of the README's walkthrough (test_readme_walkthrough.py).

The walkthrough's commands say ``--judge openai:gpt-4o-mini``; the test runs them verbatim
against `fake_openai.FakeOpenAI` on 127.0.0.1, whose replies come from `answer` here:

* ``testset.*`` prompts: the fallible scripted test-set judge of `testset_judge` (quotes real
  sentences, sometimes paraphrases, repeats a question, proposes an answerable "no-answer");
* ``grader.groundedness``: grounded when at least 70% of the answer's content words occur in the
  contexts — a crude judge, so people can disagree with it; on an abstention ("The handbook does
  not say.") it wavers, answering yes and no on alternate calls, as sampled judges do on the
  cases their instructions leave open (what ``eval --repeat`` is for);
* anything else: the minimal reply that fits the prompt (`ragbridge.core.testing`).

`annotate` plays a person filling in the HTML form: grounded from the share of the answer's words
found in the contexts the person actually reads (amy the first one, bob the first two; people
skim), with an abstention graded as grounded, as people do. Every figure the
README shows from this run is therefore made by scripts, and the README says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from testset_judge import scripted_judge

from ragbridge.core.judging.judge import Message
from ragbridge.core.labels.annotation import load_tasks
from ragbridge.core.labels.human import HumanLabel, save_labels
from ragbridge.core.testing import minimal_reply, task_of

_TESTSET = scripted_judge()
_ABSTENTIONS_SEEN: dict[str, int] = {}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is",
     "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will", "with",
     "does", "not", "say")
)  # fmt: skip


def reset() -> None:
    """Forget the abstentions seen, so a run starts as the README's did."""
    _ABSTENTIONS_SEEN.clear()


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _block(text: str, label: str) -> str:
    found = re.findall(rf"<<<BEGIN {label}[^>]*>>>\n(.*?)\n<<<END {label}", text, re.S)
    return "\n".join(found)


def covered(answer: str, contexts: str) -> float:
    """Share of the answer's content words that occur in the contexts (1.0 for no words)."""
    words = _words(answer)
    if not words:
        return 1.0
    known = set(_words(contexts))
    return sum(w in known for w in words) / len(words)


def answer(messages: Sequence[Message]) -> str:
    task = task_of(messages) or ""
    if task.startswith("testset."):
        reply = _TESTSET.script[task]
        assert callable(reply)
        return json.dumps(reply(list(messages)))
    if task == "grader.groundedness":
        user = messages[-1]["content"]
        said = _block(user, "ANSWER")
        share = covered(said, _block(user, "CONTEXT"))
        verdict = share >= 0.7
        if "does not say" in said.lower():
            seen = _ABSTENTIONS_SEEN[user] = _ABSTENTIONS_SEEN.get(user, 0) + 1
            verdict = seen % 2 == 0
        return json.dumps(
            {"explanation": f"{share:.0%} of the words are backed", "verdict": verdict}
        )
    return minimal_reply(messages)


def annotate(tasks: Path, annotator: str, out: Path) -> int:
    """Label every task as ``annotator`` would; returns the number of labels written."""
    read = 1 if annotator == "amy" else 2
    labels = []
    for task in load_tasks(tasks):
        contexts = "\n".join(c.text for c in task.contexts[:read])
        share = covered(task.answer, contexts)
        abstains = "does not say" in task.answer.lower()
        grounded = "yes" if abstains or share >= 0.9 else "partly" if share >= 0.6 else "no"
        labels.append(
            HumanLabel(
                sample_id=task.sample_id,
                annotator=annotator,
                task_id=task.task_id,
                grounded=grounded,
                relevance=5 if not abstains else 3,
                helpfulness=4 if grounded == "yes" and not abstains else 2,
            )
        )
    return save_labels(labels, out)
