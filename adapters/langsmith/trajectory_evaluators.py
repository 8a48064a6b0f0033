"""agentevals' trajectory evaluators for LangSmith, scored by ragbridge's measures.

Code written against agentevals changes one import line:
``from ragbridge.adapters.langsmith import create_trajectory_match_evaluator`` (and
``create_trajectory_llm_as_judge``). The arguments, the call and the result are agentevals':
``evaluator(outputs=..., reference_outputs=...)`` with two trajectories as message lists (OpenAI
Chat Completions dicts, LangChain messages, or a dict holding a ``messages`` list), returning
``{"key", "score", "comment", "metadata"}``, which ``langsmith.evaluate`` takes as it is.

* **Trajectory match** (`create_trajectory_match_evaluator`). The messages are read into calls
  (tool name and JSON arguments) and the score is ragbridge's trajectory match
  (`ragbridge.core.agent.trajectory_match`) in agentevals' four modes and tool-argument modes.
  By default (``compat="agentevals"``) it is equal to agentevals' on the same inputs (the tests
  compare them), oddities included; ``compat="ragbridge"`` pairs calls by a maximum matching
  instead of first fit and compares arguments the same way round in every mode (the core's
  module doc lists the differences). ``strict`` compares the two
  message lists message by message as agentevals does — same length, same roles, the same
  calls in each assistant message, in any order within one message — so its score depends on
  how calls are grouped into messages, not only on the calls. The feedback key is agentevals'
  (``trajectory_<mode>_match``); the metadata says which mode ran and, when the score is False,
  why (``reason``), which agentevals does not say.
* **Trajectory judge** (`create_trajectory_llm_as_judge`). agentevals formats both trajectories
  as text into an LLM prompt. Here the trajectory is rendered by ragbridge (`render_trajectory`:
  each message, each tool call with its arguments and what the tool returned) and judged as a
  ragbridge criterion (`ragbridge.adapters.langsmith.criteria.create_llm_as_judge`): the prompt
  is data inside ragbridge's delimited blocks, ``{outputs}`` shows the trajectory and
  ``{reference_outputs}`` the reference trajectory. The default prompts are ragbridge's own
  wording, under agentevals' names (`TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE`,
  `TRAJECTORY_ACCURACY_PROMPT`). Differences, as for ``create_llm_as_judge``: a prompt naming
  ``{reference_outputs}`` called without one gives ``score: None`` and a comment naming the
  argument, before any judge call (agentevals fills in an empty reference and judges); a judge
  failure is ``score: None`` with the reason; ``judge=`` also takes any judge ragbridge takes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, get_args

from typing_extensions import Unpack

from ragbridge.core.agent.trajectory_match import (
    ToolArgsMatchMode,
    ToolArgsMatchOverrides,
    TrajectoryCompat,
    TrajectoryMatchMode,
    TrajectoryMatchResult,
    match_trajectory_messages,
)
from ragbridge.core.scoring.runner import run_sync
from ragbridge.core.settings import Settings
from ragbridge.core.trajectory import Step
from ragbridge.core.turn import ToolCall

from .criteria import JudgeOptions, JudgeResult, LLMJudge, create_llm_as_judge
from .messages import message_fields, message_pair, message_role, message_text, message_tool_call
from .tracing import carry_context
from .trajectories import json_safe

__all__ = [
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "ReadMessage",
    "ToolArgsMatchMode",
    "ToolArgsMatchOverrides",
    "TrajectoryJudge",
    "TrajectoryMatchEvaluator",
    "TrajectoryMatchMode",
    "TrajectoryResult",
    "create_async_trajectory_llm_as_judge",
    "create_async_trajectory_match_evaluator",
    "create_trajectory_llm_as_judge",
    "create_trajectory_match_evaluator",
    "read_trajectory_messages",
    "render_trajectory",
    "steps_from_messages",
]

_MODES: tuple[str, ...] = get_args(TrajectoryMatchMode)
_ARG_MODES: tuple[str, ...] = get_args(ToolArgsMatchMode)
_KEPT_ROLES = ("developer", "function")  # roles agentevals keeps apart from system / tool


class TrajectoryResult(TypedDict):
    """What a trajectory evaluator returns: agentevals' (openevals') result shape."""

    key: str
    score: bool | float | None
    comment: str | None
    metadata: dict[str, Any] | None


# --------------------------------------------------------------------------- reading messages


@dataclass(frozen=True)
class ReadMessage:
    """One message of a trajectory as the evaluators read it.

    ``role`` is the role agentevals compares (``user``, ``assistant``, ``system``, ``tool``,
    and ``developer`` / ``function`` kept as written), ``calls`` an assistant message's tool
    calls (arguments as JSON values), ``tool_call_id`` the call a tool message answers.
    """

    role: str
    text: str | None
    calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


def _message_list(messages: Any, argument: str) -> list[Any]:
    """The list agentevals accepts: a list, one message, or a dict holding ``messages``."""
    if messages is None:
        return []
    if isinstance(messages, Mapping):
        if "role" in messages or "type" in messages or messages.get("lc") == 1:
            return [messages]
        if "messages" in messages:
            inner = messages["messages"]
            return list(inner) if isinstance(inner, (list, tuple)) else [inner]
        raise ValueError(
            f"{argument}: a dict must hold a 'messages' list or be one message (keys: "
            f"{', '.join(map(str, messages)) or 'none'})"
        )
    if isinstance(messages, list):
        return messages
    return [messages]


def _role_name(message: Any, where: str) -> str:
    role = message_role(message)
    if role is None:
        raise ValueError(f"{where}: not a chat message (no role or type): {message!r:.80}")
    pair = message_pair(message)
    fields = message_fields(message) or {}
    raw = pair[0] if pair is not None else fields.get("role") or fields.get("type")
    name = str(raw).lower().removesuffix("message")
    return name if name in _KEPT_ROLES else role


def read_trajectory_messages(messages: Any, *, argument: str = "outputs") -> list[ReadMessage]:
    """A trajectory (see the module doc for the shapes) as `ReadMessage`s; ValueError
    naming ``argument`` and the message index when one is not a chat message."""
    read: list[ReadMessage] = []
    for index, message in enumerate(_message_list(messages, argument)):
        where = f"{argument}[{index}]"
        role = _role_name(message, where)
        fields = message_fields(message) or {}
        calls: tuple[ToolCall, ...] = ()
        if role == "assistant":
            calls = tuple(_read_call(c, where) for c in fields.get("tool_calls") or [])
        call_id = fields.get("tool_call_id") if role == "tool" else None
        read.append(
            ReadMessage(
                role=role,
                text=message_text(message),
                calls=calls,
                tool_call_id=None if call_id in (None, "") else str(call_id),
            )
        )
    return read


def _read_call(raw: Any, where: str) -> ToolCall:
    """A tool call with its arguments as JSON carries them (tuples as lists): what agentevals
    compares. An empty id (agentevals writes ``""`` for a missing one) is no id."""
    if isinstance(raw, Mapping) and raw.get("id") == "":
        raw = {k: v for k, v in raw.items() if k != "id"}
    call = message_tool_call(raw, where)
    return ToolCall(name=call.name, args=json_safe(call.args), id=call.id)


def steps_from_messages(messages: Any, *, argument: str = "outputs") -> list[Step]:
    """The steps a message trajectory made: each tool call, in order, with the tool message
    answering it (the one naming its id; for a call without an id, the next unclaimed tool
    message without one) as its output."""
    read = read_trajectory_messages(messages, argument=argument)
    claimed: set[int] = set()
    steps: list[Step] = []
    for position, message in enumerate(read):
        for call in message.calls:
            answer = None
            for later in range(position + 1, len(read)):
                candidate = read[later]
                if later in claimed or candidate.role not in ("tool", "function"):
                    continue
                if candidate.tool_call_id == call.id:
                    answer = later
                    break
            if answer is not None:
                claimed.add(answer)
            output = read[answer].text if answer is not None else None
            steps.append(Step(name=call.name, args=dict(call.args), id=call.id, output=output))
    return steps


def render_trajectory(messages: Any, *, argument: str = "outputs") -> str:
    """A trajectory as the judge reads it: one numbered entry per message; an assistant's tool
    calls with their JSON arguments; a tool message with the tool it answers (by call id, else
    the earliest call without an id still unanswered)."""
    read = read_trajectory_messages(messages, argument=argument)
    pending: list[ToolCall] = []
    lines: list[str] = []
    for number, message in enumerate(read, start=1):
        if message.role == "assistant" and message.calls:
            said = f" says: {message.text}" if message.text else ""
            lines.append(f"{number}. assistant{said}")
            for call in message.calls:
                args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
                lines.append(f"   calls {call.name} with {args}")
            pending.extend(message.calls)
        elif message.role in ("tool", "function"):
            answered = next((c for c in pending if c.id == message.tool_call_id), None)
            if answered is not None:
                pending.remove(answered)
            tool = answered.name if answered is not None else "(unnamed)"
            lines.append(f"{number}. tool {tool} returns: {message.text or ''}")
        else:
            lines.append(f"{number}. {message.role}: {message.text or ''}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- trajectory match


def _roles_and_calls(read: Sequence[ReadMessage]) -> list[tuple[str, list[ToolCall] | None]]:
    """Messages as the core's ``(role, calls or None)``: a message without calls has None,
    as agentevals tells a message with no ``tool_calls`` from one with some."""
    return [(m.role, list(m.calls) if m.calls else None) for m in read]


class TrajectoryMatchEvaluator:
    """The evaluator `create_trajectory_match_evaluator` returns; call it as agentevals'
    evaluator is called: ``evaluator(outputs=..., reference_outputs=...)``.

    ``compat`` is the core's switch (`ragbridge.core.agent.trajectory_match`): ``"agentevals"``
    (the default here, so a changed import changes no score) or ``"ragbridge"`` (pairs calls by
    a maximum matching and always compares the call made with the expected call).
    """

    def __init__(
        self,
        *,
        trajectory_match_mode: TrajectoryMatchMode = "strict",
        tool_args_match_mode: ToolArgsMatchMode = "exact",
        tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
        compat: TrajectoryCompat = "agentevals",
    ) -> None:
        if trajectory_match_mode not in _MODES:
            raise ValueError(
                f"Invalid trajectory match type: {trajectory_match_mode!r}; use one of "
                f"{', '.join(_MODES)}"
            )
        if tool_args_match_mode not in _ARG_MODES:
            raise ValueError(
                f"Invalid tool args match mode: {tool_args_match_mode!r}; use one of "
                f"{', '.join(_ARG_MODES)}"
            )
        self.trajectory_match_mode: TrajectoryMatchMode = trajectory_match_mode
        self.tool_args_match_mode: ToolArgsMatchMode = tool_args_match_mode
        self.tool_args_match_overrides = (
            None if tool_args_match_overrides is None else dict(tool_args_match_overrides)
        )
        self.compat: TrajectoryCompat = compat
        self.feedback_key = f"trajectory_{trajectory_match_mode}_match"
        self.__name__ = self.feedback_key  # agentevals' evaluator run name

    def match(self, outputs: Any, reference_outputs: Any) -> TrajectoryMatchResult:
        """The core's verdict on two trajectories (message lists, as the evaluator takes)."""
        made = read_trajectory_messages(outputs, argument="outputs")
        expected = read_trajectory_messages(reference_outputs, argument="reference_outputs")
        return match_trajectory_messages(
            _roles_and_calls(made),
            _roles_and_calls(expected),
            mode=self.trajectory_match_mode,
            tool_args_match_mode=self.tool_args_match_mode,
            tool_args_match_overrides=self.tool_args_match_overrides,
            compat=self.compat,
        )

    def __call__(
        self, *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> TrajectoryResult:
        """agentevals' call; other keywords (``inputs=``, ...) are accepted and not read."""
        found = self.match(outputs, reference_outputs)
        info: dict[str, Any] = {
            "ragbridge_metric": "trajectory_match",
            "mode": self.trajectory_match_mode,
            "tool_args_match_mode": self.tool_args_match_mode,
            "compat": self.compat,
        }
        if not found.matched:
            info["unmatched_calls"] = list(found.unmatched_calls)
            info["unmatched_reference"] = list(found.unmatched_reference)
            if found.message is not None:
                info["message"] = found.message
            info["reason"] = self._reason(found)
        return TrajectoryResult(
            key=self.feedback_key, score=found.matched, comment=None, metadata=info
        )

    async def acall(
        self, *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> TrajectoryResult:
        """The same, as a coroutine (what agentevals' async evaluator is)."""
        return self(outputs=outputs, reference_outputs=reference_outputs, **kwargs)

    def _reason(self, found: TrajectoryMatchResult) -> str:
        mode = self.trajectory_match_mode
        if mode == "strict" and found.message is not None:
            return (
                f"strict: the trajectories differ at message {found.message} (its role, its "
                "tool calls, or one trajectory ends there)"
            )
        parts = [f"{mode}: no match"]
        if found.unmatched_calls:
            parts.append(f"calls made without a partner: {list(found.unmatched_calls)}")
        if found.unmatched_reference:
            parts.append(f"expected calls not made: {list(found.unmatched_reference)}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return (
            f"<TrajectoryMatchEvaluator {self.feedback_key!r}: tool args "
            f"{self.tool_args_match_mode!r}, compat {self.compat!r}>"
        )


def create_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
    compat: TrajectoryCompat = "agentevals",
) -> TrajectoryMatchEvaluator:
    """agentevals' ``create_trajectory_match_evaluator``, scored by ragbridge's trajectory match.

    ``trajectory_match_mode``: ``strict``, ``unordered``, ``subset`` (no call beyond the
    reference's) or ``superset`` (every reference call made). ``tool_args_match_mode``:
    ``exact``, ``ignore``, ``subset`` or ``superset``. ``tool_args_match_overrides``: per tool,
    a mode, a list of argument paths, or a function ``(args, reference_args) -> bool``.
    ``compat`` as `TrajectoryMatchEvaluator`. Returns ``{"key": "trajectory_<mode>_match",
    "score": True/False, "comment": None, "metadata": {...}}``.
    """
    return TrajectoryMatchEvaluator(
        trajectory_match_mode=trajectory_match_mode,
        tool_args_match_mode=tool_args_match_mode,
        tool_args_match_overrides=tool_args_match_overrides,
        compat=compat,
    )


def create_async_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: ToolArgsMatchOverrides | None = None,
    compat: TrajectoryCompat = "agentevals",
) -> Callable[..., Awaitable[TrajectoryResult]]:
    """agentevals' ``create_async_trajectory_match_evaluator``: `create_trajectory_match_evaluator`
    as an ``async def``; its ``evaluator`` attribute is the `TrajectoryMatchEvaluator`."""
    matcher = create_trajectory_match_evaluator(
        trajectory_match_mode=trajectory_match_mode,
        tool_args_match_mode=tool_args_match_mode,
        tool_args_match_overrides=tool_args_match_overrides,
        compat=compat,
    )

    async def evaluator(
        *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> TrajectoryResult:
        return await matcher.acall(outputs=outputs, reference_outputs=reference_outputs, **kwargs)

    evaluator.__name__ = matcher.__name__
    evaluator.evaluator = matcher  # type: ignore[attr-defined]
    return evaluator


# --------------------------------------------------------------------------- trajectory judge

TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE = """\
Grade how well an AI agent's trajectory (the messages it exchanged and the tools it called, in \
order) compares with a reference trajectory for the same task.

The trajectory meets this criterion when:
- each step follows sensibly from the ones before it and moves the task forward;
- it does not wander: an unneeded step or two is acceptable, repeated or pointless calls are not;
- it gets to what the reference gets to by equivalent means: the same tools with arguments of \
the same meaning, not necessarily worded alike, nor in the same order where the order does not \
matter.

Reference trajectory:
{reference_outputs}

Trajectory to grade:
{outputs}
"""
"""The trajectory judge's default prompt (ragbridge's wording; agentevals' name)."""

TRAJECTORY_ACCURACY_PROMPT = """\
Grade an AI agent's trajectory (the messages it exchanged and the tools it called, in order) \
on its own merits.

First work out the task from the first user message and the final reply, then judge the \
trajectory against that task. It meets this criterion when:
- each step follows sensibly from the ones before it and moves the task forward;
- it does not wander: an unneeded step or two is acceptable, repeated or pointless calls are not;
- the tools it calls suit the task, and what they return is used.

Trajectory to grade:
{outputs}
"""
"""The trajectory judge's prompt without a reference (ragbridge's wording; agentevals' name)."""


def _rendered(messages: Any, argument: str) -> str | None:
    if messages is None or (isinstance(messages, (list, tuple, Mapping)) and not messages):
        return None
    return render_trajectory(messages, argument=argument) or None


class TrajectoryJudge:
    """The evaluator `create_trajectory_llm_as_judge` returns: agentevals' call
    (``evaluator(outputs=..., reference_outputs=..., **kwargs)``) judged by ``judge``, the
    `LLMJudge` of the prompt, on the rendered trajectories (`render_trajectory`)."""

    def __init__(self, judge: LLMJudge) -> None:
        self.judge = judge
        self.feedback_key = judge.feedback_key
        self.__name__ = f"llm_as_{judge.feedback_key}_judge"  # agentevals' run name

    async def acall(
        self, *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> JudgeResult:
        """Judge one trajectory (the async form of calling the evaluator)."""
        return await self.judge.acall(
            outputs=_rendered(outputs, "outputs"),
            reference_outputs=_rendered(reference_outputs, "reference_outputs"),
            **kwargs,
        )

    def __call__(
        self, *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> JudgeResult:
        """agentevals' call; safe inside a running event loop; judge calls are traced beneath
        the current LangSmith run."""
        return run_sync(
            carry_context(
                self.acall(outputs=outputs, reference_outputs=reference_outputs, **kwargs)
            )
        )

    def __repr__(self) -> str:
        return f"<TrajectoryJudge {self.feedback_key!r}: {self.judge.spec.kind}>"


def create_trajectory_llm_as_judge(
    *,
    prompt: str = TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
    model: str | None = None,
    feedback_key: str = "trajectory_accuracy",
    judge: Any = None,
    continuous: bool = False,
    choices: Sequence[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: Sequence[Mapping[str, Any]] | None = None,
    name: str | None = None,
    scale: tuple[int, int] | None = None,
    evaluation_steps: Sequence[str] | None = None,
    settings: Settings | None = None,
    **options: Unpack[JudgeOptions],
) -> TrajectoryJudge:
    """agentevals' ``create_trajectory_llm_as_judge``, judged as a ragbridge criterion.

    agentevals' arguments keep their meaning (``prompt`` a ``str.format`` template naming
    ``{outputs}`` and optionally ``{reference_outputs}``, ``{inputs}`` or a keyword of the
    call); ``name``, ``scale``, ``evaluation_steps``, ``settings`` and the settings keywords
    are `create_llm_as_judge`'s. The result is ``{"key": feedback_key, "score", "comment",
    "metadata"}``: ``True``/``False`` by default, a float in [0, 1] with ``continuous=True``,
    one of ``choices`` with choices.
    """
    built = create_llm_as_judge(
        prompt=prompt,
        feedback_key=feedback_key,
        judge=judge,
        model=model,
        continuous=continuous,
        choices=choices,
        use_reasoning=use_reasoning,
        few_shot_examples=few_shot_examples,
        name=name,
        scale=scale,
        evaluation_steps=evaluation_steps,
        settings=settings,
        **options,
    )
    return TrajectoryJudge(built)


def create_async_trajectory_llm_as_judge(
    *,
    prompt: str = TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
    model: str | None = None,
    feedback_key: str = "trajectory_accuracy",
    judge: Any = None,
    continuous: bool = False,
    choices: Sequence[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: Sequence[Mapping[str, Any]] | None = None,
    name: str | None = None,
    scale: tuple[int, int] | None = None,
    evaluation_steps: Sequence[str] | None = None,
    settings: Settings | None = None,
    **options: Unpack[JudgeOptions],
) -> Callable[..., Awaitable[JudgeResult]]:
    """agentevals' ``create_async_trajectory_llm_as_judge``: `create_trajectory_llm_as_judge`
    as an ``async def`` (what ``langsmith.aevaluate`` awaits); its ``judge`` attribute is the
    `TrajectoryJudge`."""
    judged = create_trajectory_llm_as_judge(
        prompt=prompt,
        model=model,
        feedback_key=feedback_key,
        judge=judge,
        continuous=continuous,
        choices=choices,
        use_reasoning=use_reasoning,
        few_shot_examples=few_shot_examples,
        name=name,
        scale=scale,
        evaluation_steps=evaluation_steps,
        settings=settings,
        **options,
    )

    async def evaluator(
        *, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> JudgeResult:
        return await judged.acall(outputs=outputs, reference_outputs=reference_outputs, **kwargs)

    evaluator.__name__ = judged.__name__
    evaluator.judge = judged  # type: ignore[attr-defined]
    return evaluator
