"""What every cache backend stores and hands back: the stored forms and the records.

A networked backend (`ragbridge.core.cache.backend`; Redis in the adapters) stores the same
bytes as the SQLite file (`ragbridge.core.cache.disk`), so the two answer alike and cannot drift:
the helpers here are the one definition of each stored form (a text's digest, a reply's facts,
a reply's token log-probabilities, a vector's bytes), and the records are what any backend
returns (`CachedReply`, `CacheStats`) or what the SQLite file's housekeeping reports
(`ReplyRow`, `ReplyGroup`, `EmbeddingGroup`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt
from typing_extensions import TypedDict

from ..judging.judge import TokenLogprob
from ..judging.logprobs import usable_logprobs
from .request_key import canonical_value

__all__ = [
    "CacheGroups",
    "CacheStats",
    "CachedReply",
    "EmbeddingGroup",
    "ReplyGroup",
    "ReplyMeta",
    "ReplyRow",
    "StoredMeta",
    "Vectors",
    "decode_vector",
    "encode_vectors",
    "facts_json",
    "logprobs_json",
    "read_logprobs",
    "stored_meta",
    "text_hash",
]

#: Stored vector element type: float32, little-endian whatever the machine, so a cache file can
#: be copied between hosts.
_VECTOR_DTYPE = np.dtype("<f4")

Vectors: TypeAlias = Sequence[Sequence[float]] | npt.NDArray[np.floating[Any]]
"""What ``put_embeddings`` takes: one vector per text, as lists of numbers or one 2-D array."""


def text_hash(text: str) -> str:
    """Embeddings are keyed by a digest, not the text, so long passages cost 64 bytes each."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def facts_json(facts: Mapping[str, Any] | None) -> str | None:
    """The stored form of a reply's ``facts`` (see `ReplyMeta`), or None for none.

    `canonical_value` refuses what JSON would silently change (non-string keys, NaN), so what is
    read back is what was checked.
    """
    if facts is None:
        return None
    return json.dumps(canonical_value(dict(facts), "facts"), sort_keys=True)


def logprobs_json(logprobs: Sequence[TokenLogprob] | None) -> str | None:
    """The stored form of a reply's token log-probabilities, or None for none.

    A JSON list with one ``[token, logprob, [[alternative, logprob], ...]]`` per token: the
    order of the tokens and of each token's alternatives is kept, and Python's JSON writes a
    float as the shortest text that reads back as the same float, so a cached reply weights
    its score exactly as the fresh one did. The numbers are checked first
    (`ragbridge.core.judging.logprobs.usable_logprobs`); a list that cannot be used is
    stored as none. ``()`` (a reply of no tokens) stays ``[]``, distinct from None.
    """
    usable = usable_logprobs(logprobs)
    if usable is None:
        return None
    rows = [[t.token, t.logprob, [[k, v] for k, v in t.top.items()]] for t in usable]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def read_logprobs(stored: str | bytes | None) -> tuple[TokenLogprob, ...] | None:
    """The token log-probabilities `logprobs_json` stored (None stays None).

    Raises ValueError when ``stored`` is not that form: a backend then treats the entry as a
    miss (the reply is asked again and the put replaces it) rather than answering a request
    that wants log-probabilities with a reply that silently has none. `logprobs_json` writes
    every number as a float, so the check is of exact types: it runs on every cache hit of a
    scored criterion, a thousand alternatives for a reply of fifty tokens.
    """
    if stored is None:
        return None
    tokens: list[TokenLogprob] = []
    try:
        rows = json.loads(stored)
        if type(rows) is not list:
            raise TypeError(f"a list was stored, not {type(rows).__name__}")
        for token, logprob, pairs in rows:
            top = dict(pairs)
            if (
                type(token) is not str
                or type(logprob) is not float
                or not all(type(alternative) is str for alternative in top)
                or not all(type(value) is float for value in top.values())
            ):
                raise TypeError(f"token {len(tokens)} is not [text, float, [[text, float]...]]")
            tokens.append(TokenLogprob(token, logprob, top))
    except (TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"stored log-probabilities are unreadable ({exc})") from None
    return tuple(tokens)


def encode_vectors(texts: Sequence[str], vectors: Vectors) -> list[tuple[str, int, bytes]]:
    """``(text_hash, dim, little-endian float32 bytes)`` per text, every vector checked first.

    All vectors are checked before any is returned, so a caller that writes only what this
    returns leaves its store untouched by a bad batch: misaligned lengths, a vector that is not
    a non-empty 1-D array of numbers, or a NaN or infinite value (or one beyond float32 range)
    raise ValueError naming the text's index, because a cached NaN would poison every later run.
    """
    if len(texts) != len(vectors):
        raise ValueError(
            f"put_embeddings got {len(texts)} texts but {len(vectors)} vectors; "
            "they must be aligned one to one"
        )
    rows: list[tuple[str, int, bytes]] = []
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        try:
            arr = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"embedding for text #{i} is not a vector of numbers: {exc}") from None
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(
                f"embedding for text #{i} must be a non-empty 1-D vector, got shape {arr.shape}"
            )
        with np.errstate(over="ignore"):
            stored = arr.astype(_VECTOR_DTYPE)
        if not np.all(np.isfinite(stored)):
            raise ValueError(
                f"embedding for text #{i} contains non-finite values "
                "(NaN, infinity, or beyond float32 range)"
            )
        rows.append((text_hash(text), int(arr.size), stored.tobytes()))
    return rows


def decode_vector(blob: bytes, dim: int) -> list[float] | None:
    """The stored vector as float64 values, or None when ``blob`` does not hold ``dim`` floats.

    A truncated or foreign value is a miss rather than an error: the caller recomputes the
    vector and the put replaces the bad entry.
    """
    if dim <= 0 or len(blob) != dim * _VECTOR_DTYPE.itemsize:
        return None
    values: list[float] = np.frombuffer(blob, dtype=_VECTOR_DTYPE).astype(np.float64).tolist()
    return values


@dataclass(frozen=True)
class CachedReply:
    """A judge reply as cached: the raw text plus the token usage it cost when it was made.

    The usage is kept so a report can say what a run *would* have cost without the cache.
    ``logprobs`` are the reply's token log-probabilities when its request asked for them and
    the judge gave them (stored as `logprobs_json`), so a rerun weights a criterion's score
    as the first run did, without a call; None otherwise.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    logprobs: tuple[TokenLogprob, ...] | None = None

    def __post_init__(self) -> None:
        """Reject values that would corrupt later cost accounting."""
        if not isinstance(self.text, str):
            raise TypeError(f"CachedReply.text must be str, got {type(self.text).__name__}")
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"CachedReply.{name} must be a non-negative int, got {value!r}")


class _ReplyMetaRequired(TypedDict):
    model: str
    template_id: str


class ReplyMeta(_ReplyMetaRequired, total=False):
    """What ``put_reply`` keeps next to a reply, as its keywords: ``**meta: Unpack[ReplyMeta]``.

    ``model`` and ``template_id`` are required, ``template_version`` and ``facts`` optional. None
    of it is part of the lookup (the key already covers it); it is kept so a cache can be
    inspected or pruned per model or template version (``ragbridge cache``). ``facts`` are what
    the reply was checked against (e.g. ``{"CLAIM": 3, "CONTEXT": 4}``), kept so the check can be
    run again on the stored reply later (``ragbridge cache prune --failed``). One definition,
    so the protocol, every backend and the guard that forwards to them cannot disagree on it.
    """

    template_version: str | None
    facts: Mapping[str, Any] | None


class StoredMeta(NamedTuple):
    """A reply's metadata as every backend stores it (`stored_meta`): ``facts`` as JSON."""

    model: str
    template_id: str
    template_version: str | None
    facts: str | None


def stored_meta(reply: object, meta: Mapping[str, Any]) -> StoredMeta:
    """Check a ``put_reply(key, reply, **meta)`` call and give the metadata's stored form.

    ``**meta`` accepts any keyword, so this refuses what the spelt-out signature would have: a
    ``reply`` that is not a `CachedReply`, a keyword `ReplyMeta` does not know (a misspelt
    ``template_version`` would otherwise be lost quietly) or a missing required one, each a
    TypeError before anything is written. ``facts`` go through `facts_json` (which refuses
    what JSON would change).
    """
    if not isinstance(reply, CachedReply):
        raise TypeError(f"reply must be a CachedReply, got {type(reply).__name__}")
    unknown = sorted(set(meta) - ReplyMeta.__required_keys__ - ReplyMeta.__optional_keys__)
    if unknown:
        raise TypeError(f"put_reply() got an unexpected keyword argument {unknown[0]!r}")
    missing = sorted(ReplyMeta.__required_keys__ - set(meta))
    if missing:
        raise TypeError(f"put_reply() missing required keyword argument {missing[0]!r}")
    return StoredMeta(
        model=meta["model"],
        template_id=meta["template_id"],
        template_version=meta.get("template_version"),
        facts=facts_json(meta.get("facts")),
    )


@dataclass(frozen=True)
class ReplyRow:
    """One stored reply as `Cache.reply_rows` yields it (None: not recorded by the writer)."""

    key: str
    model: str
    template_id: str
    template_version: str | None
    text: str
    facts: dict[str, Any] | None
    created: float | None


@dataclass(frozen=True)
class ReplyGroup:
    """Replies of one model, template and template version (``ragbridge cache stats``)."""

    model: str
    template_id: str
    template_version: str | None
    count: int
    text_bytes: int
    oldest: float | None
    newest: float | None


@dataclass(frozen=True)
class EmbeddingGroup:
    """Embeddings of one model and dimension; ``unknown_age`` were stored before ages were."""

    model: str
    dim: int
    count: int
    vector_bytes: int
    unknown_age: int


@dataclass(frozen=True)
class CacheGroups:
    replies: list[ReplyGroup]
    embeddings: list[EmbeddingGroup]


@dataclass(frozen=True)
class CacheStats:
    """Row counts of the cache file, and the hits and misses of one :class:`Cache` object.

    ``hits``/``misses`` count :meth:`Cache.get_reply` calls and individual texts looked up by
    :meth:`Cache.get_embeddings`, so a second identical run should show ``misses == 0``.
    """

    replies: int
    embeddings: int
    hits: int
    misses: int
    results: int = 0
    """Whole Scores kept for reuse (`ragbridge.core.cache.scores`)."""
