"""Offline faithfulness on dialogue turns: the BEGIN dev set (Wizard of Wikipedia part).

    python benchmarks/offline_begin.py [--data PATH]

Data: BEGIN (Dziri et al., TACL 2022; CC BY 4.0), its public dev file of 430 knowledge-grounded
dialogue turns, read from ``../shared/data/begin_wow_dev/begin_dev_wow.tsv`` and never copied
into this repository; the benchmark's test split is held out and never read. Each turn becomes a
sample: the previous message is the question, the knowledge snippet the context, the generated
response the answer. A turn is grounded when its human label is "Fully attributable".

Prints, for ``faithfulness:offline`` (all-MiniLM-L6-v2 via `LocalEmbedder`): the AUROC of the
value against the label, the balanced accuracy of the default verdict (faithful above 0.5), and
the same for the turns whose response holds a number (digits or a number word), where the
number and unit folding of `ragbridge.core.text.quantities` can matter. Cells that failed (a bare
"yes", an abstention) count as 0.5 and are counted.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.results.stats import auroc

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/begin_wow_dev/begin_dev_wow.tsv"
NUMERIC = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion|first|second|third|percent)\b",
    re.IGNORECASE,
)


def balanced_accuracy(labels: list[int], predicted: list[int]) -> float:
    positives = [p for y, p in zip(labels, predicted, strict=True) if y == 1]
    negatives = [p for y, p in zip(labels, predicted, strict=True) if y == 0]
    return (sum(positives) / len(positives) + 1 - sum(negatives) / len(negatives)) / 2


def report(name: str, labels: list[int], values: list[float]) -> None:
    verdicts = [int(v > 0.5) for v in values]
    print(
        f"  {name:<28} {len(labels):>4} ({sum(labels):>3} grounded)   AUROC "
        f"{auroc(labels, values):.3f}   balanced acc. {balanced_accuracy(labels, verdicts):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"{args.data}: not found (the shared dev data sits beside the repository)")
    with args.data.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    samples = [
        Sample(
            id=str(n),
            question=row["message"].strip() or "Reply.",
            answer=row["response"],
            contexts=[Context(text=row["knowledge"])],
        )
        for n, row in enumerate(rows)
    ]
    from ragbridge.adapters.local import LocalEmbedder

    evaluation = evaluate(samples, ["faithfulness:offline"], embedder=LocalEmbedder())
    labels: list[int] = []
    values: list[float] = []
    numeric: list[bool] = []
    unscored = 0
    for sample, row in zip(samples, rows, strict=True):
        score: Any = evaluation.get(sample.id, "faithfulness")
        if score is None or score.value is None:
            unscored += 1
            values.append(0.5)
        else:
            values.append(float(score.value))
        labels.append(int(row["begin_label"] == "Fully attributable"))
        numeric.append(bool(NUMERIC.search(row["response"])))
    print("# python benchmarks/offline_begin.py")
    print(f"# BEGIN dev (Wizard of Wikipedia): {len(rows)} turns; {unscored} unscored (0.5)")
    report("all turns", labels, values)
    picked = [i for i, n in enumerate(numeric) if n]
    report("responses with a number", [labels[i] for i in picked], [values[i] for i in picked])


if __name__ == "__main__":
    main()
