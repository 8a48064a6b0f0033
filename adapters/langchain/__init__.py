"""LangChain adapter: capture what any Runnable retrieved (`capture`), run a chain or a retriever
over `Sample`s (`pipelines`), use LangChain models as ragbridge's judge and embedder (`models`),
and shadow-score a Runnable in production (`shadow`).

* **Capture** (`ragbridge.adapters.langchain.capture`): `RetrievalCapture` is a callback
  handler that records every retrieval inside a Runnable (LCEL, an agent's tool, a sub-chain)
  and groups them by the top-level run they belong to; `capture_retrievals` does the same with
  no callbacks passed, through LangChain's configure hook. Nothing in the chain changes.
* **Conversations** (`ragbridge.adapters.langchain.conversations`): `capture_conversations`
  replays a scripted user side through a ``RunnableWithMessageHistory``, a chain taking its
  chat history in its input, or a LangGraph message-state graph, each turn with the contexts
  retrieved during it and its tool calls.
* **Trajectories** (`ragbridge.adapters.langchain.trajectories`): `capture_trajectories` runs a
  tool-calling agent (LangGraph's ``create_react_agent``, ``create_agent``, an
  ``AgentExecutor``) on each sample and records every tool call with its result, timing and
  error, a retrieval tool's documents as that step's contexts; `trajectory_conversation` (and
  `capture_trajectory_conversations`) give the same record as the agent's message list.
* **Documents** (`ragbridge.adapters.langchain.documents`): a ``Document`` as a `Context`
  (`document_to_context`: its id from metadata or ``Document.id``, a score from metadata), and
  documents as the corpus `ragbridge.core.testset.generate_testset` writes questions from
  (`source_documents`).
* **Pipelines** (`ragbridge.adapters.langchain.pipelines`): `run_pipeline` runs a chain on each
  sample's question and fills in its answer and the contexts of the retrieval it answered from;
  `retrieve_only` runs a retriever alone, for the ranking measures.
* **Citations** (`ragbridge.adapters.langchain.citations`): an "answer with sources" chain's
  answer and the documents it numbered, in its output's order (`run_citation_chain`,
  `capture_citations`).
* **Models** (`ragbridge.adapters.langchain.models`): `LangChainJudge` (a chat model, with its
  structured output) and `LangChainEmbedder` (an ``Embeddings``).
* **Shadow scoring** (`ragbridge.adapters.langchain.shadow`): ``shadow(runnable, metrics)``
  serves as the Runnable does, records every request and scores a sample in the background.

Importing it without langchain-core raises ImportError naming the extra (`INSTALL_HINT`).
"""

from __future__ import annotations

from ._framework import INSTALL_HINT
from .capture import FROM_CAPTURE as FROM_CAPTURE
from .capture import Retrieval, RetrievalCapture, capture_retrievals
from .citations import arun_citation_chain, capture_citations, run_citation_chain
from .conversations import acapture_conversations, capture_conversations
from .documents import DEFAULT_ID_KEYS as DEFAULT_ID_KEYS
from .documents import DEFAULT_SCORE_KEYS as DEFAULT_SCORE_KEYS
from .documents import document_to_context, source_documents
from .models import LangChainEmbedder, LangChainJudge
from .models import map_error as map_error
from .models import to_langchain_messages as to_langchain_messages
from .pipelines import Progress as Progress
from .pipelines import aretrieve_only, arun_pipeline, retrieve_only, run_pipeline
from .shadow import ShadowRunnable, shadow
from .trajectories import (
    acapture_trajectories,
    acapture_trajectory_conversations,
    capture_trajectories,
    capture_trajectory_conversations,
    trajectory_conversation,
)

# The names above written ``X as X`` were importable from the single-file module too and stay so;
# they are not part of ``__all__`` (unchanged from that module).
__all__ = [
    "INSTALL_HINT",
    "LangChainEmbedder",
    "LangChainJudge",
    "Retrieval",
    "RetrievalCapture",
    "ShadowRunnable",
    "acapture_conversations",
    "acapture_trajectories",
    "acapture_trajectory_conversations",
    "aretrieve_only",
    "arun_citation_chain",
    "arun_pipeline",
    "capture_citations",
    "capture_conversations",
    "capture_retrievals",
    "capture_trajectories",
    "capture_trajectory_conversations",
    "document_to_context",
    "retrieve_only",
    "run_citation_chain",
    "run_pipeline",
    "shadow",
    "source_documents",
    "trajectory_conversation",
]
