"""``ragbridge robustness PIPELINE DATA.jsonl``: re-run a pipeline under retrieval faults.

RGB (Chen et al., 2023) asks how a RAG system holds up when retrieval goes wrong: relevant
passages mixed with noise at rising ratios, no relevant passage at all, passages stating a wrong
fact. This command runs the user's pipeline on every question under each such condition
(`ragbridge.core.robustness`), scores each condition and prints a table per condition with
confidence intervals; ``--report`` draws the curve of each measure over the noise ratio.

It shares ``ragbridge run``'s life cycle and its pieces, so the two cannot drift apart:

1. **check**: DATA.jsonl is read and validated *before* the pipeline is imported (an import may
   take minutes; a bad line is ``file:line: field: problem``), then every output path, the judge,
   the measures and the embedder; each problem is one line and exit 2;
2. **plan**: pipeline calls, judge calls, prompt tokens and (with ``--price-in/out``) cost are
   printed before anything runs. ``--dry-run`` stops there, and imports nothing of the pipeline:
   a cached answer is keyed on the contexts the pipeline is *given*, which only running its
   retriever tells, so the plan's pipeline calls are those of a cold run (an upper bound when
   ``--cache`` already holds answers);
3. **run**: PIPELINE is imported (``MODULE:OBJECT``, as ``run`` takes it) and wrapped for
   its framework (`robust_pipeline`); one line on stderr per finished condition;
4. **finish**: ``--out`` (every cell, one sample per question and condition),
   ``--save-samples`` and ``--report`` are written first, then the table (or ``--json``) on
   stdout, then why the run failed, if it did. Exit codes as ``run``: 0 ok, 1 a measure failed
   its bar (``--max-failed-share``) or a file was not written, 2 bad input, 3 judge unusable,
   130 interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import non_negative_int, number
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.options import add_scoring_options
from ragbridge.adapters.cli.paths import check_input

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.judging.engine import Price
    from ragbridge.core.judging.judge import Embedder, EntailmentModel, Judge
    from ragbridge.core.results.stats import MeanCI
    from ragbridge.core.robustness.conditions import Condition
    from ragbridge.core.robustness.harness import RobustnessResult
    from ragbridge.core.robustness.plan import RobustnessPlan
    from ragbridge.core.robustness.types import RobustPipeline
    from ragbridge.core.sample import Sample

__all__ = [
    "finish",
    "parse_ratios",
    "pipeline_identity",
    "register",
    "result_lines",
    "run_robustness_command",
]

DEFAULT_RATIOS_TEXT = "0,0.2,0.4,0.6,0.8"
"""``--ratios`` by default (`ragbridge.core.robustness.conditions.DEFAULT_RATIOS`)."""


def parse_ratios(text: str) -> tuple[float, ...]:
    """``--ratios``: comma-separated shares of the top-k replaced by noise, each in [0, 1).

    Every bad item is named at once (``'x' is not a number; 1.5 is outside [0, 1)``); a ratio
    of 1 replaces every passage, which is the ``negative`` condition, and the message says so.
    """
    values: list[float] = []
    bad: list[str] = []
    for part in text.split(","):
        word = part.strip()
        if not word:
            bad.append("an empty item")
            continue
        try:
            value = float(word)
        except ValueError:
            bad.append(f"{word!r} is not a number")
            continue
        if value == 1.0:
            bad.append(
                f"{word} replaces every passage: that is the negative condition "
                "(run unless --no-negative), not a noise ratio"
            )
        elif not (math.isfinite(value) and 0.0 <= value < 1.0):
            bad.append(f"{word} is outside [0, 1)")
        elif value not in values:
            values.append(value)
    if bad:
        raise argparse.ArgumentTypeError(f"bad noise ratios {text!r}: {'; '.join(bad)}")
    return tuple(values)


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "robustness",
        "Import PIPELINE (MODULE:OBJECT, as `ragbridge run` takes it: a LangChain runnable or "
        "a LlamaIndex query engine, or a no-argument function returning one) and answer every "
        "question of DATA.jsonl again under retrieval faults, the RGB way: noise at each of "
        "--ratios (that share of the top-k replaced by passages retrieved for other questions), "
        "no relevant passage (negative: does the answer decline?) and counterfactual passages "
        "(the reference's fact replaced by a wrong one: does the answer follow it, flag it?). "
        "Prints the plan (pipeline calls, judge calls, cost) before anything runs, then a table "
        "per condition with 95% CIs. Offline providers unless --judge. DATA.jsonl is checked "
        "before the pipeline is imported. Exit codes: 0 ok, 1 a measure failed its bar "
        "(--max-failed-share) or a file was not written, 2 bad arguments or input, 3 judge or "
        "embedder unusable, 130 interrupted.",
    )
    p.add_argument("pipeline", metavar="PIPELINE", help="MODULE:OBJECT")
    p.add_argument(
        "data",
        metavar="DATA.jsonl",
        help="questions with their references (and relevance labels, and optionally "
        'metadata.counterfactual = {"original", "wrong"})',
    )
    p.add_argument(
        "--ratios",
        type=parse_ratios,
        default=parse_ratios(DEFAULT_RATIOS_TEXT),
        metavar="R,R,...",
        help=f"noise ratios in [0, 1) (default {DEFAULT_RATIOS_TEXT}); the clean run (0) "
        "always runs first",
    )
    p.add_argument(
        "--no-negative", action="store_true", help="leave out the no-relevant-passage condition"
    )
    p.add_argument(
        "--no-counterfactual",
        action="store_true",
        help="leave out the counterfactual-passages condition",
    )
    p.add_argument(
        "--counterfactuals",
        choices=("offline", "judge"),
        default="offline",
        help="who writes the wrong fact where a question's metadata supplies none: offline "
        "(the reference's number, date or name swapped for another, deterministic; default) "
        "or judge (one judge call per question; needs --judge)",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="seed of the noise drawn and where it is inserted (default 0)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (pipeline calls, judge calls, tokens, cost) and stop; the "
        "pipeline is not imported, so answers already in --cache are not subtracted",
    )
    p.add_argument(
        "--out",
        "--output",
        dest="out",
        metavar="results.jsonl",
        help="write every cell as JSONL (one sample per question and condition, id QID@CONDITION)",
    )
    p.add_argument("--report", metavar="robustness.html", help="write the HTML report")
    p.add_argument(
        "--save-samples",
        metavar="PATH",
        help="also write the answered samples (one per question and condition) as JSONL",
    )
    p.add_argument(
        "--json", action="store_true", help="print the summary as JSON instead of the table"
    )
    add_scoring_options(p, metrics=False)
    price = number(lambda v: math.isfinite(v) and v >= 0, "must be 0 or more, got {value}")
    p.add_argument(
        "--price-in",
        type=price,
        metavar="USD",
        help="USD per million prompt tokens (the plan's cost)",
    )
    p.add_argument(
        "--price-out",
        type=price,
        metavar="USD",
        help="USD per million completion tokens (the plan's cost)",
    )
    p.set_defaults(handler=run_robustness_command)


# --------------------------------------------------------------------------- 1. check


def conditions_of(args: argparse.Namespace) -> list[Condition]:
    """The conditions the flags ask for: the clean run first, then the noise ratios, negative
    and counterfactual unless left out."""
    from ragbridge.core.robustness.conditions import default_conditions

    return default_conditions(
        args.ratios, negative=not args.no_negative, counterfactual=not args.no_counterfactual
    )


def _lines_of(path: Path) -> list[int]:
    """The file line of each sample, in order (blank lines hold no sample)."""
    with path.open(encoding="utf-8") as handle:
        return [number for number, line in enumerate(handle, start=1) if line.strip()]


def check_counterfactuals(path: Path, questions: Sequence[Sample]) -> None:
    """A counterfactual a question supplies (``metadata.counterfactual``) is well formed: the
    mistake is refused as ``file:line: ...`` naming the field, before the pipeline is imported,
    not after the clean run was paid."""
    from ragbridge.core.robustness.counterfactual import user_counterfactual

    lines: list[int] | None = None
    for i, sample in enumerate(questions):
        if "counterfactual" not in sample.metadata:
            continue
        try:
            user_counterfactual(sample)
        except ValueError as exc:
            lines = lines if lines is not None else _lines_of(path)
            where = lines[i] if i < len(lines) else i + 1
            raise UserError(f"{path}:{where}: {exc}") from None


def _check_ids(path: Path, questions: Sequence[Sample]) -> None:
    """Question ids are unique: each becomes ``ID@CONDITION`` in the results."""
    seen: set[str] = set()
    for i, sample in enumerate(questions):
        if sample.id in seen:
            where = _lines_of(path)[i]
            raise UserError(f"{path}:{where}: id: duplicate question id {sample.id!r}")
        seen.add(sample.id)


def pipeline_identity(spec: str, pipeline: Any) -> str:
    """What the pipeline's cached answers are keyed on: its ``MODULE:OBJECT`` spec, a digest of
    that module's source (an edited pipeline is asked again, not served stale answers) and the
    adapters' `default_identity` of the built object (another ``k``, another step)."""
    import importlib.util

    from ragbridge.adapters.robustness import default_identity

    module = spec.split(":", 1)[0]
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    origin = found.origin if found is not None else None
    source = ""
    if origin and Path(origin).is_file():
        source = "#" + hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:16]
    return f"{spec}{source} {default_identity(pipeline)}"


# --------------------------------------------------------------------------- the command


def run_robustness_command(args: argparse.Namespace) -> int:
    """Check, plan, run, finish (see the module's docs)."""
    from ragbridge.adapters.cli.eval_command import check_paths
    from ragbridge.adapters.cli.options import (
        _made,
        build_judge,
        build_nli,
        embedder_for,
        read_samples,
    )
    from ragbridge.core.robustness.plan import condition_metrics

    data = check_input(args.data)
    questions = read_samples(args.data)  # before the pipeline: its import may take minutes
    _check_ids(data, questions)
    conditions = conditions_of(args)
    counterfactual = any(c.kind == "counterfactual" for c in conditions)
    if counterfactual:
        check_counterfactuals(data, questions)
    check_paths(args, [data])
    judge = build_judge(args.judge, args.base_url)
    if judge is None and args.counterfactuals == "judge" and counterfactual:
        raise UserError(
            "--counterfactuals judge needs a judge to write the wrong facts: pass --judge SPEC, "
            "or use --counterfactuals offline"
        )
    try:
        chosen = condition_metrics(None, have_judge=judge is not None)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    embedder = embedder_for(args.embedder, args.base_url, chosen.metrics)
    nli = build_nli(args.nli)
    price = _price(args)
    if args.dry_run:  # the pipeline is not imported: the plan of a cold run
        plan = _plan(args, questions, conditions, judge is not None, price, cache=None)
        console.say(*plan.lines())
        if args.cache:
            console.say(
                "a dry run does not import the pipeline, so answers already in --cache are "
                "not subtracted: pipeline calls are at most this many"
            )
        return EXIT_OK
    pipeline = _made(args.pipeline, "PIPELINE")
    robust = _robust(pipeline, args.pipeline)
    plan = _plan(args, questions, conditions, judge is not None, price, cache=robust.identity)
    for line in plan.lines():  # stderr: stdout is the table (or --json)
        console.note(f"plan: {line}")
    result = _run(args, robust, questions, conditions, judge, embedder, nli, price)
    return finish(args, result, plan)


def _price(args: argparse.Namespace) -> Price | None:
    from ragbridge.core.judging.engine import Price

    if args.price_in is None and args.price_out is None:
        return None
    return Price(args.price_in or 0.0, args.price_out or 0.0)


def _plan(
    args: argparse.Namespace,
    questions: list[Sample],
    conditions: list[Condition],
    have_judge: bool,
    price: Price | None,
    *,
    cache: str | None,
) -> RobustnessPlan:
    """The plan; with ``cache`` (the pipeline's identity) and ``--cache``, the clean answers the
    cache already holds are not counted as pipeline calls."""
    from ragbridge.core.cache.disk import open_cache
    from ragbridge.core.robustness.answers import AnswerCache
    from ragbridge.core.robustness.plan import plan_robustness

    store = open_cache(args.cache) if cache is not None and args.cache else None
    try:
        return plan_robustness(
            questions,
            conditions,
            have_judge=have_judge,
            counterfactuals=args.counterfactuals,
            seed=args.seed,
            cache=AnswerCache(store, cache) if store is not None and cache is not None else None,
            price=price,
        )
    finally:
        if store is not None:
            store.close()


def _robust(pipeline: Any, spec: str) -> RobustPipeline:
    """``pipeline`` wrapped for its framework, keyed on `pipeline_identity`."""
    from ragbridge.adapters.robustness import robust_pipeline

    try:
        return robust_pipeline(pipeline, identity=pipeline_identity(spec, pipeline))
    except TypeError as exc:
        raise UserError(f"{spec}: {exc}") from None


def _progress() -> Callable[[str, int, int], None]:
    """One line on stderr as each condition's last question is answered."""
    said: set[str] = set()

    def progress(condition: str, done: int, total: int) -> None:
        if done >= total and condition not in said:
            said.add(condition)
            console.note(f"{condition}: {total} {'answer' if total == 1 else 'answers'}")

    return progress


def _run(
    args: argparse.Namespace,
    robust: RobustPipeline,
    questions: list[Sample],
    conditions: list[Condition],
    judge: Judge | None,
    embedder: Embedder | None,
    nli: EntailmentModel | None,
    price: Price | None,
) -> RobustnessResult:
    from ragbridge.adapters.cli.options import settings_from
    from ragbridge.core.robustness.harness import run_robustness
    from ragbridge.core.settings import Settings

    options = settings_from(args, judge=judge, embedder=embedder, nli=nli)
    options["price"] = price  # the run's cost_usd, at the prices the plan used
    settings = Settings(**options)
    return run_robustness(
        robust,
        questions,
        conditions=conditions,
        counterfactuals=args.counterfactuals,
        seed=args.seed,
        settings=settings,
        progress=_progress(),
    )


# --------------------------------------------------------------------------- 4. finish


def finish(args: argparse.Namespace, result: RobustnessResult, plan: RobustnessPlan) -> int:
    """Write the files, print the table (or ``--json``), say why the run failed; the code."""
    from ragbridge.adapters.cli.outcome import report_outcome
    from ragbridge.adapters.cli.outputs import Written, write_failure_code
    from ragbridge.core.sample import save_samples

    files = Written()
    if args.out:
        files.write("--out", args.out, result.evaluation.to_jsonl)
    if args.save_samples:
        files.write("--save-samples", args.save_samples, lambda p: save_samples(result.samples, p))
    if args.report:
        from ragbridge.adapters.report.robustness_view import render_robustness_report

        files.write_text(
            "--report",
            args.report,
            lambda: render_robustness_report(
                result, generated_by="ragbridge robustness", source=args.data
            ),
        )
    if args.json:
        summary = {"plan": plan.to_dict(), **result.to_dict()}
        console.say(json.dumps(summary, ensure_ascii=False, allow_nan=False, indent=2))
    else:
        console.say(*result_lines(result), *files.lines())
    code = report_outcome(
        result.evaluation, max_failed_share=args.max_failed_share, source="robustness"
    )
    return files.settle(code, write_failure_code(result.evaluation))


def _ci(value: MeanCI | None) -> str:
    return "—" if value is None else f"{value.mean:.3f} [{value.low:.3f}, {value.high:.3f}]"


def result_lines(result: RobustnessResult) -> list[str]:
    """The run in one line, then a row per condition: questions answered, each measure's mean
    and 95% CI, abstention, counterfactual follows/flags, errors, skipped; the skip reasons."""
    from ragbridge.adapters.cli.tables import aligned

    metrics: list[str] = []
    for row in result.summary:
        metrics.extend(m for m in row.metrics if m not in metrics)
    counterfactual = any(r.condition.kind == "counterfactual" for r in result.summary)
    head = ["condition", "n", *metrics, "abstention"]
    if counterfactual:
        head += ["follows wrong", "flags conflict"]
    rows = [[*head, "errors", "skipped"]]
    for row in result.summary:
        cells = [row.name, str(row.n)]
        cells += [_ci(row.metrics[m]) if m in row.metrics else "" for m in metrics]
        cells.append(_ci(row.abstention))
        if counterfactual:
            cells += [_ci(row.follows_wrong), _ci(row.flags_conflict)]
        rows.append([*cells, str(row.errors), str(len(row.skipped))])
    calls = result.pipeline_calls
    lines = [
        f"{len(result.summary)} conditions; pipeline: {calls} {'call' if calls == 1 else 'calls'}, "
        f"{result.answers_cached} answers from the cache" + _judge_words(result),
        *aligned(rows),
    ]
    for row in result.summary:
        reasons: dict[str, int] = {}
        for item in row.skipped:
            reasons[item.reason] = reasons.get(item.reason, 0) + 1
        lines += [f"  {row.name}: skipped {n} — {why}" for why, n in reasons.items()]
    return lines


def _judge_words(result: RobustnessResult) -> str:
    """``; judge MODEL: N calls (M cached)`` when a judge scored the run."""
    stats = result.evaluation.metadata.get("judge_stats")
    if not stats:
        return ""
    usage = result.evaluation.usage()
    model = result.evaluation.metadata.get("judge_model")
    return f"; judge {model}: {stats.get('calls', 0)} calls ({usage.cached_calls} cached)"
