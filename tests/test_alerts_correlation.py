"""`feedback_report`: thumbs-down feedback against retrieval patterns. A planted link between
retrieval misses (or one stale source) and thumbs down is found; a planted null is not."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragbridge.core.monitoring import MonitorStore, RequestRecord
from ragbridge.core.monitoring.correlation import feedback_report

SOURCES = ["handbook", "faq", "wiki", "release-notes"]


def traffic(
    seed: int,
    n: int = 600,
    *,
    down_if_miss: float = 0.1,
    down_if_hit: float = 0.1,
    stale: str | None = None,
    down_if_stale: float = 0.1,
) -> list[RequestRecord]:
    """Requests with feedback: 20% retrieval misses; thumbs-down probability set per pattern."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        miss = bool(rng.random() < 0.2)
        used = 0 if miss else int(rng.integers(1, 5))
        source = SOURCES[int(rng.integers(0, len(SOURCES)))]
        p = down_if_miss if miss else down_if_hit
        if stale is not None and source == stale:
            p = down_if_stale
        down = bool(rng.random() < p)
        out.append(
            RequestRecord(
                request_id=f"r{i}",
                timestamp=float(i),
                retrieval_miss=miss,
                chunks_retrieved=4,
                chunks_used=used,
                feedback=0.0 if down else 1.0,
                attributes={"top_source": source},
            )
        )
    # requests without feedback or without a retrieval measure are left out, never counted as 0
    out.append(RequestRecord(request_id="unrated", timestamp=999.0, retrieval_miss=True))
    out.append(RequestRecord(request_id="unmeasured", timestamp=999.5, feedback=0.0))
    return out


def test_a_planted_miss_link_is_found_and_the_source_is_not_blamed() -> None:
    report = feedback_report(traffic(1, down_if_miss=0.45, down_if_hit=0.1))
    miss = report.factor("retrieval_miss")
    assert miss.linked
    assert miss.p_adjusted < 0.01
    assert miss.worst is not None
    assert miss.worst.group == "miss"
    rates = {g.group: g.rate for g in miss.groups}
    assert rates["miss"] > 0.3 > 0.15 > rates["hit"]
    assert report.factor("chunks_used").linked  # 0 chunks used is a miss
    assert not report.factor("source").linked
    assert report.n_requests == 602
    assert report.n_feedback == 601
    assert sum(g.n for g in miss.groups) == 600  # the request with no miss measure is left out


def test_a_planted_null_finds_no_link() -> None:
    for seed in range(5):
        report = feedback_report(traffic(seed, down_if_miss=0.15, down_if_hit=0.15))
        assert report.linked == [], (seed, report.text())


def test_one_stale_source_behind_the_complaints_is_named() -> None:
    report = feedback_report(traffic(2, stale="release-notes", down_if_stale=0.4))
    source = report.factor("source")
    assert source.linked
    assert source.worst is not None
    assert source.worst.group == "release-notes"
    assert not report.factor("retrieval_miss").linked


def test_small_sources_are_pooled_and_context_ids_are_the_fallback() -> None:
    records = [
        RequestRecord(
            request_id=f"r{i}",
            timestamp=float(i),
            feedback=1.0,
            attributes={"context_ids": [f"chunk-{i % 3}" if i < 60 else f"rare-{i}", "x"]},
        )
        for i in range(70)
    ]
    report = feedback_report(records, min_group=10)
    groups = {g.group: g.n for g in report.factor("source").groups}
    assert groups == {"chunk-0": 20, "chunk-1": 20, "chunk-2": 20, "(other)": 10}
    assert not report.factor("source").linked  # nobody rated anything down: nothing to test


def test_the_report_reads_a_store_and_prints_a_summary(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "m.sqlite") as store:
        for record in traffic(3, down_if_miss=0.5, down_if_hit=0.05):
            store.add_request(record)
        report = feedback_report(store, factors={"retrieval_miss": lambda r: str(r.retrieval_miss)})
    text = report.text()
    assert text.startswith("Thumbs-down vs retrieval: 601 of 602 requests rated")
    assert "retrieval_miss  LINKED" in text
    assert [f.factor for f in report.factors] == ["retrieval_miss"]
    assert str(report) == text


def test_the_permutation_test_is_reproducible_by_seed() -> None:
    records = traffic(4, down_if_miss=0.2, down_if_hit=0.12)
    a = feedback_report(records, seed=1)
    b = feedback_report(records, seed=1)
    assert [f.p_value for f in a.factors] == [f.p_value for f in b.factors]
