"""LangSmith adapter: traces in (`runs`), evaluators out (`evaluators`).

* **Source side** (`ragbridge.adapters.langsmith.runs`): turn live run trees, API runs and
  exported JSONL into `Sample`s; `offline_client` runs ``langsmith.evaluate`` with no network.
* **Sink side** (`ragbridge.adapters.langsmith.evaluators`): ragbridge metrics as drop-in
  ``langsmith.evaluate`` evaluators, traced like LangSmith's own function evaluators
  (`ragbridge.adapters.langsmith.tracing`).

Importing it without langsmith raises ImportError naming the extra:
``pip install "ragbridge[langsmith]"``.
"""

from __future__ import annotations

from ragbridge.adapters._frameworks import quiet_frameworks

quiet_frameworks()  # before the modules below import langsmith

from .evaluators import (  # noqa: E402
    KEY_PRESETS,
    LANGSMITH_TUTORIAL_KEYS,
    FieldSpec,
    IdKey,
    RagbridgeEvaluators,
    RagbridgeRunEvaluator,
    RagbridgeSummaryEvaluator,
    evaluators,
    summary_evaluators,
)
from .examples import example_id, example_records, save_examples, to_examples  # noqa: E402
from .runs import (  # noqa: E402
    INSTALL_HINT,
    OfflineClient,
    build_run_trees,
    load_runs,
    offline_client,
    sample_from_run,
    samples_from_project,
    samples_from_runs,
)

__all__ = [
    "INSTALL_HINT",
    "KEY_PRESETS",
    "LANGSMITH_TUTORIAL_KEYS",
    "FieldSpec",
    "IdKey",
    "OfflineClient",
    "RagbridgeEvaluators",
    "RagbridgeRunEvaluator",
    "RagbridgeSummaryEvaluator",
    "build_run_trees",
    "evaluators",
    "example_id",
    "example_records",
    "load_runs",
    "offline_client",
    "sample_from_run",
    "samples_from_project",
    "samples_from_runs",
    "save_examples",
    "summary_evaluators",
    "to_examples",
]
