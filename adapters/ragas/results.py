"""RAGAS's scores and failures as ragbridge's: a finite value in [0, 1] or a typed failure with a
reason, never NaN.

`score_from_ragas` reads one RAGAS value; `scores_from_ragas` a whole ``ragas.evaluate`` result
(an `Evaluation`). A NaN RAGAS returned says no more than "RAGAS returned NaN" — unless the run
was watched (`ragbridge.adapters.ragas.runner.evaluate`): then its result is a `RagasResult`,
RAGAS's own ``EvaluationResult`` with ``failures[row][metric]`` next to it — the exception's
class and message, the RAGAS prompt that raised it, its cause, and a kind (``parse_error`` for
``RagasOutputParserException``, ``timeout``, the ragbridge kind of a judge failure).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
import ragas
from ragas.dataset_schema import EvaluationResult
from ragas.exceptions import LLMDidNotFinishException, RagasOutputParserException

from ragbridge.core.judging.judge import JudgeTimeout, RateLimited, classify_error
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score
from ragbridge.core.sample import Sample

from .callbacks import Recorder
from .metrics import RagbridgeScoreError
from .models import RagasInstructorJudge, RagasJudge, RagasJudgeError

__all__ = [
    "RagasResult",
    "failure_from_ragas",
    "score_from_ragas",
    "scores_from_ragas",
    "typed_result",
]


def score_from_ragas(value: Any, *, metric: str, tolerance: float = 1e-6) -> Score:
    """One RAGAS score as a ragbridge `Score`: a finite value in [0, 1] (clipped when it is off by
    at most ``tolerance``, float noise), else a typed failure — never NaN."""
    reason = getattr(value, "reason", None)
    if hasattr(value, "value") and not isinstance(value, numbers.Real):
        value = value.value  # a collections MetricResult
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, numbers.Real):  # None, strings, ...; numpy scalars are Real
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"RAGAS returned no numeric score for {metric} (got {value!r})",
            provider="ragas",
        )
    number = float(value)
    if math.isnan(number):
        return Score.fail(
            FailureKind.JUDGE_ERROR,
            f"RAGAS returned NaN for {metric}: it does so when a judge call failed, the reply "
            "could not be parsed, or no statements/claims were extracted",
            provider="ragas",
        )
    if not math.isfinite(number) or not -tolerance <= number <= 1.0 + tolerance:
        return Score.fail(
            FailureKind.INVALID_OUTPUT,
            f"RAGAS returned {number!r} for {metric}, outside [0, 1]",
            provider="ragas",
        )
    return Score(
        value=min(1.0, max(0.0, number)),
        reason=reason if isinstance(reason, str) and reason else None,
        provider="ragas",
    )


def scores_from_ragas(
    result: EvaluationResult | Sequence[Mapping[str, Any]],
    *,
    ids: Sequence[str] | None = None,
    samples: Sequence[Sample] | None = None,
    judge: RagasJudge | RagasInstructorJudge | None = None,
) -> Evaluation:
    """A ragbridge `Evaluation` from a ``ragas.evaluate`` result (or its ``scores`` rows).

    Sample ids come from ``samples`` (the ones converted with `to_ragas_dataset`), else ``ids``,
    else the row index. The result of `ragbridge.adapters.ragas.runner.evaluate` (`RagasResult`)
    gives its typed cells: each NaN's failure names the exception RAGAS logged. Any other
    result's scores go through `score_from_ragas`: a NaN becomes a failure saying only that
    RAGAS returned NaN. ``judge`` adds its usage and model to the metadata.
    """
    rows: list[Mapping[str, Any]]
    if isinstance(result, RagasResult):
        rows = list(result.ragbridge_scores)
    elif isinstance(result, EvaluationResult):
        rows = list(result.scores)
    else:
        rows = list(result)
    if samples is not None:
        ids = [s.id for s in samples]
    if ids is not None and len(ids) != len(rows):
        raise ValueError(f"{len(ids)} sample ids for {len(rows)} RAGAS result rows")
    metadata: dict[str, Any] = {"source": "ragas", "ragas_version": ragas.__version__}
    if judge is not None:
        metadata["judge_model"] = judge.model
        metadata["judge_usage"] = judge.usage.model_dump()
    evaluation = Evaluation(metadata=metadata)
    for index, row in enumerate(rows):
        sample_id = ids[index] if ids is not None else str(index)
        for metric, value in row.items():
            score = value if isinstance(value, Score) else score_from_ragas(value, metric=metric)
            evaluation.add(sample_id, metric, score)
    return evaluation


# --------------------------------------------------------------------------- failures


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _kind_of(error: BaseException) -> FailureKind:
    if any(isinstance(e, RagasOutputParserException) for e in _chain(error)):
        return FailureKind.PARSE_ERROR
    if any(isinstance(e, (TimeoutError, asyncio.TimeoutError)) for e in _chain(error)):
        return FailureKind.TIMEOUT
    mapped = classify_error(error)
    if isinstance(mapped, JudgeTimeout):
        return FailureKind.TIMEOUT
    if isinstance(mapped, RateLimited):
        return FailureKind.RATE_LIMITED
    if isinstance(error, LLMDidNotFinishException):
        return FailureKind.INVALID_OUTPUT
    return FailureKind.JUDGE_ERROR


def _described(error: BaseException, *, first_line: bool = False) -> str:
    text = str(error).strip()
    if first_line:
        text = text.splitlines()[0] if text else text
    if not text and isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        text = "no result within RunConfig.timeout"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def failure_from_ragas(
    error: BaseException, *, metric: str, inner: Sequence[tuple[str, BaseException]] = ()
) -> Failure:
    """The typed failure for an exception a RAGAS metric raised on a row: the exception's class
    and message (what RAGAS's executor logs), the RAGAS prompt that raised it (``inner``: the
    metric's prompt chains and their errors, outermost first), and the first cause.

    A ragbridge failure inside (`RagbridgeScoreError`, `RagasJudgeError`) keeps its own kind.
    """
    for e in _chain(error):
        if isinstance(e, RagbridgeScoreError):
            return e.failure
    judge_error = next((e for e in _chain(error) if isinstance(e, RagasJudgeError)), None)
    kind = judge_error.failure.kind if judge_error is not None else _kind_of(error)
    message = f"RAGAS {metric} raised {_described(error)}"
    prompts = [name for name, e in inner if e is error or type(e) is type(error)]
    if prompts:
        message += f" (in RAGAS prompt {prompts[0]!r})"
    causes = [
        e for e in _chain(error) if e is not error and not isinstance(e, asyncio.CancelledError)
    ]
    if causes:
        message += f"; caused by {_described(causes[0], first_line=True)}"
    return Failure(kind=kind, message=message)


# --------------------------------------------------------------------------- RAGAS's result


@dataclasses.dataclass(repr=False)
class RagasResult(EvaluationResult):
    """RAGAS's ``EvaluationResult`` (``scores``, ``to_pandas()``, ``result["faithfulness"]``,
    the repr — unchanged) with every cell as a ragbridge `Score` next to it.

    * ``failures[i][metric]`` — the typed `Failure` of each NaN cell of row ``i``: for RAGAS's
      metrics the exception RAGAS logged (class, message, the failing prompt, the cause), for
      ragbridge metrics their own failure; a NaN RAGAS returned without an error says so.
    * ``ragbridge_scores[i][metric]`` — every cell as a `Score` (a `RagbridgeMetric`'s full
      Score with its claims and usage; RAGAS's values as ``provider="ragas"`` Scores; a skip
      with its reason).
    * ``to_pandas(failures=True)`` adds a ``<metric>:failure`` column after each metric column;
      ``to_evaluation()`` is the ragbridge `Evaluation` (`scores_from_ragas`).
    """

    failures: list[dict[str, Failure]] = dataclasses.field(default_factory=list)
    ragbridge_scores: list[dict[str, Score]] = dataclasses.field(default_factory=list)

    def to_pandas(
        self, batch_size: int | None = None, batched: bool = False, *, failures: bool = False
    ) -> Any:
        frame = super().to_pandas(batch_size=batch_size, batched=batched)
        if not failures:
            return frame
        for metric in (list(self.scores[0]) if self.scores else [])[::-1]:
            cells = [
                f"{f.kind.value}: {f.message}" if (f := row.get(metric)) is not None else None
                for row in self.failures
            ]
            frame.insert(list(frame.columns).index(metric) + 1, f"{metric}:failure", cells)
        return frame

    def to_evaluation(
        self, *, ids: Sequence[str] | None = None, samples: Sequence[Sample] | None = None
    ) -> Evaluation:
        """The ragbridge `Evaluation` of this run (ids as in `scores_from_ragas`)."""
        return scores_from_ragas(self, ids=ids, samples=samples)


_LOGGED_KINDS = {
    "RagasOutputParserException": FailureKind.PARSE_ERROR,
    "TimeoutError": FailureKind.TIMEOUT,
}


def _cell(
    value: Any,
    metric: str,
    run: UUID | None,
    job: int,
    recorder: Recorder,
    jobs: Mapping[int, tuple[str, str]],
) -> Score:
    """One cell of RAGAS's result as a `Score`, with the cause of a NaN when one was seen."""
    kept = recorder.scores.get(run) if run is not None else None
    if kept is not None:
        return kept  # a RagbridgeMetric's own Score: value, failure or skip
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if (number and not math.isnan(float(value))) or isinstance(value, bool):
        return score_from_ragas(value, metric=metric)  # a value, or out of [0, 1]
    error = recorder.errors.get(run) if run is not None else None
    if error is not None:
        assert run is not None
        failure = failure_from_ragas(error, metric=metric, inner=recorder.inner_errors(run))
    elif job in jobs:
        name, message = jobs[job]
        failure = Failure(
            kind=_LOGGED_KINDS.get(name, FailureKind.JUDGE_ERROR),
            message=f"RAGAS {metric} raised {name}: {message}" if message else name,
        )
    elif number:
        failure = Failure(
            kind=FailureKind.INVALID_OUTPUT,
            message=f"RAGAS returned NaN for {metric} without raising an error (it does so "
            "when, e.g., no statements were extracted from the response)",
        )
    else:
        return score_from_ragas(value, metric=metric)
    return Score(failure=failure, provider="ragas")


def typed_result(
    result: EvaluationResult,
    metrics: Sequence[Any] | None,
    recorder: Recorder,
    jobs: Mapping[int, tuple[str, str]],
) -> RagasResult:
    """RAGAS's ``result`` as a `RagasResult`, each cell read with what ``recorder`` and
    ``jobs`` saw during the run."""
    keys = list(result.scores[0]) if result.scores else []
    chains = [m.name for m in metrics] if metrics and len(metrics) == len(keys) else keys
    runs = recorder.cells()
    cells = [
        {
            key: _cell(
                values[key], key, runs.get((row, chain)), row * len(keys) + j, recorder, jobs
            )
            for j, (key, chain) in enumerate(zip(keys, chains, strict=True))
        }
        for row, values in enumerate(result.scores)
    ]
    typed = RagasResult.__new__(RagasResult)
    typed.__dict__.update(result.__dict__)  # RAGAS's result as it is: no re-parse of traces
    typed.ragbridge_scores = cells
    typed.failures = [
        {k: s.failure for k, s in row.items() if s.failure is not None} for row in cells
    ]
    return typed
