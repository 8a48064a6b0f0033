"""Build what a pipeline is given under a retrieval fault, from what its retriever returned.

Noise must look like real retrieval, or a pipeline that ignores off-topic text would look robust
for the wrong reason: RGB (Chen et al., 2023) draws its noise from documents retrieved for the
question that mention its entities but not its answer. A ragbridge run has no such documents
labelled, so noise here is what the pipeline's own retriever returned for OTHER questions of the
same run, in the clean condition (`NoisePool`): passages of the same corpus, the same chunking and
the same style. A passage retrieved for the question itself, labelled relevant to it, or equal to
one it keeps is never noise.

Every draw and every position is seeded by a stable hash (sha256) of the sample id, the
condition and the run's seed, never by Python's salted ``hash()``: the same run gives the same
perturbed passages on every machine and every process, so pipeline answers can be cached.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..sample import Context, Sample
from ..text.words import normalise
from .conditions import Condition
from .counterfactual import Counterfactual, replace_fact
from .seeds import stable_seed

__all__ = ["NoisePool", "PoolTooSmall", "noise_count", "perturb"]


def _same_text(text: str) -> str:
    """A passage's text as passages are compared: normalised whitespace, quotes and case."""
    return normalise(text).casefold()


class PoolTooSmall(ValueError):
    """The noise pool has fewer passages usable for a sample than a condition needs.

    Raised by `perturb`; the harness skips the (question, condition) with ``str(error)`` as the
    reason. ``needed`` and ``available`` are the counts, ``sample_id`` the question."""

    def __init__(self, sample_id: str, needed: int, available: int, condition: str) -> None:
        self.sample_id = sample_id
        self.needed = needed
        self.available = available
        self.condition = condition
        super().__init__(
            f"{condition}: the noise pool holds {available} usable passage"
            f"{'s' if available != 1 else ''} of other questions for sample {sample_id!r}, "
            f"{needed} needed (run more questions, or fewer passages per question)"
        )


@dataclass(frozen=True)
class _Entry:
    """One distinct passage of the pool: its text, a retrieved copy of it, and every question
    of the clean run that retrieved it (``sources``, sorted)."""

    key: str
    context: Context
    sources: tuple[str, ...]


class NoisePool:
    """Passages retrieved for other questions in the clean run, to draw noise from.

    Passages are told apart by their normalised text (`_same_text`): one passage retrieved for
    three questions is one entry, never noise for any of the three. The pool does not depend on
    the order of the clean samples.
    """

    def __init__(self, entries: Sequence[_Entry], own: dict[str, frozenset[str]]) -> None:
        # A fixed order (by a hash of the text) so that draws do not depend on sample order.
        self._entries = sorted(entries, key=lambda e: hashlib.sha256(e.key.encode()).digest())
        self._own = own  # sample id -> the texts (compared form) the clean run retrieved for it

    @classmethod
    def from_samples(cls, clean: Sequence[Sample]) -> NoisePool:
        """The pool of the clean run's retrieved passages (``clean``: its answered samples)."""
        first: dict[str, tuple[str, int, Context]] = {}  # the copy of the first source id
        sources: dict[str, set[str]] = {}
        own: dict[str, set[str]] = {}
        for sample in clean:
            for rank, context in enumerate(sample.contexts):
                key = _same_text(context.text)
                if not key:
                    continue
                held = first.get(key)
                if held is None or (sample.id, rank) < held[:2]:
                    first[key] = (sample.id, rank, context)
                sources.setdefault(key, set()).add(sample.id)
                own.setdefault(sample.id, set()).add(key)
        entries = [_Entry(k, c, tuple(sorted(sources[k]))) for k, (_, _, c) in first.items()]
        return cls(entries, {sid: frozenset(keys) for sid, keys in own.items()})

    def __len__(self) -> int:
        return len(self._entries)

    def _usable(self, sample: Sample, avoid: Collection[str]) -> list[_Entry]:
        """The entries that may be noise for ``sample``, in the pool's fixed order."""
        banned = set(self._own.get(sample.id, frozenset()))
        banned.update(_same_text(c.text) for c in sample.contexts)
        banned.update(_same_text(t) for t in avoid)
        relevant = {cid for cid, grade in (sample.relevance or {}).items() if grade > 0}
        return [
            e
            for e in self._entries
            if e.key not in banned
            and sample.id not in e.sources
            and (e.context.id is None or e.context.id not in relevant)
        ]

    def capacity(self, sample: Sample, avoid: Collection[str] = ()) -> int:
        """How many passages `draw` can give ``sample`` at most: the harness can skip a
        condition before running the pipeline when this is below the question's top-k."""
        return len(self._usable(sample, avoid))

    def draw(
        self, sample: Sample, n: int, *, seed: int = 0, avoid: Collection[str] = ()
    ) -> list[Context]:
        """``n`` passages of other questions for ``sample`` (fewer when the pool is too small:
        the caller says so), each a copy with metadata ``{"robustness": "noise", "from": the id
        of a question it was retrieved for}``.

        Deterministic in (``sample.id``, ``n``, ``seed``): the usable passages are taken in an
        order shuffled by a stable hash of ``sample.id`` and ``seed``, so a draw of 2 is the
        first two of a draw of 3: noise at a higher ratio adds passages to the lower ratio's
        instead of starting afresh, which keeps the curve over the ratio smooth.
        Never a passage the clean run retrieved for ``sample`` or one in ``sample.contexts``,
        never a text in ``avoid``, never a context id ``sample.relevance`` grades above 0.
        """
        if n <= 0:
            return []
        order = list(self._entries)
        random.Random(stable_seed("noise-pool", sample.id, seed)).shuffle(order)
        usable = {id(e) for e in self._usable(sample, avoid)}
        picked = [e for e in order if id(e) in usable][:n]
        return [_labelled(e.context, "noise", e.sources[0]) for e in picked]


def _labelled(context: Context, kind: str, source: str) -> Context:
    """``context`` with the robustness marks: what was done to it, and whose it was."""
    meta = {**context.metadata, "robustness": kind, "from": source}
    return context.model_copy(update={"metadata": meta})


def noise_count(ratio: float, k: int) -> int:
    """How many of ``k`` passages noise at ``ratio`` replaces: ``ratio * k`` rounded half up
    (not Python's round-half-even), so k=4 at 0.2 replaces 1 (0.8), k=5 at 0.2/0.4/0.6/0.8
    replaces 1/2/3/4, k=2 at 0.2 replaces none (0.4) and k=2 at 0.25 replaces 1 (0.5).
    Rounding can reach k (k=2 at 0.8 replaces both): that question then has no relevant
    passage left at that ratio, as the ratio asked."""
    if k <= 0 or ratio <= 0:
        return 0
    return min(k, math.floor(ratio * k + 0.5 + 1e-9))


def _keep_order(sample: Sample, live: Sequence[Context]) -> list[int]:
    """Indices of ``live``, most relevant first: by ``sample.relevance`` grade when the sample
    is labelled (an unlabelled context counts as grade 0), ties and unlabelled samples by rank."""
    grades = sample.relevance
    if grades is None:
        return list(range(len(live)))

    def grade(i: int) -> int:
        cid = live[i].id
        return grades.get(cid, 0) if cid is not None else 0

    return sorted(range(len(live)), key=lambda i: (-grade(i), i))


def perturb(
    sample: Sample,
    live: list[Context],
    condition: Condition,
    pool: NoisePool,
    *,
    seed: int = 0,
    counterfactual: Counterfactual | None = None,
) -> list[Context]:
    """The contexts a pipeline is given under ``condition``, from the ``live`` ones its
    retriever returned for ``sample``.

    * ``noise@r`` (k = ``len(live)``): n = `noise_count` (r, k) passages are replaced (r*k
      rounded half up: k=4 at 0.2 -> 1, k=5 at 0.2/0.4/0.6/0.8 -> 1/2/3/4). The k - n most
      relevant of ``live`` are kept (by ``sample.relevance`` grade when labelled, else by rank)
      in their own order, and n passages of other questions (`NoisePool.draw`, none equal to a
      live one) go in at positions seeded by (``sample.id``, the condition, ``seed``).
      ``noise@0`` returns ``live`` unchanged.
    * ``negative``: k passages of other questions, none of the sample's own.
    * ``counterfactual``: every live context stating ``counterfactual.original`` (whole words,
      any case) states ``counterfactual.wrong`` instead; the others are unchanged. When no
      context states it, nothing changes: the harness can tell by no context carrying the
      ``"robustness"`` mark.

    Injected and changed contexts carry metadata ``{"robustness": "noise" | "negative" |
    "counterfactual", "from": the id of the question the passage came from}`` (the sample's
    own id for a counterfactual). A pool too small raises `PoolTooSmall` (skip with its text);
    a counterfactual condition without ``counterfactual`` is a ValueError.
    """
    if condition.clean:
        return list(live)
    k = len(live)
    avoid = [c.text for c in live]
    if condition.kind == "counterfactual":
        if counterfactual is None:
            raise ValueError(f"sample {sample.id!r}: the counterfactual condition needs a fact")
        return [
            _labelled(changed, "counterfactual", sample.id)
            if (changed := replace_fact(c, counterfactual)) is not c
            else c
            for c in live
        ]
    if condition.kind == "negative":
        drawn = pool.draw(sample, k, seed=seed, avoid=avoid)
        if len(drawn) < k:
            raise PoolTooSmall(sample.id, k, len(drawn), condition.name)
        return [_labelled(c, "negative", c.metadata["from"]) for c in drawn]
    n = noise_count(condition.ratio, k)
    if n == 0:
        return list(live)
    noise = pool.draw(sample, n, seed=seed, avoid=avoid)
    if len(noise) < n:
        raise PoolTooSmall(sample.id, n, len(noise), condition.name)
    kept = sorted(_keep_order(sample, live)[: k - n])
    rng = random.Random(stable_seed("noise-positions", sample.id, condition.name, seed))
    slots = set(rng.sample(range(k), n))
    kept_iter, noise_iter = iter(live[i] for i in kept), iter(noise)
    return [next(noise_iter) if i in slots else next(kept_iter) for i in range(k)]
