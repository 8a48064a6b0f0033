"""Escaping, anchors and number formats shared by every part of the report.

Every user-supplied text (questions, answers, passages, reasons, ids, metadata) goes through
`esc` before it reaches the page, in element text and quoted attributes alike; data handed to the
page's script goes through `json_for_script`. Anchor ids come from `sample_anchor`, never from a
raw id.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Any

__all__ = [
    "DEFAULT_PIPELINE",
    "LOWER_IS_BETTER",
    "PALETTE",
    "ci_text",
    "esc",
    "integer",
    "json_for_script",
    "number",
    "sample_anchor",
]

#: Label of the pipeline when a single `Evaluation` (not a mapping) is given.
DEFAULT_PIPELINE = "evaluation"

#: Measures of harm: a lower score is the better one.
LOWER_IS_BETTER = frozenset({"hallucination"})

PALETTE = ("#2f6fb0", "#d9822b", "#3a9a5b", "#8e5bb5", "#c0392b", "#6b7a8f")


def esc(value: object) -> str:
    """Escape any user-supplied value for element text *and* quoted attributes."""
    return html.escape(str(value), quote=True)


def json_for_script(data: Any) -> str:
    """``data`` as JSON that can sit inside a ``<script type="application/json">`` element.

    The HTML parser ends a script element at the first ``</script`` whatever the quoting, and
    ``<!--`` changes how it reads the rest; with ``<``, ``>`` and ``&`` written as JSON escapes
    (``\\u003c`` ...) no user text can close the element or start markup. ``JSON.parse`` of the
    element's ``textContent`` gives the data back unchanged.
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def sample_anchor(sample_id: str, pipeline: str = DEFAULT_PIPELINE) -> str:
    """The ``id`` of a sample's drill-down ``<details>``: ``sample-<slug>-<hash>``.

    The slug keeps only ASCII letters and digits of the id (for a readable URL); the hash of the
    pipeline and the raw id makes it unique. No character of the raw id reaches the attribute
    unless it is ``[a-z0-9]``.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", sample_id.lower()).strip("-")[:32].strip("-")
    digest = hashlib.sha256(f"{pipeline}\x00{sample_id}".encode()).hexdigest()[:12]
    return f"sample-{slug}-{digest}" if slug else f"sample-{digest}"


def number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def ci_text(low: float | None, high: float | None, *, signed: bool = False) -> str:
    if low is None or high is None:
        return "—"
    return f"[{low:+.3f}, {high:+.3f}]" if signed else f"[{low:.3f}, {high:.3f}]"


def integer(value: int) -> str:
    return f"{value:,}"
