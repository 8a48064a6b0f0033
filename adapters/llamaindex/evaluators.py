"""ragbridge metrics inside LlamaIndex: as ``BaseEvaluator``s, and on every query as it happens.

Why it looks the way it does:

* **One metric per evaluator, one judge engine per group.** LlamaIndex's convention is one
  evaluator per measure (``BatchEvalRunner(evaluators={"faithfulness": ..., ...})``), but
  ragbridge's claim metrics share work: faithfulness, hallucination and answer relevance read
  the same extracted claims. `evaluators_for` therefore builds one `Scorer` (one judge engine,
  cache and concurrency cap) for several evaluators, and each evaluator asks it for its own
  metric of the sample (``scorer.ascore(sample, only=[name])``): the Scorer keeps one record
  per sample content, so each shared sub-result (claim extraction, claim verification, the
  combined context assessment) is computed once, exactly as in `ragbridge.core.evaluate`,
  whichever evaluator, thread or event loop asks first. A group costs what the metrics
  actually asked for — never more judge calls than `Scorer(all metrics)` on that sample, and
  fewer than separate evaluators (which repeat the shared calls; under ``BatchEvalRunner``
  they run at the same time and both miss the cache). The Scorer's records are bounded (see
  `ragbridge.core.scoring.scorer`).
* **Source nodes keep their ids.** ``BaseEvaluator.evaluate_response`` flattens
  ``response.source_nodes`` to strings; here it is overridden so contexts keep the source
  document id (``node.ref_doc_id``) and the retriever score, and ranking measures
  (``recall@5``, ``mrr``) work on ``relevance=`` passed through ``BatchEvalRunner``'s
  ``eval_kwargs``.
* **A failure is not a low score.** A ragbridge failure becomes ``invalid_result=True`` with the
  failure message as ``invalid_reason`` and no score or passing verdict; a skip (a measure that
  does not apply) is reported the same way with ``invalid_reason="skipped: ..."``. The
  evaluator never raises for a judge problem — which matters because ``BatchEvalRunner`` retries
  a raising evaluator three times with 4-10 s waits. Bad *input* (a context that is not text)
  raises, naming the query and the field.
* **Passing reads the metric's direction.** ``passing = score >= threshold``, except for measures
  of harm (hallucination, ``Metric.higher_is_better = False``), where
  ``passing = score <= threshold``.
* **Live scoring never touches the user's query.** `score_queries` listens to the same
  root-dispatcher handlers as `RetrievalCapture` (it *is* a capture, with a hook on the end of
  each top-level query). When a query ends, the handler builds the sample (question, answer,
  the response's source nodes, or the retrievals captured under that query's span when the
  engine reports none) and hands it to a background thread with its own event loop; it does
  not wait. The dispatcher swallows handler exceptions silently, so every error is recorded
  instead (as failure rows or in ``errors``). Retrievals are kept only while their query is
  open, so a long-running process holds no history beyond the samples it scored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from pydantic import ValidationError
from typing_extensions import Unpack

from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.background import BackgroundScoring
from ragbridge.core.scoring.runner import resolve_metrics, run_sync
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import (
    BaseChatEngine,
    BaseEvaluator,
    BaseEvent,
    BaseNode,
    EvaluationResult,
    NodeWithScore,
    PromptDictType,
    PromptMixinType,
    QueryEndEvent,
    RetrievalEndEvent,
    active_instrument_tags,
)
from .capture import SAMPLE_TAG, CapturedRetrieval, RetrievalCapture, note_rewritten_query
from .defaults import llamaindex_models, model_aliases
from .reading import (
    Unscorable,
    answer_of,
    contexts_from,
    node_to_context,
    query_text,
    source_nodes,
)

__all__ = [
    "LLAMAINDEX_PASSING",
    "LiveOptions",
    "LiveScoring",
    "RagbridgeEvaluationResult",
    "RagbridgeEvaluator",
    "evaluators_for",
    "score_queries",
]


# --------------------------------------------------------------------------- shared pieces


def _lower_is_better(metric: Metric) -> bool:
    return not metric.higher_is_better


LLAMAINDEX_PASSING: Mapping[str, float] = MappingProxyType(
    {"faithfulness": 1.0, "hallucination": 0.0}
)
"""Thresholds under which ragbridge's graded claim measures pass exactly when LlamaIndex's
``FaithfulnessEvaluator`` passes (``passing="llamaindex"``).

LlamaIndex asks its judge one YES/NO question about the whole response against the contexts,
so one unsupported statement fails it. ragbridge scores the share of claims the contexts
support; with the same verdict per claim, LlamaIndex's YES is "every claim supported":
faithfulness == 1.0, i.e. hallucination == 0.0. Any threshold above the best partial score
would do on one sample; 1.0 is the only one that does on every sample. Two ways the verdicts can
still part: an answer with no claims (an abstention) is *skipped* here with its reason, while
LlamaIndex asks its judge anyway; and contexts longer than one LLM window are judged chunk by
chunk by LlamaIndex's refine step, so a response whose claims are supported by different
chunks gets NO there and 1.0 here.
"""

Passing = Literal["llamaindex"]


def _passing_threshold(name: str, passing: str) -> float:
    if passing != "llamaindex":
        raise ValueError(f"passing={passing!r} is not a preset; the one preset is 'llamaindex'")
    if name not in LLAMAINDEX_PASSING:
        known = ", ".join(LLAMAINDEX_PASSING)
        raise ValueError(
            f"passing='llamaindex' has no verdict for {name!r}: LlamaIndex's all-or-nothing "
            f"verdict is reproduced for {known}; give threshold= instead"
        )
    return LLAMAINDEX_PASSING[name]


# --------------------------------------------------------------------------- evaluator


def _with_warnings(text: str, score: Score, scorer: Scorer) -> str:
    """A ranking score's feedback plus the run-level warnings (ids that never match labels)."""
    if score.provider != "retrieval":
        return text
    return "\n".join([text, *(f"warning: {line}" for line in scorer.warnings)])


class RagbridgeEvaluationResult(EvaluationResult):
    """LlamaIndex's `EvaluationResult`, plus the ragbridge metric, `Score` and `Sample` behind
    it (usage, per-claim details, context ids)."""

    metric: str | None = None
    ragbridge_score: Score | None = None
    sample: Sample | None = None


def _to_contexts(items: Any, where: str, use_ref_doc_id: bool) -> list[Context]:
    if isinstance(items, str):
        raise TypeError(f"{where}: contexts must be a list of texts, not a single string")
    out: list[Context] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append(Context(text=item))
        elif isinstance(item, Context):
            out.append(item)
        elif isinstance(item, NodeWithScore):
            out.append(node_to_context(item, use_ref_doc_id=use_ref_doc_id))
        elif isinstance(item, BaseNode):
            out.append(node_to_context(NodeWithScore(node=item), use_ref_doc_id=use_ref_doc_id))
        else:
            raise TypeError(
                f"{where}: contexts[{i}] must be a str, Context, NodeWithScore or node, "
                f"got {type(item).__name__}"
            )
    return out


class RagbridgeEvaluator(BaseEvaluator):
    """One ragbridge metric as a LlamaIndex evaluator.

    ``RagbridgeEvaluator("faithfulness", judge=judge)`` builds its own `Scorer`;
    ``RagbridgeEvaluator("hallucination", scorer=scorer)`` scores through a shared one (and its
    per-sample memo; see `evaluators_for`). ``threshold`` (default 0.5) decides ``passing``: a
    score at or above it passes, or at or below it for measures where lower is better
    (hallucination). ``passing="llamaindex"`` instead passes exactly when LlamaIndex's own
    evaluator would (`LLAMAINDEX_PASSING`: faithfulness 1.0, every claim supported).
    ``use_ref_doc_id`` names contexts from source nodes by document (default) or node id.
    ``llm=`` and ``embed_model=`` are LlamaIndex's names for ``judge=`` and ``embedder=``; given
    neither, LlamaIndex's ``Settings.llm`` / ``Settings.embed_model`` are used as LlamaIndex's
    own evaluators use them, and a model needed and found nowhere is refused here, at
    construction (`ragbridge.adapters.llamaindex.defaults`).
    """

    def __init__(
        self,
        metric: Metric | str,
        *,
        threshold: float | None = None,
        passing: Passing | None = None,
        scorer: Scorer | None = None,
        use_ref_doc_id: bool = True,
        settings: Settings | None = None,
        llm: Any = None,
        embed_model: Any = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if threshold is not None and passing is not None:
            raise ValueError("pass threshold= or passing=, not both")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie within [0, 1], got {threshold!r}")
        options = model_aliases(options, llm, embed_model)
        # "faithfulness:offline" names the metric "faithfulness": resolve before looking it up.
        resolved = metric if isinstance(metric, Metric) else resolve_metrics([metric])[0]
        name = resolved.name
        if passing is not None:  # a wrong argument is said before a missing model
            threshold = _passing_threshold(name, passing)
        if scorer is None:
            metrics, options = llamaindex_models([resolved], settings, options)
            scorer = Scorer(metrics, settings=settings, **options)
        elif settings is not None or options:
            given = ", ".join(["settings", *options] if settings is not None else list(options))
            raise ValueError(f"pass either scorer=... or {given}, not both")
        if name not in scorer.names:
            raise ValueError(f"metric {name!r} is not one of the scorer's {scorer.names}")
        self.scorer = scorer
        self.metric = scorer.metrics[scorer.names.index(name)]
        self.threshold = 0.5 if threshold is None else float(threshold)
        self.use_ref_doc_id = use_ref_doc_id

    @property
    def metric_name(self) -> str:
        return self.metric.name

    @property
    def lower_is_better(self) -> bool:
        return _lower_is_better(self.metric)

    def __repr__(self) -> str:
        return f"RagbridgeEvaluator({self.metric_name!r}, threshold={self.threshold})"

    # -- PromptMixin: ragbridge prompts are versioned templates, not LlamaIndex prompts
    def _get_prompts(self) -> PromptDictType:
        return {}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        return None

    # -- evaluation
    def sample_of(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        *,
        reference: str | None = None,
        reference_contexts: Sequence[str] | None = None,
        relevance: Mapping[str, int] | None = None,
        sample_id: str | None = None,
    ) -> Sample:
        """The `Sample` `aevaluate` scores (contexts from strings, `Context`s or nodes)."""
        where = f"{self.metric_name} evaluator, query {query!r}"
        if query is not None and not isinstance(query, str):
            raise TypeError(f"{where}: query must be a str, got {type(query).__name__}")
        if response is not None and not isinstance(response, str):
            raise TypeError(f"{where}: response must be a str, got {type(response).__name__}")
        ctxs = _to_contexts(contexts or [], where, self.use_ref_doc_id)
        data: dict[str, Any] = {
            "id": sample_id or "llamaindex",
            "question": query or "",
            "answer": response,
            "contexts": ctxs,
            "reference": reference,
            "reference_contexts": list(reference_contexts) if reference_contexts else None,
            "relevance": dict(relevance) if relevance is not None else None,
        }
        try:
            return Sample.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            msg = str(first["msg"]).removeprefix("Value error, ")
            raise ValueError(f"{where}: {loc}: {msg}") from exc

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        *,
        reference: str | None = None,
        reference_contexts: Sequence[str] | None = None,
        relevance: Mapping[str, int] | None = None,
        sample_id: str | None = None,
        **kwargs: Any,
    ) -> RagbridgeEvaluationResult:
        """Score the metric on (query, response, contexts). Other keyword arguments are ignored,
        as LlamaIndex evaluators do (``BatchEvalRunner`` hands every evaluator the same ones)."""
        sample = self.sample_of(
            query,
            response,
            contexts,
            reference=reference,
            reference_contexts=reference_contexts,
            relevance=relevance,
            sample_id=sample_id,
        )
        # One record per sample content: the evaluators of one `Scorer` share its sub-results.
        scores = await self.scorer.ascore(sample, only=[self.metric_name])
        return self.result_of(sample, scores[self.metric_name])

    def result_of(self, sample: Sample, score: Score) -> RagbridgeEvaluationResult:
        """A ragbridge `Score` as LlamaIndex's result."""
        common: dict[str, Any] = {
            "query": sample.question,
            "contexts": [c.text for c in sample.contexts],
            "response": sample.answer,
            "feedback": _with_warnings(explain(score), score, self.scorer),
            "metric": self.metric_name,
            "ragbridge_score": score,
            "sample": sample,
        }
        if score.failure is not None:
            return RagbridgeEvaluationResult(
                **common, invalid_result=True, invalid_reason=score.failure.message
            )
        if score.value is None:
            return RagbridgeEvaluationResult(
                **common, invalid_result=True, invalid_reason=f"skipped: {score.reason}"
            )
        if self.lower_is_better:
            passing = score.value <= self.threshold
        else:
            passing = score.value >= self.threshold
        return RagbridgeEvaluationResult(**common, score=score.value, passing=passing)

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> RagbridgeEvaluationResult:
        """Sync form; safe inside a running event loop (the scoring then uses a worker thread)."""
        return run_sync(self.aevaluate(query=query, response=response, contexts=contexts, **kwargs))

    async def aevaluate_response(
        self, query: str | None = None, response: Any | None = None, **kwargs: Any
    ) -> RagbridgeEvaluationResult:
        """Score a query engine's response; its source nodes become contexts with ids."""
        answer: str | None = None
        nodes: list[Any] | None = None
        if response is not None:
            try:
                answer = answer_of(response)
            except Unscorable as exc:
                raise ValueError(
                    f"{self.metric_name} evaluator, query {query!r}: response: {exc}; "
                    "consume it first (response.get_response())"
                ) from exc
            nodes = source_nodes(response)
        return await self.aevaluate(query=query, response=answer, contexts=nodes, **kwargs)

    def evaluate_response(
        self, query: str | None = None, response: Any | None = None, **kwargs: Any
    ) -> RagbridgeEvaluationResult:
        return run_sync(self.aevaluate_response(query=query, response=response, **kwargs))


def evaluators_for(
    metrics: Iterable[Metric | str],
    *,
    threshold: float = 0.5,
    thresholds: Mapping[str, float] | None = None,
    passing: Passing | None = None,
    use_ref_doc_id: bool = True,
    settings: Settings | None = None,
    llm: Any = None,
    embed_model: Any = None,
    **options: Unpack[SettingsOptions],
) -> dict[str, RagbridgeEvaluator]:
    """One evaluator per metric, keyed by metric name, sharing one `Scorer` and a per-sample
    memo: ready for ``BatchEvalRunner(evaluators=evaluators_for([...], judge=...))``.

    Shared sub-results (claims, their verification) are computed once per sample whichever
    evaluator asks first. ``thresholds`` overrides ``threshold`` per metric name;
    ``passing="llamaindex"`` sets the metrics LlamaIndex has an all-or-nothing verdict for
    (`LLAMAINDEX_PASSING`) to that verdict's threshold. ``llm=``/``embed_model=`` are
    LlamaIndex's names for ``judge=``/``embedder=``, with ``Settings.llm`` /
    ``Settings.embed_model`` read as in `RagbridgeEvaluator`.
    """
    resolved, models = llamaindex_models(
        metrics, settings, model_aliases(options, llm, embed_model)
    )
    scorer = Scorer(resolved, settings=settings, **models)
    chosen = dict(thresholds or {})
    unknown = sorted(set(chosen) - set(scorer.names))
    if unknown:
        raise ValueError(f"thresholds name unknown metrics {unknown}; metrics: {scorer.names}")
    if passing is not None:
        preset = {
            n: _passing_threshold(n, passing) for n in scorer.names if n in LLAMAINDEX_PASSING
        }
        if not preset:
            _passing_threshold(scorer.names[0], passing)  # raises, naming what it covers
        both = sorted(set(preset) & set(chosen))
        if both:
            raise ValueError(f"thresholds and passing= both set {both}: pass one")
        chosen.update(preset)
    return {
        name: RagbridgeEvaluator(
            name,
            scorer=scorer,
            threshold=chosen.get(name, threshold),
            use_ref_doc_id=use_ref_doc_id,
        )
        for name in scorer.names
    }


# --------------------------------------------------------------------------- live scoring


class _LiveCapture(RetrievalCapture):
    """A capture that keeps retrievals only while their top-level call is open, and tells its
    `LiveScoring` when a top-level query ends."""

    def __init__(self, live: LiveScoring) -> None:
        super().__init__(use_ref_doc_id=live.use_ref_doc_id)
        self._live = live
        self._by_root: dict[str, list[CapturedRetrieval]] = {}

    def _event(self, event: BaseEvent) -> None:
        try:
            if self._live.on_worker_thread():
                return  # the judge's own LLM calls, made while scoring
            with self._lock:
                if not self._active:
                    return
                root = self._root_of(event.span_id)
                if root is None:
                    return  # outside any span: nothing to attribute it to
                if isinstance(event, RetrievalEndEvent):
                    self._by_root.setdefault(root, []).append(
                        CapturedRetrieval.of_event(
                            event,
                            root_span_id=root,
                            tags=dict(event.tags),
                            use_ref_doc_id=self.use_ref_doc_id,
                        )
                    )
                    return
                if not isinstance(event, QueryEndEvent) or root != event.span_id:
                    return  # only the user's own (outermost) query call is scored
                retrievals = self._by_root.pop(root, [])
            self._live._query_ended(event, root, retrievals)
        except Exception as exc:  # the dispatcher would swallow it silently
            self._live.note_error(f"query end handling failed: {type(exc).__name__}: {exc}")

    def _span_result(self, id_: str, bound_args: Any, instance: Any, result: Any) -> None:
        # A chat engine emits no query end: its top-level chat call is seen as it returns.
        try:
            if not isinstance(instance, BaseChatEngine) or self._live.on_worker_thread():
                return
            with self._lock:
                if not self._active or self._roots.get(id_) != id_:
                    return  # a chat inside the user's own span, or a nested call
                retrievals = self._by_root.pop(id_, [])
            self._live._chat_ended(id_, bound_args, instance, result, retrievals)
        except Exception as exc:  # the dispatcher would swallow it silently
            self._live.note_error(f"chat end handling failed: {type(exc).__name__}: {exc}")

    def _span_exit(self, id_: str) -> None:
        with self._lock:
            if self._roots.get(id_) == id_:
                self._by_root.pop(id_, None)
            self._roots.pop(id_, None)

    def close(self) -> None:
        super().close()
        with self._lock:
            self._by_root.clear()


class LiveOptions(SettingsOptions, total=False):
    """`LiveScoring`'s keyword arguments, which `score_queries` passes on to it:
    ``**options: Unpack[LiveOptions]``."""

    sample_rate: float
    seed: int | None
    id_tag: str | None
    use_ref_doc_id: bool
    max_pending: int
    close_timeout: float | None
    llm: Any
    embed_model: Any


class LiveScoring(BackgroundScoring):
    """Scores every top-level query a LlamaIndex query engine or chat engine answers while it
    is open.

    Build it with `score_queries`. Each query that ends is sampled with probability
    ``sample_rate`` (``seed`` makes the choice reproducible); a sampled query becomes a `Sample`
    (``samples``) scored in a background thread; its scores land in ``evaluation``. ``seen``
    counts the queries observed, ``skipped`` those not sampled, ``dropped`` those refused because
    ``max_pending`` were already waiting, ``scored`` those whose scores are recorded, and
    ``pending`` those still being scored. ``close`` (or leaving the ``with`` block) stops
    listening, waits for pending scoring (up to ``close_timeout``; what is left is recorded as
    ``cancelled`` failures) and stops the worker (`ragbridge.core.scoring.background`).

    Sample ids come from the ``id_tag`` instrument tag when the query ran under
    ``instrument_tags({id_tag: ...})``, else ``"query-<n>"`` in the order queries ended.
    Only the outermost call is scored (a router's sub-queries, a query-engine tool inside an
    agent, the query a ``condense_question`` chat engine makes are not). A chat engine's turn
    (``chat``/``achat`` of ``as_chat_engine(chat_mode="context")``, ``"condense_plus_context"``,
    ...) emits no query end; it is read when the call returns: the user's message is the
    question (``metadata["retrieval_query"]`` holds the rewritten one when the engine
    retrieved with another), the reply the answer, its ``source_nodes`` the contexts. A
    streamed chat (``stream_chat``) is skipped with its reason, like a streamed query. A
    ``CustomQueryEngine`` overrides ``query`` without instrumentation and is not scored;
    subclass ``BaseQueryEngine`` instead, or run it through `run_query_engine` and score the
    samples. Read ``evaluation`` and ``samples`` after `wait` or `close`.
    """

    def __init__(
        self,
        metrics: Iterable[Metric | str],
        *,
        sample_rate: float = 1.0,
        seed: int | None = None,
        id_tag: str | None = SAMPLE_TAG,
        use_ref_doc_id: bool = True,
        max_pending: int = 1000,
        close_timeout: float | None = None,
        settings: Settings | None = None,
        llm: Any = None,
        embed_model: Any = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        resolved, models = llamaindex_models(
            metrics, settings, model_aliases(options, llm, embed_model)
        )
        super().__init__(
            Scorer(resolved, settings=settings, **models),
            sample_rate=sample_rate,
            seed=seed,
            max_pending=max_pending,
            close_timeout=close_timeout,
            id_prefix="query-",
            thread_name="ragbridge-live",
        )
        self.id_tag = id_tag
        self.use_ref_doc_id = use_ref_doc_id
        self._capture = _LiveCapture(self)

    def _start_listening(self) -> None:
        self._capture.open()

    def _stop_listening(self) -> None:
        self._capture.close()

    # -- called from the dispatcher (the user's thread or task): quick, never raises
    def _query_ended(
        self, event: QueryEndEvent, root: str, retrievals: list[CapturedRetrieval]
    ) -> None:
        tags = dict(event.tags)
        sample_id = self.admit(tags.get(self.id_tag) if self.id_tag else None)
        if sample_id is None:
            return
        self._score_read(
            sample_id,
            _safe_query(event),
            root,
            lambda: self._read_reply(
                sample_id,
                query_text(event.query),
                event.response,
                _live_meta(root, tags, retrievals),
                retrievals,
            ),
            "the query",
        )

    def _score_read(
        self,
        sample_id: str,
        question: str,
        root: str,
        read: Callable[[], tuple[Sample, str | None]],
        what: str,
    ) -> None:
        """Submit what ``read`` builds; settle a skip, or an unreadable reply as a failure."""
        try:
            sample, skip = read()
        except Exception as exc:
            sample = Sample(id=sample_id, question=question, metadata={"span_id": root})
            message = f"could not read {what}: {type(exc).__name__}: {exc}"
            failure = Score.fail(FailureKind.INVALID_INPUT, message)
            self.settle(sample, dict.fromkeys(self.scorer.names, failure))
            return
        if skip is not None:
            self.settle(sample, {n: Score.skip(skip) for n in self.scorer.names})
            return
        self.submit(sample)

    def _chat_ended(
        self,
        root: str,
        bound_args: Any,
        instance: Any,
        result: Any,
        retrievals: list[CapturedRetrieval],
    ) -> None:
        tags = dict(active_instrument_tags.get())
        sample_id = self.admit(tags.get(self.id_tag) if self.id_tag else None)
        if sample_id is None:
            return
        arguments = dict(getattr(bound_args, "arguments", None) or {})
        message = arguments.get("message")
        question = message if isinstance(message, str) else str(message or "")
        meta = _live_meta(root, tags, retrievals, engine=type(instance).__name__)
        note_rewritten_query(meta, retrievals, question)
        self._score_read(
            sample_id,
            question,
            root,
            lambda: self._read_reply(sample_id, question, result, meta, retrievals),
            "the chat reply",
        )

    def _read_reply(
        self,
        sample_id: str,
        question: str,
        response: Any,
        meta: dict[str, Any],
        retrievals: list[CapturedRetrieval],
    ) -> tuple[Sample, str | None]:
        """The sample of one answered call, and why it is skipped (a stream the caller reads):
        the answer, and the response's source nodes (else the retrievals under its call)."""
        skip: str | None = None
        try:
            answer = answer_of(response)
        except Unscorable as exc:
            answer, skip = None, str(exc)
        source = source_nodes(response)
        contexts = contexts_from(source, retrievals, use_ref_doc_id=self.use_ref_doc_id)
        if not source and contexts:
            meta["contexts_from"] = "instrumentation"
        sample = Sample(
            id=sample_id, question=question, answer=answer, contexts=contexts, metadata=meta
        )
        return sample, skip


def _live_meta(
    root: str, tags: dict[str, Any], retrievals: list[CapturedRetrieval], engine: str | None = None
) -> dict[str, Any]:
    """What a live sample's metadata says of its call: the span, how many retrievals, the chat
    engine, and the instrument tags that are plain values."""
    meta: dict[str, Any] = {"span_id": root, "retrievals": len(retrievals)}
    if engine is not None:
        meta["engine"] = engine
    plain = {k: v for k, v in tags.items() if isinstance(v, (str, int, float, bool))}
    if plain:
        meta["tags"] = plain
    return meta


def _safe_query(event: QueryEndEvent) -> str:
    try:
        return query_text(event.query)
    except Exception:
        return ""


def score_queries(
    metrics: Iterable[Metric | str],
    *,
    settings: Settings | None = None,
    **options: Unpack[LiveOptions],
) -> LiveScoring:
    """Score the queries LlamaIndex query engines and chat engines answer from now on, in the
    background.

    ``with score_queries(["faithfulness"], judge=judge, sample_rate=0.1) as live:
    engine.query(...)`` → ``live.evaluation``. Returns an open `LiveScoring`; use it as a
    (sync or async) context manager, or call ``close()``. See `LiveScoring` for the counters.
    ``options`` are `LiveScoring`'s keywords, with its defaults (`LiveOptions`); ``llm=``/
    ``embed_model=`` are LlamaIndex's names for ``judge=``/``embedder=``.
    """
    return LiveScoring(metrics, settings=settings, **options).open()
