"""What the offline providers' numbers are worth, on public labelled dev data (issue 15).

    python benchmarks/offline_quality.py [--embedder local|hash] [--data DIR]

Reads ``../shared/data/short_answer_dev/qa_pairs.jsonl`` (HaluEval QA generation, 100 of its
500 questions; MIT; never copied into this repository). Each question has its supporting
knowledge, the right answer (HotpotQA gold) and two answers an LLM was told to fabricate. The
other 400 upstream rows are held out: this script never reads them.

Prints, for the offline providers as they are now:

* ``faithfulness:offline`` on short answers: AUROC of the right answer against each fabrication
  style (one turn, multi turn), and the share of answers each scores as faithful (value >= 0.5);
  next to the one-line lexical baseline of the data's README (the share of the answer's content
  words found in the knowledge or the question). Skipped or failed cells count as 0.5 (no
  evidence either way) and are counted.
* counterfactual contexts, built from the same rows: where the right answer occurs verbatim in
  the knowledge and the one-turn fabrication is short (at most five words) and absent from it,
  the knowledge is edited to state the fabrication instead; the faithful answer is then the
  fabrication. Counted: how often ``faithfulness:offline`` scores it strictly above the
  (now unsupported) right answer, next to the lexical baseline.
* ``answer_relevance:offline`` on the pairs `offline_fit.py` fits it on (the answer to this
  question vs another question's, as a short span and as a knowledge sentence) and an
  abstention vs the right answer (AUROC, in-sample); and DeepEval's canonical answer-relevancy
  example, with its 0.7 threshold.

The FaithBench (long summaries) figures are `benchmarks/offline_calibration.py`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.results.stats import auroc
from ragbridge.core.text.words import content_words

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "short_answer_dev"
STYLES = ("hallucinated_answer_one_turn", "hallucinated_answer_multi_turn")
ABSTENTION = "I don't know; the context does not say."

# DeepEval's documentation example for AnswerRelevancyMetric (its threshold: 0.7).
DEEPEVAL_EXAMPLE = Sample(
    id="deepeval-example",
    question="What if these shoes don't fit?",
    answer="We offer a 30-day full refund at no extra cost.",
    contexts=[
        Context(text="All customers are eligible for a 30 day full refund at no extra cost.")
    ],
)


def load(folder: Path) -> list[dict[str, Any]]:
    path = folder / "qa_pairs.jsonl"
    if not path.exists():
        raise SystemExit(f"{path}: not found (the shared dev data sits beside the repository)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def lexical(answer: str, question: str, knowledge: str) -> float:
    """The README's one-line baseline: content words of the answer found in knowledge+question."""
    words = content_words(answer)
    pool = set(content_words(knowledge)) | set(content_words(question))
    return sum(w in pool for w in words) / len(words) if words else 0.5


def _value(evaluation: Any, sample_id: str, metric: str) -> tuple[float, bool]:
    score = evaluation.get(sample_id, metric)
    if score is None or score.value is None:
        return 0.5, False
    return float(score.value), True


def short_answers(rows: list[dict[str, Any]], embedder: Any) -> None:
    samples = []
    for row in rows:
        for kind in ("right_answer", *STYLES):
            samples.append(
                Sample(
                    id=f"{row['seed_index']}:{kind}",
                    question=row["question"].strip(),
                    answer=row[kind],
                    contexts=[Context(text=row["knowledge"].strip())],
                )
            )
    evaluation = evaluate(samples, ["faithfulness:offline"], embedder=embedder)
    print(f"faithfulness:offline on short answers ({len(rows)} questions)")
    print("  style        AUROC (offline)  AUROC (lexical)  judged faithful: right / fabricated")
    for style in STYLES:
        labels: list[int] = []
        mine: list[float] = []
        base: list[float] = []
        unscored = 0
        faithful = {1: 0, 0: 0}
        for row in rows:
            for kind, label in (("right_answer", 1), (style, 0)):
                value, scored = _value(evaluation, f"{row['seed_index']}:{kind}", "faithfulness")
                unscored += not scored
                labels.append(label)
                mine.append(value)
                faithful[label] += value >= 0.5
                base.append(lexical(row[kind], row["question"], row["knowledge"]))
        name = style.removeprefix("hallucinated_answer_")
        print(
            f"  {name:<11}  {auroc(labels, mine):.3f}            {auroc(labels, base):.3f}"
            f"            {faithful[1]} / {faithful[0]} of {len(rows)}"
            f"   ({unscored} cells skipped or failed, counted 0.5)"
        )


def counterfactual(rows: list[dict[str, Any]], embedder: Any) -> None:
    samples: list[Sample] = []
    pairs: list[tuple[str, str, float, float]] = []
    for row in rows:
        right, fake = row["right_answer"].strip(), row[STYLES[0]].strip().rstrip(".")
        knowledge, question = row["knowledge"].strip(), row["question"].strip()
        if (
            right.lower() not in knowledge.lower()
            or len(fake.split()) > 5
            or fake.lower() in knowledge.lower()
        ):
            continue
        edited = re.sub(re.escape(right), fake, knowledge, flags=re.IGNORECASE)
        base = f"{row['seed_index']}:cf"
        for kind, answer in (("fake", fake), ("right", right)):
            samples.append(
                Sample(
                    id=f"{base}:{kind}",
                    question=question,
                    answer=answer,
                    contexts=[Context(text=edited)],
                )
            )
        pairs.append(
            (
                base,
                row["seed_index"],
                lexical(fake, question, edited),
                lexical(right, question, edited),
            )
        )
    evaluation = evaluate(samples, ["faithfulness:offline"], embedder=embedder)
    mine = sum(
        _value(evaluation, f"{b}:fake", "faithfulness")[0]
        > _value(evaluation, f"{b}:right", "faithfulness")[0]
        for b, _, _, _ in pairs
    )
    base_wins = sum(f > r for _, _, f, r in pairs)
    print(f"counterfactual contexts ({len(pairs)} rows of {len(rows)} could be edited)")
    print(
        f"  faithful (fabricated-into-context) answer preferred: offline {mine} of {len(pairs)}"
        f" ({100 * mine / len(pairs):.0f}%), lexical {base_wins} of {len(pairs)}"
    )


def answer_relevance(rows: list[dict[str, Any]], embedder: Any) -> None:
    from offline_fit import relevance_pairs  # the same pairs the model was fitted on

    pairs = relevance_pairs(rows)
    declined = [
        Sample(id=f"{s.id}:abstain", question=s.question, answer=ABSTENTION)
        for kind, s, label in pairs
        if kind == "span" and label == 1
    ]
    samples = [s for _, s, _ in pairs]
    evaluation = evaluate(
        [*samples, *declined, DEEPEVAL_EXAMPLE], ["answer_relevance:offline"], embedder=embedder
    )
    print(f"answer_relevance:offline ({len(rows)} questions; in-sample, see offline_fit.py for CV)")
    groups = {
        "other question's answer": [(s.id, label) for k, s, label in pairs if k == "span"],
        "other question's sentence": [(s.id, label) for k, s, label in pairs if k == "sentence"],
        "abstention": [(s.id, 1) for k, s, label in pairs if k == "span" and label == 1]
        + [(s.id, 0) for s in declined],
    }
    for kind, members in groups.items():
        labels = [label for _, label in members]
        values = [_value(evaluation, sample_id, "answer_relevance")[0] for sample_id, _ in members]
        print(f"  own vs {kind:<26} AUROC {auroc(labels, values):.3f}")
    example, _ = _value(evaluation, DEEPEVAL_EXAMPLE.id, "answer_relevance")
    verdict = "passes" if example >= 0.7 else "fails"
    print(f"  DeepEval's canonical example: {example:.3f} ({verdict} its 0.7 threshold)")


def paragraphs(knowledge: str) -> list[str]:
    """HaluEval joins its supporting paragraphs with no space ("...in 1989.James Henry ...")."""
    return [p.strip() for p in re.split(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z])", knowledge) if p.strip()]


def context_precision(rows: list[dict[str, Any]], embedder: Any) -> None:
    """Each question's own supporting paragraphs mixed with another question's: the provider's
    per-context verdict ("useful") should hold for its own and not for the others."""
    samples: list[Sample] = []
    truth: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        other = rows[(i + 7) % len(rows)]
        own, foreign = paragraphs(row["knowledge"]), paragraphs(other["knowledge"])
        mixed = [(text, 0) for text in foreign[:1]] + [(text, 1) for text in own]
        mixed += [(text, 0) for text in foreign[1:]]
        sample = Sample(
            id=f"{i}:mixed",
            question=row["question"].strip(),
            contexts=[Context(id=f"c{k}", text=text) for k, (text, _) in enumerate(mixed)],
        )
        samples.append(sample)
        truth[sample.id] = [label for _, label in mixed]
    evaluation = evaluate(samples, ["context_precision:offline"], embedder=embedder)
    labels: list[int] = []
    similarities: list[float] = []
    verdicts: list[bool] = []
    for sample in samples:
        score = evaluation.get(sample.id, "context_precision")
        assert score is not None
        for label, row in zip(truth[sample.id], score.details["contexts"], strict=True):
            labels.append(label)
            similarities.append(row["similarity"])
            verdicts.append(row["useful"])
    own = [v for v, label in zip(verdicts, labels, strict=True) if label]
    foreign = [v for v, label in zip(verdicts, labels, strict=True) if not label]
    print(f"context_precision:offline ({len(samples)} questions, own + another's paragraphs)")
    print(
        f"  AUROC of a paragraph's similarity, own vs another question's: "
        f"{auroc(labels, similarities):.3f}"
    )
    print(
        f"  judged useful: own {sum(own)} of {len(own)}, another question's"
        f" {sum(foreign)} of {len(foreign)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    args = parser.parse_args()
    rows = load(args.data)
    if args.embedder == "hash":
        from ragbridge.core.testing import HashEmbedder

        embedder: Any = HashEmbedder()
    else:
        from ragbridge.adapters.local import LocalEmbedder

        embedder = LocalEmbedder()
    print(f"embedder: {embedder.model}")
    short_answers(rows, embedder)
    counterfactual(rows, embedder)
    answer_relevance(rows, embedder)
    context_precision(rows, embedder)


if __name__ == "__main__":
    main()
