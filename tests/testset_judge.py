"""A scripted judge for test-set generation that behaves like a fallible LLM, deterministically.

It reads what each ``testset.*`` prompt shows and answers from it:

* ``testset.single`` / ``testset.reasoning``: quotes a real sentence of the TEXT block (the
  next one for each question already in the AVOID block) and asks about its content words;
  for about one chunk in seven the "quote" is a paraphrase (a word left out), which the passage
  check must drop; a chunk about annual leave always gets (nearly) the same question, so the
  second such chunk gives a near-duplicate;
* ``testset.multi``: quotes the first sentence of each CONTEXT and asks about both;
* ``testset.no_answer``: asks about a benefit from `BENEFITS` — one of which the handbook does
  cover in other words — except for about one topic in four, where it asks what the first
  context states (answerable "no-answer" candidates, which the check must reject);
* ``testset.answerable``: "answered" when half or more of the content words of the QUESTION
  occur in one context, else "not_answered".

Everything is a function of the prompt, so a rerun through the cache is answered identically.
`Faults` turns each mistake on or off (`clean_judge` makes none, `paraphrasing_judge` only
mistakes). Used by tests/test_testset*.py, and by the command line as
``--judge python:testset_judge:handbook_judge`` (with ``tests/`` on the import path).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragbridge.core.judging.judge import JudgeReply, Message, ProviderUnusable
from ragbridge.core.testing import ScriptedJudge

__all__ = [
    "BENEFITS",
    "FAKE_EVERY",
    "Faults",
    "UnusableJudge",
    "clean_judge",
    "handbook_judge",
    "paraphrasing_judge",
    "scripted_judge",
    "sentences_of",
]

FAKE_EVERY = 7
"""About one chunk in this many gets a paraphrased (unverifiable) passage."""

BENEFITS = (
    "stock options for employees",
    "a company car for team leads",
    "a gym membership subsidy",
    "a paid day off on the employee's birthday",
    "dental cover for family members",
    "childcare places at a company kindergarten",
    "a bonus for referring a new hire who leaves within a month",
    "paid leave for volunteering as a firefighter",
    "a pet insurance allowance",
    "language courses for spouses of relocated staff",
    "meal vouchers for a staff canteen",
    "an interest-free loan for buying a home",
)
"""Benefits employees ask about. The handbook mentions none of them except, in other words, the
gym subsidy (its fitness-studio subsidy): the question about it is an answerable "no-answer"
candidate that the check must reject, as a real judge's would be."""

_STOP_WORDS = """a an the of to in on for and or is are be by at with from as it its this that
these those than then who which what when where how may must can will not no per any all each
your you their they our we up out into does company offer rule applies regarding"""
_STOP = set(_STOP_WORDS.split())


def _block(text: str, label: str) -> str | None:
    match = re.search(rf"<<<BEGIN {label}>>>\n(.*?)\n<<<END {label}>>>", text, re.DOTALL)
    return match.group(1) if match else None


def _contexts(text: str) -> list[str]:
    return [
        m.group(2)
        for m in re.finditer(
            r"<<<BEGIN CONTEXT (\d+)>>>\n(.*?)\n<<<END CONTEXT \1>>>", text, re.DOTALL
        )
    ]


def _avoid(text: str) -> list[str]:
    block = _block(text, "AVOID") or ""
    return [line[2:] for line in block.splitlines() if line.startswith("- ")]


def sentences_of(text: str) -> list[str]:
    """Sentences as they stand in the text (exact substrings)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 5]


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 2]


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "little")


def _user(messages: Sequence[Message]) -> str:
    return "\n".join(m["content"] for m in messages if m.get("role") == "user")


def _paraphrase(sentence: str) -> str:
    words = sentence.split()
    return " ".join(words[:2] + words[3:])  # a word left out: no longer a quote


@dataclass(frozen=True)
class Faults:
    """Which mistakes the judge makes: ``fake_every`` (0: never paraphrase a quote; 1: always),
    ``duplicates`` (the annual-leave question), ``answerable`` (answerable no-answer
    candidates: the "topic" question and the gym subsidy)."""

    fake_every: int = FAKE_EVERY
    duplicates: bool = True
    answerable: bool = True


def _written(messages: list[Message], faults: Faults, *, reasoning: bool) -> dict[str, Any]:
    prompt = _user(messages)
    text = _block(prompt, "TEXT") or ""
    found = sentences_of(text) or [text]
    avoid = _avoid(prompt)
    sentence = found[len(avoid) % len(found)]
    topic = " ".join(_words(sentence)[:7])
    if faults.duplicates and "annual leave" in text.lower() and not avoid and not reasoning:
        who = "all employees" if _hash(text) % 2 else "employees"  # a rewording, not a copy
        question = f"How many days of annual leave do {who} get each year?"
    elif reasoning:
        question = f"Given the rule on {topic}, what follows for an employee in that situation?"
    else:
        question = f"What applies regarding {topic}?"
    fake = faults.fake_every and _hash(text) % faults.fake_every == 0
    passage = _paraphrase(sentence) if fake else sentence
    return {"passage": passage, "question": question, "answer": sentence}


def _multi(messages: list[Message], faults: Faults) -> dict[str, Any]:
    contexts = _contexts(_user(messages))
    firsts = [(sentences_of(c) or [c])[0] for c in contexts]
    if faults.fake_every == 1:
        firsts = [_paraphrase(f) for f in firsts]
    topics = [" ".join(_words(s)[:4]) for s in firsts]
    return {
        "passages": firsts,
        "question": f"How do the rules on {topics[0]} combine with those on {topics[-1]}?",
        "answer": " ".join(firsts),
    }


def _no_answer(messages: list[Message], faults: Faults) -> dict[str, Any]:
    prompt = _user(messages)
    contexts = _contexts(prompt)
    avoid = _avoid(prompt)
    seed = _hash(contexts[0]) if contexts else 0
    always = faults.fake_every == 1  # the judge that gets everything wrong
    if faults.answerable and ((seed % 4 == 0 and not avoid) or always):
        found = sentences_of(contexts[0]) or [contexts[0]]
        sentence = found[len(avoid) % len(found)]
        return {
            "reason": "asks about the topic of the first context",
            "question": f"Is it true that {sentence[0].lower() + sentence[1:].rstrip('.')}?",
        }
    benefits = BENEFITS if faults.answerable else [b for b in BENEFITS if "gym" not in b]
    offers = [
        f"Does the company offer {benefits[(seed + len(avoid) + k) % len(benefits)]}?"
        for k in range(len(benefits))
    ]
    question = next((q for q in offers if q not in avoid), offers[0])
    return {"reason": "a benefit employees ask about that the documents skip", "question": question}


def _answerable(messages: list[Message]) -> dict[str, Any]:
    prompt = _user(messages)
    question = set(_words(_block(prompt, "QUESTION") or ""))
    best, best_share = None, 0.0
    for number, context in enumerate(_contexts(prompt), start=1):
        share = len(question & set(_words(context))) / max(1, len(question))
        if share > best_share:
            best, best_share = number, share
    if best is not None and best_share >= 0.5:
        return {"reason": "a context states it", "verdict": "answered", "context": best}
    return {"reason": "no context says", "verdict": "not_answered", "context": None}


def scripted_judge(
    faults: Faults = Faults(), model: str = "scripted-testset-judge"
) -> ScriptedJudge:
    """A fresh judge (its own call log) making the mistakes ``faults`` names."""
    return ScriptedJudge(
        {
            "testset.single": lambda m: _written(m, faults, reasoning=False),
            "testset.reasoning": lambda m: _written(m, faults, reasoning=True),
            "testset.multi": lambda m: _multi(m, faults),
            "testset.no_answer": lambda m: _no_answer(m, faults),
            "testset.answerable": _answerable,
        },
        model=model,
    )


def handbook_judge() -> ScriptedJudge:
    """What ``--judge python:testset_judge:handbook_judge`` builds: every kind of mistake."""
    return scripted_judge()


def clean_judge() -> ScriptedJudge:
    """A judge that makes none of the mistakes: nothing is dropped."""
    return scripted_judge(Faults(fake_every=0, duplicates=False, answerable=False))


def paraphrasing_judge() -> ScriptedJudge:
    """A judge whose every quote is a paraphrase and every no-answer question answerable:
    nothing survives."""
    return scripted_judge(Faults(fake_every=1, duplicates=False, answerable=True))


@dataclass
class UnusableJudge:
    """Every call fails as a wrong API key does: the engine's breaker must stop the run."""

    model: str = "unusable-judge"
    calls: int = 0

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        raise ProviderUnusable("401 Unauthorized", cause="401 Unauthorized", hint="check the key")
