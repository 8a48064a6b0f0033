"""``ragbridge eval | run | langsmith | estimate``: score samples from a file, a pipeline or traces.

The three scoring commands share one life cycle, so they cannot drift apart:

1. **check** (`prepare`): the input file, every output path (``--out``, ``--report``,
   ``--cache``, ``--save-samples``), the judge, the metrics, the embedder — each problem one line
   and exit 2, before the first judge call is paid;
2. **score**: ``eval`` streams its file into `evaluate` (memory flat in the file size: one
   validating pass, then a second pass that scores); unless ``--report`` needs them all, the
   results are not held either: they stream to ``--out`` as they are scored and a `Tally`
   keeps what the summary and the failure bar need; Ctrl-C still writes the finished ones;
3. **finish** (`finish`): write ``--out`` and ``--report`` *first* (a closed stdout must not cost
   the results), then print the summary on stdout, then say on stderr why the run failed, if it
   did, then record the run in ``--history`` (with its exit code: a run that failed its bar is
   history too; a usage error never gets this far), and return the exit code (see
   `ragbridge.adapters.cli.errors`).

``--history PATH`` keeps the run in a monitor store (`ragbridge.core.monitoring.history`):
summary, settings, git commit and every per-sample cell. A streamed ``eval`` hands each cell to
a `RunCellWriter` as it is scored (batched into the store, never held), so memory stays flat
there too; an interrupted run is not recorded and its cells are deleted. The run's id goes into
the results header (``history_run_id``), so ``gate --history`` can name the run it checked.

Progress goes to stderr, so stdout stays a clean table for pipes and CI logs.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import (
    cluster_command,
    console,
    conversations_command,
    cores_command,
    criteria_command,
    history_command,
    recording,
    repeat_command,
    split_command,
)
from ragbridge.adapters.cli.argtypes import add_cost_options
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.default_metrics import DefaultMetrics, FieldCounts, fit_default
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.options import (
    DEFAULT_METRICS,
    SampleScan,
    add_generator_option,
    add_scoring_options,
    build_judge,
    build_nli,
    choose_metrics,
    count_own_answers,
    embedder_for,
    own_answers_warning,
    progress,
    read_samples,
    scan_samples,
    self_judged,
    settings_from,
    split_names,
    summary_lines,
)
from ragbridge.adapters.cli.outcome import report_outcome
from ragbridge.adapters.cli.outputs import Written, write_failure_code
from ragbridge.adapters.cli.paths import check_cache, check_distinct, check_input, check_output
from ragbridge.adapters.cli.plural import noun, plural
from ragbridge.adapters.cli.recording import history_config

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds these parsers without them
    from ragbridge.core.criteria import CriteriaFile
    from ragbridge.core.judging.judge import Embedder, EntailmentModel, Judge
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.monitoring.history import RunCellWriter
    from ragbridge.core.results.evaluation import Evaluation, Score
    from ragbridge.core.results.tally import Tally
    from ragbridge.core.sample import Sample
    from ragbridge.core.scoring.cores import Share
    from ragbridge.core.scoring.runner import Estimate, OnResult

__all__ = [
    "DEFAULT_METRICS",
    "LANGSMITH_METRICS",
    "Plan",
    "finish",
    "finish_file",
    "history_config",  # where the history keeps a run's settings (`recording`)
    "prepare",
    "register",
]

LANGSMITH_METRICS = "faithfulness,answer_relevance"
"""What a runs export can support: runs hold question, answer and contexts, never labels."""

ESTIMATE_METRICS = "faithfulness,answer_relevance,context_precision,context_recall"
"""What ``estimate`` prices when neither ``--metrics`` nor ``--criteria`` says."""


def register(sub: Any) -> None:
    ev = add_command(
        sub,
        "eval",
        "Score the samples of a ragbridge JSONL file. Without --judge, metrics use "
        "their offline (embedding/lexical) provider. Exit codes: 0 passed, 1 a metric failed "
        "its bar (--max-failed-share), 2 bad arguments or input, 3 judge or embedder unusable "
        "(the run stopped early, or every call failed for that one reason), 130 interrupted.",
    )
    ev.add_argument(
        "data",
        metavar="DATA.jsonl",
        help="ragbridge samples, one JSON per line; or conversations (lines with 'turns'), "
        "scored turn by turn and as whole conversations",
    )
    _outputs(ev)
    add_scoring_options(ev)
    conversations_command.add_conversation_options(ev)
    add_generator_option(ev)
    criteria_command.add_criteria_option(ev)
    ev.set_defaults(metrics=DefaultMetrics(DEFAULT_METRICS))  # fitted to the file's fields
    split_command.add_heldout_options(ev)
    repeat_command.add_repeat_option(ev)
    cluster_command.add_cluster_options(ev)
    cores_command.add_processes_option(ev)
    ev.set_defaults(handler=run_eval)

    run = add_command(
        sub,
        "run",
        "Import PIPELINE (MODULE:OBJECT; a LangChain runnable or a LlamaIndex "
        "query engine, or a no-argument function returning one), run it on every question of "
        "DATA.jsonl while capturing what it retrieves, and score the result. DATA.jsonl is "
        "checked before the pipeline is imported. A conversations file is a script: its user "
        "turns are replayed through a chat pipeline (a LlamaIndex chat engine, a LangChain "
        "RunnableWithMessageHistory or history-taking chain, a LangGraph message graph).",
    )
    run.add_argument("pipeline", metavar="PIPELINE", help="MODULE:OBJECT")
    run.add_argument(
        "data", metavar="DATA.jsonl", help="questions (and labels) to run, or a script"
    )
    run.add_argument(
        "--save-samples",
        metavar="PATH",
        help="also write the captured samples (for a script: the captured conversations) as JSONL",
    )
    _outputs(run)
    add_scoring_options(run)
    conversations_command.add_conversation_options(run, chat=True)
    add_generator_option(run)
    criteria_command.add_criteria_option(run)
    run.set_defaults(metrics=DefaultMetrics(DEFAULT_METRICS))  # fitted to the questions' fields
    split_command.add_heldout_options(run)
    cluster_command.add_cluster_options(run)
    run.set_defaults(handler=run_pipeline)

    ls = add_command(
        sub,
        "langsmith",
        "Rebuild run trees from a LangSmith export, read question, answer and the "
        "retriever child runs' documents from each root run, and score them. Runs carry no "
        "reference answers or relevance labels (those live on dataset examples), so the "
        f"default metrics are {LANGSMITH_METRICS}.",
    )
    ls.add_argument("runs", metavar="RUNS.jsonl", help="runs exported from LangSmith")
    ls.add_argument("--retriever", help="name of the retriever run to read contexts from")
    ls.add_argument(
        "--save-samples", metavar="PATH", help="also write the extracted samples as JSONL"
    )
    _outputs(ls)
    add_scoring_options(ls, default_metrics=LANGSMITH_METRICS)
    ls.set_defaults(metrics=DefaultMetrics(LANGSMITH_METRICS))  # told apart from a typed list
    add_generator_option(ls)
    criteria_command.add_criteria_option(ls)
    cluster_command.add_cluster_options(ls)
    ls.set_defaults(handler=run_langsmith)

    est = add_command(
        sub,
        "estimate",
        "Count the judge calls and prompt tokens the metrics would spend on "
        "DATA.jsonl (a cold run, no cache), without sending anything.",
    )
    est.add_argument("data", metavar="DATA.jsonl")
    est.add_argument(
        "--metrics",
        default=DefaultMetrics(ESTIMATE_METRICS),
        help=f"comma-separated judge metrics (default: the four RAG metrics, {ESTIMATE_METRICS}; "
        "with --criteria, the criteria alone)",
    )
    criteria_command.add_criteria_option(est)
    conversations_command.add_conversation_options(est)
    add_cost_options(
        est,
        price=float,
        tokens=int,
        tokens_help="completion tokens assumed per call for the cost (default 150)",
    )
    est.set_defaults(handler=run_estimate)


def _outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="results.jsonl", help="write every score as JSONL")
    parser.add_argument("--report", metavar="report.html", help="write the HTML report")
    history_command.add_history_option(parser)


# --------------------------------------------------------------------------- 1. check


@dataclass(frozen=True)
class Plan:
    """Everything a scoring run needs, decided (and checked) before the first call."""

    metrics: list[Metric]
    judge: Judge | None
    embedder: Embedder | None
    nli: EntailmentModel | None
    note: str | None
    scan: SampleScan | None = None
    """The validating pass over the input file, when `prepare` made it (``eval``)."""


def check_paths(args: argparse.Namespace, inputs: list[Path]) -> None:
    """Every output path the command will write: a file in an existing, writable folder."""
    flags = {
        "--out": getattr(args, "out", None),
        "--report": getattr(args, "report", None),
        "--save-samples": getattr(args, "save_samples", None),
    }
    for flag, path in flags.items():
        if path:
            check_output(path, flag, inputs=inputs)
    if getattr(args, "cache", None):
        check_cache(args.cache, inputs=inputs)
    history = getattr(args, "history", None)
    if history:
        history_command.check_history(history, inputs=inputs)
    check_distinct({**flags, "--cache": getattr(args, "cache", None), "--history": history})


def prepare(
    args: argparse.Namespace,
    inputs: list[Path],
    *,
    scan: Path | None = None,
    fields: FieldCounts | None = None,
    pick: Callable[[Judge | None, CriteriaFile | None], list[str]] | None = None,
) -> Plan:
    """Check the outputs and build judge, metrics and embedder; nothing is sent yet.

    ``scan`` is a samples file to validate here (after the judge, whose model the scan looks
    for among the answers' generators), ``fields`` the field counts of samples already read:
    either fits the default metric set to the data (`default_metrics`), before the embedder is
    chosen for the metrics that are left. ``pick`` names the metrics instead, given the judge
    and the criteria (a conversations file: `conversations_command`).
    """
    check_paths(args, inputs)
    criteria = criteria_command.criteria_of(args)  # a bad file is refused before the judge
    judge = build_judge(args.judge, args.base_url)
    generator = getattr(args, "generator_model", None)
    scanned = scan_samples(str(scan), judge, generator) if scan is not None else None
    if pick is not None:
        names = pick(judge, criteria)
    else:
        names = _metric_names(args, scanned.fields if scanned is not None else fields, criteria)
    metrics, note = choose_metrics(
        names, have_judge=judge is not None, have_nli=args.nli is not None
    )
    metrics = conversations_command.with_turn_support(
        criteria_command.bind(metrics, criteria), args
    )
    embedder = embedder_for(args.embedder, args.base_url, metrics)
    return Plan(metrics, judge, embedder, build_nli(args.nli), note, scanned)


def _metric_names(
    args: argparse.Namespace, fields: FieldCounts | None, criteria: CriteriaFile | None = None
) -> list[str]:
    """``--metrics`` as given; the default set fitted to ``fields``, said on one line; with
    ``--criteria``, the file's criteria beside them (alone when ``--metrics`` was not given)."""
    asked = not isinstance(args.metrics, DefaultMetrics)
    if criteria is not None:
        names = split_names(args.metrics) if asked else []
        return criteria_command.criteria_names(names, criteria, asked=asked)
    names = split_names(args.metrics)
    if fields is None or asked:
        return names
    try:
        choice = fit_default(names, fields)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if choice.line:
        console.note(choice.line)
    return choice.names


# --------------------------------------------------------------------------- 2. score


def score(
    args: argparse.Namespace,
    plan: Plan,
    samples: Iterable[Sample],
    total: int,
    *,
    on_result: OnResult | None = None,
    metadata: dict[str, Any] | None = None,
    data: Path | None = None,
) -> Evaluation:
    """Run the metrics; with ``on_result`` the cells go there and are not kept.

    ``metadata`` is added to the run's own (e.g. the held-out check of the input file), so it
    reaches the results file's header. With ``--dask``, ``data`` (the file ``samples`` come
    from) is scored on the cluster instead (`cluster_command`).
    """
    from ragbridge.core.scoring.runner import evaluate

    if plan.note:
        console.note(plan.note)
    if getattr(args, "dask", None) is not None and data is not None:
        evaluation = cluster_command.score_on_cluster(
            args, plan.metrics, data, total, on_result=on_result
        )
        evaluation.metadata.update(metadata or {})
        return evaluation
    with progress("scoring", total) as advance:
        evaluation = evaluate(
            samples,
            plan.metrics,
            **settings_from(args, judge=plan.judge, embedder=plan.embedder, nli=plan.nli),
            progress=advance,
            on_result=on_result,
            keep=on_result is None,
            generator_model=getattr(args, "generator_model", None),
        )
    evaluation.metadata.update(metadata or {})
    return evaluation


# --------------------------------------------------------------------------- 3. finish


def finish(
    args: argparse.Namespace,
    evaluation: Evaluation,
    *,
    n_samples: int,
    samples: Callable[[], Iterable[Sample]],
    command: str,
    streamed: Tally | None = None,
    write_problems: list[str] | None = None,
    cells: RunCellWriter | None = None,
    records: str | None = None,
    more: Sequence[str] = (),
) -> int:
    """Write the files, print the summary, say why the run failed, record the run in
    ``--history``; return the exit code.

    ``streamed`` is the tally of a run whose cells went straight to ``--out`` (already
    written); otherwise ``--out`` is written here from ``evaluation``. ``cells`` is the writer
    that streamed them into the ``--history`` store (None there: the store could not take
    them, which ``write_problems`` says). ``records`` says what was scored when it was not
    ``n_samples`` samples (``"3 conversations (7 turns)"``); ``more`` are lines printed after
    the summary (a conversations run's roll-ups).
    """
    from ragbridge.core.results.tally import Tally

    files = _write_outputs(args, evaluation, samples, command, streamed, write_problems or [])
    tally = streamed if streamed is not None else Tally.of(evaluation)
    head = f"{records or plural(n_samples, 'sample')}, {plural(len(tally.metrics), 'metric')}"
    stats = evaluation.metadata.get("judge_stats")
    if stats:
        usage = tally.usage()
        # cached calls as the cells record them: replies from the cache and whole kept Scores
        lost = (evaluation.metadata.get("cluster") or {}).get("lost")  # a lower bound then
        head += (
            f"; judge {evaluation.metadata.get('judge_model')}: {'at least ' if lost else ''}"
            f"{plural(stats['calls'], 'call')} "
            f"({usage.cached_calls} cached), {usage.prompt_tokens:,} prompt "
            f"{noun(usage.prompt_tokens, 'token')}"
        )
    reused = evaluation.metadata.get("results_reused") or {}
    if reused.get("hits"):
        head += f"; {plural(reused['hits'], 'score')} reused from the cache"
    console.say(head, *summary_lines(tally), *more, *files.lines())
    code = report_outcome(
        evaluation, max_failed_share=args.max_failed_share, source=command, tally=tally
    )
    code = files.settle(code, write_failure_code(evaluation))
    if getattr(args, "history", None) and (streamed is None or cells is not None):
        code = recording.record_history(
            args, evaluation, command=command, code=code, n_samples=n_samples,
            tally=streamed, cells=cells, samples=samples,
        )  # fmt: skip
    return code


def finish_file(
    args: argparse.Namespace,
    evaluation: Evaluation,
    data: Path,
    count: int,
    *,
    streamed: Tally | None = None,
    write_problems: list[str] | None = None,
    cells: RunCellWriter | None = None,
) -> int:
    """`finish` of an ``eval`` of the file ``data`` (``count`` samples): what ``--report``
    shows is read from the file again, not held through the run."""
    from ragbridge.core.sample import load_samples

    return finish(
        args,
        evaluation,
        n_samples=count,
        samples=lambda: load_samples(data),
        command="eval",
        streamed=streamed,
        write_problems=write_problems,
        cells=cells,
    )


def _write_outputs(
    args: argparse.Namespace,
    evaluation: Evaluation,
    samples: Callable[[], Iterable[Sample]],
    command: str,
    streamed: Tally | None,
    problems: list[str],
) -> Written:
    """Write ``--out`` (unless the cells streamed there already) and ``--report``.

    ``problems`` are what went wrong while streaming (``--out``, ``--history``): they come
    first, and a streamed ``--out`` that failed is not reported as written.
    """
    files = Written(problems=list(problems))
    if args.out and streamed is not None:
        if not any(p.startswith("--out") for p in problems):
            files.paths.append(args.out)
    elif args.out:
        files.write("--out", args.out, evaluation.to_jsonl)
    if args.report:
        from ragbridge.adapters.report import render_report

        files.write_text(
            "--report",
            args.report,
            lambda: render_report(
                evaluation,
                samples=list(samples()),
                generated_by=f"ragbridge {command}",
                source=getattr(args, "data", None) or getattr(args, "runs", None),
                history=recording.report_history(args, evaluation, command),
            ),
        )
    return files


def _save_samples(args: argparse.Namespace, samples: list[Sample]) -> None:
    from ragbridge.core.sample import save_samples

    if args.save_samples:
        save_samples(samples, args.save_samples)
        console.say(f"wrote {args.save_samples}")


def _self_judging(
    args: argparse.Namespace, samples: Iterable[Sample], plan: Plan
) -> dict[str, Any]:
    """Say once (stderr) how many answers the judge's own model wrote; the header entry."""
    own = count_own_answers(samples, plan.judge, getattr(args, "generator_model", None))
    return _said_self_judging(plan, own)


def _said_self_judging(plan: Plan, own: int) -> dict[str, Any]:
    """One line on stderr and the results-header entry, when a judge metric grades ``own``
    answers of the judge's own model (the core's `SelfPreferenceWarning` is filtered by
    `ragbridge.adapters.cli.main`, so the line is said once)."""
    judge = plan.judge
    if judge is None or not any(m.needs_judge for m in plan.metrics):
        return {}
    warning = own_answers_warning(judge.model, own)
    if warning:
        console.note(warning)
    return self_judged(judge, own)


# --------------------------------------------------------------------------- the commands


def run_eval(args: argparse.Namespace) -> int:
    from ragbridge.core.sample import load_samples

    data = check_input(args.data)
    if conversations_command.holds_conversations(data):
        return conversations_command.run_eval(args, data)
    cluster_command.check_cluster(args)
    plan = prepare(args, [data], scan=data)
    scan = plan.scan
    assert scan is not None  # prepare scanned ``data``
    own = _said_self_judging(plan, scan.own_answers)
    args.processes = cores_command.processes(args, plan, scan.count)  # refused here, if at all
    heldout = split_command.check_heldout(args, data)
    metadata: dict[str, Any] = {"heldout": heldout} if heldout else {}
    metadata.update(own)
    metadata.update(recording.history_metadata(args))
    if args.repeat > 1:
        return repeat_command.run_repeated(args, plan, data, scan.count, metadata)
    if args.report:  # the report needs every cell at hand
        evaluation = score(args, plan, load_samples(data), scan.count, metadata=metadata, data=data)
        return finish_file(args, evaluation, data, scan.count)
    return _stream_eval(args, plan, data, scan.count, metadata)


Streamed = Callable[["OnResult"], "Evaluation"]
"""How a streamed run scores: with this callback for each cell, keeping none."""
Ended = Callable[["Evaluation", "Tally", list[str], "RunCellWriter | None"], int]
"""How a streamed run finishes: the run, its tally, what went wrong writing, the history."""


def _stream_eval(
    args: argparse.Namespace,
    plan: Plan,
    data: Path,
    count: int,
    metadata: dict[str, Any],
    *,
    run: Streamed | None = None,
    end: Ended | None = None,
) -> int:
    """``eval`` without ``--report``: each sample's cells go to ``--out`` (if given), to the
    ``--history`` store (if given) and to a `Tally` as it finishes; none is held, so memory
    stays flat however long the file. ``run`` and ``end`` score and finish other records
    than ``data``'s samples (a conversations file), `score` and `finish_file` by default."""
    with contextlib.ExitStack() as stack:
        cells: RunCellWriter | None = None
        if args.history:
            from ragbridge.core.monitoring.history import RUN_ID_KEY, RunCellWriter

            store = stack.enter_context(history_command.open_store(args.history))
            cells = stack.enter_context(RunCellWriter(store, metadata[RUN_ID_KEY]))
        return _stream_into(args, plan, data, count, metadata, cells, run, end)


def _stream_into(
    args: argparse.Namespace,
    plan: Plan,
    data: Path,
    count: int,
    metadata: dict[str, Any],
    cells: RunCellWriter | None,
    run: Streamed | None,
    end: Ended | None,
) -> int:
    import sqlite3

    from ragbridge.core.results.tally import Tally
    from ragbridge.core.results.writer import ResultWriter
    from ragbridge.core.sample import load_samples

    tally = Tally()
    writer: ResultWriter | None = None
    if args.out:
        try:
            writer = ResultWriter(args.out)
        except OSError as exc:
            raise UserError(f"--out {args.out}: not written: {exc}") from None
    problems: list[str] = []
    history = [cells]

    def keep(sample_id: str, metric: str, score: Score) -> None:
        tally.add(sample_id, metric, score)
        into = history[0]
        if into is not None:
            try:
                into.add(sample_id, metric, score)
            except (OSError, sqlite3.Error) as exc:  # the store's disk is full: finish the run
                where = history_command.store_name(args.history)
                problems.append(f"--history {where}: the run was not recorded: {exc}")
                history[0] = None
                with contextlib.suppress(OSError, sqlite3.Error):
                    into.discard()
        if writer is None or (problems and any(p.startswith("--out") for p in problems)):
            return  # (`problems` is empty in nearly every run: no generator per cell then)
        try:
            writer.add(sample_id, metric, score)
        except (OSError, ValueError) as exc:  # a full disk: finish the run, then say so
            problems.append(f"--out {args.out}: not written: {exc}")
            writer.discard()

    def out_ok() -> bool:
        return writer is not None and not any(p.startswith("--out") for p in problems)

    def take(share: Share) -> None:
        """A range of the file that another process scored (`cores_command`), in order."""
        tally.merge(share.tally)
        if writer is not None and out_ok() and share.spool is not None:
            writer.append_cells(share.spool, share.cells)  # written (or discarded) with the rest
        else:
            share.discard()

    from ragbridge.core.scoring.collector import rare_full_collections  # `--help` stays light

    with writer or contextlib.nullcontext(), rare_full_collections():
        try:
            if run is not None:
                evaluation = run(keep)
            elif getattr(args, "processes", None) and args.processes > 1:  # `run_eval` chose
                spool_dir = writer.path.parent if writer is not None else None
                evaluation = cores_command.score_on_cores(
                    args, plan, data, count, args.processes, keep, take,
                    spool_dir=spool_dir, metadata=metadata,
                )  # fmt: skip
            else:
                evaluation = score(
                    args, plan, load_samples(data), count, on_result=keep, metadata=metadata,
                    data=data,
                )  # fmt: skip
        except KeyboardInterrupt:
            if writer is not None and out_ok():
                writer.close({"interrupted": True})
                if getattr(args, "dask", None) is None:  # a cluster run's line says what it kept
                    console.note(
                        f"interrupted: wrote {writer.cells} finished results to {args.out}"
                    )
            raise
        if writer is not None and out_ok():
            try:
                writer.close(evaluation.metadata)
            except (OSError, ValueError) as exc:
                problems.append(f"--out {args.out}: not written: {exc}")
    if end is not None:
        return end(evaluation, tally, problems, history[0])
    return finish_file(
        args, evaluation, data, count, streamed=tally, write_problems=problems, cells=history[0]
    )


def run_pipeline(args: argparse.Namespace) -> int:
    from ragbridge.adapters.cli.options import _made

    data = check_input(args.data)
    if conversations_command.holds_conversations(data):
        return conversations_command.run_script(args, data)
    cluster_command.check_cluster(args)
    questions = read_samples(args.data)  # before the pipeline: its import may take minutes
    produced = FieldCounts.of(questions, produced=("answer", "contexts"))
    plan = prepare(args, [data], fields=produced)
    heldout = split_command.check_heldout(args, data)  # --strict refuses before the pipeline runs
    pipeline = _made(args.pipeline, "PIPELINE")
    samples = _run_any(pipeline, questions, args.pipeline)
    _save_samples(args, samples)
    own = _self_judging(args, samples, plan)
    metadata = {"heldout": heldout} if heldout else {}
    with cluster_command.samples_file(args, samples) as path:  # --dask: scored from a file
        evaluation = score(
            args,
            plan,
            samples,
            len(samples),
            metadata={**metadata, **own, **recording.history_metadata(args)},
            data=path,
        )
    return finish(args, evaluation, n_samples=len(samples), samples=lambda: samples, command="run")


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
    path = check_input(args.runs)  # before the import: a typo should not read as a missing extra
    cluster_command.check_cluster(args)
    plan = prepare(args, [path])
    from ragbridge.adapters.langsmith import load_runs, samples_from_runs

    try:
        runs = load_runs(path)
    except UnicodeDecodeError:
        raise UserError(f"{args.runs}: not UTF-8 text; save the file as UTF-8") from None
    if not runs:
        raise UserError(f"{args.runs}: holds no runs")
    samples = samples_from_runs(runs, retriever=args.retriever)
    _save_samples(args, samples)
    own = _self_judging(args, samples, plan)
    with cluster_command.samples_file(args, samples) as saved:  # --dask: scored from a file
        evaluation = score(
            args,
            plan,
            samples,
            len(samples),
            metadata={**own, **recording.history_metadata(args)},
            data=saved,
        )
    return finish(
        args, evaluation, n_samples=len(samples), samples=lambda: samples, command="langsmith"
    )


def run_estimate(args: argparse.Namespace) -> int:
    from ragbridge.core.scoring.runner import estimate

    if conversations_command.holds_conversations(check_input(args.data)):
        return conversations_command.run_estimate(args, check_input(args.data))
    samples = read_samples(args.data)
    criteria = criteria_command.criteria_of(args)
    names = _metric_names(args, None, criteria)
    metrics, _ = choose_metrics(names, have_judge=True, have_nli=True)
    metrics = conversations_command.with_turn_support(
        criteria_command.bind(metrics, criteria), args
    )
    est = estimate(samples, metrics)
    console.say(
        f"{plural(est.samples, 'sample')}, metrics: {', '.join(m.name for m in metrics)}",
        f"judge calls: {est.calls} ({est.calls_per_sample:.1f} per sample)",
        *estimate_lines(args, est),
    )
    return EXIT_OK


def estimate_lines(args: argparse.Namespace, est: Estimate) -> list[str]:
    """An estimate's prompt tokens, calls per template and, with ``--price-in/out``, cost."""
    from ragbridge.core.judging.engine import Price

    lines = [
        f"prompt tokens: ~{est.prompt_tokens:,}",
        *(
            f"  {template}: {plural(calls, 'call')}"
            for template, calls in sorted(est.by_template.items())
        ),
    ]
    if args.price_in is not None or args.price_out is not None:
        price = Price(args.price_in or 0.0, args.price_out or 0.0)
        cost = est.cost(price, args.completion_tokens)
        lines.append(
            f"cost: ~${cost:.4f} (at {plural(args.completion_tokens, 'completion token')} per call)"
        )
    return lines
