"""Judge prompt templates, one per task. ``get(id)`` returns one; ``templates()`` lists all.

Each task's template lives in the module named after its metric family (``faithfulness.py``
holds ``faithfulness.verify``, ...), the shared ``answer.analyze`` in its own module;
`base` holds the machinery.
"""

from __future__ import annotations

import importlib

from .base import DATA_NOT_INSTRUCTIONS, PromptTemplate, format_contexts, format_list, task_tag

__all__ = [
    "DATA_NOT_INSTRUCTIONS",
    "PromptTemplate",
    "format_contexts",
    "format_list",
    "get",
    "register",
    "task_tag",
    "templates",
]

# Modules defining templates; each calls `register` at import.
_MODULES: tuple[str, ...] = (
    "answer_analyze",
    "faithfulness",
    "context_precision",
    "context_recall",
    "answer_correctness",
    "graders",
    "context_assess",
    "context_relevance",
    "criteria",
    "missed_retrieval",
    "conversation",
    "agent",
    "rejection",
    "noise_sensitivity",
    "robustness",
    "citations",
)

_REGISTRY: dict[str, PromptTemplate] = {}
_loaded = False


def register(template: PromptTemplate) -> PromptTemplate:
    """Add a template; ids are unique (a second registration of an id is a bug)."""
    existing = _REGISTRY.get(template.id)
    if existing is not None and existing is not template:
        raise ValueError(f"prompt template {template.id!r} is registered twice")
    _REGISTRY[template.id] = template
    return template


def _load() -> None:
    global _loaded
    if not _loaded:
        for name in _MODULES:
            importlib.import_module(f".{name}", __name__)
        _loaded = True


def get(template_id: str) -> PromptTemplate:
    """The template with this id, e.g. ``get("faithfulness.verify").render(...)``."""
    _load()
    try:
        return _REGISTRY[template_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"no prompt template {template_id!r}; known: {known}") from None


def templates() -> list[PromptTemplate]:
    """Every registered template, sorted by id."""
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
