"""`render_report` and `write_report`: the page around the sections, and its input checks."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeAlias, TypedDict

from typing_extensions import Unpack

from ragbridge.core.labels.agreement import AgreementTable
from ragbridge.core.monitoring.records import RunRecord
from ragbridge.core.results.crosscheck import CrossComparison
from ragbridge.core.results.diagnosis import Diagnosis, diagnose
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Sample

from .assets import CSS, JS, script_hash
from .charts import distribution_section, quadrant_section, trend_section
from .conversation_rollups import conversations_section
from .drilldown import drilldown_section
from .explorer import (
    explorer_data,
    explorer_section,
    paired_comparisons,
    paired_section,
    shown_metrics,
)
from .markup import DEFAULT_PIPELINE, esc, integer, sample_anchor
from .sections import agreement_section, comparison_section, summary_section

__all__ = ["ReportOptions", "render_report", "write_report"]

Evaluations: TypeAlias = Evaluation | Mapping[str, Evaluation]
Samples: TypeAlias = Sequence[Sample] | Mapping[str, Sequence[Sample]] | None
Diagnoses: TypeAlias = Diagnosis | Mapping[str, Diagnosis] | None
Sources: TypeAlias = str | Mapping[str, str] | None
Extra: TypeAlias = Sequence[tuple[str, str, str]]
"""Sections a caller renders itself (``(anchor id, nav title, HTML)``; the HTML escaped as every
section escapes, e.g. `ragbridge.adapters.report.robustness_view`), placed after the summaries."""


class ReportOptions(TypedDict, total=False):
    """What `write_report` passes on to `render_report`: its keyword arguments, each
    meaning what it means there (tests/test_report.py keeps the two lists equal)."""

    samples: Samples
    comparison: CrossComparison | None
    diagnosis: Diagnoses
    title: str
    generated_by: str | None
    generated_at: datetime | None
    agreement: AgreementTable | None
    history: Sequence[RunRecord] | None
    source: Sources
    sections: Extra


# --------------------------------------------------------------------------- input checking


def _pipelines(evaluations: Evaluations) -> dict[str, Evaluation]:
    if isinstance(evaluations, Evaluation):
        return {DEFAULT_PIPELINE: evaluations}
    if not isinstance(evaluations, Mapping):
        raise TypeError(
            "evaluations must be an Evaluation or a mapping pipeline name → Evaluation, "
            f"got {type(evaluations).__name__}"
        )
    if not evaluations:
        raise ValueError("evaluations: nothing to report (the mapping is empty)")
    out: dict[str, Evaluation] = {}
    for name, ev in evaluations.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"evaluations: pipeline names must be non-empty strings, got {name!r}")
        if not isinstance(ev, Evaluation):
            raise TypeError(
                f"evaluations[{name!r}]: expected an Evaluation, got {type(ev).__name__}"
            )
        out[name] = ev
    return out


def _sample_index(samples: Samples, pipelines: Sequence[str]) -> dict[str, dict[str, Sample]]:
    index: dict[str, dict[str, Sample]] = {name: {} for name in pipelines}
    if samples is None:
        return index
    if isinstance(samples, Mapping):
        per: dict[str, Sequence[Sample]] = {}
        for name, seq in samples.items():
            if name not in index:
                raise ValueError(
                    f"samples[{name!r}]: no such pipeline in evaluations "
                    f"(has: {', '.join(map(repr, pipelines))})"
                )
            per[name] = seq
    else:
        per = {name: samples for name in pipelines}
    for name, seq in per.items():
        if isinstance(seq, (str, bytes)):
            raise TypeError(f"samples[{name!r}]: expected a sequence of Sample, got a string")
        for i, sample in enumerate(seq):
            if not isinstance(sample, Sample):
                raise TypeError(
                    f"samples[{name!r}][{i}]: expected a Sample, got {type(sample).__name__}"
                )
            if sample.id in index[name]:
                raise ValueError(f"samples[{name!r}][{i}]: id: duplicate sample id {sample.id!r}")
            index[name][sample.id] = sample
    return index


def _diagnoses(
    diagnosis: Diagnoses, pipelines: Mapping[str, Evaluation]
) -> dict[str, Diagnosis | str]:
    """Pipeline → its Diagnosis, or the one-line note saying why there is none."""
    given: dict[str, Diagnosis] = {}
    if isinstance(diagnosis, Diagnosis):
        if len(pipelines) != 1:
            raise ValueError(
                "diagnosis: a single Diagnosis is ambiguous with several pipelines; "
                "pass a mapping pipeline name → Diagnosis"
            )
        given = {next(iter(pipelines)): diagnosis}
    elif diagnosis is not None:
        for name, diag in diagnosis.items():
            if name not in pipelines:
                raise ValueError(f"diagnosis[{name!r}]: no such pipeline in evaluations")
            if not isinstance(diag, Diagnosis):
                raise TypeError(
                    f"diagnosis[{name!r}]: expected a Diagnosis, got {type(diag).__name__}"
                )
            given[name] = diag
    out: dict[str, Diagnosis | str] = {}
    for name, ev in pipelines.items():
        if name in given:
            out[name] = given[name]
            continue
        try:
            out[name] = diagnose(ev)
        except ValueError as exc:
            out[name] = str(exc)
    return out


# --------------------------------------------------------------------------- page parts


def _sources(source: Sources, pipelines: Mapping[str, Evaluation]) -> dict[str, str]:
    """Pipeline → the name of its input file: as given, else the run's ``metadata["source"]``."""
    given: dict[str, str] = {}
    if isinstance(source, str):
        given = dict.fromkeys(pipelines, source)
    elif source is not None:
        if not isinstance(source, Mapping):
            raise TypeError(
                f"source must be a str or a mapping pipeline name → str, got "
                f"{type(source).__name__}"
            )
        for name, value in source.items():
            if name not in pipelines:
                raise ValueError(f"source[{name!r}]: no such pipeline in evaluations")
            if not isinstance(value, str):
                raise TypeError(f"source[{name!r}]: expected a str, got {type(value).__name__}")
            given[name] = value
    out: dict[str, str] = {}
    for name, ev in pipelines.items():
        found = given.get(name) or ev.metadata.get("source")
        if isinstance(found, str) and found:
            out[name] = found
    return out


def _history(history: Sequence[RunRecord] | None) -> list[RunRecord] | None:
    if history is None:
        return None
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise TypeError(f"history must be a sequence of RunRecord, got {type(history).__name__}")
    for i, run in enumerate(history):
        if not isinstance(run, RunRecord):
            raise TypeError(f"history[{i}]: expected a RunRecord, got {type(run).__name__}")
    return list(history)


# --------------------------------------------------------------------------- overview


def _judge_models(ev: Evaluation) -> list[str]:
    found = ev.metadata.get("judge_model")
    if isinstance(found, str) and found:
        return [found]
    # Offline scores stamp their embedding model in judge_model; only LLM scores had a judge.
    models = {s.judge_model for _, _, s in ev if s.judge_model and s.provider in (None, "llm")}
    return sorted(models)


def _overview(
    title: str,
    pipelines: Mapping[str, Evaluation],
    index: Mapping[str, Mapping[str, Sample]],
    sources: Mapping[str, str],
    generated_by: str | None,
    generated_at: datetime,
    nav: str,
) -> list[str]:
    out = ["<header>", f"<h1>{esc(title)}</h1>"]
    stamp = generated_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    by = f" by {esc(generated_by)}" if generated_by else ""
    out.append(f'<p class="muted">Generated {esc(stamp)}{by}. Self-contained: no network use.</p>')
    out.append(nav)
    out.append("</header>")
    out.append('<section id="overview"><h2>Overview</h2>')
    for name, ev in pipelines.items():
        if len(pipelines) > 1:
            out.append(f"<h3>Pipeline {esc(name)}</h3>")
        usage = ev.usage()
        ids = set(ev.sample_ids) | set(index[name])
        rows: list[tuple[str, str]] = [
            *([("Input file", sources[name])] if name in sources else []),
            ("Samples", integer(len(ids))),
            ("Metrics", ", ".join(ev.metrics) or "none"),
            ("Judge model", ", ".join(_judge_models(ev)) or "none (offline providers only)"),
            ("Embedding model", str(ev.metadata.get("embedding_model") or "none")),
        ]
        if usage.calls or usage.cached_calls:
            rows += [
                (
                    "Judge calls",
                    f"{integer(usage.calls)} ({integer(usage.cached_calls)} from cache)",
                ),
                (
                    "Tokens",
                    f"{integer(usage.prompt_tokens)} prompt + {integer(usage.completion_tokens)} "
                    f"completion = {integer(usage.total_tokens)}",
                ),
            ]
        cost = ev.metadata.get("cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost):
            rows.append(("Cost", f"${cost:,.4f}"))
        out.extend(_warnings_block(name, ev))
        out.append(f'<dl class="meta" data-pipeline="{esc(name)}">')
        for key, value in rows:
            out.append(f"<dt>{esc(key)}</dt><dd>{esc(value)}</dd>")
        out.append("</dl>")
    out.append("</section>")
    return out


def _run_warnings(ev: Evaluation) -> list[str]:
    """The run's likely input mistakes and early stop, as recorded in its metadata."""
    found = ev.metadata.get("warnings")
    lines = [str(w) for w in found if w] if isinstance(found, list) else []
    aborted = ev.metadata.get("aborted")
    if isinstance(aborted, str) and aborted:
        lines.insert(0, f"the run stopped early: {aborted}")
    return lines


def _warnings_block(pipeline: str, ev: Evaluation) -> list[str]:
    """A visible block listing ``metadata["warnings"]`` (and ``["aborted"]``): numbers that
    may be wrong are said next to them, not only in the results file."""
    lines = _run_warnings(ev)
    if not lines:
        return []
    out = [f'<div class="warnings" role="alert" data-pipeline="{esc(pipeline)}">']
    out.append("<strong>Warning" + ("s" if len(lines) > 1 else "") + "</strong><ul>")
    out.extend(f"<li>{esc(line)}</li>" for line in lines)
    out.append("</ul></div>")
    return out


# --------------------------------------------------------------------------- entry points


def render_report(
    evaluations: Evaluations,
    *,
    samples: Samples = None,
    comparison: CrossComparison | None = None,
    diagnosis: Diagnoses = None,
    title: str = "ragbridge report",
    generated_by: str | None = None,
    generated_at: datetime | None = None,
    agreement: AgreementTable | None = None,
    history: Sequence[RunRecord] | None = None,
    source: Sources = None,
    sections: Extra = (),
) -> str:
    """The report as one self-contained HTML document (a ``str``).

    ``evaluations`` is one `Evaluation` or a mapping pipeline name → `Evaluation` shown side by
    side; with two or more, each is compared with the first (paired differences, CIs and
    p-values, per metric and per question). ``samples`` (one sequence for every pipeline, or a
    mapping per pipeline) fills the explorer and the drill-down with questions, answers and
    contexts. ``diagnosis`` defaults to ``diagnose()`` of each pipeline; where no retrieval or
    generation measure was scored the quadrant chart is omitted with a note. ``generated_at``
    (default: now) is the date printed in the header. ``agreement``
    (`ragbridge.core.labels.agreement.judge_agreement`) adds the judge-agreement section and
    ``history`` (recorded `RunRecord`s, e.g. ``ResultsStore.runs()``) the trend charts; without
    them there are none. ``source`` names the input file (one name, or one per pipeline; default
    ``metadata["source"]`` of each run). ``sections`` (`Extra`) follow the summaries and get a
    link in the page's navigation. Bad input raises ValueError/TypeError naming the
    argument and the key.
    """
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    if agreement is not None and not isinstance(agreement, AgreementTable):
        raise TypeError(f"agreement must be an AgreementTable, got {type(agreement).__name__}")
    if comparison is not None and not isinstance(comparison, CrossComparison):
        raise TypeError(f"comparison must be a CrossComparison, got {type(comparison).__name__}")
    pipelines = _pipelines(evaluations)
    index = _sample_index(samples, list(pipelines))
    diagnoses = _diagnoses(diagnosis, pipelines)
    sources = _sources(source, pipelines)
    runs = _history(history)
    summaries = {name: ev.summary() for name, ev in pipelines.items()}
    anchors: dict[str, str] = {}
    for name, ev in pipelines.items():
        for sid in [*ev.sample_ids, *index[name]]:
            anchors.setdefault(sid, sample_anchor(sid, name))
    several = len(pipelines) > 1
    conversations = conversations_section(pipelines)
    nav = _nav(
        several,
        runs is not None,
        agreement is not None,
        comparison is not None,
        conversations=bool(conversations),
        extra=[(anchor, name) for anchor, name, _ in sections],
    )
    order = {
        name: list(dict.fromkeys([*index[name], *ev.sample_ids])) for name, ev in pipelines.items()
    }
    hidden = {name: shown_metrics(ev)[1] for name, ev in pipelines.items()}
    body: list[str] = []
    when = generated_at or datetime.now(timezone.utc)
    body.extend(_overview(title, pipelines, index, sources, generated_by, when, nav))
    body.extend(summary_section(summaries))
    body.extend(html for _, _, html in sections)
    body.extend(conversations)
    comparisons = paired_comparisons(pipelines)
    if several:
        body.extend(paired_section(list(pipelines), comparisons))
    body.extend(explorer_section(explorer_data(pipelines, index, order, comparisons), hidden))
    if runs is not None:
        body.extend(trend_section(runs))
    if agreement is not None:
        body.extend(agreement_section(agreement))
    body.extend(distribution_section(pipelines))
    body.extend(quadrant_section(diagnoses, index))
    if comparison is not None:
        body.extend(comparison_section(comparison, anchors))
    body.extend(drilldown_section(pipelines, index, diagnoses))
    return _document(title, body)


def write_report(
    path: str | os.PathLike[str], evaluations: Evaluations, **options: Unpack[ReportOptions]
) -> Path:
    """Render the report and write it to ``path`` (UTF-8, parent folders created); returns it.

    ``options`` are `render_report`'s keyword arguments (`ReportOptions`).
    """
    text = render_report(evaluations, **options)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def _nav(
    several: bool,
    trends: bool,
    agreement: bool,
    comparison: bool,
    *,
    conversations: bool = False,
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    """The links to the sections the page has, in page order."""
    links = [
        ("overview", "Overview"),
        ("summary", "Summaries"),
        *((esc(anchor), esc(title)) for anchor, title in extra),
        *([("conversations", "Conversations")] if conversations else []),
        *([("paired", "Paired comparison")] if several else []),
        ("explorer", "Explorer"),
        *([("trends", "Trends")] if trends else []),
        *([("agreement", "Agreement")] if agreement else []),
        ("distributions", "Distributions"),
        ("quadrants", "Quadrants"),
        *([("comparison", "Comparison")] if comparison else []),
        ("samples", "Samples"),
    ]
    return "<nav>" + "".join(f'<a href="#{i}">{t}</a>' for i, t in links) + "</nav>"


def _document(title: str, body: list[str]) -> str:
    """The HTML document around the sections: the head with the stylesheet and the security
    policy, ``body`` inside ``<main>``, the one inline script last."""
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Belt and braces: even if a future bug let markup through, the page may load nothing
        # from anywhere and run no script but its own inline one (the explorer's JSON data
        # block is not a script the browser runs).
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src 'unsafe-inline'; script-src '{script_hash()}'; img-src data:\">",
        '<meta name="generator" content="ragbridge">',
        f"<title>{esc(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        *body,
        "</main>",
        f"<script>{JS}</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"
