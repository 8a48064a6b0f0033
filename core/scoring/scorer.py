"""One sample at a time: the unit every sink adapter scores in.

`evaluate` owns a whole run; framework sinks (a LangSmith evaluator, a DeepEval metric, a
LlamaIndex evaluator, a pytest assertion) are instead handed one record at a time by someone
else's loop. `Scorer` is built once per sink with the metrics and the `Settings`, and keeps one
`JudgeEngine` for all the records it sees, so the cache, the shared sub-results between metrics
and the usage accounting behave exactly as in `evaluate`.

Sinks often ask for one metric of a record at a time (one LlamaIndex evaluator per metric, one
LangSmith evaluator per feedback key), from several threads or event loops. ``ascore(sample,
only=[...], key=...)`` serves them all from one mechanism: the calls for one record share a
`MetricContext` (the claims extracted for faithfulness serve hallucination asked for later), a
metric is computed at most once per record whoever asks and from wherever (a
`concurrent.futures.Future` per record and metric, awaited from any loop or thread), and the
records kept are bounded (least recently used first out; a record is dropped once every metric
has its Score, unless the Scorer keeps every record for a sink that reads them back — then it
keeps the Scores and lets the shared sub-results go).

`explain` turns a `Score` into the few lines a person reads in a framework's UI or a failed
test: the reason, then each claim, statement or context with its verdict.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

from ..cache.result_key import OPTIONAL_PARTS
from ..metrics.base import Metric, MetricContext
from ..results.evaluation import Score
from ..results.id_check import IdCheck
from ..sample import Sample
from ..settings import Settings, SettingsOptions
from .record import score_record
from .runner import build_engines, resolve_metrics, run_sync, shared_tags

__all__ = ["Scorer", "explain", "fingerprint", "run_sync"]


class Scorer:
    """Scores a fixed set of metrics on one `Sample` per call, sync or async.

    ``metrics`` are `Metric` objects or names (``"faithfulness"``, ``"faithfulness:offline"``,
    ``"recall@5"``); ``settings`` (or its fields as keyword arguments) mean what they mean in
    `ragbridge.core.evaluate`.
    The judge engine is built once, so its in-flight cap holds across concurrent async calls
    on one event loop and its cache serves every record.
    """

    def __init__(
        self,
        metrics: Iterable[Metric | str],
        *,
        settings: Settings | None = None,
        records: int | None = 256,
        **options: Unpack[SettingsOptions],
    ) -> None:
        """``records``: how many records' shared sub-results and scores are kept for calls
        that name a ``key`` or ``only`` some metrics (None: all, until `forget`)."""
        if records is not None and (isinstance(records, bool) or records < 1):
            raise ValueError(f"records must be a positive int or None, got {records!r}")
        self.settings = Settings.of(settings, options)
        self.records = records
        self._records: OrderedDict[Hashable, _Record] = OrderedDict()
        self._lock = threading.Lock()
        self.metrics: list[Metric] = resolve_metrics(metrics)
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metric names must be unique, got {names}")
        needs_judge = [m.name for m in self.metrics if m.needs_judge]
        if needs_judge and self.settings.judge is None:
            raise ValueError(
                f"{', '.join(needs_judge)} need a judge: pass judge=..., or use an offline "
                f"provider where one exists, e.g. '{needs_judge[0].split(':')[0]}:offline'"
            )
        self.engines = build_engines(self.settings, self.metrics)
        self.cache = self.engines.cache
        self.judge = self.engines.judge
        self.embedder = self.engines.embedder
        self.nli = self.settings.nli
        self._tags = shared_tags(self.metrics)
        self._reuse = self.engines.result_reuse(self.metrics, self._tags)
        self.id_check = IdCheck()

    @property
    def aborted(self) -> str | None:
        """Why calls are no longer sent (judge or embedder unusable), or None; see `Settings`."""
        return self.engines.aborted()

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.metrics]

    async def ascore(
        self,
        sample: Sample,
        *,
        only: Iterable[str] | None = None,
        key: Hashable | None = None,
    ) -> dict[str, Score]:
        """The metrics on ``sample`` (all, or ``only`` these names), keyed by metric name.

        Never raises for a judge problem. With ``only`` or ``key`` the call joins the record
        ``key`` (default: the sample's content): metrics already scored for it, or being scored
        by another thread or event loop, are not scored again, and sub-results are shared.
        """
        if not isinstance(sample, Sample):
            raise TypeError(f"expected a Sample, got {type(sample).__name__}")
        if only is None and key is None:
            ctx = self._context()
            scores = await score_record(sample, self.metrics, ctx, self._reuse)
            self.id_check.add_scores(sample.id, scores)
            return dict(zip(self.names, scores, strict=True))
        names = self.names if only is None else self._known(only)
        return await self._record_scores(sample, names, fingerprint(sample) if key is None else key)

    def score(
        self,
        sample: Sample,
        *,
        only: Iterable[str] | None = None,
        key: Hashable | None = None,
    ) -> dict[str, Score]:
        """The sync form; safe to call from inside a running event loop (e.g. Jupyter)."""
        return run_sync(self.ascore(sample, only=only, key=key))

    def forget(self, key: Hashable | None = None) -> None:
        """Drop the kept record ``key`` (None: every record); the judge cache is kept."""
        with self._lock:
            if key is None:
                self._records.clear()
            else:
                self._records.pop(key, None)

    def _context(self) -> MetricContext:
        return MetricContext(
            judge=self.judge, embedder=self.embedder, nli=self.nli, shared_tags=self._tags
        )

    def _known(self, only: Iterable[str]) -> list[str]:
        names = list(dict.fromkeys(only))
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise ValueError(f"not scored here: {', '.join(unknown)} (metrics: {self.names})")
        return names

    async def _record_scores(
        self, sample: Sample, names: list[str], key: Hashable
    ) -> dict[str, Score]:
        while True:
            with self._lock:
                record = self._records.get(key)
                if record is None:
                    # One context for the record, whichever thread or loop asks: its
                    # sub-results are awaitable from any loop (`MetricContext.shared`).
                    record = self._records[key] = _Record(self._context())
                self._records.move_to_end(key)
                mine = [n for n in names if n not in record.futures]
                for name in mine:
                    record.futures[name] = concurrent.futures.Future()
                futures = {n: record.futures[n] for n in names}
                ctx = record.ctx
                if mine and ctx is None:  # not reached: a record without one has every Score
                    ctx = record.ctx = self._context()
                self._evict()
            if mine and ctx is not None:
                await self._compute(sample, mine, ctx, futures, record, key)
            try:
                # shielded: a waiter cancelled here must not cancel the Score for the others
                scores = {n: await asyncio.shield(asyncio.wrap_future(futures[n])) for n in names}
                break
            except asyncio.CancelledError:
                if not any(_cancelled(f) for f in futures.values()):
                    raise  # this caller was cancelled
                # the computing caller was cancelled, not this one: compute it again
        with self._lock:
            # Complete: every metric has its Score (a cancelled one was taken out, not kept).
            complete = len(record.futures) == len(self.names) and all(
                f.done() for f in record.futures.values()
            )
            if complete and self.records is None:
                record.ctx = None  # kept for its Scores only: no sub-result is asked for again
            elif complete and self._records.get(key) is record:
                del self._records[key]
        return scores

    async def _compute(
        self,
        sample: Sample,
        names: list[str],
        ctx: MetricContext,
        futures: dict[str, concurrent.futures.Future[Score]],
        record: _Record,
        key: Hashable,
    ) -> None:
        metrics = [m for m in self.metrics if m.name in names]
        try:
            scores = await score_record(sample, metrics, ctx, self._reuse)
        except BaseException as exc:  # cancelled: whoever asks next computes it again
            with self._lock:
                for metric in metrics:
                    record.futures.pop(metric.name, None)
            for metric in metrics:
                if not futures[metric.name].done():
                    futures[metric.name].set_exception(exc)
            raise
        # Run-level: do ids match labels? Keyed by record, as sinks' samples often share an id.
        self.id_check.add_scores(str(key), scores)
        for metric, score in zip(metrics, scores, strict=True):
            if not futures[metric.name].done():
                futures[metric.name].set_result(score)

    def _evict(self) -> None:
        if self.records is None:
            return
        while len(self._records) > self.records:
            self._records.popitem(last=False)

    @property
    def kept(self) -> int:
        """Records whose sub-results and scores are kept now."""
        return len(self._records)

    @property
    def warnings(self) -> list[str]:
        """Run-level warnings over the records scored so far (ids that never match labels)."""
        found = self.id_check.warning()
        return [] if found is None else [found]


def _cancelled(future: concurrent.futures.Future[Score]) -> bool:
    """Whether the computation behind ``future`` was cancelled (its caller was)."""
    if not future.done():
        return False
    return future.cancelled() or isinstance(future.exception(), asyncio.CancelledError)


def fingerprint(sample: Sample) -> str:
    """What a record is when a sink gives no key: everything a metric reads (the id and the
    metadata do not change a score). A sample that is no conversation's turn leaves out its
    ``history`` (None), and any other of `OPTIONAL_PARTS` that is None, so fingerprints from
    before samples had them stay valid; a conversation's
    record keeps ``metadata["conversation"]``, which conversation measures read (its expected
    outcome, where its answer sits), so two conversations with the same turns and different
    expected outcomes are two records."""
    unset = {name for name in OPTIONAL_PARTS if getattr(sample, name) is None}
    if sample.history is None:
        text = sample.model_dump_json(exclude={"id", "metadata", *unset})
    else:
        where = sample.metadata.get("conversation")
        text = sample.model_dump_json(exclude={"id", "metadata", *unset}) + json.dumps(
            where, sort_keys=True, default=repr
        )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(eq=False)
class _Record:
    """One record's shared sub-results (until it is complete) and its scores, one future per
    metric."""

    ctx: MetricContext | None
    futures: dict[str, concurrent.futures.Future[Score]] = field(default_factory=dict)


_ITEM_KEYS = ("claims", "statements", "contexts")
_TEXT_KEYS = ("claim", "statement", "text")
_GOOD = {"supported", "attributed", "useful", "relevant", True}


def explain(score: Score, *, limit: int = 12) -> str:
    """The reason of ``score`` and, beneath it, one line per claim/statement/context verdict.

    A failure reads ``failed (kind): message``; a skip reads ``skipped: reason``. At most
    ``limit`` item lines are shown, then how many were left out.
    """
    if score.failure is not None:
        return f"failed ({score.failure.kind.value}): {score.failure.message}"
    if score.value is None:
        return f"skipped: {score.reason}"
    lines = [score.reason or f"score {score.value:.3f}"]
    items = _items(score.details)
    for item in items[:limit]:
        lines.append("  " + _item_line(item))
    if len(items) > limit:
        lines.append(f"  … and {len(items) - limit} more")
    return "\n".join(lines)


def _items(details: Any) -> list[Mapping[str, Any]]:
    if not isinstance(details, Mapping):
        return []
    for key in _ITEM_KEYS:
        found = details.get(key)
        if isinstance(found, list):
            return [item for item in found if isinstance(item, Mapping)]
    return []


def _item_line(item: Mapping[str, Any]) -> str:
    verdict = _verdict(item)
    mark = "✓" if verdict in _GOOD else "✗"
    text = next((str(item[k]) for k in _TEXT_KEYS if item.get(k)), None)
    if text is None:
        rank = item.get("rank")
        ident = item.get("context_id")
        text = f"context {rank}" + (f" ({ident})" if ident else "")
    label = verdict if isinstance(verdict, str) else ("yes" if verdict else "no")
    line = f"{mark} [{label}] {_clip(text)}"
    if item.get("reason"):
        line += f" — {_clip(str(item['reason']))}"
    where = item.get("context_id") or (
        f"context {item['context']}" if isinstance(item.get("context"), int) else None
    )
    if where and item.get("claim") is not None:
        line += f" ({where})"
    return line


def _verdict(item: Mapping[str, Any]) -> Any:
    if "verdict" in item:
        return item["verdict"]
    for key, word in (
        ("attributed", "attributed"),
        ("useful", "useful"),
        ("supported", "supported"),
    ):
        if key in item:
            return word if item[key] else f"not {word}"
    return None


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
