"""Text handling shared by the offline metrics, the held-out checks and retrieval.

`words` tokenises and normalises; `quantities` gives numbers, units and dates one written form.
`words`' names are re-exported here.
"""

from .words import *  # noqa: F403  (this room re-exports its first module's names)
from .words import __all__ as __all__
