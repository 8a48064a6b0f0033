"""Write a run's cells to a results file as they are scored, so the run need not hold them.

The file is the one `Evaluation.to_jsonl` writes (a header line with the run's metadata, then
one line per cell) and `Evaluation.from_jsonl` reads. Its header comes first but is known only
at the end (judge counts, cost, warnings), so cells go to a hidden file beside the target while
the run goes on; `ResultWriter.close` then writes the header and copies the cells after it, and
renames the result into place in one step. Memory stays flat however long the run; the disk
briefly holds the cells twice.

A run that stops half-way (Ctrl-C, a crash in the caller) loses nothing it finished: `close`
with ``{"interrupted": true}`` in the metadata still writes the finished cells, marked.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from ..files import atomic_write
from .cell_json import cell_json
from .evaluation import Score, header_line

__all__ = ["ResultWriter"]


class ResultWriter:
    """``with ResultWriter(path) as out: evaluate(..., on_result=out.add, keep=False)``.

    Leaving the ``with`` block without `close` (an exception) writes what was finished, with
    ``metadata["interrupted"] = True``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.cells = 0
        handle, name = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".cells", dir=self.path.parent or None
        )
        self._spool = Path(name)
        self._file = os.fdopen(handle, "w", encoding="utf-8")
        self._closed = False

    def add(self, sample_id: str, metric: str, score: Score) -> None:
        """Append one cell (the signature of ``on_result``)."""
        self._file.write(cell_json(sample_id, metric, score))  # `cell_line`'s bytes, faster
        self.cells += 1

    def close(self, metadata: dict[str, Any]) -> None:
        """Write the file: ``metadata`` as its header, then every cell in the order added."""
        if self._closed:
            return
        self._closed = True
        self._file.close()
        try:
            with atomic_write(self.path) as out, open(self._spool, encoding="utf-8") as cells:
                out.write(header_line(metadata))
                shutil.copyfileobj(cells, out, 1 << 20)
        finally:
            self._spool.unlink(missing_ok=True)

    def discard(self) -> None:
        """Give up: remove the hidden file; ``path`` keeps whatever it held before."""
        if not self._closed:
            self._closed = True
            self._file.close()
        self._spool.unlink(missing_ok=True)

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._closed:
            self.close({"interrupted": True})
