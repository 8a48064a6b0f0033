"""Score an eval set, or a stream of traces, on a Dask distributed cluster.

``ragbridge.adapters.dask.evaluate`` is `ragbridge.core.evaluate` spread over the workers of a
``distributed.Client`` (a ``LocalCluster`` of worker processes when none is given): JSONL shards
or a ``dask.bag`` are cut into partitions, each partition runs the normal async engine on a
worker, one in-flight cap holds across the whole cluster, and every finished partition is kept,
so a rerun skips it and a killed worker loses and duplicates nothing. The result is the local
run's, value for value and failure for failure; the judge calls a killed worker had made are
counted too. Ctrl-C raises `ClusterInterrupted`, which says what is kept for a rerun.

On one machine and a judge-bound run, the plain asyncio engine stays the faster path (no
processes to start, nothing to ship); a cluster pays off when the offline providers are
CPU-bound, or the eval set outgrows one process (``docs/scale.md`` has the figures).

Needs the ``dask`` extra: ``pip install ".[dask]"`` in your ragbridge clone.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_PARTITION_SIZE",
    "ClusterInterrupted",
    "ClusterSlots",
    "ModelSource",
    "evaluate",
]

from ragbridge.adapters._extras import missing_extra

try:
    import distributed as _distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by the fences test in a bare env
    raise missing_extra("ragbridge.adapters.dask", "Dask distributed", "dask", exc) from exc

from .cap import ClusterSlots
from .run import DEFAULT_PARTITION_SIZE, ClusterInterrupted, evaluate
from .worker import ModelSource
