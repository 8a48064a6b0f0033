"""`rare_full_collections` in the processes a run owns (issue 34).

* Blocks may overlap (two partitions on one Dask worker): the first in sets the thresholds, the
  last out puts back what the first found, whatever order they leave in.
* A Dask worker scores a partition inside the block, as the CLI scores a streamed run.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core.scoring.collector import FULL_EVERY, YOUNG_EVERY, rare_full_collections


def _tuned(before: tuple[int, int, int]) -> tuple[int, int, int]:
    return (max(before[0], YOUNG_EVERY), before[1], max(before[2], FULL_EVERY))


def test_overlapping_blocks_restore_once_the_last_one_leaves() -> None:
    before = gc.get_threshold()
    first, second = rare_full_collections(), rare_full_collections()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold() == _tuned(before)
    first.__exit__(None, None, None)  # the first leaves while the second still scores
    assert gc.get_threshold() == _tuned(before)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_a_dask_worker_scores_a_partition_with_the_collector_tuned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')
    from ragbridge.adapters.dask import worker
    from ragbridge.core.metrics import resolve
    from ragbridge.core.scoring.partitions import Partition
    from ragbridge.core.settings import Settings

    rows = [
        '{"id": "q1", "question": "How long?", "answer": "5 days", "reference": "5 days"}\n',
        '{"id": "q2", "question": "How long?", "answer": "6 days", "reference": "5 days"}\n',
    ]
    data = "".join(rows).encode("utf-8")
    shard = tmp_path / "shard.jsonl"
    shard.write_bytes(data)
    seen: list[tuple[int, int, int]] = []
    real = worker.aevaluate

    async def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return await real(*args, **kwargs)

    monkeypatch.setattr(worker, "aevaluate", spy)
    job = worker.Job(
        run="run-gc", metrics=(resolve("exact_match"),), judge=None, embedder=None,
        nli=None, base_url=None, settings=Settings(), cache=None, cap_name="cap-gc",
    )  # fmt: skip
    part = Partition(0, str(shard), 0, len(data), 1, 2, "f")
    before = gc.get_threshold()
    evaluation = asyncio.run(worker.score_partition(job, part, data))
    assert seen == [_tuned(before)]
    assert gc.get_threshold() == before
    assert [evaluation.get(s, "exact_match").value for s in ("q1", "q2")] == [1.0, 0.0]
