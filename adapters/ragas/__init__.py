"""RAGAS adapter: `Sample`s in and out of RAGAS's data forms, RAGAS's metrics on ragbridge's
judge, embedder and cache, and ragbridge's measures inside ``ragas.evaluate``.

Why it exists: teams compare ragbridge's measures with RAGAS's on the same data, or already keep
their evaluation sets in RAGAS's schema. Both directions must be lossless where RAGAS can carry a
field, and loud where it cannot.

* **Rows** (`ragbridge.adapters.ragas.rows`): samples as RAGAS's single-turn rows and back, the
  JSONL form, and the ``ragbridge`` record (`ragas_extras`) for what RAGAS has no field for.
  Plain data: it imports no RAGAS.
* **Datasets** (`ragbridge.adapters.ragas.datasets`): RAGAS's ``EvaluationDataset`` and the
  Hugging Face ``Dataset`` form, built from samples and read back into them.
* **Conversations** (`ragbridge.adapters.ragas.conversations`): a `Conversation` as RAGAS's
  ``MultiTurnSample`` and back, exactly (`to_multi_turn_sample`, `conversation_from_multi_turn`,
  and for datasets `to_multi_turn_dataset`, `from_multi_turn_dataset`).
* **Agents** (`ragbridge.adapters.ragas.agent_metrics`): `ToolCallAccuracy` and `ToolCallF1`
  under RAGAS's names and arguments, for ``multi_turn_ascore`` and ``ragas.evaluate``, scored
  by ragbridge's core tool-call measures (RAGAS's values with ``compat="ragas"``, the default).
* **Models** (`ragbridge.adapters.ragas.models`): ragbridge's judge and embedder as RAGAS's LLMs
  and embeddings (`RagasJudge`, `RagasEmbedder`, ... ``.for_collections()``), and RAGAS's or
  LangChain's models as ragbridge's (`judge_from_ragas`, `embedder_from_ragas`).
* **Metrics** (`ragbridge.adapters.ragas.metrics`): ragbridge's measures as RAGAS metrics
  (`RagbridgeMetric`, `ragbridge_metrics`), their columns named as RAGAS names its own
  (`ragbridge.adapters.ragas.names`).
* **Criteria** (`ragbridge.adapters.ragas.criteria`): ``AspectCritic`` and ``RubricsScore``
  under RAGAS's names and arguments, on ragbridge's `Aspect` and `Rubric`.
* **Running and results** (`ragbridge.adapters.ragas.runner`, `.results`, `.callbacks`):
  ``ragas.evaluate`` watched through RAGAS's callbacks, so that its result says why a cell is
  NaN (`RagasResult`), and every RAGAS score as a ragbridge `Score` — never NaN.
* **Provider** (`ragbridge.adapters.ragas.provider`): RAGAS as a provider of ragbridge's
  measures (``"faithfulness:ragas"``), registered through the ``ragbridge.providers`` entry
  point and used by `ragbridge.adapters.compare`.

Names are exported lazily (`ragbridge.core.exports.lazy_exports`): the rows, the name table and
the provider import no RAGAS (``ragbridge demo`` writes the RAGAS file and the registry lists
RAGAS's providers without paying for RAGAS's start-up, seconds with datasets and torch). A name
that needs RAGAS imports it on first use; without ragas that raises ImportError naming the
extra (`INSTALL_HINT`). RAGAS sends telemetry unless ``RAGAS_DO_NOT_TRACK=true`` is set, which
the adapter sets (a value the user set wins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbridge.adapters._extras import install_hint
from ragbridge.core.exports import lazy_exports

INSTALL_HINT = install_hint("ragas")
"""What to run when the ``ragas`` extra is missing."""

if TYPE_CHECKING:
    from .agent_metrics import ToolCallAccuracy, ToolCallF1
    from .conversations import (
        conversation_from_multi_turn,
        from_multi_turn_dataset,
        to_multi_turn_dataset,
        to_multi_turn_sample,
    )
    from .criteria import AspectCritic, RubricsScore
    from .datasets import from_hf_dataset, from_ragas_dataset, to_hf_dataset, to_ragas_dataset
    from .metrics import (
        RagbridgeMetric,
        RagbridgeScoreError,
        RagbridgeSkipped,
        ragbridge_metric,
        ragbridge_metrics,
    )
    from .models import (
        RagasEmbedder,
        RagasInstructorJudge,
        RagasJudge,
        RagasJudgeError,
        RagasModernEmbedder,
        embedder_from_ragas,
        judge_from_ragas,
    )
    from .names import RAGAS_METRIC_NAMES, RAGAS_NAMES
    from .results import RagasResult, failure_from_ragas, score_from_ragas, scores_from_ragas
    from .rows import (
        EXTRAS_KEY,
        LEGACY_NAMES,
        RAGAS_FIELDS,
        from_ragas_jsonl,
        ragas_extras,
        to_ragas_jsonl,
    )
    from .runner import aevaluate, evaluate

_EXPORTS: dict[str, str] = {
    "EXTRAS_KEY": "rows",
    "LEGACY_NAMES": "rows",
    "RAGAS_FIELDS": "rows",
    "from_ragas_jsonl": "rows",
    "ragas_extras": "rows",
    "to_ragas_jsonl": "rows",
    "RAGAS_METRIC_NAMES": "names",
    "RAGAS_NAMES": "names",
    "from_hf_dataset": "datasets",
    "from_ragas_dataset": "datasets",
    "to_hf_dataset": "datasets",
    "to_ragas_dataset": "datasets",
    "conversation_from_multi_turn": "conversations",
    "from_multi_turn_dataset": "conversations",
    "to_multi_turn_dataset": "conversations",
    "to_multi_turn_sample": "conversations",
    "RagasEmbedder": "models",
    "RagasInstructorJudge": "models",
    "RagasJudge": "models",
    "RagasJudgeError": "models",
    "RagasModernEmbedder": "models",
    "embedder_from_ragas": "models",
    "judge_from_ragas": "models",
    "AspectCritic": "criteria",
    "RubricsScore": "criteria",
    "ToolCallAccuracy": "agent_metrics",
    "ToolCallF1": "agent_metrics",
    "RagbridgeMetric": "metrics",
    "RagbridgeScoreError": "metrics",
    "RagbridgeSkipped": "metrics",
    "ragbridge_metric": "metrics",
    "ragbridge_metrics": "metrics",
    "RagasResult": "results",
    "failure_from_ragas": "results",
    "score_from_ragas": "results",
    "scores_from_ragas": "results",
    "aevaluate": "runner",
    "evaluate": "runner",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "EXTRAS_KEY",
    "INSTALL_HINT",
    "LEGACY_NAMES",
    "RAGAS_FIELDS",
    "RAGAS_METRIC_NAMES",
    "RAGAS_NAMES",
    "AspectCritic",
    "RagasEmbedder",
    "RagasInstructorJudge",
    "RagasJudge",
    "RagasJudgeError",
    "RagasModernEmbedder",
    "RagasResult",
    "RagbridgeMetric",
    "RagbridgeScoreError",
    "RagbridgeSkipped",
    "RubricsScore",
    "ToolCallAccuracy",
    "ToolCallF1",
    "aevaluate",
    "conversation_from_multi_turn",
    "embedder_from_ragas",
    "evaluate",
    "failure_from_ragas",
    "from_hf_dataset",
    "from_multi_turn_dataset",
    "from_ragas_dataset",
    "from_ragas_jsonl",
    "judge_from_ragas",
    "ragas_extras",
    "ragbridge_metric",
    "ragbridge_metrics",
    "score_from_ragas",
    "scores_from_ragas",
    "to_hf_dataset",
    "to_multi_turn_dataset",
    "to_multi_turn_sample",
    "to_ragas_dataset",
    "to_ragas_jsonl",
]
