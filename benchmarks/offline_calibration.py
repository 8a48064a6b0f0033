"""How well the offline faithfulness provider detects hallucinations, next to published detectors.

    python benchmarks/offline_calibration.py [--data PATH]

Data: the FaithBench dev sample (Bao et al., NAACL 2025; CC BY-NC-SA 4.0), read from
``../shared/data/faithbench_dev/faithbench.jsonl`` — never copied into this repository. 100 LLM
summaries of 10 source documents, labelled by human experts; selected to be hard (detectors
disagreed on them). Context = the source, answer = the summary. A summary is "hallucinated" when
its worst human label is Questionable or Unwanted (``hallucinated_worst_QU``; also reported for
Unwanted only).

Scores ragbridge's ``Faithfulness(provider="offline")`` (all-MiniLM-L6-v2 via `LocalEmbedder`)
and prints, per label definition:

* AUROC of 1 − faithfulness (threshold-free);
* balanced accuracy of the default verdict (hallucinated when faithfulness <= 0.5, i.e.
  hallucination >= 0.5) at the default similarity and coverage thresholds, and of the stricter
  rule "hallucinated when any sentence is unsupported";
* balanced accuracy with the similarity and decision thresholds chosen by leave-one-source-out
  cross-validation (the honest estimate; in-sample tuning on 100 rows would flatter it);
* the same for the detectors' stored predictions (GPT-4o, GPT-4-Turbo, GPT-3.5-Turbo, HHEM-2.1,
  HHEM v1, TrueTeacher, TRUE-NLI), reading 1 or a score >= 0.5 as "consistent".
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

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.metrics import Faithfulness
from ragbridge.core.metrics.providers.offline import DEFAULT_SIMILARITY
from ragbridge.core.metrics.providers.offline.matching import DEFAULT_COVERAGE
from ragbridge.core.metrics.providers.offline.support import answer_support, claim_support
from ragbridge.core.results.stats import auroc

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/faithbench_dev/faithbench.jsonl"
DETECTORS = {
    "GPT-4o": "gpt_4o",
    "GPT-4-Turbo": "gpt-4-turbo",
    "GPT-3.5-Turbo": "gpt-3.5-turbo",
    "HHEM-2.1": "hhem-2.1",
    "HHEM v1": "hhemv1",
    "TrueTeacher": "trueteacher",
    "TRUE-NLI": "true_nli",
}
SIMILARITIES = (0.45, 0.5, 0.55, 0.6, 0.65, 0.7)


def balanced_accuracy(labels: np.ndarray[Any, Any], predicted: np.ndarray[Any, Any]) -> float:
    positives = labels == 1
    return float(((predicted[positives] == 1).mean() + (predicted[~positives] == 0).mean()) / 2)


def unfaithfulness(
    claims: list[dict[str, Any]], similarity: float, coverage: float = DEFAULT_COVERAGE
) -> float:
    """1 - faithfulness recomputed at other thresholds from the stored details, as the provider
    computes it (`ragbridge.core.metrics.providers.offline.support`): each claim's verdict
    graded by its unexplained words, the summary's mean graded by its weakest claim."""
    supports = [
        claim_support(
            1.0
            if c["similarity"] >= similarity
            and c["coverage"] >= coverage
            and not c["missing_terms"]
            and not c["first_person"]
            else 0.5,
            c["unexplained_weight"],
        )
        for c in claims
    ]
    return 1.0 - answer_support(supports, short=False)


def best_rule(
    claims: list[list[dict[str, Any]]], labels: np.ndarray[Any, Any]
) -> tuple[float, float]:
    """(similarity, decision threshold) maximising balanced accuracy on these rows."""
    best = (-1.0, DEFAULT_SIMILARITY, 0.0)
    for similarity in SIMILARITIES:
        scores = np.array([unfaithfulness(c, similarity) for c in claims])
        for cut in np.unique(scores):
            accuracy = balanced_accuracy(labels, (scores >= cut).astype(int))
            if accuracy > best[0]:
                best = (accuracy, similarity, float(cut))
    return best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(
            f"FaithBench dev sample not found at {args.data} (it is not shipped with ragbridge)"
        )
    from ragbridge.adapters.local import LocalEmbedder

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    samples = [
        Sample(
            id=r["id"],
            question="Summarize the source.",
            answer=r["summary"],
            contexts=[Context(text=r["source"])],
        )
        for r in rows
    ]
    # Score once with threshold 0 to keep every claim's best similarity; thresholds are applied
    # afterwards from the details, so the grid search makes no new model calls.
    metric = Faithfulness(provider="offline", similarity=0.0, coverage=0.0)
    result = evaluate(samples, [metric], embedder=LocalEmbedder())
    claims = []
    for sample in samples:
        score = result.get(sample.id, "faithfulness")
        assert score is not None
        assert isinstance(score.details, dict)
        claims.append(score.details["claims"])
    sources = np.array([r["source_key"] for r in rows])
    print("# python benchmarks/offline_calibration.py")
    print(f"# FaithBench dev: {len(rows)} summaries of {len(set(sources))} sources")
    for label_key, label_name in (
        ("hallucinated_worst_QU", "Questionable or Unwanted"),
        ("hallucinated_worst_U", "Unwanted"),
    ):
        labels = np.array([r[label_key] for r in rows])
        print(f"\n## hallucinated = worst label {label_name} ({labels.sum()} of {len(labels)})")
        print(f"{'detector':<38} {'balanced acc.':>13} {'AUROC':>7}")
        scores = np.array([unfaithfulness(c, DEFAULT_SIMILARITY) for c in claims])
        default = balanced_accuracy(labels, (scores >= 0.5).astype(int))
        area = auroc(labels.tolist(), scores.tolist())
        print(f"{'ragbridge offline, default verdict':<38} {default:13.3f} {area:7.3f}")
        any_unsupported = [
            any(
                c["similarity"] < DEFAULT_SIMILARITY
                or c["coverage"] < DEFAULT_COVERAGE
                or c["missing_terms"]
                or c["first_person"]
                for c in summary
            )
            for summary in claims
        ]
        strict = balanced_accuracy(labels, np.array(any_unsupported, dtype=int))
        print(f"{'ragbridge offline, any unsupported':<38} {strict:13.3f}")
        predicted = np.zeros(len(rows), dtype=int)
        for held_out in sorted(set(sources)):
            train = sources != held_out
            similarity, cut = best_rule(
                [c for c, keep in zip(claims, train, strict=True) if keep], labels[train]
            )
            test = ~train
            test_scores = np.array(
                [unfaithfulness(c, similarity) for c, t in zip(claims, test, strict=True) if t]
            )
            predicted[test] = (test_scores >= cut).astype(int)
        cv = balanced_accuracy(labels, predicted)
        print(f"{'ragbridge offline, thresholds by CV':<38} {cv:13.3f} {'':>7}")
        for name, key in DETECTORS.items():
            pairs = [
                (label, r["detector_predictions"].get(key))
                for label, r in zip(labels, rows, strict=True)
            ]
            kept = [(y, p) for y, p in pairs if p is not None]
            y = np.array([y for y, _ in kept])
            consistent = np.array([float(p) for _, p in kept])
            hallucinated = (consistent < 0.5).astype(int)
            line = f"{name + (f' ({len(kept)} rows)' if len(kept) < len(rows) else ''):<38}"
            area_text = ""
            if len(set(consistent.tolist())) > 2:
                area_text = f"{auroc(y.tolist(), (1 - consistent).tolist()):7.3f}"
            print(f"{line} {balanced_accuracy(y, hallucinated):13.3f} {area_text:>7}")


if __name__ == "__main__":
    main()
