"""Labels: people's verdicts, and how far a judge agrees with them.

`human` is one annotator's label, `labelled_sets` public labelled sets as samples plus labels,
`annotation` which results to ask people about, `agreement` judge-vs-people agreement and
`repeatability` how much a judge agrees with itself. `human`'s names are re-exported here.
"""

from .human import (
    GROUNDED_VALUES,
    QUESTIONS,
    HumanLabel,
    LabelFileError,
    LabelQuestion,
    load_labels,
    question_for,
    save_labels,
)

__all__ = [
    "GROUNDED_VALUES",
    "QUESTIONS",
    "HumanLabel",
    "LabelFileError",
    "LabelQuestion",
    "load_labels",
    "question_for",
    "save_labels",
]
