"""RAGAS, imported through the one optional-import guard: the modules of this package that need
RAGAS import this one first (before an ``# isort: split``), so a missing or broken install is
one ImportError naming the extra, and RAGAS's telemetry switch is set before RAGAS reads it.

``langchain_core`` is checked too: RAGAS's legacy stack (``ragas.evaluate``, its LLM wrappers,
the callbacks this package watches a run with) is built on it.
"""

from __future__ import annotations

from ragbridge.adapters._extras import require
from ragbridge.adapters._frameworks import quiet_frameworks

__all__: list[str] = []

WHAT = "ragbridge.adapters.ragas"

quiet_frameworks()  # before ragas is imported: it reads RAGAS_DO_NOT_TRACK once
require("ragas", extra="ragas", what=WHAT)
require("langchain_core", extra="ragas", what=WHAT, package="langchain-core")
