"""``ragbridge export DATA.jsonl --to ragas|deepeval|langsmith-examples OUT``.

Each format is the framework's own, written by its adapter, so the file loads with the
framework's own reader: RAGAS's ``EvaluationDataset.from_jsonl``, DeepEval's
``EvaluationDataset.add_goldens_from_json_file``, a LangSmith dataset upload (JSONL of
``inputs``/``outputs``/``metadata``). What a format has no field for is kept in its ragbridge
key, so importing the file back into ragbridge loses nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any

from ragbridge.adapters.cli.options import read_samples

FORMATS = ("ragas", "deepeval", "langsmith-examples")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="write an eval set in RAGAS, DeepEval or LangSmith-examples format",
        description="Convert a ragbridge JSONL eval set into another framework's file format.",
    )
    parser.add_argument("data", metavar="DATA.jsonl")
    parser.add_argument("--to", required=True, choices=FORMATS, help="target format")
    parser.add_argument("out", metavar="OUT", help="file to write")
    parser.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    samples = read_samples(args.data)
    if args.to == "ragas":
        from ragbridge.adapters.ragas import to_ragas_jsonl

        n = to_ragas_jsonl(samples, args.out)
        how = "RAGAS EvaluationDataset JSONL (ragas.EvaluationDataset.from_jsonl)"
    elif args.to == "deepeval":
        from ragbridge.adapters.deepeval import save_test_cases

        with contextlib.redirect_stdout(io.StringIO()):  # DeepEval announces the save on stdout
            save_test_cases(samples, args.out)
        n = len(samples)
        how = "DeepEval dataset JSON (EvaluationDataset.add_goldens_from_json_file)"
    else:
        from ragbridge.adapters.langsmith import save_examples

        n = save_examples(samples, args.out)
        how = "LangSmith examples JSONL (inputs/outputs/metadata)"
    print(f"wrote {n} samples to {args.out}: {how}")
    return 0
