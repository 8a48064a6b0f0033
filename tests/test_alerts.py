"""Alert rules on synthetic traffic with fixed seeds: a real drop is caught, stationary noise is
not (at most the stated false-alarm rate), a retrieval-miss spike is caught, one alert per
episode, and the batch check over a store agrees with the live monitor.

Traffic model: per-request faithfulness ~ Beta(mean * 5, (1 - mean) * 5) (sd 0.15 at mean 0.85,
piled up near 1 as judge scores are); misses ~ Bernoulli.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ragbridge.core.monitoring import MonitorStore, RequestRecord, RequestSink, ScoreCell
from ragbridge.core.monitoring.alerts import (
    RETRIEVAL_MISS,
    THUMBS_DOWN,
    Alert,
    AlertMonitor,
    Baseline,
    Rule,
    Signal,
    check,
    status_text,
)
from ragbridge.core.results.evaluation import Evaluation, Score

FAITH = Signal.score("faithfulness")


def faith(rng: np.random.Generator, mean: float, n: int) -> npt.NDArray[np.float64]:
    return rng.beta(mean * 5.0, (1.0 - mean) * 5.0, n)


def records(
    scores: Iterable[float] | None = None,
    misses: Iterable[bool] | None = None,
    *,
    start: int = 0,
    pipeline: str | None = None,
) -> list[RequestRecord]:
    s = list(scores) if scores is not None else None
    m = list(misses) if misses is not None else None
    n = len(s) if s is not None else len(m or [])
    return [
        RequestRecord(
            request_id=f"r{start + i}",
            timestamp=float(start + i),
            pipeline=pipeline,
            sampled=s is not None,
            retrieval_miss=None if m is None else bool(m[i]),
            scores={} if s is None else {"faithfulness": ScoreCell(value=float(s[i]))},
        )
        for i in range(n)
    ]


def feed(monitor: AlertMonitor, recs: Iterable[RequestRecord]) -> None:
    for r in recs:
        monitor.request(r)
        if r.scores:
            monitor.scored(r)


def firing(alerts: Iterable[Alert]) -> list[Alert]:
    return [a for a in alerts if a.state == "firing"]


# -- a drop is caught, noise is not ----------------------------------------------------------------


def test_a_faithfulness_drop_from_085_to_070_is_caught_once_soon_after_it_starts() -> None:
    rng = np.random.default_rng(7)
    got: list[Alert] = []
    monitor = AlertMonitor(
        Baseline({"faithfulness": faith(rng, 0.85, 200)}, source="results.jsonl"),
        signals=[FAITH],
        on_alert=got.append,
    )
    feed(monitor, records(np.concatenate([faith(rng, 0.85, 300), faith(rng, 0.70, 300)])))
    (alert,) = got
    assert alert.signal == "faithfulness"
    assert alert.state == "firing"
    assert 300 <= alert.timestamp < 300 + 100  # within one window of the change
    assert alert.test == "welch_t"
    assert alert.p_value < alert.alpha == pytest.approx(0.01 * 10 / 100)
    assert alert.effect >= 0.05
    assert alert.baseline_value == pytest.approx(0.85, abs=0.03)
    assert "faithfulness fell" in str(alert)
    assert "results.jsonl" in str(alert)


def test_the_drop_is_caught_for_every_seed() -> None:
    delays = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        monitor = AlertMonitor(Baseline({"faithfulness": faith(rng, 0.85, 200)}), signals=[FAITH])
        feed(monitor, records(np.concatenate([faith(rng, 0.85, 300), faith(rng, 0.70, 300)])))
        alerts = firing(monitor.alerts)
        assert len(alerts) == 1, seed
        assert alerts[0].timestamp >= 300, seed  # nothing before the change
        delays.append(alerts[0].timestamp - 300)
    assert max(delays) < 100  # within one window (measured: median 49, max 89 over 200 seeds)


def test_stationary_noise_stays_within_the_stated_false_alarm_rate() -> None:
    """alpha is the false-alarm probability per window-length: 60 streams x 2000 requests are
    1200 window-lengths of stationary traffic, so at most 12 false alarms at alpha = 0.01
    (measured: 6 in 4000 window-lengths, seeds 0-199)."""
    rule = Rule(alpha=0.01, window=100, check_every=10)
    alarms = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        monitor = AlertMonitor(
            Baseline({"faithfulness": faith(rng, 0.85, 200)}), rule=rule, signals=[FAITH]
        )
        feed(monitor, records(faith(rng, 0.85, 2000)))
        alarms += len(firing(monitor.alerts))
    assert alarms <= 0.01 * 60 * 2000 / 100


def test_noise_at_the_size_of_the_window_raises_nothing_for_a_fixed_seed() -> None:
    rng = np.random.default_rng(2024)
    monitor = AlertMonitor(Baseline({"faithfulness": faith(rng, 0.85, 200)}), signals=[FAITH])
    feed(monitor, records(faith(rng, 0.85, 3000)))
    assert monitor.alerts == []
    (status,) = monitor.status()
    assert status.n_window == 100
    assert not status.active
    assert status.p_value is not None
    assert status.p_value > 0.001


def test_testing_every_request_at_the_nominal_alpha_would_alarm_on_noise() -> None:
    """Why the per-check level is divided: the same noise, checked after every request at
    alpha = 0.05 with no correction and no minimum effect, alarms in most streams."""
    loose = _Uncorrected(
        Rule(alpha=0.05, window=100, check_every=1, min_effect={"faithfulness": 0.0})
    )
    corrected = Rule(alpha=0.05, window=100, check_every=1)
    naive = 0
    ours = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        base = Baseline({"faithfulness": faith(rng, 0.85, 200)})
        stream = records(faith(rng, 0.85, 2000))
        m1 = AlertMonitor(base, rule=loose, signals=[FAITH])  # type: ignore[arg-type]
        feed(m1, stream)
        naive += len(firing(m1.alerts))
        m2 = AlertMonitor(base, rule=corrected, signals=[FAITH])
        feed(m2, stream)
        ours += len(firing(m2.alerts))
    assert naive >= 10 > ours


class _Uncorrected:
    """A rule whose every check runs at the nominal alpha (the mistake the real rule avoids)."""

    def __init__(self, rule: Rule) -> None:
        self._rule = rule

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rule, name)

    def check_alpha(self, n_window: int) -> float:
        return self._rule.alpha


def test_a_significant_change_below_the_minimum_effect_is_not_an_alert() -> None:
    """Not a bare significance test either: with a huge baseline and window, a drop of 0.02 is
    significant but below the 0.05 minimum; lowering the minimum makes it an alert."""
    rng = np.random.default_rng(3)
    base = Baseline({"faithfulness": faith(rng, 0.85, 20000)})
    stream = records(faith(rng, 0.83, 4000))
    rule = Rule(window=2000, min_window=1000)
    default = AlertMonitor(base, rule=rule, signals=[FAITH])
    feed(default, stream)
    assert default.alerts == []
    (status,) = default.status()
    assert status.p_value is not None
    assert status.p_value < 1e-6
    strict = AlertMonitor(
        base, rule=Rule(window=2000, min_window=1000, min_effect={"faithfulness": 0.01})
    )
    feed(strict, stream)
    assert [a.signal for a in firing(strict.alerts)] == ["faithfulness"]


# -- rates ----------------------------------------------------------------------------------------


def test_a_retrieval_miss_spike_is_caught_and_steady_misses_are_not() -> None:
    rng = np.random.default_rng(11)
    base = Baseline({"retrieval_miss": rng.random(1000) < 0.05})
    steady = AlertMonitor(base, signals=[RETRIEVAL_MISS])
    feed(steady, records(misses=rng.random(2000) < 0.05))
    assert steady.alerts == []

    spike = AlertMonitor(base, signals=[RETRIEVAL_MISS])
    feed(spike, records(misses=np.concatenate([rng.random(300) < 0.05, rng.random(300) < 0.20])))
    (alert,) = spike.alerts
    assert alert.signal == "retrieval_miss"
    assert alert.test == "fisher_exact"
    assert 300 <= alert.timestamp < 400
    assert alert.window_value > alert.baseline_value + 0.05
    assert "retrieval_miss rose" in alert.message


def test_rate_noise_stays_within_the_stated_false_alarm_rate() -> None:
    alarms = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        monitor = AlertMonitor(
            Baseline({"retrieval_miss": rng.random(1000) < 0.05}), signals=[RETRIEVAL_MISS]
        )
        feed(monitor, records(misses=rng.random(2000) < 0.05))
        alarms += len(firing(monitor.alerts))
    assert alarms <= 0.01 * 60 * 2000 / 100  # measured: 7 in 4000 window-lengths (seeds 0-199)


def test_thumbs_down_feedback_is_a_rate_signal_fed_as_feedback_arrives() -> None:
    rng = np.random.default_rng(5)
    got: list[Alert] = []
    monitor = AlertMonitor(
        Baseline({"thumbs_down": rng.random(500) < 0.1}), signals=[THUMBS_DOWN], on_alert=got.append
    )
    for i, down in enumerate(np.concatenate([rng.random(200) < 0.1, rng.random(200) < 0.35])):
        monitor.feedback(f"r{i}", 0.0 if down else 1.0, timestamp=float(i))
    (alert,) = got
    assert alert.signal == "thumbs_down"
    assert alert.timestamp >= 200


# -- episodes -------------------------------------------------------------------------------------


def test_one_alert_per_episode_then_resolved_then_a_new_episode() -> None:
    rng = np.random.default_rng(1)
    fired: list[Alert] = []
    resolved: list[Alert] = []
    monitor = AlertMonitor(
        Baseline({"faithfulness": faith(rng, 0.85, 300)}),
        signals=[FAITH],
        on_alert=fired.append,
        on_resolve=resolved.append,
    )
    phases = [(0.85, 200), (0.65, 600), (0.85, 400), (0.65, 300)]
    values = np.concatenate([faith(rng, mean, n) for mean, n in phases])
    feed(monitor, records(values))
    assert [a.state for a in monitor.alerts] == ["firing", "resolved", "firing"]
    assert len(fired) == 2
    assert len(resolved) == 1
    first, back, second = monitor.alerts
    assert 200 <= first.timestamp < 300  # the first drop, alerted once over 600 bad requests
    assert 800 <= back.timestamp < 1000  # recovery seen within two windows of it
    assert back.effect <= 0.05 / 2
    assert second.timestamp >= 1200
    assert monitor.status()[0].active


def test_a_callback_that_raises_is_counted_and_never_reaches_the_caller() -> None:
    rng = np.random.default_rng(7)

    def boom(alert: Alert) -> None:
        raise RuntimeError("pager down")

    monitor = AlertMonitor(
        Baseline({"faithfulness": faith(rng, 0.85, 200)}), signals=[FAITH], on_alert=boom
    )
    assert isinstance(monitor, RequestSink)
    feed(monitor, records(faith(rng, 0.6, 200)))
    assert monitor.failures == 1
    assert monitor.last_failure is not None
    assert "pager down" in monitor.last_failure
    assert len(monitor.alerts) == 1


# -- windows, baselines, batch --------------------------------------------------------------------


def test_a_time_window_holds_the_last_t_seconds() -> None:
    rng = np.random.default_rng(4)
    rule = Rule(window_seconds=60.0, min_window=30, check_every=10)
    monitor = AlertMonitor(Baseline({"faithfulness": faith(rng, 0.85, 300)}), rule=rule)
    # two requests a second: the window holds ~120 values; a drop starts at t=200 s
    stream = [
        RequestRecord(
            request_id=f"t{i}",
            timestamp=i / 2,
            sampled=True,
            scores={"faithfulness": ScoreCell(value=float(v))},
        )
        for i, v in enumerate(np.concatenate([faith(rng, 0.85, 400), faith(rng, 0.7, 200)]))
    ]
    feed(monitor, stream)
    (alert,) = firing(monitor.alerts)
    assert alert.timestamp >= 200
    assert 100 <= alert.n_window <= 121
    assert alert.alpha == pytest.approx(0.01 * 10 / alert.n_window)


def test_signals_without_a_baseline_warm_up_on_their_first_observations() -> None:
    rng = np.random.default_rng(9)
    monitor = AlertMonitor(warmup=200)  # no baseline at all
    values = np.concatenate([faith(rng, 0.85, 400), faith(rng, 0.65, 200)])
    misses = rng.random(600) < 0.05
    recs = records(values, misses)
    feed(monitor, recs)
    names = {s.name for s in monitor.signals}
    assert {"faithfulness", "retrieval_miss", "thumbs_down"} <= names
    (alert,) = monitor.alerts
    assert alert.signal == "faithfulness"
    assert alert.baseline_source == "first 200 observations"
    assert "ALERT" in monitor.summary()
    assert "retrieval_miss" in monitor.summary()


def test_baseline_from_a_results_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ev = Evaluation()
    for i, v in enumerate(faith(rng, 0.85, 150)):
        ev.add(f"s{i}", "faithfulness", Score(value=float(v)))
    ev.add("s0", "answer_relevance", Score.fail("timeout", "judge timed out"))
    ev.add("s1", "answer_relevance", Score(value=0.5))
    path = tmp_path / "results.jsonl"
    ev.to_jsonl(path)
    base = Baseline.from_results(path)
    assert base.values["faithfulness"].size == 150
    assert base.values["answer_relevance"].tolist() == [0.5]  # the failure is not a zero
    assert base.source == str(path)
    monitor = AlertMonitor(base)
    feed(monitor, records(faith(rng, 0.7, 150)))
    (alert,) = monitor.alerts
    assert alert.signal == "faithfulness"
    assert alert.baseline_source == str(path)


def _fill(store: MonitorStore, rng: np.random.Generator) -> None:
    """1000 requests: 600 normal (t < 600), then 400 with a retrieval-miss spike."""
    misses = np.concatenate([rng.random(600) < 0.05, rng.random(400) < 0.25])
    for i, miss in enumerate(misses):
        store.add_request(
            RequestRecord(
                request_id=f"q{i:04d}",
                timestamp=float(i),
                pipeline="bot",
                retrieval_miss=bool(miss),
                sampled=i % 2 == 0,
                scores={"faithfulness": ScoreCell(value=float(faith(rng, 0.85, 1)[0]))}
                if i % 2 == 0
                else {},
            )
        )
        store.add_feedback(f"q{i:04d}", 0.0 if (miss and rng.random() < 0.5) else 1.0)
    store.add_request(RequestRecord(request_id="other", timestamp=700.0, pipeline="other"))


def test_check_over_a_store_with_an_earlier_window_as_baseline(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "m.sqlite") as store:
        _fill(store, np.random.default_rng(12))
        alerts = check(store, since=400.0, pipeline="bot")
        signals = [a.signal for a in firing(alerts)]
        assert "retrieval_miss" in signals
        assert "faithfulness" not in signals
        miss = next(a for a in alerts if a.signal == "retrieval_miss")
        assert miss.timestamp >= 600
        assert miss.n_baseline == 400
        assert "[, 400.0)" in miss.baseline_source
        # thumbs-down follows the misses (half of missed requests are rated down)
        assert "thumbs_down" in signals

        # the batch check and the live monitor agree
        live = AlertMonitor(Baseline.from_store(store, until=400.0, pipeline="bot"))
        for record in store.requests(since=400.0, pipeline="bot"):
            live.request(record)
            if record.scores:
                live.scored(record)
            if record.feedback is not None:
                live.feedback(record.request_id, record.feedback, timestamp=record.timestamp)
        assert [(a.signal, a.state, a.timestamp) for a in live.alerts] == [
            (a.signal, a.state, a.timestamp) for a in alerts
        ]


def test_check_needs_no_baseline_argument_to_warm_up_and_reads_a_results_path(
    tmp_path: Path,
) -> None:
    with MonitorStore(tmp_path / "m.sqlite") as store:
        _fill(store, np.random.default_rng(12))
        warm = check(store, pipeline="bot", warmup=300)
        assert any(a.signal == "retrieval_miss" for a in warm)
        ev = Evaluation([("s1", "faithfulness", Score(value=0.9))])
        ev.to_jsonl(tmp_path / "r.jsonl")
        # a one-sample results file is too small a baseline to test against: nothing fires on it
        from_file = check(store, tmp_path / "r.jsonl", pipeline="bot", warmup=None)
        assert from_file == []


def test_the_pipeline_filter_ignores_other_pipelines() -> None:
    rng = np.random.default_rng(7)
    monitor = AlertMonitor(
        Baseline({"faithfulness": faith(rng, 0.85, 200)}), signals=[FAITH], pipeline="a"
    )
    feed(monitor, records(faith(rng, 0.5, 300), pipeline="b"))
    assert monitor.alerts == []
    assert monitor.status()[0].n_window == 0


def test_status_text_and_rule_validation() -> None:
    rng = np.random.default_rng(0)
    monitor = AlertMonitor(Baseline({"faithfulness": faith(rng, 0.85, 200)}), signals=[FAITH])
    assert "-" in status_text(monitor.status())  # nothing measured yet
    feed(monitor, records(faith(rng, 0.85, 50)))
    line = monitor.summary().splitlines()[1]
    assert line.startswith("faithfulness")
    assert line.endswith("ok")
    with pytest.raises(ValueError, match="alpha"):
        Rule(alpha=1.5)
    with pytest.raises(ValueError, match="min_window"):
        Rule(window=20, min_window=30)
    with pytest.raises(ValueError, match="warmup"):
        AlertMonitor(warmup=1)
    assert AlertMonitor(warmup=5).warmup == 30  # never a baseline smaller than min_window
    with pytest.raises(ValueError, match="NaN"):
        Baseline({"x": [0.5, float("nan")]})
