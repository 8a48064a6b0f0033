"""A team's own criteria in LangSmith: as ``langsmith.evaluate`` evaluators, and as openevals'
``create_llm_as_judge`` for code written against it.

Two doors to one measure (`ragbridge.core.criteria`):

* `criteria_evaluators` — `Criterion`, `Aspect` and `Rubric` specs as evaluators for
  ``langsmith.evaluate`` / ``aevaluate``. The feedback key is the criterion's name; runs are
  read, scored, traced and reported exactly as `ragbridge.adapters.langsmith.evaluators` does
  it for every measure (one `Scorer` per call; each run scored once for all criteria;
  ``batch=True`` judges the criteria that read the same fields in one call per run). A
  criterion's measure (``spec.metric()``) also goes into `evaluators` next to built-in ones.
* `create_llm_as_judge` / `create_async_llm_as_judge` — openevals 0.2's functions with their
  argument names and calling convention: ``evaluator(inputs=..., outputs=...,
  reference_outputs=..., **kwargs)`` returns ``{"key", "score", "comment", "metadata"}``, which
  ``langsmith.evaluate`` takes as an evaluator as it is. The change for an openevals user is the
  import line. The prompt becomes a criterion whose text is data inside ragbridge's delimited
  blocks (`ragbridge.adapters.langsmith.judge_prompt`), never the judge's instructions.

Where ragbridge's counterpart differs from openevals, and why:

* **What the score is.** ``continuous=False``: ``True``/``False`` as openevals (an `Aspect`'s
  verdict). ``continuous=True``: a float in [0, 1], the integer 0..10 the judge gave divided by
  10, or G-Eval's probability-weighted mean where the judge returns log-probabilities.
  ``choices``: one of the choices, as openevals. A scored criterion's evaluation steps are
  written once per run by the judge (one extra call, cached) unless ``evaluation_steps=`` gives
  them.
* **Failures are results, not exceptions.** A field the prompt needs and the call lacks (no
  ``outputs``, no ``reference_outputs``, a keyword placeholder not passed) gives ``score:
  None`` and a ``comment`` naming the placeholder and the argument, before any judge call; a
  judge failure gives ``score: None`` and the reason. openevals raises in both cases; in an
  experiment ragbridge's row still completes.
* **What is read from a dict.** openevals shows ``inputs``/``outputs`` as JSON. Here a dict is
  read as the LangSmith evaluators read runs (``question``/``input``/``query`` in inputs,
  ``answer``/``output`` in outputs, ``reference``/... in reference outputs, a lone string
  field), falling back to its JSON when no such key holds text. ``context`` may be text, a list
  of texts or Documents (one CONTEXT block each); without a ``context=`` keyword the outputs'
  ``contexts``/``documents``/``context`` are used, so ``{context}`` works when the evaluator
  is passed to ``langsmith.evaluate`` directly.
* **Not supported** (refused at creation, saying so): a LangChain prompt template or a function
  as ``prompt`` (there is no criterion text to read), ``{attachments}``, ``output_schema``.
  ``structured_output_kwargs`` accepts ``method`` for a LangChain chat model. Inside a
  ``@pytest.mark.langsmith`` test openevals also logs each result as the test's feedback
  (through a private LangSmith hook); here log it yourself:
  ``langsmith.testing.log_feedback(key=r["key"], score=r["score"], comment=r["comment"])``.
* **Models.** ``judge=`` is a LangChain chat model, an OpenAI client (with ``model=``) or any
  judge ragbridge takes; ``model="openai:MODEL"`` (or another ragbridge spec) builds one;
  another ``provider:model`` string goes to LangChain's ``init_chat_model`` when LangChain is
  installed, as openevals does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict

from typing_extensions import Unpack

from ragbridge.adapters.model_registry import ModelSpecError, judge_from, wrapper_class
from ragbridge.core.criteria import CriteriaFile, CriterionSpec, criteria_metrics, load_criteria
from ragbridge.core.results.evaluation import Failure, FailureKind, Score
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.settings import Price, Settings

from .evaluators import EvaluatorOptions, RagbridgeEvaluators, RagbridgeRunEvaluator
from .fields import ANSWER_KEYS, CONTEXT_KEYS, QUESTION_KEYS, REFERENCE_KEYS
from .judge_prompt import ARGUMENT_OF, Choices, JudgePrompt, criterion_name, read_prompt
from .reading import context_of, find_text
from .tracing import carry_context, traced_settings

__all__ = [
    "JudgeOptions",
    "JudgeResult",
    "LLMJudge",
    "create_async_llm_as_judge",
    "create_llm_as_judge",
    "criteria_evaluators",
]

_OUR_SPECS = ("openai", "langchain", "llamaindex", "python")
"""Spec kinds ragbridge's model registry builds (`ragbridge.adapters.model_registry`)."""


def criteria_evaluators(
    criteria: Iterable[CriterionSpec] | CriteriaFile | str | os.PathLike[str],
    *,
    batch: bool | None = None,
    combined: bool = False,
    settings: Settings | None = None,
    **options: Unpack[EvaluatorOptions],
) -> list[RagbridgeRunEvaluator]:
    """Criteria as ``langsmith.evaluate`` evaluators, one per criterion (feedback key: its name).

    ``criteria`` are specs, a loaded `CriteriaFile`, or the path of a criteria file (read with
    `load_criteria`, so the steps frozen in it or its lock are the ones used, as on the command
    line). ``batch=True`` judges the criteria that read the same fields in one call per run
    (default: the file's setting, else one call per criterion); ``combined`` and every keyword
    of `evaluators` (``judge=``, ``question_key=``, ``keys=``, ...) mean what they mean there.
    Runs are only asked for retrieved contexts when a criterion reads them.
    """
    if isinstance(criteria, (str, os.PathLike)):
        criteria = load_criteria(criteria)
    if isinstance(criteria, CriteriaFile):
        metrics = criteria.metrics(batch=batch)
    else:
        metrics = criteria_metrics(list(criteria), batch=bool(batch))
    return RagbridgeEvaluators(metrics, settings=settings, **options).evaluators(combined=combined)


# --------------------------------------------------------------------------- openevals


class JudgeResult(TypedDict):
    """What the evaluator returns: openevals' ``EvaluatorResult`` shape."""

    key: str
    score: bool | float | None
    comment: str | None
    metadata: dict[str, Any] | None


class JudgeOptions(TypedDict, total=False):
    """The settings `create_llm_as_judge` takes besides the judge (see `Settings`)."""

    cache: Any
    max_concurrency: int
    timeout: float | None
    max_retries: int
    price: Price | None
    stop_after: int
    reuse_results: bool


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (Mapping, list, tuple)) and not value


def _text(value: Any, keys: Sequence[str]) -> str | None:
    """The text a call gives for a field: a string, the text a dict holds under ``keys`` (or
    its lone string), else the value's JSON as openevals shows it; None when absent or empty.
    (``langsmith.evaluate`` passes ``{}`` for an example without outputs.)"""
    if _empty(value):
        return None
    found = find_text(value, keys)
    return found if found is not None else _json(value)


def _contexts(value: Any) -> list[Context]:
    """``context=`` as contexts: a text, a list of texts / Documents / dicts, or anything else
    as its JSON (one block)."""
    if _empty(value):
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[Context] = []
    for i, item in enumerate(items):
        if _empty(item):
            continue
        try:
            out.append(context_of({"id": "-", "name": "context"}, i, item))
        except ValueError:
            out.append(Context(text=_json(item)))
    return out


def _judge(
    judge: Any, model: str | None, structured_output_kwargs: Mapping[str, Any] | None
) -> Any:
    """The judge openevals' ``judge=``/``model=`` name, as ragbridge calls it (see module doc)."""
    method = None
    if structured_output_kwargs:
        unknown = sorted(set(structured_output_kwargs) - {"method"})
        if unknown:
            raise ValueError(
                f"structured_output_kwargs: {', '.join(unknown)} not supported; ragbridge's "
                "LangChain judge takes 'method' (its structured replies are its own)"
            )
        method = structured_output_kwargs.get("method")
    if judge is not None:
        if method is not None:
            if "langchain_core" not in {c.__module__.split(".")[0] for c in type(judge).__mro__}:
                raise ValueError("structured_output_kwargs applies to a LangChain chat model")
            return wrapper_class("langchain", "judge")(judge, method=method)
        plain = model.removeprefix("openai:") if isinstance(model, str) else None
        return judge_from(judge, model=plain)
    if model is None:
        return None
    if not isinstance(model, str):
        raise TypeError(f"model must be a string such as 'openai:gpt-4o-mini', got {model!r}")
    kind = model.partition(":")[0]
    if kind in _OUR_SPECS:
        return judge_from(model, what="model")
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise ModelSpecError(
            f"model {model!r}: ragbridge builds openai:MODEL (any OpenAI-compatible endpoint), "
            "langchain:, llamaindex: and python: specs; other providers go through LangChain's "
            "init_chat_model (pip install langchain and the provider's package), or pass the "
            "model object as judge="
        ) from None
    return judge_from(init_chat_model(model=model))


class LLMJudge:
    """The evaluator `create_llm_as_judge` returns: call it as openevals' evaluator is called.

    ``spec`` is the criterion the prompt became, ``scorer`` the `Scorer` judging it (its judge
    engine, cache and counters), ``feedback_key`` the key of every result.
    """

    def __init__(
        self,
        prompt: JudgePrompt,
        *,
        feedback_key: str,
        use_reasoning: bool,
        settings: Settings,
    ) -> None:
        self.prompt = prompt
        self.spec = prompt.spec
        self.feedback_key = feedback_key
        self.use_reasoning = use_reasoning
        self.scorer = Scorer([self.spec.metric()], settings=settings)
        # openevals' run name for the same evaluator (what langsmith names its evaluator run)
        self.__name__ = (
            "llm_as_judge" if feedback_key == "score" else f"llm_as_{feedback_key}_judge"
        )

    def sample(
        self,
        *,
        inputs: Any = None,
        outputs: Any = None,
        reference_outputs: Any = None,
        **kwargs: Any,
    ) -> Sample:
        """The `Sample` a call is judged on (only the fields the prompt names are read)."""
        reads = self.spec.reads
        contexts: list[Context] = []
        if "contexts" in reads:
            given = kwargs.get("context")
            if given is None and isinstance(outputs, Mapping):
                given = next((outputs[k] for k in CONTEXT_KEYS if outputs.get(k)), None)
            contexts = _contexts(given)
        metadata = {key: kwargs[key] for key in self.prompt.metadata_keys if key in kwargs}
        return Sample(
            id=self.__name__,
            question=(_text(inputs, QUESTION_KEYS) if "question" in reads else None) or "",
            answer=_text(outputs, ANSWER_KEYS) if "answer" in reads else None,
            contexts=contexts,
            reference=_text(reference_outputs, REFERENCE_KEYS) if "reference" in reads else None,
            metadata=metadata,
        )

    async def acall(
        self,
        *,
        inputs: Any = None,
        outputs: Any = None,
        reference_outputs: Any = None,
        **kwargs: Any,
    ) -> JudgeResult:
        """Judge one call's data (the async form of calling the evaluator)."""
        sample = self.sample(
            inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
        )
        scores = await self.scorer.ascore(sample)
        return self.result(scores[self.spec.name])

    def __call__(
        self,
        *,
        inputs: Any = None,
        outputs: Any = None,
        reference_outputs: Any = None,
        **kwargs: Any,
    ) -> JudgeResult:
        """openevals' call: ``evaluator(inputs=..., outputs=..., reference_outputs=...,
        **placeholders)``; safe inside a running event loop; judge calls are traced beneath
        the current LangSmith run."""
        return run_sync(
            carry_context(
                self.acall(
                    inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
                )
            )
        )

    def result(self, score: Score) -> JudgeResult:
        """A ragbridge `Score` in openevals' result shape (the details in ``metadata``)."""
        info: dict[str, Any] = {
            "ragbridge_metric": self.spec.name,
            "kind": self.spec.kind,
            "value": score.value,
            "details": score.details,
            "judge_model": score.judge_model,
            "prompt_version": score.prompt_version,
            "usage": score.usage.model_dump(),
        }
        if score.failure is not None:
            failure = self._named(score.failure)
            info["failure"] = {"kind": failure.kind.value, "message": failure.message}
            comment = f"failed ({failure.kind.value}): {failure.message}"
            return JudgeResult(key=self.feedback_key, score=None, comment=comment, metadata=info)
        if score.value is None:
            comment = f"skipped: {score.reason}"
            return JudgeResult(key=self.feedback_key, score=None, comment=comment, metadata=info)
        return JudgeResult(
            key=self.feedback_key,
            score=self._score(score),
            comment=score.reason if self.use_reasoning else None,
            metadata=info,
        )

    def _score(self, score: Score) -> bool | float:
        assert score.value is not None
        details = score.details if isinstance(score.details, Mapping) else {}
        if self.spec.kind == "aspect":
            return bool(details.get("verdict", score.value >= 0.5))
        choices: Choices | None = self.prompt.choices
        if choices is not None:
            return choices.value_at(float(details.get("raw", 0)))
        return score.value

    def _named(self, failure: Failure) -> Failure:
        """A missing field said in openevals' terms: the placeholder and the argument."""
        if failure.kind is not FailureKind.MISSING_INPUT:
            return failure
        for field, placeholder in self.prompt.placeholders.items():
            if f"'{field}'" in failure.message:
                argument = ARGUMENT_OF.get(field, placeholder)
                message = (
                    f"{failure.message}: the prompt's {{{placeholder}}} needs "
                    f"{argument}=... in the evaluator call"
                )
                return Failure(kind=failure.kind, message=message)
        return failure

    def __repr__(self) -> str:
        return f"<LLMJudge {self.feedback_key!r}: {self.spec.kind} {self.spec.name!r}>"


def _built(
    *,
    prompt: Any,
    feedback_key: str,
    judge: Any,
    model: str | None,
    system: str | None,
    continuous: bool,
    choices: Sequence[float] | None,
    use_reasoning: bool,
    few_shot_examples: Sequence[Mapping[str, Any]] | None,
    output_schema: Any,
    structured_output_kwargs: Mapping[str, Any] | None,
    name: str | None,
    scale: tuple[int, int] | None,
    evaluation_steps: Sequence[str] | None,
    settings: Settings | None,
    options: JudgeOptions,
) -> LLMJudge:
    if output_schema is not None:
        raise ValueError(
            "output_schema is not supported: ragbridge's judge returns a criterion's score and "
            "reason; keep openevals for free-form structured output"
        )
    read = read_prompt(
        prompt,
        name=name if name is not None else criterion_name(feedback_key),
        system=system,
        continuous=continuous,
        choices=choices,
        few_shot_examples=few_shot_examples,
        scale=scale,
        evaluation_steps=evaluation_steps,
    )
    made = _judge(judge, model, structured_output_kwargs)
    given = {"judge": made} if made is not None else {}
    config = Settings.merged(settings, **given, **options)
    if config.judge is None:
        raise ValueError(
            "create_llm_as_judge needs a judge: pass judge=<a LangChain chat model, an OpenAI "
            "client with model=..., or a ragbridge Judge>, or model='openai:MODEL'"
        )
    return LLMJudge(
        read,
        feedback_key=feedback_key,
        use_reasoning=use_reasoning,
        settings=traced_settings(config),
    )


def create_llm_as_judge(
    *,
    prompt: str,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: Sequence[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: Sequence[Mapping[str, Any]] | None = None,
    output_schema: Any = None,
    structured_output_kwargs: Mapping[str, Any] | None = None,
    name: str | None = None,
    scale: tuple[int, int] | None = None,
    evaluation_steps: Sequence[str] | None = None,
    settings: Settings | None = None,
    **options: Unpack[JudgeOptions],
) -> LLMJudge:
    """openevals' ``create_llm_as_judge``, judged as a ragbridge criterion (see the module doc).

    openevals' arguments keep their meaning; ragbridge adds ``name`` (the criterion's name;
    default: ``feedback_key`` made a valid name), ``scale`` (the integer scale of
    ``continuous=True``, default 0..10), ``evaluation_steps`` (a scored criterion's steps;
    default: written once per run by the judge), ``settings`` and the settings keywords
    (``cache=``, ``timeout=``, ...). Returns an `LLMJudge`, called as
    ``evaluator(inputs=..., outputs=..., reference_outputs=..., **placeholders)``.
    """
    return _built(
        prompt=prompt,
        feedback_key=feedback_key,
        judge=judge,
        model=model,
        system=system,
        continuous=continuous,
        choices=choices,
        use_reasoning=use_reasoning,
        few_shot_examples=few_shot_examples,
        output_schema=output_schema,
        structured_output_kwargs=structured_output_kwargs,
        name=name,
        scale=scale,
        evaluation_steps=evaluation_steps,
        settings=settings,
        options=options,
    )


def create_async_llm_as_judge(
    *,
    prompt: str,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: Sequence[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: Sequence[Mapping[str, Any]] | None = None,
    output_schema: Any = None,
    structured_output_kwargs: Mapping[str, Any] | None = None,
    name: str | None = None,
    scale: tuple[int, int] | None = None,
    evaluation_steps: Sequence[str] | None = None,
    settings: Settings | None = None,
    **options: Unpack[JudgeOptions],
) -> Callable[..., Awaitable[JudgeResult]]:
    """openevals' ``create_async_llm_as_judge``: the same evaluator as `create_llm_as_judge`,
    as an ``async def`` (what ``langsmith.aevaluate`` awaits). Its ``judge`` attribute is the
    `LLMJudge` behind it."""
    judge_object = _built(
        prompt=prompt,
        feedback_key=feedback_key,
        judge=judge,
        model=model,
        system=system,
        continuous=continuous,
        choices=choices,
        use_reasoning=use_reasoning,
        few_shot_examples=few_shot_examples,
        output_schema=output_schema,
        structured_output_kwargs=structured_output_kwargs,
        name=name,
        scale=scale,
        evaluation_steps=evaluation_steps,
        settings=settings,
        options=options,
    )

    async def evaluator(
        *,
        inputs: Any = None,
        outputs: Any = None,
        reference_outputs: Any = None,
        **kwargs: Any,
    ) -> JudgeResult:
        return await judge_object.acall(
            inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
        )

    evaluator.__name__ = judge_object.__name__
    evaluator.judge = judge_object  # type: ignore[attr-defined]
    return evaluator
