"""trec_eval's text output: ``measure<TAB>qid<TAB>value`` lines, byte for byte.

trec_eval prints ``"%-22s\\t%s\\t%.4f\\n"`` (counts with ``%ld``): the name is left-justified in
22 columns before the tab. Per-query lines come query by query (sorted ids), each in the measure
table's order; the ``all`` block follows with ``runid`` and ``num_q`` first.
"""

from __future__ import annotations

from collections.abc import Iterator

from .compute import RetrievalResult
from .measures import Measure

__all__ = ["format_trec_lines"]


def _value(measure: Measure, value: float) -> str:
    return str(round(value)) if measure.is_count else f"{value:.4f}"


def _line(name: str, qid: str, text: str) -> str:
    return f"{name:<22}\t{qid}\t{text}"


def format_trec_lines(
    result: RetrievalResult, *, per_query: bool = False, run_id: bool = False
) -> Iterator[str]:
    """Yield trec_eval's output lines (without newlines) for an evaluated run."""
    if per_query:
        for row, qid in enumerate(result.qids):
            for measure in result.measures:
                if measure.family == "num_q":
                    continue  # trec_eval prints num_q in the summary only
                value = float(result.values[measure][row])
                yield _line(measure.trec_name, qid, _value(measure, value))
    if run_id:
        yield _line("runid", "all", result.run_id or "")
    for measure, value in result.aggregate().items():
        yield _line(measure.trec_name, "all", _value(measure, value))
