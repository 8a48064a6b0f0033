"""The versions of a results store's schema, and the steps from each to the next.

A team's store outlives the ragbridge that created it: CI jobs and services on several versions
write to one database for months. So the schema carries a version (``meta.schema``), every
store (the SQLite `ragbridge.core.monitoring.store.MonitorStore`, the PostgreSQL
`ragbridge.adapters.postgres_store.PostgresStore`) creates the version-1 tables as they were
first shipped and then applies the steps after the version it finds, in one transaction with
the store's write lock held (so two processes opening an old store at once upgrade it once,
and a process that dies mid-upgrade leaves the old version intact). A store of a newer version
than `SCHEMA_VERSION` is refused, never read as if it were ours.

Each step is the SQL of both dialects side by side, so the two stores cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SCHEMA_VERSION", "STEPS", "Dialect", "Step", "newer_schema", "steps_after"]

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Step:
    """What brings a store from ``version - 1`` to ``version``, and why it was needed."""

    version: int
    why: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def sql(self, dialect: Dialect) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


_INDEXES_2 = (
    # ``ragbridge serve`` and ``history --baseline-branch`` list a branch's runs by time
    "CREATE INDEX IF NOT EXISTS runs_branch_ts ON runs (branch, ts)",
    # the history pairs runs of one source
    "CREATE INDEX IF NOT EXISTS runs_source_ts ON runs (source, ts)",
    # No index on run_scores beyond its primary key (run_id, sample_id, metric): readers take a
    # run's cells whole through the key's prefix, and every further index is paid on each of the
    # millions of cell writes (8 concurrent SQLite writers fell from ~37k to ~17k cells/s with one).
)

STEPS: tuple[Step, ...] = (
    Step(
        version=2,
        why="runs record the branch they were made on (this branch vs main), and the indexes a "
        "team's reader needs: runs by branch and by source in time order",
        sqlite=("ALTER TABLE runs ADD COLUMN branch TEXT", *_INDEXES_2),
        postgres=("ALTER TABLE runs ADD COLUMN IF NOT EXISTS branch TEXT", *_INDEXES_2),
    ),
    Step(
        version=3,
        why="a sample's details in ``ragbridge serve``: each cell keeps the judge's reason and "
        "its details (claims, verdicts) as JSON, and ``run_samples`` keeps each sample's "
        "question, answer, reference and contexts as compact JSON (cut: `sample_record`)",
        sqlite=(
            "ALTER TABLE run_scores ADD COLUMN reason TEXT",
            "ALTER TABLE run_scores ADD COLUMN details TEXT",
            "CREATE TABLE IF NOT EXISTS run_samples (run_id TEXT NOT NULL, "
            "sample_id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (run_id, sample_id))",
        ),
        postgres=(
            "ALTER TABLE run_scores ADD COLUMN IF NOT EXISTS reason TEXT",
            "ALTER TABLE run_scores ADD COLUMN IF NOT EXISTS details TEXT",
            'CREATE TABLE IF NOT EXISTS run_samples (run_id TEXT COLLATE "C" NOT NULL, '
            'sample_id TEXT COLLATE "C" NOT NULL, record TEXT NOT NULL, '
            "PRIMARY KEY (run_id, sample_id))",
        ),
    ),
)
"""Every step, oldest first; a new one is appended with the next version, never edited."""

SCHEMA_VERSION = STEPS[-1].version if STEPS else 1
"""The version this ragbridge writes (and the newest it reads)."""


def steps_after(version: int) -> tuple[Step, ...]:
    """The steps a store found at ``version`` needs, in order (none when it is current)."""
    return tuple(step for step in STEPS if step.version > version)


def newer_schema(location: str, found: int) -> str:
    """The message refusing a store written by a newer ragbridge."""
    return (
        f"{location}: written by a newer ragbridge (store schema {found}, this one reads "
        f"{SCHEMA_VERSION}); upgrade ragbridge"
    )
