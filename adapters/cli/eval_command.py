"""``ragbridge eval | run | langsmith | estimate``: score samples from a file, a pipeline or traces.

All three scoring commands end the same way — a summary table on stdout, the results JSONL
(``--out``) and the HTML report (``--report``) — so they share `score_and_report`. Progress goes
to stderr, so stdout stays a clean table for pipes and CI logs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ragbridge.adapters.cli.options import (
    UserError,
    add_scoring_options,
    build_embedder,
    build_judge,
    metrics_for,
    progress,
    read_samples,
    self_judging_warning,
    split_names,
    summary_lines,
)
from ragbridge.core.results import Evaluation
from ragbridge.core.sample import Sample, save_samples


def register(sub: Any) -> None:
    ev: argparse.ArgumentParser = sub.add_parser(
        "eval",
        help="score a JSONL eval set (offline providers unless --judge)",
        description="Score the samples of a ragbridge JSONL file. Without --judge, metrics use "
        "their offline (embedding/lexical) provider.",
    )
    ev.add_argument("data", metavar="DATA.jsonl", help="ragbridge samples, one JSON per line")
    _outputs(ev)
    add_scoring_options(ev)
    ev.set_defaults(handler=run_eval)

    run: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="run a LangChain chain or LlamaIndex engine over an eval set, then score it",
        description="Import PIPELINE (MODULE:OBJECT; a LangChain runnable or a LlamaIndex "
        "query engine, or a no-argument function returning one), run it on every question of "
        "DATA.jsonl while capturing what it retrieves, and score the result.",
    )
    run.add_argument("pipeline", metavar="PIPELINE", help="MODULE:OBJECT")
    run.add_argument("data", metavar="DATA.jsonl", help="questions (and labels) to run")
    run.add_argument(
        "--save-samples", metavar="PATH", help="also write the captured samples as JSONL"
    )
    _outputs(run)
    add_scoring_options(run)
    run.set_defaults(handler=run_pipeline)

    ls: argparse.ArgumentParser = sub.add_parser(
        "langsmith",
        help="score runs exported from LangSmith (JSON or JSONL)",
        description="Rebuild run trees from a LangSmith export, read question, answer and the "
        "retriever child runs' documents from each root run, and score them.",
    )
    ls.add_argument("runs", metavar="RUNS.jsonl", help="runs exported from LangSmith")
    ls.add_argument("--retriever", help="name of the retriever run to read contexts from")
    ls.add_argument(
        "--save-samples", metavar="PATH", help="also write the extracted samples as JSONL"
    )
    _outputs(ls)
    add_scoring_options(ls)
    ls.set_defaults(handler=run_langsmith)

    est: argparse.ArgumentParser = sub.add_parser(
        "estimate",
        help="dry run: judge calls, tokens and cost a judge evaluation would spend",
        description="Count the judge calls and prompt tokens the metrics would spend on "
        "DATA.jsonl (a cold run, no cache), without sending anything.",
    )
    est.add_argument("data", metavar="DATA.jsonl")
    est.add_argument(
        "--metrics",
        default="faithfulness,answer_relevance,context_precision,context_recall",
        help="comma-separated judge metrics (default: the four RAG metrics)",
    )
    est.add_argument("--price-in", type=float, help="USD per million prompt tokens")
    est.add_argument("--price-out", type=float, help="USD per million completion tokens")
    est.add_argument(
        "--completion-tokens",
        type=int,
        default=150,
        help="completion tokens assumed per call for the cost (default 150)",
    )
    est.set_defaults(handler=run_estimate)


def _outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="results.jsonl", help="write every score as JSONL")
    parser.add_argument("--report", metavar="report.html", help="write the HTML report")


def score_and_report(args: argparse.Namespace, samples: list[Sample]) -> Evaluation:
    """Score ``samples`` as the options say; print the summary; write --out and --report."""
    from ragbridge.core.runner import evaluate

    judge = build_judge(args.judge, args.base_url)
    embedder = build_embedder(args.embedder, args.base_url)
    metrics = metrics_for(split_names(args.metrics), have_judge=judge is not None)
    warning = self_judging_warning(samples, judge)
    if warning:
        print(warning, file=sys.stderr)
    with progress("scoring", len(samples)) as advance:
        evaluation = evaluate(
            samples,
            metrics,
            judge=judge,
            embedder=embedder,
            cache=args.cache,
            max_concurrency=args.concurrency,
            progress=advance,
        )
    print(f"{_count(len(samples), 'sample')}, {_count(len(metrics), 'metric')}", end="")
    stats = evaluation.metadata.get("judge_stats")
    if stats:
        usage = evaluation.usage()
        print(
            f"; judge {evaluation.metadata.get('judge_model')}: {stats['calls']} calls "
            f"({stats['cached']} cached), {usage.prompt_tokens:,} prompt tokens",
            end="",
        )
    print()
    print("\n".join(summary_lines(evaluation)))
    if args.out:
        evaluation.to_jsonl(args.out)
        print(f"wrote {args.out}")
    if args.report:
        from ragbridge.adapters.report import write_report

        write_report(args.report, evaluation, samples=samples, generated_by="ragbridge eval")
        print(f"wrote {args.report}")
    return evaluation


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def run_eval(args: argparse.Namespace) -> int:
    score_and_report(args, read_samples(args.data))
    return 0


def run_pipeline(args: argparse.Namespace) -> int:
    from ragbridge.adapters.cli.options import _made

    pipeline = _made(args.pipeline, "PIPELINE")
    questions = read_samples(args.data)
    samples = _run_any(pipeline, questions, args.pipeline)
    if args.save_samples:
        save_samples(samples, args.save_samples)
        print(f"wrote {args.save_samples}")
    score_and_report(args, samples)
    return 0


def _run_any(pipeline: Any, questions: list[Sample], spec: str) -> list[Sample]:
    module = type(pipeline).__module__
    with progress("running pipeline", len(questions)) as advance:
        if module.startswith("llama_index") or hasattr(pipeline, "aquery"):
            from ragbridge.adapters.llamaindex import run_query_engine

            return run_query_engine(pipeline, questions, progress=advance)
        if module.startswith("langchain") or hasattr(pipeline, "abatch"):
            from ragbridge.adapters.langchain import run_pipeline as run_chain

            return run_chain(pipeline, questions, progress=advance)
    raise UserError(
        f"{spec} is a {type(pipeline).__name__}, neither a LangChain runnable nor a "
        "LlamaIndex query engine"
    )


def run_langsmith(args: argparse.Namespace) -> int:
    path = Path(args.runs)
    if not path.exists():  # before the import: a typo should not read as a missing extra
        raise UserError(f"{args.runs}: no such file")
    from ragbridge.adapters.langsmith import load_runs, samples_from_runs

    runs = load_runs(path)
    if not runs:
        raise UserError(f"{args.runs}: holds no runs")
    samples = samples_from_runs(runs, retriever=args.retriever)
    if args.save_samples:
        save_samples(samples, args.save_samples)
        print(f"wrote {args.save_samples}")
    score_and_report(args, samples)
    return 0


def run_estimate(args: argparse.Namespace) -> int:
    from ragbridge.core.engine import Price
    from ragbridge.core.runner import estimate, resolve_metrics

    samples = read_samples(args.data)
    try:
        metrics = resolve_metrics(split_names(args.metrics))
    except (KeyError, ValueError) as exc:
        raise UserError(str(exc).strip("'\"")) from None
    est = estimate(samples, metrics)
    print(f"{est.samples} samples, metrics: {', '.join(m.name for m in metrics)}")
    print(f"judge calls: {est.calls} ({est.calls_per_sample:.1f} per sample)")
    print(f"prompt tokens: ~{est.prompt_tokens:,}")
    for template, calls in sorted(est.by_template.items()):
        print(f"  {template}: {calls} calls")
    if args.price_in is not None or args.price_out is not None:
        price = Price(args.price_in or 0.0, args.price_out or 0.0)
        cost = est.cost(price, args.completion_tokens)
        print(f"cost: ~${cost:.4f} (at {args.completion_tokens} completion tokens per call)")
    return 0
