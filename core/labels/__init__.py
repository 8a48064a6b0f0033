"""Labels: people's verdicts, and how far a judge agrees with them.

`human` is one annotator's label, `labelled_sets` public labelled sets as samples plus labels,
`annotation` which results to ask people about, `agreement` judge-vs-people agreement and
`repeatability` how much a judge agrees with itself. `human`'s names are re-exported here.
"""

from .human import *  # noqa: F403  (this room re-exports its first module's names)
from .human import __all__ as __all__
