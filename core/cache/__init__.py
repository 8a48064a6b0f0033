"""The cache: judge replies, embeddings and whole Scores, kept so that nothing paid for is paid
twice.

`disk` is the SQLite store (its housekeeping in `maintenance`, its SQL habits in `sqlite_io`),
`request_key` the key of a judge request, `stored` the forms and records every store shares,
`backend` the contract any store meets (Redis lives in the adapters), `guard` keeps a run going
when its store is lost, `scores` and `result_key` reuse whole Scores. The names the former
``cache`` module had are re-exported here, so `ragbridge.core.cache.Cache` reads as it always did.
"""

from .disk import SCHEMA_VERSION, Cache, default_cache_path, open_cache
from .request_key import CACHE_FORMAT_VERSION, cache_key, canonical_json
from .stored import (
    CachedReply,
    CacheGroups,
    CacheStats,
    EmbeddingGroup,
    ReplyGroup,
    ReplyRow,
    decode_vector,
    encode_vectors,
    facts_json,
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
