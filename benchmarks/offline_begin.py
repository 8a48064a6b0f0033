"""Offline faithfulness on dialogue turns, against a one-line lexical baseline: BEGIN dev (WoW).

    python benchmarks/offline_begin.py [--data PATH] [--folds 5] [--seed 0] [--ablations]

Data: BEGIN (Dziri et al., TACL 2022; CC BY 4.0), its public dev file of 430 Wizard of
Wikipedia turns, read from ``../shared/data/begin_wow_dev/begin_dev_wow.tsv`` and never copied
into this repository. The benchmark's test splits are held out: nothing here reads them. Each
turn is a sample (previous message = question, knowledge snippet = context, response = answer),
grounded when its human label is "Fully attributable".

Scores compared (AUROC against the label, and balanced accuracy):

* ``lexical, content words``: the share of the response's distinct content words (stop words
  removed, `ragbridge.core.text.words.content_words`) found among the knowledge's words — the
  baseline as the issue states it;
* ``lexical, all words``: the same share with stop words kept, the stronger baseline: dialogue
  responses are written in the first and second person ("I have not", "do you ...") and
  knowledge snippets never are, so the words the first variant drops carry much of the signal;
* ``faithfulness:offline`` as it is (all-MiniLM-L6-v2 via `LocalEmbedder`). Cells that failed
  (a bare "yes") count as 0.5 and are counted.

Cross-validation: folds stratified by label and GROUPED BY KNOWLEDGE SNIPPET (289 snippets,
case folded, for 430 turns): the same snippet is answered by up to four generators, often with
near-verbatim copies of it, so a snippet split across folds would put near-duplicates on both
sides. Nothing is fitted except the balanced-accuracy threshold of the lexical shares (they have
no verdict of their own), chosen on the training folds; the provider's balanced accuracy is its
default verdict (faithful above 0.5). Printed: per-fold mean ± sd, per generator AUROC, and the
turns whose response holds a number (where the number and unit folding of
`ragbridge.core.text.quantities` can matter).

``--ablations`` scores the provider again with one part of its grading
(`ragbridge.core.metrics.providers.offline.support`) switched off at a time, the CV evidence
for keeping each part.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import re
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.metrics.providers.offline import faithfulness, matching, support
from ragbridge.core.results.stats import auroc
from ragbridge.core.text.words import content_words, words

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/begin_wow_dev/begin_dev_wow.tsv"
NUMERIC = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion|first|second|third|percent)\b",
    re.IGNORECASE,
)


def lexical_share(response: str, knowledge: str, *, keep_stop_words: bool) -> float:
    """Share of the response's distinct words found among the knowledge's words."""
    pick = words if keep_stop_words else content_words
    said = set(pick(response))
    known = set(words(knowledge))
    return sum(w in known for w in said) / len(said) if said else 0.0


def balanced_accuracy(labels: Sequence[int], values: Sequence[float], threshold: float) -> float:
    pos = [v > threshold for y, v in zip(labels, values, strict=True) if y]
    neg = [v <= threshold for y, v in zip(labels, values, strict=True) if not y]
    return (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2


def best_threshold(labels: Sequence[int], values: Sequence[float]) -> float:
    cuts = sorted(set(values))
    return max(cuts, key=lambda t: (balanced_accuracy(labels, values, t), -abs(t - 0.5)))


def grouped_folds(labels: Sequence[int], groups: Sequence[str], k: int, seed: int) -> list[int]:
    """A fold per row: whole groups to a fold, groups with a grounded turn and groups without
    dealt round-robin separately (seeded shuffle), so each fold gets a similar label mix."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    rng = random.Random(seed)
    fold_of = [0] * len(labels)
    for positive in (True, False):
        names = sorted(
            g for g, rows in by_group.items() if any(labels[i] for i in rows) == positive
        )
        rng.shuffle(names)
        for n, g in enumerate(names):
            for i in by_group[g]:
                fold_of[i] = n % k
    return fold_of


def cross_validated(
    labels: list[int],
    values: list[float],
    fold_of: list[int],
    k: int,
    verdict: Callable[[list[int], list[float]], float] | None,
) -> tuple[list[float], list[float]]:
    """Per-fold AUROC and balanced accuracy (at 0.5, or at ``verdict``'s training-fold cut)."""
    aucs: list[float] = []
    accs: list[float] = []
    for f in range(k):
        test = [i for i in range(len(labels)) if fold_of[i] == f]
        train = [i for i in range(len(labels)) if fold_of[i] != f]
        ty, tv = [labels[i] for i in test], [values[i] for i in test]
        threshold = (
            verdict([labels[i] for i in train], [values[i] for i in train]) if verdict else 0.5
        )
        aucs.append(auroc(ty, tv))
        accs.append(balanced_accuracy(ty, tv, threshold))
    return aucs, accs


def spread(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}"


def offline_values(samples: list[Sample], embedder: Any) -> tuple[list[float], int]:
    """``faithfulness:offline`` per sample (0.5 for a failed cell) and the failed count."""
    evaluation = evaluate(samples, ["faithfulness:offline"], embedder=embedder)
    values: list[float] = []
    unscored = 0
    for sample in samples:
        score: Any = evaluation.get(sample.id, "faithfulness")
        value = None if score is None else score.value
        unscored += value is None
        values.append(0.5 if value is None else float(value))
    return values, unscored


@contextmanager
def patched(target: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


ABLATIONS: dict[str, tuple[Any, str, Any]] = {
    "no unexplained-word grading": (support, "UNEXPLAINED_FACTOR", 1.0),
    "function words not counted": (support, "FUNCTION_WORD_WEIGHT", 0.0),
    "first person not a claim": (faithfulness, "speaks_for_itself", lambda *_: False),
    "discourse markers read": (matching, "unopened", lambda sentence: sentence),
    "mean of claims, not weakest": (
        faithfulness,
        "answer_support",
        lambda supports, short: sum(supports) / len(supports),
    ),
}
"""One part of `support` switched off at a time (module attributes read at call time)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ablations", action="store_true")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"{args.data}: not found (the shared dev data sits beside the repository)")
    print("# python benchmarks/offline_begin.py " + " ".join(sys.argv[1:]))
    print("# load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with args.data.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    labels = [int(r["begin_label"] == "Fully attributable") for r in rows]
    samples = [
        Sample(
            id=str(n),
            question=r["message"].strip() or "Reply.",
            answer=r["response"],
            contexts=[Context(text=r["knowledge"])],
        )
        for n, r in enumerate(rows)
    ]
    from ragbridge.adapters.local import LocalEmbedder

    embedder = LocalEmbedder()
    offline, unscored = offline_values(samples, embedder)
    scores: dict[str, tuple[list[float], bool]] = {
        "lexical, content words": (
            [lexical_share(r["response"], r["knowledge"], keep_stop_words=False) for r in rows],
            False,
        ),
        "lexical, all words": (
            [lexical_share(r["response"], r["knowledge"], keep_stop_words=True) for r in rows],
            False,
        ),
        "faithfulness:offline": (offline, True),
    }
    if args.ablations:
        for name, (target, attribute, value) in ABLATIONS.items():
            with patched(target, attribute, value):
                scores[f"  {name}"] = (offline_values(samples, embedder)[0], True)
    groups = [r["knowledge"].strip().lower() for r in rows]
    fold_of = grouped_folds(labels, groups, args.folds, args.seed)
    print(
        f"# BEGIN dev (Wizard of Wikipedia): {len(rows)} turns, {sum(labels)} fully attributable, "
        f"{len(set(groups))} knowledge snippets; faithfulness:offline unscored {unscored} (0.5)"
    )
    print(f"# {args.folds}-fold CV, stratified, grouped by knowledge snippet, seed {args.seed}")
    print(f"{'score':<32}{'AUROC all':>10}{'bal.acc':>9}   {'CV AUROC':>15}   {'CV bal.acc':>15}")
    for name, (values, has_verdict) in scores.items():
        threshold = 0.5 if has_verdict else best_threshold(labels, values)
        aucs, accs = cross_validated(
            labels, values, fold_of, args.folds, None if has_verdict else best_threshold
        )
        print(
            f"{name:<32}{auroc(labels, values):>10.3f}"
            f"{balanced_accuracy(labels, values, threshold):>9.3f}   {spread(aucs):>15}   "
            f"{spread(accs):>15}"
        )
    print("# balanced accuracy: the provider at its default verdict (> 0.5); the lexical shares")
    print("# at the threshold best on the data scored (all) or on the training folds (CV)")
    mine, _ = cross_validated(labels, offline, fold_of, args.folds, None)
    for name in ("lexical, content words", "lexical, all words"):
        theirs, _ = cross_validated(labels, scores[name][0], fold_of, args.folds, None)
        gaps = [a - b for a, b in zip(mine, theirs, strict=True)]
        print(
            f"# faithfulness:offline - {name}: per-fold AUROC gap {spread(gaps)}, "
            f"ahead in {sum(g > 0 for g in gaps)} of {len(gaps)} folds"
        )
    subsets = {
        **{
            f"generator {m}": [i for i, r in enumerate(rows) if r["model_name"] == m]
            for m in sorted({r["model_name"] for r in rows})
        },
        "responses with a number": [i for i, r in enumerate(rows) if NUMERIC.search(r["response"])],
    }
    main_scores = list(scores)[:3]
    print(f"\nAUROC by subset{'':<26}{'content words':>16}{'all words':>16}{'offline':>16}")
    for subset, picked in subsets.items():
        cells = [
            auroc([labels[i] for i in picked], [scores[n][0][i] for i in picked])
            for n in main_scores
        ]
        grounded = sum(labels[i] for i in picked)
        head = f"{subset} ({grounded}/{len(picked)} grounded)"
        print(f"{head:<41}" + "".join(f"{c:>16.3f}" for c in cells))


if __name__ == "__main__":
    main()
