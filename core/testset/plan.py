"""What to ask the judge, in which order: the spec of a test set and the requests it makes.

Everything here is a pure function of the chunks, the spec and the seed, which is what makes a
run resumable: the same arguments give the same requests, hence the same prompts, hence cache
hits for every call an interrupted run had finished. The dry-run estimate plans with the same
code, so it counts exactly the calls a run's first round makes.

* **Which chunks.** Chunks with at least `MIN_CHUNK_WORDS` words, in an order shuffled by the
  seed; each answerable request takes the next one, so every chunk is written from once before
  any is written from twice. A chunk's second question is asked with its first in the prompt's
  AVOID block, which keeps it (and its cache key) different.
* **Which styles.** The exact counts of `ragbridge.core.testset.styles.allocate`, their order
  shuffled by the seed, so styles mix along the file instead of coming in blocks.
* **Which pairs** (``multi``): the anchor chunk and its nearest neighbour by embedding among the
  chunks it has not been paired with (a pair is used once, in either order).
* **Which topic** (no-answer): an anchor chunk, from its own shuffled order, and its nearest
  neighbours: a coherent corner of the corpus to write a neighbouring, unanswered question for.
* **Rounds.** Round 1 asks for the targets; questions dropped (quote not found, near-duplicate,
  failed call, no-answer candidate the corpus answers) leave a shortfall that the next round
  asks for, with fresh chunks, up to ``max_rounds`` rounds. A round can never ask for more than
  round 1 did, which bounds a run's calls by ``max_rounds`` times the first round's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from typing_extensions import TypedDict

from .chunks import DEFAULT_CHUNK_CHARS, MIN_CHUNK_WORDS, Chunk
from .dedup import DEFAULT_DEDUP_THRESHOLD
from .styles import (
    DEFAULT_NO_ANSWER_SHARE,
    DEFAULT_STYLES,
    NO_ANSWER,
    STYLES,
    allocate,
    check_styles,
    no_answer_count,
)

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_SIZE",
    "DEFAULT_TOP_K",
    "Planner",
    "Request",
    "TestsetOptions",
    "TestsetSpec",
    "waves",
]

DEFAULT_SIZE = 50
DEFAULT_TOP_K = 5
"""Chunks retrieved for a no-answer candidate's check."""
DEFAULT_MAX_ROUNDS = 3
TOPIC_CHUNKS = 3
"""Chunks shown to the judge as the topic of a no-answer question."""

Relevance = Literal["chunk", "document"]
Neighbours = Callable[[int], Sequence[int]]
"""Chunk indices by similarity to chunk ``i``, most similar first (``i`` itself left out)."""


class TestsetOptions(TypedDict, total=False):
    """The fields of `TestsetSpec` besides ``size`` as keyword arguments:
    ``**options: Unpack[TestsetOptions]`` (`generate_testset`, `estimate_testset`).

    ``styles=None`` means the default shares; every other field left out takes its
    `TestsetSpec` default.
    """

    styles: Mapping[str, float] | None
    no_answer_share: float
    seed: int
    dedup_threshold: float
    chunk_chars: int
    relevance: Relevance
    top_k: int
    max_rounds: int


@dataclass(frozen=True)
class TestsetSpec:
    """What test set to write (validated on construction; see `generate_testset`)."""

    size: int = DEFAULT_SIZE
    styles: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_STYLES))
    no_answer_share: float = DEFAULT_NO_ANSWER_SHARE
    seed: int = 0
    dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD
    chunk_chars: int = DEFAULT_CHUNK_CHARS
    relevance: Relevance = "chunk"
    top_k: int = DEFAULT_TOP_K
    max_rounds: int = DEFAULT_MAX_ROUNDS

    __test__ = False  # not a pytest test class, whatever its name says

    @classmethod
    def split(cls, size: int, options: Mapping[str, Any]) -> tuple[TestsetSpec, dict[str, Any]]:
        """The spec ``size`` and the `TestsetOptions` among ``options`` ask for, and the other
        options (an entry point's `Settings` keywords), left as they were given."""
        given = {k: v for k, v in options.items() if k in TestsetOptions.__annotations__}
        rest = {k: v for k, v in options.items() if k not in given}
        styles = given.pop("styles", None)
        if styles is not None:
            given["styles"] = dict(styles)
        return cls(size=size, **given), rest

    def __post_init__(self) -> None:
        for name in ("size", "seed", "chunk_chars", "top_k", "max_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.size < 1:
            raise ValueError(f"size must be at least 1, got {self.size}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {self.max_rounds}")
        if self.relevance not in ("chunk", "document"):
            raise ValueError(f"relevance must be 'chunk' or 'document', got {self.relevance!r}")
        if not 0.0 < self.dedup_threshold <= 1.0:
            raise ValueError(f"dedup_threshold must lie in (0, 1], got {self.dedup_threshold}")
        object.__setattr__(self, "styles", check_styles(self.styles))
        no_answer_count(self.size, self.no_answer_share)  # validates the share

    def targets(self) -> dict[str, int]:
        """Questions per style, no-answer included; they sum to ``size``."""
        no_answer = no_answer_count(self.size, self.no_answer_share)
        out = allocate(self.size - no_answer, self.styles)
        out[NO_ANSWER] = no_answer
        return out


@dataclass(frozen=True)
class Request:
    """One generation call: a style, the chunks it is written from, the round it belongs to."""

    style: str
    chunks: tuple[Chunk, ...]
    round: int

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.style, tuple(c.id for c in self.chunks)

    @property
    def anchor(self) -> Chunk:
        return self.chunks[0]


class Planner:
    """Turns "this many questions of each style" into `Request`s (see the module).

    ``neighbours`` ranks chunks by embedding similarity; without it (the dry run, which embeds
    nothing) the next chunks in the shuffled order stand in, which changes no call count.
    """

    def __init__(
        self, chunks: Sequence[Chunk], spec: TestsetSpec, neighbours: Neighbours | None = None
    ) -> None:
        self.chunks = list(chunks)
        self.spec = spec
        self.usable = [i for i, c in enumerate(self.chunks) if c.words >= MIN_CHUNK_WORDS]
        self._usable_set = set(self.usable)
        self._neighbours = neighbours
        self._style_rng = random.Random(f"{spec.seed}/styles")
        self._order = list(self.usable)
        random.Random(f"{spec.seed}/chunks").shuffle(self._order)
        self._topics = list(self.usable)
        random.Random(f"{spec.seed}/topics").shuffle(self._topics)
        self._cursor = 0
        self._topic_cursor = 0
        self._pairs: set[frozenset[int]] = set()

    def problem(self) -> str | None:
        """Why this corpus cannot give the spec's set, or None."""
        targets = self.spec.targets()
        if not self.usable:
            return (
                f"no chunk has {MIN_CHUNK_WORDS} words or more: there is nothing to write "
                "questions from"
            )
        if targets.get("multi") and len(self.usable) < 2:
            return "multi-chunk questions need at least two chunks; the corpus has one"
        return None

    def requests(self, wanted: Mapping[str, int], round_: int) -> list[Request]:
        """Requests for ``wanted`` questions per style (answerable styles mixed by the seed,
        no-answer requests after them)."""
        labels = [s for s in STYLES for _ in range(wanted.get(s, 0))]
        self._style_rng.shuffle(labels)
        out: list[Request] = []
        for style in labels:
            anchor = self._order[self._cursor % len(self._order)]
            self._cursor += 1
            if style == "multi":
                partner = self._partner(anchor)
                if partner is None:
                    continue
                out.append(Request(style, (self.chunks[anchor], self.chunks[partner]), round_))
            else:
                out.append(Request(style, (self.chunks[anchor],), round_))
        for _ in range(wanted.get(NO_ANSWER, 0)):
            anchor = self._topics[self._topic_cursor % len(self._topics)]
            self._topic_cursor += 1
            topic = [anchor, *self._near(anchor)[: TOPIC_CHUNKS - 1]]
            out.append(Request(NO_ANSWER, tuple(self.chunks[i] for i in topic), round_))
        return out

    def _near(self, index: int) -> list[int]:
        if self._neighbours is not None:
            return [i for i in self._neighbours(index) if i != index and i in self._usable_set]
        at = self._order.index(index)
        return [self._order[(at + k) % len(self._order)] for k in range(1, len(self._order))]

    def _partner(self, anchor: int) -> int | None:
        for other in self._near(anchor):
            pair = frozenset((anchor, other))
            if len(pair) == 2 and pair not in self._pairs:
                self._pairs.add(pair)
                return other
        return None


def waves(requests: Sequence[Request]) -> list[list[Request]]:
    """Consecutive runs of requests with no (style, chunks) repeated inside a run.

    Requests of one wave are sent together; a repeat waits for the next wave, whose prompt
    then carries the first one's question in its AVOID block.
    """
    out: list[list[Request]] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for request in requests:
        if not out or request.key in seen:
            out.append([])
            seen = set()
        out[-1].append(request)
        seen.add(request.key)
    return out
