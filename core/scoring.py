"""One sample at a time: the unit every sink adapter scores in.

`evaluate` owns a whole run; framework sinks (a LangSmith evaluator, a DeepEval metric, a
LlamaIndex evaluator, a pytest assertion) are instead handed one record at a time by someone
else's loop. `Scorer` is built once per sink with the metrics, judge, embedder and cache, and
keeps one `JudgeEngine` for all the records it sees, so the cache, the shared sub-results
between metrics and the usage accounting behave exactly as in `evaluate`.

`explain` turns a `Score` into the few lines a person reads in a framework's UI or a failed
test: the reason, then each claim, statement or context with its verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .cache import Cache
from .engine import EmbeddingEngine, JudgeEngine, Price
from .id_check import IdCheck
from .judge import Embedder, EntailmentModel, Judge
from .metrics.base import Metric, MetricContext
from .result_cache import score_sample
from .results import Score
from .runner import build_engines, resolve_metrics, run_sync, shared_tags
from .sample import Sample
from .settings import Settings

__all__ = ["Scorer", "explain", "run_sync"]


class Scorer:
    """Scores a fixed set of metrics on one `Sample` per call, sync or async.

    ``metrics`` are `Metric` objects or names (``"faithfulness"``, ``"faithfulness:offline"``,
    ``"recall@5"``); ``settings`` (or the older keyword arguments) mean what they mean in
    `ragbridge.core.evaluate`.
    The judge engine is built once, so its in-flight cap holds across concurrent async calls
    on one event loop and its cache serves every record.
    """

    def __init__(
        self,
        metrics: Iterable[Metric | str],
        *,
        settings: Settings | None = None,
        judge: Judge | JudgeEngine | None = None,
        embedder: Embedder | EmbeddingEngine | None = None,
        nli: EntailmentModel | None = None,
        cache: str | os.PathLike[str] | Cache | None = None,
        max_concurrency: int = 8,
        timeout: float | None = 60.0,
        max_retries: int = 4,
        price: Price | None = None,
    ) -> None:
        self.settings = Settings.merged(
            settings,
            judge=judge,
            embedder=embedder,
            nli=nli,
            cache=cache,
            max_concurrency=max_concurrency,
            timeout=timeout,
            max_retries=max_retries,
            price=price,
        )
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

    async def ascore(self, sample: Sample) -> dict[str, Score]:
        """Every metric on ``sample``, keyed by metric name. Never raises for a judge problem."""
        if not isinstance(sample, Sample):
            raise TypeError(f"expected a Sample, got {type(sample).__name__}")
        ctx = MetricContext(
            judge=self.judge, embedder=self.embedder, nli=self.nli, shared_tags=self._tags
        )
        scores = await score_sample(sample, self.metrics, ctx, self._reuse)
        self.id_check.add_scores(sample.id, scores)
        return dict(zip(self.names, scores, strict=True))

    @property
    def warnings(self) -> list[str]:
        """Run-level warnings over the records scored so far (ids that never match labels)."""
        found = self.id_check.warning()
        return [] if found is None else [found]

    def score(self, sample: Sample) -> dict[str, Score]:
        """The sync form; safe to call from inside a running event loop (e.g. Jupyter)."""
        return run_sync(self.ascore(sample))


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
