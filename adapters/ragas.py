"""RAGAS adapter: move `Sample`s in and out of RAGAS's data forms, run RAGAS's own metrics on
ragbridge's judge, embedder and cache, and ragbridge's metrics inside ``ragas.evaluate``.

Why it exists: teams compare ragbridge's measures with RAGAS's on the same data, or already keep
their evaluation sets in RAGAS's schema. Both directions must be lossless where RAGAS can carry a
field, and loud where it cannot.

**Data.** RAGAS's `SingleTurnSample` holds ``user_input``, ``response``, ``retrieved_contexts``,
``retrieved_context_ids``, ``reference``, ``reference_contexts`` and ``reference_context_ids``;
it has no sample id, no context scores or metadata, no graded relevance and no metadata, and it
silently ignores unknown keys (pydantic ``extra="ignore"``). So:

* ``relevance`` maps onto ``reference_context_ids`` (the ids graded > 0; grades are lost there);
* ``retrieved_context_ids`` is filled only when *every* context has an id: RAGAS's id-based
  metrics compare ids position by position, and a made-up placeholder id would be scored as a real
  one. With some ids missing the field stays empty (the ids travel in the extras below);
* everything else — the sample id, every context's id/score/metadata, the exact ``relevance`` and
  ``metadata`` — goes into a ``ragbridge`` record (`ragas_extras`). In the JSONL and HF forms it is
  one more key/column (``ragbridge``), which RAGAS itself ignores when it reads the file, so the
  files stay valid RAGAS datasets. An in-memory `EvaluationDataset` cannot hold it: pass
  ``extras=ragas_extras(samples)`` (or just ``ids=``) to `from_ragas_dataset`.

Reading is strict: RAGAS's legacy column names (``question``, ``answer``, ``contexts``,
``ground_truth``) would be dropped silently by RAGAS; here they raise a `ValueError` naming the
row and the key to use. Unknown keys and ill-typed fields raise too, naming the row and field.
RAGAS fields ragbridge has no slot for (``rubrics``, ``persona_name``, ...) are kept in
``Sample.metadata["ragas"]`` and written back from there.

**Models.** RAGAS has two metric stacks with incompatible model interfaces whose methods share
names (``generate`` is async with ``n``/``temperature`` in one, sync with a response model in the
other), so one class cannot serve both:

* `RagasJudge` is a ``BaseRagasLLM`` for ``ragas.evaluate`` and the legacy metrics. Their prompts
  state the output JSON Schema in the text and RAGAS parses the reply, so each prompt goes through
  `JudgeEngine.complete` (free text; retries, timeout, cache keyed ``"ragas"`` + RAGAS's version).
  ``n`` completions are ``n`` calls, each its own cache entry. RAGAS's own tenacity retry around
  the model is bypassed (the engine already retried); ``temperature`` and ``stop`` are ignored.
* `RagasInstructorJudge` (``judge.for_collections()``) is an ``InstructorBaseRagasLLM`` for
  ``ragas.metrics.collections``: prompts with a response model go through `JudgeEngine.ask`
  (validated, repaired, cached). Identical prompts share a cache entry: with a cache,
  ``AnswerRelevancy``'s ``strictness`` repeats of one prompt are one call plus cache hits.
* `RagasEmbedder` is a ``BaseRagasEmbeddings`` (legacy); ``.for_collections()`` gives the
  ``BaseRagasEmbedding`` the collections metrics require. Both embed through one cached
  `EmbeddingEngine`. (``ragas.evaluate`` wraps any LangChain ``Embeddings`` — ours included, as
  ``BaseRagasEmbeddings`` subclasses it — in its ``LangchainEmbeddingsWrapper``, which calls our
  methods; harmless, but RAGAS's deprecation warning for that wrapper comes from there.)

The two judges made by ``for_collections`` share one engine and one running `usage`. A failed call
raises `RagasJudgeError` naming the ragbridge failure kind; RAGAS turns it into NaN, and
`scores_from_ragas` turns every NaN into a typed `Score` failure, so no NaN reaches a report.
Sync methods work inside a running event loop (`run_sync`).

**ragbridge's measures inside ``ragas.evaluate``.** `RagbridgeMetric` implements RAGAS's metric
protocol (a ``SingleTurnMetric``; a ``MetricWithLLM`` when the measure needs a judge), so a RAGAS
user swaps a metric, not a pipeline: ``metrics=[RagbridgeMetric("faithfulness"),
answer_relevancy]``. Its value is ragbridge's own (the number `ragbridge.core.evaluate` gives on
the same sample and judge); with no judge of its own it judges with the ``llm=`` /
``embeddings=`` RAGAS hands its metrics (`judge_from_ragas` unwraps RAGAS's and LangChain's
models). `ragbridge_metrics` makes several that share each row's sub-results.

**RAGAS's result, with the reasons.** When a metric fails on a row RAGAS logs
``Exception raised in Job[i]: Class(message)`` and writes NaN; `scores_from_ragas` on that result
can say no more than "RAGAS returned NaN". `evaluate` (same arguments as ``ragas.evaluate``)
watches the run through RAGAS's callbacks and returns RAGAS's own result (`RagasResult`, an
``EvaluationResult``) with ``failures[row][metric]``: the exception's class and message, the RAGAS
prompt that raised it, its cause, and a kind (``parse_error`` for ``RagasOutputParserException``,
``timeout``, the ragbridge kind of a judge failure).

RAGAS sends telemetry unless ``RAGAS_DO_NOT_TRACK=true`` is set. Importing this module without
ragas raises ImportError naming the extra: ``pip install "ragbridge[ragas]"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import numbers
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ValidationError
from typing_extensions import Unpack

from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.adapters.ragas_names import RAGAS_ALIASES, RAGAS_METRIC_NAMES, Names
from ragbridge.adapters.ragas_names import measure_of as _measure_of
from ragbridge.adapters.ragas_names import ragas_name as _ragas_name
from ragbridge.adapters.ragas_rows import (  # the rows need no RAGAS: see that module
    _PASSTHROUGH,
    _RAGAS_META,
    EXTRAS_KEY,
    RAGAS_FIELDS,
    _check_sample,
    _ragas_row,
    ragas_extras,
    to_ragas_jsonl,
)
from ragbridge.core.cache.disk import Cache, open_cache
from ragbridge.core.judging.engine import EmbeddingEngine, JudgeCall, JudgeEngine
from ragbridge.core.judging.judge import (
    Embedder,
    Judge,
    JudgeReply,
    JudgeTimeout,
    Message,
    PermanentJudgeError,
    RateLimited,
    classify_error,
)
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score, Usage
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import build_engines, resolve_metrics, run_sync
from ragbridge.core.scoring.scorer import Scorer, fingerprint
from ragbridge.core.settings import Settings, SettingsOptions

INSTALL_HINT = 'pip install "ragbridge[ragas]"'
"""What to run when the ``ragas`` extra is missing."""

quiet_frameworks()  # before ragas is imported: it reads RAGAS_DO_NOT_TRACK once

try:
    import ragas
    from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import Generation, LLMResult
    from langchain_core.prompt_values import ChatPromptValue, PromptValue
    from ragas.dataset_schema import EvaluationDataset, EvaluationResult, SingleTurnSample
    from ragas.embeddings.base import BaseRagasEmbedding, BaseRagasEmbeddings
    from ragas.exceptions import LLMDidNotFinishException, RagasOutputParserException
    from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, LangchainLLMWrapper
    from ragas.metrics.base import (
        MetricOutputType,
        MetricType,
        MetricWithEmbeddings,
        MetricWithLLM,
        SingleTurnMetric,
    )
    from ragas.run_config import RunConfig
except ImportError as exc:  # the fence: name the extra, not just the missing module
    raise ImportError(
        f"ragbridge.adapters.ragas needs ragas, which is not installed ({exc}); "
        f"install the ragas extra: {INSTALL_HINT}"
    ) from exc

__all__ = [
    "EXTRAS_KEY",
    "INSTALL_HINT",
    "LEGACY_NAMES",
    "RAGAS_FIELDS",
    "RAGAS_METRIC_NAMES",
    "RAGAS_NAMES",
    "RagasEmbedder",
    "RagasInstructorJudge",
    "RagasJudge",
    "RagasJudgeError",
    "RagasModernEmbedder",
    "RagasResult",
    "RagbridgeMetric",
    "RagbridgeScoreError",
    "RagbridgeSkipped",
    "aevaluate",
    "embedder_from_ragas",
    "evaluate",
    "failure_from_ragas",
    "from_hf_dataset",
    "from_ragas_dataset",
    "from_ragas_jsonl",
    "judge_from_ragas",
    "ragas_extras",
    "ragbridge_metric",
    "ragbridge_metrics",
    "score_from_ragas",
    "scores_from_ragas",
    "to_hf_dataset",
    "to_ragas_dataset",
    "to_ragas_jsonl",
]

T = TypeVar("T", bound=BaseModel)
StrPath = str | os.PathLike[str]

TEMPLATE_ID = "ragas"
"""Cache template id of every RAGAS prompt; the version is ``ragas.__version__``."""

LEGACY_NAMES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
    "ground_truths": "reference",
}
"""Pre-0.2 RAGAS column names, which RAGAS now drops silently, and the names to use instead."""

# --------------------------------------------------------------------------- data: writing


def to_ragas_dataset(samples: Iterable[Sample]) -> EvaluationDataset:
    """An ``EvaluationDataset`` of ``SingleTurnSample``s, one per sample, in order.

    See the module docstring for what RAGAS cannot hold; keep ``ragas_extras`` of each sample (or
    at least the ids) to come back losslessly.
    """
    rows = [SingleTurnSample(**_ragas_row(_check_sample(s, i))) for i, s in enumerate(samples)]
    return EvaluationDataset(samples=list(rows))


def to_hf_dataset(samples: Iterable[Sample]) -> Any:
    """A Hugging Face ``datasets.Dataset`` in RAGAS's column names, plus a ``ragbridge`` column
    (`ragas_extras` as a JSON string: Arrow needs one type per column, metadata varies).

    Every column is present in every row (None where absent). RAGAS's own ``to_hf_dataset`` goes
    through ``Dataset.from_list``, which takes its columns from the *first* row only, so a field
    absent from the first sample is dropped for all samples; this writer does not do that.
    """
    try:
        from datasets import Dataset  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ImportError(
            f"to_hf_dataset needs the datasets package ({exc}); {INSTALL_HINT}"
        ) from exc
    rows = []
    for i, sample in enumerate(samples):
        _check_sample(sample, i)
        row = _ragas_row(sample)
        rows.append(row | {EXTRAS_KEY: json.dumps(ragas_extras(sample), ensure_ascii=False)})
    columns: dict[str, list[Any]] = {key: [] for key in (*RAGAS_FIELDS, EXTRAS_KEY)}
    for key in _PASSTHROUGH:
        if any(key in row for row in rows):
            columns[key] = []
    for row in rows:
        for key, column in columns.items():
            column.append(row.get(key))
    return Dataset.from_dict(columns)


# --------------------------------------------------------------------------- data: reading


def from_ragas_dataset(
    dataset: EvaluationDataset | Iterable[SingleTurnSample],
    *,
    ids: Sequence[str] | None = None,
    extras: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[Sample]:
    """`Sample`s from a RAGAS ``EvaluationDataset`` (single-turn samples).

    Sample ids come from ``extras`` (see `ragas_extras`), else ``ids``, else the row index
    (``"0"``, ``"1"``, ...). Without extras, ``relevance`` is rebuilt from
    ``reference_context_ids`` with grade 1, and contexts have no score or metadata.
    """
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(dataset):
        if not isinstance(item, SingleTurnSample):
            raise ValueError(
                f"row {index}: expected a SingleTurnSample, got {type(item).__name__} "
                "(multi-turn samples have no ragbridge equivalent)"
            )
        rows.append(item.model_dump(exclude_none=True))
    return _samples_from_rows(rows, ids=ids, extras=extras, source="dataset")


def from_ragas_jsonl(path: StrPath, *, ids: Sequence[str] | None = None) -> list[Sample]:
    """`Sample`s from a RAGAS JSONL file (ours, with ``ragbridge`` extras, or RAGAS's own).

    Errors name the file, line and field: legacy column names, unknown keys, bad types.
    """
    source = str(path)
    rows: list[dict[str, Any]] = []
    with Path(path).open("r", encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{source}: row {len(rows)} (line {number}): invalid JSON: {exc}"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(
                    f"{source}: row {len(rows)} (line {number}): expected a JSON object, "
                    f"got {type(row).__name__}"
                )
            rows.append(row)
    return _samples_from_rows(rows, ids=ids, extras=None, source=source)


def from_hf_dataset(dataset: Any, *, ids: Sequence[str] | None = None) -> list[Sample]:
    """`Sample`s from a Hugging Face ``Dataset`` in RAGAS's column names (a ``ragbridge`` column,
    as `to_hf_dataset` writes, restores what RAGAS cannot carry). None cells count as absent."""
    legacy = [c for c in dataset.column_names if c in LEGACY_NAMES]
    if legacy:
        name = legacy[0]
        raise ValueError(
            f"column {name!r} is a legacy RAGAS name that RAGAS silently drops; "
            f"rename it to {LEGACY_NAMES[name]!r}"
        )
    rows = [{k: v for k, v in row.items() if v is not None} for row in dataset.to_list()]
    return _samples_from_rows(rows, ids=ids, extras=None, source="dataset")


def _samples_from_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    ids: Sequence[str] | None,
    extras: Sequence[Mapping[str, Any] | None] | None,
    source: str,
) -> list[Sample]:
    for name, given in (("ids", ids), ("extras", extras)):
        if given is not None and len(given) != len(rows):
            raise ValueError(f"{name} has {len(given)} entries for {len(rows)} rows")
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        extra = extras[index] if extras is not None else None
        default_id = ids[index] if ids is not None else str(index)
        sample = _sample_from_row(row, index, extra, default_id, source)
        if sample.id in seen:
            raise ValueError(
                f"{source}: row {index}: id: duplicate sample id {sample.id!r} "
                f"(first in row {seen[sample.id]})"
            )
        seen[sample.id] = index
        samples.append(sample)
    return samples


_KNOWN = {*RAGAS_FIELDS, *_PASSTHROUGH, EXTRAS_KEY}


def _sample_from_row(
    row: Mapping[str, Any],
    index: int,
    extra: Mapping[str, Any] | None,
    default_id: str,
    source: str,
) -> Sample:
    where = f"{source}: row {index}"

    def bad(field: str, problem: str) -> ValueError:
        return ValueError(f"{where}: {field}: {problem}")

    for key in row:
        if key in LEGACY_NAMES:
            raise bad(
                key,
                f"legacy RAGAS name, which RAGAS silently drops; use {LEGACY_NAMES[key]!r}",
            )
        if key not in _KNOWN:
            raise bad(key, f"unknown key (RAGAS single-turn fields are {', '.join(RAGAS_FIELDS)})")
    if extra is None and EXTRAS_KEY in row:
        extra = row[EXTRAS_KEY]
        if isinstance(extra, str):
            try:
                extra = json.loads(extra)
            except json.JSONDecodeError as exc:
                raise bad(EXTRAS_KEY, f"invalid JSON: {exc}") from None
    if extra is not None and not isinstance(extra, Mapping):
        raise bad(EXTRAS_KEY, f"expected an object, got {type(extra).__name__}")

    question = row.get("user_input")
    if isinstance(question, list):
        raise bad("user_input", "multi-turn samples (a list of messages) are not supported")
    if not isinstance(question, str):
        raise bad("user_input", "required, must be a string" + _got(question))
    texts = _str_list(row, "retrieved_contexts", bad) or []
    row_ids = row.get("retrieved_context_ids")
    if row_ids is not None and (not isinstance(row_ids, list) or len(row_ids) != len(texts)):
        raise bad(
            "retrieved_context_ids",
            f"must be a list with one id per retrieved context ({len(texts)})" + _got(row_ids),
        )
    for field in ("response", "reference"):
        if row.get(field) is not None and not isinstance(row[field], str):
            raise bad(field, "must be a string" + _got(row[field]))

    contexts_extra: list[Any] | None = None
    if extra is not None:
        contexts_extra = extra.get("contexts")
        if contexts_extra is not None and (
            not isinstance(contexts_extra, list) or len(contexts_extra) != len(texts)
        ):
            raise bad(
                f"{EXTRAS_KEY}.contexts",
                f"must be a list with one entry per retrieved context ({len(texts)})",
            )
    contexts: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        ctx: dict[str, Any] = {"text": text}
        if contexts_extra is not None:
            item = contexts_extra[i]
            if not isinstance(item, Mapping):
                raise bad(f"{EXTRAS_KEY}.contexts[{i}]", "expected an object")
            ctx.update({k: item[k] for k in ("id", "score", "metadata") if item.get(k) is not None})
        if row_ids is not None:
            if "id" in ctx and str(ctx["id"]) != str(row_ids[i]):
                raise bad(
                    f"retrieved_context_ids[{i}]",
                    f"{row_ids[i]!r} disagrees with {EXTRAS_KEY}.contexts[{i}].id {ctx['id']!r}",
                )
            ctx["id"] = row_ids[i]
        contexts.append(ctx)

    relevance: Any
    if extra is not None and "relevance" in extra:
        relevance = extra["relevance"]
    else:
        relevant = row.get("reference_context_ids")
        if relevant is not None and not isinstance(relevant, list):
            raise bad("reference_context_ids", "must be a list of ids" + _got(relevant))
        relevance = None if relevant is None else {str(doc): 1 for doc in relevant}

    metadata: Any = dict(extra.get("metadata") or {}) if extra is not None else {}
    passthrough = {k: row[k] for k in _PASSTHROUGH if row.get(k) is not None}
    if passthrough:
        if not isinstance(metadata, dict):
            raise bad(f"{EXTRAS_KEY}.metadata", "expected an object")
        kept = metadata.get(_RAGAS_META)
        metadata[_RAGAS_META] = {**(kept if isinstance(kept, Mapping) else {}), **passthrough}

    fields: dict[str, Any] = {
        "id": extra.get("id", default_id) if extra is not None else default_id,
        "question": question,
        "answer": row.get("response"),
        "contexts": contexts,
        "reference": row.get("reference"),
        "reference_contexts": _str_list(row, "reference_contexts", bad),
        "relevance": relevance,
        "metadata": metadata,
    }
    try:
        return Sample(**fields)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"]) or "sample"
        raise bad(field, str(err["msg"])) from None


def _str_list(row: Mapping[str, Any], field: str, bad: Any) -> list[str] | None:
    value = row.get(field)
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad(field, "must be a list of strings" + _got(value))
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise bad(f"{field}[{i}]", "must be a string" + _got(item))
    return list(value)


def _got(value: Any) -> str:
    shown = repr(value)
    return f", got {shown[:60] + '…' if len(shown) > 60 else shown}"


# --------------------------------------------------------------------------- results


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
    else the row index. The result of this module's `evaluate` (`RagasResult`) gives its typed
    cells: each NaN's failure names the exception RAGAS logged. Any other result's scores go
    through `score_from_ragas`: a NaN becomes a failure saying only that RAGAS returned NaN.
    ``judge`` adds its usage and model to the metadata.
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


# --------------------------------------------------------------------------- judges


class RagasJudgeError(RuntimeError):
    """A judge call failed after ragbridge's retries; ``failure`` says why (typed)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"ragbridge judge call failed ({failure.kind.value}): {failure.message}")
        self.failure = failure


class _Ledger:
    """The engine and running usage shared by the judges of both RAGAS stacks."""

    def __init__(self, engine: JudgeEngine) -> None:
        self.engine = engine
        self.usage = Usage()
        self.lock = threading.Lock()

    def record(self, call: JudgeCall[Any]) -> None:
        with self.lock:
            self.usage = self.usage + call.usage
        if call.failure is not None:
            raise RagasJudgeError(call.failure)


def _engine(
    judge: Judge | JudgeEngine,
    cache: StrPath | Cache | None,
    max_concurrency: int,
    timeout: float | None,
    max_retries: int,
) -> JudgeEngine:
    if isinstance(judge, JudgeEngine):
        if cache is not None:
            raise ValueError("pass cache= to the JudgeEngine, not next to one")
        return judge
    return JudgeEngine(
        judge,
        cache=open_cache(cache),
        max_concurrency=max_concurrency,
        timeout=timeout,
        max_retries=max_retries,
    )


_ROLES = {"human": "user", "system": "system", "ai": "assistant"}


def _messages(prompt: PromptValue | str) -> list[Message]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    out: list[Message] = []
    for message in prompt.to_messages():
        content = message.content if isinstance(message.content, str) else message.text
        out.append({"role": _ROLES.get(message.type, "user"), "content": content})
    return out


class RagasJudge(BaseRagasLLM):
    """A ragbridge `Judge` as RAGAS's ``BaseRagasLLM``, for ``ragas.evaluate`` and legacy metrics.

    ``cache`` is a ragbridge cache (path or `Cache`): a rerun with a fresh wrapper on the same file
    makes no judge calls. (RAGAS's own ``cache`` attribute, a different mechanism, stays None.)
    ``usage`` is the running total of calls and tokens, shared with `for_collections`.
    """

    # BaseRagasLLM is a dataclass: its generated __eq__ would make any two wrappers equal and
    # unhashable. A wrapper is an identity (its engine, cache and usage), not a value.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        judge: Judge | JudgeEngine,
        *,
        cache: StrPath | Cache | None = None,
        max_concurrency: int = 8,
        timeout: float | None = 60.0,
        max_retries: int = 4,
    ) -> None:
        self.run_config = RunConfig()
        self.multiple_completion_supported = True  # we make the n calls ourselves
        self.cache = None  # RAGAS's disk cache: unused, ragbridge's engine caches
        self._ledger = _Ledger(_engine(judge, cache, max_concurrency, timeout, max_retries))

    @property
    def engine(self) -> JudgeEngine:
        return self._ledger.engine

    @property
    def model(self) -> str:
        return self._ledger.engine.model

    @property
    def usage(self) -> Usage:
        """Calls and tokens spent so far through this judge and its collections twin."""
        return self._ledger.usage

    def for_collections(self) -> RagasInstructorJudge:
        """The ``InstructorBaseRagasLLM`` twin for ``ragas.metrics.collections``, on the same
        engine, cache and usage."""
        return RagasInstructorJudge._shared(self._ledger)

    def __repr__(self) -> str:
        return f"RagasJudge(model={self.model!r})"

    async def agenerate_text(
        self,
        prompt: PromptValue,
        n: int = 1,
        temperature: float | None = 0.01,
        stop: list[str] | None = None,
        callbacks: Any = None,
    ) -> LLMResult:
        """``n`` completions of ``prompt`` (one call each); raises `RagasJudgeError` on failure."""
        import asyncio

        messages = _messages(prompt)
        calls = await asyncio.gather(
            *(
                self.engine.complete(
                    messages,
                    template_id=TEMPLATE_ID if i == 0 else f"{TEMPLATE_ID}#{i}",
                    template_version=ragas.__version__,
                )
                for i in range(max(1, n))
            )
        )
        for call in calls:
            self._ledger.record(call)
        return LLMResult(generations=[[Generation(text=call.value or "") for call in calls]])

    def generate_text(
        self,
        prompt: PromptValue,
        n: int = 1,
        temperature: float = 0.01,
        stop: list[str] | None = None,
        callbacks: Any = None,
    ) -> LLMResult:
        result: LLMResult = run_sync(self.agenerate_text(prompt, n, temperature, stop, callbacks))
        return result

    async def generate(
        self,
        prompt: PromptValue,
        n: int = 1,
        temperature: float | None = 0.01,
        stop: list[str] | None = None,
        callbacks: Any = None,
    ) -> LLMResult:
        # Bypasses RAGAS's tenacity retry (up to 10 attempts with minute-long waits): the engine
        # has already retried transient errors, and a parse failure is RAGAS's to handle.
        return await self.agenerate_text(prompt, n, temperature, stop, callbacks)

    def is_finished(self, response: LLMResult) -> bool:
        # Judges report no finish reason through the protocol; an empty reply was already retried.
        return True


class RagasInstructorJudge(InstructorBaseRagasLLM):
    """A ragbridge `Judge` as RAGAS's ``InstructorBaseRagasLLM``, for ``ragas.metrics.collections``
    (``Faithfulness(llm=...)``, ``AnswerRelevancy(llm=..., embeddings=...)``, ...).

    Each prompt goes to `JudgeEngine.ask` with RAGAS's response model as the schema: validated,
    repaired once, retried, cached. Usually made by `RagasJudge.for_collections`.
    """

    is_async = True  # RAGAS's prompt helpers check this before choosing agenerate

    def __init__(
        self,
        judge: Judge | JudgeEngine,
        *,
        cache: StrPath | Cache | None = None,
        max_concurrency: int = 8,
        timeout: float | None = 60.0,
        max_retries: int = 4,
    ) -> None:
        self._ledger = _Ledger(_engine(judge, cache, max_concurrency, timeout, max_retries))

    @classmethod
    def _shared(cls, ledger: _Ledger) -> RagasInstructorJudge:
        twin = cls.__new__(cls)
        twin._ledger = ledger
        return twin

    @property
    def engine(self) -> JudgeEngine:
        return self._ledger.engine

    @property
    def model(self) -> str:
        return self._ledger.engine.model

    @property
    def usage(self) -> Usage:
        return self._ledger.usage

    def __repr__(self) -> str:
        return f"RagasInstructorJudge(model={self.model!r})"

    async def agenerate(self, prompt: str, response_model: type[T]) -> T:
        call = await self.engine.ask(
            _messages(prompt),
            response_model,
            template_id=TEMPLATE_ID,
            template_version=ragas.__version__,
        )
        self._ledger.record(call)
        assert call.value is not None
        return call.value

    def generate(self, prompt: str, response_model: type[T]) -> T:
        result: T = run_sync(self.agenerate(prompt, response_model))
        return result


# --------------------------------------------------------------------------- embeddings


class RagasEmbedder(BaseRagasEmbeddings):
    """A ragbridge `Embedder` as RAGAS's ``BaseRagasEmbeddings`` (legacy metrics, e.g.
    answer_relevancy), embedding through a cached, batching `EmbeddingEngine`."""

    def __init__(
        self, embedder: Embedder | EmbeddingEngine, *, cache: StrPath | Cache | None = None
    ) -> None:
        super().__init__(cache=None)  # RAGAS's cache stays off; ragbridge's engine caches
        self.run_config = RunConfig()
        if isinstance(embedder, EmbeddingEngine):
            if cache is not None:
                raise ValueError("pass cache= to the EmbeddingEngine, not next to one")
            self.engine = embedder
        else:
            self.engine = EmbeddingEngine(embedder, cache=open_cache(cache))

    @property
    def model(self) -> str:
        return self.engine.model

    def for_collections(self) -> RagasModernEmbedder:
        """The ``BaseRagasEmbedding`` twin that ``ragas.metrics.collections`` require."""
        return RagasModernEmbedder(self.engine)

    def __repr__(self) -> str:
        return f"RagasEmbedder(model={self.model!r})"

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.engine.embed([text]))[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.engine.embed(list(texts))

    def embed_query(self, text: str) -> list[float]:
        result: list[float] = run_sync(self.aembed_query(text))
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        result: list[list[float]] = run_sync(self.aembed_documents(texts))
        return result


class RagasModernEmbedder(BaseRagasEmbedding):
    """A ragbridge `Embedder` as RAGAS's modern ``BaseRagasEmbedding`` (collections metrics).
    Usually made by `RagasEmbedder.for_collections`; batches go to the engine in one request."""

    def __init__(
        self, embedder: Embedder | EmbeddingEngine, *, cache: StrPath | Cache | None = None
    ) -> None:
        super().__init__(cache=None)
        if isinstance(embedder, EmbeddingEngine):
            if cache is not None:
                raise ValueError("pass cache= to the EmbeddingEngine, not next to one")
            self.engine = embedder
        else:
            self.engine = EmbeddingEngine(embedder, cache=open_cache(cache))

    @property
    def model(self) -> str:
        return self.engine.model

    def __repr__(self) -> str:
        return f"RagasModernEmbedder(model={self.model!r})"

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.engine.embed([text]))[0]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return await self.engine.embed(list(texts))

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        result: list[float] = run_sync(self.aembed_text(text))
        return result

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        result: list[list[float]] = run_sync(self.aembed_texts(texts))
        return result


# --------------------------------------------------------------------------- RAGAS's models


def _model_name(obj: Any) -> str:
    """The model name a RAGAS LLM or embeddings object wraps, for the cache key and reports."""
    for inner in (getattr(obj, attr, None) for attr in ("langchain_llm", "llm", "embeddings")):
        for attr in ("model_name", "model"):
            name = getattr(inner, attr, None)
            if isinstance(name, str) and name:
                return name
    name = getattr(obj, "model", None)
    return name if isinstance(name, str) and name else type(obj).__name__


_MESSAGE_TYPES: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "user": HumanMessage,
    "assistant": AIMessage,
}


def _usage_of(result: LLMResult) -> Usage:
    """Tokens from a LangChain result: the provider's ``token_usage`` or a message's metadata."""
    token_usage = (result.llm_output or {}).get("token_usage") or {}
    prompt, completion = token_usage.get("prompt_tokens"), token_usage.get("completion_tokens")
    if prompt is None and result.generations and result.generations[0]:
        message = getattr(result.generations[0][0], "message", None)
        metadata = getattr(message, "usage_metadata", None) or {}
        prompt, completion = metadata.get("input_tokens"), metadata.get("output_tokens")
    return Usage(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))


class _RagasLLMJudge:
    """A RAGAS LLM as a ragbridge `Judge`: a ``BaseRagasLLM`` (``LangchainLLMWrapper``,
    ``LlamaIndexLLMWrapper``, a custom one) answers free text that the engine parses; an
    instructor-style ``InstructorBaseRagasLLM`` answers with the schema's instance.

    RAGAS's own retry around the model is bypassed (``agenerate_text``, not ``generate``): the
    engine retries, and provider errors are mapped by `classify_error` like every adapter's.
    """

    def __init__(self, llm: BaseRagasLLM | InstructorBaseRagasLLM) -> None:
        self.llm = llm
        self.model = _model_name(llm)

    def __repr__(self) -> str:
        return f"judge_from_ragas({type(self.llm).__name__}, model={self.model!r})"

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        try:
            if isinstance(self.llm, InstructorBaseRagasLLM):
                if schema is None:
                    raise PermanentJudgeError(
                        f"{type(self.llm).__name__} (an instructor-style RAGAS LLM) answers "
                        "only with a response model; this prompt asks for free text"
                    )
                prompt = "\n\n".join(m["content"] for m in messages)
                parsed: BaseModel = await self.llm.agenerate(prompt, schema)
                return JudgeReply(text=parsed.model_dump_json(), parsed=parsed)
            value = ChatPromptValue(
                messages=[
                    _MESSAGE_TYPES.get(m["role"], HumanMessage)(m["content"]) for m in messages
                ]
            )
            result = await self.llm.agenerate_text(value)
        except PermanentJudgeError:
            raise
        except Exception as exc:
            mapped = classify_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise
        generations = result.generations[0] if result.generations else []
        return JudgeReply(text=generations[0].text if generations else "", usage=_usage_of(result))


class _RagasEmbeddingsEmbedder:
    """RAGAS embeddings (legacy ``BaseRagasEmbeddings`` / LangChain ``Embeddings``, or the modern
    ``BaseRagasEmbedding``) as a ragbridge `Embedder`."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.model = _model_name(embeddings)

    def __repr__(self) -> str:
        return f"embedder_from_ragas({type(self.embeddings).__name__}, model={self.model!r})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if hasattr(self.embeddings, "aembed_documents"):
            vectors = await self.embeddings.aembed_documents(list(texts))
        else:
            vectors = await self.embeddings.aembed_texts(list(texts))
        return [[float(x) for x in vector] for vector in vectors]


def _as_judge(llm: Any) -> Any:
    """A RAGAS or LangChain model as a ragbridge judge; anything else unchanged."""
    if isinstance(llm, (RagasJudge, RagasInstructorJudge)):
        return llm.engine
    if isinstance(llm, (BaseRagasLLM, InstructorBaseRagasLLM)):
        return _RagasLLMJudge(llm)
    if isinstance(llm, BaseLanguageModel):
        return _RagasLLMJudge(LangchainLLMWrapper(llm))
    return llm


def _as_embedder(embeddings: Any) -> Any:
    """RAGAS or LangChain embeddings as a ragbridge embedder; anything else unchanged."""
    if isinstance(embeddings, (RagasEmbedder, RagasModernEmbedder)):
        return embeddings.engine
    if isinstance(embeddings, (BaseRagasEmbeddings, BaseRagasEmbedding)):
        return _RagasEmbeddingsEmbedder(embeddings)
    if not isinstance(embeddings, (Embedder, EmbeddingEngine)) and hasattr(
        embeddings, "aembed_documents"
    ):
        return _RagasEmbeddingsEmbedder(embeddings)  # LangChain Embeddings
    return embeddings


def judge_from_ragas(llm: Any) -> Judge | JudgeEngine:
    """What RAGAS calls an evaluator LLM, as a ragbridge judge.

    ragbridge's own `RagasJudge` / `RagasInstructorJudge` give back their engine (same cache,
    in-flight cap and usage); any other ``BaseRagasLLM`` (``LangchainLLMWrapper(ChatOpenAI())``,
    as RAGAS's tutorials write it) or ``InstructorBaseRagasLLM`` (``llm_factory(...)``) is
    called through its RAGAS interface; a bare LangChain model is wrapped the way
    ``ragas.evaluate`` wraps it. A ragbridge `Judge` or `JudgeEngine` is returned as it is.
    """
    judge = _as_judge(llm)
    if isinstance(judge, (JudgeEngine, Judge)):
        return judge
    raise TypeError(
        f"{type(llm).__module__}.{type(llm).__qualname__} is neither a RAGAS LLM, a LangChain "
        "model nor a ragbridge Judge"
    )


def embedder_from_ragas(embeddings: Any) -> Embedder | EmbeddingEngine:
    """RAGAS embeddings (or LangChain ``Embeddings``) as a ragbridge embedder; ragbridge's own
    `RagasEmbedder` / `RagasModernEmbedder` give back their engine. See `judge_from_ragas`."""
    embedder = _as_embedder(embeddings)
    if isinstance(embedder, (EmbeddingEngine, Embedder)):
        return embedder
    raise TypeError(
        f"{type(embeddings).__module__}.{type(embeddings).__qualname__} is neither RAGAS "
        "embeddings, LangChain embeddings nor a ragbridge Embedder"
    )


# --------------------------------------------------------------------------- metrics for RAGAS

RAGAS_NAMES: dict[str, str] = {
    **{ragas: ours for ours, ragas in RAGAS_METRIC_NAMES.items() if ragas != ours},
    **RAGAS_ALIASES,
}
"""RAGAS metric names accepted for the ragbridge measure of the same meaning (the column keeps
the RAGAS name): `RAGAS_METRIC_NAMES` read backwards, and RAGAS's other names for them."""

_COLUMN_OF = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "reference": "reference",
    "reference_contexts": "reference_contexts",
    "relevance": "reference_context_ids",
}
_ROW_ID = "ragas-row"
_SCORERS_KEPT = 8


class RagbridgeScoreError(RuntimeError):
    """A ragbridge metric could not score a RAGAS row; ``score`` holds the typed failure.

    Raised from inside ``ragas.evaluate``, which logs it and records NaN (or, with
    ``raise_exceptions=True``, stops); this module's `evaluate` keeps ``score`` for the cell.
    """

    def __init__(self, metric: str, score: Score) -> None:
        failure = score.failure
        assert failure is not None
        super().__init__(f"ragbridge {metric} failed ({failure.kind.value}): {failure.message}")
        self.score = score
        self.failure = failure


class RagbridgeSkipped(RuntimeError):
    """A ragbridge metric does not apply to a RAGAS row (e.g. an abstaining answer has no
    claims to check); ``score`` holds the skip and its reason.

    Raised rather than returning NaN: RAGAS's metric protocol has no "no value", so the cell is
    RAGAS's own NaN, written by its executor next to a log line that gives the reason (with
    ``raise_exceptions=True`` RAGAS stops, as on any row it cannot score); this module's
    `evaluate` keeps the skip as a skip, not a failure.
    """

    def __init__(self, metric: str, score: Score) -> None:
        super().__init__(f"ragbridge {metric} skipped a row: {score.reason}")
        self.score = score


class _Group:
    """The ragbridge metrics that score one RAGAS row together: one `Scorer` per judge and
    embedder, so metrics built together share each row's sub-results (one ``answer.analyze``
    call serves faithfulness, answer relevance and answer correctness) and one engine."""

    def __init__(self, metrics: list[Metric], settings: Settings) -> None:
        self.metrics = metrics
        self.settings = settings
        self.engines = build_engines(settings, metrics)
        self._lock = threading.Lock()
        self._scorers: OrderedDict[tuple[int, int], tuple[Any, Any, Scorer]] = OrderedDict()

    def scorer(self, llm: Any, embeddings: Any) -> Scorer:
        own_judge, own_embedder = self.engines.judge, self.engines.embedder
        llm = None if own_judge is not None else llm
        embeddings = None if own_embedder is not None else embeddings
        key = (id(llm), id(embeddings))
        with self._lock:
            kept = self._scorers.get(key)
            if kept is not None and kept[0] is llm and kept[1] is embeddings:
                self._scorers.move_to_end(key)
                return kept[2]
            judge = own_judge if llm is None else judge_from_ragas(llm)
            embedder = own_embedder if embeddings is None else embedder_from_ragas(embeddings)
            metrics = [m for m in self.metrics if judge is not None or not m.needs_judge]
            scorer = Scorer(metrics, settings=self.settings.replace(judge=judge, embedder=embedder))
            # Kept with the sources, so their ids stay theirs; a few only, since ragas.evaluate
            # wraps a LangChain model anew on every call.
            self._scorers[key] = (llm, embeddings, scorer)
            while len(self._scorers) > _SCORERS_KEPT:
                self._scorers.popitem(last=False)
            return scorer


def _resolve(metric: Metric | str, names: Names = "ragas") -> tuple[Metric, str]:
    """The ragbridge metric, and the RAGAS column name it gets by default: a RAGAS name given
    is kept; otherwise RAGAS's name for the measure (`ragbridge.adapters.ragas_names`), or
    ragbridge's with ``names="ragbridge"``."""
    if isinstance(metric, Metric):
        resolved = metric
        label = None
    elif isinstance(metric, str):
        measure, colon, provider = metric.strip().partition(":")
        ours = _measure_of(measure)
        if ours is not None and ":" in ours and colon:
            raise ValueError(f"{measure!r} is RAGAS's name of {ours!r}: give no other provider")
        name = ours or measure
        (resolved,) = resolve_metrics([f"{name}:{provider}" if colon else name])
        label = metric if ours is not None else None
    else:
        raise TypeError(
            f"not a metric: {metric!r}; give measure names ('faithfulness') or ragbridge "
            "Metric objects"
        )
    if label is None:
        default = resolved.providers[0] if resolved.providers else resolved.provider
        label = _ragas_name(resolved.name, resolved.provider, default, names=names)
    return resolved, label


def _models(
    settings: Settings | None, llm: Any, embeddings: Any, options: dict[str, Any]
) -> Settings:
    """One `Settings` from ragbridge's spellings (``settings=``, ``judge=``, ``embedder=``, ...:
    the core's rules) and RAGAS's metric-level ``llm=`` / ``embeddings=`` (allowed next to a
    ``settings=`` that names no model). RAGAS and LangChain models become ragbridge judges and
    embedders (`judge_from_ragas`); other objects are left to `Settings`."""
    for ours, convert in (("judge", _as_judge), ("embedder", _as_embedder)):
        if options.get(ours) is not None:
            options[ours] = convert(options[ours])
    merged = Settings.merged(settings, **options)
    changes: dict[str, Any] = {}
    for ragas_name, ours, given in (("llm", "judge", llm), ("embeddings", "embedder", embeddings)):
        current = getattr(merged, ours)
        if given is not None and current is not None:
            raise TypeError(f"{ragas_name}= and {ours}= name the same model; pass one of them")
        model = given if given is not None else current
        if model is not None:
            changes[ours] = _as_judge(model) if ours == "judge" else _as_embedder(model)
    return merged.replace(**changes) if changes else merged


class RagbridgeMetric(SingleTurnMetric):
    """A ragbridge measure as a RAGAS metric: put it in ``ragas.evaluate(metrics=[...])`` next
    to (or instead of) RAGAS's own, and its column holds ragbridge's value — the same number
    ``ragbridge.core.evaluate`` gives on the same sample and judge.

    ``RagbridgeMetric("faithfulness")``, ``RagbridgeMetric("answer_relevancy")`` (RAGAS's name
    for ragbridge's ``answer_relevance``; the column keeps the name given),
    ``RagbridgeMetric("faithfulness:offline")``, ``RagbridgeMetric("recall@5")``.

    **Names.** The column (``metric.name``) is RAGAS's name for the measure wherever RAGAS has
    a counterpart, so code written for RAGAS reads it unchanged: ``"answer_relevance"`` gives
    ``answer_relevancy``, ``"bleu"`` ``bleu_score``, ``"rouge_l"`` ``rouge_score`` (the table:
    `ragbridge.adapters.ragas_names`); a provider other than the default is appended
    (``answer_relevancy:offline``). ``names="ragbridge"`` keeps ragbridge's names;
    ``name=`` sets one outright.

    **Models.** A metric that needs a judge is a RAGAS ``MetricWithLLM`` (and, when it also
    needs an embedder, a ``MetricWithEmbeddings``): given none, it uses what ``ragas.evaluate``
    hands every such metric — its ``llm=`` / ``embeddings=`` (``LangchainLLMWrapper``, an
    instructor LLM, ragbridge's `RagasJudge`, ... see `judge_from_ragas`). Given one here
    (``judge=`` or RAGAS's spelling ``llm=``; ``embedder=`` / ``embeddings=``; or
    ``settings=``), that one is used and ``metric.llm`` shows it. Metrics that need no judge
    (offline, string, ranking) are neither, so RAGAS injects nothing (and makes no default
    OpenAI client) for them; an offline one given no embedder uses ragbridge's default.

    **Results.** A value is returned as is. A typed failure raises `RagbridgeScoreError` —
    RAGAS logs it and records NaN, as for its own metrics — and a skip (the measure does not
    apply, e.g. an abstaining answer) raises `RagbridgeSkipped`, logged with its reason.
    `evaluate` in this module keeps both next to RAGAS's result.

    Several metrics made by one `ragbridge_metrics` call share a judge engine and each row's
    sub-results. RAGAS's ``metric.name`` (the result column) can be set freely.
    """

    __eq__ = object.__eq__  # an identity (its engines, cache), not a value: see RagasJudge
    __hash__ = object.__hash__

    def __new__(cls, metric: Metric | str | None = None, *args: Any, **kwargs: Any) -> Any:
        if cls is not RagbridgeMetric or metric is None:
            return super().__new__(cls)
        resolved, _ = _resolve(metric)
        if not resolved.needs_judge:
            return super().__new__(cls)
        variant = _WithLLMAndEmbeddings if resolved.needs_embedder else _WithLLM
        return super().__new__(variant)

    def __init__(
        self,
        metric: Metric | str,
        *,
        settings: Settings | None = None,
        llm: Any = None,
        embeddings: Any = None,
        name: str | None = None,
        names: Names = "ragas",
        _group: _Group | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        resolved, label = _resolve(metric, names)
        if _group is None:
            _group = _Group([resolved], _models(settings, llm, embeddings, dict(options)))
        self._group = _group
        self.metric = resolved
        self.name = name or label
        columns = {_COLUMN_OF[f] for f in resolved.requires if f in _COLUMN_OF} | {"user_input"}
        optional = {f"{c}:optional" for c in RAGAS_FIELDS if c not in columns}
        self._required_columns = {MetricType.SINGLE_TURN: columns | optional}
        self._attach_models()

    def _attach_models(self) -> None:
        """Show the models given here as RAGAS's ``llm`` / ``embeddings`` (variants below)."""

    def __repr__(self) -> str:
        judge = self._group.engines.judge
        model = f", judge={judge.model!r}" if judge is not None else ""
        return f"RagbridgeMetric({self.metric.name!r}, provider={self.metric.provider!r}{model})"

    @property
    def settings(self) -> Settings:
        return self._group.settings

    def init(self, run_config: RunConfig) -> None:
        """Called by ``ragas.evaluate`` once the models are set: check the judge is there and
        build the scorer now rather than on the first row."""
        self._scorer()

    def _scorer(self) -> Scorer:
        llm = getattr(self, "llm", None)
        if self.metric.needs_judge and llm is None and self._group.engines.judge is None:
            raise ValueError(
                f"Metric '{self.name}' has no judge: pass llm= to ragas.evaluate, or "
                f"judge= / llm= to RagbridgeMetric({self.metric.name!r})"
            )
        return self._group.scorer(llm, getattr(self, "embeddings", None))

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Any) -> float:
        row = sample.model_dump(exclude_none=True)
        converted = _sample_from_row(row, 0, None, _ROW_ID, f"RAGAS row for {self.name}")
        name = self.metric.name
        scores = await self._scorer().ascore(converted, only=[name], key=fingerprint(converted))
        score = scores[name]
        recorder = _recorder_in(callbacks)
        if recorder is not None:
            recorder.scored(getattr(callbacks, "parent_run_id", None), score)
        if score.value is not None:
            return score.value
        if score.failure is not None:
            raise RagbridgeScoreError(self.name, score)
        raise RagbridgeSkipped(self.name, score)


class _WithLLM(RagbridgeMetric, MetricWithLLM):
    """A `RagbridgeMetric` whose measure needs a judge (RAGAS fills ``llm`` when it is None)."""

    def _attach_models(self) -> None:
        engine = self._group.engines.judge
        self.llm = RagasJudge(engine) if engine is not None else None
        self.output_type = MetricOutputType.CONTINUOUS


class _WithLLMAndEmbeddings(_WithLLM, MetricWithEmbeddings):
    """A `RagbridgeMetric` whose measure needs a judge and an embedder (answer relevance)."""

    def _attach_models(self) -> None:
        super()._attach_models()
        engine = self._group.engines.embedder
        self.embeddings = RagasEmbedder(engine) if engine is not None else None


def ragbridge_metric(
    metric: Metric | str,
    *,
    settings: Settings | None = None,
    llm: Any = None,
    embeddings: Any = None,
    name: str | None = None,
    names: Names = "ragas",
    **options: Unpack[SettingsOptions],
) -> RagbridgeMetric:
    """``RagbridgeMetric(metric, ...)``: a ragbridge measure for ``ragas.evaluate``."""
    return RagbridgeMetric(
        metric, settings=settings, llm=llm, embeddings=embeddings, name=name, names=names,
        **options,
    )  # fmt: skip


def ragbridge_metrics(
    *metrics: Metric | str | Iterable[Metric | str],
    settings: Settings | None = None,
    llm: Any = None,
    embeddings: Any = None,
    names: Names = "ragas",
    **options: Unpack[SettingsOptions],
) -> list[RagbridgeMetric]:
    """Several ragbridge measures for ``ragas.evaluate`` that share one judge engine and each
    row's sub-results: ``ragbridge_metrics(["faithfulness", "answer_relevancy"])`` — a list,
    as RAGAS's ``metrics=`` and ragbridge's other sinks take — or the same names one by one.
    Columns are named as in `RagbridgeMetric` (``names=``)."""
    given: list[Any] = list(metrics)
    if len(given) == 1 and not isinstance(given[0], (str, Metric)):
        given = list(given[0]) if isinstance(given[0], Iterable) else given
    for item in given:
        if not isinstance(item, (str, Metric)):
            raise TypeError(
                f"not a metric: {item!r}; pass one list of measures, ragbridge_metrics(["
                "'faithfulness', 'context_recall']), or the measures one by one"
            )
    resolved = [_resolve(m, names) for m in given]
    measures = [metric.name for metric, _ in resolved]
    if len(set(measures)) != len(measures):
        raise ValueError(f"metric names must be unique, got {measures}")
    group = _Group([m for m, _ in resolved], _models(settings, llm, embeddings, dict(options)))
    return [RagbridgeMetric(metric, name=label, _group=group) for metric, label in resolved]


# --------------------------------------------------------------------------- RAGAS's result


class _Recorder(BaseCallbackHandler):
    """Watches one ``ragas.evaluate`` run through RAGAS's own callbacks: which row and metric
    each chain is, the exception each chain raised, and the ragbridge `Score` behind each
    `RagbridgeMetric` cell. (RAGAS's executor logs only ``Class(message)`` and writes NaN.)"""

    run_inline = True
    raise_error = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.parents: dict[UUID, UUID | None] = {}
        self.names: dict[UUID, str] = {}
        self.rows: dict[UUID, int] = {}
        self.errors: dict[UUID, BaseException] = {}
        self.scores: dict[UUID, Score] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            self.parents[run_id] = parent_run_id
            self.names[run_id] = str((serialized or {}).get("name", ""))
            if metadata and isinstance(metadata.get("row_index"), int):
                self.rows[run_id] = metadata["row_index"]

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self.errors.setdefault(run_id, error)

    def scored(self, run_id: UUID | None, score: Score) -> None:
        if run_id is not None:
            with self._lock:
                self.scores[run_id] = score

    def cells(self) -> dict[tuple[int, str], UUID]:
        """(row, metric chain name) -> the metric's run id."""
        with self._lock:
            return {
                (self.rows[parent], self.names[run]): run
                for run, parent in self.parents.items()
                if parent is not None and parent in self.rows
            }

    def inner_errors(self, run_id: UUID) -> list[tuple[str, BaseException]]:
        """Errors raised by the chains below ``run_id`` (RAGAS's prompts), outermost first."""
        with self._lock:
            found: list[tuple[str, BaseException]] = []
            level = [run_id]
            while level:
                level = [run for run, parent in self.parents.items() if parent in level]
                found += [
                    (self.names[run], self.errors[run]) for run in level if run in self.errors
                ]
            return found


def _recorder_in(callbacks: Any) -> _Recorder | None:
    for handler in getattr(callbacks, "handlers", None) or []:
        if isinstance(handler, _Recorder):
            return handler
    return None


class _JobLog(logging.Filter):
    """Reads RAGAS's executor log lines ``Exception raised in Job[i]: Class(message)``: the
    fallback for an error raised before a metric's chain started (then no callback sees it).

    A filter that lets every record through, not a handler: the lines still reach the user's
    handlers, or Python's last-resort stderr output when there are none, as without ragbridge.
    """

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[int, tuple[str, str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 3
            and str(record.msg).startswith("Exception raised in Job[")
            and isinstance(args[0], int)
        ):
            self.jobs[args[0]] = (str(args[1]), str(args[2]))
        return True


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
    recorder: _Recorder,
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


def _result(
    result: EvaluationResult,
    metrics: Sequence[Any] | None,
    recorder: _Recorder,
    jobs: Mapping[int, tuple[str, str]],
) -> RagasResult:
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


@contextmanager
def _watching(kwargs: dict[str, Any]) -> Iterator[tuple[_Recorder, _JobLog]]:
    if kwargs.get("return_executor"):
        raise ValueError(
            "return_executor=True hands the jobs to you, so no result is built; call "
            "ragas.evaluate for that"
        )
    recorder, jobs = _Recorder(), _JobLog()
    callbacks = kwargs.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.copy()
        callbacks.add_handler(recorder, inherit=True)
    else:
        callbacks = [*(callbacks or []), recorder]
    kwargs["callbacks"] = callbacks
    logger = logging.getLogger("ragas.executor")
    logger.addFilter(jobs)
    try:
        yield recorder, jobs
    finally:
        logger.removeFilter(jobs)


def _check_names(metrics: Sequence[Any] | None) -> None:
    names = [getattr(m, "name", None) for m in metrics or []]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    if twice:
        raise ValueError(
            f"metric name(s) {twice} given twice: RAGAS keys results by name, so one column "
            "would silently hold the other's scores; rename one (metric.name = '...')"
        )


def evaluate(dataset: Any, metrics: Sequence[Any] | None = None, **kwargs: Any) -> RagasResult:
    """``ragas.evaluate`` with the same arguments, returning its result with the typed failures
    next to it (`RagasResult`): ``result.failures[row][metric]`` says why a cell is NaN.

    Swap ``from ragas import evaluate`` for ``from ragbridge.adapters.ragas import evaluate``;
    everything else (``llm=``, ``embeddings=``, ``run_config=``, ``callbacks=``, ...) is RAGAS's.
    Refuses two metrics of one name, which RAGAS would let overwrite each other's column.
    """
    _check_names(metrics)
    with _watching(kwargs) as (recorder, jobs):
        result = ragas.evaluate(dataset, metrics=metrics, **kwargs)
    assert isinstance(result, EvaluationResult)
    return _result(result, metrics, recorder, jobs.jobs)


async def aevaluate(
    dataset: Any, metrics: Sequence[Any] | None = None, **kwargs: Any
) -> RagasResult:
    """``ragas.aevaluate`` with the typed failures next to its result (see `evaluate`)."""
    _check_names(metrics)
    with _watching(kwargs) as (recorder, jobs):
        result = await ragas.aevaluate(dataset, metrics=metrics, **kwargs)
    assert isinstance(result, EvaluationResult)
    return _result(result, metrics, recorder, jobs.jobs)
