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
        self._parts: list[Path] = []
        self._closed = False

    def add(self, sample_id: str, metric: str, score: Score) -> None:
        """Append one cell (the signature of ``on_result``)."""
        self._file.write(cell_json(sample_id, metric, score))  # `cell_line`'s bytes, faster
        self.cells += 1

    def append_cells(self, path: str | os.PathLike[str], cells: int) -> None:
        """After the last `add`: the ``cells`` cell lines that another process wrote to
        ``path`` with `cell_json` (a later part of the run, `ragbridge.core.scoring.cores`) come
        next. The file is the writer's from now on: `close` copies it as bytes after the cells
        before it (the file `add` would have written, no cell decoded again, and copied once)
        and removes it, as `discard` does."""
        self._parts.append(Path(path))
        self.cells += cells

    def close(self, metadata: dict[str, Any]) -> None:
        """Write the file: ``metadata`` as its header, then every cell in the order added."""
        if self._closed:
            return
        self._closed = True
        self._file.close()
        try:
            with atomic_write(self.path) as out:
                out.write(header_line(metadata))
                out.flush()  # the cells are copied as bytes after it: they are UTF-8 already
                for spool in (self._spool, *self._parts):
                    with open(spool, "rb") as cells:
                        shutil.copyfileobj(cells, out.buffer, 1 << 20)
        finally:
            self._remove_spools()

    def discard(self) -> None:
        """Give up: remove the hidden file; ``path`` keeps whatever it held before."""
        if not self._closed:
            self._closed = True
            self._file.close()
        self._remove_spools()

    def _remove_spools(self) -> None:
        for spool in (self._spool, *self._parts):
            spool.unlink(missing_ok=True)

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
