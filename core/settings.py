"""`Settings`: everything a run needs besides the samples and the metrics, in one value.

Every entry point that calls models (`evaluate`, `aevaluate`, `Scorer`, each framework sink,
the command line) takes ``settings=Settings(...)``, or the same fields as keyword arguments
(``judge=``, ``max_concurrency=``, ...), typed once by `SettingsOptions`. One frozen object
rather than a dozen parameters per entry point, so a new knob is added here, in the dataclass
and in `SettingsOptions` (a test keeps the two equal), and reaches every entry point at once.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace
from typing import Any

from typing_extensions import TypedDict

from .cache.backend import CacheBackend
from .judging.embedding import EmbeddingEngine
from .judging.engine import JudgeEngine, Price
from .judging.judge import Embedder, EntailmentModel, Judge
from .judging.model_objects import as_embedder, as_judge
from .judging.ratelimit import RateLimits, shared_by_cache

__all__ = ["Settings", "SettingsOptions"]


@dataclass(frozen=True)
class Settings:
    """How a run calls its models.

    * ``judge`` — a `Judge` (or a pre-built `JudgeEngine`); ``embedder`` — an `Embedder` (or an
      `EmbeddingEngine`); ``nli`` — the `EntailmentModel` of the ``nli`` providers.
    * ``cache`` — an SQLite path, a cache URL (``redis://...``), an open cache (`Cache`, any
      `CacheBackend`), or None (no cache).
    * ``max_concurrency`` — provider calls in flight at most, judge and embedder together.
    * ``timeout`` — seconds per call attempt (None: no limit); HTTP adapters follow it.
    * ``max_retries`` — retries per call for transient errors and unusable replies.
    * ``price`` — turns usage into ``evaluation.metadata["cost_usd"]``.
    * ``stop_after`` — identical unusable-provider failures (a 401, an unknown model, a refused
      connection; same cause, no reply in between) after which no more calls are sent and the
      run stops early with ``evaluation.metadata["aborted"]`` naming the cause and the fix.
    * ``reuse_results`` — with a cache, keep every judged (or embedded, or NLI-scored) Score
      whole and read it back on a rerun of the same sample, metric, models and code
      (`ragbridge.core.cache.scores`); False re-scores from the cached replies instead.
    * ``rate_limits`` — a `RateLimits`: judge calls follow the provider's requests and tokens
      per minute (configured, or learned from its ``x-ratelimit-*`` headers), shared with other
      runs on this machine using the same key (`ragbridge.core.judging.ratelimit`), or with
      every machine when ``cache`` is a ``redis://`` URL or ``RateLimits(shared=URL)`` names a
      ledger. None (the default): only ``max_concurrency`` and the retries' backoff limit the calls.
    """

    judge: Judge | JudgeEngine | None = None
    embedder: Embedder | EmbeddingEngine | None = None
    nli: EntailmentModel | None = None
    cache: str | os.PathLike[str] | CacheBackend | None = None
    max_concurrency: int = 8
    timeout: float | None = 60.0
    max_retries: int = 4
    price: Price | None = None
    stop_after: int = 5
    reuse_results: bool = True
    rate_limits: RateLimits | None = None

    def __post_init__(self) -> None:
        # A framework's own model (a LangChain chat model, a LlamaIndex LLM, ...) is wrapped
        # here, once, or refused with one TypeError: not per call, deep inside a run.
        object.__setattr__(self, "judge", as_judge(self.judge))
        object.__setattr__(self, "embedder", as_embedder(self.embedder))
        # Machines sharing a cache on a server share the key's rate budgets through it too.
        object.__setattr__(self, "rate_limits", shared_by_cache(self.rate_limits, self.cache))
        for name in ("max_concurrency", "max_retries", "stop_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Settings.{name} must be an int, got {value!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"Settings.max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"Settings.max_retries must be >= 0, got {self.max_retries}")
        if self.stop_after < 1:
            raise ValueError(f"Settings.stop_after must be >= 1, got {self.stop_after}")
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or not math.isfinite(self.timeout)
            or self.timeout <= 0
        ):
            raise ValueError(
                f"Settings.timeout must be a positive number of seconds or None, "
                f"got {self.timeout!r}"
            )

    @classmethod
    def merged(cls, settings: Settings | None, **keywords: Any) -> Settings:
        """``settings`` (or the defaults) with the keyword arguments of an older call style.

        A keyword left at its default is not "given". Giving a setting both ways is refused,
        naming it: two sources for one value is a mistake, and silently preferring one hides it.
        """
        defaults = {f.name: f.default for f in fields(cls)}
        unknown = sorted(set(keywords) - set(defaults))
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(unknown)}")
        given = {k: v for k, v in keywords.items() if not _same(v, defaults[k])}
        if settings is None:
            return cls(**given)
        if not isinstance(settings, Settings):
            raise TypeError(f"settings must be a Settings, got {type(settings).__name__}")
        if given:
            names = ", ".join(f"{k}=" for k in sorted(given))
            raise TypeError(
                f"{names} given both as keyword and in settings=; pass it in one place "
                f"(e.g. settings=dataclasses.replace(settings, {next(iter(sorted(given)))}=...))"
            )
        return settings

    @classmethod
    def of(cls, settings: Settings | None, options: SettingsOptions) -> Settings:
        """What an entry point taking ``settings=`` and ``**options`` runs with (`merged`)."""
        return cls.merged(settings, **options)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return replace(self, **changes)


def _same(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return isinstance(default, (int, float)) and value == default
    return False


class SettingsOptions(TypedDict, total=False):
    """The fields of `Settings` as keyword arguments: ``**options: Unpack[SettingsOptions]``.

    What an entry point accepts besides ``settings=``, typed for the caller's editor and mypy.
    """

    judge: Judge | JudgeEngine | None
    embedder: Embedder | EmbeddingEngine | None
    nli: EntailmentModel | None
    cache: str | os.PathLike[str] | CacheBackend | None
    max_concurrency: int
    timeout: float | None
    max_retries: int
    price: Price | None
    stop_after: int
    reuse_results: bool
    rate_limits: RateLimits | None
