"""``ragbridge trec QRELS RUN``: trec_eval's command line and output for the measures we implement.

The output is a byte-identical subset of trec_eval's (same order, names and formatting) so
scripts that parse trec_eval can read ours. Measures trec_eval has and we do not are refused with
the list of what is supported rather than silently skipped.
"""

from __future__ import annotations

import argparse
from typing import Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK
from ragbridge.adapters.cli.paths import check_input


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "trec",
        "Evaluate a TREC run file against a qrels file, exactly as trec_eval does, "
        "for the measures: num_q num_ret num_rel num_rel_ret map Rprec recip_rank P recall "
        "ndcg ndcg_cut map_cut success (and runid).",
    )
    parser.add_argument("qrels", metavar="QRELS", help="qrels file: qid iter docno grade")
    parser.add_argument("run", metavar="RUN", help="run file: qid Q0 docno rank score tag")
    parser.add_argument(
        "-m",
        dest="measures",
        action="append",
        metavar="MEASURE",
        help="measure as trec_eval spells it: P_5, P.5,10, ndcg_cut_10, recip_rank, map, "
        "success_1, recall_100, Rprec, all_trec (default: all_trec). Repeatable.",
    )
    parser.add_argument("-q", dest="per_query", action="store_true", help="print per-query values")
    parser.add_argument(
        "-l",
        dest="level",
        type=int,
        default=1,
        metavar="LEVEL",
        help="smallest grade counted relevant (default 1); nDCG always uses the raw grades",
    )
    parser.add_argument(
        "-c",
        dest="complete",
        action="store_true",
        help="average over every qrels query; queries missing from the run score 0",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ragbridge.core.retrieval import (  # not at the top: `ragbridge --help` skips numpy
        evaluate_run,
        format_trec_lines,
        parse_trec_measures,
        read_qrels,
        read_run_scores,
    )

    specs = list(args.measures or ["all_trec"])
    show_run_id = any(s in {"all_trec", "runid"} for s in specs)
    specs = [s for s in specs if s != "runid"]
    measures = parse_trec_measures(specs) if specs else []
    if args.level < 0:
        raise ValueError("-l LEVEL must be >= 0")
    check_input(args.qrels)
    check_input(args.run)
    qrels = read_qrels(args.qrels)
    scores, run_id = read_run_scores(args.run)
    result = evaluate_run(
        qrels,
        scores,
        measures,
        relevance_level=args.level,
        complete=args.complete,
        run_id=run_id,
    )
    console.say(*format_trec_lines(result, per_query=args.per_query, run_id=show_run_id))
    return EXIT_OK
