"""Retrieval-step measures: how an agent searched, step by step.

An agent that retrieves decides when to search, with which query and how often; flattening its
searches into one list of contexts hides all three. These measures read the retrieval steps of
``sample.trajectory`` (`ragbridge.core.agent.steps`: a step that returned contexts, or one whose
tool the measure is told is a retriever, ``retrievers=("search",)``) and list every step with
its verdict in ``details["steps"]`` (``step`` is its index in the trajectory, from 0):

* ``step_query_relevance`` — the share of retrieval steps whose query is relevant to the
  question. One judge call per trajectory (``agent.step_queries``) judges every step's query,
  each shown with the start of what it returned, so a follow-up search on something an earlier
  step found counts as relevant. The ``offline`` provider: a query is relevant when its
  embedding similarity to the question, or the share of its words found in the question or in
  what earlier steps returned, reaches ``relevance`` (`DEFAULT_QUERY_RELEVANCE`; a heuristic,
  not calibrated on labelled searches).
* ``step_context_relevance`` — each retrieval step's share of contexts relevant to the question,
  averaged over the retrieval steps (a step that returned nothing counts 0):
  ``mean_s relevant_s / returned_s``. The verdicts are context relevance's own
  (``context_relevance.judge``, `ragbridge.core.metrics.context_relevance`): one call over every
  step's contexts, each passage judged once; when the sample's contexts are that union in step
  order (what the captures record), it is the very call ``context_relevance`` makes, shared.
* ``redundant_retrievals`` (lower is better) — the share of retrieval steps that repeat an
  earlier step's search: the same tool with a query that is the same or near-identical, by a
  rule on strings (`repeated`): equal once case, punctuation and spacing are folded; the same
  content words in another order or form ("capital of France" / "France's capital"); or a
  character similarity (difflib's ratio) of at least ``similarity`` (0.9: a typo). A repeat of
  a step that failed (its ``error`` set) is a retry, not a redundancy. Offline, no model.
* ``steps_to_relevant`` — how soon a relevant context came: ``1 / k``, with ``k`` the number of
  retrieval steps up to and including the first that returned a relevant context (1.0: the
  first search found one; 0.5: the second; 0.0: none did) — reciprocal rank over steps instead
  of contexts. Relevance comes from the sample's labels (``relevance``, by context id, grade >
  0) when it has them and the steps' contexts have ids; else from step_context_relevance's
  verdicts (the same call: both measures cost one).

Edges: a sample that is no agent's (``trajectory`` None) is ``missing_input`` naming the field;
a trajectory without a retrieval step is skipped with that reason (nothing was searched); for
``steps_to_relevant`` a sample labelled as having no relevant document (``relevance == {}``) is
skipped too (there was nothing to reach).
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..judging.engine import JudgeCall
from ..metrics._context_share import relevance_key
from ..metrics._shared import planned, versions
from ..metrics.base import Metric, MetricContext, PlannedCall, declare, usage_of
from ..prompts.agent import AGENT_STEP_QUERIES, StepQueryVerdicts
from ..prompts.context_relevance import CONTEXT_RELEVANCE, ContextRelevanceVerdicts
from ..prompts.history import asked
from ..record_fields import Context
from ..results.evaluation import Failure, Score, Usage
from ..sample import Sample
from ..text.words import terms, words
from .steps import (
    DEFAULT_QUERY_RELEVANCE,
    RetrievalStep,
    no_trajectory,
    query_score,
    retrieval_steps,
    shown_step,
    step_row,
)

__all__ = [
    "DEFAULT_QUERY_RELEVANCE",
    "DEFAULT_REPEAT_SIMILARITY",
    "RedundantRetrievals",
    "StepContextRelevance",
    "StepQueryRelevance",
    "StepsToRelevant",
    "query_score",
    "repeated",
]


DEFAULT_REPEAT_SIMILARITY = 0.9
"""Character similarity (difflib's ratio of the folded queries) from which a query repeats."""

NO_RETRIEVAL_STEP = (
    "the agent made no retrieval step (no step returned contexts or called a tool named as a "
    "retriever), so there is no search to judge"
)


class _StepMeasure(Metric):
    """What the four step measures share: the trajectory check, the retrieval steps, the skip."""

    requires = ("question",)

    def __init__(self, provider: str = "llm", *, retrievers: Sequence[str] = ()) -> None:
        """``retrievers``: tool names whose steps are retrieval steps even when they returned
        no context (a search that found nothing)."""
        self._use_provider(provider)
        self.retrievers = tuple(dict.fromkeys(retrievers))

    def __repr__(self) -> str:
        named = f", retrievers={list(self.retrievers)!r}" if self.retrievers else ""
        return f"{type(self).__name__}(provider={self.provider!r}{named})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        return no_trajectory(self.name, sample) or super().missing_input(sample, ctx)

    def steps(self, sample: Sample) -> list[RetrievalStep]:
        """The retrieval steps of ``sample`` this measure reads."""
        return retrieval_steps(sample, self.retrievers)

    def _edge(self, sample: Sample) -> Score | None:
        if sample.trajectory is not None and not self.steps(sample):
            return Score.skip(NO_RETRIEVAL_STEP, details={"retrieval_steps": 0, "steps": []})
        return None


# --------------------------------------------------------------------------- query relevance


def _queries_request(sample: Sample, steps: Sequence[RetrievalStep]) -> tuple[Hashable, Any]:
    shown = tuple(shown_step(s.step, query=True) for s in steps)
    question = asked(sample)
    return (AGENT_STEP_QUERIES.id, question, shown), {"question": question, "steps": shown}


class StepQueryRelevance(_StepMeasure):
    """Share of the retrieval steps whose query is relevant to the question (one call)."""

    reads: ClassVar[tuple[str, ...] | None] = ("question", "trajectory")
    prompt_version = versions(AGENT_STEP_QUERIES)

    def __init__(
        self,
        provider: str = "llm",
        *,
        retrievers: Sequence[str] = (),
        relevance: float = DEFAULT_QUERY_RELEVANCE,
    ) -> None:
        """``relevance``: the offline provider's threshold (see the module doc)."""
        super().__init__(provider, retrievers=retrievers)
        if isinstance(relevance, bool) or not 0.0 <= float(relevance) <= 1.0:
            raise ValueError(f"relevance threshold must lie in [0, 1], got {relevance!r}")
        self.relevance = float(relevance)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if sample.trajectory is None or not sample.question.strip():
            return []
        key, values = _queries_request(sample, self.steps(sample))
        return [planned(AGENT_STEP_QUERIES, key, **values)]

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        steps = self.steps(sample)
        key, values = _queries_request(sample, steps)
        call: JudgeCall[StepQueryVerdicts]
        call, owned = await ctx.shared(key, lambda: ctx.ask(AGENT_STEP_QUERIES, **values))
        usage = usage_of(call, owned=(owned,))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        # one verdict per step: the engine checked the reply's length against the STEP blocks
        rows = [
            step_row(s, relevant=v.relevant, reason=v.reason)
            for s, v in zip(steps, call.value.verdicts, strict=True)
        ]
        return query_score(rows, usage=usage)


# --------------------------------------------------------------------------- context relevance


@dataclass(frozen=True)
class _Judged:
    """Context relevance's verdicts on every retrieval step's contexts, from one call."""

    verdicts: dict[str, tuple[bool, str]]
    """Passage text -> (relevant, reason)."""
    usage: Usage
    failure: Failure | None = None


def _relevance_request(
    sample: Sample, steps: Sequence[RetrievalStep]
) -> tuple[Hashable, dict[str, Any]] | None:
    """The ``context_relevance.judge`` request over every step's passages (each once, in step
    then rank order) and its memo key — `relevance_key` of a sample with those contexts, so a
    sample whose contexts are that union shares the call with ``context_relevance``."""
    texts = list(dict.fromkeys(c.text for s in steps for c in s.step.contexts))
    if not texts:
        return None
    union = sample.model_copy(update={"contexts": [Context(text=t) for t in texts]})
    return relevance_key(union), {"question": asked(sample), "contexts": texts}


def _plan_relevance(sample: Sample, steps: Sequence[RetrievalStep]) -> list[PlannedCall]:
    request = _relevance_request(sample, steps)
    if request is None or not sample.question.strip():
        return []
    key, values = request
    return [planned(CONTEXT_RELEVANCE, key, **values)]


async def _judge_relevance(
    sample: Sample, ctx: MetricContext, steps: Sequence[RetrievalStep]
) -> _Judged:
    request = _relevance_request(sample, steps)
    if request is None:
        return _Judged({}, Usage())
    key, values = request
    call: JudgeCall[ContextRelevanceVerdicts]
    call, owned = await ctx.shared(key, lambda: ctx.ask(CONTEXT_RELEVANCE, **values))
    usage = usage_of(call, owned=(owned,))
    if call.value is None:
        assert call.failure is not None
        return _Judged({}, usage, call.failure)
    verdicts = {
        text: (v.relevant, v.reason)
        for text, v in zip(values["contexts"], call.value.verdicts, strict=True)
    }
    return _Judged(verdicts, usage)


def _context_rows(step: RetrievalStep, judged: _Judged) -> list[dict[str, Any]]:
    return [
        {
            "rank": rank,
            "context_id": c.id,
            "relevant": judged.verdicts[c.text][0],
            "reason": judged.verdicts[c.text][1],
        }
        for rank, c in enumerate(step.step.contexts, start=1)
    ]


class StepContextRelevance(_StepMeasure):
    """Mean over the retrieval steps of each step's share of contexts relevant to the question."""

    reads: ClassVar[tuple[str, ...] | None] = ("question", "trajectory")
    prompt_version = versions(CONTEXT_RELEVANCE)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        return _plan_relevance(sample, self.steps(sample)) if sample.trajectory is not None else []

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        steps = self.steps(sample)
        judged = await _judge_relevance(sample, ctx, steps)
        if judged.failure is not None:
            return Score(failure=judged.failure, usage=judged.usage)
        rows: list[dict[str, Any]] = []
        for step in steps:
            contexts = _context_rows(step, judged)
            hits = sum(1 for c in contexts if c["relevant"])
            share = hits / len(contexts) if contexts else 0.0
            rows.append(
                step_row(
                    step,
                    relevant=hits > 0,
                    share=share,
                    relevant_contexts=hits,
                    returned=len(contexts),
                    contexts=contexts,
                )
            )
        value = sum(r["share"] for r in rows) / len(rows)
        useful = sum(1 for r in rows if r["relevant"])
        reason = (
            f"{useful} of {len(rows)} retrieval steps returned a context relevant to the "
            f"question; mean share relevant {value:.2f}"
        )
        return Score(
            value=value,
            reason=reason,
            details={"retrieval_steps": len(rows), "steps_with_relevant": useful, "steps": rows},
            usage=judged.usage,
        )


# --------------------------------------------------------------------------- steps to relevant


def _labelled(sample: Sample, steps: Sequence[RetrievalStep]) -> bool:
    """Whether relevance labels decide: the sample has them and its steps' contexts have ids."""
    return sample.relevance is not None and any(
        c.id is not None for s in steps for c in s.step.contexts
    )


class StepsToRelevant(_StepMeasure):
    """``1 / k``: k the retrieval steps taken up to the first that returned a relevant context."""

    reads: ClassVar[tuple[str, ...] | None] = ("question", "trajectory", "relevance")
    prompt_version = versions(CONTEXT_RELEVANCE)

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if sample.trajectory is not None and _labelled(sample, self.steps(sample)):
            return None  # the labels decide: no judge needed
        return super().missing_input(sample, ctx)

    def _edge(self, sample: Sample) -> Score | None:
        skipped = super()._edge(sample)
        if skipped is None and sample.trajectory is not None and sample.is_no_answer:
            return Score.skip(
                "labelled as having no relevant document (a no-answer query): there was no "
                "relevant context to reach",
                details={"retrieval_steps": len(self.steps(sample)), "steps": []},
            )
        return skipped

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        if sample.trajectory is None:
            return []
        steps = self.steps(sample)
        return [] if _labelled(sample, steps) else _plan_relevance(sample, steps)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        steps = self.steps(sample)
        rows: list[dict[str, Any]] = []
        if _labelled(sample, steps):
            labels = sample.relevance or {}
            source = "labels"
            usage = Usage()
            for step in steps:
                ids = [c.id for c in step.step.contexts if c.id is not None]
                hits = [i for i in ids if labels.get(i, 0) > 0]
                rows.append(step_row(step, relevant=bool(hits), relevant_ids=hits))
        else:
            judged = await _judge_relevance(sample, ctx, steps)
            if judged.failure is not None:
                return Score(failure=judged.failure, usage=judged.usage)
            source, usage = "judge", judged.usage
            for step in steps:
                contexts = _context_rows(step, judged)
                ranks = [c["rank"] for c in contexts if c["relevant"]]
                rows.append(step_row(step, relevant=bool(ranks), relevant_ranks=ranks))
        first = next((k for k, r in enumerate(rows, start=1) if r["relevant"]), None)
        details: dict[str, Any] = {
            "from": source,
            "steps_taken": first,
            "first_relevant_step": None if first is None else rows[first - 1]["step"],
            "retrieval_steps": len(rows),
            "steps": rows,
        }
        if first is None:
            reason = f"none of the {len(rows)} retrieval steps returned a relevant context"
            return Score(value=0.0, reason=reason, details=details, usage=usage)
        reason = (
            f"the first relevant context came at retrieval step {first} of {len(rows)} "
            f"(trajectory step {rows[first - 1]['step']}, judged by the {source})"
        )
        return Score(value=1.0 / first, reason=reason, details=details, usage=usage)


# --------------------------------------------------------------------------- redundancy


def _folded(query: str) -> str:
    return " ".join(words(query))


def repeated(query: str, earlier: str, similarity: float = DEFAULT_REPEAT_SIMILARITY) -> str | None:
    """How ``query`` repeats ``earlier`` — ``"same query"``, ``"same words"`` or ``"similar
    text"`` (see the module doc) — or None when it does not."""
    a, b = _folded(query), _folded(earlier)
    if a == b:
        return "same query"
    ta, tb = terms(query), terms(earlier)
    if ta and ta == tb:
        return "same words"
    if a and b and difflib.SequenceMatcher(None, a, b).ratio() >= similarity:
        return "similar text"
    return None


class RedundantRetrievals(_StepMeasure):
    """Share of the retrieval steps that repeat an earlier search (lower is better)."""

    reads: ClassVar[tuple[str, ...] | None] = ("trajectory",)
    needs_judge = False
    provider = "offline"
    higher_is_better = False

    def __init__(
        self,
        provider: str = "offline",
        *,
        retrievers: Sequence[str] = (),
        similarity: float = DEFAULT_REPEAT_SIMILARITY,
    ) -> None:
        """``similarity``: difflib ratio of two folded queries from which one repeats the
        other (see `repeated`)."""
        super().__init__(provider, retrievers=retrievers)
        if isinstance(similarity, bool) or not 0.0 < float(similarity) <= 1.0:
            raise ValueError(f"similarity must lie in (0, 1], got {similarity!r}")
        self.similarity = float(similarity)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        steps = self.steps(sample)
        rows: list[dict[str, Any]] = []
        for k, step in enumerate(steps):
            match: tuple[RetrievalStep, str] | None = None
            for before in steps[:k]:
                if before.tool != step.tool or before.step.error is not None:
                    continue  # another tool, or a retry of a failed call
                how = repeated(step.query, before.query, self.similarity)
                if how is not None:
                    match = (before, how)
                    break
            rows.append(
                step_row(
                    step,
                    redundant=match is not None,
                    repeats=None if match is None else match[0].index,
                    rule=None if match is None else match[1],
                )
            )
        redundant = [r for r in rows if r["redundant"]]
        reason = f"{len(redundant)} of {len(rows)} retrieval steps repeat an earlier search"
        if redundant:
            r = redundant[0]
            reason += f" (step {r['step']} repeats step {r['repeats']}: {r['rule']})"
        return Score(
            value=len(redundant) / len(rows),
            reason=reason,
            details={"redundant": len(redundant), "retrieval_steps": len(rows), "steps": rows},
        )


_EDGES = {
    "no trajectory": "missing_input naming 'trajectory'",
    "no retrieval step": "skipped with the reason",
}

declare(
    StepQueryRelevance,
    meaning="share of an agent's retrieval steps whose query is relevant to the question",
    how="one call judges every retrieval step's query, each with the start of what it returned",
    needs=("judge",),
    judge_calls="1 per trajectory",
    edges=_EDGES,
    kind="agent",
)
declare(
    StepContextRelevance,
    meaning="mean over an agent's retrieval steps of the share of each step's contexts "
    "relevant to the question",
    how="context relevance's one call over every step's contexts, each passage once",
    needs=("judge",),
    judge_calls="1 per trajectory (shared with steps_to_relevant and context_relevance)",
    edges={**_EDGES, "step that returned nothing": "counts 0"},
    kind="agent",
)
declare(
    StepsToRelevant,
    meaning="1/k, k the retrieval steps an agent took until one returned a relevant context "
    "(0 when none did)",
    how="relevance labels by context id when present, else step_context_relevance's verdicts",
    needs=("judge",),
    judge_calls="1 per trajectory, shared with step_context_relevance (0 with labels)",
    edges={**_EDGES, "no relevant context": "0.0", "no-answer labels": "skipped"},
    kind="agent",
)
declare(
    RedundantRetrievals,
    meaning="share of an agent's retrieval steps repeating an earlier search (same tool, the "
    "same or a near-identical query)",
    how="folded text equal, same content words, or difflib ratio >= 0.9; retries of failed "
    "calls excepted",
    edges=_EDGES,
    kind="agent",
)

# The offline provider of step_query_relevance lives with the core's other providers; importing
# it here registers it whenever the measure is.
from ..metrics.providers.offline import step_queries as _step_queries  # noqa: E402,F401
