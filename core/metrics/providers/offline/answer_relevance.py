"""``answer_relevance:offline``: does the answer address the question, without a judge?

The judge version asks whether the answer is about what was asked. A raw question-answer cosine
answers a different question: the right short answer ("Lawrence County" for "... on display at
a museum in what county?") is barely more similar to its question than another question's
answer is (AUROC 0.84 on the public dev pairs). What a question wants is often written in it
(`question_form`), so the provider combines five signals in a logistic model:

* ``cosine``: question-answer similarity (0 for a bare "yes"/"no", which carries no topic);
* ``type_fit``: how much more the answer resembles the kind the question names ("county",
  "nationality", "year") than it resembles kinds in general (`ANSWER_TYPES`);
* ``yes_no``: +1 a yes/no question answered yes or no, -1 a yes/no question answered otherwise
  or another question answered with a yes or no, 0 otherwise;
* ``choice``: 1 when the question offers alternatives ("A or B?") and the answer's words are
  among them;
* ``numeric``: +1 a question wanting a number, date or year answered with digits, -1 one
  answered without, or a question naming another kind answered with a bare number.

A noncommittal answer scores 0.0 as in the judge version. The value is the model's probability
that the answer is this question's answer rather than another's. The coefficients, how they
were fitted, and what this still cannot see (an answer whose link to its question is world
knowledge, like a refund offered to "What if these shoes don't fit?") are in `RELEVANCE_MODEL`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....registry import register_provider
from ....results.evaluation import Score
from ....sample import Sample
from ....text.words import content_words, sentences
from ...base import Metric, MetricContext
from .matching import embed, is_noncommittal
from .question_form import (
    ANSWER_TYPES,
    answers_yes_no,
    expectation,
    is_bare_yes_no,
    is_numeric_answer,
)

__all__ = ["RELEVANCE_FEATURES", "RELEVANCE_MODEL", "relevance_features", "score_answer_relevance"]

RELEVANCE_FEATURES = ("cosine", "type_fit", "yes_no", "choice", "numeric")

RELEVANCE_MODEL = (-1.53, 6.31, 3.13, 1.59, 0.70, 0.91)
"""Logistic coefficients: intercept, then one per `RELEVANCE_FEATURES`.

Fitted by ``python benchmarks/offline_fit.py`` (L2-regularised logistic regression) on pairs
built from the 100 public dev questions of ``../shared/data/short_answer_dev``: each question
with its own right answer (1) and another question's (0), and with the knowledge sentence that
states its answer (1) and another question's such sentence (0), so short spans and full
sentences both shape it. The script prints the 10-fold cross-validated AUROC beside them.

Not seen by these signals: an answer tied to its question only by world knowledge. DeepEval's
documentation example ("What if these shoes don't fit?" answered "We offer a 30-day full refund
at no extra cost.") has a cosine of 0.05 with this embedder, below unrelated pairs' mean, and no
type to check; it scores low here, and needs ``answer_relevance:llm``."""


def relevance_features(
    question: str,
    answer: str,
    cosine: float,
    head_similarity: float | None,
    type_similarity: float | None,
) -> tuple[float, ...]:
    """The model's inputs, from the texts and three similarities the caller embedded:
    question-answer, answer-head (None when the question names no kind) and the answer's mean
    similarity to `ANSWER_TYPES`."""
    wanted = expectation(question)
    said_yes_no = answers_yes_no(answer)
    yes_no = (
        0.0 if not (wanted.yes_no or said_yes_no) else 1.0 if wanted.yes_no == said_yes_no else -1.0
    )
    type_fit = 0.0
    if head_similarity is not None and type_similarity is not None:
        type_fit = head_similarity - type_similarity
    choice = 0.0
    if wanted.choice:
        words = content_words(answer)
        offered = set(content_words(question))
        choice = float(bool(words) and all(w in offered for w in words))
    numeric = 0.0
    if wanted.numeric:
        numeric = 1.0 if any(c.isdigit() for c in answer) else -1.0
    elif wanted.head is not None and is_numeric_answer(answer):
        numeric = -1.0
    topic = 0.0 if is_bare_yes_no(answer) else cosine
    return (topic, type_fit, yes_no, choice, numeric)


def relevance_probability(features: tuple[float, ...]) -> float:
    intercept, *weights = RELEVANCE_MODEL
    logit = intercept + sum(w * x for w, x in zip(weights, features, strict=True))
    return 1.0 / (1.0 + math.exp(-logit))


_KIND_VECTORS: dict[str, np.ndarray[Any, np.dtype[np.float64]]] = {}


async def _kind_vectors(ctx: MetricContext) -> np.ndarray[Any, np.dtype[np.float64]]:
    """`ANSWER_TYPES` embedded once per embedding model, not once per sample: 40 extra texts
    per question that names a kind, on the hot path of a cold run without a cache. Keyed by
    the model name, the same identity the embedding cache trusts."""
    assert ctx.embedder is not None
    model = ctx.embedder.model
    found = _KIND_VECTORS.get(model)
    if found is None:
        found = _KIND_VECTORS[model] = await embed(ctx, list(ANSWER_TYPES))
    return found


@register_provider(
    "answer_relevance",
    "offline",
    how=(
        "logistic model of question-answer similarity and the kind of answer the question asks"
        " for (yes/no, number, the kind it names, one of the offered choices); noncommittal"
        " answers score 0"
    ),
    needs=["embedder"],
    reads=["question", "answer"],
)
async def score_answer_relevance(metric: Metric, sample: Sample, ctx: MetricContext) -> Score:
    answer = sample.answer or ""
    if is_noncommittal(answer):
        return Score(value=0.0, reason="the answer is noncommittal", details={"noncommittal": True})
    wanted = expectation(sample.question)
    head = wanted.head
    # The answer is embedded as the mean of its sentences' vectors: the same sentences
    # faithfulness embeds (so they come from the cache or the same batch), and short inputs
    # keep the model from padding every text in a batch to the longest answer.
    parts = sentences(answer) or [answer]
    heads = [head] if head is not None else []
    vectors = await embed(ctx, [sample.question, *parts, *heads])
    mean = vectors[1 : 1 + len(parts)].mean(axis=0)
    mean = mean / (float(np.linalg.norm(mean)) or 1.0)
    cosine = float(vectors[0] @ mean)
    head_similarity = type_similarity = None
    if head is not None:
        head_similarity = float(vectors[-1] @ mean)
        type_similarity = float((await _kind_vectors(ctx) @ mean).mean())
    features = relevance_features(sample.question, answer, cosine, head_similarity, type_similarity)
    value = relevance_probability(features)
    named = dict(zip(RELEVANCE_FEATURES, (round(f, 4) for f in features), strict=True))
    asks = "a yes or no" if wanted.yes_no else f"a {head}" if head else "no kind it names"
    return Score(
        value=value,
        reason=(
            f"addresses the question with probability {value:.2f}: cosine {cosine:.2f},"
            f" the question asks for {asks}"
        ),
        details={"noncommittal": False, "expects": head, **named},
    )
