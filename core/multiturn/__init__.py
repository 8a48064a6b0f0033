"""Conversations scored as conversations: the measures that read a whole one, a run that scores
its turns and itself together, and roll-ups over conversations.

Where each part lives:

* `record` — the rows a conversation is scored as: `conversation_record` (the whole
  conversation as one `Sample`) and the turn rows (`Conversation.turn_sample`);
* `measures` — ``knowledge_retention`` and ``conversation_completeness``, one shared judge
  call per conversation (template ``conversation.assess``);
* `run` — `evaluate_conversations`: turn metrics on turns, conversation metrics on
  conversations, one `Evaluation`, one engine;
* `rollups` — per conversation (`rollup`: mean, worst turn, first failing turn) and over
  conversations (`conversation_summary`, `compare_conversations`: the conversation is the unit
  of resampling and pairing).

A minimal run::

    from ragbridge.core import load_conversations
    from ragbridge.core.multiturn import evaluate_conversations, rollup

    evaluation = evaluate_conversations(load_conversations("chats.jsonl"), judge=judge)
    for row in rollup(evaluation, "faithfulness"):
        print(row.conversation, row.mean, row.first_failing_turn)

Names resolve on first use (`ragbridge.core.exports`): the measure registry imports `measures`
without paying for the runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy_exports

if TYPE_CHECKING:
    from .measures import ConversationCompleteness, KnowledgeRetention
    from .record import (
        LEVELS_KEY,
        conversation_record,
        conversation_rows,
        levels_of,
        record_level,
        split_row_id,
    )
    from .rollups import (
        ConversationRollup,
        compare_conversations,
        conversation_summary,
        per_conversation,
        rollup,
    )
    from .run import (
        CONVERSATION_METRICS,
        TURN_METRICS,
        aevaluate_conversations,
        estimate_conversations,
        evaluate_conversations,
    )

_EXPORTS: dict[str, str] = {
    "ConversationCompleteness": "measures",
    "KnowledgeRetention": "measures",
    "LEVELS_KEY": "record",
    "conversation_record": "record",
    "conversation_rows": "record",
    "levels_of": "record",
    "record_level": "record",
    "split_row_id": "record",
    "ConversationRollup": "rollups",
    "compare_conversations": "rollups",
    "conversation_summary": "rollups",
    "per_conversation": "rollups",
    "rollup": "rollups",
    "CONVERSATION_METRICS": "run",
    "TURN_METRICS": "run",
    "aevaluate_conversations": "run",
    "estimate_conversations": "run",
    "evaluate_conversations": "run",
}

__all__ = [
    "CONVERSATION_METRICS",
    "LEVELS_KEY",
    "TURN_METRICS",
    "ConversationCompleteness",
    "ConversationRollup",
    "KnowledgeRetention",
    "aevaluate_conversations",
    "compare_conversations",
    "conversation_record",
    "conversation_rows",
    "conversation_summary",
    "estimate_conversations",
    "evaluate_conversations",
    "levels_of",
    "per_conversation",
    "record_level",
    "rollup",
    "split_row_id",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
