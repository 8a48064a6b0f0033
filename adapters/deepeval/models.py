"""Judges across the border: DeepEval's metrics on a ragbridge judge, DeepEval's ``model=``.

* **`DeepEvalJudge`** is a `DeepEvalBaseLLM` whose calls go through a ragbridge `JudgeEngine`,
  so DeepEval's prompts get ragbridge's retries, timeout, concurrency cap, usage accounting and
  cache (keyed by template ``"deepeval"`` and DeepEval's version). A failed call raises
  `JudgeCallFailed` (a RuntimeError): DeepEval swallows a ``TypeError`` from ``generate`` and
  silently retries without the schema.
* **`judge_of_model`** reads DeepEval's ``model=`` as a ragbridge ``judge=``: a model object is
  passed on (`Settings` wraps DeepEval, LangChain, LlamaIndex and OpenAI models); a model name
  is resolved by DeepEval exactly as its own metrics resolve it, so ``model="gpt-4.1"`` means
  the same model, key and provider settings as before.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel
from typing_extensions import Unpack

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import Judge, Message
from ragbridge.core.results.evaluation import Failure, FailureKind, Usage
from ragbridge.core.scoring.runner import build_engines, run_sync
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import DEEPEVAL_VERSION, DeepEvalBaseLLM

__all__ = ["DeepEvalJudge", "JudgeCallFailed", "judge_of_model"]


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
