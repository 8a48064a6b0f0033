"""``ragbridge agreement``: how far judge metrics agree with people — kappa, Spearman, AUROC,
the confusion matrix and the threshold that best matches them.

Two ways in, one table out:

* ``ragbridge agreement results.jsonl --labels labels.jsonl``: the scores of a run
  (``ragbridge eval --out``) against the human labels of the same samples (the annotation
  import writes them; `ragbridge.core.labels.human`);
* ``ragbridge agreement --dataset faithbench PATH --metrics faithfulness:offline,...``: a public
  labelled set from the user's disk (`ragbridge.core.labels.labelled_sets`) is scored here, with the
  same judge/embedder/cache flags as ``eval``, then compared with its labels — what a judge is
  worth before it is trusted.
* ``ragbridge agreement --dataset summeval PATH --judge ...``: a set labelled per criterion
  (SummEval's experts rated coherence, consistency, fluency and relevance) is judged with
  criteria of the same names — ragbridge's wording of SummEval's four
  (`ragbridge.core.labels.summeval_criteria`), or the user's ``--criteria FILE`` — and each
  criterion gets its row, with the per-document Spearman the G-Eval paper reports in its notes.

A team's own criterion is checked the same way: people answer it in the annotation form
(``ragbridge annotate export --criteria FILE``), ``ragbridge eval --criteria FILE`` scores it,
and ``ragbridge agreement results.jsonl --labels labels.jsonl`` pairs the metric with the
people's answers of the same name (``--criteria FILE`` fixes the criteria's scales; otherwise
they come from the results).

The statistics are `ragbridge.core.labels.agreement`'s. Exit codes: 0 at least one metric compared
(and, with ``--dataset``, the scoring passed its failure bar), 1 nothing could be compared (every
labelled cell failed or was skipped) or the scoring failed its bar, 2 bad input (a bad line as
``file:line: field``, ids that never match — naming a few from each side — unknown metrics),
3 the judge or embedder is unusable.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import number, positive_int
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_FAILED, EXIT_OK, UserError
from ragbridge.adapters.cli.options import (
    add_scoring_options,
    build_judge,
    build_nli,
    choose_metrics,
    embedder_for,
    progress,
    settings_from,
    split_names,
)
from ragbridge.adapters.cli.paths import check_cache, check_distinct, check_input, check_output
from ragbridge.adapters.cli.plural import plural
from ragbridge.adapters.cli.tables import aligned

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.labels.agreement import AgreementTable, MetricAgreement
    from ragbridge.core.labels.human import LabelQuestion
    from ragbridge.core.labels.labelled_sets import LabelledSet
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.sample import Sample

__all__ = ["DATASET_METRICS", "register", "table_lines"]

DATASET_METRICS = "faithfulness,hallucination"
"""What ``--dataset`` scores by default on the sets that label groundedness (a set labelled per
criterion, SummEval, scores its criteria)."""

_SCORING_FLAGS = ("judge", "embedder", "nli", "cache", "base_url")


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "agreement",
        "Compare judge metrics with human labels: Cohen's kappa at the default "
        "threshold (0.5) and at the best-matching one, Spearman against the graded answers, "
        "AUROC, and the confusion matrix. Either a results file (ragbridge eval --out) with "
        "--labels, or --dataset NAME PATH to score a public labelled set (FaithBench dev, "
        "short-answer dev, SummEval) with the given metrics and judge first. A team's own "
        "criteria are compared with people's answers of the same name. Exit codes: 0 compared, "
        "1 nothing could be compared or the scoring failed its bar, 2 bad input, 3 judge or "
        "embedder unusable, 130 interrupted.",
    )
    parser.add_argument(
        "results", nargs="?", metavar="RESULTS.jsonl", help="scores from ragbridge eval --out"
    )
    parser.add_argument(
        "--labels", metavar="LABELS.jsonl", help="human labels of the same samples (JSONL)"
    )
    parser.add_argument(
        "--dataset",
        nargs=2,
        metavar=("NAME", "PATH"),
        help="score a public labelled set first: faithbench PATH (faithbench.jsonl or its "
        "folder), short-answer PATH (qa_pairs.jsonl or its folder) or summeval PATH "
        "(SummEval's model_annotations.aligned.paired.jsonl, G-Eval's summeval.json, or their "
        "folder); the data are read from PATH, never shipped",
    )
    if "--criteria" not in parser._option_string_actions:  # a shared option may add it one day
        parser.add_argument(
            "--criteria",
            metavar="CRITERIA.yaml",
            help="a criteria file: with --dataset summeval, the criteria judged (default: "
            "ragbridge's wording of SummEval's coherence, consistency, fluency, relevance); with "
            "a results file, the criteria's scales for the labels' answers",
        )
    parser.add_argument(
        "--fabricated",
        choices=("one_turn", "multi_turn", "both"),
        default="one_turn",
        help="short-answer: which fabricated answer stands against the right one "
        "(default one_turn: mostly a name or phrase)",
    )
    parser.add_argument(
        "--metrics",
        help="comma-separated metrics to compare; with --dataset the ones to score "
        f"(default: {DATASET_METRICS}, or every criterion of a set labelled per criterion; add "
        "':offline', ':llm', ... to pick providers, several providers of one measure are "
        "compared side by side); with a results file, default: every metric a label question "
        "or a labelled criterion checks",
    )
    parser.add_argument(
        "--threshold",
        type=_unit,
        default=0.5,
        metavar="T",
        help="the judge's default verdict threshold: yes when score > T, for hallucination "
        "when score < T (default 0.5)",
    )
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=2000,
        metavar="N",
        help="bootstrap resamples for the CIs of kappa and AUROC (default 2000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--json", metavar="PATH", help="write the agreement table as JSON")
    parser.add_argument(
        "--report", metavar="report.html", help="write the HTML report with an agreement section"
    )
    parser.add_argument(
        "--out", metavar="results.jsonl", help="with --dataset: also write the scores as JSONL"
    )
    add_scoring_options(parser, metrics=False)
    parser.set_defaults(handler=_run)


_unit = number(lambda t: 0.0 <= t <= 1.0, "must lie within [0, 1], got {text}")


# --------------------------------------------------------------------------- the command


def _run(args: argparse.Namespace) -> int:
    if args.dataset is not None:
        if args.results or args.labels:
            raise UserError(
                "--dataset scores a public set and brings its own labels: drop RESULTS.jsonl "
                "and --labels, or drop --dataset"
            )
        return _run_dataset(args)
    if not args.results or not args.labels:
        raise UserError(
            "give RESULTS.jsonl --labels LABELS.jsonl, or --dataset NAME PATH "
            "(e.g. ragbridge agreement results.jsonl --labels labels.jsonl)"
        )
    given = [f"--{f.replace('_', '-')}" for f in _SCORING_FLAGS if getattr(args, f, None)]
    if args.out:
        given.append("--out")
    if given:
        raise UserError(
            f"{', '.join(given)} only apply with --dataset: a results file is already scored"
        )
    return _run_results(args)


def _check_outputs(args: argparse.Namespace, inputs: list[Path]) -> None:
    flags = {"--json": args.json, "--report": args.report, "--out": args.out}
    for flag, path in flags.items():
        if path:
            check_output(path, flag, inputs=inputs)
    if getattr(args, "cache", None):
        check_cache(args.cache, inputs=inputs)
    check_distinct({**flags, "--cache": getattr(args, "cache", None)})


def _run_results(args: argparse.Namespace) -> int:
    from ragbridge.core.labels.agreement import judge_agreement
    from ragbridge.core.labels.human import load_labels
    from ragbridge.core.results.evaluation import Evaluation

    results = check_input(args.results)
    labels_path = check_input(args.labels)
    _check_outputs(args, [results, labels_path])
    evaluation = Evaluation.from_jsonl(results)  # a bad line: ValueError "file:line: field"
    labels = list(load_labels(labels_path))
    if not labels:
        raise UserError(f"{args.labels}: holds no labels (only blank lines)")
    if not len(evaluation):
        raise UserError(f"{args.results}: holds no scores")
    metrics = _metric_keys(evaluation, args.metrics) if args.metrics else None
    criteria = _questions(_criteria_file(args.criteria)) if args.criteria else None
    table = judge_agreement(
        evaluation,
        labels,
        metrics=metrics,
        threshold=args.threshold,
        n_resamples=args.resamples,
        seed=args.seed,
        source={"results": str(args.results), "labels": str(args.labels)},
        criteria=criteria,
    )
    return _finish(args, table, evaluation, samples=None, code=EXIT_OK)


def _metric_keys(evaluation: Evaluation, text: str) -> list[str]:
    """``--metrics`` names as the results key them: ``faithfulness:offline`` finds the
    ``faithfulness`` column when its cells came from the offline provider."""
    keys: list[str] = []
    for name in split_names(text):
        if name in evaluation.metrics:
            keys.append(name)
            continue
        base, _, provider = name.partition(":")
        if base in evaluation.metrics:
            found = {s.provider for s in evaluation.column(base).values() if s.provider}
            if provider and found and provider not in found:
                raise UserError(
                    f"--metrics {name}: the results' {base} came from {', '.join(sorted(found))}"
                )
            keys.append(base)
            continue
        raise UserError(
            f"--metrics {name}: not in the results (they have {', '.join(evaluation.metrics)})"
        )
    return keys


def _run_dataset(args: argparse.Namespace) -> int:
    from ragbridge.adapters.cli.outcome import report_outcome
    from ragbridge.core.labels.agreement import judge_agreement
    from ragbridge.core.labels.labelled_sets import DATASETS, load_labelled_set

    name, path = args.dataset
    if name not in DATASETS:
        raise UserError(f"--dataset {name!r}: unknown set; use {' or '.join(DATASETS)}")
    if not Path(path).exists():
        raise UserError(
            f"--dataset {name} {path}: no such file or folder (the public sets are not shipped "
            "with ragbridge; give the path of your copy)"
        )
    _check_outputs(args, [Path(path), *([Path(args.criteria)] if args.criteria else [])])
    labelled = load_labelled_set(name, path, fabricated=args.fabricated)
    if args.criteria and not labelled.criteria:
        raise UserError(
            f"--criteria: {name} is labelled by question, not per criterion; drop --criteria"
        )
    judge = build_judge(args.judge, args.base_url)
    if labelled.criteria:
        rounds = [_criteria_round(args, labelled, judge is not None)]
    else:
        rounds = _rounds(split_names(args.metrics or DATASET_METRICS), judge is not None, args.nli)
    metrics = [m for group in rounds for m in group]
    _refuse_unlabelled(metrics, labelled)
    embedder = embedder_for(args.embedder, args.base_url, metrics)
    nli = build_nli(args.nli)
    console.note(f"{labelled.name}: {plural(len(labelled.samples), 'sample')} from {labelled.path}")
    evaluation = _score_rounds(args, labelled.samples, rounds, judge, embedder, nli)
    if args.out:
        evaluation.to_jsonl(args.out)
    source = {"dataset": labelled.description, "path": str(labelled.path)}
    if judge is not None:
        source["judge"] = judge.model
    if embedder is not None:
        source["embedder"] = str(getattr(embedder, "model", type(embedder).__name__))
    table = judge_agreement(
        evaluation,
        labelled.labels,
        threshold=args.threshold,
        n_resamples=args.resamples,
        seed=args.seed,
        source=source,
        criteria=labelled.criteria,
        groups=labelled.groups,
    )
    table = table.model_copy(update={"notes": [*labelled.notes, *table.notes]})
    code = _finish(args, table, evaluation, samples=labelled.samples, code=EXIT_OK)
    bar = report_outcome(evaluation, max_failed_share=args.max_failed_share, source="agreement")
    return max(code, bar)


def _refuse_unlabelled(metrics: Sequence[Metric], labelled: LabelledSet) -> None:
    """Refuse, before anything is paid, a metric the set's labels cannot check."""
    from ragbridge.core.labels.human import question_for

    answered = {
        q
        for label in labelled.labels
        for q in ("relevance", "accuracy", "grounded", "helpfulness")
        if getattr(label, q) is not None
    }
    answered |= {name for label in labelled.labels for name in label.criteria or {}}
    problems: list[str] = []
    for metric in metrics:
        question = labelled.criteria.get(metric.name) or question_for(metric.name)
        if question is None:
            problems.append(f"{metric.name} (no label question checks it)")
        elif question.name not in answered:
            problems.append(f"{metric.name} (checked by {question.name!r}, not labelled here)")
    if problems:
        raise UserError(
            f"{labelled.name} labels {', '.join(sorted(answered))} only; cannot compare "
            f"{'; '.join(problems)}: drop them from --metrics"
        )


def _criteria_file(path: str) -> Any:
    """The user's criteria file (`ragbridge.core.criteria.load_criteria`); a bad one is a
    ``file:line: field`` error (exit 2)."""
    from ragbridge.core.criteria import load_criteria

    check_input(path)
    try:
        return load_criteria(path)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _questions(file: Any) -> dict[str, LabelQuestion]:
    """The label question of every criterion of a criteria file: its scale (None: yes/no)."""
    from ragbridge.core.labels.human import criterion_question

    return {
        spec.name: criterion_question(spec.name, None if spec.kind == "aspect" else spec.scale)
        for spec in file.specs
    }


def _criteria_round(
    args: argparse.Namespace, labelled: LabelledSet, have_judge: bool
) -> list[Metric]:
    """The criteria to judge on a set labelled per criterion: the user's ``--criteria`` file or
    the set's own wording (SummEval's four), narrowed by ``--metrics`` names."""
    from ragbridge.core.criteria import criteria_metrics
    from ragbridge.core.labels.summeval_criteria import summeval_criteria

    if not have_judge:
        raise UserError(
            f"{labelled.name} is labelled per criterion, and criteria are judged by an LLM: "
            "give --judge (e.g. --judge openai:MODEL, or python:MODULE:FACTORY)"
        )
    if args.criteria:
        file = _criteria_file(args.criteria)
        metrics: list[Metric] = list(file.metrics())
    else:
        metrics = criteria_metrics(summeval_criteria())
    if args.metrics:
        wanted = [name.split(":", 1)[0] for name in split_names(args.metrics)]
        known = {m.name for m in metrics}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise UserError(
                f"--metrics {', '.join(unknown)}: not a criterion judged here "
                f"({', '.join(sorted(known))}); {labelled.name} is labelled per criterion"
            )
        metrics = [m for m in metrics if m.name in wanted]
    return metrics


def _rounds(names: list[str], have_judge: bool, nli: str | None) -> list[list[Metric]]:
    """``--metrics`` resolved into runs with one provider per measure each: a run holds one
    column per measure name, so ``faithfulness:offline,faithfulness:llm`` takes two."""
    groups: list[list[str]] = []
    for name in names:
        base = name.split(":", 1)[0]
        for group in groups:
            if all(n.split(":", 1)[0] != base for n in group):
                group.append(name)
                break
        else:
            groups.append([name])
    rounds: list[list[Metric]] = []
    seen: set[str] = set()
    for group in groups:
        metrics, note = choose_metrics(group, have_judge=have_judge, have_nli=nli is not None)
        if note:
            console.note(note)
        for metric in metrics:
            key = f"{metric.name}:{metric.provider}"
            if key in seen:
                raise UserError(f"--metrics: {key} is given twice")
            seen.add(key)
        rounds.append(metrics)
    return rounds


def _score_rounds(
    args: argparse.Namespace,
    samples: list[Sample],
    rounds: list[list[Metric]],
    judge: Any,
    embedder: Any,
    nli: Any,
) -> Evaluation:
    """Score every round (`_rounds`); cells are keyed ``measure:provider`` so providers of one
    measure sit side by side."""
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.scoring.runner import evaluate

    total = len(samples) * len(rounds)
    parts: list[Evaluation] = []
    with progress("scoring", total) as advance:
        for number, group in enumerate(rounds):
            offset = number * len(samples)

            def step(done: int, _total: int | None, offset: int = offset) -> None:
                advance(offset + done, total)

            run = evaluate(
                samples,
                group,
                **settings_from(args, judge=judge, embedder=embedder, nli=nli),
                progress=step,
            )
            keys = {m.name: f"{m.name}:{m.provider}" for m in group}
            renamed = Evaluation(
                ((sid, keys.get(metric, metric), score) for sid, metric, score in run),
                metadata=run.metadata,
            )
            parts.append(renamed)
            if run.metadata.get("aborted"):
                break
    return Evaluation.merge(*parts)


# --------------------------------------------------------------------------- output


def _finish(
    args: argparse.Namespace,
    table: AgreementTable,
    evaluation: Evaluation,
    *,
    samples: list[Sample] | None,
    code: int,
) -> int:
    """Write ``--json`` and ``--report`` first, then print the table; say why nothing was
    compared when nothing was."""
    from ragbridge.core.files import write_text_atomic

    written: list[str] = []
    if args.out:
        written.append(args.out)
    if args.json:
        write_text_atomic(args.json, table.to_json() + "\n")
        written.append(args.json)
    if args.report:
        from ragbridge.adapters.report import render_report

        html = render_report(
            evaluation,
            samples=samples,
            agreement=table,
            title="ragbridge agreement",
            generated_by="ragbridge agreement",
        )
        write_text_atomic(args.report, html)
        written.append(args.report)
    console.say(*table_lines(table), *(f"wrote {p}" for p in written))
    if not table.compared:
        reasons = "; ".join(f"{row.label}: {_why(row)}" for row in table.rows)
        console.error(f"no metric could be compared with the labels — {reasons}")
        return EXIT_FAILED
    return code


def _why(row: MetricAgreement) -> str:
    for note in row.notes:
        if "not compared" in note or "answers" in note:
            return note
    return "no labelled sample has a score"


def _fmt_stat(stat: Any, ci: bool = False) -> str:
    if stat.value is None:
        return "undefined"
    text = f"{stat.value:.2f}"
    if ci and stat.ci_low is not None:
        text += f" [{stat.ci_low:.2f}, {stat.ci_high:.2f}]"
    return text


def table_lines(table: AgreementTable) -> list[str]:
    """The agreement table as aligned text lines, then what the reader must know about it."""
    t0 = f"{table.default_threshold:g}"
    head = (
        f"{plural(table.labelled_samples, 'labelled sample')}, {plural(table.labels, 'label')}, "
        f"{plural(table.annotators, 'annotator')}"
    )
    rows = [
        (
            "metric",
            "n",
            f"kappa@{t0}",
            "kappa@best (t)",
            "spearman",
            "AUROC [95% CI]",
            f"TP/FP/FN/TN@{t0}",
            "positive",
        )
    ]
    for row in table.rows:
        default = row.default
        if row.best is not None:
            best = f"{_fmt_stat(row.best.kappa)} ({row.best.threshold:.3g})"
        else:
            best = "undefined"
        rows.append(
            (
                row.label,
                str(row.n),
                _fmt_stat(default.kappa) if default else "undefined",
                best,
                _fmt_stat(row.spearman),
                _fmt_stat(row.auroc, ci=True),
                default.confusion.text() if default else "—",
                row.positive,
            )
        )
    lines = [head, *aligned(rows)]
    lines += [
        f"positive: the people's yes; the judge says yes when score > t (hallucination: < t); "
        f"t = {t0} or the best cut,",
        f"the observed score maximising kappa on these samples (in-sample: optimistic); "
        f"CIs: {table.n_resamples} bootstrap resamples, seed {table.seed}",
    ]
    for row in table.rows:
        for note in _row_notes(row, t0):
            lines.append(f"  {row.label}: {note}")
    for person in table.people:
        scale = person.scale or "question's own"  # a table saved before scales were kept
        lines.append(
            f"  between people ({person.question}, {plural(person.samples, 'sample')}, "
            f"{plural(person.annotators, 'annotator')}): "
            f"Krippendorff's alpha {_fmt_stat(person.alpha)}, "
            f"mean pairwise kappa {_fmt_stat(person.kappa)} (quadratic, on the {scale} scale)"
        )
    for metric, why in table.not_compared.items():
        lines.append(f"  {metric}: not compared, {why}")
    lines += [f"  note: {note}" for note in table.notes]
    return lines


def _row_notes(row: MetricAgreement, t0: str) -> list[str]:
    notes = list(row.notes)
    stats = [("Spearman", row.spearman), ("AUROC", row.auroc)]
    if row.default is not None:
        stats.insert(0, (f"kappa@{t0}", row.default.kappa))
    for name, stat in stats:
        if stat.undefined:
            notes.append(f"{name} undefined: {stat.undefined}")
        elif stat.ci_note:
            notes.append(f"{name}: no CI, {stat.ci_note}")
    if row.best is None and row.best_undefined:
        notes.append(f"no best threshold: {row.best_undefined}")
    return notes
