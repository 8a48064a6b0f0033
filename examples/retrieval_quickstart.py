"""Score two retrievers on the same labelled questions and decide whether the new one is better.

Run from the repository root:  python examples/retrieval_quickstart.py [OUT_DIR]

It loads two eval sets (JSONL, one `Sample` per line), computes ranking measures per sample,
prints each measure's mean with a 95% bootstrap confidence interval and how many samples were
scored, skipped (no relevant document) or failed (unlabelled), writes the results as JSONL, and
compares the two runs with a paired bootstrap CI and a paired permutation test.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ragbridge.core import Evaluation, compare, load_samples, score_samples

DATA = Path(__file__).parent / "data"
MEASURES = ["hit_rate@1", "mrr", "ndcg@5", "recall@5", "precision@3", "no_answer"]


def evaluate(name: str) -> Evaluation:
    samples = load_samples(DATA / f"{name}.jsonl")  # streamed, validated line by line
    return score_samples(samples, MEASURES, no_answer_threshold=0.3)


def show(name: str, evaluation: Evaluation) -> None:
    print(f"\n{name}")
    print(
        f"  {'measure':<12} {'mean':>6}  {'95% CI':<15} {'scored':>6} {'skipped':>7} {'failed':>6}"
    )
    for metric, s in evaluation.summary(seed=0).items():
        mean = "-" if s.mean is None else f"{s.mean:.3f}"
        ci = "-" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
        print(
            f"  {metric:<12} {mean:>6}  {ci:<15} {s.n_scored:>6} {s.n_skipped:>7} {s.n_failed:>6}"
        )


def main(out_dir: Path) -> None:
    baseline = evaluate("baseline")
    candidate = evaluate("candidate")
    show("baseline", baseline)
    show("candidate", candidate)
    out_dir.mkdir(parents=True, exist_ok=True)
    candidate.to_jsonl(out_dir / "candidate.results.jsonl")
    assert Evaluation.from_jsonl(out_dir / "candidate.results.jsonl") == candidate
    print("\ncandidate - baseline (paired over samples scored in both)")
    for metric, c in compare(baseline, candidate, seed=0).items():
        ci = "-" if c.ci_low is None else f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
        p = "-" if c.p_value is None else f"{c.p_value:.4f}"
        print(f"  {metric:<12} diff {c.diff:+.3f}  CI {ci:<17} p={p}  n={c.n_paired}")
    print(f"\nresults written to {out_dir / 'candidate.results.jsonl'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("ragbridge-demo"))
