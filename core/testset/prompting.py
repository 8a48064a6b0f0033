"""The prompt of each request: which template, with which values (shared by run and estimate).

The values are a function of the request and of the questions already written (the AVOID
block) and nothing else — no time, no counter — so a rerun sends byte-identical prompts and is
answered from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..prompts.base import PromptTemplate
from ..prompts.testset import (
    TESTSET_ANSWERABLE,
    TESTSET_MULTI,
    TESTSET_NO_ANSWER,
    TESTSET_REASONING,
    TESTSET_SINGLE,
)
from .chunks import Chunk
from .plan import Request
from .styles import NO_ANSWER

__all__ = ["AVOID_LIMIT", "TEMPLATES", "check_prompt", "prompt_for"]

TEMPLATES: dict[str, PromptTemplate] = {
    "single": TESTSET_SINGLE,
    "reasoning": TESTSET_REASONING,
    "multi": TESTSET_MULTI,
    NO_ANSWER: TESTSET_NO_ANSWER,
}
"""The generation template of each style."""

AVOID_LIMIT = 20
"""Most questions listed in an AVOID block (the latest ones): the prompt stays bounded."""


def _avoid(questions: Sequence[str]) -> str:
    if not questions:
        return "(none yet)"
    return "\n".join(f"- {q}" for q in questions[-AVOID_LIMIT:])


def prompt_for(
    request: Request, avoid: Sequence[str] = ()
) -> tuple[PromptTemplate, dict[str, Any]]:
    """The template and values of ``request``'s generation call."""
    template = TEMPLATES[request.style]
    if request.style in ("single", "reasoning"):
        chunk = request.anchor
        return template, {
            "title": chunk.title or "(untitled)",
            "text": chunk.text,
            "avoid": _avoid(avoid),
        }
    return template, {"contexts": [c.text for c in request.chunks], "avoid": _avoid(avoid)}


def check_prompt(
    question: str, retrieved: Sequence[Chunk]
) -> tuple[PromptTemplate, dict[str, Any]]:
    """The template and values of a no-answer candidate's check against retrieved chunks."""
    return TESTSET_ANSWERABLE, {"question": question, "contexts": [c.text for c in retrieved]}
