"""How well do ``citation_recall:offline`` and ``citation_precision:offline`` flag bad citations?

    python benchmarks/citation_offline.py [--data DIR] [--limit N] [--seed S]

Data: the public short-answer dev sample, ``../shared/data/short_answer_dev/qa_pairs.jsonl``
(HaluEval's QA generation step over HotpotQA questions, 100 of 500; MIT, HotpotQA CC BY-SA 4.0;
read in place, never copied into this repository; the other 400 upstream rows are held out and
never read). Each row has a question, its supporting ``knowledge``, a right answer and two
fabricated ones.

Labelled cases, built per row: two contexts, the row's own knowledge and a *distractor* (the
knowledge of another row, chosen with the seed), in a seeded order, so ``[1]`` is the own
passage in about half the rows. The answer is one statement ending with its citation: the answer
as written (``--form bare``, the default: "American [2]."; the offline check reads a short answer
with its question) or, for a short answer, "The answer to the question <q> is <a> [2]."
(``--form framed``); an answer that is already a sentence is kept as written in both:

* ``good``: the right answer citing its own passage (supported; every citation needed);
* ``distractor``: the right answer citing only the distractor (**bad**: unsupported);
* ``hallucinated``: a fabricated answer citing the own passage (**bad**: unsupported), once for
  each of the row's two fabricated answers (once when they are the same text);
* ``both``: the right answer citing both passages (supported, so fine for recall; the
  distractor citation is **unnecessary**, so precision should be 1/2).

Prints, with the counts: precision, recall and F1 of ``citation_recall:offline`` at flagging a
bad statement (flagged = the statement judged unsupported, a recall below 1), per bad kind and
overall, with the false alarms on ``good`` and ``both``; the same for
``citation_precision:offline`` at flagging the ``both`` cases (precision below 1) against the
``good`` ones; each measure's mean per case kind; and AUROC of the graded support the offline
provider reports per statement, where it reports one. The labels come from how the cases are
built, not from a person: a distractor passage that happens to state the answer too would be a
"bad" citation that is in fact fine.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.results.stats import auroc

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "short_answer_dev"
MEASURES = ("citation_recall:offline", "citation_precision:offline")
BAD_KINDS = ("distractor", "hallucinated")
KINDS = ("good", "distractor", "hallucinated", "both")


@dataclass(frozen=True)
class Case:
    """One labelled answer: its sample and what its citations are, by construction."""

    sample: Sample
    kind: str  # one of KINDS

    @property
    def supported(self) -> bool:
        """Whether the statement is supported by what it cites (recall's label)."""
        return self.kind in ("good", "both")


def load_rows(data: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The dev rows (the first ``limit`` of them), or FileNotFoundError naming the file."""
    path = data / "qa_pairs.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found (the shared dev data sits beside the repo)")
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return rows[:limit] if limit is not None else rows


FORMS = ("bare", "framed")


def statement(question: str, answer: str, form: str = "bare") -> str:
    """The answer as one sentence without its final stop. ``bare``: the answer as written (a
    short answer such as "American" states something together with the question, which is how
    the offline check reads it); ``framed``: a short answer put in a sentence of its own, "The
    answer to the question <q> is <a>" (the frame's words are in no passage). An answer that
    is already a sentence (a stop and four words or more) is kept as written in both."""
    text = answer.strip()
    if text.endswith(".") and len(text.split()) >= 4:
        return text[:-1].strip()
    if form == "bare":
        return text.rstrip(".")
    if form != "framed":
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    q = question.strip().rstrip("?").strip()
    q = q[:1].lower() + q[1:]
    return f"The answer to the question {q} is {text.rstrip('.')}"


def cited(sentence: str, numbers: Iterable[int]) -> str:
    return sentence + " " + "".join(f"[{n}]" for n in numbers) + "."


def build_cases(rows: Sequence[dict[str, Any]], *, seed: int = 0, form: str = "bare") -> list[Case]:
    """The labelled cases of the module's docstring, deterministic in ``seed``; ``form`` is
    how a short answer is stated (`statement`)."""
    if len(rows) < 2:
        raise ValueError("at least two rows are needed (a distractor comes from another row)")
    rng = random.Random(seed)
    cases: list[Case] = []
    for i, row in enumerate(rows):
        j = rng.choice([k for k in range(len(rows)) if k != i])
        own = Context(id=f"row{i}", text=row["knowledge"].strip())
        other = Context(id=f"row{j}", text=rows[j]["knowledge"].strip())
        own_first = rng.random() < 0.5
        contexts = [own, other] if own_first else [other, own]
        mine, theirs = (1, 2) if own_first else (2, 1)
        question = row["question"].strip()
        right = statement(question, row["right_answer"], form)
        answers = [("good", cited(right, [mine])), ("distractor", cited(right, [theirs]))]
        fabricated = dict.fromkeys(
            row[k].strip()
            for k in ("hallucinated_answer_one_turn", "hallucinated_answer_multi_turn")
            if isinstance(row.get(k), str) and row[k].strip()
        )
        answers += [
            ("hallucinated", cited(statement(question, f, form), [mine])) for f in fabricated
        ]
        answers.append(("both", cited(right, [1, 2])))
        for n, (kind, answer) in enumerate(answers):
            sample = Sample(
                id=f"row{i}-{kind}-{n}",
                question=question,
                answer=answer,
                contexts=contexts,
                metadata={"case": kind, "own_context": mine},
            )
            cases.append(Case(sample, kind))
    return cases


@dataclass(frozen=True)
class Flagging:
    """Precision, recall and F1 at flagging the positives, with the counts behind them."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p is not None and r is not None and p + r else None

    def line(self) -> str:
        def fmt(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"

        return (
            f"precision {fmt(self.precision)} recall {fmt(self.recall)} F1 {fmt(self.f1)} "
            f"(TP {self.tp}, FP {self.fp}, FN {self.fn}, TN {self.tn})"
        )


def flagging(pairs: Iterable[tuple[bool, bool]]) -> Flagging:
    """``pairs`` of (is positive, was flagged)."""
    tp = fp = fn = tn = 0
    for positive, flagged in pairs:
        tp += positive and flagged
        fp += (not positive) and flagged
        fn += positive and not flagged
        tn += (not positive) and not flagged
    return Flagging(tp, fp, fn, tn)


def graded_support(details: dict[str, Any]) -> float | None:
    """The lowest graded support the provider reports for a statement, if it reports any."""
    values = []
    for row in details.get("statements") or []:
        if isinstance(row, dict):
            for key in ("support", "score", "supported_score"):
                value = row.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.append(float(value))
                    break
    return min(values) if values else None


@dataclass
class Result:
    """What the offline measures made of the cases."""

    cases: list[Case]
    recall: dict[str, float | None]  # sample id -> citation_recall (None: no value)
    precision: dict[str, float | None]
    support: dict[str, float | None]  # sample id -> graded support of its statement
    failures: dict[str, str]  # sample id -> the measure's failure or skip reason

    def recall_flagging(self, kinds: Sequence[str] = BAD_KINDS) -> Flagging:
        """Flagging the bad kinds among those and the supported cases (no value: not flagged)."""
        pairs = []
        for case in self.cases:
            if case.kind in kinds or case.supported:
                value = self.recall[case.sample.id]
                pairs.append((not case.supported, value is not None and value < 1.0))
        return flagging(pairs)

    def precision_flagging(self) -> Flagging:
        """Flagging the ``both`` cases (an unnecessary citation) against the ``good`` ones."""
        pairs = []
        for case in self.cases:
            if case.kind in ("good", "both"):
                value = self.precision[case.sample.id]
                pairs.append((case.kind == "both", value is not None and value < 1.0))
        return flagging(pairs)

    def support_auroc(self) -> tuple[float, int] | None:
        """AUROC of the graded support, supported vs bad cases, and how many cases had one."""
        labels, scores = [], []
        for case in self.cases:
            value = self.support[case.sample.id]
            if value is not None:
                labels.append(int(case.supported))
                scores.append(value)
        if len(set(labels)) < 2:
            return None
        return auroc(labels, scores), len(labels)


def run(cases: Sequence[Case]) -> Result:
    """Score every case with both offline measures (one evaluation)."""
    evaluation = evaluate([c.sample for c in cases], list(MEASURES))
    recall: dict[str, float | None] = {}
    precision: dict[str, float | None] = {}
    support: dict[str, float | None] = {}
    failures: dict[str, str] = {}
    for case in cases:
        sid = case.sample.id
        r = evaluation.get(sid, "citation_recall")
        p = evaluation.get(sid, "citation_precision")
        recall[sid] = None if r is None else r.value
        precision[sid] = None if p is None else p.value
        support[sid] = None if r is None else graded_support(r.details or {})
        for score in (r, p):
            if score is not None and score.value is None:
                failures[sid] = score.failure.message if score.failure else str(score.reason)
    return Result(list(cases), recall, precision, support, failures)


def _mean(values: Iterable[float | None]) -> str:
    got = [v for v in values if v is not None]
    return f"{sum(got) / len(got):.3f} (n={len(got)})" if got else "n/a"


def report(result: Result) -> list[str]:
    """The figures, as printed."""
    lines = []
    counts = {k: sum(c.kind == k for c in result.cases) for k in KINDS}
    lines.append(f"{len(result.cases)} cases: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    lines.append("citation_recall:offline flagging a bad statement (recall < 1):")
    lines.append(f"  all bad kinds: {result.recall_flagging().line()}")
    for kind in BAD_KINDS:
        lines.append(f"  {kind} only: {result.recall_flagging((kind,)).line()}")
    lines.append("citation_precision:offline flagging an unnecessary citation (both vs good):")
    lines.append(f"  {result.precision_flagging().line()}")
    for name, values in (("citation_recall", result.recall), ("citation_precision",
                                                               result.precision)):  # fmt: skip
        per_kind = ", ".join(
            f"{k} {_mean(values[c.sample.id] for c in result.cases if c.kind == k)}" for k in KINDS
        )
        lines.append(f"mean {name}: {per_kind}")
    graded = result.support_auroc()
    if graded is None:
        lines.append("graded support: none reported by the provider (no AUROC)")
    else:
        lines.append(f"AUROC of graded support, supported vs bad: {graded[0]:.3f} (n={graded[1]})")
    if result.failures:
        kind_of = {c.sample.id: c.kind for c in result.cases}
        per_kind = ", ".join(
            f"{k} {sum(kind_of[sid] == k for sid in result.failures)}" for k in KINDS
        )
        first = next(iter(result.failures.items()))
        lines.append(
            f"no value for {len(result.failures)} cases ({per_kind}; counted as not flagged), "
            f"e.g. {first[0]}: {first[1]}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--form", choices=FORMS, default="bare", help="how short answers are stated"
    )
    args = parser.parse_args()
    try:
        rows = load_rows(args.data, args.limit)
    except FileNotFoundError as exc:
        sys.exit(str(exc))
    print("reproduce: " + shlex.join(["python", "benchmarks/citation_offline.py", *sys.argv[1:]]))
    print(f"{len(rows)} dev rows, seed {args.seed}, short answers {args.form}")
    for line in report(run(build_cases(rows, seed=args.seed, form=args.form))):
        print(line)


if __name__ == "__main__":
    main()
