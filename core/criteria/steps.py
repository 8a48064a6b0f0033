"""Evaluation steps of a scored criterion: given, frozen, or written once per run by the judge.

G-Eval has the judge expand a criterion into evaluation steps ("auto chain-of-thought") and
then score with them. Users of the peers report the cost of doing that on every call or every
run: the steps move, so the yardstick moves (the same answer passes one run and fails the
next). Here the steps of a criterion are

* **given** by the user (``evaluation_steps``), or **frozen** into a lock beside the criteria
  file (`ragbridge.core.criteria.lock`), and then never asked for; or
* **generated** once per run by the judge (``criteria.steps``), shared by every sample of the
  run however many run at once (`StepsSource`, safe across threads and event loops), and kept
  in the reply cache like any judge reply, so a rerun asks nothing.

Every set of steps has a version, `steps_version`: a hash of the criterion and the steps, shown
in each Score's details and in its ``prompt_version``, so two runs scored with different steps
are told apart.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..judging.engine import JudgeCall, JudgeEngine
from ..metrics.base import MetricContext
from ..prompts.criteria import CRITERIA_STEPS, Plain, StepsReply
from ..results.evaluation import Failure
from .spec import Criterion

__all__ = [
    "Steps",
    "StepsOutcome",
    "StepsSource",
    "criteria_sha",
    "generate_steps",
    "steps_version",
]

StepsOrigin = Literal["given", "generated", "frozen"]


def _digest(payload: object) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def criteria_sha(spec: Criterion) -> str:
    """What generated steps depend on: the criterion's words, its scale and the fields read.
    Frozen steps whose criterion no longer has this hash are stale."""
    return _digest({"criteria": spec.criteria, "scale": list(spec.scale), "reads": spec.reads})


def steps_version(criteria: str, steps: Sequence[str]) -> str:
    """12 hex digits naming one criterion with one set of steps."""
    return _digest({"criteria": criteria, "steps": list(steps)})[:12]


@dataclass(frozen=True)
class Steps:
    """The steps a criterion is scored with, where they came from, and their version."""

    steps: tuple[str, ...]
    source: StepsOrigin
    version: str


@dataclass(frozen=True)
class StepsOutcome:
    """`StepsSource.get`'s answer: the steps, or the failure of writing them; the call that
    wrote them (None when given or frozen) and whether this caller paid for it."""

    steps: Steps | None
    call: JudgeCall[StepsReply] | None = None
    owned: bool = False

    @property
    def failure(self) -> Failure | None:
        return None if self.call is None else self.call.failure


async def generate_steps(spec: Criterion, judge: JudgeEngine) -> JudgeCall[StepsReply]:
    """One ``criteria.steps`` call writing ``spec``'s evaluation steps (cached by the engine:
    the same criterion, scale and fields ask the same request)."""
    return await CRITERIA_STEPS.ask(
        judge,
        criterion=spec.criteria,
        fields=Plain(", ".join(spec.reads)),
        low=spec.scale[0],
        high=spec.scale[1],
    )


class StepsSource:
    """The steps of one criterion for one run: known at once when given or frozen, else
    written by the first sample that needs them while every other sample waits for that call.

    The memo is a `MetricContext`'s (`MetricContext.shared`): one computation however many
    samples ask at once, from any thread or event loop. It is keyed by the judge's model and an
    attempt number: a failed call is shared by those who waited for it, and the next sample
    tries again rather than the whole run inheriting one timeout.
    """

    def __init__(self, spec: Criterion, *, frozen: bool = False) -> None:
        self.spec = spec
        self.source: StepsOrigin = (
            "frozen" if frozen else "given" if spec.evaluation_steps else "generated"
        )
        if frozen and not spec.evaluation_steps:
            raise ValueError(f"criterion {spec.name!r}: frozen steps must be given")
        self.planned = False
        """Whether a dry run already counted the steps call (once per run, not per sample)."""
        self._memo = MetricContext()
        self._lock = threading.Lock()
        self._attempt: dict[str, int] = {}

    def renew(self) -> None:
        """Forget the steps written so far, so the next run writes them again: what a repeat
        of the run does (``ragbridge eval --repeat``: runs 2..N ask the judge afresh, and
        steps that move between runs are part of what the flip rate measures)."""
        with self._lock:
            self._memo = MetricContext()
            self._attempt = {}
            self.planned = False

    def __repr__(self) -> str:
        # stable (no address): a metric's configuration is part of its kept Scores' key
        return f"StepsSource({self.spec.name!r}, {self.source!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # metrics travel to workers (the Dask sink): the spec travels, the memo starts afresh
        return (_restored, (self.spec, self.source == "frozen"))

    @property
    def known(self) -> Steps | None:
        """The steps when given or frozen (no call needed), else None."""
        steps = self.spec.evaluation_steps
        if not steps:
            return None
        return Steps(steps, self.source, steps_version(self.spec.criteria, steps))

    async def get(self, judge: JudgeEngine) -> StepsOutcome:
        """The steps to score with, writing them with ``judge`` if nobody has yet this run."""
        known = self.known
        if known is not None:
            return StepsOutcome(known)
        model = judge.model
        with self._lock:
            attempt = self._attempt.get(model, 0)
        call, owned = await self._memo.shared(
            ("criteria.steps", model, attempt), lambda: generate_steps(self.spec, judge)
        )
        if call.value is None:
            with self._lock:
                if self._attempt.get(model, 0) == attempt:
                    self._attempt[model] = attempt + 1
            return StepsOutcome(None, call, owned)
        steps = tuple(call.value.steps)
        made = Steps(steps, "generated", steps_version(self.spec.criteria, steps))
        return StepsOutcome(made, call, owned)


def _restored(spec: Criterion, frozen: bool) -> StepsSource:
    """A `StepsSource` unpickled: the same spec and origin, a fresh memo."""
    return StepsSource(spec, frozen=frozen)
