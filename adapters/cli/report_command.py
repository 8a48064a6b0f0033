"""``ragbridge report``: the HTML report of one or more results files, with no scoring.

``ragbridge report RESULTS.jsonl [RESULTS2.jsonl ...] --out report.html`` renders what ``eval``
(or any `Evaluation.to_jsonl`) wrote. Two or more results files are runs side by side: each is
compared with the first (paired difference, CI and p-value per metric and per question), so
any two runs can be diffed, not only the demo's pipelines. ``--samples`` gives the questions,
answers and contexts (one file for every run, or one per results file, in order); ``--name``
names the runs (default: the file names without what they share); ``--history PATH`` adds the
trend charts from a monitor store that ``eval --history`` records into. Exit codes: 0 written,
2 bad arguments or files.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console, history_command
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import UserError
from ragbridge.adapters.cli.paths import SQLITE_HEADER, check_distinct, check_input, check_output
from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.monitoring.records import RunRecord
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.sample import Sample


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "report",
        "Render the self-contained HTML report of one or more results files "
        "(written by eval --out). With two or more, each run is compared with the first: "
        "paired differences with CIs and p-values per metric, and per question in the "
        "sample explorer.",
    )
    parser.add_argument(
        "results", nargs="+", metavar="RESULTS.jsonl", help="results files, the baseline first"
    )
    parser.add_argument(
        "--samples",
        nargs="+",
        action="extend",
        metavar="SAMPLES.jsonl",
        help="the samples the runs scored (questions, answers, contexts): one file for every "
        "run, or one per results file in the same order",
    )
    parser.add_argument(
        "--name",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="a name per results file, in order (default: the file names without the part "
        "they share)",
    )
    parser.add_argument(
        "--history",
        metavar="STORE",
        help="monitor store of recorded runs (eval --history STORE: an SQLite file or a "
        "postgresql:// URL): adds the trend charts",
    )
    parser.add_argument("--title", help="the report's title")
    parser.add_argument("--out", required=True, metavar="report.html", help="the file to write")
    parser.set_defaults(handler=run_report)


def default_names(paths: list[str]) -> list[str]:
    """Run names from file names: ``results.langchain.jsonl`` and ``results.llamaindex.jsonl``
    give ``langchain`` and ``llamaindex`` (the part all names share, cut at ``.``, ``_`` or
    ``-``, is dropped); files of the same name in different folders are named by their paths."""
    stems = [Path(p).name.removesuffix(".jsonl") for p in paths]
    if len(set(stems)) < len(stems):
        return list(paths)
    if len(stems) < 2:
        return stems
    parts = [re.split(r"(?<=[._-])", s) for s in stems]
    head = 0
    while all(len(p) > head + 1 and p[head] == parts[0][head] for p in parts):
        head += 1
    tail = 0
    while all(len(p) > head + tail + 1 and p[-1 - tail] == parts[0][-1 - tail] for p in parts):
        tail += 1
    names = ["".join(p[head : len(p) - tail]).strip("._-") for p in parts]
    return names if all(names) and len(set(names)) == len(names) else stems


def _names(args: argparse.Namespace) -> list[str]:
    if not args.name:
        return default_names(args.results)
    if len(args.name) != len(args.results):
        raise UserError(
            f"--name: {plural(len(args.name), 'name')} for "
            f"{plural(len(args.results), 'results file')}; "
            "give one name per results file, in order"
        )
    seen: set[str] = set()
    for name in args.name:
        if not name.strip():
            raise UserError("--name: a name is empty")
        if name in seen:
            raise UserError(f"--name: {name!r} is given twice; every run needs its own name")
        seen.add(name)
    return list(args.name)


def _samples(args: argparse.Namespace, names: list[str]) -> dict[str, list[Sample]] | None:
    from ragbridge.adapters.cli.options import read_samples

    if not args.samples:
        return None
    if len(args.samples) not in (1, len(names)):
        raise UserError(
            f"--samples: {plural(len(args.samples), 'file')} for "
            f"{plural(len(names), 'results file')}; give one "
            "samples file for every run, or one per results file in the same order"
        )
    files = args.samples if len(args.samples) == len(names) else args.samples * len(names)
    loaded: dict[str, list[Sample]] = {}
    for path in dict.fromkeys(files):
        loaded[path] = read_samples(path)
    return {name: loaded[path] for name, path in zip(names, files, strict=True)}


def _history(path: str | None) -> list[RunRecord] | None:
    if path is None:
        return None
    from ragbridge.core.monitoring.store_api import is_store_url

    if not is_store_url(path):
        with open(path, "rb") as handle:
            if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise UserError(f"--history {path}: not a monitor store (not an SQLite file)")
    with history_command.open_store(path) as store:
        return store.runs()


def _check_ids(
    evaluations: dict[str, Evaluation], samples: dict[str, list[Sample]] | None, files: list[str]
) -> None:
    """Samples that match none of a run's ids are a likely mix-up of files: say so."""
    if samples is None:
        return
    for (name, ev), path in zip(evaluations.items(), files, strict=True):
        ids = {s.id for s in samples[name]}
        if ev.sample_ids and not ids & set(ev.sample_ids):
            console.warn(
                f"{path}: none of its {plural(len(ev.sample_ids), 'sample id')} is in the samples "
                f"given for it ({plural(len(ids), 'sample')}); are the files paired right?"
            )


def run_report(args: argparse.Namespace) -> int:
    """Check every file first (a missing history must not be created by the store), then
    render and write the report."""
    from ragbridge.adapters.report import render_report
    from ragbridge.core.files import write_text_atomic
    from ragbridge.core.monitoring.store_api import is_store_url
    from ragbridge.core.results.evaluation import Evaluation

    inputs = [check_input(p) for p in [*args.results, *(args.samples or [])]]
    if args.history and not is_store_url(args.history):  # a store's URL is checked when opened
        try:
            inputs.append(check_input(args.history))
        except UserError as exc:
            raise UserError(f"--history {exc}") from None
    check_output(args.out, "--out", inputs=inputs)
    check_distinct({"--out": args.out, "--history": args.history})
    names = _names(args)
    evaluations = {
        name: Evaluation.from_jsonl(path) for name, path in zip(names, args.results, strict=True)
    }
    samples = _samples(args, names)
    _check_ids(evaluations, samples, args.results)
    history = _history(args.history)
    sources: dict[str, str] = {}
    for i, (name, ev) in enumerate(evaluations.items()):
        given = args.samples[i if len(args.samples) > 1 else 0] if args.samples else None
        found = ev.metadata.get("source")
        sources[name] = given or (found if isinstance(found, str) and found else args.results[i])
    if args.title:
        title = args.title
    elif len(names) == 2:
        title = f"ragbridge report: {names[1]} vs {names[0]}"
    else:
        title = f"ragbridge report: {', '.join(names) if len(names) > 1 else args.results[0]}"
    html = render_report(
        evaluations,
        samples=samples,
        title=title,
        generated_by="ragbridge report",
        history=history,
        source=sources,
    )
    write_text_atomic(args.out, html)
    n = len({sid for ev in evaluations.values() for sid in ev.sample_ids})
    runs = f"{len(names)} runs ({', '.join(names)})" if len(names) > 1 else "1 run"
    trend = f"; trends over {plural(len(history), 'recorded run')}" if history is not None else ""
    console.say(f"report of {runs} over {plural(n, 'sample')}{trend}", f"wrote {args.out}")
    return 0
