"""What a citation check found, and the two ALCE values computed from it.

Both providers of ``citation_recall`` and ``citation_precision`` fill a `CitationCheck` (the
judge from its reply, the offline provider lexically) and score it here, so the two measures
have one definition whatever checked the statements. Kept apart from the measure classes so the
offline provider can import it without importing the measures (no import loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..results.evaluation import FailureKind, Score
from ..sample import Sample
from .types import CitedAnswer

__all__ = [
    "UNCITED",
    "CheckedStatement",
    "CitationCheck",
    "distinct",
    "precision_score",
    "recall_score",
]


UNCITED = "no statement cites a context"


@dataclass
class CheckedStatement:
    """One statement with its distinct cited contexts (0-based, in order of first citation),
    the key each was cited by, and the verdicts: ``supported`` by them together (None: the
    provider could not check it), per context whether it supports the statement ``alone`` and
    whether it is ``needed`` (the others do not support the statement without it)."""

    text: str
    contexts: list[int]
    keys: list[str]
    supported: bool | None = None
    alone: list[bool] = field(default_factory=list)
    needed: list[bool] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def relevant(self, k: int) -> bool:
        """ALCE: a citation of a supported statement that supports it alone or is needed."""
        return bool(self.supported) and (self.alone[k] or self.needed[k])


@dataclass
class CitationCheck:
    """Every statement of an answer, checked; the input of both measures' values."""

    statements: list[CheckedStatement]

    def statement_rows(self, sample: Sample) -> list[dict[str, Any]]:
        return [
            {
                "text": s.text,
                "cited": s.keys,
                "contexts": s.contexts,
                "context_ids": [sample.contexts[i].id for i in s.contexts],
                "supported": s.supported if s.contexts else False,
                **s.extra,
            }
            for s in self.statements
        ]

    def citation_rows(self, sample: Sample) -> list[dict[str, Any]]:
        return [
            {
                "statement": j,
                "key": s.keys[k],
                "context": i,
                "context_id": sample.contexts[i].id,
                "alone": s.alone[k],
                "needed": s.needed[k],
                "relevant": s.relevant(k),
            }
            for j, s in enumerate(self.statements)
            if s.supported is not None
            for k, i in enumerate(s.contexts)
        ]


def distinct(cited: CitedAnswer) -> list[CheckedStatement]:
    """The statements with their distinct cited contexts, nothing judged yet."""
    out: list[CheckedStatement] = []
    for statement in cited.statements:
        contexts: list[int] = []
        keys: list[str] = []
        for c in statement.citations:
            if c.context is not None and c.context not in contexts:
                contexts.append(c.context)
                keys.append(c.key)
        out.append(CheckedStatement(statement.text, contexts, keys))
    return out


def _details(check: CitationCheck, sample: Sample) -> dict[str, Any]:
    return {
        "statements": check.statement_rows(sample),
        "citations": check.citation_rows(sample),
    }


def recall_score(check: CitationCheck, sample: Sample) -> Score:
    """Share of the checkable statements whose cited contexts support them (uncited: 0)."""
    counted = [s for s in check.statements if s.extra.get("checkable", True)]
    if not counted:
        return Score.fail(FailureKind.NO_CLAIMS, "no statement of the answer could be checked")
    supported = sum(1 for s in counted if s.contexts and s.supported)
    uncited = sum(1 for s in counted if not s.contexts)
    reason = f"{supported} of {len(counted)} statements are supported by the contexts they cite"
    if uncited:
        reason += f" ({uncited} cite nothing)"
    details = {**_details(check, sample), "supported": supported, "total": len(counted)}
    return Score(value=supported / len(counted), reason=reason, details=details)


def precision_score(check: CitationCheck, sample: Sample) -> Score:
    """Share of the citations (of checkable statements) that are relevant, per ALCE."""
    rows = check.citation_rows(sample)
    if not rows:
        return Score.fail(
            FailureKind.NO_CLAIMS, "no cited statement of the answer could be checked"
        )
    relevant = sum(1 for r in rows if r["relevant"])
    unsupported = sum(
        len(s.contexts) for s in check.statements if s.supported is False and s.contexts
    )
    reason = f"{relevant} of {len(rows)} citations are relevant"
    if relevant < len(rows):
        reason += (
            f" ({unsupported} cite a statement its citations do not support, "
            f"{len(rows) - relevant - unsupported} are not needed)"
        )
    details = {**_details(check, sample), "relevant": relevant, "total": len(rows)}
    return Score(value=relevant / len(rows), reason=reason, details=details)
