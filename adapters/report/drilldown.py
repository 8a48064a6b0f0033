"""Per sample: what was asked, retrieved and answered, and every verdict behind each score.

One ``<details>`` per sample and pipeline, its ``id`` from `sample_anchor`; the explorer's rows
and the charts' points link to it. Columns that hold nothing for a sample (no retriever scores,
no context ids, no judge calls) are left out of its tables.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping, Sequence
from typing import Any

from ragbridge.core.results.diagnosis import Diagnosis
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.sample import Context, Sample

from .conversation_view import conversation_block
from .markup import esc, number, sample_anchor
from .sections import usage_cell
from .trajectory_view import trajectory_block

__all__ = ["drilldown_section", "sample_order"]

_GOOD_VERDICTS = {"supported", "attributed", "useful", "relevant", "yes", "entailed"}
_BAD_VERDICTS = {"unsupported", "contradicted", "not useful", "irrelevant", "no", "not relevant"}
_VERDICT_FLAGS = ("supported", "attributed", "useful", "relevant")


def _relevance_tag(sample: Sample, context: Context) -> str:
    if sample.relevance is None:
        return '<span class="tag">unlabelled</span>'
    if context.id is None:
        return '<span class="tag">no id</span>'
    grade = sample.relevance.get(context.id, 0)
    if grade > 0:
        return f'<span class="tag rel">relevant (grade {grade})</span>'
    return '<span class="tag nonrel">not relevant</span>'


def _verdict_mark(item: Mapping[str, Any]) -> str:
    verdict: Any = None
    if "verdict" in item:
        verdict = item["verdict"]
    else:
        for key in _VERDICT_FLAGS:
            if key in item and isinstance(item[key], bool):
                verdict = item[key]
                break
        else:
            if isinstance(item.get("contradiction"), bool):
                verdict = not item["contradiction"]
    if verdict is True or (isinstance(verdict, str) and verdict.lower() in _GOOD_VERDICTS):
        return '<span class="ok" title="pass">✓</span>'
    if verdict is False or (isinstance(verdict, str) and verdict.lower() in _BAD_VERDICTS):
        return '<span class="bad" title="fail">✗</span>'
    return '<span class="muted">·</span>'


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list)):
        return esc(json.dumps(value, ensure_ascii=False))
    return esc(value)


def _details_html(details: Any) -> str:
    """Per-claim/statement/context verdicts as small tables; other fields as a short list."""
    if details is None:
        return ""
    if isinstance(details, list):
        details = {"items": details}
    out: list[str] = []
    scalars: list[str] = []
    for key, value in details.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            columns: list[str] = []
            for item in value:
                columns.extend(k for k in item if k not in columns)
            head = "".join(f"<th>{esc(c)}</th>" for c in columns)
            out.append(
                f'<table class="verdicts" data-kind="{esc(key)}"><caption>{esc(key)}</caption>'
                f"<thead><tr><th></th>{head}</tr></thead><tbody>"
            )
            for item in value:
                cells = "".join(f"<td>{_cell(item.get(c))}</td>" for c in columns)
                out.append(f"<tr><td>{_verdict_mark(item)}</td>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            items = "".join(f"<li>{esc(v)}</li>" for v in value)
            out.append(f'<div class="detail-list">{esc(key)}:<ul>{items}</ul></div>')
        else:
            scalars.append(f"{esc(key)}: {_cell(value)}")
    if scalars:
        out.insert(0, f'<p class="muted detail-fields">{"; ".join(scalars)}</p>')
    return "".join(out)


def _score_table(ev: Evaluation, sample_id: str) -> str:
    """The sample's scores; the reason, source and usage columns only when one row has some."""
    rows: list[tuple[str, str, str, str, str, str]] = []
    for metric in ev.metrics:
        score: Score | None = ev.get(sample_id, metric)
        if score is None:
            continue
        if score.failure is not None:
            shown = f"failed ({esc(score.failure.kind.value)})"
            why = esc(score.failure.message)
        elif score.value is None:
            shown = "skipped"
            why = esc(score.reason or "")
        else:
            shown = f"{score.value:.3f}"
            why = esc(score.reason or "")
        why += _details_html(score.details)
        source = ", ".join(
            esc(part) for part in (score.provider, score.judge_model, score.prompt_version) if part
        )
        spent = usage_cell(score.usage) if score.usage.calls or score.usage.total_tokens else ""
        rows.append((score.status, metric, shown, why, source, spent))
    if not rows:
        return '<p class="muted">No metric was scored on this sample.</p>'
    reasons = any(r[3] for r in rows)
    sources = any(r[4] for r in rows)
    usage = any(r[5] for r in rows)
    head = (
        '<table class="scores"><thead><tr><th>Metric</th><th class="num">Value</th>'
        + ("<th>Reason and verdicts</th>" if reasons else "")
        + ("<th>Source</th>" if sources else "")
        + ('<th class="num">Calls / tokens</th>' if usage else "")
        + "</tr></thead><tbody>"
    )
    body = [
        f'<tr class="{status}" data-metric="{esc(metric)}"><td>{esc(metric)}</td>'
        f'<td class="num value">{shown}</td>'
        + (f"<td>{why}</td>" if reasons else "")
        + (f'<td class="muted">{source or "—"}</td>' if sources else "")
        + (f'<td class="num">{spent or "—"}</td>' if usage else "")
        + "</tr>"
        for status, metric, shown, why, source, spent in rows
    ]
    return head + "".join(body) + "</tbody></table>"


def _text_block(label: str, text: str | None) -> str:
    if text is None:
        return f'<p><strong>{esc(label)}</strong> <span class="muted">none</span></p>'
    return f'<p><strong>{esc(label)}</strong></p><div class="text">{esc(text)}</div>'


def _contexts_table(sample: Sample) -> str:
    with_ids = any(ctx.id is not None for ctx in sample.contexts)
    with_scores = any(ctx.score is not None for ctx in sample.contexts)
    out = [
        '<table class="contexts"><thead><tr><th class="num">Rank</th>'
        + ("<th>Id</th>" if with_ids else "")
        + ('<th class="num">Retriever score</th>' if with_scores else "")
        + "<th>Label</th><th>Text</th></tr></thead><tbody>"
    ]
    for rank, ctx in enumerate(sample.contexts, start=1):
        out.append(
            f'<tr><td class="num">{rank}</td>'
            + (f"<td>{esc(ctx.id or '—')}</td>" if with_ids else "")
            + (f'<td class="num">{number(ctx.score)}</td>' if with_scores else "")
            + f"<td>{_relevance_tag(sample, ctx)}</td>"
            f'<td><div class="text">{esc(ctx.text)}</div></td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def _drilldown_one(
    pipeline: str,
    sample_id: str,
    sample: Sample | None,
    ev: Evaluation,
    status: str,
    others: Sequence[str],
    scored: Container[str] = frozenset(),
) -> list[str]:
    anchor = sample_anchor(sample_id, pipeline)
    question = f' <span class="q">{esc(sample.question)}</span>' if sample is not None else ""
    out = [
        f'<details class="sample" id="{anchor}" data-pipeline="{esc(pipeline)}">',
        f'<summary>{esc(sample_id)} <span class="muted">{esc(status)}</span>{question}</summary>',
    ]
    if others:
        links = ", ".join(
            f'<a href="#{sample_anchor(sample_id, other)}">{esc(other)}</a>' for other in others
        )
        out.append(f'<p class="muted other-runs">The same sample in {links}.</p>')
    if sample is None:
        out.append('<p class="muted">The sample record was not given to the report.</p>')
    else:
        history = conversation_block(sample, pipeline, scored)
        if history:
            out.append(history)
        out.append(_text_block("Question", sample.question))
        steps = trajectory_block(sample)
        if steps:
            out.append(steps)
        out.append(_text_block("Answer", sample.answer))
        out.append(_text_block("Reference", sample.reference))
        out.append(f"<p><strong>Contexts</strong> ({len(sample.contexts)})</p>")
        if sample.contexts:
            out.append(_contexts_table(sample))
    out.append(_score_table(ev, sample_id))
    out.append("</details>")
    return out


def sample_order(
    name: str, ev: Evaluation, index: Mapping[str, Sample], diagnosis: Diagnosis | str | None
) -> list[str]:
    """A pipeline's sample ids: the diagnosed order (dangerous first), then the rest."""
    order = [row.sample_id for row in diagnosis.rows] if isinstance(diagnosis, Diagnosis) else []
    return list(dict.fromkeys([*order, *ev.sample_ids, *index]))


def drilldown_section(
    pipelines: Mapping[str, Evaluation],
    index: Mapping[str, Mapping[str, Sample]],
    diagnoses: Mapping[str, Diagnosis | str],
) -> list[str]:
    out = ['<section id="samples"><h2>Samples</h2>']
    out.append(
        '<p id="sample-tools" hidden><button type="button" id="expand-all">Expand all</button> '
        '<button type="button" id="collapse-all">Collapse all</button></p>'
    )
    ids_of = {
        name: sample_order(name, ev, index[name], diagnoses.get(name))
        for name, ev in pipelines.items()
    }
    members = {name: set(ids) for name, ids in ids_of.items()}
    for name, ev in pipelines.items():
        if len(pipelines) > 1:
            out.append(f"<h3>{esc(name)}</h3>")
        diag = diagnoses.get(name)
        quadrant = (
            {r.sample_id: r.quadrant.value for r in diag.rows}
            if isinstance(diag, Diagnosis)
            else {}
        )
        for sid in ids_of[name]:
            others = [o for o in pipelines if o != name and sid in members[o]]
            out.extend(
                _drilldown_one(
                    name,
                    sid,
                    index[name].get(sid),
                    ev,
                    quadrant.get(sid, ""),
                    others,
                    members[name],
                )
            )
    out.append("</section>")
    return out
