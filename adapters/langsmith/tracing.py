"""How ragbridge's evaluators show up in LangSmith: one evaluator run, the judge calls under it.

Why it exists: LangSmith traces a plain function evaluator as a run of its own in the
``evaluators`` project (langsmith 0.14: ``DynamicRunEvaluator.evaluate_run`` wraps the function
with ``ensure_traceable`` and runs it with ``run_id=evaluator_run_id``), and the feedback's
``source_run_id`` points at that run — the "view evaluator run" link of the experiment view. The
LLM calls the function makes (a LangChain grader model) land beneath it, because LangChain
traces itself into the current run. ragbridge's evaluators do the same here:

* `evaluator_run` opens the evaluator's run like ``DynamicRunEvaluator`` does: named after the
  evaluator, ``run_id`` the ``evaluator_run_id`` langsmith passes in, metadata
  ``target_run_id`` (and ``experiment``), inputs ``inputs`` / ``outputs`` /
  ``reference_outputs`` as a three-argument function evaluator records them. It follows the
  tracing mode ``evaluate`` sets (posted when results are uploaded, kept local when not, none
  when evaluator tracing is disabled).
* `TracedJudge` wraps the set's judge so each judge call is a child run of the current run:
  an ``llm`` run named after the ragbridge prompt (``judge:grader.correctness``) with the
  messages, the reply and its token usage. A judge whose framework traces its own calls
  (ragbridge's LangChain wrapper: LangChain posts an ``llm`` run with usage) gets a ``chain`` run
  instead, holding LangChain's, so tokens are not counted twice. A reply served from the cache
  makes no call and shows no run; outside any trace the judge is called as it is.
* `carry_context` hands the caller's context variables (LangSmith's current run among them) to
  a coroutine that `ragbridge.core.scoring.runner.run_sync` may run on a worker thread (it does
  when an event loop is already running), so the judge calls still find their parent.
"""

from __future__ import annotations

import contextvars
import inspect
import re
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.settings import Settings

from ._framework import run_helpers
from .reading import field_of

__all__ = ["TracedJudge", "carry_context", "evaluator_run", "traced_settings"]

T = TypeVar("T")

_TASK = re.compile(r"\[ragbridge task: (?P<id>[\w.\-]+) v[\w.\-]+\]")
_SELF_TRACING = ("ragbridge.adapters.langchain",)
"""Modules of judge wrappers whose framework traces each call into LangSmith by itself."""


def _task_of(messages: Sequence[Message]) -> str | None:
    """The ragbridge prompt a call sends (its system message's task tag), or None."""
    for message in messages:
        found = _TASK.search(str(message.get("content", "")))
        if found:
            return found["id"]
    return None


class TracedJudge:
    """A `Judge` whose calls are child runs of the current LangSmith run (see the module doc).

    Everything but ``generate`` is the wrapped judge's: ``model`` (so cache keys and the
    ``judge_model`` of every Score are unchanged) and any other attribute.
    """

    def __init__(self, judge: Any) -> None:
        self.judge = judge
        self.traces_itself = type(judge).__module__.startswith(_SELF_TRACING)

    @property
    def model(self) -> str:
        return str(self.judge.model)

    def __getattr__(self, name: str) -> Any:
        if name == "judge":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.judge, name)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        if run_helpers.get_current_run_tree() is None:
            reply: JudgeReply = await self.judge.generate(messages, schema=schema)
            return reply
        task = _task_of(messages)
        metadata: dict[str, Any] = {"ls_model_name": self.model, "ls_model_type": "chat"}
        if task is not None:
            metadata["ragbridge_task"] = task
        if schema is not None:
            metadata["schema"] = schema.__name__
        async with run_helpers.trace(
            name=f"judge:{task}" if task else "judge",
            run_type="chain" if self.traces_itself else "llm",
            inputs={"messages": [dict(m) for m in messages]},
            metadata=metadata,
        ) as run:
            reply = await self.judge.generate(messages, schema=schema)
            outputs: dict[str, Any] = {
                "choices": [{"message": {"role": "assistant", "content": reply.text}}]
            }
            if isinstance(reply.parsed, BaseModel):
                outputs["parsed"] = reply.parsed.model_dump(mode="json")
            if not self.traces_itself:
                usage = reply.usage
                outputs["usage_metadata"] = {
                    "input_tokens": usage.prompt_tokens,
                    "output_tokens": usage.completion_tokens,
                    "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                }
            run.end(outputs=outputs)
        return reply

    def __repr__(self) -> str:
        return f"TracedJudge({self.judge!r})"


def _async_judge(judge: Any) -> bool:
    generate = getattr(judge, "generate", None)
    return generate is not None and inspect.iscoroutinefunction(generate)


def traced_settings(settings: Settings) -> Settings:
    """``settings`` with its judge wrapped in `TracedJudge`, when it is a ragbridge judge.

    Called on settings the core has built, i.e. after it wrapped a framework model (a LangChain
    chat model, ...) into a judge; anything else (None, a pre-built `JudgeEngine`, an object the
    core would refuse) is left exactly as given, so the core's own checks and errors apply.
    """
    judge = settings.judge
    if judge is None or isinstance(judge, (JudgeEngine, TracedJudge)) or not _async_judge(judge):
        return settings
    return settings.replace(judge=TracedJudge(judge))


def carry_context(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """``coro`` set up to run with the caller's context variables, on whatever thread."""
    carried = contextvars.copy_context()

    async def within() -> T:
        for var, value in carried.items():
            var.set(value)
        return await coro

    return within()


def _as_dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def evaluator_run(name: str, run: Any, example: Any, evaluator_run_id: Any) -> run_helpers.trace:
    """The evaluator's own run, opened like langsmith's ``DynamicRunEvaluator`` opens it."""
    metadata: dict[str, Any] = {"target_run_id": field_of(run, "id")}
    session = field_of(run, "session_id")
    if session:
        metadata["experiment"] = str(session)
    inputs = {
        "inputs": _as_dict(field_of(example, "inputs")),
        "outputs": _as_dict(field_of(run, "outputs")),
        "reference_outputs": _as_dict(field_of(example, "outputs")),
    }
    return run_helpers.trace(
        name=name, run_type="chain", inputs=inputs, run_id=evaluator_run_id, metadata=metadata
    )
