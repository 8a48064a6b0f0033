"""The DeepEval names this adapter uses, imported once, behind the one optional-import guard.

Why one module: DeepEval reads its settings and ``.env`` files when imported, so its telemetry
switch must be set first (`quiet_frameworks`), and a user without the extra should read one
sentence naming it (`ragbridge.adapters._extras.missing_extra`). Every module of the adapter
that needs DeepEval imports it from here; `ragbridge.adapters.deepeval.provider` does so only
when asked for a score, so that registering the providers stays cheap.
"""

from __future__ import annotations

from ragbridge.adapters._extras import missing_extra
from ragbridge.adapters._frameworks import quiet_frameworks

__all__ = [
    "DEEPEVAL_VERSION",
    "BaseMetric",
    "DeepEvalBaseLLM",
    "EvaluationDataset",
    "Golden",
    "LLMTestCase",
    "MissingTestCaseParamsError",
    "RetrievedContextData",
    "deepeval_metrics",
]

quiet_frameworks()  # before deepeval is imported: it reads its settings and .env then

try:  # every name at once: a DeepEval too old or broken to have one also names the extra
    from deepeval import metrics as deepeval_metrics
    from deepeval._version import __version__ as DEEPEVAL_VERSION
    from deepeval.dataset import EvaluationDataset, Golden
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.metrics import BaseMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase
    from deepeval.test_case.llm_test_case import RetrievedContextData
except ImportError as exc:
    raise missing_extra("ragbridge.adapters.deepeval", "deepeval", "deepeval", exc) from exc
