"""DeepEval adapter: test cases in and out (`test_cases`), ragbridge's measures as DeepEval
metrics (`metrics`, `dropins`), judges across the border (`models`), DeepEval as a provider
(`provider`).

* **Test cases** (`ragbridge.adapters.deepeval.test_cases`): `Sample`s to and from
  ``LLMTestCase``, ``Golden``, ``EvaluationDataset`` and DeepEval's JSON files, losslessly
  (what DeepEval has no field for travels under ``metadata["ragbridge"]``, `META_KEY`);
  hand-built test cases convert too.
* **Metrics** (`ragbridge.adapters.deepeval.metrics`): any ragbridge measure as a DeepEval
  ``BaseMetric`` (`as_deepeval_metric`, `RagbridgeMetric`), shown as ``ragbridge/<measure>`` in
  ragbridge's direction; a failed or skipped ragbridge score is DeepEval's ``error``, never a
  low score.
* **Drop-ins** (`ragbridge.adapters.deepeval.dropins`): `FaithfulnessMetric`,
  `AnswerRelevancyMetric`, `ContextualPrecisionMetric`, `ContextualRecallMetric`,
  `HallucinationMetric` — DeepEval's class names, arguments, columns, required fields and
  directions, so that changing the import is the whole migration; `GEval`
  (`ragbridge.adapters.deepeval.criteria`) the same for a team's own criterion.
* **Conversations** (`ragbridge.adapters.deepeval.conversations`): `Conversation`s to and from
  ``ConversationalTestCase`` (`to_conversational_test_case`, `from_conversational_test_case`),
  exactly; and (`ragbridge.adapters.deepeval.conversation_metrics`) the drop-ins
  `TurnFaithfulnessMetric`, `TurnRelevancyMetric`, `TurnContextualPrecisionMetric`,
  `TurnContextualRecallMetric`, `TurnContextualRelevancyMetric`, `KnowledgeRetentionMetric`,
  `ConversationCompletenessMetric`: DeepEval's names and arguments, each turn scored as a
  sample and averaged, the conversation measures in one judge call.
* **Agents** (`ragbridge.adapters.deepeval.agent_metrics`): the drop-ins `ToolCorrectnessMetric`
  (DeepEval's number, no judge) and `TaskCompletionMetric` on ``LLMTestCase(tools_called=,
  expected_tools=)``, which convert to a sample's ``trajectory`` and ``reference_tool_calls``.
* **Models** (`ragbridge.adapters.deepeval.models`): `DeepEvalJudge` runs DeepEval's own metrics
  on a ragbridge judge (retries, cache, usage); `judge_of_model` reads DeepEval's ``model=``.
* **Provider** (`ragbridge.adapters.deepeval.provider`): ``"faithfulness:deepeval"`` and the
  other DeepEval RAG metrics as providers of ragbridge's measures (the ``ragbridge.providers``
  entry point), for `ragbridge.adapters.compare`.

Names are exported lazily, so that the registry can load the provider without importing
DeepEval; using any name of the adapter without deepeval raises ImportError naming the extra
(`INSTALL_HINT`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragbridge.adapters._extras import install_hint
from ragbridge.core.exports import lazy_exports

INSTALL_HINT = install_hint("deepeval")
"""What to run when the ``deepeval`` extra is missing."""

if TYPE_CHECKING:
    from .agent_metrics import TaskCompletionMetric, ToolCorrectnessMetric
    from .conversation_metrics import (
        ConversationCompletenessMetric,
        DeepEvalConversationalMetric,
        KnowledgeRetentionMetric,
        TurnContextualPrecisionMetric,
        TurnContextualRecallMetric,
        TurnContextualRelevancyMetric,
        TurnFaithfulnessMetric,
        TurnRelevancyMetric,
    )
    from .conversations import (
        from_conversational_test_case,
        from_conversational_test_cases,
        to_conversational_test_case,
        to_conversational_test_cases,
    )
    from .criteria import GEval
    from .dropins import (
        AnswerRelevancyMetric,
        ContextualPrecisionMetric,
        ContextualRecallMetric,
        DeepEvalNamedMetric,
        FaithfulnessMetric,
        HallucinationMetric,
    )
    from .metrics import RagbridgeMetric, as_deepeval_metric
    from .models import DeepEvalJudge, JudgeCallFailed, judge_of_model
    from .test_cases import (
        META_KEY,
        from_dataset,
        from_golden,
        from_test_case,
        load_test_cases,
        save_test_cases,
        to_dataset,
        to_golden,
        to_test_case,
    )

_EXPORTS: dict[str, str] = {
    "META_KEY": "test_cases",
    "from_dataset": "test_cases",
    "from_golden": "test_cases",
    "from_test_case": "test_cases",
    "load_test_cases": "test_cases",
    "save_test_cases": "test_cases",
    "to_dataset": "test_cases",
    "to_golden": "test_cases",
    "to_test_case": "test_cases",
    "RagbridgeMetric": "metrics",
    "as_deepeval_metric": "metrics",
    "AnswerRelevancyMetric": "dropins",
    "ContextualPrecisionMetric": "dropins",
    "ContextualRecallMetric": "dropins",
    "DeepEvalNamedMetric": "dropins",
    "GEval": "criteria",
    "FaithfulnessMetric": "dropins",
    "HallucinationMetric": "dropins",
    "DeepEvalJudge": "models",
    "from_conversational_test_case": "conversations",
    "from_conversational_test_cases": "conversations",
    "to_conversational_test_case": "conversations",
    "to_conversational_test_cases": "conversations",
    "ConversationCompletenessMetric": "conversation_metrics",
    "DeepEvalConversationalMetric": "conversation_metrics",
    "KnowledgeRetentionMetric": "conversation_metrics",
    "TurnContextualPrecisionMetric": "conversation_metrics",
    "TurnContextualRecallMetric": "conversation_metrics",
    "TurnContextualRelevancyMetric": "conversation_metrics",
    "TurnFaithfulnessMetric": "conversation_metrics",
    "TurnRelevancyMetric": "conversation_metrics",
    "JudgeCallFailed": "models",
    "TaskCompletionMetric": "agent_metrics",
    "ToolCorrectnessMetric": "agent_metrics",
    "judge_of_model": "models",
}

__all__ = [
    "INSTALL_HINT",
    "META_KEY",
    "AnswerRelevancyMetric",
    "ContextualPrecisionMetric",
    "ContextualRecallMetric",
    "ConversationCompletenessMetric",
    "DeepEvalConversationalMetric",
    "DeepEvalJudge",
    "DeepEvalNamedMetric",
    "FaithfulnessMetric",
    "GEval",
    "HallucinationMetric",
    "JudgeCallFailed",
    "KnowledgeRetentionMetric",
    "RagbridgeMetric",
    "TaskCompletionMetric",
    "ToolCorrectnessMetric",
    "TurnContextualPrecisionMetric",
    "TurnContextualRecallMetric",
    "TurnContextualRelevancyMetric",
    "TurnFaithfulnessMetric",
    "TurnRelevancyMetric",
    "as_deepeval_metric",
    "from_conversational_test_case",
    "from_conversational_test_cases",
    "from_dataset",
    "from_golden",
    "from_test_case",
    "judge_of_model",
    "load_test_cases",
    "save_test_cases",
    "to_conversational_test_case",
    "to_conversational_test_cases",
    "to_dataset",
    "to_golden",
    "to_test_case",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
