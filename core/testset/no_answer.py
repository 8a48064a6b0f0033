"""No-answer questions: on the corpus's topic, not answerable from it — and checked to be so.

A judge asked for "a question these documents do not answer" sees a few chunks, not the
corpus; it often writes a question some *other* document answers. So every candidate is
checked the way a RAG system would meet it: the ``top_k`` chunks most similar to it by
embedding are retrieved and the judge is asked whether they answer it (``testset.answerable``).
"answered" and "partly" reject the candidate (a half-answerable question has no single right
behaviour, so it makes a poor no-answer test); only "not_answered" keeps it, with
``relevance == {}`` and `NO_ANSWER_REFERENCE` as its reference. The chunks it was checked
against are kept in ``metadata["checked_against"]``: they are the corpus's closest miss.

The check is as good as the retrieval: an answer hidden in a chunk that is dissimilar to the
question escapes it. ``top_k`` (default 5) trades that risk against the check's prompt size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..prompts.testset import AnswerableVerdict
from .dedup import unit_rows

__all__ = ["NO_ANSWER_REFERENCE", "is_unanswered", "top_k"]

NO_ANSWER_REFERENCE = "The documents do not answer this question."
"""The reference of every no-answer question: what a correct answer amounts to."""


def top_k(matrix: npt.NDArray[np.float64], vector: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` rows of ``matrix`` (unit rows) most similar to ``vector``, best
    first; ties keep corpus order (a stable sort), so the result is deterministic."""
    if matrix.size == 0:
        return []
    sims = matrix @ unit_rows([vector])[0]
    order = np.argsort(-sims, kind="stable")
    return [int(i) for i in order[:k]]


def is_unanswered(verdict: AnswerableVerdict) -> bool:
    """Whether the check keeps the candidate: only a plain "not_answered" does."""
    return verdict.verdict == "not_answered"
