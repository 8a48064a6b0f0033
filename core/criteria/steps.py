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

import dataclasses
import hashlib
import json
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..judging.engine import JudgeCall, JudgeEngine
from ..metrics._shared import planned
from ..metrics.base import MetricContext, PlannedCall
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


def _steps_values(spec: Criterion) -> dict[str, Any]:
    """What ``criteria.steps`` is rendered with for ``spec`` (the call and its plan alike)."""
    return {
        "criterion": spec.criteria,
        "fields": Plain(", ".join(spec.reads)),
        "low": spec.scale[0],
        "high": spec.scale[1],
    }


async def generate_steps(spec: Criterion, judge: JudgeEngine) -> JudgeCall[StepsReply]:
    """One ``criteria.steps`` call writing ``spec``'s evaluation steps (cached by the engine:
    the same criterion, scale and fields ask the same request)."""
    return await CRITERIA_STEPS.ask(judge, **_steps_values(spec))


class _Run:
    """The steps of one criterion in one run: the memo its samples share and the number of
    the attempt in progress (a failed attempt is not inherited by the next sample)."""

    def __init__(self, engine: JudgeEngine) -> None:
        self.engine = weakref.ref(engine)
        self.memo = MetricContext()
        self.attempt = 0


class StepsSource:
    """The steps of one criterion: known at once when given or frozen, else written once per
    run by the first sample that needs them while every other sample of the run waits.

    A run is the judge engine its samples are scored with: `ragbridge.core.evaluate` builds one
    per call and a `ragbridge.core.scoring.scorer.Scorer` one for its life (the engine is "one
    evaluation", its counts and in-flight cap are the run's too). So two runs in one process,
    by name through the registry or with the same metric objects, each write their steps (or
    read them from the reply cache) and each record that call in their own usage; samples of
    one run share one call however many ask at once, from any thread or event loop (the
    run's memo is a `MetricContext`'s, `MetricContext.shared`). A pre-built `JudgeEngine`
    given to several runs makes them one run here, as it does for its counts.

    A failed call is shared by the samples that waited for it; the next sample of the run tries
    again rather than the whole run inheriting one timeout.

    Planning (`plan`) reads nothing of this state and changes none of it: the steps call is
    planned for every sample and counted once per run by the estimate (`PlannedCall.per_run`).
    """

    def __init__(self, spec: Criterion, *, frozen: bool = False) -> None:
        self.spec = spec
        self.source: StepsOrigin = (
            "frozen" if frozen else "given" if spec.evaluation_steps else "generated"
        )
        if frozen and not spec.evaluation_steps:
            raise ValueError(f"criterion {spec.name!r}: frozen steps must be given")
        self._lock = threading.Lock()
        self._runs: dict[int, _Run] = {}

    def renew(self) -> None:
        """Forget the steps written so far, so the next sample writes them again even with
        the same judge engine (``ragbridge eval --repeat`` asks this of runs 2..N; each of
        those runs has an engine of its own anyway, and steps that move between runs are part
        of what the flip rate measures)."""
        with self._lock:
            self._runs = {}

    def __repr__(self) -> str:
        # stable (no address): a metric's configuration is part of its kept Scores' key
        return f"StepsSource({self.spec.name!r}, {self.source!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # metrics travel to workers (the Dask sink): the spec travels, the runs stay here
        return (_restored, (self.spec, self.source == "frozen"))

    @property
    def known(self) -> Steps | None:
        """The steps when given or frozen (no call needed), else None."""
        steps = self.spec.evaluation_steps
        if not steps:
            return None
        return Steps(steps, self.source, steps_version(self.spec.criteria, steps))

    def plan(self) -> PlannedCall | None:
        """The steps call of a dry run, or None when the steps are given or frozen. Planned
        with every sample, counted once per run by the estimate (``per_run``)."""
        if self.known is not None:
            return None
        key = ("criteria.steps", self.spec.name)
        call = planned(CRITERIA_STEPS, key, **_steps_values(self.spec))
        return dataclasses.replace(call, per_run=True)

    def _run(self, judge: JudgeEngine) -> _Run:
        """The run ``judge`` scores (made on first use; runs whose engine is gone are dropped,
        so an engine's id reused by a later one never finds an earlier run's steps)."""
        with self._lock:
            run = self._runs.get(id(judge))
            if run is None or run.engine() is not judge:
                self._runs = {k: r for k, r in self._runs.items() if r.engine() is not None}
                run = self._runs[id(judge)] = _Run(judge)
            return run

    async def get(self, judge: JudgeEngine) -> StepsOutcome:
        """The steps to score with, writing them with ``judge`` if nobody has yet this run."""
        known = self.known
        if known is not None:
            return StepsOutcome(known)
        run = self._run(judge)
        with self._lock:
            attempt = run.attempt
        call, owned = await run.memo.shared(
            ("criteria.steps", attempt), lambda: generate_steps(self.spec, judge)
        )
        if call.value is None:
            with self._lock:
                if run.attempt == attempt:
                    run.attempt = attempt + 1
            return StepsOutcome(None, call, owned)
        steps = tuple(call.value.steps)
        made = Steps(steps, "generated", steps_version(self.spec.criteria, steps))
        return StepsOutcome(made, call, owned)


def _restored(spec: Criterion, frozen: bool) -> StepsSource:
    """A `StepsSource` unpickled: the same spec and origin, no run yet."""
    return StepsSource(spec, frozen=frozen)
