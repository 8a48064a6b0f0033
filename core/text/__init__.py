"""Text handling shared by the offline metrics, the held-out checks and retrieval.

`words` tokenises and normalises; `quantities` gives numbers, units and dates one written form.
`words`' names are re-exported here.
"""

from .words import (
    STOPWORDS,
    abstention,
    content_words,
    is_preamble,
    normalise,
    numbers,
    plain,
    salient,
    sentences,
    terms,
    unframed,
    words,
)

__all__ = [
    "STOPWORDS",
    "abstention",
    "content_words",
    "is_preamble",
    "normalise",
    "numbers",
    "plain",
    "salient",
    "sentences",
    "terms",
    "unframed",
    "words",
]
