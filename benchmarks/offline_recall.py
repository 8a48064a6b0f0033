"""Does ``context_recall:offline`` find a paraphrased statement in its source, and only there?

    python benchmarks/offline_recall.py [--data PATH]

Data: the FaithBench dev sample (Bao et al., NAACL 2025; CC BY-NC-SA 4.0), read from
``../shared/data/faithbench_dev/faithbench.jsonl``, never copied into this repository. LLM
summaries restate their source in other words; human experts marked the spans that the source
does not support. Each summary sentence is one reference statement, the source is the context:

* **paraphrase** (should be attributed): a sentence no annotator marked at all;
* **unsupported** (should not be): a sentence overlapping a span someone labelled Unwanted;
* **elsewhere** (should not be): a paraphrase sentence against another document's source;
* sentences overlapping only Questionable or Benign spans are left out (no clear label).

Prints the share attributed in each group, the balanced accuracy (paraphrase vs unsupported),
and how many sentences the provider skipped as preambles ("Here is a summary of the passage:",
a ``no_claims`` failure: neither attributed nor not). Run the same script on an older checkout
to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.text.words import sentences

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/faithbench_dev/faithbench.jsonl"


def labelled_sentences(rows: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """(source key, sentence, 1 paraphrase / 0 unsupported) for each clearly labelled sentence."""
    out: list[tuple[str, str, int]] = []
    for row in rows:
        summary = row["summary"]
        spans = [
            (a["summary_start"], a["summary_end"], a["label"])
            for a in row["annotations"]
            if a.get("summary_start") is not None
        ]
        position = 0
        for sentence in sentences(summary):
            start = summary.find(sentence, position)
            if start < 0:  # normalised away from the raw text: cannot place its labels
                continue
            end = position = start + len(sentence)
            labels = [label for a, b, label in spans if a < end and b > start]
            if not labels:
                out.append((row["source_key"], sentence, 1))
            elif any(part.startswith("Unwanted") for label in labels for part in label):
                out.append((row["source_key"], sentence, 0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"{args.data}: not found (the shared dev data sits beside the repository)")
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    sources = {row["source_key"]: row["source"] for row in rows}
    keys = sorted(sources)
    items = labelled_sentences(rows)
    samples: list[tuple[str, Sample]] = []
    for n, (key, sentence, label) in enumerate(items):
        group = "paraphrase" if label else "unsupported"
        samples.append((group, _sample(f"{n}", sentence, sources[key])))
        if label:
            elsewhere = sources[keys[(keys.index(key) + 1) % len(keys)]]
            samples.append(("elsewhere", _sample(f"{n}:elsewhere", sentence, elsewhere)))

    from ragbridge.adapters.local import LocalEmbedder

    evaluation = evaluate(
        [s for _, s in samples], ["context_recall:offline"], embedder=LocalEmbedder()
    )
    counts: dict[str, list[int]] = {}
    skipped = 0
    for group, sample in samples:
        score = evaluation.get(sample.id, "context_recall")
        if score is None or score.value is None:
            skipped += 1
            continue
        counts.setdefault(group, []).append(int(score.value == 1.0))
    print("# python benchmarks/offline_recall.py")
    print(f"# FaithBench dev: {len(items)} labelled summary sentences, {len(sources)} sources")
    share = {g: sum(v) / len(v) for g, v in counts.items()}
    for group, values in counts.items():
        print(f"  {group:<12} attributed {sum(values):>3} of {len(values):>3} ({share[group]:.3f})")
    balanced = (share["paraphrase"] + 1 - share["unsupported"]) / 2
    print(f"  balanced accuracy, paraphrase vs unsupported: {balanced:.3f}")
    print(f"  skipped (no claim: preambles): {skipped}")


def _sample(sample_id: str, sentence: str, source: str) -> Sample:
    return Sample(
        id=sample_id,
        question="Summarise the document.",
        reference=sentence,
        contexts=[Context(text=source)],
    )


if __name__ == "__main__":
    main()
