"""Did the run pass? The failure bar of the scoring commands, and the lines that say why not.

A metric fails its bar when every non-skipped cell failed, or when more than
``--max-failed-share`` of its non-skipped cells failed. Skipped cells (a ranking measure on a
question with no relevant document) are not failures: the measure does not apply there. A cell
that failed because the data lacks a field (``missing_input``) *is* a failure: the user asked for
a measure the data cannot support, and a table of dashes with exit 0 reads as a pass.

Each failing metric gets one line: its name, failed/total, its commonest causes of failure
(kind, count and message, up to three, so a mix of faults is not reported as one of them), and
the fix when there is a known one. A run whose judge or embedder was unusable
(``metadata["aborted"]``: stopped early, or every call it sent failed for one such reason,
however few) gets the engine's one line instead, and exit code 3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:  # imported where used: `ragbridge --help` must not load pydantic for it
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.tally import Tally

__all__ = ["MetricVerdict", "cli_words", "failing_metrics", "report_outcome"]

DEFAULT_MAX_FAILED_SHARE = 0.05

_CAUSES_SHOWN = 3
"""Distinct causes a failing metric's line names (kind, count and message each)."""

# Python argument names in core messages, as the command line spells them.
_CLI_WORDS = (
    ("(judge=...)", "(--judge SPEC)"),
    ("(embedder=...)", "(--embedder SPEC)"),
    ("(nli=...)", "(--nli MODEL)"),
    ("pass judge=...", "pass --judge SPEC"),
    ("pass embedder=...", "pass --embedder SPEC"),
)


def cli_words(message: str) -> str:
    """``message`` with Python argument names replaced by the flags that set them."""
    for python, flag in _CLI_WORDS:
        message = message.replace(python, flag)
    return message


@dataclass(frozen=True)
class MetricVerdict:
    """A metric that failed its bar: counts, its commonest failure kind, and its commonest
    causes (kind, count, message), most first."""

    label: str
    metric: str
    failed: int
    total: int
    kind: str
    kind_count: int
    message: str
    causes: tuple[tuple[str, int, str], ...] = ()

    @property
    def share(self) -> float:
        return self.failed / self.total if self.total else 0.0


def failing_metrics(
    evaluation: Evaluation | Tally, max_failed_share: float, *, label: str = ""
) -> list[MetricVerdict]:
    """The metrics of a run (its cells, or their `Tally`) that failed the bar, in column order."""
    from ragbridge.core.results.tally import Tally

    tally = evaluation if isinstance(evaluation, Tally) else Tally.of(evaluation)
    out: list[MetricVerdict] = []
    for metric, column in tally.columns.items():
        commonest = column.commonest_failure()
        if commonest is None:
            continue
        failed, total = column.n_failed, column.n_judged
        if failed < total and failed / total <= max_failed_share:
            continue
        kind, kind_count, message = commonest
        out.append(
            MetricVerdict(
                label=label,
                metric=metric,
                failed=failed,
                total=total,
                kind=kind,
                kind_count=kind_count,
                message=message,
                causes=tuple(column.commonest_causes(_CAUSES_SHOWN)),
            )
        )
    return out


_FIELD = re.compile(r"'(reference|relevance|answer|contexts|question|reference_contexts)'")


def _fix(verdict: MetricVerdict, source: str) -> str | None:
    """The known fix for the commonest failure, phrased for the command that ran."""
    if verdict.kind == "missing_input":
        if "contexts[" in verdict.message and ".id" in verdict.message:
            return "give every context an id matching the relevance labels"
        found = _FIELD.search(verdict.message)
        if found is None:
            return None
        field = found.group(1)
        flag = "--measures" if source == "compare" else "--metrics"
        drop = f"drop {verdict.metric} from {flag}"
        if source == "langsmith":
            return (
                f"LangSmith runs carry no '{field}' (labels live on dataset examples): {drop}, "
                f"or keep the samples with --save-samples, add '{field}' and run ragbridge eval"
            )
        return f"add '{field}' to the samples in the input file, or {drop}"
    if verdict.kind == "timeout":
        return "raise --timeout, or check that the endpoint answers"
    if verdict.kind == "rate_limited":
        return "lower --concurrency or raise --max-retries"
    return None


def _one_line(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def verdict_line(verdict: MetricVerdict, max_failed_share: float, source: str) -> str:
    """``context_recall: 4 of 4 cells failed — missing_input ×4: … ; fix: …``.

    Failures of several causes are listed with a count each, commonest first:
    ``judge_error ×16: … not a JSON object; judge_error ×6: HTTP 500 …; judge_error ×5: …``,
    then how many failed otherwise.
    """
    name = f"{verdict.label} {verdict.metric}" if verdict.label else verdict.metric
    why = f"{verdict.failed} of {verdict.total} cells failed"
    if verdict.failed < verdict.total:
        why += f" ({verdict.share:.0%}, more than --max-failed-share {max_failed_share:g})"
    causes = verdict.causes or ((verdict.kind, verdict.kind_count, verdict.message),)
    if len(causes) == 1 and causes[0][1] == verdict.failed:
        kind, count, message = causes[0]
        said = f"{kind} ×{count}: {_one_line(cli_words(message))}"
    else:
        said = "; ".join(
            f"{kind} ×{count}: {_one_line(cli_words(message), 200)}"
            for kind, count, message in causes
        )
        rest = verdict.failed - sum(count for _, count, _ in causes)
        if rest > 0:
            said += f"; {rest} more of other causes"
    line = f"{name}: {why} — {said}"
    fix = _fix(verdict, source)
    if fix:
        line += f"; fix: {fix}"
    return line


def report_outcome(
    evaluations: Mapping[str, Evaluation] | Evaluation,
    *,
    max_failed_share: float,
    source: str = "eval",
    tally: Tally | None = None,
) -> int:
    """Print the warnings and why the run failed (stderr); return the exit code.

    ``evaluations`` is one run or several labelled ones (``compare``: one per framework).
    ``tally`` stands for the cells of a single run that streamed them instead of keeping them.
    """
    from ragbridge.core.results.evaluation import Evaluation

    runs = {"": evaluations} if isinstance(evaluations, Evaluation) else dict(evaluations)
    for evaluation in runs.values():
        for warning in evaluation.metadata.get("warnings") or []:
            console.warn(str(warning))
    aborted = [str(ev.metadata["aborted"]) for ev in runs.values() if ev.metadata.get("aborted")]
    if aborted:
        for line in dict.fromkeys(aborted):
            console.error(line)
        return EXIT_ABORTED
    code = EXIT_OK
    for label, evaluation in runs.items():
        cells = tally if tally is not None and len(runs) == 1 else evaluation
        for verdict in failing_metrics(cells, max_failed_share, label=label):
            console.error(verdict_line(verdict, max_failed_share, source))
            code = EXIT_FAILED
    return code
