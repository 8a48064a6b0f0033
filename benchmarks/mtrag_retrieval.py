"""MTRAG's per-turn retrieval scored with ragbridge's trec_eval-exact measures, beside its figures.

    python benchmarks/mtrag_retrieval.py --data PATH [--run RUN ...] [--complete] [--per-turn OUT]

Data: MTRAG (IBM, TACL 2025; Apache-2.0), read from a checkout of its repository, never copied
here (tests/data/mtrag holds one licence-checked conversation for the tests):

    git clone https://github.com/IBM/mt-rag-benchmark    # qrels and queries are plain files
    python benchmarks/mtrag_retrieval.py --data mt-rag-benchmark     # or MTRAG_DIR=mt-rag-benchmark

or ``--qrels FILE`` for qrels files alone (their domain is read from the name). The retrieval
tasks are the 777 answerable and partial turns of MTRAG's 110 conversations (its qrels,
``mtrag-human/retrieval_tasks/<domain>/qrels/dev.tsv``); each turn is one query.

A run is a retrieval system's output for those turns: MTRAG's prediction JSONL (``task_id``,
``Collection``, ``contexts`` with ``document_id`` and ``score``: its Task A format, or its
``RAG.jsonl``) or a TREC run file. MTRAG publishes no run file, and its corpora are LFS archives,
so without ``--run`` the script scores two runs made from the qrels alone, as checks:

* ``ceiling``: each turn's relevant passages, all retrieved. It is the best any run can score:
  1.0 except recall@k and nDCG@k for k below a turn's number of relevant passages.
* ``carry-over``: each turn retrieves the relevant passages of the earlier turns of its
  conversation, the latest turn first. It measures how much of a turn's evidence a system that
  never searched again would already hold (0 on a first turn, and on a turn whose earlier
  turns have no relevant passage).

Prints, per run: recall@1/3/5/10 and nDCG@1/3/5/10 as MTRAG reports them (the mean over turns;
MTRAG's evaluator weights each corpus by its number of turns, which is the same), for all turns,
each corpus, and the first turn against later turns; then MTRAG's published table
(``mtrag-human/retrieval_tasks/README.md``) in the same columns. When pytrec_eval (MTRAG's own
evaluator) is installed, every per-turn value is compared with it and the largest difference
printed. ``--complete`` counts a turn the run misses as 0 (trec_eval ``-c``); MTRAG's evaluator
leaves such turns out, as the default here does.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ragbridge.adapters.mtrag import (
    DOMAINS,
    canonical_task_id,
    read_predictions,
    read_qrels,
    split_task_id,
)
from ragbridge.core.retrieval import Qrels, RetrievalResult, evaluate_run, read_run_scores

CUTOFFS = (1, 3, 5, 10)
MEASURES = [f"recall_{k}" for k in CUTOFFS] + [f"ndcg_cut_{k}" for k in CUTOFFS]
LAYOUTS = ("mtrag-human/retrieval_tasks", "human/retrieval_tasks")  # the repo's current, former

# MTRAG's published retrieval figures (all 777 turns): mtrag-human/retrieval_tasks/README.md,
# "Results", at commit cc5b1d481b391181b89f7ced860308482e785463. Columns: R@1 R@3 R@5 R@10
# nDCG@1 nDCG@3 nDCG@5 nDCG@10. Read again from --data when it has the README.
PUBLISHED: dict[str, tuple[float, ...]] = {
    "BM25 / Last Turn": (0.08, 0.15, 0.20, 0.27, 0.17, 0.16, 0.18, 0.21),
    "BM25 / Query Rewrite": (0.09, 0.18, 0.25, 0.33, 0.20, 0.19, 0.22, 0.25),
    "BGE-base 1.5 / Last Turn": (0.13, 0.24, 0.30, 0.38, 0.26, 0.25, 0.27, 0.30),
    "BGE-base 1.5 / Query Rewrite": (0.17, 0.30, 0.37, 0.47, 0.34, 0.31, 0.34, 0.38),
    "Elser / Last Turn": (0.18, 0.39, 0.49, 0.58, 0.42, 0.41, 0.45, 0.49),
    "Elser / Query Rewrite": (0.20, 0.43, 0.52, 0.64, 0.46, 0.45, 0.48, 0.54),
}
_ROW = re.compile(r"^\s*([^|]+?)\s*\|\s*([^|]+?)\s*((?:\|\s*[\d.]+\s*){8})\|?\s*$")


# --------------------------------------------------------------------------- inputs


def find_qrels(data: Path) -> dict[str, Path]:
    """``{domain: qrels file}`` of an MTRAG checkout, in either of its layouts."""
    for layout in LAYOUTS:
        found = {d: data / layout / d / "qrels" / "dev.tsv" for d in DOMAINS}
        if all(p.is_file() for p in found.values()):
            return found
    return {}


def published(data: Path | None) -> tuple[dict[str, tuple[float, ...]], str]:
    """MTRAG's table, from the checkout's README when it has one (else the copy above)."""
    for layout in LAYOUTS:
        readme = data / layout / "README.md" if data is not None else None
        if readme is not None and readme.is_file():
            rows: dict[str, tuple[float, ...]] = {}
            for line in readme.read_text(encoding="utf-8").splitlines():
                match = _ROW.match(line)
                if match:
                    values = tuple(float(v) for v in match[3].strip(" |").split("|"))
                    rows[f"{match[1]} / {match[2]}"] = values
            if rows:
                return rows, str(readme)
    return PUBLISHED, "copied into this script at commit cc5b1d4; no README under --data"


def load_run(path: Path) -> dict[str, dict[str, float]]:
    """A run file, MTRAG's JSONL or TREC's, as ``{task id: {document id: score}}``."""
    with path.open("r", encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    if head.startswith("{"):
        run = read_predictions(path)
        if run.repeated:
            print(f"  note: {path}: {run.repeated} repeated passages (the later score counts)")
        return run.scores
    scores, _ = read_run_scores(path)
    return {canonical_task_id(q): docs for q, docs in scores.items()}


def ceiling_run(qrels: Qrels) -> dict[str, dict[str, float]]:
    return {q: {d: 1.0 for d, g in qrels[q].items() if g > 0} for q in qrels}


def carry_over_run(qrels: Qrels) -> dict[str, dict[str, float]]:
    """Each turn retrieves its conversation's earlier relevant passages, the latest turn first
    (score = that turn's number; ties within a turn fall to trec_eval's doc id order)."""
    by_conversation: dict[str, list[tuple[int, str]]] = {}
    for qid in qrels:
        conversation, turn = split_task_id(qid)
        by_conversation.setdefault(conversation, []).append((turn, qid))
    run: dict[str, dict[str, float]] = {}
    for turns in by_conversation.values():
        turns.sort()
        for i, (_, qid) in enumerate(turns):
            docs: dict[str, float] = {}
            for earlier, earlier_qid in turns[:i]:
                for doc, grade in qrels[earlier_qid].items():
                    if grade > 0:
                        docs[doc] = float(earlier)  # a later turn overwrites: latest first
            run[qid] = docs
    return run


# --------------------------------------------------------------------------- scoring


def groups(qids: Sequence[str], domain: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"all": list(qids)}
    for name in DOMAINS:
        out[name] = [q for q in qids if domain[q] == name]
    out["first turn"] = [q for q in qids if split_task_id(q)[1] == 1]
    out["later turns"] = [q for q in qids if split_task_id(q)[1] > 1]
    return out


def means(result: RetrievalResult, qids: Sequence[str]) -> list[float]:
    per = {m: result.per_query(m) for m in MEASURES}
    return [sum(per[m][q] for q in qids) / len(qids) for m in MEASURES]


def pytrec_difference(
    qrels: Qrels, run: Mapping[str, Mapping[str, float]], result: RetrievalResult
) -> str:
    try:
        import pytrec_eval
    except ImportError:
        return "pytrec_eval not installed: no cross-check"
    judged = {q: dict(qrels[q]) for q in qrels}
    theirs = pytrec_eval.RelevanceEvaluator(
        judged, {"recall." + ",".join(map(str, CUTOFFS)), "ndcg_cut." + ",".join(map(str, CUTOFFS))}
    ).evaluate({q: dict(d) for q, d in run.items() if q in judged})
    worst, where = 0.0, ""
    for measure in MEASURES:
        for qid, value in result.per_query(measure).items():
            if qid not in theirs:  # --complete: pytrec_eval leaves out turns the run misses
                continue
            gap = abs(value - theirs[qid][measure])
            if gap > worst:
                worst, where = gap, f" ({qid}, {measure})"
    return f"pytrec_eval: {len(theirs)} turns, largest per-turn difference {worst:.2e}{where}"


def report(
    name: str,
    qrels: Qrels,
    run: Mapping[str, Mapping[str, float]],
    domain: Mapping[str, str],
    *,
    complete: bool,
    per_turn: Path | None,
) -> None:
    result = evaluate_run(qrels, run, MEASURES, complete=complete)
    missing = sum(1 for q in qrels if q not in run)
    print(f"\n{name}: {len(result.qids)} turns scored, {missing} qrels turns not in the run")
    head = "  ".join(
        f"{h:>7}" for h in [*(f"R@{k}" for k in CUTOFFS), *(f"nDCG@{k}" for k in CUTOFFS)]
    )
    print(f"  {'turns':<12} {'n':>4}  {head}")
    for label, qids in groups(result.qids, domain).items():
        values = means(result, qids) if qids else []
        cells = "  ".join(f"{v:>7.4f}" for v in values) if values else "(no turn)"
        print(f"  {label:<12} {len(qids):>4}  {cells}")
    print("  " + pytrec_difference(qrels, run, result))
    if per_turn is not None:
        tag = re.sub(r"\W+", "_", name)
        target = per_turn.with_name(f"{per_turn.stem}.{tag}{per_turn.suffix}")
        rows = ["task_id\tdomain\tturn\t" + "\t".join(MEASURES)]
        per = {m: result.per_query(m) for m in MEASURES}
        for qid in result.qids:
            values = "\t".join(f"{per[m][qid]:.6f}" for m in MEASURES)
            rows.append(f"{qid}\t{domain[qid]}\t{split_task_id(qid)[1]}\t{values}")
        target.write_text("\n".join(rows) + "\n", encoding="utf-8")
        print(f"  per-turn values: {target}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("MTRAG_DIR"))
    parser.add_argument("--qrels", type=Path, action="append", default=[])
    parser.add_argument("--run", type=Path, action="append", default=[])
    parser.add_argument("--complete", action="store_true")
    parser.add_argument("--per-turn", type=Path)
    args = parser.parse_args(argv)
    print(
        "$ python benchmarks/mtrag_retrieval.py " + " ".join(sys.argv[1:] if argv is None else argv)
    )
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))

    files = find_qrels(args.data) if args.data else {}
    for path in args.qrels:
        named = [d for d in DOMAINS if d in path.name.lower() or d in str(path.parent).lower()]
        files[named[0] if named else path.stem] = path
    if not files:
        where = f"{args.data}: no MTRAG retrieval tasks there" if args.data else "no data given"
        print(
            f"{where}.\nGet MTRAG's retrieval tasks (plain files; the corpora are not needed):\n"
            "  git clone https://github.com/IBM/mt-rag-benchmark\n"
            "  python benchmarks/mtrag_retrieval.py --data mt-rag-benchmark\n"
            "or set MTRAG_DIR, or give --qrels FILE for each domain's qrels/dev.tsv.",
            file=sys.stderr,
        )
        return 2

    judged: dict[str, dict[str, int]] = {}
    domain: dict[str, str] = {}
    for name, path in files.items():
        qrels = read_qrels(path)
        for qid in qrels:
            if qid in judged:
                raise SystemExit(f"{path}: task {qid} is also in the {domain[qid]} qrels")
            judged[qid], domain[qid] = dict(qrels[qid]), name
        count = sum(len(qrels[q]) for q in qrels)
        print(f"qrels {name}: {len(qrels)} turns, {count} judgements ({path})")
    qrels = Qrels(judged)

    started = time.perf_counter()
    runs: list[tuple[str, dict[str, dict[str, float]]]]
    if args.run:
        runs = [(str(p), load_run(p)) for p in args.run]
    else:
        print("no --run: MTRAG publishes no run file; scoring the two qrels-made checks")
        runs = [("ceiling", ceiling_run(qrels)), ("carry-over", carry_over_run(qrels))]
    for name, run in runs:
        report(name, qrels, run, domain, complete=args.complete, per_turn=args.per_turn)

    table, source = published(args.data)
    if table != PUBLISHED:
        source += "; it differs from the copy in this script, which it replaces here"
    print(f"\nMTRAG's published figures, all 777 turns ({source}):")
    head = "  ".join(
        f"{h:>7}" for h in [*(f"R@{k}" for k in CUTOFFS), *(f"nDCG@{k}" for k in CUTOFFS)]
    )
    print(f"  {'retriever / query':<30}  {head}")
    for label, values in table.items():
        print(f"  {label:<30}  " + "  ".join(f"{v:>7.2f}" for v in values))
    print(f"\n{time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
