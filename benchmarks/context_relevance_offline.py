"""How well does ``context_relevance:offline`` tell a question's own passages from others?

    python benchmarks/context_relevance_offline.py [--data DIR] [--embedder local|hash]

Data: the public short-answer dev sample, ``../shared/data/short_answer_dev/qa_pairs.jsonl``
(HaluEval's QA generation step over HotpotQA questions, 100 of 500; MIT, HotpotQA CC BY-SA 4.0;
read in place, never copied into this repository; the other 400 upstream rows are held out and
never read). Each question comes with its supporting paragraphs (two Wikipedia paragraphs joined
without a space; split as `benchmarks/offline_quality.py` does): those are **relevant** to it.
Every question's sample gets its own paragraphs plus six paragraphs of *other* questions,
**not relevant**, two of each kind:

* **random**: any other question's paragraph (the easy case: another topic);
* **lexical**: the two sharing the most content words with the question (what a keyword
  retriever would wrongly bring back);
* **dense**: the two closest to the question by the embedder itself (what a dense retriever
  would wrongly bring back). Chosen with the same embedding the provider uses, so this group is
  hard for the similarity signal by construction.

Multi-hop questions make some relevant paragraphs hard too: the bridge paragraph names neither
the question's entity nor what it asks ("Peggy Seeger ... was married to Ewan MacColl" for
"What nationality was James Henry Miller's wife?").

Prints, per context verdict: AUROC of the provider's relevance score (and of each of its two
signals alone) for relevant vs each negative kind and vs all of them; balanced accuracy
(relevant vs all negatives) at the default threshold, and at thresholds chosen on one half of
the questions and measured on the other (two folds, by question: the honest figure, since the
default threshold was chosen on this data); and the same figures for the per-context rule of
``context_precision:offline`` (cosine of the context's sentence closest to the question >= 0.35),
the offline per-context relevance ragbridge had before this measure. The labels are the data's,
not a person's: another question's paragraph about the same entity would count as not relevant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.metrics.providers.offline import DEFAULT_CONTEXT_RELEVANCE, DEFAULT_RELEVANCE
from ragbridge.core.results.stats import auroc
from ragbridge.core.text.words import content_words

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "short_answer_dev"
KINDS = ("random", "lexical", "dense")


def paragraphs(knowledge: str) -> list[str]:
    """HaluEval joins its supporting paragraphs with no space ("...in 1989.James Henry ...")."""
    return [p.strip() for p in re.split(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z])", knowledge) if p.strip()]


def overlap(question: str, passage: str) -> int:
    return len(set(content_words(question)) & set(content_words(passage)))


def build(rows: list[dict[str, Any]], embedder: Any) -> tuple[list[Sample], dict[str, str]]:
    """One sample per question (own paragraphs and six negatives, shuffled), and each
    context id's kind: ``own`` or one of `KINDS`."""
    questions = [row["question"].strip() for row in rows]
    pool = [(i, p) for i, row in enumerate(rows) for p in paragraphs(row["knowledge"])]
    vectors = np.asarray(asyncio.run(embedder.embed(questions + [p for _, p in pool])))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    near = vectors[: len(questions)] @ vectors[len(questions) :].T
    rng = random.Random(0)
    samples: list[Sample] = []
    kinds: dict[str, str] = {}
    for i, question in enumerate(questions):
        own = [j for j, (owner, _) in enumerate(pool) if owner == i]
        others = [j for j, (owner, _) in enumerate(pool) if owner != i]
        lexical = sorted(others, key=lambda j: (-overlap(question, pool[j][1]), j))[:2]
        rest = [j for j in others if j not in lexical]
        dense = sorted(rest, key=lambda j: (-near[i, j], j))[:2]
        rest = [j for j in rest if j not in dense]
        chosen = [(j, "own") for j in own] + [(j, "lexical") for j in lexical]
        chosen += [(j, "dense") for j in dense] + [(j, "random") for j in rng.sample(rest, 2)]
        rng.shuffle(chosen)
        contexts = []
        for j, kind in chosen:
            cid = f"q{i}-p{j}"
            kinds[cid] = kind
            contexts.append(Context(id=cid, text=pool[j][1]))
        samples.append(Sample(id=f"q{i}", question=question, contexts=contexts))
    return samples, kinds


def balanced_accuracy(labels: np.ndarray, scores: np.ndarray, threshold: float) -> float:
    said = scores >= threshold
    return 0.5 * (float(said[labels == 1].mean()) + float((~said[labels == 0]).mean()))


def best_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    candidates = np.unique(np.round(scores, 3))
    return float(max(candidates, key=lambda t: (balanced_accuracy(labels, scores, t), -t)))


def report(name: str, rows: list[tuple[str, str, float]], threshold: float) -> None:
    """AUROC per negative kind, balanced accuracy at ``threshold`` and two-fold chosen ones."""
    labels = np.array([kind == "own" for _, kind, _ in rows], dtype=int)
    scores = np.array([score for _, _, score in rows])
    kinds = np.array([kind for _, kind, _ in rows])
    aucs = []
    for kind in KINDS:
        keep = (kinds == "own") | (kinds == kind)
        aucs.append(f"{kind} {auroc(labels[keep], scores[keep]):.3f}")
    print(f"  {name}")
    print(f"    AUROC relevant vs {', '.join(aucs)}; all {auroc(labels, scores):.3f}")
    said = scores >= threshold
    per_kind = ", ".join(
        f"{k} {int(said[kinds == k].sum())}/{int((kinds == k).sum())}" for k in KINDS
    )
    print(
        f"    at {threshold}: balanced accuracy {balanced_accuracy(labels, scores, threshold):.3f}"
        f" (relevant kept {int(said[labels == 1].sum())}/{int(labels.sum())}; "
        f"judged relevant: {per_kind})"
    )
    half = np.array([int(sample_id.split("-")[0][1:]) % 2 for sample_id, _, _ in rows])
    folds = []
    for fold in (0, 1):
        t = best_threshold(labels[half == fold], scores[half == fold])
        folds.append((t, balanced_accuracy(labels[half != fold], scores[half != fold], t)))
    chosen = ", ".join(f"{t:.3f}" for t, _ in folds)
    mean = sum(b for _, b in folds) / 2
    print(f"    two-fold: thresholds {chosen}; held-out balanced accuracy {mean:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    args = parser.parse_args()
    path = args.data / "qa_pairs.jsonl"
    if not path.exists():
        sys.exit(f"{path}: not found (the shared dev data sits beside the repository)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if args.embedder == "hash":
        from ragbridge.core.testing import HashEmbedder

        embedder: Any = HashEmbedder()
    else:
        from ragbridge.adapters.local import LocalEmbedder

        embedder = LocalEmbedder()
    samples, kinds = build(rows, embedder)
    measures = ["context_relevance:offline", "context_precision:offline"]
    evaluation = evaluate(samples, measures, embedder=embedder)
    combined: list[tuple[str, str, float]] = []
    before: list[tuple[str, str, float]] = []
    similarity: list[tuple[str, str, float]] = []
    coverage: list[tuple[str, str, float]] = []
    for sample in samples:
        score = evaluation.get(sample.id, "context_relevance")
        assert score is not None
        assert score.value is not None, score.failure
        for row in score.details["contexts"]:
            kind = kinds[row["context_id"]]
            combined.append((row["context_id"], kind, row["score"]))
            similarity.append((row["context_id"], kind, row["similarity"]))
            coverage.append((row["context_id"], kind, row["coverage"] or 0.0))
        precision = evaluation.get(sample.id, "context_precision")
        assert precision is not None
        for row in precision.details["contexts"]:
            before.append((row["context_id"], kinds[row["context_id"]], row["similarity"]))
    n_own = sum(kind == "own" for _, kind, _ in combined)
    print(
        "reproduce: "
        + shlex.join(["python", "benchmarks/context_relevance_offline.py", *sys.argv[1:]])
    )
    print(
        f"embedder: {embedder.model}; {len(samples)} questions, {len(combined)} contexts "
        f"({n_own} relevant, {len(combined) - n_own} not: 2 random, 2 lexical, 2 dense each)"
    )
    report("context_relevance:offline (mean of similarity and coverage)", combined,
           DEFAULT_CONTEXT_RELEVANCE)  # fmt: skip
    report("its similarity alone", similarity, DEFAULT_RELEVANCE)
    report("its coverage alone", coverage, 0.5)
    report("before: context_precision:offline's per-context rule", before, DEFAULT_RELEVANCE)


if __name__ == "__main__":
    main()
