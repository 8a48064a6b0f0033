"""Everything this adapter takes from the ``langsmith`` package, imported in one place.

LangSmith reads its tracing switches when first imported, so `quiet_frameworks` runs just
before; a missing or broken ``langsmith`` then fails here with the one sentence
`ragbridge.adapters._extras.missing_extra` writes (what needs it, and the extra to install),
whichever module of ``ragbridge.adapters.langsmith`` was imported first. The other modules
import LangSmith's names from here, so this list is the adapter's whole LangSmith surface.
"""

from __future__ import annotations

__all__ = [
    "Client",
    "EvaluationResult",
    "EvaluationResults",
    "Example",
    "Run",
    "RunEvaluator",
    "run_helpers",
]

from ragbridge.adapters._extras import missing_extra
from ragbridge.adapters._frameworks import quiet_frameworks

quiet_frameworks()  # before langsmith is imported

try:  # every name at once: a LangSmith too old or broken to have one also names the extra
    from langsmith import Client, run_helpers
    from langsmith.evaluation.evaluator import (
        EvaluationResult,
        EvaluationResults,
        RunEvaluator,
    )
    from langsmith.schemas import Example, Run
except ImportError as exc:
    raise missing_extra("ragbridge.adapters.langsmith", "langsmith", "langsmith", exc) from exc
