"""The cluster run joins its partitions while it goes on, and later partitions skip the probe.

`Joiner` takes each kept partition as soon as every one before it is kept (in input order,
read back from its part file), so the run's end has only what finished out of order left to
read; `worker._warm_breakers` lets a partition skip the first-call probe when an earlier
partition of the same run on the same worker had a reply.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("distributed", reason='needs the dask extra: pip install ".[dask]"')

from ragbridge.adapters.dask import worker
from ragbridge.adapters.dask.join import Joiner
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.scoring.partitions import PartStore
from ragbridge.core.scoring.runner import build_engines, resolve_metrics
from ragbridge.core.settings import Settings
from ragbridge.core.testing import CountingJudge


def _part(store: PartStore, index: int, ids: list[str]) -> None:
    evaluation = Evaluation()
    for n, sample_id in enumerate(ids):
        evaluation.add(sample_id, "m", Score(value=n / 10, provider="test"))
    evaluation.metadata["judge_stats"] = {"calls": len(ids)}
    store.write(index, f"f{index}", len(ids), evaluation)


def test_partitions_are_joined_in_input_order_as_soon_as_the_ones_before_are_kept(
    tmp_path: Path,
) -> None:
    store = PartStore(tmp_path)
    seen: list[str] = []
    joiner = Joiner(store, on_result=lambda s, m, score: seen.append(s), keep=True)
    joiner.expect([0, 1, 2])
    _part(store, 2, ["e", "f"])
    joiner.ready(2)  # out of order: held back (on disk), nothing joined yet
    assert seen == []
    _part(store, 0, ["a", "b"])
    joiner.ready(0)
    assert seen == ["a", "b"]
    _part(store, 1, ["c", "d"])
    joiner.ready(1)  # releases 1, then the 2 it held back
    assert seen == ["a", "b", "c", "d", "e", "f"]
    evaluation = joiner.finish([0, 1, 2])
    assert evaluation.sample_ids == ["a", "b", "c", "d", "e", "f"]
    assert seen == ["a", "b", "c", "d", "e", "f"]  # nothing twice
    assert evaluation.metadata["judge_stats"]["calls"] == 6


def test_a_rerun_joins_its_kept_parts_later_and_a_stopped_run_skips_the_unkept(
    tmp_path: Path,
) -> None:
    store = PartStore(tmp_path)
    seen: list[str] = []
    joiner = Joiner(store, on_result=lambda s, m, score: seen.append(s), keep=False)
    joiner.expect([0, 1, 2])
    _part(store, 0, ["a"])
    joiner.ready(0, now=False)  # kept from an earlier run: joined with the next one kept
    assert seen == []
    _part(store, 2, ["c"])
    joiner.ready(2)  # 1 was never kept (the run stopped early): 0 joins now, 2 waits for it
    assert seen == ["a"]
    evaluation = joiner.finish([0, 2])
    assert seen == ["a", "c"]
    assert len(evaluation) == 0  # keep=False: cells went to on_result only


def test_a_repeated_id_across_partitions_is_refused_when_joined(tmp_path: Path) -> None:
    store = PartStore(tmp_path)
    joiner = Joiner(store, on_result=None, keep=True)
    joiner.expect([0, 1])
    _part(store, 0, ["a", "b"])
    joiner.ready(0)
    _part(store, 1, ["b"])
    with pytest.raises(ValueError, match="duplicate sample id 'b' \\(in partition 1"):
        joiner.ready(1)


def _engines() -> object:
    settings = Settings(judge=CountingJudge())
    return build_engines(settings, resolve_metrics(["context_precision"]))


def test_a_later_partition_of_the_run_skips_the_first_call_probe() -> None:
    first = _engines()
    worker._warm_breakers("run-a", first)  # type: ignore[arg-type]
    assert not first.judge.breaker.replied  # type: ignore[attr-defined]
    worker._note_replies("run-a", first)  # type: ignore[arg-type]
    assert ("run-a", "judge") not in worker._REPLIED  # no reply yet: nothing learned
    first.judge.breaker.replied = True  # type: ignore[attr-defined]
    worker._note_replies("run-a", first)  # type: ignore[arg-type]

    later, other = _engines(), _engines()
    worker._warm_breakers("run-a", later)  # type: ignore[arg-type]
    worker._warm_breakers("run-b", other)  # type: ignore[arg-type]
    assert later.judge.breaker.replied  # type: ignore[attr-defined]
    assert not other.judge.breaker.replied  # type: ignore[attr-defined]  # another run probes
    for n in range(worker._REPLIED_KEPT + 1):  # a long-lived worker keeps a few runs only
        worker._REPLIED[(f"old-{n}", "judge")] = None
    worker._note_replies("run-a", later)  # type: ignore[arg-type]
    assert len(worker._REPLIED) == worker._REPLIED_KEPT
    assert ("run-a", "judge") in worker._REPLIED  # the newest is kept
