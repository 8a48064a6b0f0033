"""The pipeline answers of a robustness run, kept in the run's cache so a rerun pays nothing.

A robustness run asks the user's pipeline every question once per condition: with five noise
ratios, the negative and the counterfactual condition that is seven pipeline calls per question,
each of which may cost a generator call. Judge replies are cached by the engine as always; this
module does the same for the pipeline's answers, in the same store (any `CacheBackend`: an SQLite
file, a Redis URL), through the judge-reply operations (``get_reply``/``put_reply``) with the
answered `Sample` as the reply's JSON text and template id ``robustness.pipeline``.

The key says everything the answer depends on: the pipeline's identity (its spec and a digest of
its source, so an edited pipeline is asked again), the question, the condition, the seed and a
digest of the passages the pipeline is given. The clean run's passages are not known before the
pipeline retrieves them, so its key has no passage digest and no seed (neither changes what it is
given); every other condition's key carries the digest of the passages it will be given, so a
changed corpus, noise pool or counterfactual is answered again rather than served stale.

A pipeline error is never cached: a rerun retries it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ..cache.backend import CacheBackend
from ..cache.stored import CachedReply
from ..sample import Context, Sample
from .conditions import Condition

__all__ = ["TEMPLATE_ID", "AnswerCache", "answer_key", "contexts_digest", "failed"]

TEMPLATE_ID = "robustness.pipeline"
"""The template id cached pipeline answers are stored under (``ragbridge cache`` lists it)."""

_KEY_VERSION = "1"
"""Bumped when the key's inputs or the stored form change, so old entries are simply missed."""


def contexts_digest(contexts: Sequence[Context]) -> str:
    """A sha256 of the passages' ids and texts, in order (their rank is part of what is given)."""
    rows = [[c.id, c.text] for c in contexts]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


def answer_key(
    identity: str,
    question: str,
    condition: Condition,
    *,
    seed: int = 0,
    given: Sequence[Context] | None = None,
) -> str:
    """``robustness:`` + the sha256 of what the pipeline's answer under ``condition`` depends on.

    ``given`` is the passages the pipeline will be given (None for the clean run, whose passages
    are the live retrieval: its key has neither digest nor seed).
    """
    if condition.clean or given is None:
        parts: list[Any] = [_KEY_VERSION, identity, question, condition.name, None, None]
    else:
        parts = [_KEY_VERSION, identity, question, condition.name, seed, contexts_digest(given)]
    text = json.dumps(parts, ensure_ascii=False)
    return "robustness:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def failed(sample: Sample) -> bool:
    """Whether the pipeline failed on ``sample`` (``metadata["error"]``, as `run_pipeline` sets)."""
    return bool(sample.metadata.get("error"))


class AnswerCache:
    """Reads and writes one pipeline's answers in a cache backend (or does nothing without one).

    ``hits`` and ``stored`` count what a run found and kept, for the run's metadata and tests.
    """

    def __init__(self, backend: CacheBackend | None, identity: str) -> None:
        self.backend = backend
        self.identity = identity
        self.hits = 0
        self.stored = 0

    def get(self, key: str) -> Sample | None:
        """The answered sample kept under ``key``; None on a miss or an unreadable entry."""
        sample = self.peek(key)
        if sample is not None:
            self.hits += 1
        return sample

    def peek(self, key: str) -> Sample | None:
        """`get` without counting a hit (the plan looks before the run)."""
        if self.backend is None:
            return None
        reply = self.backend.get_reply(key)
        if reply is None:
            return None
        try:
            sample = Sample.model_validate_json(reply.text)
        except (ValidationError, ValueError):
            return None  # an entry another version wrote: answer again rather than fail
        return sample

    def put(self, key: str, sample: Sample) -> None:
        """Keep ``sample`` (the pipeline's answer) under ``key``; errors are not kept."""
        if self.backend is None or failed(sample):
            return
        try:
            text = sample.model_dump_json()
        except (TypeError, ValueError):
            return  # metadata that is not JSON cannot be kept; the answer is still used
        self.backend.put_reply(
            key, CachedReply(text=text), model=self.identity, template_id=TEMPLATE_ID
        )
        self.stored += 1

    def has(self, key: str) -> bool:
        """Whether a readable answer is kept under ``key`` (for the plan; counts no hit)."""
        return self.peek(key) is not None
