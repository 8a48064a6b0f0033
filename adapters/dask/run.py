"""The client side of a cluster run: plan partitions, submit them, keep each, join them in order.

`evaluate` is `ragbridge.core.evaluate` for a Dask distributed cluster. The samples come from
JSONL shards (paths or globs; see `ragbridge.core.scoring.partitions`) or a ``dask.bag`` of
samples; each partition is one task running the normal async engine on a worker (`.worker`); the
in-flight cap is the cluster's (`.cap`). What makes the result the local run's, cell for cell:

* each finished partition is written to the parts folder by *this* process, atomically, under
  its index, and read back in index order as soon as every partition before it is kept
  (`.join`), so cells reach ``on_result`` and the returned `Evaluation` in input order whatever
  order partitions finish in, and a partition that a killed worker's retry finishes twice is
  still written once;
* a partition whose part file has the same fingerprint is not submitted at all (a rerun after a
  crash or Ctrl-C pays only for what was not finished); one whose part file has another
  fingerprint is scored again, and ``on_note`` is told which setting changed (`not_reused_reason`);
* the judge-call counts, cost and the id check are computed over the whole run, and the calls of
  attempts that never returned (a killed worker's partition, a cancelled one) are added
  (`.ledger`), as a lower bound.

Ctrl-C raises `ClusterInterrupted` (a ``KeyboardInterrupt``) saying how many partitions are kept
and where. Dask's own log lines are kept off stderr unless ``verbose`` (`.quiet`).

At most ``2 × worker threads + 2`` JSONL partitions are in flight, so the client holds a few
partitions' bytes, never the eval set. When a partition reports the judge or embedder unusable
(``aborted``), no further partition is submitted: the run stops as a local run stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from typing_extensions import TypedDict, Unpack

from ragbridge.core.cache.backend import CacheBackend, is_cache_url
from ragbridge.core.judging.engine import Price
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.scoring.partitions import (
    Partition,
    PartStore,
    config_digest,
    expand_shards,
    not_reused_reason,
    plan_partitions,
    readable_url,
)
from ragbridge.core.scoring.runner import OnResult, Progress, resolve_metrics
from ragbridge.core.settings import Settings

from .bag_ids import check_bag_ids
from .blocks import release_leases
from .join import Joiner
from .ledger import ATTEMPT_KEY, SUBSCRIPTIONS, CallLedger
from .quiet import PRELOAD, SILENT, quiet_dask
from .rate_ledger import cluster_limits
from .worker import Job, ModelSource, describe_source, running_counts, score_items, score_partition

if TYPE_CHECKING:
    from dask.bag import Bag
    from distributed import Client, Future

__all__ = ["DEFAULT_PARTITION_SIZE", "ClusterInterrupted", "evaluate"]

DEFAULT_PARTITION_SIZE = 500
"""Samples per task: large enough that scheduling is noise, small enough to spread 2,000."""

_POLL_S = 0.5

WORKER_THREADS = 2
"""Partitions each worker process of a LocalCluster made for a run scores at once. Partitions are
coroutines on the worker's one event loop, sharing its lease pool (`.blocks`), models and
cache, so a second one costs no core: it fills the slots the first leaves empty while its last
calls finish and while the next partition arrives. 20,000 calls of a 50 ms judge at a cap of
64 on 2 workers: 17.74 s of scoring with 1, 17.09 and 17.27 s with 2, against 16.86 s for one
process (`benchmarks/cluster_throughput.py --only judge`); the CPU-bound offline rows did not
move (48.4 s and 49.9 s for 2,000 samples, within the machine's noise)."""

WORKER_CONFIG: dict[str, Any] = {"distributed.worker.profile.enabled": False}
"""Dask settings of the workers of a LocalCluster made for a run. Dask's statistical profiler
samples each worker's threads every 10 ms for the dashboard: measured on 2 shared cores, 17 of
the 47 CPU ms an idle worker spends a second, and more while the event loop is busy with calls.
A cluster given by the caller keeps its own settings."""


class ClusterInterrupted(KeyboardInterrupt):
    """Ctrl-C during a cluster run, with what it leaves for a rerun.

    ``finished`` of ``partitions`` partitions (``samples`` samples, ``cells`` results) were
    finished when the run stopped; they are kept in ``folder``, or were not kept (``folder`` is
    None: the run had no parts folder of its own to leave them in).
    """

    def __init__(
        self, finished: int, partitions: int, samples: int, cells: int, folder: str | None
    ) -> None:
        self.finished = finished
        self.partitions = partitions
        self.samples = samples
        self.cells = cells
        self.folder = folder
        where = f"kept in {folder}" if folder is not None else "not kept"
        super().__init__(
            f"{finished} of {partitions} partitions finished ({samples} samples, {cells} "
            f"results), {where}"
        )


class ClusterOptions(TypedDict, total=False):
    """The `Settings` knobs a cluster run takes as keywords (its models are ``judge=`` etc.)."""

    cache: str | os.PathLike[str] | CacheBackend | None
    max_concurrency: int
    timeout: float | None
    max_retries: int
    price: Price | None
    stop_after: int
    reuse_results: bool


def evaluate(
    data: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Bag,
    metrics: Iterable[Metric | str],
    *,
    judge: ModelSource | None = None,
    embedder: ModelSource | None = None,
    nli: ModelSource | None = None,
    base_url: str | None = None,
    settings: Settings | None = None,
    client: Client | str | None = None,
    workers: int = 2,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    parts: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    on_result: OnResult | None = None,
    keep: bool = True,
    on_note: Callable[[str], None] | None = None,
    verbose: bool = False,
    **options: Unpack[ClusterOptions],
) -> Evaluation:
    """Score ``metrics`` on ``data`` on a Dask cluster; the result equals a local run's.

    ``data`` is a JSONL path, a glob, a list of them, or a ``dask.bag`` of `Sample`s (or sample
    dicts). ``judge``, ``embedder`` and ``nli`` are built on each worker from a spec
    (``"openai:gpt-4o-mini"``, with ``base_url``; the CLI's ``--judge`` forms), a zero-argument
    factory, or a model object that pickles. ``settings`` (or its fields as keywords) are the
    usual ones; ``max_concurrency`` is the cap for the *whole cluster*, and ``cache`` is an
    SQLite path every worker can open or a cache URL (``redis://host:6379/0``) every machine can
    reach.

    ``client`` is a ``distributed.Client``, a scheduler address, or None for a ``LocalCluster``
    of ``workers`` processes (loopback only, no dashboard) made and closed here. ``parts`` is
    the folder finished partitions are kept in (``part-000000.jsonl``, ...): give it to make a
    rerun skip them; by default a temporary folder, removed at the end. ``progress(done,
    total)`` is called at least every half second with the samples finished across the
    cluster; ``on_result`` and ``keep`` are `ragbridge.core.evaluate`'s. ``on_note`` is
    given a line when kept partitions are scored again, naming what changed (before they are
    paid for, for JSONL shards). Dask's log lines and warnings are silenced for the run (in this
    process, and in the workers of a local cluster made here) unless ``verbose``.

    Ctrl-C raises `ClusterInterrupted`, which says what was kept. The judge-call counts include
    the calls of partition attempts that never returned (a worker killed mid-partition); the
    run's ``cluster`` metadata then has ``lost`` with those counts, a lower bound.
    """
    config = Settings.merged(settings, **options)
    for role, given in (
        ("judge", config.judge),
        ("embedder", config.embedder),
        ("nli", config.nli),
    ):
        if given is not None:
            raise TypeError(
                f"give the {role} as {role}= (a spec, a factory or a picklable model), not in "
                "settings=: it is built on each worker"
            )
    cache = _cache_spec(config.cache)
    resolved = resolve_metrics(metrics)
    # What decides the scores, readable and with no secret: it is hashed into every partition's
    # fingerprint, kept in each part file, and printed when a part is not reused. The endpoint
    # is part of it (the same model name elsewhere may answer otherwise); a password is not.
    readable: dict[str, Any] = {
        "metrics": [(m.name, type(m).__name__, m.provider) for m in resolved],
        "judge": describe_source(judge),
        "embedder": describe_source(embedder),
        "nli": describe_source(nli),
        "base_url": readable_url(base_url),
        "reuse_results": config.reuse_results,
    }
    digest = config_digest(readable)
    run = uuid.uuid4().hex[:12]
    job = Job(
        run=run,
        metrics=tuple(resolved),
        judge=judge,
        embedder=embedder,
        nli=nli,
        base_url=base_url,
        # the key's rate budgets are split between the workers through the scheduler (unless
        # a redis:// cache or ledger already shares them between machines)
        settings=config.replace(cache=None, rate_limits=cluster_limits(config.rate_limits)),
        cache=cache,
        cap_name=f"ragbridge-cap-{run}",
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(quiet_dask(verbose))  # entered first: it covers the shutdown too
        folder = parts
        if folder is None:
            folder = tempfile.mkdtemp(prefix="ragbridge-parts-")
            stack.callback(shutil.rmtree, folder, True)
        store = PartStore(folder)
        dask_client = stack.enter_context(_connect(client, workers, verbose))
        from distributed import Semaphore

        cap = Semaphore(max_leases=config.max_concurrency, name=job.cap_name)
        stack.callback(_close_quietly, cap)
        stack.callback(release_leases, dask_client, job.cap_name)  # runs first: LIFO
        ledger = CallLedger(run)
        SUBSCRIPTIONS.add(dask_client, ledger)
        stack.callback(SUBSCRIPTIONS.remove, dask_client, ledger)
        joiner = Joiner(store, on_result=on_result, keep=keep)
        stack.callback(joiner.close)
        driver = _Driver(
            dask_client, job, store, digest, progress, readable, ledger, on_note, joiner
        )
        try:
            if _is_bag(data):
                check_bag_ids(dask_client, data, window=driver.window())  # before paying
                partitions = driver.run_bag(data)
            else:
                shards = expand_shards(cast("str | os.PathLike[str] | Sequence[str]", data))
                planned = list(plan_partitions(shards, partition_size, digest))
                driver.total = sum(p.samples for p in planned)
                partitions = driver.run_shards(planned)
            return _join(joiner, partitions, driver, keep=keep)
        except KeyboardInterrupt:
            kept = None if parts is None else os.fspath(folder)
            raise driver.interrupted(kept) from None
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns


def _cache_spec(cache: object) -> str | None:
    """The cache as something every worker can open: a path or a URL, never an open object."""
    if cache is None:
        return None
    if isinstance(cache, str | os.PathLike) and os.fspath(cache) != ":memory:":
        text = os.fspath(cache)
        return text if is_cache_url(text) else str(Path(text).expanduser().resolve())
    if isinstance(cache, CacheBackend):
        location = cache.location
        if location != ":memory:" and not is_cache_url(location):
            return location
    raise TypeError(
        "a cluster run needs its cache as an SQLite path or a cache URL (redis://...), which "
        f"each worker opens; got {cache!r}"
    )


@contextlib.contextmanager
def _connect(client: Client | str | None, workers: int, verbose: bool) -> Iterator[Client]:
    """The client given, one connected to an address, or a LocalCluster made for this run.

    The local cluster's workers are ours: unless ``verbose``, they log nothing and ignore
    Ctrl-C (`.quiet.dask_setup`); this process stops them in order. Their statistical profiler
    is off (`WORKER_CONFIG`): it serves a dashboard the run does not open.
    """
    from distributed import Client as DaskClient

    if isinstance(client, DaskClient):
        yield client
        return
    if isinstance(client, str):
        with DaskClient(client) as connected:
            yield connected
        return
    import dask
    from distributed import LocalCluster

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with (
        dask.config.set(WORKER_CONFIG),  # read by the nannies as they start: kept for restarts
        LocalCluster(
            n_workers=workers,
            threads_per_worker=WORKER_THREADS,
            processes=True,
            dashboard_address="127.0.0.1:0",  # health routes only: no bokeh, loopback
            host="127.0.0.1",
            silence_logs=logging.WARNING if verbose else SILENT,
            preload=[*dask.config.get("distributed.worker.preload", [])]
            + ([] if verbose else [PRELOAD]),
        ) as cluster,
        DaskClient(cluster) as local,
    ):
        yield local


def _close_quietly(semaphore: Any) -> None:
    """Close the run's semaphore; leases still out (Ctrl-C, a lost worker) are expected."""
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        semaphore.close()


def _is_bag(data: object) -> TypeGuard[Bag]:
    try:
        from dask.bag import Bag
    except ImportError:  # pragma: no cover - dask is what this adapter needs
        return False
    return isinstance(data, Bag)


class _Driver:
    """Submits partitions, keeps each finished one, and tracks progress across the cluster."""

    def __init__(
        self,
        client: Client,
        job: Job,
        store: PartStore,
        digest: str,
        progress: Progress | None,
        readable: dict[str, Any],
        ledger: CallLedger,
        on_note: Callable[[str], None] | None,
        joiner: Joiner,
    ) -> None:
        self.client = client
        self.joiner = joiner
        self.job = job
        self.store = store
        self.digest = digest
        self.progress = progress
        self.readable = readable
        self.ledger = ledger
        self.on_note = on_note
        self.total: int | None = None
        self.partitions = 0
        self.done = 0
        self.finished_samples = 0
        self.cells = 0
        self.reused = 0
        self.scored = 0
        self.not_reused: Counter[str] = Counter()
        self.aborted = False
        self._last_poll = 0.0

    def interrupted(self, folder: str | None) -> ClusterInterrupted:
        """What Ctrl-C leaves: the partitions finished for this run, kept in ``folder``."""
        finished = self.reused + self.scored
        return ClusterInterrupted(
            finished, self.partitions, self.finished_samples, self.cells, folder
        )

    def window(self) -> int:
        """Partitions to keep in flight: enough to keep every worker thread busy (one RPC)."""
        threads = sum(self.client.nthreads().values()) or 1
        return 2 * threads + 2

    def run_shards(self, planned: list[Partition]) -> list[int]:
        """Score every partition not already kept; the indices of all, in order."""
        self.partitions = len(planned)
        self.joiner.expect([p.index for p in planned])
        todo: Iterator[Partition] = iter(
            [p for p in planned if not self._kept(p.index, p.fingerprint, p.samples)]
        )
        self._say_not_reused()  # before anything is paid for
        pending: dict[Future, Partition] = {}
        window = self.window()  # asked once: it is a round trip to the scheduler
        self._report()
        try:
            while True:
                while not self.aborted and len(pending) < window:
                    part = next(todo, None)
                    if part is None:
                        break
                    future = self.client.submit(
                        score_partition,
                        self.job,
                        part,
                        part.read_bytes(),
                        key=f"ragbridge-{self.job.run}-{part.index}",
                        pure=False,
                    )
                    pending[future] = part
                if not pending:
                    break
                for future in self._wait(pending):
                    part = pending.pop(future)
                    self._keep(part.index, part.fingerprint, part.samples, future.result())
        finally:
            for future in pending:
                future.cancel()
        return [p.index for p in planned if self.store.finished(p.index, p.fingerprint)]

    def run_bag(self, bag: Bag) -> list[int]:
        """Score each partition of a bag (its samples are computed on the cluster)."""
        from dask import delayed

        pieces = bag.to_delayed()
        self.partitions = len(pieces)
        self.joiner.expect(range(len(pieces)))
        pending: dict[Future, int] = {}
        headers = {i: self.store.header(i) for i in range(len(pieces))}
        for index, piece in enumerate(pieces):
            kept = headers[index] or {}
            fingerprint = None if kept.get("aborted") else kept.get("fingerprint")
            task = delayed(score_items, pure=False)(
                self.job, index, piece, self.digest, fingerprint
            )
            pending[self.client.compute(task)] = index
        indices = sorted(pending.values())
        try:
            while pending:
                for future in self._wait(pending):
                    index = pending.pop(future)
                    samples, fingerprint, evaluation = future.result()
                    header = headers[index]
                    if evaluation is None:
                        self._reuse(index, header or {}, samples)
                        continue
                    if header is not None:  # known only once the worker has hashed the samples
                        self.not_reused[not_reused_reason(header, self.readable)] += 1
                    self._keep(index, fingerprint, samples, evaluation)
        finally:
            for future in pending:
                future.cancel()
        self._say_not_reused()
        return indices

    def _kept(self, index: int, fingerprint: str, samples: int) -> bool:
        """Whether partition ``index`` is kept from an earlier run with this fingerprint; a
        part kept with another one is noted, with the reason (`_say_not_reused`)."""
        header = self.store.header(index)
        if header is None:
            return False
        if header.get("fingerprint") != fingerprint or header.get("aborted"):
            self.not_reused[not_reused_reason(header, self.readable)] += 1
            return False
        self._reuse(index, header, samples)
        return True

    def _reuse(self, index: int, header: dict[str, Any], samples: int) -> None:
        cells = header.get("cells")
        self.reused += 1
        self.finished_samples += samples
        self.done += samples
        self.cells += cells if isinstance(cells, int) else len(self.store.read(index))
        self.joiner.ready(index, now=False)  # joined once new work is on its way

    def _say_not_reused(self) -> None:
        if self.on_note is None:
            return
        for reason, count in self.not_reused.items():
            parts = "partition" if count == 1 else "partitions"
            self.on_note(f"{count} kept {parts} not reused: {reason}; scored again")

    def _keep(self, index: int, fingerprint: str, samples: int, evaluation: Evaluation) -> None:
        self.ledger.returned(evaluation.metadata.pop(ATTEMPT_KEY, None))
        self.store.write(index, fingerprint, samples, evaluation, config=self.readable)
        self.scored += 1
        self.finished_samples += samples
        self.cells += len(evaluation)
        self.done = max(self.done, self.finished_samples)
        if evaluation.metadata.get("aborted"):
            self.aborted = True
        self.joiner.ready(index)
        self._report()

    def _wait(self, pending: dict[Any, Any]) -> list[Any]:
        """Futures finished within the poll interval; progress is reported between polls."""
        from distributed import wait

        try:
            done, _ = wait(list(pending), timeout=_POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        if time.monotonic() - self._last_poll >= _POLL_S:
            self._poll()
        return [f for f in pending if f in done]

    def _poll(self) -> None:
        """Samples finished inside running partitions, read from every worker."""
        self._last_poll = time.monotonic()
        if self.progress is None:
            return
        try:
            counts = self.client.run(running_counts, self.job.run)
        except Exception:  # a worker going away mid-poll: the next poll will do
            return
        running = sum(sum(by_index.values()) for by_index in counts.values())
        self.done = max(self.done, self.finished_samples + running)
        self._report()

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total)


def _join(joiner: Joiner, indices: Sequence[int], driver: _Driver, *, keep: bool) -> Evaluation:
    """The run's `Evaluation` from its kept partitions, in input order (most already joined
    while the run went on: `Joiner`)."""
    evaluation = joiner.finish(indices)
    evaluation.metadata["cluster"] = {
        "workers": len(driver.client.nthreads()),
        "partitions": len(indices),
        "partitions_reused": driver.reused,
        "partitions_scored": driver.scored,
        "max_concurrency": driver.job.settings.max_concurrency,
    }
    if driver.aborted:
        evaluation.metadata["cluster"]["stopped_early"] = True
    if driver.not_reused:
        evaluation.metadata["cluster"]["not_reused"] = dict(driver.not_reused)
    lost = driver.ledger.lost()
    if lost is not None:  # paid for, though their results never came back: counted
        for key, calls in (
            ("judge_stats", lost.judge_calls),
            ("embedding_stats", lost.embedding_calls),
        ):
            if isinstance(evaluation.metadata.get(key), dict):
                evaluation.metadata[key]["calls"] += calls
        evaluation.metadata["cluster"]["lost"] = lost.metadata()
    if not keep:
        evaluation.metadata["cells_kept"] = False
    return joiner.warned(evaluation)
