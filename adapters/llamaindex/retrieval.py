"""LlamaIndex's ``RetrieverEvaluator``, with every number computed by ragbridge's ranking measures.

Why it looks the way it does:

* **A drop-in, not a look-alike.** `RagbridgeRetrieverEvaluator` *is* a LlamaIndex
  ``RetrieverEvaluator`` (a subclass): ``from_metric_names(metrics, retriever=...)``,
  ``evaluate``/``aevaluate(query, expected_ids)`` and results whose ``metric_vals_dict`` feeds
  the notebooks' ``display_results`` unchanged. What changes is where the numbers come from:
  `ragbridge.core.retrieval`, the vectorised kernels that agree with trec_eval, shared with
  every other front door of ragbridge. ``aevaluate_dataset``, which LlamaIndex 0.14.21 removed
  together with ``EmbeddingQAFinetuneDataset``, is kept: it reads that dataset's shape
  (``queries``, ``corpus``, ``relevant_docs``) from an object, a dict or its JSON file.
* **LlamaIndex's names give LlamaIndex's numbers.** Each of its metric names maps onto the
  trec_eval measure that equals it, per query, where ``n`` is the number of distinct ids the
  retriever returned (LlamaIndex 0.14, ``llama_index.core.evaluation.retrieval.metrics``):

  ============  ===================================  =========================================
  LlamaIndex    ragbridge / trec_eval                note
  ============  ===================================  =========================================
  hit_rate      ``hit_rate@n`` (success_n)           equal
  mrr           ``mrr`` (recip_rank)                 equal
  precision     ``precision@n`` (P_n)                |retrieved ∩ expected| / |retrieved|; P@k
                                                     of trec_eval divides by k even when fewer
                                                     than k came back: ask for ``precision@k``
  recall        ``recall@n`` (recall_n)              equal
  ap            ``average_precision`` (map)          equal
  ndcg          ``ndcg`` (trec_eval's uncut ndcg)    the ideal DCG counts *every* expected id,
                                                     not only k of them; ``ndcg@k`` (ndcg_cut_k)
                                                     is the cut form and is higher whenever more
                                                     ids are expected than were retrieved
  ============  ===================================  =========================================

  Any ragbridge measure name (``ndcg@5``, ``precision@10``, ``map@10``, ``r_precision``) is
  accepted next to them and keyed by that name. Where LlamaIndex's own classes differ: a
  repeated retrieved id counts once here (LlamaIndex counts it again in AP and NDCG, which can
  then exceed 1); a query labelled with no expected id (``[]``: a no-answer query) is
  *skipped* (its ``metric_dict`` is empty, and ``scores`` say why) where LlamaIndex raises; an
  empty retrieval scores 0 where it raises; the granular variants (``use_granular_hit_rate``,
  ``use_granular_mrr``) are not offered. ``expected_ids=None`` (no labels at all) raises
  LlamaIndex's own ValueError and message, as its evaluator and metrics do.
* **Ids that never match the labels are said out loud.** LlamaIndex compares *node* ids, so
  labels that name documents score a plausible 0.0 on every query. Here the contexts keep both
  ids in their metadata (`ragbridge.core.results.id_check`): when a node's ``ref_doc_id`` (or
  ``node_id``, with ``use_ref_doc_id=True``) holds a labelled id while no compared id does, the
  query raises `IdMismatchError` naming ``use_ref_doc_id=``; and when almost no query of a
  dataset matches its labels, ``aevaluate_dataset`` warns in one line (`IdMismatchWarning`)
  and keeps it in ``id_warnings``.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, field_validator

from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.id_check import IdCheck, IdMatch, match_ids, note_id_warnings
from ragbridge.core.retrieval import parse_measure, score_ranking
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync

from ._framework import (
    BaseRetrievalMetric,
    RetrievalEvalMode,
    RetrievalEvalResult,
    RetrievalMetricResult,
    RetrieverEvaluator,
)
from .reading import nodes_to_contexts

__all__ = [
    "LLAMAINDEX_METRICS",
    "IdMismatchError",
    "IdMismatchWarning",
    "RagbridgeRetrievalEvalResult",
    "RagbridgeRetrievalMetric",
    "RagbridgeRetrieverEvaluator",
    "evaluation_of",
    "qa_samples",
]

LLAMAINDEX_METRICS: Mapping[str, str] = {
    "hit_rate": "hit_rate@n",
    "mrr": "mrr",
    "precision": "precision@n",
    "recall": "recall@n",
    "ap": "average_precision",
    "ndcg": "ndcg",
}
"""LlamaIndex's retrieval metric names and the ragbridge measure that equals each (``n``: the
number of distinct ids retrieved for the query). See the module doc for the differences."""


_NO_IDS = "Retrieved ids and expected ids must be provided"
"""LlamaIndex's message for a metric or evaluator given no ids (its retrieval metrics raise
ValueError with it), kept word for word: code written for LlamaIndex may match on it."""


class IdMismatchError(ValueError):
    """The retrieved ids and the labels name different things (conclusive, from the nodes'
    metadata); the message names the argument that fixes it."""


class IdMismatchWarning(UserWarning):
    """Almost no query of a dataset retrieved an id its labels name."""


# --------------------------------------------------------------------------- metric


def _measure_name(name: str, retrieved: int) -> str:
    """The ragbridge measure a metric name stands for on a query that retrieved ``retrieved``
    distinct ids."""
    target = LLAMAINDEX_METRICS.get(name)
    if target is None:
        return parse_measure(name).name
    return target.replace("@n", f"@{max(retrieved, 1)}")


class RagbridgeRetrievalMetric(BaseRetrievalMetric):
    """One ranking measure as a LlamaIndex retrieval metric, computed by ragbridge.

    ``name`` is one of LlamaIndex's names (`LLAMAINDEX_METRICS`, same numbers as its own
    classes) or a ragbridge measure (``ndcg@5``, trec_eval's definition). It works inside
    LlamaIndex's own ``RetrieverEvaluator(metrics=[...])`` too; there it sees only ids, so the
    conclusive id check of `RagbridgeRetrieverEvaluator` (which reads the nodes) is not made.
    """

    name: str = Field(description="LlamaIndex metric name or ragbridge measure name")

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value in LLAMAINDEX_METRICS:
            return value
        try:
            measure = parse_measure(value)
        except ValueError as exc:
            raise ValueError(
                f"{exc}; or one of LlamaIndex's names: {', '.join(LLAMAINDEX_METRICS)}"
            ) from None
        if measure.is_count or measure.family == "no_answer":
            raise ValueError(f"{value!r} is not a per-query ranking measure")
        return value

    @property
    def metric_name(self) -> str:  # type: ignore[override]  # LlamaIndex keys results by it
        return self.name

    def measure_for(self, retrieved: int) -> str:
        """The ragbridge measure this metric computes on a query that retrieved ``retrieved``
        distinct ids."""
        return _measure_name(self.name, retrieved)

    def compute(
        self,
        query: str | None = None,
        expected_ids: list[str] | None = None,
        retrieved_ids: list[str] | None = None,
        expected_texts: list[str] | None = None,
        retrieved_texts: list[str] | None = None,
        **kwargs: Any,
    ) -> RetrievalMetricResult:
        if retrieved_ids is None or expected_ids is None:
            raise ValueError(_NO_IDS)
        sample = _sample(query or "", list(retrieved_ids), [], expected_ids, "query")
        measure = self.measure_for(len(dict.fromkeys(retrieved_ids)))
        score = score_ranking(sample, [measure])[measure]
        if score.value is None:
            raise ValueError(f"{self.name}: {score.reason or score.failure}")
        return _metric_result(measure, score)


def _metric_result(measure: str, score: Score) -> RetrievalMetricResult:
    meta: dict[str, Any] = {"measure": measure, "provider": "ragbridge"}
    if score.reason:
        meta["reason"] = score.reason
    assert score.value is not None
    return RetrievalMetricResult(score=score.value, metadata=meta)


def _sample(
    query: str,
    ids: Sequence[str],
    contexts: Sequence[Context],
    expected_ids: Iterable[str],
    sample_id: str,
) -> Sample:
    return Sample(
        id=sample_id,
        question=query,
        contexts=list(contexts) or [Context(text="", id=i) for i in ids],
        relevance=dict.fromkeys(expected_ids, 1),
    )


# --------------------------------------------------------------------------- evaluator


class RagbridgeRetrievalEvalResult(RetrievalEvalResult):
    """LlamaIndex's `RetrievalEvalResult`, plus the ragbridge `Score` behind each metric (with
    its reason, the measure's trec_eval name in ``metric_dict[...].metadata``) and the `Sample`
    scored. A metric that was skipped (no expected id) is absent from ``metric_dict``."""

    query_id: str | None = None
    scores: dict[str, Score] = Field(default_factory=dict)
    sample: Sample | None = None


class RagbridgeRetrieverEvaluator(RetrieverEvaluator):
    """LlamaIndex's ``RetrieverEvaluator`` computed by ragbridge (see the module doc).

    ``RagbridgeRetrieverEvaluator.from_metric_names(["hit_rate", "mrr", "ndcg"],
    retriever=retriever)`` in place of LlamaIndex's own. Ids are node ids, as LlamaIndex compares
    them; ``use_ref_doc_id=True`` compares the source documents' ids instead (labels on
    documents that were split into chunks). ``metrics`` may also hold LlamaIndex's own metric
    objects (Cohere rerank relevancy, ...), which are computed as LlamaIndex computes them.
    """

    use_ref_doc_id: bool = Field(
        default=False, description="compare document ids (ref_doc_id) instead of node ids"
    )
    _id_warnings: list[str] = PrivateAttr(default_factory=list)

    @classmethod
    def from_metric_names(
        cls, metric_names: list[str], **kwargs: Any
    ) -> RagbridgeRetrieverEvaluator:
        """An evaluator of ``metric_names``: LlamaIndex's (``hit_rate``, ``mrr``,
        ``precision``, ``recall``, ``ap``, ``ndcg``) or ragbridge's (``ndcg@5``, ...)."""
        return cls(metrics=[RagbridgeRetrievalMetric(name=n) for n in metric_names], **kwargs)

    @property
    def id_warnings(self) -> list[str]:
        """The run-level id warning of the last `aevaluate_dataset` (0 or 1 line)."""
        return list(self._id_warnings)

    async def aevaluate(
        self,
        query: str,
        expected_ids: list[str],
        expected_texts: list[str] | None = None,
        mode: RetrievalEvalMode = RetrievalEvalMode.TEXT,
        **kwargs: Any,
    ) -> RagbridgeRetrievalEvalResult:
        """Retrieve for ``query`` and score every metric against ``expected_ids``.

        Raises `IdMismatchError` when the nodes show that the ids compared and the labels name
        different things (documents vs nodes); a genuine miss scores 0. ``expected_ids=None``
        raises LlamaIndex's ValueError, with its message, as its evaluator does.
        """
        if expected_ids is None:
            raise ValueError(_NO_IDS)
        nodes = await self.retriever.aretrieve(query)
        for post in self.node_postprocessors or []:
            nodes = post.postprocess_nodes(nodes, query_str=query)
        contexts = nodes_to_contexts(nodes, use_ref_doc_id=self.use_ref_doc_id)
        query_id = kwargs.get("query_id")
        sample = _sample(query, [], contexts, expected_ids, str(query_id or query))
        match = match_ids(sample.contexts, sample.relevance or {})
        if match.metadata_key is not None:
            raise IdMismatchError(self._mismatch(query, match))
        ids = [c.id or "" for c in sample.contexts]
        distinct = len(dict.fromkeys(ids))
        ours = [m for m in self.metrics if isinstance(m, RagbridgeRetrievalMetric)]
        wanted = list(dict.fromkeys(m.measure_for(distinct) for m in ours))
        computed = score_ranking(sample, wanted) if wanted else {}
        metric_dict: dict[str, RetrievalMetricResult] = {}
        scores: dict[str, Score] = {}
        for metric in self.metrics:
            if isinstance(metric, RagbridgeRetrievalMetric):
                measure = metric.measure_for(distinct)
                score = computed[measure]
                scores[metric.metric_name] = score
                if score.value is not None:
                    metric_dict[metric.metric_name] = _metric_result(measure, score)
            else:  # one of LlamaIndex's own metrics, computed as LlamaIndex computes it
                metric_dict[metric.metric_name] = metric.compute(
                    query, expected_ids, ids, expected_texts, [c.text for c in sample.contexts]
                )
        return RagbridgeRetrievalEvalResult(
            query=query,
            query_id=None if query_id is None else str(query_id),
            expected_ids=list(expected_ids),
            expected_texts=expected_texts,
            retrieved_ids=ids,
            retrieved_texts=[c.text for c in sample.contexts],
            mode=mode,
            metric_dict=metric_dict,
            scores=scores,
            sample=sample,
        )

    def evaluate(
        self,
        query: str,
        expected_ids: list[str],
        expected_texts: list[str] | None = None,
        mode: RetrievalEvalMode = RetrievalEvalMode.TEXT,
        **kwargs: Any,
    ) -> RagbridgeRetrievalEvalResult:
        """Sync `aevaluate`; safe inside a running event loop (Jupyter) without nest_asyncio."""
        coro = self.aevaluate(query, expected_ids, expected_texts, mode, **kwargs)
        return run_sync(coro)

    def _mismatch(self, query: str, match: IdMatch) -> str:
        compared = "document ids (ref_doc_id)" if self.use_ref_doc_id else "node ids"
        head = (
            f"query {query!r}: none of the {match.retrieved} retrieved {compared} "
            f"(e.g. {match.retrieved_example!r}) is a labelled id (e.g. {match.label_example!r})"
        )
        key = match.metadata_key
        if key == "ref_doc_id":
            return (
                f"{head}, but the nodes' ref_doc_id holds labelled ids: the labels name "
                "documents — pass use_ref_doc_id=True (LlamaIndex's own RetrieverEvaluator "
                "compares node ids and reports 0.0 here)"
            )
        if key == "node_id":
            return (
                f"{head}, but the nodes' node_id holds labelled ids: the labels name nodes — "
                "pass use_ref_doc_id=False (the default)"
            )
        return (
            f"{head}, but the nodes' metadata[{key!r}] holds labelled ids: label node ids (or "
            f"document ids with use_ref_doc_id=True), or give each node that value as its id "
            f"(node.id_ = node.metadata[{key!r}]) before indexing"
        )

    async def aevaluate_dataset(
        self,
        dataset: Any,
        workers: int = 2,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> list[RagbridgeRetrievalEvalResult]:
        """Evaluate every query of ``dataset``, at most ``workers`` at a time, in its order.

        ``dataset``: an ``EmbeddingQAFinetuneDataset`` (or any object with ``queries`` and
        ``relevant_docs``), the same as a dict or its JSON file's path, or ragbridge `Sample`s
        with ``relevance``. Warns once (`IdMismatchWarning`, kept in ``id_warnings``) when
        almost no query retrieved a labelled id.
        """
        if workers < 1:
            raise ValueError("workers must be >= 1")
        items = _qa_items(dataset)
        gate = asyncio.Semaphore(workers)

        async def one(qid: str, query: str, expected: list[str]) -> RagbridgeRetrievalEvalResult:
            async with gate:
                return await self.aevaluate(query, expected, query_id=qid, **kwargs)

        results = list(await asyncio.gather(*(one(*item) for item in items)))
        self._id_warnings = _dataset_warnings(results, self.use_ref_doc_id)
        for line in self._id_warnings:
            warnings.warn(line, IdMismatchWarning, stacklevel=2)
        return results

    def evaluate_dataset(
        self, dataset: Any, workers: int = 2, show_progress: bool = False, **kwargs: Any
    ) -> list[RagbridgeRetrievalEvalResult]:
        """Sync `aevaluate_dataset`; safe inside a running event loop."""
        return run_sync(self.aevaluate_dataset(dataset, workers, show_progress, **kwargs))


def _dataset_warnings(results: Sequence[RagbridgeRetrievalEvalResult], by_doc: bool) -> list[str]:
    check = IdCheck()
    example: tuple[str | None, str | None] | None = None
    for result in results:
        sid = result.sample.id if result.sample is not None else result.query
        check.add_scores(sid, result.scores.values())
        for score in result.scores.values():
            info = score.details.get("id_mismatch") if isinstance(score.details, dict) else None
            if example is None and isinstance(info, dict):
                example = (info.get("retrieved"), info.get("labelled"))
    if check.warning() is None or example is None:
        return []
    compared = "document ids (ref_doc_id)" if by_doc else "node ids"
    other = "node ids: pass use_ref_doc_id=False" if by_doc else "documents: use_ref_doc_id=True"
    return [
        f"ranking measures: {check.mismatched} of {check.labelled} queries retrieved no labelled "
        f"id (e.g. retrieved {example[0]!r} vs labelled {example[1]!r}) — the evaluator "
        f"compares {compared}; label those, or, for labels naming {other}"
    ]


# --------------------------------------------------------------------------- datasets


def _qa_items(dataset: Any) -> list[tuple[str, str, list[str]]]:
    """``(query id, query, expected ids)`` from any of the dataset shapes `aevaluate_dataset`
    accepts, in the dataset's order."""
    if isinstance(dataset, (str, os.PathLike)):
        dataset = json.loads(Path(dataset).read_text(encoding="utf-8"))
    if isinstance(dataset, Mapping):
        queries, relevant = dataset.get("queries"), dataset.get("relevant_docs")
    else:
        queries = getattr(dataset, "queries", None)
        relevant = getattr(dataset, "relevant_docs", None)
    if isinstance(queries, Mapping) and isinstance(relevant, Mapping):
        return [
            (str(q), str(text), [str(i) for i in relevant.get(q, [])])
            for q, text in queries.items()
        ]
    if queries is not None or relevant is not None:
        raise TypeError("a QA dataset needs 'queries' and 'relevant_docs' mappings")
    items: list[tuple[str, str, list[str]]] = []
    for sample in dataset:
        if not isinstance(sample, Sample):
            raise TypeError(
                "dataset must be an EmbeddingQAFinetuneDataset-like object (queries, "
                f"relevant_docs), its dict or JSON path, or Samples; got {type(sample).__name__}"
            )
        if sample.relevance is None:
            raise ValueError(f"sample {sample.id!r} has no relevance labels (relevance is null)")
        expected = [doc for doc, grade in sample.relevance.items() if grade >= 1]
        items.append((sample.id, sample.question, expected))
    return items


def qa_samples(dataset: Any) -> list[Sample]:
    """An ``EmbeddingQAFinetuneDataset``-shaped dataset (object, dict or JSON path) as labelled
    `Sample`s (relevance 1 per expected id), for `run_retriever` and `ragbridge.core.evaluate`."""
    return [
        Sample(id=qid, question=query, relevance=dict.fromkeys(expected, 1))
        for qid, query, expected in _qa_items(dataset)
    ]


def evaluation_of(results: Iterable[RetrievalEvalResult]) -> Evaluation:
    """The ragbridge scores of `RagbridgeRetrieverEvaluator` results as an `Evaluation`
    (``summary()`` with bootstrap CIs, ``to_jsonl``, the report), with the run-level id warning
    in ``metadata["warnings"]`` when almost no query matched its labels."""
    rows: list[tuple[str, str, Score]] = []
    for result in results:
        if not isinstance(result, RagbridgeRetrievalEvalResult):
            raise TypeError("evaluation_of reads RagbridgeRetrieverEvaluator results")
        sid = result.query_id or result.query
        rows.extend((sid, name, score) for name, score in result.scores.items())
    return note_id_warnings(Evaluation(rows))
