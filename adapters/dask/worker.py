"""What runs on a worker: one partition through the normal async engine.

Judge, embedder and NLI model are built *on the worker* from their source (a spec such as
``openai:gpt-4o-mini``, read by `ragbridge.adapters.model_registry`; a zero-argument factory; or
a model object that pickles): HTTP clients and loaded weights do not travel. Each worker process
builds each source once and keeps it, and opens the run's cache once (an SQLite path all
processes of a machine share, or a URL such as ``redis://`` every machine shares), so a partition
costs its judge calls and nothing more.

Tasks are coroutine functions, so Dask runs them on the worker's event loop: partitions on one
worker share that loop, its models and its cache. Progress is kept per running partition in a
process-global table the client reads with ``Client.run`` (`running_counts`), which costs the
worker nothing between reads. Provider calls are reported as they are made (`.ledger`): a
partition whose worker dies still has its calls counted by the client.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ragbridge.adapters.model_registry import Role, model_from
from ragbridge.core.cache.backend import CacheBackend
from ragbridge.core.judging.limits import Breaker
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.results.id_check import drop_id_warnings, id_warnings
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.collector import rare_full_collections
from ragbridge.core.scoring.partitions import Partition
from ragbridge.core.scoring.runner import (
    Engines,
    aevaluate,
    build_engines,
    default_embedder,
    resolve_metrics,
)
from ragbridge.core.settings import Settings

from .cap import ClusterSlots
from .ledger import ATTEMPT_KEY, AttemptReporter

__all__ = ["Job", "describe_source", "running_counts", "score_items", "score_partition"]

ModelSource = str | Callable[[], Any] | object
"""A spec (``openai:gpt-4o-mini``), a zero-argument factory, or a model object that pickles."""

_BUILT: dict[tuple[str, bytes], Any] = {}
_CACHES: dict[str, CacheBackend] = {}
_RUNNING: dict[tuple[str, int], int] = {}
_REPLIED: dict[tuple[str, str], None] = {}
"""(run, role) whose provider has replied on this worker, newest last (a few runs kept)."""
_REPLIED_KEPT = 64


@dataclass(frozen=True)
class Job:
    """Everything a partition task needs besides its samples; small, and it pickles."""

    run: str
    metrics: tuple[Metric, ...]
    judge: ModelSource | None
    embedder: ModelSource | None
    nli: ModelSource | None
    base_url: str | None
    settings: Settings
    """Knobs only: its judge, embedder, nli and cache are None (built and opened here)."""
    cache: str | None
    cap_name: str


def describe_source(source: ModelSource | None) -> str | None:
    """A stable description of a model source, for the partitions' fingerprint.

    It is also kept in each part file and printed when a rerun cannot reuse one, so a
    factory's arguments (``functools.partial``), which may hold a key, appear as a short hash.
    """
    if source is None or isinstance(source, str):
        return source
    name = getattr(source, "__qualname__", None) or type(source).__qualname__
    module = getattr(source, "__module__", None) or type(source).__module__
    model = getattr(source, "model", None)
    if isinstance(model, str):
        return f"{module}.{name} ({model})"
    func = getattr(source, "func", None)  # functools.partial: what it calls, with what
    if func is not None:
        given = repr((getattr(source, "args", ()), sorted(getattr(source, "keywords", {}).items())))
        args = hashlib.blake2b(given.encode("utf-8"), digest_size=4).hexdigest()
        return f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', func)}(#{args})"
    return f"{module}.{name}"


_MODEL_METHODS = ("generate", "embed", "predict")
"""A source with one of these is a model object (`Judge`, `Embedder`, `EntailmentModel`)."""


def _build(role: Role, source: ModelSource | None, base_url: str | None) -> Any:
    """The model ``source`` describes, built once per worker process.

    Sources are told apart by what they are: a string is a spec (built by the model registry,
    `ragbridge.adapters.model_registry`, as the command line builds it), a callable that is not
    a model is a factory, anything else is the model itself (a copy arrives with every task, so
    the first copy is kept, keyed by its pickled bytes).
    """
    if source is None:
        return None
    import cloudpickle

    key = (role, hashlib.blake2b(cloudpickle.dumps((source, base_url))).digest())
    if key in _BUILT:
        return _BUILT[key]
    model: Any
    if isinstance(source, str):
        model = model_from(role, source, base_url=base_url)
    elif callable(source) and not any(hasattr(source, m) for m in _MODEL_METHODS):
        model = source()
    else:
        model = source
    _BUILT[key] = model
    return model


def _cache(spec: str | None) -> CacheBackend | None:
    """The run's cache, opened once per worker process and kept open for later partitions."""
    if spec is None:
        return None
    if spec not in _CACHES:
        from ragbridge.core.cache.disk import open_cache

        opened = open_cache(spec)
        assert opened is not None
        _CACHES[spec] = opened
    return _CACHES[spec]


def _embedder_for(job: Job, metrics: Sequence[Metric]) -> Any:
    embedder = _build("embedder", job.embedder, job.base_url)
    if embedder is None and any(m.needs_embedder and not m.needs_judge for m in metrics):
        key = ("embedder", b"default")  # loaded once per worker process, like the others
        if key not in _BUILT:
            _BUILT[key] = default_embedder()
        embedder = _BUILT[key]
    return embedder


async def _score(job: Job, index: int, samples: Iterable[Sample]) -> Evaluation:
    metrics = resolve_metrics(job.metrics)
    slots = ClusterSlots(job.settings.max_concurrency, job.cap_name)
    settings = job.settings.replace(
        judge=_build("judge", job.judge, job.base_url),
        embedder=_embedder_for(job, metrics),
        nli=_build("nli", job.nli, job.base_url),
        cache=_cache(job.cache),
    )
    engines = build_engines(settings, metrics, slots=slots)
    _warm_breakers(job.run, engines)

    def calls() -> tuple[int, int]:
        judge, embedder = engines.judge, engines.embedder
        return (
            judge.stats.calls if judge is not None else 0,
            embedder.stats.calls if embedder is not None else 0,
        )

    reporter = AttemptReporter(job.run, index, calls)  # if this attempt is lost, its calls are not
    slots.on_call = reporter.report
    key = (job.run, index)
    _RUNNING[key] = 0

    def tick(done: int, total: int | None) -> None:
        _RUNNING[key] = done

    try:
        with rare_full_collections():  # as the CLI scores: `ragbridge.core.scoring.collector`
            evaluation = await aevaluate(
                samples,
                metrics,
                settings=settings.replace(judge=engines.judge, embedder=engines.embedder),
                progress=tick,
            )
    finally:
        _RUNNING.pop(key, None)
        _note_replies(job.run, engines)
        slots.close()
        reporter.close()  # its last counts, at once (a result lost on its way still counts)
    # The id check is the run's, over every partition: the client redoes it on the whole.
    drop_id_warnings(evaluation.metadata, id_warnings(evaluation))
    evaluation.metadata[ATTEMPT_KEY] = reporter.attempt
    return evaluation


def _breakers(engines: Engines) -> list[tuple[str, Breaker]]:
    found: list[tuple[str, Breaker]] = []
    if engines.judge is not None:
        found.append(("judge", engines.judge.breaker))
    if engines.embedder is not None:
        found.append(("embedder", engines.embedder.breaker))
    return found


def _warm_breakers(run: str, engines: Engines) -> None:
    """Skip the first-call probe for a provider that has replied to this run on this worker.

    Until its provider replies, an engine's breaker lets only ``stop_after`` calls into the
    air, so that a provider failing every call costs that many requests, not the cap's worth.
    Every partition builds its own engines: each began with that probe, and 2 workers at a cap
    of 64 spent about a twentieth of the run with 5 calls in flight instead of 32, once per
    partition (500 samples). A reply from an earlier partition of the same run on the same
    worker already answers what the probe asks; a provider that fails later still trips the
    breaker after ``stop_after`` identical failures, as within one partition.
    """
    for role, breaker in _breakers(engines):
        if (run, role) in _REPLIED:
            breaker.replied = True


def _note_replies(run: str, engines: Engines) -> None:
    for role, breaker in _breakers(engines):
        if breaker.replied:
            _REPLIED.pop((run, role), None)
            _REPLIED[(run, role)] = None
    while len(_REPLIED) > _REPLIED_KEPT:
        del _REPLIED[next(iter(_REPLIED))]


async def score_partition(job: Job, partition: Partition, data: bytes) -> Evaluation:
    """Score one partition of a JSONL shard (``data``: its bytes, sent by the client)."""
    return await _score(job, partition.index, partition.samples_in(data))


def items_fingerprint(config: str, items: Sequence[Sample]) -> str:
    """The fingerprint of a bag partition: its samples' JSON and the run's config."""
    digest = hashlib.blake2b(config.encode("utf-8"), digest_size=16)
    for sample in items:
        digest.update(sample.model_dump_json().encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


async def score_items(
    job: Job, index: int, items: Sequence[Any], config: str, finished: str | None
) -> tuple[int, str, Evaluation | None]:
    """Score one partition of a ``dask.bag`` of samples (or sample dicts).

    Returns ``(samples, fingerprint, evaluation)``; the evaluation is None when ``finished``
    (the fingerprint of the part kept from an earlier run) matches: nothing is scored again.
    """
    samples = [s if isinstance(s, Sample) else Sample.model_validate(s) for s in items]
    fingerprint = items_fingerprint(config, samples)
    if fingerprint == finished:
        return len(samples), fingerprint, None
    return len(samples), fingerprint, await _score(job, index, samples)


def running_counts(run: str) -> dict[int, int]:
    """Samples done so far in each partition of ``run`` this worker is scoring now."""
    return {index: done for (name, index), done in list(_RUNNING.items()) if name == run}
