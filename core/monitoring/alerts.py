"""Baselines and alerts over live requests: rolling windows, a statistical test, hysteresis.

**What is watched.** A `Signal` is one number per request: a metric's score (a *mean*; a drop is
bad) or a yes/no outcome (a *rate*; a rise is bad): ``retrieval_miss``, ``thumbs_down``
(feedback below 0.5), ``abstention``, ``error``. Each signal keeps its own rolling window of the
last ``window`` observations (or the last ``window_seconds`` of them, by request timestamp).
A window counts the requests that *have* the value: a score window holds scored requests only,
the thumbs-down window requests with feedback only; an unmeasured value is never a zero.

**Against what.** A `Baseline` holds per-request values for each signal: the per-sample scores of
a results file (`Baseline.from_results`: live traffic against the evaluation set the release was
gated on) or the requests of an earlier window of the store (`Baseline.from_store`: live traffic
against last week's live traffic). A results file has no retrieval misses or feedback, so signals
the baseline lacks take the first ``warmup`` observations of the stream as their baseline.

**The rule** (not a bare threshold). Every ``check_every`` new observations of a signal whose
window holds at least ``min_window`` values, the window is tested against the baseline, one-sided
in the bad direction:

* a mean with Welch's t test (`welch_t_test`: unequal variances, Welch–Satterthwaite df; scores
  are bounded, so the t approximation is already good at 30 values);
* a rate with the one-sided Fisher exact test (`fisher_exact_greater`; exact at small counts,
  where a two-proportion z test's false-alarm rate runs above its nominal level).

An alert fires when ``p < alpha_check`` **and** the observed change is at least the signal's
``min_effect`` (0.05 by default: five points of a score or of a rate; 0.02 for errors), so a
large baseline cannot turn a negligible but "significant" wobble into a page.

**The false-alarm rate.** Testing after every request would test the same data over and over and
alarm far more often than alpha. Each check therefore runs at
``alpha_check = alpha * check_every / window`` (``window`` being the count window, or the number of
values in a time window), so the ``window / check_every`` checks that one window-length of
stationary traffic sees carry at most ``alpha`` between them (Bonferroni). ``alpha`` is the
false-alarm probability per signal per window-length of traffic: with the defaults
(``alpha=0.01``, ``window=100``) at most one false alarm per signal per 10,000 observations of
stationary traffic. The bound is conservative (overlapping windows are positively correlated and
Fisher's test is discrete); ``tests/test_alerts.py`` measures the rate on seeded noise.

**Episodes (hysteresis).** A firing signal stays *active* and does not alert again until its
window is back within half the minimum effect of the baseline (observed change
``<= min_effect / 2``); then the episode is *resolved* (``on_resolve``) and the next drop is a
new episode. `on_alert` is called once per episode.

`AlertMonitor` is a `RequestSink` (plus `AlertMonitor.feedback`, as feedback arrives outside the
sink protocol); `check` replays a results store through the same monitor, so a batch check and
the live monitor agree. Everything here is numpy and the standard library.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from .records import RequestRecord
from .significance import fisher_exact_greater, welch_t_test
from .store_api import ResultsStore

__all__ = [
    "ABSTENTION",
    "DEFAULT_RATES",
    "ERROR",
    "RETRIEVAL_MISS",
    "THUMBS_DOWN",
    "Alert",
    "AlertMonitor",
    "Baseline",
    "Rule",
    "Signal",
    "SignalStatus",
    "check",
    "status_text",
]

Kind = Literal["mean", "rate"]
Bad = Literal["drop", "rise"]
Event = Literal["request", "scored", "feedback"]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Signal:
    """One monitored number per request.

    ``extract`` gives the request's value (a score, or 1.0/0.0 for a rate) or None when the
    request has none; ``event`` says when the value is known: when the request is served
    (``request``), when its scores arrive (``scored``) or when feedback arrives (``feedback``).
    """

    name: str
    kind: Kind
    bad: Bad
    min_effect: float
    extract: Callable[[RequestRecord], float | None] = field(compare=False, repr=False)
    event: Event = "request"

    def __post_init__(self) -> None:
        if self.kind not in ("mean", "rate"):
            raise ValueError(f"kind must be 'mean' or 'rate', got {self.kind!r}")
        if self.bad not in ("drop", "rise"):
            raise ValueError(f"bad must be 'drop' or 'rise', got {self.bad!r}")
        if not self.min_effect >= 0:
            raise ValueError(f"min_effect must be >= 0, got {self.min_effect!r}")

    @classmethod
    def score(cls, metric: str, *, min_effect: float = 0.05) -> Signal:
        """The mean of a metric's scores (failed and skipped cells left out); a drop is bad."""

        def value(record: RequestRecord) -> float | None:
            cell = record.scores.get(metric)
            return None if cell is None else cell.value

        return cls(metric, "mean", "drop", min_effect, value, "scored")


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


RETRIEVAL_MISS = Signal(
    "retrieval_miss", "rate", "rise", 0.05, lambda r: _flag(r.retrieval_miss), "request"
)
"""Share of requests where no retrieved chunk reached the relevance threshold."""
THUMBS_DOWN = Signal(
    "thumbs_down",
    "rate",
    "rise",
    0.05,
    lambda r: None if r.feedback is None else float(r.feedback < 0.5),
    "feedback",
)
"""Share of requests with feedback whose feedback is below 0.5."""
ABSTENTION = Signal("abstention", "rate", "rise", 0.05, lambda r: _flag(r.abstained), "request")
"""Share of answers that declined to answer."""
ERROR = Signal("error", "rate", "rise", 0.02, lambda r: float(r.error is not None), "request")
"""Share of requests whose pipeline raised."""
DEFAULT_RATES: tuple[Signal, ...] = (RETRIEVAL_MISS, THUMBS_DOWN, ABSTENTION, ERROR)
_RATES_BY_NAME = {s.name: s for s in DEFAULT_RATES}


# -- baseline -------------------------------------------------------------------------------------


class Baseline:
    """Per-request values of each signal (scores, or 1.0/0.0 outcomes of a rate), by signal name."""

    def __init__(self, values: Mapping[str, npt.ArrayLike], *, source: str = "given") -> None:
        self.values: dict[str, FloatArray] = {}
        for name, raw in values.items():
            arr = np.asarray(raw, dtype=np.float64).ravel()
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"baseline {name!r} holds a NaN or infinite value")
            self.values[name] = arr
        self.source = source

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}: {v.size}" for k, v in self.values.items())
        return f"Baseline({{{sizes}}}, source={self.source!r})"

    @classmethod
    def from_evaluation(cls, evaluation: object, *, source: str = "evaluation") -> Baseline:
        """Each metric's scored values in an `Evaluation` (failures and skips left out)."""
        from ..results.evaluation import Evaluation

        if not isinstance(evaluation, Evaluation):
            raise TypeError(f"expected an Evaluation, got {type(evaluation).__name__}")
        return cls({m: evaluation.values(m)[1] for m in evaluation.metrics}, source=source)

    @classmethod
    def from_results(cls, path: str | os.PathLike[str]) -> Baseline:
        """The per-sample scores of a results file (``ragbridge eval --out``)."""
        from ..results.evaluation import Evaluation

        return cls.from_evaluation(Evaluation.from_jsonl(path), source=os.fspath(path))

    @classmethod
    def from_requests(
        cls,
        records: Iterable[RequestRecord],
        *,
        signals: Sequence[Signal] | None = None,
        source: str = "requests",
    ) -> Baseline:
        """Each signal's values over recorded requests (default: the rates, every metric seen)."""
        records = list(records)
        chosen = list(signals) if signals is not None else _signals_seen(records)
        values: dict[str, list[float]] = {}
        for signal in chosen:
            column = [v for v in map(signal.extract, records) if v is not None]
            if column:
                values[signal.name] = column
        return cls(values, source=source)

    @classmethod
    def from_store(
        cls,
        store: ResultsStore,
        *,
        since: float | None = None,
        until: float | None = None,
        pipeline: str | None = None,
        signals: Sequence[Signal] | None = None,
    ) -> Baseline:
        """The requests of an earlier window of a store (``since <= ts < until``)."""
        span = f"[{'' if since is None else since}, {'' if until is None else until})"
        records = store.requests(since=since, until=until, pipeline=pipeline)
        return cls.from_requests(records, signals=signals, source=f"{store.location} {span}")

    def signals(self) -> list[Signal]:
        """A signal for each name held: the known rates by name, a score mean for the rest."""
        return [_RATES_BY_NAME.get(name) or Signal.score(name) for name in self.values]


def _signals_seen(records: Sequence[RequestRecord]) -> list[Signal]:
    metrics = sorted({m for r in records for m in r.scores})
    return [*DEFAULT_RATES, *(Signal.score(m) for m in metrics)]


# -- rule, alerts, status -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """When a window differs from the baseline enough to alert (see the module docstring)."""

    alpha: float = 0.01
    """False-alarm probability per signal per window-length of stationary traffic."""
    window: int = 100
    """Count window: the last ``window`` observations of each signal."""
    window_seconds: float | None = None
    """Time window instead: the observations of the last ``window_seconds`` (request time)."""
    min_window: int = 30
    """No test on fewer values in the window (or in the baseline)."""
    check_every: int = 10
    """Test after every ``check_every`` new observations of a signal."""
    min_effect: Mapping[str, float] = field(default_factory=dict)
    """Per-signal overrides of `Signal.min_effect`."""

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha!r}")
        if self.window < 2 or self.min_window < 2 or self.check_every < 1:
            raise ValueError("window and min_window must be >= 2 and check_every >= 1")
        if self.min_window > self.window and self.window_seconds is None:
            raise ValueError(f"min_window ({self.min_window}) exceeds window ({self.window})")
        if self.window_seconds is not None and not self.window_seconds > 0:
            raise ValueError(f"window_seconds must be positive, got {self.window_seconds!r}")

    def check_alpha(self, n_window: int) -> float:
        """The level of one check: ``alpha * check_every / window``, at most ``alpha``."""
        width = self.window if self.window_seconds is None else max(n_window, self.check_every)
        return min(self.alpha, self.alpha * self.check_every / width)

    def effect_for(self, signal: Signal) -> float:
        return float(self.min_effect.get(signal.name, signal.min_effect))


@dataclass(frozen=True)
class Alert:
    """A signal's window differs from its baseline in the bad direction (or stopped differing).

    ``effect`` is the change in the bad direction (baseline - window for a drop, window -
    baseline for a rise); ``p_value`` is the one-sided p of ``test`` at the check that fired
    (or resolved), compared with ``alpha`` (the per-check level).
    """

    signal: str
    kind: Kind
    bad: Bad
    state: Literal["firing", "resolved"]
    baseline_value: float
    window_value: float
    effect: float
    min_effect: float
    p_value: float
    alpha: float
    test: Literal["welch_t", "fisher_exact"]
    n_window: int
    n_baseline: int
    baseline_source: str
    timestamp: float
    request_id: str | None = None

    @property
    def message(self) -> str:
        what = "mean" if self.kind == "mean" else "rate"
        moved = ("fell" if self.bad == "drop" else "rose") if self.state == "firing" else "is back"
        return (
            f"{self.signal} {moved}: window {what} {self.window_value:.3f} (n={self.n_window}) vs "
            f"baseline {self.baseline_value:.3f} (n={self.n_baseline}, {self.baseline_source}); "
            f"change {self.effect:+.3f} in the bad direction (min {self.min_effect:.3f}), "
            f"one-sided {self.test.replace('_', ' ')} p={self.p_value:.2g} "
            f"(alpha per check {self.alpha:.2g})"
        )

    def __str__(self) -> str:
        return f"[{self.state}] {self.message}"


class SignalStatus(NamedTuple):
    """The rolling state of one signal at its last check (values None until a first check)."""

    signal: str
    kind: Kind
    n_baseline: int
    baseline_value: float | None
    n_window: int
    window_value: float | None
    effect: float | None
    p_value: float | None
    active: bool


def status_text(statuses: Iterable[SignalStatus]) -> str:
    """A small table of rolling values against baselines (``-`` where not measured yet)."""

    def num(v: float | None, fmt: str = ".3f") -> str:
        return "-" if v is None else format(v, fmt)

    lines = [
        f"{'signal':<22} {'kind':<5} {'baseline':>9} {'n':>6} {'window':>8} {'n':>5} "
        f"{'change':>8} {'p':>8}  state"
    ]
    for s in statuses:
        lines.append(
            f"{s.signal:<22} {s.kind:<5} {num(s.baseline_value):>9} {s.n_baseline:>6} "
            f"{num(s.window_value):>8} {s.n_window:>5} {num(s.effect, '+.3f'):>8} "
            f"{num(s.p_value, '.2g'):>8}  {'ALERT' if s.active else 'ok'}"
        )
    return "\n".join(lines)


# -- the monitor ----------------------------------------------------------------------------------


class _Track:
    """One signal's baseline, window and episode."""

    def __init__(self, signal: Signal, baseline: FloatArray | None, window: int | None) -> None:
        self.signal = signal
        self.baseline = baseline
        self.warm: list[float] = []
        self.window: deque[tuple[float, float]] = deque(maxlen=window)
        self.pending = 0
        self.active: Alert | None = None
        self.status: SignalStatus = SignalStatus(
            signal.name,
            signal.kind,
            0 if baseline is None else baseline.size,
            None if baseline is None or baseline.size == 0 else float(baseline.mean()),
            0,
            None,
            None,
            None,
            False,
        )


class AlertMonitor:
    """Rolling windows per signal against a baseline; ``on_alert`` once per episode.

    ``baseline`` gives each signal's reference values; signals it lacks (and every signal when
    it is None) use their first ``warmup`` observations instead (at least ``rule.min_window``;
    ``warmup=None``: such signals are not watched). ``signals`` defaults to the baseline's
    signals, the `DEFAULT_RATES`, and a score mean for every metric that appears in scored
    requests. ``pipeline`` restricts the
    monitor to one pipeline's requests. A callback that raises is counted in ``failures`` and
    never reaches the caller (the monitor is a sink on the serving path).

    Usage::

        monitor = AlertMonitor(Baseline.from_results("eval.jsonl"), on_alert=page)
        # pass it to the shadow-scoring wrapper beside the store: sinks=[StoreSink(store), monitor]
        monitor.feedback(request_id, 0.0)      # thumbs down, when the user gives it
        print(monitor.summary())               # rolling values against the baseline
    """

    def __init__(
        self,
        baseline: Baseline | None = None,
        *,
        rule: Rule | None = None,
        signals: Sequence[Signal] | None = None,
        on_alert: Callable[[Alert], None] | None = None,
        on_resolve: Callable[[Alert], None] | None = None,
        warmup: int | None = 200,
        pipeline: str | None = None,
    ) -> None:
        self.baseline = baseline
        self.rule = rule or Rule()
        self.on_alert = on_alert
        self.on_resolve = on_resolve
        if warmup is not None and warmup < 2:
            raise ValueError(f"warmup must be at least 2 observations, got {warmup}")
        self.warmup = None if warmup is None else max(warmup, self.rule.min_window)
        self.pipeline = pipeline
        self.alerts: list[Alert] = []
        """Every firing and resolving, in order."""
        self.failures = 0
        self.last_failure: str | None = None
        self._lock = threading.Lock()
        self._tracks: dict[str, _Track] = {}
        self._discover = signals is None
        chosen = list(signals) if signals is not None else self._default_signals()
        for signal in chosen:
            self._add(signal)

    def _default_signals(self) -> list[Signal]:
        chosen = self.baseline.signals() if self.baseline is not None else []
        names = {s.name for s in chosen}
        return chosen + [s for s in DEFAULT_RATES if s.name not in names]

    def _add(self, signal: Signal) -> None:
        if signal.name in self._tracks:
            raise ValueError(f"signal {signal.name!r} given twice")
        values = None if self.baseline is None else self.baseline.values.get(signal.name)
        window = None if self.rule.window_seconds is not None else self.rule.window
        self._tracks[signal.name] = _Track(signal, values, window)

    @property
    def signals(self) -> list[Signal]:
        with self._lock:
            return [t.signal for t in self._tracks.values()]

    # -- the sink protocol ------------------------------------------------------------------

    def request(self, record: RequestRecord) -> None:
        self._feed(record, "request")

    def scored(self, record: RequestRecord) -> None:
        if self._discover and self.warmup is not None:
            with self._lock:
                for metric in record.scores:
                    if metric not in self._tracks:
                        self._add(Signal.score(metric))
        self._feed(record, "scored")

    def feedback(self, request_id: str, value: float, *, timestamp: float | None = None) -> None:
        """A user's verdict on a served request (1.0 up, 0.0 down), as the store records it."""
        record = RequestRecord(
            request_id=request_id,
            timestamp=time.time() if timestamp is None else timestamp,
            feedback=value,
            pipeline=self.pipeline,
        )
        self._feed(record, "feedback")

    def replay(self, records: Iterable[RequestRecord]) -> list[Alert]:
        """Feed stored requests in order (served, then scored, then feedback); the new alerts."""
        before = len(self.alerts)
        for record in records:
            self.request(record)
            if record.scores:
                self.scored(record)
            if record.feedback is not None:
                self._feed(record, "feedback")
        return self.alerts[before:]

    def status(self) -> list[SignalStatus]:
        with self._lock:
            return [t.status for t in self._tracks.values()]

    def summary(self) -> str:
        return status_text(self.status())

    # -- internals --------------------------------------------------------------------------

    def _feed(self, record: RequestRecord, event: Event) -> None:
        if self.pipeline is not None and record.pipeline != self.pipeline:
            return
        notices: list[tuple[Callable[[Alert], None] | None, Alert]] = []
        with self._lock:
            for track in self._tracks.values():
                if track.signal.event != event:
                    continue
                try:
                    value = track.signal.extract(record)
                except Exception as exc:  # a user's extractor must not break serving
                    self._failed(f"signal {track.signal.name}: {type(exc).__name__}: {exc}")
                    continue
                if value is None or not math.isfinite(value):
                    continue
                notice = self._observe(track, record, float(value))
                if notice is not None:
                    self.alerts.append(notice)
                    hook = self.on_alert if notice.state == "firing" else self.on_resolve
                    notices.append((hook, notice))
        for hook, notice in notices:
            if hook is None:
                continue
            try:
                hook(notice)
            except Exception as exc:
                with self._lock:
                    self._failed(f"callback for {notice.signal}: {type(exc).__name__}: {exc}")

    def _failed(self, message: str) -> None:
        self.failures += 1
        self.last_failure = message

    def _observe(self, track: _Track, record: RequestRecord, value: float) -> Alert | None:
        rule = self.rule
        if track.baseline is None:
            if self.warmup is None:
                return None
            track.warm.append(value)
            if len(track.warm) >= self.warmup:
                track.baseline = np.asarray(track.warm, dtype=np.float64)
                track.warm = []
                track.status = track.status._replace(
                    n_baseline=track.baseline.size, baseline_value=float(track.baseline.mean())
                )
            return None
        track.window.append((record.timestamp, value))
        if rule.window_seconds is not None:
            horizon = record.timestamp - rule.window_seconds
            while track.window and track.window[0][0] < horizon:
                track.window.popleft()
        track.pending += 1
        if track.pending < rule.check_every:
            return None
        track.pending = 0
        n = len(track.window)
        if n < rule.min_window or track.baseline.size < max(2, rule.min_window):
            return None
        return self._test(track, record, np.fromiter((v for _, v in track.window), np.float64, n))

    def _test(self, track: _Track, record: RequestRecord, window: FloatArray) -> Alert | None:
        signal, base = track.signal, track.baseline
        assert base is not None
        rule = self.rule
        n = window.size
        if signal.kind == "mean":
            # H1 in the bad direction: baseline > window for a drop, window > baseline for a rise.
            result = (
                welch_t_test(base, window) if signal.bad == "drop" else welch_t_test(window, base)
            )
            effect, p = result.difference, result.p_value
            test: Literal["welch_t", "fisher_exact"] = "welch_t"
        else:
            events = round(float(window.sum()))
            base_events = round(float(base.sum()))
            if signal.bad == "rise":
                p = fisher_exact_greater(events, n, base_events, base.size)
            else:
                p = fisher_exact_greater(n - events, n, base.size - base_events, base.size)
            sign = 1.0 if signal.bad == "rise" else -1.0
            effect = sign * (events / n - base_events / base.size)
            test = "fisher_exact"
        alpha = rule.check_alpha(n)
        min_effect = rule.effect_for(signal)
        base_value, window_value = float(base.mean()), float(window.mean())
        notice: Alert | None = None
        if track.active is None and p < alpha and effect >= min_effect:
            notice = Alert(
                signal=signal.name,
                kind=signal.kind,
                bad=signal.bad,
                state="firing",
                baseline_value=base_value,
                window_value=window_value,
                effect=effect,
                min_effect=min_effect,
                p_value=p,
                alpha=alpha,
                test=test,
                n_window=n,
                n_baseline=base.size,
                baseline_source=self._source(track),
                timestamp=record.timestamp,
                request_id=record.request_id,
            )
            track.active = notice
        elif track.active is not None and effect <= min_effect / 2:
            notice = replace(
                track.active,
                state="resolved",
                window_value=window_value,
                effect=effect,
                p_value=p,
                n_window=n,
                timestamp=record.timestamp,
                request_id=record.request_id,
            )
            track.active = None
        track.status = SignalStatus(
            signal.name, signal.kind, base.size, base_value, n, window_value, effect, p,
            track.active is not None,
        )  # fmt: skip
        return notice

    def _source(self, track: _Track) -> str:
        held = self.baseline is not None and track.signal.name in self.baseline.values
        if held and self.baseline is not None:
            return self.baseline.source
        return f"first {track.baseline.size if track.baseline is not None else 0} observations"


def check(
    store: ResultsStore,
    baseline: Baseline | str | os.PathLike[str] | None = None,
    *,
    since: float | None = None,
    until: float | None = None,
    baseline_since: float | None = None,
    pipeline: str | None = None,
    rule: Rule | None = None,
    signals: Sequence[Signal] | None = None,
    warmup: int | None = 200,
) -> list[Alert]:
    """Replay the store's requests in ``[since, until)`` through an `AlertMonitor`.

    ``baseline`` is a `Baseline`, a results file's path, or None: then the requests before
    ``since`` (from ``baseline_since``) are the baseline; with no ``since`` either, each signal's
    first ``warmup`` observations are. Returns every firing and resolving in time order.
    """
    if isinstance(baseline, (str, os.PathLike)):
        baseline = Baseline.from_results(baseline)
    elif baseline is None and since is not None:
        baseline = Baseline.from_store(
            store, since=baseline_since, until=since, pipeline=pipeline, signals=signals
        )
    monitor = AlertMonitor(baseline, rule=rule, signals=signals, warmup=warmup, pipeline=pipeline)
    return monitor.replay(store.requests(since=since, until=until, pipeline=pipeline))
