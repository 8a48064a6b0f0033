"""Shadow scoring in the core (`ragbridge.core.monitoring.shadow`), with no framework: sampling
by request id, the request path that never waits, bounded queues and memory, the sinks, and a
shutdown that leaves no sampled request without a record.

The framework wrappers (tests/test_shadow_langchain.py, tests/test_shadow_llamaindex.py) only
capture; what is decided here holds for both.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core.monitoring import MonitorStore, RequestRecord, StoreSink
from ragbridge.core.monitoring.shadow import (
    DEFAULT_STORE,
    FinishedRequest,
    ShadowScorer,
    busy_ms,
    score_cell,
)
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context
from ragbridge.core.scoring.background import BackgroundScoring, id_fraction, sampled_by_id
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge

ROOT = Path(__file__).resolve().parents[1]


class _Sink:
    """Keeps what it is given, and the threads it was called on."""

    def __init__(self) -> None:
        self.served: list[RequestRecord] = []
        self.with_scores: list[RequestRecord] = []
        self.threads: set[str] = set()

    def request(self, record: RequestRecord) -> None:
        self.threads.add(threading.current_thread().name)
        self.served.append(record)

    def scored(self, record: RequestRecord) -> None:
        self.threads.add(threading.current_thread().name)
        self.with_scores.append(record)


class _Counting:
    """Counts what it is given and keeps nothing (for the memory test)."""

    def __init__(self) -> None:
        self.served = 0
        self.with_scores = 0

    def request(self, record: RequestRecord) -> None:
        self.served += 1

    def scored(self, record: RequestRecord) -> None:
        self.with_scores += 1


def _ids_in(rate: float, n: int = 10_000) -> list[str]:
    return [f"req-{i}" for i in range(n) if sampled_by_id(f"req-{i}", rate)]


def _request(request_id: str, **fields: Any) -> FinishedRequest:
    base: dict[str, Any] = {
        "question": "Where is the Eiffel Tower?",
        "answer": "The Eiffel Tower is in Paris.",
        "contexts": [
            Context(id="d1", text="The Eiffel Tower stands in Paris.", score=0.82),
            Context(id="d2", text="Berlin is the capital of Germany.", score=0.31),
        ],
        "retrieval_ms": 4.0,
        "generation_ms": 120.0,
        "latency_ms": 130.0,
        "pipeline": "test",
    }
    base.update(fields)
    return FinishedRequest(request_id, **base)


def _ids_sampled_at(rate: float, chosen: bool = True) -> list[str]:
    """Request ids the rule chooses (or not) at ``rate``, to send sampled requests on purpose."""
    return [f"id-{i}" for i in range(2000) if sampled_by_id(f"id-{i}", rate) == chosen]


# --------------------------------------------------------------------------- sampling


def test_sampling_by_id_is_deterministic_and_respects_the_rate() -> None:
    ids = [f"req-{i}" for i in range(10_000)]
    first = [sampled_by_id(i, 0.05) for i in ids]
    assert first == [sampled_by_id(i, 0.05) for i in ids]  # same id, same choice
    share = sum(first) / len(ids)
    assert abs(share - 0.05) < 0.01  # binomial sd at n=10k is 0.0022
    for rate in (0.01, 0.2, 0.5):
        assert abs(len(_ids_in(rate)) / 10_000 - rate) < 0.02
    # raising the rate only adds requests: the 5% are among the 10%
    assert set(_ids_in(0.05)) <= set(_ids_in(0.10))
    assert _ids_in(0.0) == []
    assert len(_ids_in(1.0)) == 10_000
    # pinned: changing the hash would reshuffle which requests every deployment scores
    assert id_fraction("req-0") == pytest.approx(0.3077954566, abs=1e-10)


def test_sampling_by_id_agrees_across_processes() -> None:
    code = (
        "from ragbridge.core.scoring.background import sampled_by_id\n"
        "print(','.join(f'req-{i}' for i in range(10000) if sampled_by_id(f'req-{i}', 0.05)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().split(",") == _ids_in(0.05)


def test_background_scoring_can_sample_by_id_too() -> None:
    live = BackgroundScoring(Scorer(["mrr"]), sample_rate=0.3, sample_by="id").open()
    try:
        taken = [live.admit(f"req-{i}") for i in range(200)]
    finally:
        live.close()
    assert [t is not None for t in taken] == [sampled_by_id(f"req-{i}", 0.3) for i in range(200)]
    with pytest.raises(ValueError, match="sample_by"):
        BackgroundScoring(Scorer(["mrr"]), sample_by="hash")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- records


def test_busy_ms_counts_overlapping_calls_once() -> None:
    assert busy_ms([]) is None
    assert busy_ms([(1.0, 1.5)]) == pytest.approx(500.0)
    # two parallel retrievals, then a later one: 0.0-0.3 and 1.0-1.1
    assert busy_ms([(0.0, 0.2), (0.1, 0.3), (1.0, 1.1)]) == pytest.approx(400.0)


def test_score_cells_keep_value_failure_and_skip_apart() -> None:
    assert score_cell(Score(value=0.5)).value == 0.5
    failed = score_cell(Score.fail(FailureKind.TIMEOUT, "slow"))
    assert (failed.value, failed.failure, failed.skipped) == (None, "timeout", False)
    assert score_cell(Score.skip("no claims")).skipped


def test_records_carry_timings_chunks_miss_and_abstention() -> None:
    sink = _Sink()
    with ShadowScorer(["mrr"], sample_rate=0.0, sinks=[sink], relevance_threshold=0.5) as shadow:
        shadow.record(_request("used"))
        shadow.record(_request("miss", contexts=[Context(text="x", score=0.2)]))
        shadow.record(_request("empty", contexts=[]))
        shadow.record(_request("unscored", contexts=[Context(text="x")]))
        shadow.record(_request("no-retrieval", contexts=None, retrieval_ms=None))
        shadow.record(_request("abstains", answer="I don't know."))
        shadow.record(_request("lazy", contexts=lambda: [Context(text="x", score=0.9)]))
        shadow.record(_request("failed", answer=None, error="TimeoutError: upstream"))
        assert shadow.wait(timeout=10)
    got = {r.request_id: r for r in sink.served}
    used = got["used"]
    assert (used.retrieval_ms, used.generation_ms, used.chunks_retrieved, used.chunks_used) == (
        4.0,
        120.0,
        2,
        1,
    )
    assert (used.retrieval_miss, used.answer_chars, used.abstained, used.sampled) == (
        False,
        len("The Eiffel Tower is in Paris."),
        False,
        False,
    )
    assert used.attributes == {"latency_ms": 130.0, "context_ids": ["d1", "d2"]}
    assert (got["miss"].chunks_used, got["miss"].retrieval_miss) == (0, True)
    assert (got["empty"].chunks_retrieved, got["empty"].retrieval_miss) == (0, True)
    # a retriever that gives no scores: the threshold cannot say which chunks were used
    assert (got["unscored"].chunks_used, got["unscored"].retrieval_miss) == (None, None)
    assert got["no-retrieval"].chunks_retrieved is None
    assert got["no-retrieval"].retrieval_ms is None  # not measured, not 0 ms
    assert got["abstains"].abstained is True
    assert got["lazy"].chunks_used == 1
    assert (got["failed"].error, got["failed"].answer_chars) == ("TimeoutError: upstream", None)
    assert sink.threads == {"ragbridge-shadow-sinks"}  # never the caller's thread


def test_without_a_threshold_only_an_empty_retrieval_is_a_miss() -> None:
    sink = _Sink()
    with ShadowScorer(["mrr"], sample_rate=0.0, sinks=[sink]) as shadow:
        shadow.record(_request("a"))
        shadow.record(_request("b", contexts=[]))
        assert shadow.wait(timeout=10)
    got = {r.request_id: r for r in sink.served}
    assert (got["a"].chunks_used, got["a"].retrieval_miss) == (None, None)
    assert (got["b"].chunks_used, got["b"].retrieval_miss) == (0, True)


# --------------------------------------------------------------------------- the request path


def test_the_request_path_never_waits_for_a_slow_judge() -> None:
    judge = CountingJudge(delay=0.5)
    sink = _Sink()
    shadow = ShadowScorer(["faithfulness"], judge=judge, sample_rate=1.0, sinks=[sink]).open()
    try:
        start = time.perf_counter()
        taken = [shadow.record(_request(f"r{i}")) for i in range(20)]
        elapsed = time.perf_counter() - start
        # every request was taken while the first judge call (0.5 s) was still running
        assert all(taken)
        assert shadow.pending == 20
        assert elapsed < 0.5
        assert shadow.scored == 0
    finally:
        assert shadow.close(timeout=30)
    assert shadow.scored == 20
    assert len(sink.with_scores) == 20
    assert all(r.scores["faithfulness"].value == 1.0 for r in sink.with_scores)


def test_a_full_scoring_queue_drops_the_newest_and_counts_it() -> None:
    sink = _Sink()
    shadow = ShadowScorer(
        ["faithfulness"],
        judge=CountingJudge(delay=0.3),
        sample_rate=1.0,
        max_pending=2,
        sinks=[sink],
    ).open()
    try:
        taken = [shadow.record(_request(f"r{i}")) for i in range(5)]
    finally:
        assert shadow.close(timeout=30)
    assert taken == [True, True, False, False, False]
    stats = shadow.stats()
    assert (stats["seen"], stats["sampled"], stats["dropped"], stats["scored"]) == (5, 5, 3, 2)
    dropped = [r for r in sink.served if not r.sampled]
    assert [r.request_id for r in dropped] == ["r2", "r3", "r4"]
    assert all("max_pending" in r.attributes["not_scored"] for r in dropped)
    assert sorted(r.request_id for r in sink.with_scores) == ["r0", "r1"]


def test_a_full_record_queue_drops_the_newest_and_counts_it() -> None:
    release = threading.Event()

    class Stuck(_Sink):
        def request(self, record: RequestRecord) -> None:
            release.wait(10)
            super().request(record)

    sink = Stuck()
    shadow = ShadowScorer(["mrr"], sample_rate=0.0, max_queued=3, sinks=[sink]).open()
    try:
        for i in range(10):
            shadow.record(_request(f"r{i}"))
        # one is held by the stuck sink, three wait, the rest were refused
        assert shadow.unrecorded >= 6
        assert shadow.queued <= 3
    finally:
        release.set()
        assert shadow.close(timeout=30)
    assert len(sink.served) + shadow.unrecorded == 10


def test_a_failing_sink_is_counted_and_serving_goes_on() -> None:
    class Broken:
        def request(self, record: RequestRecord) -> None:
            raise RuntimeError("disk full")

        def scored(self, record: RequestRecord) -> None:
            raise RuntimeError("disk full")

    good = _Sink()
    sampled = _ids_sampled_at(0.5)[:2]
    with ShadowScorer(
        ["faithfulness"], judge=CountingJudge(), sample_rate=0.5, sinks=[Broken(), good]
    ) as shadow:
        for request_id in [*sampled, _ids_sampled_at(0.5, chosen=False)[0]]:
            shadow.record(_request(request_id))
        assert shadow.wait(timeout=10)
    n_scored = len(good.with_scores)
    assert n_scored == 2
    assert len(good.served) == 3  # the sink after the broken one got every record
    assert shadow.sink_errors == 3 + n_scored
    assert "Broken.request" in shadow.errors[0]
    assert "disk full" in shadow.errors[0]


def test_failed_and_unreadable_requests_are_recorded_not_scored() -> None:
    sink = _Sink()
    ids = _ids_sampled_at(1.0)
    with ShadowScorer(["faithfulness"], judge=CountingJudge(), sample_rate=1.0, sinks=[sink]) as s:
        s.record(_request(ids[0], answer=None, error="ValueError: bad input"))
        s.record(_request(ids[1], answer=None, not_scorable="streaming response"))
        assert s.wait(timeout=10)
    assert (s.sampled, s.unscorable, s.scored) == (1, 1, 0)
    failed, stream = sink.served
    assert (failed.sampled, failed.error) == (False, "ValueError: bad input")
    assert "not_scored" not in failed.attributes  # a failed request is never chosen
    assert (stream.sampled, stream.attributes["not_scored"]) == (False, "streaming response")
    assert sink.with_scores == []


# --------------------------------------------------------------------------- shutdown


def test_close_scores_what_is_pending() -> None:
    sink = _Sink()
    shadow = ShadowScorer(
        ["faithfulness"], judge=CountingJudge(delay=0.2), sample_rate=1.0, sinks=[sink]
    ).open()
    for i in range(5):
        shadow.record(_request(f"r{i}"))
    assert shadow.pending == 5
    assert shadow.close(timeout=30) is True
    assert len(sink.with_scores) == 5
    assert all(r.scores["faithfulness"].value is not None for r in sink.with_scores)
    assert not shadow.record(_request("late"))  # closed: nothing more is taken
    assert shadow.unrecorded == 1


def test_close_with_a_timeout_records_the_rest_as_cancelled() -> None:
    sink = _Sink()
    shadow = ShadowScorer(
        ["faithfulness"], judge=CountingJudge(delay=5), sample_rate=1.0, sinks=[sink]
    ).open()
    for i in range(3):
        shadow.record(_request(f"r{i}"))
    start = time.perf_counter()
    assert shadow.close(timeout=0.3) is False
    assert time.perf_counter() - start < 4  # did not wait for the 5 s judge
    assert sorted(r.request_id for r in sink.with_scores) == ["r0", "r1", "r2"]
    cells = [r.scores["faithfulness"] for r in sink.with_scores]
    assert all(c.failure == FailureKind.CANCELLED.value for c in cells)
    assert (shadow.pending, shadow.scored) == (0, 3)


def test_an_open_scorer_is_closed_at_exit(tmp_path: Path) -> None:
    """A service that forgets `close` still records its sampled requests' scores."""
    script = tmp_path / "service.py"
    script.write_text(
        "from ragbridge.core.monitoring.shadow import FinishedRequest, ShadowScorer\n"
        "from ragbridge.core.testing import CountingJudge\n"
        "shadow = ShadowScorer(['faithfulness'], judge=CountingJudge(delay=0.3), "
        "sample_rate=1.0, store='monitor.sqlite').open()\n"
        "shadow.record(FinishedRequest('r1', question='Q?', answer='Paris is in France.', "
        "contexts=[]))\n"
    )
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, timeout=60)
    with MonitorStore(tmp_path / "monitor.sqlite") as store:
        (record,) = store.requests()
    assert record.sampled
    assert set(record.scores) == {"faithfulness"}


# --------------------------------------------------------------------------- the store


def test_the_default_sink_is_a_store_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sampled = _ids_sampled_at(0.5)[0]
    with ShadowScorer(
        ["faithfulness"], judge=CountingJudge(), sample_rate=0.5, relevance_threshold=0.5
    ) as shadow:
        assert isinstance(shadow.sinks[0], StoreSink)
        shadow.record(_request(sampled))
        shadow.record(_request("not-sampled-" + sampled))
        assert shadow.wait(timeout=10)
    with MonitorStore(tmp_path / DEFAULT_STORE) as store:
        records = {r.request_id: r for r in store.requests()}
    scored = records[sampled]
    assert (scored.retrieval_ms, scored.generation_ms) == (4.0, 120.0)
    assert (scored.chunks_retrieved, scored.chunks_used, scored.retrieval_miss) == (2, 1, False)
    assert scored.sampled
    assert scored.scores["faithfulness"].value == 1.0
    assert scored.pipeline == "test"


def test_sinks_and_store_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    extra = _Sink()
    only_extra = ShadowScorer(["mrr"], sinks=[extra])
    assert only_extra.sinks == (extra,)
    both = ShadowScorer(["mrr"], sinks=[extra], store=tmp_path / "m.sqlite")
    assert isinstance(both.sinks[0], StoreSink)
    assert both.sinks[1] is extra
    assert ShadowScorer(["mrr"], store=None).sinks == ()
    assert ShadowScorer(["mrr"], sinks=[]).sinks == ()
    for shadow in (only_extra, both):
        shadow.close()
    assert not (tmp_path / DEFAULT_STORE).exists()
    with pytest.raises(TypeError, match="not a RequestSink"):
        ShadowScorer(["mrr"], sinks=[object()], store=None)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="not both"):
        ShadowScorer(Scorer(["mrr"]), judge=CountingJudge(), store=None)
    with pytest.raises(ValueError, match="max_queued"):
        ShadowScorer(["mrr"], max_queued=0, store=None)


# --------------------------------------------------------------------------- memory


def _serve(shadow: ShadowScorer, start: int, stop: int) -> None:
    """Requests in bursts of 100, each burst recorded before the next (traffic the sinks keep
    up with, as in a service running for weeks)."""
    for first in range(start, stop, 100):
        for i in range(first, min(first + 100, stop)):
            shadow.record(_request(f"req-{i}", question=f"Where is the Eiffel Tower? ({i})"))
        assert shadow.wait(timeout=30)


def test_memory_stays_flat_over_10000_requests() -> None:
    """Traced Python memory after 1,000 requests and after 10,000 more is the same within
    a bound that keeping anything per request would exceed (records, samples, rows, ids)."""
    sink = _Counting()
    shadow = ShadowScorer(
        ["faithfulness"], judge=CountingJudge(), sample_rate=0.05, sinks=[sink]
    ).open()
    try:
        _serve(shadow, 0, 1_000)  # warm-up: prompt templates, schemas, the worker loop
        gc.collect()
        tracemalloc.start()
        try:
            _serve(shadow, 1_000, 2_000)
            gc.collect()
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            _serve(shadow, 2_000, 12_000)
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        shadow.close(timeout=30)
    assert sink.served == 12_000
    assert sink.with_scores == shadow.scored == shadow.sampled
    assert 450 < shadow.sampled < 750  # 5% of 12,000 = 600
    growth = after - before
    print(f"\n10,000 requests: traced memory grew by {growth} bytes, peak {peak - before} bytes")
    assert growth < 100_000  # 10 bytes per request; one kept record would be ~1 KB
    assert peak - before < 2_000_000
    assert shadow.samples == []
    assert len(shadow.evaluation) == 0
    assert not shadow._awaiting
    assert not shadow._pending
    assert not shadow._queue


def test_the_memory_test_sees_a_sink_that_keeps_records() -> None:
    """The control for the test above: the same traffic into a sink that keeps every record
    grows by far more than its bound."""
    sink = _Sink()
    shadow = ShadowScorer(["mrr"], sample_rate=0.0, sinks=[sink]).open()
    try:
        _serve(shadow, 0, 200)
        gc.collect()
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            _serve(shadow, 200, 2_200)
            gc.collect()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        shadow.close(timeout=30)
    # 2,000 kept records: well above the 100,000-byte bound the 10,000 requests stay under
    assert after - before > 1_000_000
