"""RAGAS as a provider of ragbridge's measures: ``"faithfulness:ragas"``, ``"bleu:ragas"``, ...

Each function here runs one RAGAS metric on one `Sample`, on ragbridge's judge engine (so the
cache, retries, concurrency cap and usage accounting are ragbridge's), and returns a ragbridge
`Score`: a NaN becomes a typed failure with the reason (or, from a measure that calls no judge
at an input it cannot use, RAGAS's skip naming the field: `_unjudged_nan`), an exception a
``judge_error`` naming it, and the usage is exactly what the call spent (a fresh judge wrapper
per call).

Two ways in, one implementation:

* through the registry (`register`, the ``ragbridge.providers`` entry point): the measure's
  own checks and edge policy run first (an abstaining answer is skipped for every provider of
  faithfulness), then RAGAS scores;
* through `ragbridge.adapters.compare`, which calls these functions directly, so the
  comparison shows what RAGAS itself does at the edges (its NaN on an answer with no claim).

The providers that need no model are RAGAS's metric as RAGAS runs it, edges included, so a
test written against RAGAS passes against them: ``exact_match:ragas``, ``bleu:ragas`` and
``rouge_l:ragas`` (`RagasStringMetric`) score an empty answer or reference as RAGAS does
(ExactMatch of two empty strings is 1.0, any other pair with an empty side 0.0) instead of the
measure's ``missing_input`` (``edges="ragbridge"`` restores that policy), and
``context_precision:ragas_non_llm`` / ``context_recall:ragas_non_llm`` (`RagasNonLLMMetric`)
read only what RAGAS reads — the retrieved contexts and ``reference_contexts``, never the
question or a reference answer. Where such a provider's definition is not the measure's, its
registry row says so (`ProviderSpec.definition`).

Importing this module is cheap: RAGAS is imported when a score is asked for (through
`ragbridge.adapters.ragas.models`), and a missing install raises ImportError naming the extra.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel

from ragbridge.adapters._framework_cells import INPUTS, missing, raised
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.registry import ProviderSpec, Registry
from ragbridge.core.results.evaluation import Failure, FailureKind, Score
from ragbridge.core.sample import Sample

__all__ = [
    "ID_HOW",
    "RagasNonLLMMetric",
    "RagasStringMetric",
    "ragas_id_score",
    "ragas_non_llm_score",
    "ragas_score",
    "register",
]

PROVIDER = "ragas"
NON_LLM = "ragas_non_llm"
NO_REASON = "RAGAS gives no reason"
NON_LLM_INPUTS = ("contexts", "reference_contexts")
Edges = Literal["ragas", "ragbridge"]
"""Whose answer an empty string gets from a string provider: RAGAS's value, or ragbridge's
``missing_input`` failure."""

# measure -> (RAGAS class, needs, judge calls per sample (counted with a counting judge on a
# 3-context sample), note on how its definition differs)
_JUDGED: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    "faithfulness": (
        "RAGAS collections Faithfulness",
        ("judge",),
        "2",
        "RAGAS returns NaN for an answer with no claim (a no_claims failure here)",
    ),
    "answer_relevance": (
        "RAGAS collections AnswerRelevancy (needs an embedder)",
        ("judge", "embedder"),
        "3 (one per generated question)",
        "",
    ),
    "context_precision": (
        "RAGAS collections ContextPrecision (LLM, with reference)",
        ("judge", "reference"),
        "1 per context",
        "RAGAS asks the judge once per context",
    ),
    "context_recall": ("RAGAS collections ContextRecall", ("judge", "reference"), "1", ""),
}
# measure -> (how, note on how it differs, its own definition when not the measure's)
_STRINGS: dict[str, tuple[str, str, str]] = {
    "rouge_l": (
        "RAGAS collections RougeScore (rougeL, fmeasure)",
        "an empty answer or reference scores 0.0, as in RAGAS (ragbridge: missing_input)",
        "",
    ),
    "bleu": (
        "RAGAS collections BleuScore (sacrebleu corpus BLEU over '. '-split sentences)",
        "RAGAS splits both texts on '. ' and computes corpus BLEU over the pieces, pairing "
        "them by position — multi-sentence and short answers score differently",
        "corpus BLEU of the answer's and the reference's '. '-split pieces, paired by "
        "position (sacrebleu), / 100",
    ),
    "exact_match": (
        "RAGAS collections ExactMatch (raw string equality)",
        "RAGAS compares the raw strings (no SQuAD normalisation)",
        "1 when the answer is the reference, character for character (no normalisation; "
        "two empty strings match)",
    ),
}
_NON_LLM: dict[str, tuple[str, str, str]] = {
    "context_precision": (
        "RAGAS NonLLMContextPrecisionWithReference (string match to reference_contexts)",
        "the judge is replaced by string similarity to the sample's reference_contexts",
        "rank-weighted precision of the retrieved contexts, a context counting as useful when "
        "its string similarity to one of the sample's reference_contexts is at least 0.5",
    ),
    "context_recall": (
        "RAGAS NonLLMContextRecall (string match of reference_contexts)",
        "the share of reference_contexts found among the retrieved ones by string similarity",
        "share of the sample's reference_contexts that some retrieved context matches with "
        "string similarity above 0.5 (reads no question and no reference answer)",
    ),
}
ID_HOW: dict[str, str] = {
    "id_context_precision": "RAGAS IDBasedContextPrecision",
    "id_context_recall": "RAGAS IDBasedContextRecall",
}
"""RAGAS's id-based measures (compared with ragbridge's precision@n / recall@n)."""


def _import_ragas() -> None:
    """Import RAGAS through the one guard: without it, an ImportError naming the extra."""
    from . import _framework  # noqa: F401


# --------------------------------------------------------------------------- one sample


async def ragas_score(
    measure: str,
    sample: Sample,
    engine: JudgeEngine | None,
    embeddings: EmbeddingEngine | None = None,
    *,
    edges: Edges = "ragas",
) -> Score:
    """RAGAS's ``measure`` on ``sample``: a judged measure on ``engine`` (and ``embeddings``
    for answer relevance), or a string measure (no model). A string measure scores an empty
    answer or reference as RAGAS does unless ``edges="ragbridge"`` (then: ``missing_input``)."""
    if measure in _STRINGS and edges == "ragas":
        gap = _absent(sample, INPUTS[measure], measure)
    else:
        gap = missing(sample, INPUTS[measure], measure)
    if gap is not None:
        return gap.model_copy(update={"provider": PROVIDER})
    _import_ragas()
    from ragas.metrics import collections as rc

    from .models import RagasJudgeError, RagasModernEmbedder

    if measure in _STRINGS:
        metric: Any = {
            "rouge_l": rc.RougeScore,
            "bleu": rc.BleuScore,
            "exact_match": rc.ExactMatch,
        }[measure]()
        try:
            result = await metric.ascore(reference=sample.reference, response=sample.answer)
        except Exception as exc:
            return raised("RAGAS", measure, exc, provider=PROVIDER)
        return _score(result, measure, None)

    if engine is None:
        return Score.fail(
            FailureKind.MISSING_INPUT,
            f"{measure}:ragas needs a judge (judge=...)",
            provider=PROVIDER,
        )
    llm = _observing_llm(engine)
    contexts = [c.text for c in sample.contexts]
    answer, reference = sample.answer or "", sample.reference or ""  # present: checked above
    try:
        if measure == "faithfulness":
            result = await rc.Faithfulness(llm=llm).ascore(
                user_input=sample.question, response=answer, retrieved_contexts=contexts
            )
        elif measure == "answer_relevance":
            if embeddings is None:
                return Score.fail(
                    FailureKind.MISSING_INPUT,
                    "answer_relevance:ragas needs an embedder (embedder=...)",
                    provider=PROVIDER,
                )
            result = await rc.AnswerRelevancy(
                llm=llm, embeddings=RagasModernEmbedder(embeddings)
            ).ascore(user_input=sample.question, response=answer)
        elif measure == "context_precision":
            result = await rc.ContextPrecision(llm=llm).ascore(
                user_input=sample.question, reference=reference, retrieved_contexts=contexts
            )
        else:
            result = await rc.ContextRecall(llm=llm).ascore(
                user_input=sample.question, retrieved_contexts=contexts, reference=reference
            )
    except RagasJudgeError as exc:
        return Score(failure=exc.failure, provider=PROVIDER, judge_model=llm.model, usage=llm.usage)
    except Exception as exc:
        return raised("RAGAS", measure, exc, provider=PROVIDER, usage=llm.usage, model=llm.model)
    score = _score(result, measure, llm)
    if measure == "faithfulness" and score.value is None and _no_statements(llm.replies):
        failure = Failure(
            kind=FailureKind.NO_CLAIMS,
            message="RAGAS extracted no statement from the answer and returned NaN",
        )
        score = score.model_copy(update={"failure": failure})
    return score


async def ragas_non_llm_score(measure: str, sample: Sample) -> Score:
    """RAGAS's non-LLM context precision / recall: retrieved contexts matched to the sample's
    ``reference_contexts`` by string similarity."""
    gap = missing(sample, NON_LLM_INPUTS, measure)
    if gap is not None:
        return gap.model_copy(update={"provider": PROVIDER})
    _import_ragas()
    from ragas.dataset_schema import SingleTurnSample

    with warnings.catch_warnings():  # RAGAS 0.4.3 has no collections version of these yet
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import NonLLMContextPrecisionWithReference, NonLLMContextRecall

    metric: Any = (
        NonLLMContextPrecisionWithReference()
        if measure == "context_precision"
        else NonLLMContextRecall()
    )
    row = SingleTurnSample(
        retrieved_contexts=[c.text for c in sample.contexts],
        reference_contexts=list(sample.reference_contexts or []),
    )
    try:
        value = await metric.single_turn_ascore(row)
    except Exception as exc:
        return raised("RAGAS", measure, exc, provider=PROVIDER)
    return _unjudged_nan(measure, sample, value) or _score(value, measure, None)


def _absent(sample: Sample, fields: Sequence[str], measure: str) -> Score | None:
    """A ``missing_input`` failure naming the first field that is None (RAGAS's metric cannot
    be called without it; an empty string is a value), or None."""
    for name in fields:
        if getattr(sample, name) is None:
            return Score.fail(
                FailureKind.MISSING_INPUT,
                f"{measure}:ragas needs the sample's {name!r}, which is absent",
            )
    return None


def ids_present(sample: Sample) -> bool:
    """Whether RAGAS's id-based measures can run: an id on every context, and labels."""
    return (
        bool(sample.contexts)
        and all(c.id is not None for c in sample.contexts)
        and sample.relevance is not None
    )


async def ragas_id_score(measure: str, sample: Sample) -> Score:
    """RAGAS's ``IDBasedContextPrecision`` / ``IDBasedContextRecall`` on ``sample``."""
    if not ids_present(sample):
        return Score.fail(
            FailureKind.MISSING_INPUT,
            f"{measure} needs an id on every context and relevance labels",
            provider=PROVIDER,
        )
    _import_ragas()
    from .datasets import to_ragas_dataset

    with warnings.catch_warnings():  # RAGAS 0.4.3 has no collections version of these yet
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import IDBasedContextPrecision, IDBasedContextRecall

    metric: Any = (
        IDBasedContextPrecision() if measure == "id_context_precision" else IDBasedContextRecall()
    )
    (row,) = to_ragas_dataset([sample]).samples
    try:
        value = await metric.single_turn_ascore(row)
    except Exception as exc:
        return raised("RAGAS", measure, exc, provider=PROVIDER)
    return _unjudged_nan(measure, sample, value) or _score(value, measure, None)


def _observing_llm(engine: JudgeEngine) -> Any:
    """A fresh `RagasInstructorJudge` on ``engine`` that records each (schema name, reply)."""
    from .models import RagasInstructorJudge

    class ObservingJudge(RagasInstructorJudge):
        def __init__(self, engine: JudgeEngine) -> None:
            super().__init__(engine)
            self.replies: list[tuple[str, BaseModel]] = []

        async def agenerate(self, prompt: str, response_model: type[Any]) -> Any:
            reply = await super().agenerate(prompt, response_model)
            self.replies.append((response_model.__name__, reply))
            return reply

    return ObservingJudge(engine)


def _no_statements(replies: Sequence[tuple[str, BaseModel]]) -> bool:
    """Whether RAGAS's statement-extraction reply held no statement (what makes it return NaN)."""
    for name, reply in replies:
        if name == "StatementGeneratorOutput":
            return not [s for s in getattr(reply, "statements", []) if str(s).strip()]
    return False


def _unjudged_nan(measure: str, sample: Sample, value: Any) -> Score | None:
    """A NaN from a RAGAS measure that calls no judge (id-based, non-LLM), else None.

    No judge was called, so it is never a judge error. Where the sample lacks what the RAGAS
    metric divides by, it is RAGAS's skip, naming the field: ``IDBasedContextRecall`` divides
    by the relevant ids (``reference_context_ids``, the grades > 0 of ``relevance``), so a
    question with no relevant document is NaN there — ragbridge skips it too. Any other NaN is
    an ``invalid_output`` naming the measure.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if not math.isnan(float(value)):
        return None
    if measure == "id_context_recall" and not any(g > 0 for g in (sample.relevance or {}).values()):
        return Score.skip(
            "RAGAS IDBasedContextRecall returns NaN here: the sample's 'relevance' has no grade "
            "> 0 (no relevant document exists), so there is no relevant id to recall",
            provider=PROVIDER,
        )
    return Score.fail(
        FailureKind.INVALID_OUTPUT,
        f"RAGAS returned NaN for {measure} without calling a judge",
        provider=PROVIDER,
    )


def _score(result: Any, measure: str, llm: Any) -> Score:
    from .results import score_from_ragas

    score = score_from_ragas(result, metric=measure)
    update: dict[str, Any] = {}
    if score.value is not None and score.reason is None:
        update["reason"] = NO_REASON
    if llm is not None:
        update["usage"] = llm.usage
        update["judge_model"] = llm.model
    return score.model_copy(update=update) if update else score


# --------------------------------------------------------------------------- metrics


class RagasStringMetric(Metric):
    """``exact_match:ragas``, ``bleu:ragas``, ``rouge_l:ragas``: RAGAS's collections metric on
    the answer and the reference, giving RAGAS's value wherever RAGAS gives one.

    A test written against RAGAS passes against it: an empty answer or reference is a string
    like any other (RAGAS's ExactMatch of two empty strings is 1.0; every other pair with an
    empty side scores 0.0, in BLEU and ROUGE too). ``edges="ragbridge"`` applies ragbridge's
    policy instead, as the ``string`` provider does: an empty (or blank) field is a
    ``missing_input`` failure. A field that is absent (None) is missing either way: RAGAS's
    metric cannot be called without it.
    """

    requires = ("answer", "reference")
    reads = ("answer", "reference")
    needs_judge = False
    provider = PROVIDER

    def __init__(self, measure: str, *, edges: Edges = "ragas") -> None:
        if measure not in _STRINGS:
            raise ValueError(f"RAGAS has no string metric for {measure!r}; use {list(_STRINGS)}")
        if edges not in ("ragas", "ragbridge"):
            raise ValueError(f"edges must be 'ragas' or 'ragbridge', got {edges!r}")
        self.name = measure
        self.edges: Edges = edges

    def __repr__(self) -> str:
        return f"RagasStringMetric({self.name!r}, edges={self.edges!r})"

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        if self.edges == "ragbridge":
            return super().missing_input(sample, ctx)
        gap = _absent(sample, self.requires, self.name)
        return None if gap is None else gap.failure

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        return await ragas_score(self.name, sample, None, edges=self.edges)


class RagasNonLLMMetric(Metric):
    """``context_precision:ragas_non_llm`` / ``context_recall:ragas_non_llm``: RAGAS's
    ``NonLLMContextPrecisionWithReference`` / ``NonLLMContextRecall``, which read the retrieved
    contexts and the sample's ``reference_contexts`` and nothing else — so neither a question
    nor a reference answer is asked for (RAGAS's own example has neither). An empty list on
    either side is a ``missing_input`` failure (RAGAS raises or returns NaN there)."""

    requires = NON_LLM_INPUTS
    reads = ("contexts.text", "reference_contexts")
    needs_judge = False
    provider = NON_LLM

    def __init__(self, measure: str) -> None:
        if measure not in _NON_LLM:
            raise ValueError(f"RAGAS has no non-LLM metric for {measure!r}; use {list(_NON_LLM)}")
        self.name = measure

    def __repr__(self) -> str:
        return f"RagasNonLLMMetric({self.name!r})"

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        return await ragas_non_llm_score(self.name, sample)


# One builder per measure, made once: a registered ProviderSpec compares equal to itself when
# the entry point registers again.
_BUILDERS: dict[tuple[str, str], Callable[[], Metric]] = {
    **{(m, PROVIDER): partial(RagasStringMetric, m) for m in _STRINGS},
    **{(m, NON_LLM): partial(RagasNonLLMMetric, m) for m in _NON_LLM},
}


# --------------------------------------------------------------------------- the registry


async def _judged(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await ragas_score(metric.name, sample, ctx.judge, ctx.embedder)


async def _non_llm(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    return await ragas_non_llm_score(metric.name, sample)


def register(registry: Registry) -> None:
    """The ``ragbridge.providers`` entry point: RAGAS's implementations of ragbridge's measures
    (``faithfulness:ragas``, ``context_recall:ragas_non_llm``, ``bleu:ragas``, ...)."""
    for measure, (how, needs, calls, note) in _JUDGED.items():
        registry.add_provider(
            ProviderSpec(
                measure=measure,
                name=PROVIDER,
                how=how,
                needs=frozenset(needs),
                judge_calls=calls,
                compute=_judged,
                extra="ragas",
                note=note,
            )
        )
    for table, name, compute in ((_STRINGS, PROVIDER, _judged), (_NON_LLM, NON_LLM, _non_llm)):
        for measure, (how, note, definition) in table.items():
            registry.add_provider(
                ProviderSpec(
                    measure=measure,
                    name=name,
                    how=how,
                    needs=frozenset({"reference"}),
                    compute=compute,  # for Metric.use_provider: the measure's checks first
                    build=_BUILDERS[measure, name],  # by name: RAGAS's inputs and edges
                    extra="ragas",
                    note=note,
                    definition=definition,
                )
            )
