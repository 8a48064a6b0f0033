"""The offline provider: the RAG measures without an LLM, from embeddings and string checks.

No usable LLM runs offline on a laptop or in CI (see the integration notes), so the offline path
approximates each judge task with a sentence-embedding matcher plus exact checks where
embeddings are known to be blind:

* **claim support** (faithfulness, hallucination, context recall): a sentence is supported when
  its best cosine similarity to a context sentence reaches ``similarity`` AND every number and
  name in it (`ragbridge.core.text.salient`) occurs in the contexts. Embeddings rate "paid 1,200"
  and "paid 2,100" as near-identical; the exact check catches that.
* **relevance** (answer relevance, context precision): cosine similarity to the question.

The thresholds are parameters; the defaults were calibrated on the FaithBench dev sample
(`benchmarks/offline_calibration.py`). What this provider is for, and what not: see the README.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results import FailureKind, Score
from ..sample import Sample
from ..text import content_words, numbers, salient, sentences, words
from .base import Metric, MetricContext

__all__ = [
    "DEFAULT_RELEVANCE",
    "DEFAULT_SIMILARITY",
    "AnswerSimilarity",
    "ContextUsage",
    "OfflineSettings",
    "is_noncommittal",
]

DEFAULT_SIMILARITY = 0.6
"""Cosine similarity (all-MiniLM-L6-v2) at which a context sentence supports a claim."""
DEFAULT_RELEVANCE = 0.35
"""Cosine similarity between question and context at which a context counts as relevant."""

_NONCOMMITTAL = re.compile(
    r"\b(i (do not|don't|cannot|can't) (know|say|tell|answer|find)|not sure|no information|"
    r"unable to (answer|find|determine)|cannot be determined|(is|are) not (mentioned|provided|"
    r"specified|stated)|insufficient (information|context)|i have no)\b",
    re.IGNORECASE,
)


def is_noncommittal(answer: str) -> bool:
    """Evasive answers ("I don't know", "not mentioned in the context") score 0 relevance."""
    return bool(_NONCOMMITTAL.search(answer))


DEFAULT_CANDIDATES = 2
"""Context sentences per claim that reach the embedding model (see `_shortlist`)."""


@dataclass(frozen=True)
class OfflineSettings:
    similarity: float = DEFAULT_SIMILARITY
    relevance: float = DEFAULT_RELEVANCE
    candidates: int = DEFAULT_CANDIDATES


def _unit(vectors: Sequence[Sequence[float]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        return matrix.reshape(0, 0)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray[Any, np.dtype[np.float64]] = matrix / norms
    return out


async def _embed(ctx: MetricContext, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
    assert ctx.embedder is not None
    return _unit(await ctx.embedder.embed(texts))


@dataclass(frozen=True)
class Support:
    """How one sentence fares against the contexts."""

    sentence: str
    similarity: float
    best: str | None
    best_context: int | None
    missing: tuple[str, ...]
    supported: bool

    def detail(self) -> dict[str, Any]:
        return {
            "claim": self.sentence,
            "supported": self.supported,
            "similarity": round(self.similarity, 4),
            "best_match": self.best,
            "context": self.best_context,
            "missing_terms": list(self.missing),
        }


def _shortlist(queries: Sequence[str], pieces: Sequence[str], k: int) -> list[list[int]]:
    """For each query, the ``k`` pieces sharing the most (IDF-weighted) content words with it.

    Retrieve, then verify: embedding every sentence of every context is what makes offline
    scoring slow (a 120-word context is six sentences); a cheap lexical shortlist first means
    only a handful of candidate sentences per claim reach the embedding model. Ties keep
    document order, so a claim with no word in common still gets ``k`` candidates.
    """
    piece_words = [set(content_words(p)) for p in pieces]
    df: dict[str, int] = {}
    for bag in piece_words:
        for w in bag:
            df[w] = df.get(w, 0) + 1
    n = len(pieces)
    idf = {w: math.log(1.0 + n / c) for w, c in df.items()}
    out = []
    for query in queries:
        bag = set(content_words(query))
        scores = [sum(idf[w] for w in bag & pw) for pw in piece_words]
        order = sorted(range(n), key=lambda j: (-scores[j], j))
        out.append(order[:k])
    return out


async def match_sentences(
    claims: list[str],
    contexts: Sequence[str],
    ctx: MetricContext,
    threshold: float,
    *,
    candidates: int = DEFAULT_CANDIDATES,
) -> list[Support]:
    """Best context sentence per claim, and whether it supports the claim (see module doc)."""
    pieces: list[tuple[int, str]] = [
        (i, s) for i, text in enumerate(contexts, start=1) for s in sentences(text)
    ]
    if not pieces:
        return [Support(c, 0.0, None, None, (), False) for c in claims]
    pool_words = {w for text in contexts for w in words(text)}
    pool_numbers = {n for text in contexts for n in numbers(text)}
    shortlist = _shortlist(claims, [s for _, s in pieces], candidates)
    needed = sorted({j for row in shortlist for j in row})
    column = {j: i for i, j in enumerate(needed)}
    vectors = await _embed(ctx, [*claims, *(pieces[j][1] for j in needed)])
    sims = vectors[: len(claims)] @ vectors[len(claims) :].T
    out = []
    for row, claim in enumerate(claims):
        j = max(shortlist[row], key=lambda c: float(sims[row, column[c]]))
        similarity = float(sims[row, column[j]])
        missing = tuple(
            sorted(t for t in salient(claim) if t not in pool_words and t not in pool_numbers)
        )
        supported = similarity >= threshold and not missing
        out.append(Support(claim, similarity, pieces[j][1], pieces[j][0], missing, supported))
    return out


async def faithfulness(
    sample: Sample, ctx: MetricContext, settings: OfflineSettings, *, hallucination: bool
) -> Score:
    claims = sentences(sample.answer or "")
    if not claims:
        return Score.fail(FailureKind.NO_CLAIMS, "the answer has no sentence to check")
    contexts = [c.text for c in sample.contexts]
    checks = await match_sentences(
        claims, contexts, ctx, settings.similarity, candidates=settings.candidates
    )
    supported = sum(c.supported for c in checks)
    total = len(checks)
    faithful = supported / total
    details = {
        "claims": [c.detail() for c in checks],
        "supported": supported,
        "total": total,
        "similarity_threshold": settings.similarity,
    }
    if not contexts:
        reason = "no contexts were retrieved, so no sentence of the answer is supported"
    elif hallucination:
        reason = f"{total - supported} of {total} answer sentences not supported by the contexts"
    else:
        reason = f"{supported} of {total} answer sentences supported by the contexts"
    return Score(
        value=1.0 - faithful if hallucination else faithful, reason=reason, details=details
    )


async def context_recall(sample: Sample, ctx: MetricContext, settings: OfflineSettings) -> Score:
    statements = sentences(sample.reference or "")
    if not statements:
        return Score.fail(FailureKind.NO_CLAIMS, "the reference has no sentence to attribute")
    checks = await match_sentences(
        statements,
        [c.text for c in sample.contexts],
        ctx,
        settings.similarity,
        candidates=settings.candidates,
    )
    attributed = sum(c.supported for c in checks)
    details = {
        "statements": [{**c.detail(), "attributed": c.supported} for c in checks],
        "attributed": attributed,
        "total": len(checks),
    }
    reason = f"{attributed} of {len(checks)} reference sentences found in the contexts"
    return Score(value=attributed / len(checks), reason=reason, details=details)


async def answer_relevance(sample: Sample, ctx: MetricContext) -> Score:
    answer = sample.answer or ""
    if is_noncommittal(answer):
        return Score(value=0.0, reason="the answer is noncommittal", details={"noncommittal": True})
    # The answer is embedded as the mean of its sentences' vectors: the same sentences
    # faithfulness embeds (so they come from the cache or the same batch), and short inputs
    # keep the model from padding every text in a batch to the longest answer.
    parts = sentences(answer) or [answer]
    vectors = await _embed(ctx, [sample.question, *parts])
    mean = vectors[1:].mean(axis=0)
    norm = float(np.linalg.norm(mean)) or 1.0
    similarity = max(0.0, min(1.0, float(vectors[0] @ mean) / norm))
    return Score(
        value=similarity,
        reason=f"question-answer cosine similarity {similarity:.2f}",
        details={"noncommittal": False, "similarity": round(similarity, 4)},
    )


async def context_precision(sample: Sample, ctx: MetricContext, settings: OfflineSettings) -> Score:
    from .context_precision import average_precision

    # Each context is represented by its sentence closest in wording to the question (see
    # `_shortlist`), so a long context costs one short embedding, not a long one.
    per_context = [sentences(c.text) or [c.text] for c in sample.contexts]
    chosen = [
        [sents[j] for j in _shortlist([sample.question], sents, 1)[0]] for sents in per_context
    ]
    flat = [s for group in chosen for s in group]
    vectors = await _embed(ctx, [sample.question, *flat])
    flat_sims = vectors[1:] @ vectors[0]
    sims: list[float] = []
    at = 0
    for group in chosen:
        sims.append(float(flat_sims[at : at + len(group)].max()))
        at += len(group)
    useful = [s >= settings.relevance for s in sims]
    value = average_precision(useful)
    details = {
        "contexts": [
            {"rank": k, "context_id": c.id, "similarity": round(s, 4), "useful": u}
            for k, (c, s, u) in enumerate(zip(sample.contexts, sims, useful, strict=True), 1)
        ],
        "relevance_threshold": settings.relevance,
    }
    n_useful = sum(useful)
    reason = (
        f"{n_useful} of {len(useful)} contexts similar to the question; "
        f"rank-weighted precision {value:.2f}"
    )
    return Score(value=value, reason=reason, details=details)


class AnswerSimilarity(Metric):
    """Cosine similarity of the answer's and the reference's embeddings (clipped at 0).

    The "semantic similarity" half of RAGAS's answer correctness, on its own: cheap, offline,
    blind to negation and numbers — use it for drift, not for correctness.
    """

    requires = ("answer", "reference")
    needs_judge = False
    needs_embedder = True
    provider = "offline"
    providers = ("offline",)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        vectors = await _embed(ctx, [sample.answer or "", sample.reference or ""])
        similarity = max(0.0, min(1.0, float(vectors[0] @ vectors[1])))
        return Score(
            value=similarity,
            reason=f"answer-reference cosine similarity {similarity:.2f}",
            details={"similarity": round(similarity, 4)},
        )


class ContextUsage(Metric):
    """How much of the answer's wording comes from the contexts.

    ``value`` = overlap rate = share of the answer's content words (stop words removed) that
    occur in the contexts; ``details["novel_rate"]`` = 1 − overlap: words the answer brought in
    itself. A high novel rate flags answers written from the model's memory rather than the
    retrieved text — a cue, not a verdict (paraphrase is novel too).
    """

    requires = ("answer",)
    needs_judge = False
    provider = "offline"
    providers = ("offline",)

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        answer_words = content_words(sample.answer or "")
        if not answer_words:
            return Score.fail(FailureKind.NO_CLAIMS, "the answer has no content words")
        pool = {w for c in sample.contexts for w in content_words(c.text)}
        used = sum(1 for w in answer_words if w in pool)
        overlap = used / len(answer_words)
        novel = sorted({w for w in answer_words if w not in pool})
        return Score(
            value=overlap,
            reason=f"{overlap:.0%} of the answer's content words occur in the contexts",
            details={
                "overlap_rate": round(overlap, 4),
                "novel_rate": round(1.0 - overlap, 4),
                "novel_words": novel[:50],
                "content_words": len(answer_words),
            },
        )
