"""The dry run: judge calls, prompt tokens and cost of writing a test set, before any is sent.

It plans round 1 with the same `Planner` a run uses and renders each of its prompts, so:

* ``calls`` is **exactly** the judge calls of a cold run in which nothing is dropped: one per
  requested question, plus one check per no-answer candidate;
* ``max_calls`` is the bound for any run: drops trigger top-up rounds, each asking for at most
  what round 1 asked, so a run never exceeds ``max_rounds × calls``;
* ``prompt_tokens`` is approximate (~4 characters a token, as
  `ragbridge.core.scoring.runner.estimate` counts): multi-chunk partners and topic neighbours are
  found by embedding, which the dry run does not do, so the next chunks in the seeded order stand
  in for them, and a check's question is assumed to be `QUESTION_CHARS` long.

Cache hits are not predicted: like ``ragbridge estimate``, this is the cost of a cold run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from typing_extensions import Unpack

from ..judging.engine import Price
from ..metrics.base import PlannedCall
from ..scoring.runner import Estimate
from .chunks import Chunk, split_documents
from .documents import SourceDocument
from .plan import DEFAULT_SIZE, Planner, TestsetOptions, TestsetSpec
from .prompting import check_prompt, prompt_for
from .styles import NO_ANSWER

__all__ = ["QUESTION_CHARS", "TestsetEstimate", "estimate_chunks", "estimate_testset"]

QUESTION_CHARS = 100
"""Assumed length of a no-answer question in its check's prompt."""


@dataclass
class TestsetEstimate(Estimate):
    """`ragbridge.core.scoring.runner.Estimate` of a test set: ``samples`` is the size asked for,
    ``calls`` round 1's calls (see the module), ``max_calls`` the bound with top-up rounds,
    ``by_style`` the generation calls per style."""

    max_calls: int = 0
    by_style: dict[str, int] = field(default_factory=dict)
    chunks: int = 0

    __test__ = False

    def lines(self, price: Price | None = None, completion_tokens: int = 150) -> list[str]:
        """The estimate as the command prints it."""
        styles = ", ".join(f"{s} {n}" for s, n in self.by_style.items())
        text = (
            f"estimate: {self.calls} judge calls for {self.samples} questions ({styles}; "
            f"up to {self.max_calls} if drops need top-up rounds), "
            f"~{self.prompt_tokens:,} prompt tokens, from {self.chunks} chunks"
        )
        cost = self.cost(price, completion_tokens)
        if cost is not None:
            text += f", ~${cost:.4f} (at {completion_tokens} completion tokens per call)"
        return [text]


def estimate_chunks(chunks: list[Chunk], spec: TestsetSpec) -> TestsetEstimate:
    """The estimate for already-split ``chunks`` (what `generate_testset` records)."""
    out = TestsetEstimate(samples=spec.size, chunks=len(chunks))
    planner = Planner(chunks, spec)
    if planner.problem() is not None:
        return out
    calls: list[PlannedCall] = []
    for request in planner.requests(spec.targets(), 1):
        template, values = prompt_for(request)
        calls.append(PlannedCall(template.id, _chars(template.render(**values))))
        out.by_style[request.style] = out.by_style.get(request.style, 0) + 1
        if request.style == NO_ANSWER:
            retrieved = chunks[: spec.top_k]
            check, check_values = check_prompt("x" * QUESTION_CHARS, retrieved)
            calls.append(PlannedCall(check.id, _chars(check.render(**check_values))))
    for call in calls:
        out.calls += 1
        out.prompt_tokens += call.prompt_tokens
        out.by_template[call.template_id] = out.by_template.get(call.template_id, 0) + 1
    out.max_calls = out.calls * spec.max_rounds
    return out


def estimate_testset(
    documents: Iterable[SourceDocument],
    size: int = DEFAULT_SIZE,
    **options: Unpack[TestsetOptions],
) -> TestsetEstimate:
    """Dry run of `generate_testset` with the same arguments; calls nothing, embeds nothing.

    The options that change the estimate are ``styles``, ``no_answer_share``, ``seed``,
    ``chunk_chars``, ``top_k`` and ``max_rounds``; the others are checked and ignored.
    """
    spec, unknown = TestsetSpec.split(size, options)
    if unknown:
        raise TypeError(
            f"estimate_testset() got unexpected keyword(s): {', '.join(sorted(unknown))}"
        )
    return estimate_chunks(split_documents(documents, spec.chunk_chars), spec)


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m.get("content", "")) for m in messages)
