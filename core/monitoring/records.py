"""What production monitoring and run history record: one `RequestRecord` per live request,
one `RunRecord` per evaluation run.

These are the contract between the parts that observe (shadow scoring wrappers, the ``eval`` and
``gate`` commands), the parts that keep (`ragbridge.core.monitoring.store`, an OpenTelemetry
exporter) and the parts that read (alerts, ``ragbridge history``, the report's trend charts).
Every field that was not measured is None, never 0: a request whose retrieval was not timed has
``retrieval_ms=None``, and a mean over requests must not count it as instantaneous.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RequestRecord", "RunRecord", "ScoreCell"]


class ScoreCell(BaseModel):
    """One metric's outcome on one request or sample: a value in [0, 1], or why there is none."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    value: float | None = Field(default=None, ge=0.0, le=1.0)
    failure: str | None = None
    """The failure kind (``judge_error``, ``timeout``, ...) when the metric failed."""
    skipped: bool = False
    reason: str | None = None
    """The judge's reason (or the failure's or skip's message), when the store kept one."""
    details: list[dict[str, Any]] | dict[str, Any] | None = None
    """The metric's details as the Score held them (claims, verdicts), when kept (schema 3)."""


class RequestRecord(BaseModel):
    """One live request as the pipeline served it.

    ``chunks_used`` counts the retrieved chunks whose retriever score reached the relevance
    threshold (None when the retriever gives no scores); ``retrieval_miss`` is True when none
    did (or nothing was retrieved). ``abstained`` says whether the answer declined to answer.
    ``sampled`` is whether the request was chosen for scoring; its scores arrive later
    (`scores`, by metric name) and ``feedback`` later still (1.0 thumbs up, 0.0 down).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    request_id: str = Field(min_length=1)
    timestamp: float = Field(default_factory=time.time)
    pipeline: str | None = None
    question: str | None = None
    retrieval_ms: float | None = Field(default=None, ge=0.0)
    generation_ms: float | None = Field(default=None, ge=0.0)
    chunks_retrieved: int | None = Field(default=None, ge=0)
    chunks_used: int | None = Field(default=None, ge=0)
    retrieval_miss: bool | None = None
    answer_chars: int | None = Field(default=None, ge=0)
    abstained: bool | None = None
    sampled: bool = False
    error: str | None = None
    """Set when the request itself failed (the pipeline raised): what it raised."""
    scores: dict[str, ScoreCell] = Field(default_factory=dict)
    feedback: float | None = Field(default=None, ge=0.0, le=1.0)
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Anything else worth keeping (retriever name, model, top context ids), JSON-serialisable."""


class RunRecord(BaseModel):
    """One ``eval``/``gate``/API run: where it came from and what it found.

    ``summary`` maps each metric to its mean, CI and counts (`MetricSummary` as a dict), so the
    history is readable without loading every cell; the cells themselves are stored beside it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    run_id: str = Field(min_length=1)
    timestamp: float = Field(default_factory=time.time)
    command: str
    source: str | None = None
    """The input file (or pipeline) the run scored."""
    commit: str | None = None
    """The git commit of the working directory, when there was one."""
    branch: str | None = None
    """The branch the run was made on (the checked-out branch, or the CI's branch variable for a
    detached checkout), so a team's store can answer "this branch vs main"."""
    config: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, dict[str, Any]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
