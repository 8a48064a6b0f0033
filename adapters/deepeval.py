"""DeepEval adapter: convert `Sample`s to and from DeepEval test cases, datasets and JSON files,
use ragbridge metrics as DeepEval metrics (also under DeepEval's own class names, as drop-ins),
and drive DeepEval's own metrics with a ragbridge judge.

Why it is built this way:

* **Lossless conversion through one namespaced metadata key.** DeepEval's `LLMTestCase` has fields
  for the question (``input``), answer (``actual_output``), reference (``expected_output``),
  retrieved passages (``retrieval_context``, texts only) and reference passages (``context``).
  Everything else a `Sample` holds — its id, each context's id/score/metadata, the relevance
  labels (``None`` and ``{}`` mean different things), the sample's metadata — goes under
  ``metadata["ragbridge"]`` (`META_KEY`), so ``from_test_case(to_test_case(s)) == s``. The
  context texts stay in ``retrieval_context`` (what DeepEval's metrics read) and are never
  duplicated; the per-context extras are a list aligned with it, and a test case edited so the
  two no longer line up is refused rather than mis-attributed.
* **Test cases built by hand convert too.** Without ragbridge metadata, the id is the ``id``
  argument, else the test case's ``name``, else ``"deepeval-"`` plus a hash of its content
  (deterministic: the same test case always gets the same id). Its metadata becomes the sample's
  metadata; a `RetrievedContextData` passage becomes a context whose metadata holds its
  ``source``. A malformed test case (a non-string passage, say) raises ValueError naming the
  test case and the field.
* **``context`` stands in for ``retrieval_context`` when that is empty.** DeepEval's
  ``HallucinationMetric`` reads ``LLMTestCase.context`` (its own example sets only ``context``),
  so a hand-built test case with passages in ``context`` and none in ``retrieval_context`` gets
  them as its contexts (each marked ``metadata["deepeval_field"] = "context"``) as well as its
  ``reference_contexts`` — instead of "no contexts were retrieved" and a hallucination of 1.0.
  When both are set, ``retrieval_context`` (what the generator was given) is what
  faithfulness and hallucination check and ``context`` (DeepEval's "ideal retrieval") stays the
  reference passages: ragbridge's hallucination is the RAG question "is the answer backed by what
  was retrieved?". Pass ``contexts_from="context"`` to check against ``context`` instead, as
  DeepEval's HallucinationMetric does (``"retrieval_context"`` never falls back).
* **Datasets hold goldens.** `to_dataset` fills ``EvaluationDataset.goldens`` (a `Golden` with an
  ``actual_output`` is a complete record) because that is what DeepEval persists:
  ``save_as("json")`` writes goldens, and ``add_goldens_from_json_file`` reads their
  ``additional_metadata`` back, while ``add_test_cases_from_json_file`` (4.3) drops test case
  metadata — ids, scores and labels would be lost. ``to_dataset(..., as_test_cases=True)`` fills
  ``test_cases`` instead for ``deepeval.evaluate(test_cases=ds.test_cases, ...)``.
  `from_dataset` reads both. Files are DeepEval's JSON format: its CSV/JSONL writers join list
  fields with ``|``, which splits any passage containing one.
* **A ragbridge failure is an error, never a score.** `RagbridgeMetric` sets ``error`` (and
  ``success=False``, ``score=None``) when the ragbridge `Score` failed, so DeepEval reports it as
  an errored metric instead of a low score. A *skipped* score (the measure does not apply, e.g.
  a ranking measure on an unlabelled sample) is reported the same way, as ``"skipped: <reason>"``:
  DeepEval has no "not applicable" outcome that does not either pass or abort the run.
* **Two ways in.** `as_deepeval_metric` / `RagbridgeMetric` show any ragbridge measure as
  ``ragbridge/<measure>`` in ragbridge's direction: for a measure where lower is better
  (``hallucination``) success is ``score <= threshold``. The drop-in classes
  (`FaithfulnessMetric`, `AnswerRelevancyMetric`, `ContextualPrecisionMetric`,
  `ContextualRecallMetric`, `HallucinationMetric`; `DeepEvalNamedMetric`) are for code
  written for DeepEval: its class names, constructor arguments, ``__name__`` (the results
  column), required test case fields and error, strict mode, and direction. DeepEval 4.3 scores
  its HallucinationMetric as agreement with ``LLMTestCase.context`` (1 is a pass, ``threshold``
  a minimum; before 4.x it was the share of contexts contradicted, ``threshold`` a maximum), so
  the drop-in `HallucinationMetric` reads ``context`` and shows ``1 − hallucination``.
* **No "You're running DeepEval's latest ... Metric!" banner** for ragbridge's metrics: it is
  not DeepEval's metric. DeepEval has no per-metric switch, so its description function is
  wrapped where DeepEval calls it and answers for ragbridge's metrics only (`_silence_banner`);
  DeepEval's own metrics keep their banner.
* **``model=`` is DeepEval's name for the judge** (`judge_of_model`): a model object is passed
  on (`Settings` wraps DeepEval, LangChain, LlamaIndex and OpenAI models); a model name is
  resolved by DeepEval exactly as its own metrics resolve it, so ``model="gpt-4.1"`` means the
  same model, key and provider settings as before. Giving ``model=`` and ``judge=`` is refused.
* **DeepEval's metrics on a ragbridge judge.** `DeepEvalJudge` is a `DeepEvalBaseLLM` whose calls
  go through a `JudgeEngine`, so DeepEval's prompts get ragbridge's retries, timeout,
  concurrency cap, usage accounting and cache (keyed by template ``"deepeval"`` and DeepEval's
  version). A failed call raises `JudgeCallFailed` (a RuntimeError): DeepEval swallows a
  ``TypeError`` from ``generate`` and silently retries without the schema.

Importing this module without deepeval raises ImportError naming the extra:
``pip install "ragbridge[deepeval]"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError
from typing_extensions import Unpack

from ragbridge.adapters._frameworks import quiet_frameworks
from ragbridge.core.judging.engine import JudgeEngine, cost_of
from ragbridge.core.judging.judge import Judge, Message
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results.evaluation import Failure, FailureKind, Score, Usage
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.runner import build_engines, default_embedder, resolve_metrics, run_sync
from ragbridge.core.scoring.scorer import Scorer, explain
from ragbridge.core.settings import Settings, SettingsOptions

INSTALL_HINT = 'pip install "ragbridge[deepeval]"'
"""What to run when the ``deepeval`` extra is missing."""

quiet_frameworks()  # before deepeval is imported: it reads its settings and .env then

try:
    from deepeval._version import __version__ as DEEPEVAL_VERSION
    from deepeval.dataset import EvaluationDataset, Golden
    from deepeval.errors import MissingTestCaseParamsError
    from deepeval.metrics import BaseMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase
    from deepeval.test_case.llm_test_case import RetrievedContextData
except ImportError as exc:  # the fence: name the extra, not just the missing module
    raise ImportError(
        f"ragbridge.adapters.deepeval needs deepeval, which is not installed ({exc}); "
        f"install the deepeval extra: {INSTALL_HINT}"
    ) from exc

__all__ = [
    "INSTALL_HINT",
    "META_KEY",
    "AnswerRelevancyMetric",
    "ContextualPrecisionMetric",
    "ContextualRecallMetric",
    "DeepEvalJudge",
    "DeepEvalNamedMetric",
    "FaithfulnessMetric",
    "HallucinationMetric",
    "JudgeCallFailed",
    "RagbridgeMetric",
    "as_deepeval_metric",
    "from_dataset",
    "from_golden",
    "from_test_case",
    "judge_of_model",
    "load_test_cases",
    "save_test_cases",
    "to_dataset",
    "to_golden",
    "to_test_case",
]

META_KEY = "ragbridge"
"""The key of a test case's ``metadata`` that carries what DeepEval has no field for."""

_FORMAT = 1

Record = LLMTestCase | Golden


# --------------------------------------------------------------------------- conversions


def _extras(sample: Sample) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "id": sample.id,
        "contexts": [c.model_dump(exclude={"text"}) for c in sample.contexts],
        "relevance": None if sample.relevance is None else dict(sample.relevance),
        "metadata": dict(sample.metadata),
    }


def _fields(sample: Sample) -> dict[str, Any]:
    if not isinstance(sample, Sample):
        raise TypeError(f"expected a Sample, got {type(sample).__name__}")
    return {
        "input": sample.question,
        "actual_output": sample.answer,
        "expected_output": sample.reference,
        "retrieval_context": [c.text for c in sample.contexts] or None,
        "context": None if sample.reference_contexts is None else list(sample.reference_contexts),
        "name": sample.id,
    }


def to_test_case(sample: Sample) -> LLMTestCase:
    """The `LLMTestCase` of ``sample``; ``from_test_case`` gives the sample back unchanged."""
    return LLMTestCase(**_fields(sample), metadata={META_KEY: _extras(sample)})


def to_golden(sample: Sample) -> Golden:
    """The `Golden` of ``sample`` (its ``additional_metadata`` carries the ragbridge extras)."""
    return Golden(**_fields(sample), additional_metadata={META_KEY: _extras(sample)})


def _label(record: Any, where: str | None) -> str:
    kind = "golden" if isinstance(record, Golden) else "test case"
    name = getattr(record, "name", None)
    parts = [where] if where else []
    if name:
        parts.append(f"name={name!r}")
    else:
        text = getattr(record, "input", None)
        if isinstance(text, str):
            parts.append(f"input={text[:40]!r}")
    return f"{kind} {' '.join(parts)}".strip()


def _content_id(record: Any) -> str:
    """A deterministic id for a hand-built test case: a hash of what it says."""
    payload = {
        "input": record.input,
        "actual_output": record.actual_output,
        "expected_output": record.expected_output,
        "retrieval_context": [
            item if isinstance(item, str) else [item.source, item.context]
            for item in record.retrieval_context or []
        ],
        "context": record.context,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return "deepeval-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _str_or_none(value: Any, label: str, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{label}: {field}: expected a string, got {type(value).__name__}")


def _string_list(value: Any, label: str, field: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"{label}: {field}: expected a list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{label}: {field}[{i}]: expected a string, got {type(item).__name__}")
    return list(value)


def _record_metadata(record: Any) -> Any:
    if isinstance(record, Golden):
        return record.additional_metadata
    return record.metadata


ContextsFrom = Literal["auto", "retrieval_context", "context"]
_CONTEXTS_FROM = ("auto", "retrieval_context", "context")


def from_test_case(
    test_case: LLMTestCase | Golden,
    *,
    id: str | None = None,
    where: str | None = None,
    contexts_from: ContextsFrom = "auto",
) -> Sample:
    """The `Sample` a DeepEval `LLMTestCase` (or `Golden`) describes.

    ``id`` overrides the sample id; ``where`` (e.g. ``"goldens[3]"``) is added to error messages.
    ``contexts_from`` says which field becomes the sample's (retrieved) contexts: ``"auto"``
    takes ``retrieval_context``, or ``context`` when a hand-built test case has no
    ``retrieval_context`` (see the module docstring); ``"retrieval_context"`` and ``"context"``
    take that field only. Raises ValueError naming the test case and the field when a field has
    the wrong type.
    """
    if not isinstance(test_case, (LLMTestCase, Golden)):
        raise TypeError(f"expected an LLMTestCase or Golden, got {type(test_case).__name__}")
    if contexts_from not in _CONTEXTS_FROM:
        raise ValueError(
            f"contexts_from must be one of {', '.join(_CONTEXTS_FROM)}, got {contexts_from!r}"
        )
    label = _label(test_case, where)
    question = test_case.input
    if not isinstance(question, str):
        raise ValueError(f"{label}: input: expected a string, got {type(question).__name__}")
    answer = _str_or_none(test_case.actual_output, label, "actual_output")
    reference = _str_or_none(test_case.expected_output, label, "expected_output")
    reference_contexts = _string_list(test_case.context, label, "context")

    meta = _record_metadata(test_case)
    if meta is not None and not isinstance(meta, Mapping):
        raise ValueError(f"{label}: metadata: expected an object, got {type(meta).__name__}")
    meta = dict(meta or {})
    extras = meta.pop(META_KEY, None)
    if extras is not None and not isinstance(extras, Mapping):
        raise ValueError(f"{label}: metadata[{META_KEY!r}]: expected an object")

    raw_contexts = test_case.retrieval_context
    if raw_contexts is not None and not isinstance(raw_contexts, list):
        raise ValueError(f"{label}: retrieval_context: expected a list of strings")
    contexts: list[dict[str, Any]] = []
    for i, item in enumerate(raw_contexts or []):
        if isinstance(item, str):
            contexts.append({"text": item})
        elif isinstance(item, RetrievedContextData):
            if extras is not None:
                # DeepEval's file loader turns a passage that looks like its source marker into
                # RetrievedContextData; ragbridge only ever writes strings, so undo it.
                text = f"deepeval_source={item.source},deepeval_context={item.context}"
                contexts.append({"text": text})
            else:
                contexts.append({"text": item.context, "metadata": {"source": item.source}})
        else:
            raise ValueError(
                f"{label}: retrieval_context[{i}]: expected a string, got {type(item).__name__}"
            )

    use_context = bool(reference_contexts) and (
        contexts_from == "context" or (contexts_from == "auto" and extras is None and not contexts)
    )
    if use_context:
        assert reference_contexts is not None
        contexts = [
            {"text": text, "metadata": {"deepeval_field": "context"}} for text in reference_contexts
        ]
    elif contexts_from == "context":
        contexts = []

    relevance: Any = None
    sample_metadata: dict[str, Any] = meta
    sample_id = test_case.name if isinstance(test_case.name, str) and test_case.name else None
    if extras is not None:
        where_meta = f"metadata[{META_KEY!r}]"
        if contexts_from != "context":  # per-passage extras belong to retrieval_context
            extra_contexts = extras.get("contexts", [])
            if not isinstance(extra_contexts, list) or len(extra_contexts) != len(contexts):
                got = len(extra_contexts) if isinstance(extra_contexts, list) else "no"
                raise ValueError(
                    f"{label}: {where_meta}.contexts: {got} entries for {len(contexts)} passages "
                    "in retrieval_context; was retrieval_context edited after conversion?"
                )
            for i, (ctx, extra) in enumerate(zip(contexts, extra_contexts, strict=True)):
                if not isinstance(extra, Mapping):
                    raise ValueError(f"{label}: {where_meta}.contexts[{i}]: expected an object")
                ctx.update({k: v for k, v in extra.items() if k != "text"})
        relevance = extras.get("relevance")
        inner = extras.get("metadata") or {}
        if not isinstance(inner, Mapping):
            raise ValueError(f"{label}: {where_meta}.metadata: expected an object")
        sample_metadata = {**meta, **inner}
        if extras.get("id") is not None:
            sample_id = extras["id"]
    if id is not None:
        sample_id = id
    if sample_id is None:
        sample_id = _content_id(test_case)
    try:
        return Sample.model_validate(
            {
                "id": sample_id,
                "question": question,
                "answer": answer,
                "contexts": contexts,
                "reference": reference,
                "reference_contexts": reference_contexts,
                "relevance": relevance,
                "metadata": sample_metadata,
            }
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'sample'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        raise ValueError(f"{label}: {problems}") from None


def from_golden(golden: Golden, *, id: str | None = None, where: str | None = None) -> Sample:
    """The `Sample` a DeepEval `Golden` describes (same rules as `from_test_case`)."""
    return from_test_case(golden, id=id, where=where)


def to_dataset(samples: Iterable[Sample], *, as_test_cases: bool = False) -> EvaluationDataset:
    """An `EvaluationDataset` of ``samples`` as goldens (default) or as test cases.

    Goldens are what DeepEval saves and loads with their metadata intact (see the module
    docstring); pass ``as_test_cases=True`` to hand ``dataset.test_cases`` to
    ``deepeval.evaluate``. Sample ids must be unique.
    """
    items = list(samples)
    seen: dict[str, int] = {}
    for i, sample in enumerate(items):
        if not isinstance(sample, Sample):
            raise TypeError(f"samples[{i}]: expected a Sample, got {type(sample).__name__}")
        if sample.id in seen:
            first = seen[sample.id]
            raise ValueError(
                f"samples[{i}]: id: duplicate sample id {sample.id!r} (first at [{first}])"
            )
        seen[sample.id] = i
    if as_test_cases:
        dataset = EvaluationDataset()
        for sample in items:
            dataset.add_test_case(to_test_case(sample))
        return dataset
    return EvaluationDataset(goldens=[to_golden(s) for s in items])


def from_dataset(dataset: EvaluationDataset) -> list[Sample]:
    """Every golden, then every test case, of a single-turn ``dataset`` as `Sample`s.

    Sample ids must come out unique: a dataset holding the same records both as goldens and as
    test cases raises ValueError naming both positions.
    """
    if not isinstance(dataset, EvaluationDataset):
        raise TypeError(f"expected an EvaluationDataset, got {type(dataset).__name__}")
    records: list[tuple[str, Any]] = [(f"goldens[{i}]", g) for i, g in enumerate(dataset.goldens)]
    records += [(f"test_cases[{i}]", t) for i, t in enumerate(dataset.test_cases)]
    out: list[Sample] = []
    seen: dict[str, str] = {}
    for where, record in records:
        if not isinstance(record, (LLMTestCase, Golden)):
            raise ValueError(
                f"dataset {where}: {type(record).__name__} is multi-turn; "
                "ragbridge converts single-turn records only"
            )
        sample = from_test_case(record, where=f"dataset {where}")
        if sample.id in seen:
            raise ValueError(
                f"dataset {where}: duplicate sample id {sample.id!r} (also {seen[sample.id]})"
            )
        seen[sample.id] = where
        out.append(sample)
    return out


def save_test_cases(samples: Iterable[Sample], path: str | os.PathLike[str]) -> Path:
    """Write ``samples`` as a DeepEval dataset JSON file (goldens) at ``path``; returns it.

    The file is written by DeepEval's own ``EvaluationDataset.save_as("json", ...)``, so DeepEval
    reads it with ``add_goldens_from_json_file``; the write is atomic (a crash never leaves half a
    file). Metadata must be JSON data: anything else raises ValueError naming the sample.
    """
    items = list(samples)
    for sample in items:
        try:
            json.dumps(_extras(sample), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"sample {sample.id!r}: metadata must be JSON data to be saved ({exc})"
            ) from None
    dataset = to_dataset(items)
    if not items:
        raise ValueError("no samples to save: DeepEval does not write an empty dataset")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as tmp:
        with contextlib.redirect_stdout(io.StringIO()):  # DeepEval prints "dataset saved at"
            written = dataset.save_as("json", directory=tmp, file_name="dataset")
        os.replace(written, target)
    return target


def load_test_cases(path: str | os.PathLike[str]) -> list[Sample]:
    """Read a DeepEval dataset JSON file (as `save_test_cases` or ``save_as("json")`` write it)."""
    dataset = EvaluationDataset()
    dataset.add_goldens_from_json_file(str(path))
    return from_dataset(dataset)


# --------------------------------------------------------------------------- metrics


class RagbridgeMetric(BaseMetric):  # type: ignore[no-untyped-call]
    """A ragbridge metric as a DeepEval `BaseMetric`, for ``assert_test`` and ``evaluate``.

    ``measure``/``a_measure`` convert the test case with `from_test_case`, score it with a
    `Scorer`, and set ``score``, ``reason`` (`explain`: the reason and one line per claim or
    context verdict), ``success`` and, for a failed or skipped ragbridge score, ``error`` (score
    stays None). ``last_score`` keeps the full ragbridge `Score` of the latest measurement.

    Every constructor argument is kept under its own name because DeepEval's ``evaluate``
    copies metrics by calling the class again with them; copies share one `Scorer` (its judge
    engine and cache). Metrics built on one ``scorer=`` that holds several metrics share each
    test case's sub-results (the claims faithfulness extracts serve hallucination), as the
    Scorer keeps one record per test case content. How models are called is ``settings=`` or
    its fields as keywords (``judge=``, ``cache=``, ``price=``, ...), as for
    `ragbridge.core.evaluate`.
    """

    def __init__(
        self,
        metric: Metric | str,
        *,
        threshold: float = 0.5,
        include_reason: bool = True,
        strict_mode: bool = False,
        async_mode: bool = True,
        verbose_mode: bool = False,
        scorer: Scorer | None = None,
        contexts_from: ContextsFrom = "auto",
        model: Any = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie within [0, 1], got {threshold!r}")
        if contexts_from not in _CONTEXTS_FROM:
            raise ValueError(
                f"contexts_from must be one of {', '.join(_CONTEXTS_FROM)}, got {contexts_from!r}"
            )
        self.contexts_from: ContextsFrom = contexts_from
        resolved = metric if isinstance(metric, Metric) else resolve_metrics([metric])[0]
        if model is not None:
            _refuse_two_judges(scorer, settings, options)
            options["judge"] = judge_of_model(model)
        if scorer is None:
            scorer = Scorer([resolved], settings=settings, **options)
        elif resolved.name not in scorer.names:
            raise ValueError(f"scorer scores {scorer.names}, not {resolved.name!r}")
        self.scorer = scorer
        self.metric = resolved = scorer.metrics[scorer.names.index(resolved.name)]
        self.settings = scorer.settings  # kept by this name: DeepEval copies metrics by it
        # The model is not kept as ``self.model``: DeepEval's copies pass the scorer, which
        # holds it, and a second judge source would be refused.
        self.higher_is_better = type(resolved).higher_is_better != self._complement
        self.threshold = (1.0 if self.higher_is_better else 0.0) if strict_mode else threshold
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        engine = scorer.judge
        self.evaluation_model = engine.model if engine is not None else resolved.provider
        self.last_score: Score | None = None

    @property
    def __name__(self) -> str:
        # The provider is part of the name when it is not the default, so that
        # "faithfulness" and "faithfulness:offline" stay apart in DeepEval's results.
        metric = self.metric
        default = metric.providers[0] if metric.providers else metric.provider
        suffix = "" if metric.provider in (default, "retrieval") else f":{metric.provider}"
        return f"ragbridge/{metric.name}{suffix}"

    _complement: ClassVar[bool] = False
    """True when ``score`` is 1 − the measure's value (the direction flips with it)."""

    # DeepEval annotates ``-> float``; a failed or skipped score returns None (``error`` says why).
    def measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """Score ``test_case`` (``*args``/``**kwargs`` are DeepEval's display flags, unused)."""
        sample = self._sample(test_case)
        name = self.metric.name
        return self._apply(self.scorer.score(sample, only=[name])[name])

    async def a_measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """The async form of `measure`, on the caller's event loop."""
        sample = self._sample(test_case)
        name = self.metric.name
        scores = await self.scorer.ascore(sample, only=[name])
        return self._apply(scores[name])

    def _sample(self, test_case: LLMTestCase) -> Sample:
        return from_test_case(test_case, contexts_from=self.contexts_from)

    def _shown(self, value: float) -> float:
        """The score DeepEval shows for the measure's ``value``."""
        return 1.0 - value if self._complement else value

    def _explain(self, score: Score) -> str:
        """The reason DeepEval shows: ragbridge's explanation, headed by the direction of the
        score when lower is better, so that a 0.0 next to the drop-in's 1.0 reads right."""
        if self.higher_is_better or score.value is None:
            return explain(score)
        name = self.metric.name
        head = (
            f"score {score.value:.2f} = {name} {score.value:.2f}: ragbridge's direction, 0 is "
            f"best (success when score <= threshold {self.threshold:g})"
        )
        if name == "hallucination":
            head += "; DeepEval's HallucinationMetric (and its drop-in here) shows 1 − this"
        return f"{head}\n{explain(score)}"

    def _apply(self, score: Score) -> float | None:
        self.last_score = score
        self.score = None if score.value is None else self._shown(score.value)
        self.reason = None
        self.error = None
        # Run-level: retrieved ids that (almost) never match the labels, said on ranking scores.
        warnings = self.scorer.warnings if score.provider == "retrieval" else []
        notes = [f"warning: {w}" for w in warnings]
        if score.value is None:
            # "failed (kind): message" or "skipped: reason"
            self.error = "\n".join([explain(score), *notes])
        elif self.include_reason:
            self.reason = "\n".join([self._explain(score), *notes])
        elif notes:
            self.reason = "\n".join(notes)
        engine = self.scorer.judge
        cost = cost_of(score.usage, engine.price) if engine is not None else 0.0
        self.evaluation_cost = cost
        self.input_tokens = score.usage.prompt_tokens
        self.output_tokens = score.usage.completion_tokens
        self.success = self.is_successful()
        if self.verbose_mode:
            usage = score.usage
            self.verbose_logs = "\n".join(
                [
                    f"metric: {self.metric.name} (provider {score.provider})",
                    f"judge: {score.judge_model}, prompt version {score.prompt_version}",
                    f"usage: {usage.calls} calls ({usage.cached_calls} cached), "
                    f"{usage.prompt_tokens}+{usage.completion_tokens} tokens",
                    explain(score, limit=50),
                ]
            )
        value: float | None = self.score
        return value

    def is_successful(self) -> bool:
        value: float | None = self.score
        threshold: float | None = self.threshold
        if self.error is not None or value is None or threshold is None:
            success = False
        elif self.higher_is_better:
            success = value >= threshold
        else:
            success = value <= threshold
        self.success = success
        return success


def as_deepeval_metric(
    metric: Metric | str,
    *,
    threshold: float = 0.5,
    include_reason: bool = True,
    strict_mode: bool = False,
    async_mode: bool = True,
    verbose_mode: bool = False,
    contexts_from: ContextsFrom = "auto",
    model: Any = None,
    settings: Settings | None = None,
    **options: Unpack[SettingsOptions],
) -> RagbridgeMetric:
    """A DeepEval metric scoring ``metric`` (an object or a name like ``"faithfulness:offline"``).

    It shows as ``ragbridge/<measure>`` and keeps ragbridge's direction — the number every
    other ragbridge sink, report and gate shows for the measure: success is
    ``score >= threshold``, or ``score <= threshold`` for measures where lower is better
    (``hallucination``, as DeepEval's HallucinationMetric read before 4.x), and then the reason
    opens by saying so. For DeepEval's own names, arguments and directions use the drop-in
    classes (`FaithfulnessMetric`, ..., `HallucinationMetric`: 1 − hallucination, 1 a pass).
    ``strict_mode`` sets the threshold to 1 (0 for lower-is-better). A failed or skipped
    ragbridge score sets ``error``. ``contexts_from`` picks the test case field checked as the
    contexts (`from_test_case`): by default ``retrieval_context``, or ``context`` when a test
    case has only that one, as in DeepEval's own HallucinationMetric example. ``model=`` is
    DeepEval's name for ``judge=`` (`judge_of_model`).
    """
    return RagbridgeMetric(
        metric,
        threshold=threshold,
        include_reason=include_reason,
        strict_mode=strict_mode,
        async_mode=async_mode,
        verbose_mode=verbose_mode,
        contexts_from=contexts_from,
        model=model,
        settings=settings,
        **options,
    )


def judge_of_model(model: Any) -> Any:
    """What DeepEval's ``model=`` means, as a ragbridge ``judge=`` value.

    A model object (a `Judge`, a `DeepEvalBaseLLM`, a LangChain or LlamaIndex model, ...) is
    passed on unchanged: `Settings` wraps framework models. A model *name* (``"gpt-4.1"``) is
    resolved by DeepEval itself, exactly as its own metrics resolve ``model="..."``: into the
    DeepEval model of the provider DeepEval is configured for (OpenAI by default, reading
    ``OPENAI_API_KEY``; ``deepeval set-...`` picks others), which then judges ragbridge's
    prompts. ``None`` gives DeepEval's default model the same way.
    """
    if model is None or isinstance(model, str):
        from deepeval.metrics.utils import initialize_model

        resolved, _native = initialize_model(model)
        return resolved
    return model


def _refuse_two_judges(
    scorer: Scorer | None, settings: Settings | None, options: Mapping[str, Any]
) -> None:
    given = [
        name
        for name, present in (
            ("judge=", options.get("judge") is not None),
            ("settings.judge", settings is not None and settings.judge is not None),
            ("scorer= (it holds its judge)", scorer is not None),
        )
        if present
    ]
    if given:
        raise TypeError(
            f"model= and {given[0]} both name the judge; pass it once (model= is DeepEval's "
            "name for judge=)"
        )


# --------------------------------------------------------------------------- DeepEval's names

_ReqField = Literal["input", "actual_output", "expected_output", "retrieval_context", "context"]


class DeepEvalNamedMetric(RagbridgeMetric):
    """A ragbridge measure behind DeepEval's class name, arguments, column and direction.

    The subclasses (`FaithfulnessMetric`, `AnswerRelevancyMetric`, `ContextualPrecisionMetric`,
    `ContextualRecallMetric`, `HallucinationMetric`) take DeepEval's constructor arguments in
    DeepEval's order — ``threshold``, ``model`` (a model object or name, `judge_of_model`),
    ``include_reason``, ``async_mode``, ``strict_mode``, ``verbose_mode``, ``flaky`` — so that
    changing the import is the whole migration, and they behave as DeepEval's classes do where
    a user can see it:

    * ``__name__`` (the results-table column, the ``assert_test`` message) is DeepEval's
      (``"Faithfulness"``); a non-default ``provider=`` is appended (``"Faithfulness (offline)"``);
    * a test case missing a field DeepEval's class requires (or with an empty
      ``actual_output``) raises DeepEval's ``MissingTestCaseParamsError`` with DeepEval's
      message, so ``ErrorConfig(skip_on_missing_params=..., ignore_errors=...)`` acts the same;
    * ``strict_mode`` sets the threshold to 1 and a score below it to 0, as DeepEval's does;
    * success is ``score >= threshold`` for every class, HallucinationMetric included (DeepEval
      4.3's direction);
    * no "You're running DeepEval's latest ... Metric!" banner (it is not DeepEval's metric).

    The number is ragbridge's measure (one implementation, shared sub-results, cache, typed
    failures); each class says where its definition differs from DeepEval's. ``provider=``
    picks another registered provider (``"offline"``, ``"nli"``, or ``"deepeval"`` for
    DeepEval's own definition on the ragbridge judge and cache). With no judge given, DeepEval's
    default model is used, as DeepEval does; a measure that needs an embedder and gets none
    uses ragbridge's offline default (all-MiniLM-L6-v2). ``judge=``, ``embedder=``, ``cache=``
    and the other `Settings` fields, ``settings=`` and ``scorer=`` mean what they mean for
    `RagbridgeMetric`.
    """

    measure_name: ClassVar[str]
    deepeval_name: ClassVar[str]
    required_fields: ClassVar[tuple[_ReqField, ...]]
    contexts_field: ClassVar[ContextsFrom] = "retrieval_context"

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        *,
        flaky: bool = False,
        provider: str | None = None,
        metric: Metric | None = None,
        scorer: Scorer | None = None,
        contexts_from: ContextsFrom | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        # ``metric`` is how DeepEval's copies (one per test case) get the resolved measure back.
        if metric is None:
            metric = resolve_metrics([self._spelled(provider)])[0]
        elif metric.name != self.measure_name:
            raise ValueError(
                f"{type(self).__name__} scores {self.measure_name!r}, not {metric.name!r}"
            )
        elif provider is not None and provider != metric.provider:
            raise ValueError(
                f"metric= uses provider {metric.provider!r}, provider= says {provider!r}"
            )
        judged = (
            scorer is not None
            or options.get("judge") is not None
            or (settings is not None and settings.judge is not None)
        )
        if model is None and not judged and metric.needs_judge:
            options["judge"] = judge_of_model(None)  # DeepEval's default model
        embedded = (
            scorer is not None
            or options.get("embedder") is not None
            or (settings is not None and settings.embedder is not None)
        )
        if metric.needs_embedder and not embedded:
            options["embedder"] = default_embedder()
        self.flaky = flaky
        super().__init__(
            metric,
            threshold=threshold,
            include_reason=include_reason,
            strict_mode=strict_mode,
            async_mode=async_mode,
            verbose_mode=verbose_mode,
            scorer=scorer,
            contexts_from=self.contexts_field if contexts_from is None else contexts_from,
            model=model,
            settings=settings,
            **options,
        )

    def _spelled(self, provider: str | None) -> str:
        return self.measure_name if provider is None else f"{self.measure_name}:{provider}"

    @property
    def __name__(self) -> str:
        metric = self.metric
        default = metric.providers[0] if metric.providers else metric.provider
        suffix = "" if metric.provider == default else f" ({metric.provider})"
        return f"{self.deepeval_name}{suffix}"

    def _sample(self, test_case: LLMTestCase) -> Sample:
        # DeepEval's check and wording (deepeval.metrics.utils.check_llm_test_case_params):
        # a None field is missing, and so is an empty actual_output.
        empty = getattr(test_case, "actual_output", None) == ""
        if empty and "actual_output" in self.required_fields:
            self._missing(f"'actual_output' cannot be empty for the '{self.__name__}' metric")
        missing = [f"'{f}'" for f in self.required_fields if getattr(test_case, f, None) is None]
        if missing:
            if len(missing) <= 2:
                listed = " and ".join(missing)
            else:
                listed = ", ".join(missing[:-1]) + ", and " + missing[-1]
            self._missing(f"{listed} cannot be None for the '{self.__name__}' metric")
        return super()._sample(test_case)

    def _missing(self, message: str) -> None:
        self.error = message
        self.success = False
        raise MissingTestCaseParamsError(message)

    def _shown(self, value: float) -> float:
        shown = super()._shown(value)
        threshold = self.threshold
        if self.strict_mode and threshold is not None and shown < threshold:
            return 0.0
        return shown


class FaithfulnessMetric(DeepEvalNamedMetric):
    """ragbridge's ``faithfulness`` as DeepEval's ``FaithfulnessMetric``: the share of the
    answer's claims that ``retrieval_context`` supports.

    Differs from DeepEval's: a claim the contexts neither support nor contradict counts as
    unsupported (DeepEval counts it as faithful unless ``penalize_ambiguous_claims``), and an
    answer with no claim is an error, not 1.0.
    """

    measure_name = "faithfulness"
    deepeval_name = "Faithfulness"
    required_fields = ("input", "actual_output", "retrieval_context")


class AnswerRelevancyMetric(DeepEvalNamedMetric):
    """ragbridge's ``answer_relevance`` as DeepEval's ``AnswerRelevancyMetric``.

    A different definition: ragbridge generates the questions the answer would answer and
    compares them with ``input`` by embedding similarity (RAGAS's definition), with a
    noncommittal answer scored 0; DeepEval scores the share of the answer's statements the
    judge finds relevant to ``input``. ``provider="deepeval"`` gives DeepEval's definition on
    the ragbridge judge. Needs an embedder (``embedder=``; by default ragbridge's offline one).
    """

    measure_name = "answer_relevance"
    deepeval_name = "Answer Relevancy"
    required_fields = ("input", "actual_output")


class ContextualPrecisionMetric(DeepEvalNamedMetric):
    """ragbridge's ``context_precision`` as DeepEval's ``ContextualPrecisionMetric``: each
    passage of ``retrieval_context`` judged useful for ``expected_output`` or not, scored as
    rank-weighted precision — DeepEval's definition too."""

    measure_name = "context_precision"
    deepeval_name = "Contextual Precision"
    required_fields = ("input", "retrieval_context", "expected_output")


class ContextualRecallMetric(DeepEvalNamedMetric):
    """ragbridge's ``context_recall`` as DeepEval's ``ContextualRecallMetric``: the share of
    ``expected_output``'s statements that ``retrieval_context`` backs — DeepEval's definition
    too."""

    measure_name = "context_recall"
    deepeval_name = "Contextual Recall"
    required_fields = ("input", "retrieval_context", "expected_output")


class HallucinationMetric(DeepEvalNamedMetric):
    """DeepEval's ``HallucinationMetric`` on ragbridge's ``hallucination``, read as DeepEval 4.3
    reads it: checked against ``LLMTestCase.context`` (not ``retrieval_context``), and scored as
    agreement — ``score = 1 − hallucination``, 1 is a pass, ``threshold`` is a minimum.

    DeepEval 4.3 turned its HallucinationMetric around (it warns: "now scores in the same
    direction as every other deepeval metric"); before, the score was the share of contexts
    contradicted and ``threshold`` a maximum. That reading is ``as_deepeval_metric(
    "hallucination", contexts_from="context")``. Differs from DeepEval's: ragbridge counts the
    answer's claims the contexts contradict *or leave unsupported*; DeepEval counts the
    contexts the output contradicts (an unsupported detail is forgiven). ``provider="nli"``
    counts contradictions only.
    """

    measure_name = "hallucination"
    deepeval_name = "Hallucination"
    required_fields = ("input", "actual_output", "context")
    contexts_field = "context"
    _complement = True

    def _explain(self, score: Score) -> str:
        assert score.value is not None
        head = (
            f"score {1.0 - score.value:.2f} = 1 − hallucination {score.value:.2f} (1 is a pass): "
            f"DeepEval 4.3's direction (success when score >= threshold {self.threshold:g}); "
            "as_deepeval_metric('hallucination') shows the hallucination itself"
        )
        return f"{head}\n{explain(score)}"


# --------------------------------------------------------------------------- DeepEval's banner


class _NothingToPrint:
    """A rich renderable that renders nothing: ``console.print`` of it prints no line."""

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        return iter(())

    def __str__(self) -> str:
        return ""


def _no_banner(metric: RagbridgeMetric, async_mode: bool | None = None) -> Any:
    return _NothingToPrint()


def _progress_label(metric: RagbridgeMetric, async_mode: bool | None = None) -> str:
    run_async = metric.async_mode if async_mode is None else async_mode
    return (
        f"ragbridge {metric.__name__} (using {metric.evaluation_model}, "
        f"strict={metric.strict_mode}, async_mode={run_async})"
    )


def _silence_banner() -> None:
    """No "You're running DeepEval's latest <name> Metric!" line for ragbridge's metrics.

    DeepEval prints that line from ``format_metric_description`` (``deepeval.metrics.indicator``)
    for every metric: ``evaluate()`` prints it once per metric before the run, and its progress
    bars use it as their label. Only ``DisplayConfig(show_indicator=False)`` turns it off, for
    all metrics at once. So the name is wrapped in the two modules that call it: for a
    `RagbridgeMetric` the banner prints nothing and a progress bar reads "ragbridge <name>
    (using <judge>, ...)"; any other metric gets DeepEval's own function, unchanged. Idempotent.
    """
    for module_name, own in (
        ("deepeval.evaluate.evaluate", _no_banner),
        ("deepeval.metrics.indicator", _progress_label),
    ):
        module = importlib.import_module(module_name)
        original = getattr(module, "format_metric_description", None)
        if original is None or hasattr(original, "__ragbridge_wraps__"):
            continue

        def describe(
            metric: Any,
            async_mode: bool | None = None,
            *,
            _deepeval: Any = original,
            _own: Any = own,
        ) -> Any:
            if isinstance(metric, RagbridgeMetric):
                return _own(metric, async_mode)
            return _deepeval(metric, async_mode)

        describe.__ragbridge_wraps__ = original  # type: ignore[attr-defined]
        describe.__wrapped__ = original  # type: ignore[attr-defined]
        module.format_metric_description = describe  # type: ignore[attr-defined]


_silence_banner()


# --------------------------------------------------------------------------- judge


class JudgeCallFailed(RuntimeError):
    """A DeepEval prompt the ragbridge judge could not answer; ``failure`` says why.

    Deliberately not a TypeError: DeepEval catches TypeError from ``generate`` and silently calls
    again without the schema.
    """

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(f"judge call failed ({failure.kind.value}): {failure.message}")


class DeepEvalJudge(DeepEvalBaseLLM):  # type: ignore[no-untyped-call]
    """A DeepEval model backed by a ragbridge `Judge` (or a pre-built `JudgeEngine`).

    DeepEval's own metrics then run on the same judge as ragbridge's, through the ragbridge
    cache: ``FaithfulnessMetric(model=DeepEvalJudge(judge, cache="cache.sqlite"))`` (any
    `Settings` field, or ``settings=``, says how the judge is called). With a
    pydantic ``schema`` the reply is validated (with ragbridge's repair and retries) and the
    instance returned; without one the text is returned. ``usage`` adds up what was spent.
    """

    def __init__(
        self,
        judge: Judge | JudgeEngine,
        /,
        *,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        config = Settings.of(settings, options)
        if isinstance(judge, JudgeEngine):
            if config.cache is not None:
                raise ValueError("pass the cache to the JudgeEngine, not to DeepEvalJudge")
            self.engine = judge
        else:
            engine = build_engines(config.replace(judge=judge), []).judge
            assert engine is not None
            self.engine = engine
        self.usage = Usage()
        self._lock = threading.Lock()
        super().__init__(model=self.engine.model)

    def load_model(self, *args: Any, **kwargs: Any) -> DeepEvalJudge:
        """This object (DeepEval stores it as ``self.model``); the judge is ``engine.judge``."""
        return self

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        name: str = self.engine.model
        return name

    def generate(self, prompt: Any, schema: Any = None, **kwargs: Any) -> Any:
        """Sync form of `a_generate`; safe inside a running event loop."""
        return run_sync(self.a_generate(prompt, schema=schema, **kwargs))

    async def a_generate(self, prompt: Any, schema: Any = None, **kwargs: Any) -> Any:
        """The parsed ``schema`` instance, or the reply text; raises `JudgeCallFailed`."""
        if not isinstance(prompt, str):
            raise ValueError(
                f"DeepEvalJudge sends text prompts only, got {type(prompt).__name__} "
                "(multimodal prompts are not supported)"
            )
        messages: list[Message] = [{"role": "user", "content": prompt}]
        version = DEEPEVAL_VERSION
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            call: Any = await self.engine.ask(
                messages, schema, template_id="deepeval", template_version=version
            )
        else:
            call = await self.engine.complete(
                messages, template_id="deepeval", template_version=version
            )
        with self._lock:
            self.usage = self.usage + call.usage
        if call.failure is not None or call.value is None:
            failure = call.failure or Failure(
                kind=FailureKind.JUDGE_ERROR, message="the judge returned no value"
            )
            raise JudgeCallFailed(failure)
        return call.value

    def supports_structured_outputs(self) -> bool:
        return True

    def supports_json_mode(self) -> bool:
        return True
