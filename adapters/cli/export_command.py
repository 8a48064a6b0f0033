"""``ragbridge export DATA.jsonl --to ragas|deepeval|langsmith-examples OUT``.

Each format is the framework's own, written by its adapter, so the file loads with the
framework's own reader: RAGAS's ``EvaluationDataset.from_jsonl``, DeepEval's
``EvaluationDataset.add_goldens_from_json_file``, a LangSmith dataset upload (JSONL of
``inputs``/``outputs``/``metadata``). What a format has no field for is kept in its ragbridge
key, so importing the file back into ragbridge loses nothing.

OUT is checked before anything is converted (its folder exists and is writable, it is not the
input) and written atomically: a failure leaves no half file and no ``*.tmp`` behind.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from typing import Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK
from ragbridge.adapters.cli.options import read_samples
from ragbridge.adapters.cli.paths import check_input, check_output
from ragbridge.adapters.cli.plural import plural

FORMATS = ("ragas", "deepeval", "langsmith-examples")


DESCRIPTION = "Convert a ragbridge JSONL eval set into another framework's file format."
"""What ``ragbridge export --help`` says the command does."""


def register(sub: Any) -> None:
    parser = add_command(sub, "export", DESCRIPTION)
    parser.add_argument("data", metavar="DATA.jsonl")
    parser.add_argument("--to", required=True, choices=FORMATS, help="target format")
    parser.add_argument("out", metavar="OUT", help="file to write")
    parser.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from ragbridge.core.files import atomic_path, atomic_write

    data = check_input(args.data)
    target = check_output(args.out, "OUT", inputs=[data])
    samples = read_samples(args.data)
    if args.to == "ragas":
        from ragbridge.adapters.ragas import to_ragas_jsonl

        with atomic_path(target) as tmp:
            n = to_ragas_jsonl(samples, tmp)
        how = "RAGAS EvaluationDataset JSONL (ragas.EvaluationDataset.from_jsonl)"
    elif args.to == "deepeval":
        from ragbridge.adapters.deepeval import save_test_cases

        with atomic_path(target) as tmp, contextlib.redirect_stdout(io.StringIO()):
            save_test_cases(samples, tmp)  # DeepEval announces the save on stdout: hush
        n = len(samples)
        how = "DeepEval dataset JSON (EvaluationDataset.add_goldens_from_json_file)"
    else:
        from ragbridge.adapters.langsmith import example_records

        records = example_records(samples)
        with atomic_write(target) as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        n = len(records)
        how = "LangSmith examples JSONL (inputs/outputs/metadata)"
    console.say(f"wrote {plural(n, 'sample')} to {args.out}: {how}")
    return EXIT_OK
