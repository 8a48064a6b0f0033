"""``ragbridge testset``: write a labelled eval set from documents (issue 17).

``ragbridge testset DOCS --out eval.jsonl --size 50 --judge SPEC`` reads DOCS — a JSONL corpus
(``{"id", "text", "title"?, "metadata"?}`` per line), a folder of ``.txt``/``.md`` files, or the
word ``handbook`` for the shipped demo corpus (a file literally named ``handbook`` is read as
``./handbook``) — and has the judge write questions, reference answers and supporting quotes,
filtered and labelled by `ragbridge.core.testset.generate_testset`.

The life cycle of the scoring commands (`eval_command`), for the same reasons:

1. **check** everything before the first call is paid: DOCS line by line (a bad line is one
   error naming file, line and field, exit 2), every output path, the styles, the judge;
2. **estimate**: the line with the judge calls, prompt tokens and (with ``--price-in/out``)
   cost is printed first; ``--dry-run`` stops there, needing no judge and sending nothing;
3. **generate** with a progress bar on stderr;
4. **finish**: write ``--out`` (and ``--chunks-out``) with whatever was written, then the report
   on stdout, then on stderr what went wrong. Exit 0 when questions were written (a set smaller
   than asked is a warning line, not a failure: every missing question was dropped for a
   counted reason), 1 when none survived, 3 when the judge or embedder proved unusable.

With ``--cache`` an interrupted run resumes: the rerun's prompts are the same, and every call
that had finished is answered from the cache.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import add_cost_options, number, positive_int
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_OK, UserError
from ragbridge.adapters.cli.options import (
    LOCAL_EXTRA,
    _share,
    add_model_options,
    build_embedder,
    build_judge,
    progress,
    settings_from,
)
from ragbridge.adapters.cli.paths import check_cache, check_distinct, check_input, check_output
from ragbridge.adapters.cli.plural import noun, plural

if TYPE_CHECKING:  # imported where used: `ragbridge --help` must not load the core
    from ragbridge.core.judging.engine import Price
    from ragbridge.core.judging.judge import Embedder, Judge
    from ragbridge.core.testset import Chunk, SourceDocument, TestsetReport, TestsetSpec

__all__ = ["DEMO_CORPUS", "register"]

DEMO_CORPUS = "handbook"
"""The DOCS word that names the shipped demo corpus (`ragbridge.adapters.demo.handbook`)."""

# Copies of the core's defaults (`ragbridge.core.testset`): --help must not import the core.
# tests/test_testset_cli.py keeps them equal.
DEFAULT_SIZE = 50
DEFAULT_STYLES = "single=0.5,multi=0.25,reasoning=0.25"
DEFAULT_NO_ANSWER_SHARE = 0.1
DEFAULT_DEDUP_THRESHOLD = 0.92
DEFAULT_CHUNK_CHARS = 2000
DEFAULT_TOP_K = 5
DEFAULT_MAX_ROUNDS = 3


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "testset",
        "Have the judge write questions, reference answers and supporting quotes "
        "from DOCS, in stated style proportions, with a share of no-answer questions (on topic, "
        "checked to be unanswered by the corpus: relevance {}). Quotes not found in their "
        "source, near-duplicate questions and answerable no-answer candidates are dropped, "
        "counted and replaced in further rounds. The output is a ragbridge samples file with "
        "no answers and no contexts, for `ragbridge run`. Exit codes: 0 questions written, "
        "1 none survived, 2 bad arguments or input, 3 the judge or embedder is unusable.",
    )
    parser.add_argument(
        "docs",
        metavar="DOCS",
        help="a JSONL corpus ({id, text, title?, metadata?} per line), a folder of .txt/.md "
        f"files (id = relative path), or the word {DEMO_CORPUS!r} for the shipped demo corpus",
    )
    parser.add_argument("--out", metavar="eval.jsonl", help="where to write the test set")
    parser.add_argument(
        "--size",
        type=positive_int,
        default=DEFAULT_SIZE,
        metavar="N",
        help=f"questions to write, no-answer ones included (default {DEFAULT_SIZE})",
    )
    parser.add_argument(
        "--styles",
        default=DEFAULT_STYLES,
        metavar="STYLE=SHARE,...",
        help="shares of the answerable styles single, multi (two chunks) and reasoning "
        f"(default {DEFAULT_STYLES}); weights are normalised, a style left out gets none",
    )
    parser.add_argument(
        "--no-answer-share",
        type=_share,
        default=DEFAULT_NO_ANSWER_SHARE,
        metavar="SHARE",
        help=f"share of no-answer questions, rounded up (default {DEFAULT_NO_ANSWER_SHARE})",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of every choice (default 0)"
    )
    parser.add_argument(
        "--dedup-threshold",
        type=_similarity,
        default=DEFAULT_DEDUP_THRESHOLD,
        metavar="COSINE",
        help="drop a question whose embedding cosine to a kept one exceeds this "
        f"(default {DEFAULT_DEDUP_THRESHOLD})",
    )
    parser.add_argument(
        "--chunk-chars",
        type=positive_int,
        default=DEFAULT_CHUNK_CHARS,
        metavar="N",
        help="split documents longer than this into chunks DOCID#1, DOCID#2, ... "
        f"(default {DEFAULT_CHUNK_CHARS}; at least 200)",
    )
    parser.add_argument(
        "--relevance",
        choices=("chunk", "document"),
        default="chunk",
        help="label relevance by chunk id (default; equal to the document id for documents "
        "that were not split) or by document id",
    )
    parser.add_argument(
        "--chunks-out",
        metavar="chunks.jsonl",
        help="also write the chunks (the corpus to index so chunk ids match)",
    )
    parser.add_argument(
        "--top-k",
        type=positive_int,
        default=DEFAULT_TOP_K,
        metavar="K",
        help=f"chunks retrieved to check a no-answer candidate (default {DEFAULT_TOP_K})",
    )
    parser.add_argument(
        "--max-rounds",
        type=positive_int,
        default=DEFAULT_MAX_ROUNDS,
        metavar="N",
        help="rounds that replace dropped questions, the first included "
        f"(default {DEFAULT_MAX_ROUNDS})",
    )
    add_model_options(
        parser,
        nli=False,
        judge_help="the model that writes the questions (required unless --dry-run): "
        "openai:MODEL | langchain:MODULE:FACTORY | llamaindex:MODULE:FACTORY | "
        "python:MODULE:FACTORY",
        embedder_help="embedder for pairing chunks, near-duplicates and the no-answer check: "
        "local | local:MODEL | openai:MODEL | langchain:… | llamaindex:… | python:… | hash "
        "(default: local)",
        cache_help="SQLite cache of judge replies and embeddings: a rerun (or a run resumed "
        "after an interrupt) pays only for calls not finished before",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the estimate (calls, prompt tokens, cost) and stop; needs no judge",
    )
    add_cost_options(
        parser,
        price=_price,
        tokens=positive_int,
        tokens_help="completion tokens assumed per call for the estimate's cost (default 150)",
        tokens_metavar="N",
    )
    parser.set_defaults(handler=_run)


def _similarity(text: str) -> float:
    value = _share(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must lie within (0, 1], got {text}")
    return value


_price = number(
    lambda usd: math.isfinite(usd) and usd >= 0, "must be a finite number >= 0, got {text}"
)


# --------------------------------------------------------------------------- 1. check


def _documents(spec: str, skipped: list[str]) -> tuple[list[SourceDocument], Path | None]:
    """The documents DOCS names, and the input path (None for the demo corpus)."""
    from ragbridge.core.testset import DocumentsError, SourceDocument, load_documents

    if spec == DEMO_CORPUS:
        from ragbridge.adapters.demo.handbook import documents

        return [SourceDocument(d.id, d.text, d.title) for d in documents()], None
    path = Path(spec)
    if not path.exists():
        raise UserError(
            f"{spec}: no such file or folder (DOCS is a JSONL corpus, a folder of .txt/.md "
            f"files, or the word {DEMO_CORPUS!r})"
        )
    if path.is_file():
        check_input(spec)
    try:
        return load_documents(path, skipped=skipped), path
    except DocumentsError as exc:
        raise UserError(str(exc)) from None


def _check_paths(args: argparse.Namespace, inputs: list[Path]) -> None:
    if args.out:
        check_output(args.out, "--out", inputs=inputs)
    elif not args.dry_run:
        raise UserError("--out is required: name the file to write the test set to")
    if args.chunks_out:
        check_output(args.chunks_out, "--chunks-out", inputs=inputs)
    if args.cache:
        check_cache(args.cache, inputs=inputs)
    check_distinct({"--out": args.out, "--chunks-out": args.chunks_out, "--cache": args.cache})


def _embedder(args: argparse.Namespace) -> Embedder:
    if args.embedder is not None:
        built = build_embedder(args.embedder, args.base_url)
        assert built is not None
        return built
    try:
        from ragbridge.adapters.local import LocalEmbedder

        return LocalEmbedder()
    except ImportError:
        raise UserError(
            "ragbridge testset needs an embedder and the default one (--embedder local) is "
            f"not installed: {LOCAL_EXTRA}, or pass --embedder SPEC "
            "(e.g. --embedder openai:text-embedding-3-small)"
        ) from None


# --------------------------------------------------------------------------- the command


def _run(args: argparse.Namespace) -> int:
    from ragbridge.core.judging.engine import Price
    from ragbridge.core.testset import TestsetSpec, parse_styles, split_documents
    from ragbridge.core.testset.estimate import estimate_chunks
    from ragbridge.core.testset.plan import Planner

    try:
        styles = parse_styles(args.styles)
    except ValueError as exc:
        raise UserError(f"--styles: {exc}") from None
    if args.chunk_chars < 200:
        raise UserError(f"--chunk-chars must be at least 200, got {args.chunk_chars}")
    skipped: list[str] = []
    documents, source = _documents(args.docs, skipped)
    _check_paths(args, [source] if source is not None and source.is_file() else [])
    # Every field of the spec is the flag of the same name; --styles is parsed above.
    spec = TestsetSpec(
        **{**{f.name: getattr(args, f.name) for f in fields(TestsetSpec)}, "styles": styles}
    )
    try:
        chunks = split_documents(documents, spec.chunk_chars)
    except ValueError as exc:  # ids repeated across a folder cannot happen; a JSONL is checked
        raise UserError(f"{args.docs}: {exc}") from None
    problem = Planner(chunks, spec).problem()
    if problem is not None:
        raise UserError(f"{args.docs}: {problem}")
    price = (
        Price(args.price_in or 0.0, args.price_out or 0.0)
        if args.price_in is not None or args.price_out is not None
        else None
    )
    if skipped:
        console.note(f"{len(skipped)} empty files skipped: {', '.join(skipped[:5])}")
    _note_split(chunks, documents, args)
    est = estimate_chunks(chunks, spec)
    console.say(*est.lines(price, args.completion_tokens))
    if args.dry_run:
        return EXIT_OK
    if args.judge is None:
        raise UserError(
            "ragbridge testset needs a judge to write the questions: pass --judge SPEC "
            "(e.g. --judge openai:gpt-4o-mini); --dry-run estimates without one"
        )
    judge = build_judge(args.judge, args.base_url)
    embedder = _embedder(args)
    return _generate(args, spec, documents, chunks, judge, embedder, price, est.calls)


def _note_split(
    chunks: list[Chunk], documents: list[SourceDocument], args: argparse.Namespace
) -> None:
    split = len({c.document for c in chunks if c.id != c.document})
    if not split or args.relevance != "chunk":
        return
    chunks_hint = (
        f"index {args.chunks_out}"
        if args.chunks_out
        else "write them with --chunks-out and index them"
    )
    console.note(
        f"{split} of {plural(len(documents), 'document')} {noun(split, 'is', 'are')} longer "
        f"than --chunk-chars "
        f"{args.chunk_chars} and were split into chunks DOCID#1, DOCID#2, ...; relevance names "
        f"those chunk ids: {chunks_hint}, or pass --relevance document to label the documents"
    )


def _generate(
    args: argparse.Namespace,
    spec: TestsetSpec,
    documents: list[SourceDocument],
    chunks: list[Chunk],
    judge: Judge | None,
    embedder: Embedder,
    price: Price | None,
    planned: int,
) -> int:
    from ragbridge.core.sample import save_samples
    from ragbridge.core.testset import generate_testset

    options = settings_from(args, judge=judge, embedder=embedder)
    options["price"] = price
    try:
        with progress("writing questions", planned) as advance:
            samples, report = generate_testset(
                documents, **asdict(spec), progress=advance, **options
            )
    except KeyboardInterrupt:
        if args.cache:
            from ragbridge.core.cache.backend import redact_url

            console.note(
                "interrupted: rerun the same command to resume; finished calls are in "
                f"{redact_url(args.cache)}"
            )
        raise
    written: list[str] = []
    if samples:
        save_samples(samples, args.out)
        written.append(args.out)
    if args.chunks_out:
        _save_chunks(chunks, args.chunks_out)
        written.append(args.chunks_out)
    console.say(*report.lines(), *(f"wrote {p}" for p in written))
    return _outcome(report, args)


def _save_chunks(chunks: list[Chunk], path: str) -> None:
    """The chunks in the corpus format DOCS accepts (and a retriever can index)."""
    import json

    from ragbridge.core.files import write_text_atomic

    lines = [
        json.dumps(
            {
                "id": c.id,
                "text": c.text,
                **({"title": c.title} if c.title else {}),
                "metadata": {"document": c.document, "start": c.start},
            },
            ensure_ascii=False,
        )
        for c in chunks
    ]
    write_text_atomic(path, "".join(f"{line}\n" for line in lines))


def _outcome(report: TestsetReport, args: argparse.Namespace) -> int:
    if report.aborted:
        console.error(f"stopped early: {report.aborted}")
        return EXIT_ABORTED
    if not report.total:
        reasons = (
            f"{plural(report.passages_dropped, 'quote')} not found, "
            f"{plural(report.duplicates_dropped, 'near-duplicate')}, "
            f"{plural(report.no_answer_rejected, 'answerable no-answer candidate')}, "
            f"{plural(report.failed_calls, 'failed call')}"
        )
        console.error(f"no question survived the checks ({reasons}); nothing written")
        return EXIT_FAILED
    if report.shortfall:
        missing = ", ".join(f"{s} {n}" for s, n in report.shortfall.items())
        console.warn(
            f"wrote {report.total} of {plural(report.requested, 'question')} (missing: {missing}) "
            f"after {plural(report.rounds, 'round')}; raise --max-rounds, "
            "or give more documents"
        )
    if report.no_answer_share + 1e-9 < args.no_answer_share:
        console.warn(
            f"the no-answer share is {report.no_answer_share:.1%}, below the "
            f"{args.no_answer_share:.0%} asked for"
        )
    return EXIT_OK
