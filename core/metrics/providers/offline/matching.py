"""The offline provider's matcher: which context sentence supports a claim, from embeddings and
exact checks. Every offline measure (`ragbridge.core.metrics.providers.offline`) is built on it.

No usable LLM runs offline on a laptop or in CI (see the integration notes), so the offline path
approximates each judge task with a sentence-embedding matcher plus exact checks where
embeddings are known to be blind:

* **claim support** (faithfulness, hallucination, context recall): a sentence is supported when
  its best cosine similarity to a context sentence reaches ``similarity``, AND the contexts hold
  at least ``coverage`` of its vocabulary (`TermIndex.coverage`: IDF-weighted, word forms
  folded, so "approves" meets "approval" and "Everest's" meets "Everest"), AND every number and
  name in it (`ragbridge.core.text.words.salient`) occurs in the contexts. Embeddings rate "paid
  1,200" and "paid 2,100" as near-identical, and a sentence about the right topic that adds words
  of its own as close; the two lexical checks catch what the cosine cannot see. Numbers, units and
  dates are compared, and embedded, in one written form (`ragbridge.core.text.quantities`), so
  "8,849 metres" meets "8849 m" and "eight silver" meets "8 silver", and 8,848 stays apart.
* **relevance** (answer relevance, context precision): cosine similarity to the question.

The thresholds are parameters; the defaults were chosen by leave-one-source-out cross-validation
on the FaithBench dev sample (`benchmarks/offline_calibration.py`). What this provider is for,
and what not: ``docs/how-to/offline.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....text.quantities import canonical, lone_counts
from ....text.words import (
    content_words,
    is_preamble,
    numbers,
    plain,
    salient,
    sentences,
    terms,
    unframed,
    words,
)
from ...base import MetricContext
from .support import unopened

__all__ = [
    "DEFAULT_COVERAGE",
    "DEFAULT_RELEVANCE",
    "DEFAULT_SIMILARITY",
    "OfflineSettings",
    "Support",
    "TermIndex",
    "embed",
    "is_noncommittal",
    "match_sentences",
    "shortlist",
]

DEFAULT_SIMILARITY = 0.5
"""Cosine similarity (all-MiniLM-L6-v2) at which a context sentence supports a claim.

Chosen with `DEFAULT_COVERAGE` by leave-one-source-out cross-validation on the FaithBench dev
sample (9 of 10 folds chose 0.5; `python benchmarks/offline_calibration.py`). It was 0.6 when the
cosine was the only evidence besides names and numbers."""
DEFAULT_COVERAGE = 0.7
"""Share of a claim's vocabulary (IDF-weighted `terms`) the contexts must hold (`TermIndex`)."""
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
"""Context sentences per claim that reach the embedding model (see `shortlist`)."""


@dataclass(frozen=True)
class OfflineSettings:
    similarity: float = DEFAULT_SIMILARITY
    relevance: float = DEFAULT_RELEVANCE
    candidates: int = DEFAULT_CANDIDATES
    coverage: float = DEFAULT_COVERAGE


class TermIndex:
    """The contexts' vocabulary (`ragbridge.core.text.words.terms`), sentence by sentence, with IDF.

    Why IDF: a claim is made of a few telling words and many common ones; missing "Zemeckis"
    matters more than missing "film". The document frequency is counted over the context
    sentences themselves (no corpus statistics ship with ragbridge), and a term no sentence
    holds weighs as if half a sentence did, the most telling of all. A sentence's lone "one"
    and "two" count as 1 and 2 here (`lone_counts`), so "two minutes" supports "2 minutes".
    """

    def __init__(self, contexts: Sequence[str]) -> None:
        self.sentences = [terms(s) | lone_counts(s) for text in contexts for s in sentences(text)]
        self.pool: set[str] = set().union(*self.sentences)
        counts: dict[str, int] = {}
        for bag in self.sentences:
            for t in bag:
                counts[t] = counts.get(t, 0) + 1
        self._n = max(1, len(self.sentences))
        self._idf = {t: math.log(1.0 + self._n / c) for t, c in counts.items()}

    def weight(self, term: str) -> float:
        return self._idf.get(term, math.log(1.0 + self._n / 0.5))

    def coverage(self, wanted: AbstractSet[str]) -> float:
        """IDF-weighted share of ``wanted`` found anywhere in the contexts (1.0 for none).

        Sums over sets are `math.fsum`: exactly rounded whatever the order, and a set's order
        changes with the process's hash seed, so a plain ``sum`` gave values that differed in
        the last bit from one process (or cluster worker) to the next.
        """
        total = math.fsum(self.weight(t) for t in wanted)
        return math.fsum(self.weight(t) for t in wanted if t in self.pool) / total if total else 1.0

    def co_support(self, wanted: AbstractSet[str]) -> float:
        """IDF-weighted share of ``wanted`` found together in ONE context sentence (the best).

        Evidence for a claim is a passage that states it, not its words scattered over the
        contexts: "Neil Gaiman directed Beowulf" gathers its words from "directed by Robert
        Zemeckis" and "written by Neil Gaiman" only if both sit in one sentence.
        """
        total = math.fsum(self.weight(t) for t in wanted)
        if not total or not self.sentences:
            return 0.0
        best = max(math.fsum(self.weight(t) for t in wanted if t in bag) for bag in self.sentences)
        return best / total


def unit(vectors: Sequence[Sequence[float]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        return matrix.reshape(0, 0)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray[Any, np.dtype[np.float64]] = matrix / norms
    return out


async def embed(ctx: MetricContext, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
    assert ctx.embedder is not None
    return unit(await ctx.embedder.embed(texts))


@dataclass(frozen=True)
class Support:
    """How one sentence fares against the contexts."""

    sentence: str
    similarity: float
    best: str | None
    best_context: int | None
    missing: tuple[str, ...]
    supported: bool
    coverage: float = 1.0

    def detail(self) -> dict[str, Any]:
        return {
            "claim": self.sentence,
            "supported": self.supported,
            "similarity": round(self.similarity, 4),
            "best_match": self.best,
            "context": self.best_context,
            "missing_terms": list(self.missing),
            "coverage": round(self.coverage, 4),
        }


def claims_of(text: str) -> tuple[list[str], list[str]]:
    """(the sentences of ``text`` to check, without their attribution frame and opening
    discourse markers; the preambles left out). See `is_preamble`, `unframed` and
    `.support.unopened`."""
    claims: list[str] = []
    skipped: list[str] = []
    for sentence in sentences(text):
        if is_preamble(sentence):
            skipped.append(sentence)
        else:
            claims.append(unframed(unopened(sentence)))
    return claims, skipped


def shortlist(queries: Sequence[str], pieces: Sequence[str], k: int) -> list[list[int]]:
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
        scores = [math.fsum(idf[w] for w in bag & pw) for pw in piece_words]  # order-free
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
    coverage: float = DEFAULT_COVERAGE,
    index: TermIndex | None = None,
) -> list[Support]:
    """Best context sentence per claim, and whether it supports the claim (see module doc)."""
    pieces: list[tuple[int, str]] = [
        (i, s) for i, text in enumerate(contexts, start=1) for s in sentences(text)
    ]
    if not pieces:
        return [Support(c, 0.0, None, None, (), False, 0.0) for c in claims]
    index = index or TermIndex(contexts)
    # Claims and context sentences are shortlisted and embedded in their `canonical` form: an
    # embedding of "8,849 metres" is not one of "8849 m", and a bag-of-words one shares no word.
    claim_forms = [canonical(c) for c in claims]
    piece_forms = [canonical(s) for _, s in pieces]
    pool_words = {plain(w) for form in piece_forms for w in words(form)}
    pool_numbers = {n for _, s in pieces for n in numbers(s) | lone_counts(s)}
    candidates_of = shortlist(claim_forms, piece_forms, candidates)
    needed = sorted({j for row in candidates_of for j in row})
    column = {j: i for i, j in enumerate(needed)}
    vectors = await embed(ctx, [*claim_forms, *(piece_forms[j] for j in needed)])
    sims = vectors[: len(claims)] @ vectors[len(claims) :].T
    out = []
    for row, claim in enumerate(claims):
        j = max(candidates_of[row], key=lambda c: float(sims[row, column[c]]))
        similarity = float(sims[row, column[j]])
        missing = tuple(
            sorted(t for t in salient(claim) if t not in pool_words and t not in pool_numbers)
        )
        covered = index.coverage(terms(claim))
        supported = similarity >= threshold and covered >= coverage and not missing
        out.append(
            Support(claim, similarity, pieces[j][1], pieces[j][0], missing, supported, covered)
        )
    return out
