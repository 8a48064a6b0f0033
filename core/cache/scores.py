"""Whole Scores from the cache: a rerun that changed nothing costs one lookup per sample.

The reply cache makes a rerun free of judge calls, not free of work: every metric still renders
its prompts, hashes them, reads and checks each reply and builds its Score. With a fast judge
that work *is* the run (a fully cached rerun of 1,000 samples took 0.56x the first run). So a
judged, embedded or NLI-scored cell is also kept whole, under a key of everything that decides
it, and a rerun reads it back in one lookup per sample.

The key covers, so that no stale Score is ever served:

* the sample: the fields the metric reads (`Metric.reads`, `ProviderSpec.reads`), in canonical
  JSON, so volatile metadata (a pipeline's latency) changes no key; the whole sample, metadata
  included, for a metric that does not declare what it reads (`ragbridge.core.cache.result_key`);
* the metric: its class, its configuration (every instance attribute, by ``repr``) and the
  combined judge tasks it shares in this run (`Metric.share_tags`);
* the models it uses: the judge's name and sampling parameters, the embedder's, the NLI model's;
* the code: a digest of the source of ``ragbridge.core`` (metrics, prompt templates and their
  versions, reply parsing and checks) and of the module of the metric's class and its bases.
  An edited metric or prompt, or another ragbridge version, misses rather than hits.

A configuration whose ``repr`` shows an object's address (it would differ in every process) or
a metric whose source cannot be read is simply not kept. Only settled outcomes are kept: values,
skips, and the failures the input decides (``no_claims``, ``missing_input``, ``invalid_input``);
a timeout or a judge error is tried again next time. A Score read back says its judge calls were
answered from the cache (``usage.cached_calls``), as a reply-cache hit would.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import __file__ as _CORE_INIT
from .. import __name__ as _CORE_NAME
from ..metrics.base import Metric, MetricContext
from ..results.evaluation import FailureKind, Score
from ..sample import Sample
from .backend import CacheBackend
from .result_key import fields_read, read_set_label, sample_body

__all__ = ["ResultReuse", "code_digest"]

#: Failures that say something about this attempt, not about the sample: tried again next run.
_TRANSIENT = frozenset(
    {
        FailureKind.JUDGE_ERROR,
        FailureKind.PARSE_ERROR,
        FailureKind.TIMEOUT,
        FailureKind.RATE_LIMITED,
        FailureKind.CANCELLED,
        FailureKind.INVALID_OUTPUT,
    }
)


#: The folder of ``ragbridge.core`` (named `_CORE_NAME`), whose whole source decides a core
#: metric's Scores. Taken from the package itself, not from where this module sits in it: when
#: this module moved one level down, a digest of "this module's folder" covered the cache's files
#: only, and an edited prompt or metric no longer invalidated the Scores kept from it.
_CORE_ROOT = Path(_CORE_INIT).resolve().parent


def _core_files() -> list[Path]:
    """Every source file of ``ragbridge.core``, in a fixed order: what `_core_digest` hashes."""
    return sorted(_CORE_ROOT.rglob("*.py"))


@functools.cache
def _core_digest() -> str:
    digest = hashlib.sha256()
    for path in _core_files():
        digest.update(path.relative_to(_CORE_ROOT).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


_DIGESTS: dict[tuple[type[Metric], str | None], str | None] = {}


def code_digest(cls: type[Metric], provided: object = None) -> str | None:
    """Digest of the code that decides ``cls``'s Scores, or None when it cannot be read.

    That is the whole of ``ragbridge.core`` plus the module of every class in ``cls``'s MRO
    that lives elsewhere (a metric defined in an adapter or in the user's code), and the module
    of the registered provider function ``provided`` when it lives elsewhere (a plugin's
    provider of a core measure). Read once per class, provider module and process: an edit
    takes effect in the next process, as an edit of code does.
    """
    module = getattr(provided, "__module__", None)
    if module is not None and _in_core(module):
        module = None
    key = (cls, module)
    if key not in _DIGESTS:
        modules = [klass.__module__ for klass in cls.__mro__]
        _DIGESTS[key] = _digest_of([*modules, *([module] if module else [])])
    return _DIGESTS[key]


def _in_core(module: str) -> bool:
    return module == _CORE_NAME or module.startswith(_CORE_NAME + ".")


def _digest_of(modules: Sequence[str]) -> str | None:
    try:
        digest = hashlib.sha256(_core_digest().encode())
        for module in dict.fromkeys(modules):
            if module == "builtins" or _in_core(module):
                continue
            source = getattr(sys.modules.get(module), "__file__", None)
            if not source:
                return None
            digest.update(module.encode() + b"\0" + Path(source).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _config_text(metric: Metric) -> str | None:
    """The metric's configuration as text; a function (its provider) by its qualified name."""
    items = sorted((name, _describe(value)) for name, value in vars(metric).items())
    text = repr(items)
    return None if " at 0x" in text else text


def _describe(value: object) -> str:
    if inspect.isfunction(value) or inspect.ismethod(value):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


class ResultReuse:
    """Looks up and stores whole Scores of one run's metrics in a `Cache` (see the module).

    Built once per run (or per `Scorer`): the metric half of every key is fixed then.
    Metrics that call no model (ranking and string measures) are computed again each time,
    since that costs less than a lookup. New Scores are written ``batch`` cells at a time (one
    transaction each) and by `flush`; one lost to a kill is rebuilt from the cached replies.
    """

    def __init__(
        self, cache: CacheBackend, metrics: Sequence[Metric], ctx: MetricContext, *, batch: int = 1
    ) -> None:
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self.batch = batch
        self._pending: list[tuple[str, str, str, str]] = []
        self._lock = threading.Lock()  # a Scorer may be shared by threads, each with its loop
        self._prefix: dict[str, tuple[str, bytes]] = {}
        self._reads: dict[str, frozenset[str] | None] = {}
        params = (
            json.dumps(dict(ctx.judge.params), sort_keys=True, default=repr)
            if ctx.judge is not None
            else None
        )
        for metric in metrics:
            if not (metric.needs_judge or metric.needs_embedder or metric.needs_nli):
                continue
            code = code_digest(type(metric), getattr(metric, "_provided", None))
            config = _config_text(metric)
            if code is None or config is None:
                continue
            models: list[Any] = []
            for needed, engine in (
                (metric.needs_judge, ctx.judge),
                (metric.needs_embedder, ctx.embedder),
                (metric.needs_nli, ctx.nli),
            ):
                if needed:
                    if engine is None:
                        break  # a missing model is a missing_input failure, cheap to redo
                    models.append(engine.model)
            else:
                if metric.needs_judge:
                    models.append(params)
                tags = sorted(ctx.shared_tags & metric.share_tags())
                head = json.dumps(
                    [
                        code,
                        f"{type(metric).__module__}.{type(metric).__qualname__}",
                        metric.name,
                        metric.prompt_version,
                        config,
                        models,
                        tags,
                    ]
                )
                self._prefix[metric.name] = (code, hashlib.sha256(head.encode()).digest())
                self._reads[metric.name] = fields_read(metric)

    @property
    def active(self) -> bool:
        return bool(self._prefix)

    def keys(self, sample: Sample) -> dict[str, str]:
        """The key of each reusable metric's cell for ``sample``: its prefix and what it reads
        of the sample (each distinct read set is serialised once per sample)."""
        bodies: dict[str, bytes] = {}
        keys: dict[str, str] = {}
        for name, (_, prefix) in self._prefix.items():
            reads = self._reads[name]
            label = read_set_label(reads)
            body = bodies.get(label)
            if body is None:
                body = bodies[label] = sample_body(sample, reads)
            keys[name] = hashlib.sha256(prefix + body).hexdigest()
        return keys

    def lookup(self, keys: dict[str, str]) -> dict[str, Score]:
        """The kept Scores of these cells, as read back now (usage as cached calls)."""
        if not keys:
            return {}
        started = time.perf_counter()
        stored = self.cache.get_results(list(keys.values()))
        latency = (time.perf_counter() - started) / len(keys)
        found: dict[str, Score] = {}
        for name, key in keys.items():
            text = stored.get(key)
            score = None if text is None else _revive(text, latency)
            if score is not None:
                found[name] = score
        with self._lock:
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def store(self, keys: dict[str, str], scores: dict[str, Score]) -> None:
        """Keep the settled Scores among ``scores``."""
        rows = [
            (keys[name], name, self._prefix[name][0], score.model_dump_json())
            for name, score in scores.items()
            if name in keys and _settled(score)
        ]
        with self._lock:
            self._pending.extend(rows)
            full = len(self._pending) >= self.batch
        if full:
            self.flush()

    def flush(self) -> None:
        """Write the Scores not yet written, in one transaction."""
        with self._lock:
            rows, self._pending = self._pending, []
        self.cache.put_results(rows)


def _settled(score: Score) -> bool:
    return score.failure is None or score.failure.kind not in _TRANSIENT


def _revive(text: str, latency: float) -> Score | None:
    """A kept Score with its judge calls counted as cached; None if the entry is unreadable."""
    try:
        data = json.loads(text)
        usage = data.get("usage") or {}
        data["usage"] = {"cached_calls": int(usage.get("calls", 0) + usage.get("cached_calls", 0))}
        data["latency_s"] = latency
        return Score.model_validate(data)
    except (ValueError, TypeError, AttributeError, ValidationError):
        return None
