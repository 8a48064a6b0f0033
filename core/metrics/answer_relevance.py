"""AnswerRelevance: does the answer address the question that was asked?

Es et al. 2023, "RAGAS: Automated Evaluation of Retrieval Augmented Generation", §3: have a
judge generate n questions the answer would answer, embed them and the real question q, and score

    AR = (1/n) · Σ_i max(0, cos(E(q), E(q_i))).

An answer that drifts off topic or answers only part of the question yields generated questions
unlike q. Negative cosines are clipped to 0 so the value stays in [0, 1] (the paper's mean of raw
similarities can dip below 0 with some embedders). A noncommittal answer ("I don't know") can
still sound on-topic, so — as RAGAS does — it scores 0.0.

The generated questions come from the shared ``answer.analyze`` call (0 extra judge calls when
Faithfulness also runs), and all n + 1 texts are embedded in one batch. The prompt asks for 3
questions; when a judge returns another non-zero number the mean is over what it returned
(recorded in ``details``); zero questions from a committal answer does not fit the request,
so the engine repairs or retries it like an unparseable reply (``parse_error`` if that fails).

On a conversation's turn the judge reads the question with the conversation so far
(`ragbridge.core.prompts.history.asked`), and q is the question with the user turns just before
it (`ragbridge.core.prompts.history.user_side`): a follow-up such as "and its height?" names
nothing the generated questions could be compared with. A sample without history is scored as
before.
"""

from __future__ import annotations

from ..judging.embedding import EmbeddingFailed
from ..prompts.answer_analyze import ANSWER_ANALYZE
from ..prompts.history import user_side
from ..results.evaluation import FailureKind, Score
from ..sample import Sample
from ._shared import analyze_answer, cosine, has_inputs, plan_analyze, versions
from .base import Metric, MetricContext, PlannedCall, declare, usage_of

__all__ = ["AnswerRelevance"]


class AnswerRelevance(Metric):
    """Mean clipped cosine similarity of the question to questions generated from the answer."""

    requires = ("question", "answer")
    reads = ("question", "answer")
    needs_embedder = True
    prompt_version = versions(ANSWER_ANALYZE)

    def __init__(self, provider: str = "llm") -> None:
        """``provider="offline"``: a fitted model of the question-answer cosine and the kind of
        answer the question asks for (`offline.answer_relevance`); noncommittal answers 0."""
        self._use_provider(provider)

    def __repr__(self) -> str:
        return f"AnswerRelevance(provider={self.provider!r})"

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        return [plan_analyze(sample)] if has_inputs(sample, self.requires) else []

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        call, owned = await analyze_answer(sample, ctx)
        usage = usage_of(call, owned=(owned,))
        if call.value is None:
            assert call.failure is not None
            return Score(failure=call.failure, usage=usage)
        analysis = call.value
        questions = [q for q in analysis.questions if q.strip()]
        if analysis.noncommittal:
            return Score(
                value=0.0,
                reason="the answer is noncommittal: it does not commit to answering the question",
                details={"noncommittal": True, "generated_questions": questions},
                usage=usage,
            )
        # At least one question: the engine re-asks a committal analysis without any
        # (the template's check), so a reply that reaches here has some.
        assert ctx.embedder is not None  # guaranteed by needs_embedder
        try:
            vectors = await ctx.embedder.embed([user_side(sample), *questions])
        except EmbeddingFailed as exc:  # typed (timeout, rate_limited, ...); keep the usage
            return Score(failure=exc.failure, usage=usage)
        except Exception as exc:  # keep the judge usage on the Score
            return Score.fail(
                FailureKind.JUDGE_ERROR,
                f"embedding failed: {type(exc).__name__}: {exc}",
                usage=usage,
            )
        target, generated = vectors[0], vectors[1:]
        sims = [max(0.0, cosine(target, v)) for v in generated]
        value = sum(sims) / len(sims)
        return Score(
            value=value,
            reason=f"mean similarity of {len(sims)} questions generated from the answer "
            f"to the question: {value:.2f}",
            details={
                "noncommittal": False,
                "generated_questions": [
                    {"question": q, "similarity": s} for q, s in zip(questions, sims, strict=True)
                ],
            },
            usage=usage,
        )


declare(
    AnswerRelevance,
    meaning="whether the answer addresses the question that was asked",
    how="questions generated from the answer, compared with the question by embeddings",
    needs=("judge", "embedder"),
    judge_calls="1, shared",
    edges={"noncommittal answer": "0.0"},
)
