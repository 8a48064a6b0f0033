"""ragbridge metrics as ``langsmith.evaluate`` evaluators (the *sink* side of the adapter).

Why it exists: a team that runs its experiments with ``langsmith.evaluate`` wants ragbridge's
metrics as columns of that experiment, without exporting anything. `evaluators` returns
evaluators that go straight into ``evaluators=[...]`` of ``langsmith.evaluate`` and
``langsmith.aevaluate``; `summary_evaluators` returns experiment-level means with a bootstrap
confidence interval for ``summary_evaluators=[...]``.

How a run becomes a `Sample` (every field can be overridden by a key name, a list of key
names tried in order, or a callable ``(run, example) -> value``; the reading is
`ragbridge.adapters.langsmith.fields`):

* question: the run's inputs ``question`` / ``input`` / ``query`` (also one level down, since
  ``evaluate`` hands a traced ``pipeline(inputs)`` the whole inputs dict);
* answer: the run's outputs ``answer`` / ``output``;
* contexts: the run's outputs ``contexts`` / ``documents`` / ``context`` or else the retriever
  child runs of the trace (the "evaluating intermediate steps" case), read as the source side
  reads them (`ragbridge.adapters.langsmith.reading`: LangChain retrievers,
  ``@traceable(run_type="retriever")``, Documents, dicts, strings);
* reference: the example's outputs ``reference`` / ``ground_truth`` / ``expected_output`` /
  ``answer`` / ``output``; relevance labels (for ``recall@5``, ``ndcg@10``, ...): the example's
  outputs ``relevance`` (id → grade) or ``relevant_ids`` (grade 1).
* context ids (what ranking measures match against the labels): ``Document.id``, else
  ``metadata["id"]`` / ``["doc_id"]`` / ``["document_id"]``. A LangChain vector store gives every
  chunk a fresh UUID as ``Document.id`` while labels name source documents, so ``id_key``
  re-reads the id: ``id_key="source"`` takes ``metadata["source"]``, a list of keys takes the
  first present, a callable ``(Context) -> id | None`` decides itself. A context without it
  keeps its own id; when ids still never match the labels, the run-level warning and the
  per-run ``invalid_input`` failure of `ragbridge.core.results.id_check` say so, as without
  ``id_key``.

Feedback keys are the metric names unless ``keys`` renames them: a mapping (metric → key) or
the preset ``"langsmith-tutorial"`` (`LANGSMITH_TUTORIAL_KEYS`), the names of the four graders
in LangSmith's RAG evaluation tutorial, so an experiment's columns stay where dashboards expect
them:

==========================  ============================================  ====================
tutorial key (its grader)   ragbridge measure                             value
==========================  ============================================  ====================
``correctness``             ``correctness`` (answer vs reference)         1.0 or 0.0
                            ``answer_correctness``                        claim-level F1, 0..1
``relevance``               ``helpfulness`` (answer vs question)          1.0 or 0.0
                            ``answer_relevance``                          0..1
``groundedness``            ``groundedness`` (answer vs documents)        1.0 or 0.0
                            ``faithfulness``                              share of claims, 0..1
``retrieval_relevance``     ``document_relevance`` (documents vs query)   1.0 or 0.0
==========================  ============================================  ====================

The tutorial's graders are LLM calls returning a boolean, which LangSmith records as 1 or 0.
ragbridge's ``correctness``, ``helpfulness``, ``groundedness`` and ``document_relevance`` ask
the same four questions in one call each and give 1.0 or 0.0 with the judge's explanation as
the comment, so the columns hold the same kind of number. The graded measures put a finer
number in the same column: ``faithfulness`` is the share of the answer's claims the documents
support (an answer with one unsupported claim of four is 0.75 where a grader says 0), and
``answer_correctness`` and ``answer_relevance`` are likewise fractions, never booleans. Pick one
measure per key; two measures for one key are refused.

Design decisions:

* **One `Scorer` per `evaluators(...)` call.** Its evaluators share the judge engine, the cache
  and the per-run scores: the first evaluator to see a run scores *every* metric of the set on
  it at once (so claims are extracted once for faithfulness and hallucination, and combined
  context calls are shared), the others read that result. By default there is one evaluator per
  metric (one feedback column each, and LangSmith attributes an evaluator crash to its own key);
  ``combined=True`` gives one evaluator returning all metrics as ``EvaluationResults``.
* **Sync and async.** The evaluators are `langsmith.evaluation.RunEvaluator` objects with both
  ``evaluate_run`` (used by ``evaluate``; it goes through `Scorer.score`, which is safe inside a
  running event loop) and ``aevaluate_run`` (awaited natively by ``aevaluate``). The same list
  works in both; no flag is needed.
* **Failures are results, never exceptions or fake scores.** A judge failure, a missing field or
  a trace that does not fit gives ``score=None``, ``comment="failed (kind): message"`` (the
  message names the run id and the keys tried) and ``extra={"error": True}``, which is how
  LangSmith marks errored feedback. The experiment always completes.
* **Traced like LangSmith's own function evaluators** (`ragbridge.adapters.langsmith.tracing`).
  An evaluator that scores a run opens its evaluator run (``run_id`` = the
  ``evaluator_run_id`` langsmith passes, in the ``evaluators`` project) and every judge call
  made while scoring is a child run of it; each result's ``source_run_id`` is that run, the
  target of "view evaluator run". Because the first evaluator of a set scores every metric
  of the run, the others open no run of their own: their feedback points at the run that
  holds the judge calls behind it.
* **Where the provenance goes.** ``comment`` is `explain(score)` (the reason and one line per
  claim / statement / context verdict); on ranking measures it ends with ``warning: ...`` lines
  once the run-level check finds retrieved ids that (almost) never match the labels
  (`ragbridge.core.results.id_check`; also in ``evaluator_info["warnings"]`` and the summary
  comment), then a ``hint: ...`` line with the fix in these evaluators' terms (``id_key``; also in
  ``evaluator_info["hint"]``). Everything else (per-claim ``details``, provider, judge
  model, prompt version, usage, latency, failure) is in ``evaluator_info``: in langsmith 0.14 that
  is the field ``_log_evaluation_feedback`` uploads (as the feedback's ``source_info``);
  ``EvaluationResult.metadata`` is not uploaded.
* **Summary evaluators read, they do not re-score.** LangSmith hands summary evaluators only
  ``(runs, examples)``, not the per-run feedback. Summary evaluators built from the evaluators
  list (``summary_evaluators(evs)``) read the scores those evaluators already computed for each
  run id; a run they have not seen is scored through the same cached `Scorer`. Built from metric
  names instead, they own a fresh scorer and score every run themselves.

Importing this module without langsmith raises ImportError naming the extra:
``pip install ".[langsmith]"`` (in your ragbridge clone).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Failure, FailureKind, Score
from ragbridge.core.results.stats import mean_ci
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import EvaluationResult, EvaluationResults, RunEvaluator
from .fields import (
    ANSWER_KEYS,
    CONTEXT_KEYS,
    QUESTION_KEYS,
    REFERENCE_KEYS,
    RELEVANCE_KEYS,
    FieldMissing,
    Fields,
    FieldSpec,
    IdKey,
    field_keys,
    id_keys,
)
from .reading import RetrieverSelector, field_of
from .tracing import carry_context, evaluator_run, traced_settings

__all__ = [
    "KEY_PRESETS",
    "LANGSMITH_TUTORIAL_KEYS",
    "EvaluatorOptions",
    "FieldSpec",
    "IdKey",
    "RagbridgeEvaluators",
    "RagbridgeRunEvaluator",
    "RagbridgeSummaryEvaluator",
    "evaluators",
    "summary_evaluators",
]

LANGSMITH_TUTORIAL_KEYS: Mapping[str, str] = {
    "correctness": "correctness",
    "answer_correctness": "correctness",
    "helpfulness": "relevance",
    "answer_relevance": "relevance",
    "groundedness": "groundedness",
    "faithfulness": "groundedness",
    "document_relevance": "retrieval_relevance",
}
"""ragbridge measure (any provider) → the feedback key of LangSmith's RAG tutorial grader that
asks the same question (see the module doc for how the numbers differ)."""

KEY_PRESETS: Mapping[str, Mapping[str, str]] = {"langsmith-tutorial": LANGSMITH_TUTORIAL_KEYS}
"""Named feedback-key sets for ``keys=``."""

_FEEDBACK_CONFIG = {"type": "continuous", "min": 0, "max": 1}
_ID_KEY_IN_TEXT = re.compile(r"id_key=('[^']*')")


def feedback_keys(keys: Mapping[str, str] | str | None, metrics: Sequence[str]) -> dict[str, str]:
    """Metric name → feedback key, from a mapping or a preset name (`KEY_PRESETS`)."""
    if isinstance(keys, str):
        preset = KEY_PRESETS.get(keys)
        if preset is None:
            raise ValueError(
                f"unknown keys preset {keys!r} (presets: {', '.join(sorted(KEY_PRESETS))}); "
                "or pass a mapping metric name -> feedback key"
            )
        chosen = {m: preset.get(m, preset.get(m.split(":")[0], m)) for m in metrics}
    else:
        unknown = sorted(set(keys or {}) - set(metrics))
        if unknown:
            raise ValueError(
                f"keys names metrics that are not in this set: {', '.join(unknown)} "
                f"(metrics: {', '.join(metrics)})"
            )
        chosen = {m: (keys or {}).get(m, m) for m in metrics}
    by_key: dict[str, list[str]] = {}
    for metric, key in chosen.items():
        by_key.setdefault(key, []).append(metric)
    clashes = {k: ms for k, ms in by_key.items() if len(ms) > 1}
    if clashes:
        named = "; ".join(f"{k!r} from {', '.join(ms)}" for k, ms in clashes.items())
        raise ValueError(
            f"feedback keys must be unique, got {named}: keep one measure per key, or rename "
            "one with keys={metric: key}"
        )
    return chosen


def _reads_contexts(metric: Metric) -> bool:
    """Whether ``metric`` may read the retrieved contexts: it requires them, or its declared
    reads name them, or it declares none (then it may read anything)."""
    reads = metric.reads if metric.own_provider else metric._provided_reads
    if reads is None or "contexts" in metric.requires:
        return True
    return any(r == "contexts" or r.startswith("contexts.") for r in reads)


# --------------------------------------------------------------------------- per-run outcome


@dataclass
class _Outcome:
    """What the suite computed for one run: the sample (None if it could not be built), the
    score of every metric, and why optional fields are missing."""

    sample: Sample | None
    scores: dict[str, Score]
    notes: dict[str, str] = field(default_factory=dict)


def _with_note(score: Score, notes: Mapping[str, str]) -> Score:
    """A missing-input failure rewritten to say where the field was looked for."""
    if score.failure is None or score.failure.kind is not FailureKind.MISSING_INPUT:
        return score
    for name, note in notes.items():
        if f"'{name}'" in score.failure.message:
            message = f"{score.failure.message}: {note}"
            return score.model_copy(
                update={"failure": Failure(kind=score.failure.kind, message=message)}
            )
    return score


class EvaluatorOptions(SettingsOptions, total=False):
    """`RagbridgeEvaluators`' keyword arguments (the field overrides, ``keys`` and the
    settings), which `evaluators` and `summary_evaluators` pass on to it; every one defaults
    to None. ``**options: Unpack[EvaluatorOptions]``."""

    question_key: FieldSpec
    answer_key: FieldSpec
    contexts_from: FieldSpec
    retriever: RetrieverSelector
    reference_key: FieldSpec
    relevance_key: FieldSpec
    sample_from: Callable[[Any, Any], Sample] | None
    id_key: IdKey
    keys: Mapping[str, str] | str | None


class RagbridgeEvaluators:
    """A set of ragbridge metrics bound to LangSmith runs: one `Scorer`, one score per run.

    Usually built through `evaluators`; use it directly to get both per-run and summary
    evaluators from one object (``suite.evaluators()``, ``suite.summary_evaluators()``) or to
    see the `Sample` a run becomes (`sample`).
    """

    def __init__(
        self,
        metrics: Iterable[Metric | str],
        *,
        question_key: FieldSpec = None,
        answer_key: FieldSpec = None,
        contexts_from: FieldSpec = None,
        retriever: RetrieverSelector = None,
        reference_key: FieldSpec = None,
        relevance_key: FieldSpec = None,
        sample_from: Callable[[Any, Any], Sample] | None = None,
        id_key: IdKey = None,
        keys: Mapping[str, str] | str | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        # The core builds the settings first (a framework model given as judge is wrapped
        # there, untouched here); then the judge's calls are traced under the evaluator run.
        built = traced_settings(Settings.of(settings, options))
        # Every run's scores are kept (records=None): the summary evaluators read them back.
        self.scorer = Scorer(metrics, settings=built, records=None)
        self.metrics = list(self.scorer.names)
        self.keys: dict[str, str] = feedback_keys(keys, self.metrics)
        self.id_key = id_key
        self._lock = threading.Lock()
        self._scored_in: dict[str, Any] = {}  # run id -> the evaluator run that scored it
        self._id_misses: dict[str, tuple[int, int]] = {}  # run id -> (without id_key, contexts)
        self.fields = Fields(
            question=field_keys("question_key", question_key, QUESTION_KEYS),
            answer=field_keys("answer_key", answer_key, ANSWER_KEYS),
            contexts=field_keys("contexts_from", contexts_from, CONTEXT_KEYS),
            contexts_given=contexts_from is not None,
            retriever=retriever,
            reference=field_keys("reference_key", reference_key, REFERENCE_KEYS),
            relevance=field_keys("relevance_key", relevance_key, RELEVANCE_KEYS),
            id_key=id_keys(id_key),
            sample_from=sample_from,
            contexts_read=contexts_from is not None
            or any(_reads_contexts(m) for m in self.scorer.metrics),
        )
        self.sample_from = sample_from

    # ----------------------------------------------------------------- run → sample

    def sample(self, run: Any, example: Any = None) -> Sample:
        """The `Sample` ``run`` (and its ``example``) become; ValueError naming what is missing.

        Optional fields that cannot be found (answer, reference) are left None here; scoring
        turns them into failures of the metrics that need them.
        """
        sample, _ = self._build(run, example)
        return sample

    def _build(self, run: Any, example: Any) -> tuple[Sample, dict[str, str]]:
        if run is None:
            raise ValueError("the evaluator got None instead of a run")
        read = self.fields.read(run, example, ids_seen=lambda n: self._note_ids(run, n))
        return read.sample, read.notes

    def _note_ids(self, run: Any, misses: tuple[int, int]) -> None:
        """Keep how many of a run's contexts ``id_key`` found no id for (for `_id_hint`)."""
        run_id = field_of(run, "id")
        if run_id is not None:
            with self._lock:
                self._id_misses[str(run_id)] = misses

    def _prepare(self, run: Any, example: Any) -> _Outcome | tuple[Sample, dict[str, str]]:
        """Either a finished outcome (the run could not be read) or a sample to score."""
        try:
            return self._build(run, example)
        except FieldMissing as exc:
            failure = Failure(kind=exc.kind, message=str(exc))
            return _Outcome(None, {m: Score(failure=failure) for m in self.metrics})

    def _finish(self, sample: Sample, notes: dict[str, str], scores: dict[str, Score]) -> _Outcome:
        return _Outcome(sample, {m: _with_note(s, notes) for m, s in scores.items()}, notes)

    # ----------------------------------------------------------------- scoring, once per run

    def outcome(self, run: Any, example: Any = None) -> _Outcome:
        """Every metric on ``run``, scored once per run id (sync; loop-safe). The judge calls
        see the caller's context (its LangSmith run) even on `run_sync`'s worker thread."""
        return run_sync(carry_context(self.aoutcome(run, example)))

    async def aoutcome(self, run: Any, example: Any = None) -> _Outcome:
        """The async form of `outcome`, for ``langsmith.aevaluate``. The Scorer keeps each run
        id's scores, and computes them once however many evaluators, threads or loops ask."""
        prepared = self._prepare(run, example)
        if isinstance(prepared, _Outcome):
            return prepared
        sample, notes = prepared
        scores = await self.scorer.ascore(sample, key=("run", str(field_of(run, "id"))))
        return self._finish(sample, notes, scores)

    def scores(self, run: Any, example: Any = None) -> dict[str, Score]:
        """The `Score` of every metric on ``run`` (computed now, or remembered)."""
        return dict(self.outcome(run, example).scores)

    def forget(self) -> None:
        """Drop the remembered per-run scores (the judge cache, if any, is kept)."""
        self.scorer.forget()
        with self._lock:
            self._scored_in.clear()
            self._id_misses.clear()

    def _claim(self, run: Any, evaluator_run_id: Any) -> Any:
        """The evaluator run that scores ``run`` for this set: ``evaluator_run_id`` when it is
        the first to ask, else the one that asked first (its run holds the judge calls)."""
        run_id = field_of(run, "id")
        if run_id is None:
            return evaluator_run_id
        with self._lock:
            return self._scored_in.setdefault(str(run_id), evaluator_run_id)

    def _id_hint(self, text: str) -> str | None:
        """What to do here about ids that do not match the labels (``text`` names the cause).

        The core's message names the LangChain adapter's functions; with these evaluators the
        fix is their own ``id_key``, and when it is already set, how often it found nothing.
        """
        if "id_key=" not in text and "labelled id" not in text:
            return None
        if self.id_key is None:
            found = _ID_KEY_IN_TEXT.search(text)
            key = found.group(1) if found else "'source'"
            return f"hint: with these evaluators, pass id_key={key} to evaluators(...)"
        with self._lock:
            missed = sum(m for m, _ in self._id_misses.values())
            total = sum(n for _, n in self._id_misses.values())
        spec = "a callable" if callable(self.id_key) else repr(self.id_key)
        if missed:
            return (
                f"hint: id_key={spec} found no id in {missed} of {total} retrieved contexts, "
                "which kept their own ids; check the metadata key"
            )
        return (
            f"hint: id_key={spec} gave every context its id, and those ids are not the labelled "
            "ones: check that the labels name the same things (documents or chunks)"
        )

    # ----------------------------------------------------------------- langsmith objects

    def result(self, metric: str, outcome: _Outcome, source_run_id: Any = None) -> EvaluationResult:
        """One metric's outcome as a LangSmith `EvaluationResult` (``source_run_id``: the
        evaluator run that scored it)."""
        score = outcome.scores[metric]
        info: dict[str, Any] = {
            "ragbridge_metric": metric,
            "status": score.status,
            "reason": score.reason,
            "provider": score.provider,
            "judge_model": score.judge_model,
            "prompt_version": score.prompt_version,
            "usage": score.usage.model_dump(),
            "latency_s": score.latency_s,
            "details": score.details,
        }
        if outcome.sample is not None:
            info["sample_id"] = outcome.sample.id
        if score.failure is not None:
            info["failure"] = {"kind": score.failure.kind.value, "message": score.failure.message}
        lines = [explain(score)]
        warnings = self.scorer.warnings if score.provider == "retrieval" else []
        if warnings:  # run-level: retrieved ids that (almost) never match the labels
            info["warnings"] = warnings
            lines.extend(f"warning: {w}" for w in warnings)
        if score.provider == "retrieval" and (warnings or score.failure is not None):
            hint = self._id_hint("\n".join(lines))
            if hint is not None:
                info["hint"] = hint
                lines.append(hint)
        return EvaluationResult(
            key=self.keys[metric],
            score=score.value,
            comment="\n".join(lines),
            evaluator_info=info,
            feedback_config=dict(_FEEDBACK_CONFIG),
            extra={"error": True} if score.failure is not None else None,
            source_run_id=source_run_id,
        )

    def evaluators(self, *, combined: bool = False) -> list[RagbridgeRunEvaluator]:
        """One evaluator per metric, or (``combined=True``) one evaluator for all of them."""
        if combined:
            return [RagbridgeRunEvaluator(self, self.metrics)]
        return [RagbridgeRunEvaluator(self, [m]) for m in self.metrics]

    def summary_evaluators(
        self,
        *,
        combined: bool = False,
        confidence: float = 0.95,
        n_resamples: int = 2000,
        seed: int = 0,
    ) -> list[RagbridgeSummaryEvaluator]:
        """Experiment-level evaluators: per metric the mean, its bootstrap CI and failures."""
        groups = [self.metrics] if combined else [[m] for m in self.metrics]
        return [
            RagbridgeSummaryEvaluator(
                self, g, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
            for g in groups
        ]


class RagbridgeRunEvaluator(RunEvaluator):
    """A LangSmith run evaluator for some metrics of a `RagbridgeEvaluators` set.

    Returns an `EvaluationResult` for one metric, `EvaluationResults` for several. Works in
    ``langsmith.evaluate`` (``evaluate_run``) and ``langsmith.aevaluate`` (``aevaluate_run``),
    and can be called directly as ``evaluator(run, example)``.
    """

    def __init__(self, suite: RagbridgeEvaluators, metrics: Sequence[str]) -> None:
        self.suite = suite
        self.metrics = list(metrics)
        self.__name__ = "ragbridge_" + "_".join(suite.keys[m] for m in self.metrics)

    @property
    def feedback_keys(self) -> list[str]:
        return [self.suite.keys[m] for m in self.metrics]

    def _results(
        self, outcome: _Outcome, source_run_id: Any
    ) -> EvaluationResult | EvaluationResults:
        results = [self.suite.result(m, outcome, source_run_id) for m in self.metrics]
        if len(results) == 1:
            return results[0]
        return EvaluationResults(results=results)

    def _traced_outputs(self, outcome: _Outcome) -> dict[str, Any]:
        """What the evaluator run shows as its outputs: every metric the set scored on the run
        (its judge calls are this run's children) and the `Sample` the run was read as."""
        results = []
        for metric in self.suite.metrics:
            r = self.suite.result(metric, outcome)
            results.append({"key": r.key, "score": r.score, "comment": r.comment})
        sample = None if outcome.sample is None else outcome.sample.model_dump(mode="json")
        return {"results": results, "sample": sample}

    def evaluate_run(
        self, run: Any, example: Any = None, evaluator_run_id: Any = None
    ) -> EvaluationResult | EvaluationResults:
        """Score ``run`` in a traced evaluator run (``evaluator_run_id``, or a new id), as
        langsmith 0.14's ``DynamicRunEvaluator.evaluate_run`` does for a function evaluator."""
        run_id = evaluator_run_id if evaluator_run_id is not None else uuid.uuid4()
        owner = self.suite._claim(run, run_id)
        if owner != run_id:  # another evaluator of the set scores this run: point at its run
            return self._results(self.suite.outcome(run, example), owner)
        with evaluator_run(self.__name__, run, example, run_id) as traced:
            outcome = self.suite.outcome(run, example)
            traced.end(outputs=self._traced_outputs(outcome))
        return self._results(outcome, run_id)

    async def aevaluate_run(
        self, run: Any, example: Any = None, evaluator_run_id: Any = None
    ) -> EvaluationResult | EvaluationResults:
        """The async form of `evaluate_run`, awaited by ``langsmith.aevaluate``."""
        run_id = evaluator_run_id if evaluator_run_id is not None else uuid.uuid4()
        owner = self.suite._claim(run, run_id)
        if owner != run_id:
            return self._results(await self.suite.aoutcome(run, example), owner)
        async with evaluator_run(self.__name__, run, example, run_id) as traced:
            outcome = await self.suite.aoutcome(run, example)
            traced.end(outputs=self._traced_outputs(outcome))
        return self._results(outcome, run_id)

    def __call__(self, run: Any, example: Any = None) -> EvaluationResult | EvaluationResults:
        return self.evaluate_run(run, example)

    def __repr__(self) -> str:
        return f"<RagbridgeRunEvaluator {', '.join(self.feedback_keys)}>"


def _ranking(scores: Sequence[Score]) -> bool:
    return any(s.provider == "retrieval" for s in scores)


class RagbridgeSummaryEvaluator:
    """A LangSmith summary evaluator ``(runs, examples) -> EvaluationResults``.

    Per metric it reports ``<key>_mean`` (score: the mean over the runs that scored; comment:
    the bootstrap CI, n, failures and skips; ``evaluator_info``: the same as numbers) and
    ``<key>_failed`` (score: the number of runs whose score failed). Scores are read from the
    set's per-run results, scoring any run not seen yet.
    """

    def __init__(
        self,
        suite: RagbridgeEvaluators,
        metrics: Sequence[str],
        *,
        confidence: float = 0.95,
        n_resamples: int = 2000,
        seed: int = 0,
    ) -> None:
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
        self.suite = suite
        self.metrics = list(metrics)
        self.confidence = confidence
        self.n_resamples = n_resamples
        self.seed = seed
        self.__name__ = "ragbridge_summary_" + "_".join(suite.keys[m] for m in self.metrics)

    def __call__(self, runs: Sequence[Any], examples: Sequence[Any]) -> EvaluationResults:
        examples = list(examples) if examples is not None else []
        outcomes = [
            self.suite.outcome(run, examples[i] if i < len(examples) else None)
            for i, run in enumerate(runs)
        ]
        results: list[EvaluationResult] = []
        for metric in self.metrics:
            results.extend(self._summarise(metric, [o.scores[metric] for o in outcomes]))
        return EvaluationResults(results=results)

    def _summarise(self, metric: str, scores: list[Score]) -> list[EvaluationResult]:
        key = self.suite.keys[metric]
        values = [s.value for s in scores if s.value is not None]
        failed: dict[str, int] = {}
        for s in scores:
            if s.failure is not None:
                failed[s.failure.kind.value] = failed.get(s.failure.kind.value, 0) + 1
        n_failed = sum(failed.values())
        n_skipped = len(scores) - len(values) - n_failed
        info: dict[str, Any] = {
            "ragbridge_metric": metric,
            "n": len(values),
            "failed": n_failed,
            "failed_by_kind": failed,
            "skipped": n_skipped,
            "runs": len(scores),
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
        }
        counts = f"n={len(values)} scored, {n_failed} failed"
        if failed:
            counts += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(failed.items())) + ")"
        counts += f", {n_skipped} skipped"
        warnings = self.suite.scorer.warnings if _ranking(scores) else []
        if warnings:
            info["warnings"] = warnings
            counts += "".join(f"\nwarning: {w}" for w in warnings)
            hint = self.suite._id_hint("\n".join(warnings))
            if hint is not None:
                info["hint"] = hint
                counts += f"\n{hint}"
        if values:
            ci = mean_ci(
                values, confidence=self.confidence, n_resamples=self.n_resamples, seed=self.seed
            )
            info.update(mean=ci.mean, ci_low=ci.low, ci_high=ci.high)
            pct = f"{self.confidence * 100:g}%"
            comment = f"mean {ci.mean:.3f}, {pct} CI [{ci.low:.3f}, {ci.high:.3f}]; {counts}"
            mean: float | None = ci.mean
        else:
            info.update(mean=None, ci_low=None, ci_high=None)
            comment = f"no run scored; {counts}"
            mean = None
        return [
            EvaluationResult(
                key=f"{key}_mean",
                score=mean,
                comment=comment,
                evaluator_info=info,
                feedback_config=dict(_FEEDBACK_CONFIG),
            ),
            EvaluationResult(
                key=f"{key}_failed",
                score=n_failed,
                comment=f"{n_failed} of {len(scores)} runs failed"
                + (
                    " (" + ", ".join(f"{k}: {v}" for k, v in sorted(failed.items())) + ")"
                    if failed
                    else ""
                ),
                evaluator_info=info,
            ),
        ]

    def __repr__(self) -> str:
        return f"<RagbridgeSummaryEvaluator {', '.join(self.suite.keys[m] for m in self.metrics)}>"


# --------------------------------------------------------------------------- public functions


def evaluators(
    metrics: Iterable[Metric | str],
    *,
    combined: bool = False,
    settings: Settings | None = None,
    **options: Unpack[EvaluatorOptions],
) -> list[RagbridgeRunEvaluator]:
    """ragbridge metrics as evaluators for ``langsmith.evaluate`` / ``langsmith.aevaluate``.

    ``metrics`` are names (``"faithfulness"``, ``"answer_relevance:offline"``, ``"recall@5"``)
    or `Metric` objects; ``settings`` (or its fields as keyword arguments: ``judge``,
    ``embedder``, ``cache``, ``price``, ...) mean what they mean for `ragbridge.core.evaluate`
    (one `Scorer` is built here and shared by all returned evaluators).

    Field overrides (a key name, key names tried in order, or ``(run, example) -> value``):
    ``question_key`` (run inputs), ``answer_key`` (run outputs), ``contexts_from`` (run outputs;
    a callable returns a list of strings, Documents, dicts or `Context`), ``reference_key`` and
    ``relevance_key`` (example outputs). ``retriever`` picks the retriever child run by name or
    predicate and skips the outputs keys. ``sample_from(run, example) -> Sample`` replaces all
    of it. ``id_key`` says where context ids come from for ranking measures: a metadata key
    (``"source"`` for LangChain chunks labelled by their source document), several tried in
    order, or a callable ``(Context) -> id | None``. ``keys`` renames feedback keys: a mapping
    metric name → key, or ``"langsmith-tutorial"`` for the names of LangSmith's RAG tutorial
    graders (`LANGSMITH_TUTORIAL_KEYS`; the module doc says which measure is which grader).

    ``judge`` may be a ragbridge `Judge` or a framework's model as the core accepts it (a
    LangChain chat model, ...): it is handed to the core as given. Each evaluator run is traced
    like a LangSmith function evaluator's, with the judge calls beneath it.

    Returns one evaluator per metric, or with ``combined=True`` a single evaluator returning all
    metrics as ``EvaluationResults``; either way each run is scored once for all metrics.
    """
    return RagbridgeEvaluators(metrics, settings=settings, **options).evaluators(combined=combined)


def summary_evaluators(
    source: Iterable[Metric | str] | Sequence[RagbridgeRunEvaluator] | RagbridgeEvaluators,
    *,
    combined: bool = False,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    settings: Settings | None = None,
    **options: Unpack[EvaluatorOptions],
) -> list[RagbridgeSummaryEvaluator]:
    """Summary evaluators for ``langsmith.evaluate(..., summary_evaluators=[...])``.

    ``source`` is the list `evaluators` returned (the summaries then read the scores those
    evaluators computed, re-scoring nothing), a `RagbridgeEvaluators`, or metrics — then a new
    set is built with ``options`` (the keyword arguments of `evaluators`) and scores every run.
    Per metric the result holds ``<key>_mean`` with a percentile bootstrap CI
    (`ragbridge.core.results.stats.mean_ci` with ``confidence``, ``n_resamples``, ``seed``) and
    ``<key>_failed``, the number of failed runs.
    """
    if isinstance(source, RagbridgeEvaluators):
        suite = source
    else:
        items = list(source)
        if items and all(isinstance(i, RagbridgeRunEvaluator) for i in items):
            suites = {id(i.suite): i.suite for i in items if isinstance(i, RagbridgeRunEvaluator)}
            if len(suites) != 1:
                raise ValueError("the evaluators come from different evaluators(...) calls")
            suite = next(iter(suites.values()))
            wanted = [m for i in items if isinstance(i, RagbridgeRunEvaluator) for m in i.metrics]
            given = sorted([*options, *(["settings"] if settings is not None else [])])
            if given:
                raise TypeError(
                    f"options {given} only apply when summary_evaluators builds its "
                    "own metric set; the evaluators given already have theirs"
                )
            groups = [wanted] if combined else [[m] for m in wanted]
            return [
                RagbridgeSummaryEvaluator(
                    suite, g, confidence=confidence, n_resamples=n_resamples, seed=seed
                )
                for g in groups
            ]
        metrics = [i for i in items if not isinstance(i, RagbridgeRunEvaluator)]
        if len(metrics) != len(items):
            raise TypeError("pass either metrics or the evaluators list, not a mix")
        suite = RagbridgeEvaluators(metrics, settings=settings, **options)
    return suite.summary_evaluators(
        combined=combined, confidence=confidence, n_resamples=n_resamples, seed=seed
    )
