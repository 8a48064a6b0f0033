"""A LlamaIndex embedding model for the suite: hermetic, deterministic, and discriminating.

`HashEmbedding` hashes each word into one of 64 buckets, so texts that share words are close
and texts that do not are far apart: enough for a real `VectorStoreIndex` to retrieve the right
node, with no model and no network. Import it after ``pytest.importorskip("llama_index.core")``.
"""

from __future__ import annotations

import hashlib
import re

from llama_index.core.embeddings import BaseEmbedding

__all__ = ["HashEmbedding"]


class HashEmbedding(BaseEmbedding):
    """Bag of words hashed into a small vector: deterministic, and different texts score
    differently against a query."""

    dim: int = 64

    def _vec(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)
