"""ragbridge's measures inside ``ragas.evaluate``: `RagbridgeMetric` implements RAGAS's metric
protocol (a ``SingleTurnMetric``; a ``MetricWithLLM`` when the measure needs a judge), so a RAGAS
user swaps a metric, not a pipeline: ``metrics=[RagbridgeMetric("faithfulness"),
answer_relevancy]``.

Its value is ragbridge's own (the number `ragbridge.core.evaluate` gives on the same sample and
judge); with no judge of its own it judges with the ``llm=`` / ``embeddings=`` RAGAS hands its
metrics (`ragbridge.adapters.ragas.models.judge_from_ragas` unwraps RAGAS's and LangChain's
models). `ragbridge_metrics` makes several that share each row's sub-results. Columns are named as
RAGAS names its own metrics (`ragbridge.adapters.ragas.names`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from typing_extensions import Unpack

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
from ragas.dataset_schema import SingleTurnSample
from ragas.metrics.base import (
    MetricOutputType,
    MetricType,
    MetricWithEmbeddings,
    MetricWithLLM,
    SingleTurnMetric,
)
from ragas.run_config import RunConfig

from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Score
from ragbridge.core.scoring.runner import build_engines, resolve_metrics
from ragbridge.core.scoring.scorer import Scorer, fingerprint
from ragbridge.core.settings import Settings, SettingsOptions

from .callbacks import recorder_in
from .models import (
    RagasEmbedder,
    RagasJudge,
    as_embedder,
    as_judge,
    embedder_from_ragas,
    judge_from_ragas,
)
from .names import Names, measure_of, ragas_name
from .rows import RAGAS_FIELDS, sample_from_row

__all__ = [
    "RagbridgeMetric",
    "RagbridgeScoreError",
    "RagbridgeSkipped",
    "ragbridge_metric",
    "ragbridge_metrics",
]

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
    ``raise_exceptions=True``, stops); `ragbridge.adapters.ragas.runner.evaluate` keeps
    ``score`` for the cell.
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
    ``raise_exceptions=True`` RAGAS stops, as on any row it cannot score);
    `ragbridge.adapters.ragas.runner.evaluate` keeps the skip as a skip, not a failure.
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
    is kept; otherwise RAGAS's name for the measure (`ragbridge.adapters.ragas.names`), or
    ragbridge's with ``names="ragbridge"``."""
    if isinstance(metric, Metric):
        resolved = metric
        label = None
    elif isinstance(metric, str):
        measure, colon, provider = metric.strip().partition(":")
        ours = measure_of(measure)
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
        label = ragas_name(resolved.name, resolved.provider, default, names=names)
    return resolved, label


def _models(
    settings: Settings | None, llm: Any, embeddings: Any, options: dict[str, Any]
) -> Settings:
    """One `Settings` from ragbridge's spellings (``settings=``, ``judge=``, ``embedder=``, ...:
    the core's rules) and RAGAS's metric-level ``llm=`` / ``embeddings=`` (allowed next to a
    ``settings=`` that names no model). RAGAS and LangChain models become ragbridge judges and
    embedders (`judge_from_ragas`); other objects are left to `Settings`."""
    for ours, convert in (("judge", as_judge), ("embedder", as_embedder)):
        if options.get(ours) is not None:
            options[ours] = convert(options[ours])
    merged = Settings.merged(settings, **options)
    changes: dict[str, Any] = {}
    for ragas_field, ours, given in (
        ("llm", "judge", llm),
        ("embeddings", "embedder", embeddings),
    ):
        current = getattr(merged, ours)
        if given is not None and current is not None:
            raise TypeError(f"{ragas_field}= and {ours}= name the same model; pass one of them")
        model = given if given is not None else current
        if model is not None:
            changes[ours] = as_judge(model) if ours == "judge" else as_embedder(model)
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
    `ragbridge.adapters.ragas.names`); a provider other than the default is appended
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
    `ragbridge.adapters.ragas.runner.evaluate` keeps both next to RAGAS's result.

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
        converted = sample_from_row(row, 0, None, _ROW_ID, f"RAGAS row for {self.name}")
        name = self.metric.name
        scores = await self._scorer().ascore(converted, only=[name], key=fingerprint(converted))
        score = scores[name]
        recorder = recorder_in(callbacks)
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


class MetricOptions(SettingsOptions, total=False):
    """`RagbridgeMetric`'s keywords: ragbridge's settings (``settings=`` or its fields one by
    one), RAGAS's spellings of the models (``llm=``, ``embeddings=``), the column's name."""

    settings: Settings | None
    llm: Any
    embeddings: Any
    name: str | None
    names: Names


def ragbridge_metric(metric: Metric | str, **options: Unpack[MetricOptions]) -> RagbridgeMetric:
    """``RagbridgeMetric(metric, ...)``: a ragbridge measure for ``ragas.evaluate``."""
    return RagbridgeMetric(metric, **options)


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
