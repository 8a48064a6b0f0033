"""Results: what a run returns and what is computed from it.

`evaluation` holds the contract (`Score`, `Failure`, `Evaluation`), `tally` and `stats` summarise
it, `writer` streams cells to a file, `usage` is what a cell cost, `id_check` says when ids never
meet labels, `diagnosis` and `crosscheck` read a finished run. The contract's names are re-exported
here.
"""

from .evaluation import *  # noqa: F403  (this room re-exports its first module's names)
from .evaluation import __all__ as __all__
