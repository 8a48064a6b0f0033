"""Regenerate the small example eval sets in examples/data/ (seeded; run from the repo root).

Two retrievers answer the same 40 labelled questions over a toy corpus: ``baseline.jsonl`` and
``candidate.jsonl``. Four questions have no relevant document (``relevance: {}``) and one is
unlabelled, so the examples show every case the measures handle.
"""

from __future__ import annotations

import random
from pathlib import Path

from ragbridge.core import Context, Sample, save_samples

TOPICS = [
    ("pto", "How many days of paid leave do new employees get?"),
    ("vpn", "How do I connect to the office VPN from home?"),
    ("expense", "What is the deadline for submitting travel expenses?"),
    ("laptop", "Who approves a laptop replacement request?"),
    ("badge", "What should I do if I lose my building badge?"),
    ("parking", "Is parking at the head office free for staff?"),
    ("payroll", "On which day of the month is salary paid?"),
    ("security", "How often must passwords be changed?"),
]


def build(seed: int, quality: float) -> list[Sample]:
    labels = random.Random(seed)  # the same labels for every retriever
    rng = random.Random(f"{seed}-{quality}")
    corpus = [f"{topic}-{i}" for topic, _ in TOPICS for i in range(6)]
    samples = []
    for n in range(40):
        topic, question = TOPICS[n % len(TOPICS)]
        sid = f"q{n:03d}"
        if n % 10 == 9:
            relevance: dict[str, int] | None = {}  # nothing in the corpus answers it
            question = f"{question} (asked about a subsidiary we have no documents for)"
        elif n == 38:
            relevance = None  # not labelled yet
        else:
            relevant = labels.sample([f"{topic}-{i}" for i in range(6)], k=labels.randint(1, 3))
            relevance = {doc: labels.choice([1, 2, 2, 3]) for doc in relevant}
            relevance[f"{topic}-5"] = relevance.get(f"{topic}-5", 0)
        ranked: list[str] = []
        wanted = [d for d, g in (relevance or {}).items() if g > 0]
        while len(ranked) < 5:
            pick = rng.choice(wanted) if wanted and rng.random() < quality else rng.choice(corpus)
            if pick not in ranked:
                ranked.append(pick)
        scores = sorted((round(rng.uniform(0.2, 0.95), 3) for _ in ranked), reverse=True)
        if relevance == {} and rng.random() < quality:
            scores = [round(s / 3, 3) for s in scores]  # a good retriever is unsure on no-answer
        samples.append(
            Sample(
                id=sid,
                question=question,
                contexts=[
                    Context(text=f"Policy text {doc}.", id=doc, score=s)
                    for doc, s in zip(ranked, scores, strict=True)
                ],
                relevance=relevance,
                metadata={"topic": topic},
            )
        )
    return samples


if __name__ == "__main__":
    out = Path(__file__).parent / "data"
    save_samples(build(seed=1, quality=0.35), out / "baseline.jsonl")
    save_samples(build(seed=1, quality=0.6), out / "candidate.jsonl")
    print(f"wrote {out / 'baseline.jsonl'} and {out / 'candidate.jsonl'}")
