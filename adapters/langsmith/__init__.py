"""LangSmith adapter: traces in (`runs`), evaluators out (`evaluators`).

* **Source side** (`ragbridge.adapters.langsmith.runs`): turn live run trees, API runs and
  exported JSONL into `Sample`s; `offline_client` runs ``langsmith.evaluate`` with no network.
* **Sink side** (`ragbridge.adapters.langsmith.evaluators`): ragbridge metrics as drop-in
  ``langsmith.evaluate`` evaluators, traced like LangSmith's own function evaluators
  (`ragbridge.adapters.langsmith.tracing`); where they find each field of a sample in a run is
  `ragbridge.adapters.langsmith.fields`. A team's own criteria (`criteria_evaluators`) and
  openevals' ``create_llm_as_judge`` counterpart are in `ragbridge.adapters.langsmith.criteria`.
* **Threads** (`ragbridge.adapters.langsmith.threads`): the traces of one conversation, as
  LangSmith's threads view groups them, read into a `Conversation` turn by turn; scored back
  by `ThreadEvaluator` (`ragbridge.adapters.langsmith.thread_evaluators`) as per-turn and
  per-thread feedback, or as an openevals trajectory evaluator.
* **Both sides** read traces with `ragbridge.adapters.langsmith.reading` (run fields, retriever
  runs, retrieved documents as contexts).

Importing it without langsmith raises ImportError naming the extra (`INSTALL_HINT`):
``pip install ".[langsmith]"`` in your ragbridge clone.
"""

from __future__ import annotations

from .criteria import (
    LLMJudge,
    create_async_llm_as_judge,
    create_llm_as_judge,
    criteria_evaluators,
)
from .evaluators import (
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
from .examples import example_id, example_records, save_examples, to_examples
from .runs import (
    INSTALL_HINT,
    OfflineClient,
    build_run_trees,
    load_runs,
    offline_client,
    sample_from_run,
    samples_from_project,
    samples_from_runs,
)
from .thread_evaluators import ThreadEvaluator, thread_evaluator
from .threads import (
    THREAD_KEYS,
    ThreadRead,
    UnthreadedRunsWarning,
    conversations_from_runs,
    read_thread_runs,
    read_threads,
    thread_key,
)
from .trajectories import (
    conversation_from_trace,
    sample_from_trace,
    samples_from_traces,
    trajectory_from_run,
)
from .trajectory_evaluators import (
    TRAJECTORY_ACCURACY_PROMPT,
    TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
    TrajectoryJudge,
    TrajectoryMatchEvaluator,
    create_async_trajectory_llm_as_judge,
    create_async_trajectory_match_evaluator,
    create_trajectory_llm_as_judge,
    create_trajectory_match_evaluator,
)

__all__ = [
    "INSTALL_HINT",
    "KEY_PRESETS",
    "LANGSMITH_TUTORIAL_KEYS",
    "THREAD_KEYS",
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "FieldSpec",
    "IdKey",
    "LLMJudge",
    "OfflineClient",
    "RagbridgeEvaluators",
    "RagbridgeRunEvaluator",
    "RagbridgeSummaryEvaluator",
    "ThreadEvaluator",
    "ThreadRead",
    "TrajectoryJudge",
    "TrajectoryMatchEvaluator",
    "UnthreadedRunsWarning",
    "build_run_trees",
    "conversation_from_trace",
    "conversations_from_runs",
    "create_async_llm_as_judge",
    "create_async_trajectory_llm_as_judge",
    "create_async_trajectory_match_evaluator",
    "create_llm_as_judge",
    "create_trajectory_llm_as_judge",
    "create_trajectory_match_evaluator",
    "criteria_evaluators",
    "evaluators",
    "example_id",
    "example_records",
    "load_runs",
    "offline_client",
    "read_thread_runs",
    "read_threads",
    "sample_from_run",
    "sample_from_trace",
    "samples_from_project",
    "samples_from_runs",
    "samples_from_traces",
    "save_examples",
    "summary_evaluators",
    "thread_evaluator",
    "thread_key",
    "to_examples",
    "trajectory_from_run",
]
