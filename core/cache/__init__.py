"""The cache: judge replies, embeddings and whole Scores, kept so that nothing paid for is paid
twice.

`disk` is the SQLite store, `backend` the contract any store meets (Redis lives in the adapters),
`guard` keeps a run going when its store is lost, `scores` and `result_key` reuse whole Scores.
The names of `disk` are re-exported here, so `ragbridge.core.cache.Cache` reads as it always did.
"""

from .disk import (
    CACHE_FORMAT_VERSION,
    SCHEMA_VERSION,
    Cache,
    CachedReply,
    CacheGroups,
    CacheStats,
    EmbeddingGroup,
    ReplyGroup,
    ReplyRow,
    cache_key,
    canonical_json,
    decode_vector,
    default_cache_path,
    encode_vectors,
    facts_json,
    open_cache,
    text_hash,
)

__all__ = [
    "CACHE_FORMAT_VERSION",
    "SCHEMA_VERSION",
    "Cache",
    "CacheGroups",
    "CacheStats",
    "CachedReply",
    "EmbeddingGroup",
    "ReplyGroup",
    "ReplyRow",
    "cache_key",
    "canonical_json",
    "decode_vector",
    "default_cache_path",
    "encode_vectors",
    "facts_json",
    "open_cache",
    "text_hash",
]
