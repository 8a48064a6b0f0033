"""``ragbridge annotate export`` and ``import``: people label a sample of results.

``export DATA.jsonl [--results R] --n 50 --seed 7 --out tasks.jsonl --html form.html`` picks the
samples (deterministic by seed; stratified by a judge score when results are given, see
`ragbridge.core.labels.annotation`), writes them as tasks and renders the self-contained form people
fill in (`ragbridge.adapters.annotation_form`). Judge scores go into the tasks file, not into
the form, unless ``--show-scores``. With ``--criteria criteria.yaml`` the form asks the team's
own criteria — their words and scales, the same file the judge is given — instead of the four
default questions, and the labels answer them by name, for ``ragbridge agreement`` to pair
with the criterion metrics of the same names.

``import ann1.jsonl ann2.jsonl ... --tasks tasks.jsonl --out labels.jsonl`` reads the files
people saved from the form, refuses a bad line naming ``file:line:field`` (a label of a sample
that is not one of the tasks, a person labelling one sample twice — across files too), merges
them into one labels file for ``ragbridge agreement`` and prints per question how many labels
there are and how far the annotators agree with each other.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.paths import check_distinct, check_input, check_output
from ragbridge.adapters.cli.plural import noun, plural

if TYPE_CHECKING:
    from ragbridge.core.labels.annotation import AskedCriterion, QuestionAgreement
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.sample import Sample


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "annotate",
        "Human evaluation: export a sample of results as annotation tasks and a "
        "self-contained HTML form; import the labels people saved from it.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    export = actions.add_parser(
        "export",
        help="pick samples and write tasks.jsonl and the HTML form",
        description="Pick a deterministic sample of DATA and write it as annotation tasks "
        "(--out) and as a self-contained HTML form (--html).",
    )
    export.add_argument("data", metavar="DATA.jsonl", help="the eval set (samples JSONL)")
    export.add_argument(
        "--results",
        metavar="RESULTS.jsonl",
        help="results of `ragbridge eval --out`: stratify by a judge score and keep the scores "
        "in the tasks file",
    )
    export.add_argument("--n", type=int, default=50, help="number of tasks (default 50)")
    export.add_argument("--seed", type=int, default=7, help="selection seed (default 7)")
    export.add_argument(
        "--stratify-by",
        metavar="METRIC",
        help="metric of --results whose low/mid/high scores get equal shares (default: the "
        "first metric a form question checks, e.g. faithfulness; 'none' for a uniform draw)",
    )
    export.add_argument(
        "--show-scores",
        action="store_true",
        help="show the judge's scores in the form (off by default: people anchor on them)",
    )
    export.add_argument(
        "--criteria",
        metavar="CRITERIA.yaml",
        help="ask people these criteria (a ragbridge criteria file) instead of the four default "
        "questions: the form shows each criterion's text and scale",
    )
    export.add_argument("--title", default="ragbridge annotation", help="the form's title")
    export.add_argument("--out", required=True, metavar="TASKS.jsonl", help="tasks file to write")
    export.add_argument("--html", metavar="FORM.html", help="HTML form to write")
    export.set_defaults(handler=run_export)

    imp = actions.add_parser(
        "import",
        help="check and merge the labels files people saved; print their agreement",
        description="Check the labels files saved from the form against the tasks, merge them "
        "into one labels file and print inter-annotator agreement per question.",
    )
    imp.add_argument("labels", nargs="+", metavar="LABELS.jsonl", help="files saved from the form")
    imp.add_argument("--tasks", required=True, metavar="TASKS.jsonl", help="the exported tasks")
    imp.add_argument("--out", required=True, metavar="LABELS.jsonl", help="merged labels to write")
    imp.set_defaults(handler=run_import)


def run_export(args: argparse.Namespace) -> int:
    from ragbridge.adapters.cli.options import read_samples
    from ragbridge.core.labels.annotation import save_tasks, select_tasks
    from ragbridge.core.results.evaluation import Evaluation

    if args.n < 1:
        raise UserError(f"--n must be at least 1, got {args.n}")
    data = check_input(args.data)
    inputs = [data]
    results = check_input(args.results) if args.results else None
    if results is not None:
        inputs.append(results)
    criteria = _asked_criteria(args.criteria) if args.criteria else []
    if args.criteria:
        inputs.append(Path(args.criteria))
    check_distinct({"--out": args.out, "--html": args.html})
    out = check_output(args.out, "--out", inputs=inputs)
    form = check_output(args.html, "--html", inputs=inputs) if args.html else None
    samples = read_samples(args.data)
    evaluation = Evaluation.from_jsonl(results) if results is not None else None
    stratify = _stratify_metric(args, evaluation)
    if evaluation is not None:
        _check_results_match(args, samples, evaluation)
    selection = select_tasks(
        samples,
        args.n,
        seed=args.seed,
        evaluation=evaluation,
        stratify_by=stratify,
        criteria=criteria,
    )
    if not selection.tasks:
        raise UserError(f"{args.data}: no sample has an answer to annotate")
    if selection.without_answer:
        left_out = len(selection.without_answer)
        console.note(f"left out {plural(left_out, 'sample')} without an answer")
    save_tasks(selection.tasks, out)
    lines = [f"wrote {plural(len(selection.tasks), 'task')} to {args.out} (seed {args.seed})"]
    if criteria:
        lines.append("asking the criteria " + ", ".join(c.name for c in criteria))
    if selection.stratify_by is not None:
        shares = ", ".join(
            f"{name} {selection.chosen.get(name, 0)}/{count}"
            for name, count in selection.available.items()
        )
        lines.append(f"stratified by {selection.stratify_by}: {shares} (chosen/available)")
    if len(selection.tasks) < args.n:
        n = len(selection.tasks)
        console.note(
            f"only {plural(n, 'sample')} {noun(n, 'has', 'have')} an answer: every one is a task"
        )
    if form is not None:
        from ragbridge.adapters.annotation_form import write_form

        write_form(form, selection.tasks, title=args.title, show_scores=args.show_scores)
        shown = "with the judge's scores" if args.show_scores else "judge scores hidden"
        lines.append(f"wrote the form to {args.html} ({shown}); open it in any browser")
    console.say(*lines)
    return EXIT_OK


def _stratify_metric(args: argparse.Namespace, evaluation: Evaluation | None) -> str | None:
    """The metric whose scores the tasks are spread over: ``--stratify-by`` when it names one
    the results have, none with ``none``, else the default pick from the results (if any)."""
    from ragbridge.core.labels.annotation import default_stratify_metric

    if args.stratify_by is not None and args.stratify_by.lower() != "none":
        if evaluation is None:
            raise UserError("--stratify-by needs --results (the scores to stratify by)")
        if args.stratify_by not in evaluation.metrics:
            raise UserError(
                f"--stratify-by {args.stratify_by}: no such metric in {args.results} "
                f"(has: {', '.join(evaluation.metrics) or 'none'})"
            )
        return str(args.stratify_by)
    if args.stratify_by is None and evaluation is not None:
        return default_stratify_metric(evaluation)
    return None


def _check_results_match(
    args: argparse.Namespace, samples: Sequence[Sample], evaluation: Evaluation
) -> None:
    """Refuse results of another eval set; warn about answered samples the results lack."""
    known = {s.id for s in samples if s.answer}
    scored = set(evaluation.sample_ids)
    if not scored & known:
        raise UserError(
            f"--results {args.results}: none of its sample ids is in {args.data} "
            "(results of another eval set?)"
        )
    missing = len(known - scored)
    if missing:
        console.warn(f"{missing} answered samples of {args.data} have no row in {args.results}")


def _asked_criteria(path: str) -> list[AskedCriterion]:
    """The criteria of a criteria file as people are asked them; a bad file is exit 2."""
    from ragbridge.core.criteria import load_criteria
    from ragbridge.core.labels.annotation import asked_criterion

    check_input(path)
    try:
        file = load_criteria(path)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return [asked_criterion(spec) for spec in file.specs]


def run_import(args: argparse.Namespace) -> int:
    from ragbridge.core.labels.annotation import (
        AnnotationError,
        annotator_agreement,
        label_counts,
        labels_with_lines,
        load_tasks,
        merge_labels,
        tasks_criteria,
    )
    from ragbridge.core.labels.human import LabelFileError, save_labels

    tasks_path = check_input(args.tasks)
    sources = [check_input(path) for path in args.labels]
    out = check_output(args.out, "--out", inputs=[tasks_path, *sources])
    seen: dict[Path, str] = {}
    for path, given in zip(sources, args.labels, strict=True):
        key = path.resolve()
        if key in seen:
            raise UserError(f"{given} is given twice (also as {seen[key]})")
        seen[key] = given
    try:
        tasks = load_tasks(tasks_path)
        labelled = [pair for path in args.labels for pair in labels_with_lines(path)]
        merged = merge_labels(labelled, tasks, tasks_name=args.tasks)
    except (AnnotationError, LabelFileError) as exc:
        raise UserError(str(exc)) from None
    if not merged:
        raise UserError("the labels files hold no labels")
    save_labels(merged, out)
    labelled_ids = {label.sample_id for label in merged}
    unlabelled = sum(1 for task in tasks if task.sample_id not in labelled_ids)
    if unlabelled:
        console.warn(
            f"{unlabelled} of {plural(len(tasks), 'task')} "
            f"{noun(unlabelled, 'has', 'have')} no label"
        )
    people = label_counts(merged)
    if len(people) < 2:
        console.warn("one annotator only: inter-annotator agreement needs two or more")
    lines = [
        f"merged {plural(len(merged), 'label')} from {plural(len(sources), 'file')} "
        f"into {args.out}",
        "annotators: " + ", ".join(f"{name} ({count})" for name, count in people.items()),
        "",
        _agreement_table(_asked_only(annotator_agreement(merged, criteria=tasks_criteria(tasks)))),
    ]
    console.say(*lines)
    return EXIT_OK


def _asked_only(agreement: dict[str, QuestionAgreement]) -> dict[str, QuestionAgreement]:
    """Leave out the default questions nobody answered when criteria were asked instead."""
    from ragbridge.core.labels.human import QUESTIONS

    if len(agreement) == len(QUESTIONS):
        return agreement
    return {k: v for k, v in agreement.items() if k not in QUESTIONS or v.labels}


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _agreement_table(agreement: Mapping[str, QuestionAgreement]) -> str:
    header = (
        "question",
        "labels",
        "items",
        "items≥2",
        "alpha(ord)",
        "kappa(w²)",
        "pairs",
        "agree%",
    )
    rows: list[tuple[str, ...]] = [header]
    notes: list[str] = []
    for name, stats in agreement.items():
        rows.append(
            (
                name,
                str(stats.labels),
                str(stats.items),
                str(stats.items_multi),
                _fmt(stats.alpha),
                _fmt(stats.kappa),
                str(stats.kappa_pairs),
                "—" if stats.percent_agreement is None else f"{100 * stats.percent_agreement:.1f}",
            )
        )
        if stats.note:
            notes.append(f"{name}: {stats.note}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    text = [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        )
        for row in rows
    ]
    text.append(
        "alpha: Krippendorff's ordinal alpha; kappa: mean pairwise Cohen's kappa, quadratic "
        "weights;\nagree%: identical pairs of labels; items≥2: samples with two or more labels"
    )
    text.extend(notes)
    return "\n".join(text)
