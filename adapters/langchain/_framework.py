"""The LangChain names this adapter uses, imported once, behind the one optional-import guard.

Why one module: a user without the extra should read one sentence naming it
(`ragbridge.adapters._extras.missing_extra`) whichever module of the adapter is imported first,
and what the adapter needs from ``langchain-core`` is listed in one place. Every module of the
adapter that needs LangChain imports it from here.
"""

from __future__ import annotations

from ragbridge.adapters._extras import install_hint, missing_extra

__all__ = [
    "INSTALL_HINT",
    "AIMessage",
    "BaseCallbackHandler",
    "BaseMessage",
    "BaseRetriever",
    "Document",
    "HumanMessage",
    "Runnable",
    "RunnableConfig",
    "RunnableWithMessageHistory",
    "SystemMessage",
    "get_config_list",
    "merge_configs",
    "register_configure_hook",
]

INSTALL_HINT = install_hint("langchain")
"""What to run when the ``langchain`` extra is missing."""

try:  # every name at once: a langchain-core too old or broken to have one also names the extra
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.runnables.config import get_config_list, merge_configs
    from langchain_core.runnables.history import RunnableWithMessageHistory
    from langchain_core.tracers.context import register_configure_hook
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("ragbridge.adapters.langchain", "langchain-core", "langchain", exc) from exc
