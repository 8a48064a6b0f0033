"""Near-duplicate questions: two questions a retriever would treat as one test are one test.

A judge shown two neighbouring chunks, or one chunk twice, readily writes the same question
twice in different words; counted twice it weighs double in every mean. Each question is
embedded, and a question whose cosine similarity to a question *already kept* exceeds the
threshold is dropped (so the first of a pair survives and the order of generation decides
which). Texts that are equal after case and whitespace folding are dropped whatever the
embedder says.

The default threshold, 0.92, comes from all-MiniLM-L6-v2 (the local default embedder) on
handbook questions: a close rewording scores 0.97 ("How many days of paid annual leave do
full-time employees get per year?" / "How many paid annual leave days does a full-time employee
receive each year?"), while two *different* questions sharing most words score up to 0.91
("What is the daily allowance for domestic / international business trips?"). 0.92 drops the
first and keeps the second. Loose paraphrases escape it (0.71 for "By which date must
carried-over leave days be taken?" / "Until when can carried-over vacation days be used?"): no
cosine threshold separates them from distinct questions on one topic (0.82 for the first of
those and "How many unused leave days may be carried over?"). Lower it to drop more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_DEDUP_THRESHOLD", "NearDuplicates", "unit_rows"]

DEFAULT_DEDUP_THRESHOLD = 0.92


def unit_rows(vectors: Sequence[Sequence[float]]) -> npt.NDArray[np.float64]:
    """Vectors as the rows of a matrix, each scaled to length 1 (zero vectors stay zero)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        return np.zeros((0, 0))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: npt.NDArray[np.float64] = np.divide(
        matrix, norms, out=np.zeros_like(matrix), where=norms > 0
    )
    return out


def _folded(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?.! ")


@dataclass
class NearDuplicates:
    """The questions kept so far; `check` says whether a new one repeats one of them."""

    threshold: float = DEFAULT_DEDUP_THRESHOLD
    _texts: dict[str, str] = field(default_factory=dict)
    _rows: list[npt.NDArray[np.float64]] = field(default_factory=list)
    _keys: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(
                f"the near-duplicate threshold must lie in (0, 1], got {self.threshold}"
            )

    def check(self, text: str, vector: Sequence[float]) -> tuple[float, str | None]:
        """The highest similarity to a kept question and that question's key when it is a
        near-duplicate (above the threshold, or the same text), else ``(similarity, None)``."""
        same = self._texts.get(_folded(text))
        if same is not None:
            return 1.0, same
        if not self._rows:
            return 0.0, None
        row = unit_rows([vector])[0]
        sims = np.stack(self._rows) @ row
        best = int(np.argmax(sims))
        score = float(sims[best])
        return score, (self._keys[best] if score > self.threshold else None)

    def add(self, key: str, text: str, vector: Sequence[float]) -> None:
        self._texts[_folded(text)] = key
        self._rows.append(unit_rows([vector])[0])
        self._keys.append(key)

    def remove(self, key: str) -> None:
        """Forget a question that was kept provisionally (a rejected no-answer candidate)."""
        for i in range(len(self._keys) - 1, -1, -1):
            if self._keys[i] == key:
                del self._keys[i]
                del self._rows[i]
        self._texts = {t: k for t, k in self._texts.items() if k != key}
