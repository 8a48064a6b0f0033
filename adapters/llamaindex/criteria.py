"""LlamaIndex's ``GuidelineEvaluator``, judged as a ragbridge `Aspect`.

Why: a LlamaIndex team writes its own yardstick as guidelines
(``GuidelineEvaluator(guidelines="The response should cite the policy number.")``) and runs it
with ``evaluate``/``aevaluate`` or ``BatchEvalRunner``. Here the guidelines are the definition
of an aspect (`ragbridge.core.criteria.Aspect`), so the same evaluator gets what every
ragbridge measure has: the guidelines as data inside a delimited block (a guideline cannot
rewrite the judge's instructions), a verdict with its reason, the reply cache, usage and cost,
``samples=`` self-consistency, and a missing field said before any call. The one-line change is
the import: ``from llama_index.core.evaluation import GuidelineEvaluator`` becomes
``from ragbridge.adapters.llamaindex import GuidelineEvaluator``.

What stays as in LlamaIndex: the constructor's arguments (``llm``, ``guidelines`` — LlamaIndex's
default guidelines when None —, ``eval_template``), ``aevaluate(query, response, contexts,
sleep_time_in_seconds=0)``, and the result: ``passing`` is the verdict, ``score`` 1.0 or 0.0,
``feedback`` the judge's reason. What differs:

* **The template is data.** LlamaIndex formats ``eval_template`` as the instructions; here its
  text (``{guidelines}`` filled in, ``{query}``/``{response}`` pointing at the blocks that hold
  them) becomes the aspect's definition. ``output_parser`` is refused: ragbridge parses its own
  replies.
* **A missing field is a result.** LlamaIndex raises ValueError when ``query`` or ``response``
  is None; here the result is ``invalid_result=True`` with the reason naming the argument, and
  no judge call is made (a raising evaluator is retried three times by ``BatchEvalRunner``).
* **No model is a construction error** naming ``llm=`` and ``Settings.llm``
  (`ragbridge.adapters.llamaindex.defaults`), not an OpenAI ImportError at the first call.
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from ragbridge.core.criteria import Aspect
from ragbridge.core.results.evaluation import Failure, FailureKind, Score
from ragbridge.core.sample import Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import DEFAULT_GUIDELINES, PromptDictType
from .evaluators import RagbridgeEvaluationResult, RagbridgeEvaluator

__all__ = ["GuidelineEvaluator", "guideline_aspect"]

_POINTERS = {"query": "[the QUESTION block]", "response": "[the ANSWER block]"}
_ARGUMENTS = {"question": "query", "answer": "response", "contexts": "contexts"}


def _template_text(template: Any) -> str:
    """The text of an ``eval_template``: a string, or a LlamaIndex prompt's template."""
    if isinstance(template, str):
        return template
    get = getattr(template, "get_template", None)
    if callable(get):
        text = get()
        if isinstance(text, str):
            return text
    raise TypeError(
        f"eval_template must be a string or a LlamaIndex prompt template, got "
        f"{type(template).__name__}"
    )


def _definition(guidelines: str, eval_template: Any) -> str:
    """The aspect's definition: the guidelines, or the template's text with them filled in."""
    if eval_template is None:
        return guidelines
    text = _template_text(eval_template)
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(f"eval_template: not a format template ({exc})") from None
    parts: list[str] = []
    for literal, field, _spec, _conversion in parsed:
        parts.append(literal)
        if field is None:
            continue
        if field == "guidelines":
            parts.append(guidelines)
        elif field in _POINTERS:
            parts.append(_POINTERS[field])
        else:
            raise ValueError(
                f"eval_template: placeholder {{{field}}} is not one GuidelineEvaluator fills "
                "({query}, {response}, {guidelines})"
            )
    return "".join(parts).strip()


def guideline_aspect(
    guidelines: str | None = None,
    eval_template: Any = None,
    *,
    name: str = "guidelines",
    reads: Sequence[str] = ("question", "answer"),
    samples: int = 1,
) -> Aspect:
    """The `Aspect` a ``GuidelineEvaluator`` judges: ``guidelines`` (LlamaIndex's default when
    None) as its definition, or ``eval_template``'s text around them (see the module doc)."""
    text = DEFAULT_GUIDELINES if guidelines is None else guidelines
    return Aspect(
        name=name, definition=_definition(text, eval_template), reads=tuple(reads), samples=samples
    )


class GuidelineEvaluator(RagbridgeEvaluator):
    """LlamaIndex's ``GuidelineEvaluator``: does the response follow the guidelines?

    ``llm``, ``guidelines``, ``eval_template`` as in LlamaIndex; ragbridge adds ``name`` (the
    measure's name in results, default ``"guidelines"``), ``reads`` (the fields the judge sees;
    LlamaIndex's are the query and the response, add ``"contexts"`` to judge against the
    retrieved nodes), ``samples`` (self-consistency: that many verdicts, the majority),
    ``threshold``, ``settings`` and the settings keywords (``cache=``, ...).
    """

    def __init__(
        self,
        llm: Any = None,
        guidelines: str | None = None,
        eval_template: Any = None,
        output_parser: Any = None,
        *,
        name: str = "guidelines",
        reads: Sequence[str] = ("question", "answer"),
        samples: int = 1,
        threshold: float | None = None,
        settings: Settings | None = None,
        **options: Unpack[SettingsOptions],
    ) -> None:
        if output_parser is not None:
            raise ValueError(
                "output_parser is not used: ragbridge's judge replies in its own checked shape "
                "(a verdict and a reason); leave it None"
            )
        aspect = guideline_aspect(
            guidelines, eval_template, name=name, reads=reads, samples=samples
        )
        super().__init__(
            aspect.metric(), threshold=threshold, settings=settings, llm=llm, **options
        )
        self.aspect = aspect
        self.guidelines: str = DEFAULT_GUIDELINES if guidelines is None else guidelines
        """The guidelines judged (LlamaIndex's default ones when none were given)."""
        self._eval_template = eval_template

    def __repr__(self) -> str:
        return f"GuidelineEvaluator(name={self.metric_name!r}, guidelines={self.guidelines!r})"

    # -- PromptMixin: the template is the aspect's text; changing it changes the aspect
    def _get_prompts(self) -> PromptDictType:
        return {} if self._eval_template is None else {"eval_template": self._eval_template}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        template = prompts_dict.get("eval_template")
        if template is None:
            return
        aspect = guideline_aspect(
            self.guidelines,
            template,
            name=self.aspect.name,
            reads=self.aspect.reads,
            samples=self.aspect.samples,
        )
        scorer = Scorer([aspect.metric()], settings=self.scorer.settings)
        self.aspect, self.scorer, self._eval_template = aspect, scorer, template
        self.metric = scorer.metrics[0]

    # -- evaluation
    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        *,
        reference: str | None = None,
        sleep_time_in_seconds: float = 0,
        **kwargs: Any,
    ) -> RagbridgeEvaluationResult:
        """Judge (query, response) against the guidelines; ``sleep_time_in_seconds`` waits
        first, as LlamaIndex's does."""
        if sleep_time_in_seconds:
            await asyncio.sleep(sleep_time_in_seconds)
        return await super().aevaluate(
            query=query, response=response, contexts=contexts, reference=reference, **kwargs
        )

    def result_of(self, sample: Sample, score: Score) -> RagbridgeEvaluationResult:
        """LlamaIndex's result; a missing field names LlamaIndex's argument for it."""
        failure = score.failure
        if failure is not None and failure.kind is FailureKind.MISSING_INPUT:
            for field, argument in _ARGUMENTS.items():
                if f"'{field}'" in failure.message:
                    message = f"{failure.message}: pass {argument}=..."
                    score = score.model_copy(
                        update={"failure": Failure(kind=failure.kind, message=message)}
                    )
                    break
        return super().result_of(sample, score)
