"""A self-contained HTML report of an evaluation: one file to attach to a PR, a ticket or a mail.

Why it exists: a table of means answers "how good is it?" but not "where does it break, and can
I trust the judge?". This report puts on one page what the core already computes — the metric
summaries with their confidence intervals and failure counts (`Evaluation.summary`), the paired
comparison of two runs (`ragbridge.core.results.stats.compare`), a sample explorer to sort, filter
and search the samples and to put two runs side by side per question, the trend of every metric
over the recorded runs (``history``), the score distributions, the retrieval × generation
quadrants with the dangerous *bad retrieval, good-looking answer* samples first (`diagnose`),
the cross-framework comparison (`compare_frameworks`) and, per sample, what was asked,
retrieved and answered with every claim/statement/context verdict behind each score.

Run-level warnings (``Evaluation.metadata["warnings"]``: likely input mistakes such as context
ids that never match the relevance labels) and an early stop (``metadata["aborted"]``) are shown
in a red block at the top of the overview, above the numbers they call into question.

It is one HTML file with inline CSS, inline SVG and one inline script (the explorer, and opening
a sample's drill-down when a link points at it). It makes no network request of any kind — no
CDN, no web font, no remote image — so it opens the same on a laptop on a plane and in a CI
artefact viewer, and it can be archived as is. Without JavaScript every section but the
explorer's table still reads.

Everything shown comes from user data (questions, answers, retrieved passages, judge reasons,
metadata, ids), and retrieved passages are exactly where hostile markup turns up. Every such
text is escaped with ``html.escape(..., quote=True)``, in element text and in attributes alike,
and anchor ids are built from a hash of the sample id, never from the raw id. The explorer's
data is JSON inside a ``<script type="application/json">`` element with ``<``, ``>`` and ``&``
written as JSON escapes, so no text can end the element; the script reads it with
``textContent`` and writes cells with ``textContent``. A Content-Security-Policy lets the page
run its own script only (by hash) and load nothing.

The package: `page` (the entry points and the overview), `sections` (summary, agreement and
cross-framework tables), `explorer` (the sample table's data and the paired comparison),
`charts` (histograms, quadrants, trends), `drilldown` (one ``<details>`` per sample), `markup`
(escaping, anchors, number formats) and `assets` (the stylesheet and the script).

Only the standard library and ragbridge's core are used: no framework, no template engine.
"""

from __future__ import annotations

from .charts import histogram_counts
from .markup import DEFAULT_PIPELINE, sample_anchor
from .page import render_report, write_report

__all__ = [
    "DEFAULT_PIPELINE",
    "histogram_counts",
    "render_report",
    "sample_anchor",
    "write_report",
]
