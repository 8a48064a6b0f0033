"""How the offline models were fitted (`SHORT_ANSWER_MODEL`, `RELEVANCE_MODEL`); rerun to check.

    python benchmarks/offline_fit.py [--data DIR]

Reads ``../shared/data/short_answer_dev/qa_pairs.jsonl`` (100 public dev questions of HaluEval's
QA generation set, MIT; never copied into this repository; the other 400 upstream rows are held
out and never read). Each answer sentence of the right answer is a positive row, each sentence of
the two fabricated answers a negative one; its features are exactly what the provider computes
(`short_answer_features`: coverage of what the sentence adds to its question, co-support in one
context sentence, adds-nothing flag). Sentences with no term to check (a bare "yes") are left out,
as the provider leaves them out.

Fits an L2-regularised (λ = 1, intercept free) logistic regression by Newton's method, and prints:

* the coefficients, to compare with `SHORT_ANSWER_MODEL` in the core;
* the 10-fold cross-validated AUROC per fabrication style (folds by question, seeded): the honest
  estimate, since the in-sample figure of `offline_quality.py` uses coefficients fitted on the
  same rows;
* the same for the model with the best cosine as an extra input, which is why that input is left
  out (its weight comes out negative).

Then `RELEVANCE_MODEL` (``answer_relevance:offline``), from pairs built from the same questions
(`relevance_pairs`): the question with its right answer (1) and with another question's right
answer (0, a seeded shuffle); and the question with the knowledge sentence that states its
answer (1) and with another question's such sentence (0). The features are read from the
provider's own ``details`` (one code path). Prints the coefficients and the 10-fold CV AUROC of
each pair kind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Sample, evaluate
from ragbridge.core.metrics.providers.offline.answer_relevance import (
    RELEVANCE_FEATURES,
    RELEVANCE_MODEL,
)
from ragbridge.core.metrics.providers.offline.faithfulness import (
    SHORT_ANSWER_MODEL,
    short_answer_features,
)
from ragbridge.core.metrics.providers.offline.matching import TermIndex
from ragbridge.core.results.stats import auroc
from ragbridge.core.text.words import sentences

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "short_answer_dev"
KINDS = ("right_answer", "hallucinated_answer_one_turn", "hallucinated_answer_multi_turn")
NAMES = ("intercept", "coverage", "co_support", "adds_nothing")


def fit(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], l2: float = 1.0) -> np.ndarray[Any, Any]:
    w = np.zeros(x.shape[1])
    penalty = np.diag(np.r_[0.0, np.full(x.shape[1] - 1, l2)])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x.T * (p * (1 - p))) @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


def rows_of(data: list[dict[str, Any]], with_cosine: bool) -> list[tuple[int, str, list[float]]]:
    out = []
    cosines: dict[str, float] = {}
    if with_cosine:
        import asyncio

        from ragbridge.adapters.local import LocalEmbedder

        embedder = LocalEmbedder()
        texts = sorted(
            {s for r in data for k in KINDS for s in sentences(r[k])}
            | {s for r in data for s in sentences(r["knowledge"])}
        )
        vectors = dict(zip(texts, np.array(asyncio.run(embedder.embed(texts))), strict=True))
    for r in data:
        question, knowledge = r["question"].strip(), r["knowledge"].strip()
        index = TermIndex([knowledge])
        for kind in KINDS:
            for sentence in sentences(r[kind]):
                features = short_answer_features(question, sentence, index)
                if features is None:
                    continue
                row = [1.0, *features]
                if with_cosine:
                    key = sentence
                    if key not in cosines:
                        cosines[key] = max(
                            float(vectors[sentence] @ vectors[c]) for c in sentences(knowledge)
                        )
                    row.append(cosines[key])
                out.append((r["seed_index"], kind, row))
    return out


def report(data: list[dict[str, Any]], with_cosine: bool) -> None:
    rows = rows_of(data, with_cosine)
    question = np.array([r[0] for r in rows])
    x = np.array([r[2] for r in rows])
    y = np.array([int(r[1] == "right_answer") for r in rows])
    names = (*NAMES, "cosine") if with_cosine else NAMES
    w = fit(x, y)
    print("coefficients: " + ", ".join(f"{n} {v:+.2f}" for n, v in zip(names, w, strict=True)))
    ids = sorted(set(question.tolist()))
    p = np.zeros(len(rows))
    for fold in np.array_split(np.random.RandomState(0).permutation(ids), 10):
        test = np.isin(question, fold)
        p[test] = 1.0 / (1.0 + np.exp(-x[test] @ fit(x[~test], y[~test])))
    per_answer: dict[tuple[int, str], list[float]] = {}
    for (qid, kind, _), value in zip(rows, p, strict=True):
        per_answer.setdefault((qid, kind), []).append(float(value))
    for style in KINDS[1:]:
        labels: list[int] = []
        values: list[float] = []
        for qid in ids:
            for kind, label in (("right_answer", 1), (style, 0)):
                if (qid, kind) in per_answer:  # a bare yes/no is skipped, as the provider does
                    labels.append(label)
                    values.append(float(np.mean(per_answer[(qid, kind)])))
        name = style.removeprefix("hallucinated_answer_")
        print(f"  10-fold CV AUROC, {name:<10} {auroc(labels, values):.3f}")


def _stating_sentence(row: dict[str, Any]) -> str | None:
    answer = row["right_answer"].strip().lower()
    return next((s for s in sentences(row["knowledge"]) if answer in s.lower()), None)


def relevance_pairs(data: list[dict[str, Any]]) -> list[tuple[str, Sample, int]]:
    """(kind, sample, label) rows: each question with its own answer and another's, as a short
    span and as a knowledge sentence. The partner is fixed by a seeded shuffle, so the pairs
    are the same on every run and in `offline_quality.py`."""
    import random

    order = list(range(len(data)))
    random.Random(0).shuffle(order)
    out: list[tuple[str, Sample, int]] = []
    for i, row in enumerate(data):
        other = data[order[i] if order[i] != i else (i + 1) % len(data)]
        question = row["question"].strip()
        for kind, own, foreign in (
            ("span", row["right_answer"], other["right_answer"]),
            ("sentence", _stating_sentence(row), _stating_sentence(other)),
        ):
            if own is None or foreign is None:
                continue
            for label, answer in ((1, own), (0, foreign)):
                sample_id = f"{row['seed_index']}:{kind}:{label}"
                out.append((kind, Sample(id=sample_id, question=question, answer=answer), label))
    return out


def relevance_rows(
    data: list[dict[str, Any]], embedder: Any
) -> tuple[list[str], list[int], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(kinds, question ids, features with a leading 1, labels) as the provider computes them."""
    pairs = relevance_pairs(data)
    evaluation = evaluate(
        [sample for _, sample, _ in pairs], ["answer_relevance:offline"], embedder=embedder
    )
    x = []
    for _, sample, _ in pairs:
        score = evaluation.get(sample.id, "answer_relevance")
        assert score is not None, sample.id
        assert score.value is not None, (sample.id, score.failure)
        details = score.details
        x.append([1.0, *(float(details[name]) for name in RELEVANCE_FEATURES)])
    kinds = [kind for kind, _, _ in pairs]
    questions = [int(sample.id.split(":")[0]) for _, sample, _ in pairs]
    y = np.array([label for _, _, label in pairs])
    return kinds, questions, np.array(x), y


def report_relevance(data: list[dict[str, Any]]) -> None:
    from ragbridge.adapters.local import LocalEmbedder

    kinds, questions, x, y = relevance_rows(data, LocalEmbedder())
    names = ("intercept", *RELEVANCE_FEATURES)
    print(
        "in the core: "
        + ", ".join(f"{n} {v:+.2f}" for n, v in zip(names, RELEVANCE_MODEL, strict=True))
    )
    w = fit(x, y)
    print("fitted:      " + ", ".join(f"{n} {v:+.2f}" for n, v in zip(names, w, strict=True)))
    asked = np.array(questions)
    p = np.zeros(len(y))
    for fold in np.array_split(np.random.RandomState(0).permutation(sorted(set(questions))), 10):
        test = np.isin(asked, fold)
        p[test] = x[test] @ fit(x[~test], y[~test])
    for kind in ("span", "sentence"):
        chosen = [i for i, k in enumerate(kinds) if k == kind]
        figure = auroc(y[chosen].tolist(), p[chosen].tolist())
        print(f"  10-fold CV AUROC, own vs another question's {kind:<8} {figure:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    path = args.data / "qa_pairs.jsonl"
    if not path.exists():
        sys.exit(f"{path}: not found (the shared dev data sits beside the repository)")
    data = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    print("# python benchmarks/offline_fit.py")
    print(
        "in the core: "
        + ", ".join(f"{n} {v:+.2f}" for n, v in zip(NAMES, SHORT_ANSWER_MODEL, strict=True))
    )
    print("## the shipped inputs")
    report(data, with_cosine=False)
    print("## with the best cosine as an extra input (not shipped)")
    report(data, with_cosine=True)
    print("## answer_relevance:offline (RELEVANCE_MODEL)")
    report_relevance(data)


if __name__ == "__main__":
    main()
