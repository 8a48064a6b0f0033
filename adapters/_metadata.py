"""A framework document's metadata as JSON-safe values, the same way in every adapter.

Why shared: LangChain and LlamaIndex documents carry free-form metadata (dates, numpy numbers,
client objects), while a ragbridge `Context` or `SourceDocument` must survive ``save_samples``
and a test set's JSONL. Each adapter keeping its own copy of the rule would let them drift, so a
corpus read through one framework would save differently from the same corpus read through the
other. Imports nothing optional, so sharing it keeps the rule that no adapter imports another.
"""

from __future__ import annotations

__all__ = ["jsonable_metadata"]

import json
from collections.abc import Mapping
from typing import Any


def _jsonable(value: Any) -> Any:
    """``value`` itself when strict JSON can write it (no NaN or infinity), else its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def jsonable_metadata(metadata: Mapping[Any, Any] | None) -> dict[str, Any]:
    """``metadata`` with string keys and JSON-safe values (anything else is kept as its repr)."""
    return {str(key): _jsonable(value) for key, value in (metadata or {}).items()}
