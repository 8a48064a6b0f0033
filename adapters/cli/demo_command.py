"""``ragbridge demo``: the whole job on the shipped handbook, offline, in about a minute.

Two real pipelines over the same fictional handbook — a LangChain retriever chain and a
LlamaIndex query engine, both on the packaged MiniLM embeddings with an extractive answerer
standing in for the LLM — are run on the 42 labelled questions with their retrievals captured by
the adapters, then scored with the ranking measures and the offline generation measures. The
two pipelines are compared sample by sample (paired tests), the same questions go through
``langsmith.evaluate`` with ragbridge's evaluators on an offline client, and the eval set is
written as a DeepEval dataset and a RAGAS dataset. Everything lands in ``--out`` with the HTML
report; nothing touches the network. Each pipeline is built once, and every vector (handbook,
questions, answers) goes through the embedding cache in ``--out``, so a rerun in the same folder
loads no model at all. A rerun also reads back LlamaIndex's chunks of the handbook (its own
ingestion cache) and the ragbridge vs RAGAS comparison while nothing they depend on changed, so
it imports neither nltk nor RAGAS, and says so on stderr (`ragbridge.adapters.demo.reuse`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters._frameworks import framework_noise_off
from ragbridge.adapters._hub import disable_hub
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.console import note
from ragbridge.adapters.cli.options import progress, summary_lines
from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.sample import Sample

RETRIEVAL = ["hit_rate@4", "recall@4", "mrr", "ndcg@4"]
GENERATION = ["faithfulness:offline", "answer_relevance:offline", "context_recall:offline"]


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "demo",
        "Build a LangChain and a LlamaIndex pipeline over the shipped handbook, "
        "capture and score them offline, compare them, and write results, DeepEval and RAGAS "
        "files, a LangSmith experiment and the HTML report into --out.",
    )
    parser.add_argument(
        "--out",
        default="ragbridge-demo",
        metavar="DIR",
        help="folder for everything the demo writes (default: ./ragbridge-demo/)",
    )
    parser.add_argument(
        "--cache",
        metavar="PATH",
        help="SQLite embedding cache (default: DIR/cache.sqlite; a rerun is then faster)",
    )
    parser.set_defaults(handler=run_demo)


def _metrics() -> list[Any]:
    from ragbridge.adapters.strings import TokenF1

    return [*RETRIEVAL, *GENERATION, "answer_similarity", TokenF1()]


def run_demo(args: argparse.Namespace) -> int:
    disable_hub()  # the demo loads only the packaged model
    from ragbridge.adapters.demo import handbook
    from ragbridge.adapters.demo.pipelines import (
        CachedEmbedder,
        default_embedder,
        langchain_pipeline,
        run_langchain_demo,
        run_llamaindex_demo,
    )
    from ragbridge.adapters.demo.reuse import KeptIngestion
    from ragbridge.core.cache.disk import Cache
    from ragbridge.core.sample import save_samples
    from ragbridge.core.scoring.runner import evaluate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    questions = handbook.questions()
    print(
        f"{handbook.COMPANY} handbook: {len(handbook.documents())} documents, "
        f"{len(questions)} questions ({sum(1 for q in questions if q.relevance == {})} "
        "with no answer in the handbook)"
    )
    with Cache(args.cache or out / "cache.sqlite") as cache:
        embedder = default_embedder()
        # The pipelines embed the handbook and the questions through the same cache as the
        # scoring: a rerun in the same folder computes no vector again.
        cached = CachedEmbedder(embedder, cache)
        chain = langchain_pipeline(cached)  # built once: the LangSmith step runs it again
        runs: dict[str, list[Sample]] = {}
        reused: list[str] = []
        with progress("running pipelines", 2) as advance:
            runs["langchain"] = run_langchain_demo(questions, embedder=cached, chain=chain)
            advance(1, 2)
            chunks = KeptIngestion(cache)
            runs["llamaindex"] = run_llamaindex_demo(
                questions, embedder=cached, ingestion_cache=chunks.cache
            )
            advance(2, 2)
        if chunks.save():
            reused.append(
                "LlamaIndex's chunks of the handbook, from its IngestionCache (same documents "
                "and splitter): nltk's sentence splitter did not run"
            )
        written: list[Path] = []
        evaluations: dict[str, Evaluation] = {}
        for name, samples in runs.items():
            with progress(f"scoring {name}", len(samples)) as advance:
                evaluations[name] = evaluate(
                    samples, _metrics(), embedder=embedder, cache=cache, progress=advance
                )
            written += [out / f"samples.{name}.jsonl", out / f"results.{name}.jsonl"]
            save_samples(samples, written[-2])
            evaluations[name].to_jsonl(written[-1])
            print(f"\n{name} pipeline")
            print("\n".join("  " + line for line in summary_lines(evaluations[name])))
            print("  " + _danger(evaluations[name]))
        print("\n" + "\n".join(_pipeline_comparison(evaluations)))
        comparison, kept = _framework_comparison(runs["langchain"], embedder, cache)
        if kept:
            reused.append(
                "the ragbridge vs RAGAS comparison of these same langchain samples: RAGAS did "
                "not run"
            )
        if comparison is not None:
            written.append(out / "comparison.json")
            comparison.to_json(written[-1])
        with _framework_console():
            written += _framework_files(out, runs["langchain"])
            written.append(_langsmith_experiment(out, questions, embedder, cache, chain))
    from ragbridge.adapters.report import write_report

    report = write_report(
        out / "report.html",
        evaluations,
        samples=runs,
        comparison=comparison,
        title=f"ragbridge demo: {handbook.COMPANY} handbook, LangChain vs LlamaIndex",
        generated_by="ragbridge demo",
        source={name: str(out / f"samples.{name}.jsonl") for name in runs},
    )
    written.append(report)
    print("\nwrote:")
    for path in written:
        print(f"  {path}")
    print(f"embedding cache: {cache.path} (a rerun with the same cache computes no vector)")
    for what in reused:  # how, not what: stdout is the same as the first run's
        note(f"reused from {cache.path} (same ragbridge code and installed packages): {what}")
    return 0


@contextlib.contextmanager
def _framework_console() -> Iterator[None]:
    """DeepEval and LangSmith print banners on stdout, a progress bar and beta warnings on
    stderr; the demo's own output stays readable. What they printed is shown if the step fails.
    """
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with (
            framework_noise_off(),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            yield
    except BaseException:
        sys.stderr.write(stderr.getvalue())
        raise


def _danger(evaluation: Evaluation) -> str:
    from ragbridge.core.results.diagnosis import Quadrant, diagnose

    d = diagnose(evaluation, retrieval="recall@4", generation="faithfulness")
    risky = d.in_quadrant(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER)
    ids = ", ".join(r.sample_id for r in risky[:5]) + (" …" if len(risky) > 5 else "")
    return (
        f"bad retrieval, good-looking answer (recall@4 < 0.5, faithfulness >= 0.5): "
        f"{len(risky)}{' — ' + ids if risky else ''}"
    )


def _pipeline_comparison(evaluations: dict[str, Evaluation]) -> list[str]:
    from ragbridge.core.results.stats import compare

    a, b = "langchain", "llamaindex"
    lines = [f"{b} vs {a} (paired over the samples both scored)"]
    for metric, c in compare(evaluations[a], evaluations[b]).items():
        if c.diff is None or c.mean_a is None or c.mean_b is None:
            continue
        ci = "" if c.ci_low is None else f" [{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
        p = "" if c.p_value is None else f" p={c.p_value:.3f}"
        lines.append(f"  {metric:<18} {c.mean_a:.3f} → {c.mean_b:.3f}  diff {c.diff:+.3f}{ci}{p}")
    return lines


def _framework_comparison(samples: list[Sample], embedder: Any, cache: Any) -> tuple[Any, bool]:
    """ragbridge vs RAGAS on the measures both compute without a judge (the demo has none),
    and whether it was read back from the cache (`ragbridge.adapters.demo.reuse`: the same
    samples, ragbridge code and installed packages as the run that computed it)."""
    from pydantic import ValidationError

    from ragbridge.adapters.demo.reuse import Kept, comparison_inputs
    from ragbridge.core.results.crosscheck import CrossComparison

    kept = Kept(cache, "comparison", comparison_inputs(samples, embedder.model))
    text = kept.load()
    comparison: CrossComparison | None = None
    if text is not None:
        with contextlib.suppress(ValidationError):
            comparison = CrossComparison.model_validate_json(text)
    reused = comparison is not None
    if comparison is None:
        from ragbridge.adapters.compare import compare_frameworks_on

        with progress("comparing frameworks", len(samples)) as advance:
            run = compare_frameworks_on(samples, embedder=embedder, cache=cache, progress=advance)
        comparison = run.comparison
        kept.save(comparison.model_dump_json())
    print("\nragbridge vs RAGAS on the langchain samples, no judge (compare --judge for all):")
    for m in comparison.measures:
        for p in m.pairs:
            rho = "—" if p.spearman is None else f"{p.spearman:+.2f}"
            mad = "—" if p.mean_abs_diff is None else f"{p.mean_abs_diff:.3f}"
            edge = f", {plural(len(m.edge_cases), 'edge case')}" if m.edge_cases else ""
            print(f"  {m.measure:<22} spearman {rho}, mean |diff| {mad} over {p.n}{edge}")
    skipped = plural(len(comparison.skipped), "framework/measure pair")
    print(f"  skipped {skipped} that need a judge or data")
    return comparison, reused


def _framework_files(out: Path, samples: list[Sample]) -> list[Path]:
    """The eval set as a RAGAS dataset (RAGAS's JSONL form is plain JSON: written without
    importing RAGAS, `ragbridge.adapters.ragas.rows`) and a DeepEval dataset (written by
    DeepEval's own ``EvaluationDataset.save_as``)."""
    from ragbridge.adapters.ragas.rows import to_ragas_jsonl

    ragas_path = out / "ragas_dataset.jsonl"
    to_ragas_jsonl(samples, ragas_path)
    deepeval_path = (out / "deepeval_test_cases.json").resolve()  # before the chdir below
    here = Path.cwd()
    os.chdir(out)  # DeepEval keeps its state folder in the working directory
    try:
        from ragbridge.adapters.deepeval import save_test_cases

        save_test_cases(samples, deepeval_path)
    finally:
        os.chdir(here)
    return [ragas_path, out / deepeval_path.name]


def _langsmith_experiment(
    out: Path, questions: list[Sample], embedder: Any, cache: Any, chain: Any
) -> Path:
    """The LangChain pipeline (``chain``, already built) as a ``langsmith.evaluate`` target,
    scored by our evaluators."""
    import json

    from langsmith import evaluate

    from ragbridge.adapters.langsmith import evaluators, offline_client, to_examples

    def target(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"answer": chain.invoke(inputs["question"])}

    results = evaluate(
        target,
        data=to_examples(questions),
        evaluators=evaluators(["recall@4", "faithfulness:offline"], embedder=embedder, cache=cache),
        upload_results=False,
        client=offline_client(),
        max_concurrency=0,
    )
    path = out / "langsmith_experiment.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for row in results:
            feedback = {
                r.key: {"score": r.score, "comment": r.comment}
                for r in row["evaluation_results"]["results"]
            }
            example = row["example"]
            record = {
                "example_id": str(example.id),
                "sample_id": (example.metadata or {}).get("ragbridge_id"),
                "question": (example.inputs or {}).get("question"),
                "answer": (row["run"].outputs or {}).get("answer"),
                "feedback": feedback,
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
