"""What a metric is: a name, the `Sample` fields it needs, and one async method.

A metric is a small object with ``name`` (the key in results, reports and LangSmith feedback:
the snake_case of its class), ``requires`` (Sample fields that must be present, so a missing one
becomes ``Failure(missing_input)`` naming the field before any call is spent), ``provider``
("llm", "offline", ...: one measure, several providers) and ``async score(sample, ctx) -> Score``.

Which provider computes a measure is looked up in `ragbridge.core.registry`, never branched on:
a metric class scores its own way (usually the judge) in ``_score``, and any other registered
provider of the measure is a function the metric hands itself to. The checks that belong to
the measure (required fields, the edge policy in ``_edge``) run first, whoever computes.

`MetricContext` is everything a metric may use for one sample: the judge and embedding engines
and a per-sample memo, `MetricContext.shared`, through which metrics share sub-results. The claims
of an answer are extracted once per sample even when Faithfulness, Hallucination and
AnswerCorrectness all run; the first metric to ask pays (its Score records the calls), the others
record zero calls for that part, so summed usage is the true cost.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import re
import threading
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from ..judging.embedding import EmbeddingEngine, EmbeddingFailed
from ..judging.engine import JudgeCall, JudgeEngine
from ..judging.judge import EntailmentModel
from ..prompts import PromptTemplate
from ..registry import REGISTRY, Compute, MeasureSpec, ProviderSpec, register_measure
from ..results.evaluation import Failure, FailureKind, Score, Usage
from ..sample import Sample

__all__ = ["Metric", "MetricContext", "PlannedCall", "declare", "snake_case"]

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")


def snake_case(name: str) -> str:
    """``AnswerRelevance`` -> ``answer_relevance``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class PlannedCall:
    """One judge call a metric would make for a sample (dry-run estimate).

    ``share_key`` is set for calls several metrics share, so the estimate counts them once.
    ``per_run`` marks a call made once per run, not per sample (a criterion's evaluation
    steps): a metric plans it for every sample, and the estimate counts its ``share_key``
    once per run, so planning keeps no state of its own.
    """

    template_id: str
    prompt_chars: int
    share_key: Hashable | None = None
    per_run: bool = False

    @property
    def prompt_tokens(self) -> int:
        return max(1, round(self.prompt_chars / 4))  # ~4 characters per token in English


@dataclass
class _Shared:
    """One sub-result being computed: the task on its loop, and (made when another loop first
    waits for it) a thread-safe mirror of its outcome."""

    task: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    result: concurrent.futures.Future[Any] | None = None


def _abandoned(entry: _Shared) -> bool:
    """Whether the computation was cancelled, or its loop closed before it finished."""
    return entry.task.cancelled() or (entry.result is not None and entry.result.cancelled())


def _mirror(task: asyncio.Future[Any], result: concurrent.futures.Future[Any]) -> None:
    if result.done():
        return
    if task.cancelled():
        result.cancel()
    elif (error := task.exception()) is not None:
        result.set_exception(error)
    else:
        result.set_result(task.result())


@dataclass
class MetricContext:
    """What a metric may use while scoring one sample."""

    judge: JudgeEngine | None = None
    embedder: EmbeddingEngine | None = None
    nli: EntailmentModel | None = None
    shared_tags: frozenset[str] = frozenset()
    """Share tags declared by two or more metrics of this run (see `Metric.share_tags`)."""
    _memo: dict[Hashable, _Shared] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    async def shared(self, key: Hashable, compute: Callable[[], Awaitable[R]]) -> tuple[R, bool]:
        """Compute ``key`` once per sample; returns (result, whether this caller computed it).

        Safe from threads and event loops: a sink may score the metrics of one record from
        several (`ragbridge.core.scoring.scorer.Scorer`). The first caller computes on its loop;
        callers on that loop await the task, callers on other loops its mirrored result. A
        computation that was cancelled is started again by the next caller.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                entry = self._memo.get(key)
                mine = entry is None or _abandoned(entry)
                if mine:
                    entry = self._memo[key] = _Shared(asyncio.ensure_future(compute()), loop)
            assert entry is not None
            if mine:
                return await entry.task, True
            try:
                if entry.loop is loop:
                    return await asyncio.shield(entry.task), False
                return await self._from_other_loop(entry), False
            except asyncio.CancelledError:
                if not _abandoned(entry):
                    raise  # this caller was cancelled
                # the computing caller was cancelled, not this one: compute it again

    async def _from_other_loop(self, entry: _Shared) -> Any:
        """Wait for a sub-result computed on another loop (another thread's)."""
        with self._lock:
            if entry.result is None:
                result: concurrent.futures.Future[Any] = concurrent.futures.Future()
                entry.result = result
                # A closed loop raises RuntimeError: its task is done or never will be (below).
                with contextlib.suppress(RuntimeError):
                    entry.loop.call_soon_threadsafe(
                        entry.task.add_done_callback, functools.partial(_mirror, result=result)
                    )
            result = entry.result
        # shielded: a waiter cancelled here must not cancel the result for the others
        waiting = asyncio.shield(asyncio.wrap_future(result))
        while not result.done():
            await asyncio.wait([waiting], timeout=0.05)
            if not result.done() and entry.task.done():
                _mirror(entry.task, result)  # its loop stopped before the mirror ran
            elif not result.done() and entry.loop.is_closed():
                result.cancel()  # closed with the task unfinished: compute it again
        return await waiting

    async def ask(
        self, template: PromptTemplate, *, logprobs: int | None = None, **values: Any
    ) -> JudgeCall[Any]:
        """Render ``template`` and send it through the judge engine.

        The reply is checked against this request (`PromptTemplate.checker`: one verdict per
        claim, cited contexts that exist, ...) inside the engine, so a reply that parses but
        does not fit is repaired or retried like an unparseable one and never cached.
        ``logprobs=k`` also asks for the reply's token log-probabilities (`JudgeCall.logprobs`;
        see `JudgeEngine.ask`).
        """
        if self.judge is None:
            raise RuntimeError("this metric needs a judge")
        return await template.ask(self.judge, logprobs=logprobs, **values)


class Metric:
    """Base class of ragbridge metrics. Subclasses set ``requires`` and implement `_score`.

    `score` wraps `_score` with what every metric needs: the missing-input check, timing, the
    provider/judge/prompt stamp on the Score, and a last-resort conversion of an unexpected
    exception into a typed failure (a bug in one metric must not kill a run).
    """

    name: str = ""
    requires: ClassVar[tuple[str, ...]] = ()
    needs_judge: bool = True
    needs_embedder: bool = False
    needs_nli: bool = False
    provider: str = "llm"
    prompt_version: ClassVar[str | None] = None
    higher_is_better: ClassVar[bool] = True
    """False for measures of harm (hallucination): thresholds and gates then read as maxima."""
    scores_inline: ClassVar[bool] = False
    """True when the class's own `_score` never awaits and calls no model (a computation on
    the sample alone: token F1, context usage): `evaluate` then scores it a chunk of samples
    at a time, with no event-loop task per cell (`ragbridge.core.scoring.batched`). Trusted
    only when the metric's own class declares it (a subclass may await)."""
    _provided: Compute | None = None
    """The registered provider function scoring this metric; None: the class's own `_score`."""
    reads: ClassVar[tuple[str, ...] | None] = None
    """The `Sample` fields this class's own scoring reads: `_score`, `_edge`, `missing_input`
    and what they copy into the Score (a context id in ``details``). A kept Score is keyed on
    exactly these, so a rerun whose samples differ only in volatile metadata (a latency)
    reuses it (`ragbridge.core.cache.result_key`). Names: ``question``, ``answer``, ``reference``,
    ``reference_contexts``, ``relevance``, ``id``; ``contexts`` (every part) or one part,
    ``contexts.text`` / ``contexts.id`` / ``contexts.score`` / ``contexts.metadata``;
    ``metadata`` (all of it) or ``metadata.<key>``. ``requires`` is always added. Trusted
    only when the metric's own class declares it (a subclass that does not restate it may read
    more); None, the default, keys on the whole sample, which is always safe."""
    _provided_reads: tuple[str, ...] | None = None
    """`ProviderSpec.reads` of the provider in `_provided`, sorted (None: not declared). A tuple,
    not a set: the metric's attributes are part of its result key, and a set's order is not
    the same in every process."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers this measure has in the registry; the first is the default."""
        if self.name not in {m.name for m in REGISTRY.measures(plugins=False)}:
            return (self.provider,)
        return tuple(p.name for p in REGISTRY.providers(self.name))

    def use_provider(self, provider: str) -> Metric:
        """Compute this measure with another registered provider (``"ragas"``); returns self."""
        self._use_provider(provider)
        return self

    def _use_provider(self, provider: str) -> None:
        """Select a registered provider; what it needs (judge, embedder, NLI) comes with it."""
        spec: ProviderSpec = REGISTRY.provider(self.name, provider)
        self.provider = spec.name
        self._provided = spec.compute
        self._provided_reads = None if spec.reads is None else tuple(sorted(spec.reads))
        self.needs_judge = "judge" in spec.needs
        self.needs_embedder = "embedder" in spec.needs
        self.needs_nli = "nli" in spec.needs

    @property
    def own_provider(self) -> bool:
        """True when the class itself scores (judge prompts, plans, shared judge tasks)."""
        return self._provided is None

    async def score(self, sample: Sample, ctx: MetricContext) -> Score:
        started = time.perf_counter()
        missing = self.missing_input(sample, ctx)
        if missing is not None:
            return self._stamp(Score(failure=missing), ctx, started)
        try:
            score = self._edge(sample)
            if score is None:
                if self._provided is None:
                    score = await self._score(sample, ctx)
                else:
                    score = await self._provided(self, sample, ctx)
        except asyncio.CancelledError:
            raise
        except EmbeddingFailed as exc:  # already typed: timeout, rate_limited, cancelled, ...
            score = Score(failure=exc.failure)
        except Exception as exc:
            failure = Failure(kind=FailureKind.JUDGE_ERROR, message=f"{type(exc).__name__}: {exc}")
            score = Score(failure=failure)
        return self._stamp(score, ctx, started)

    def _edge(self, sample: Sample) -> Score | None:
        """The measure's answer for an edge case every provider shares (an abstaining answer,
        no contexts), or None to let the provider score. Runs after `missing_input`."""
        return None

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        raise NotImplementedError

    def missing_input(self, sample: Sample, ctx: MetricContext) -> Failure | None:
        """A typed failure when a required field is empty or a model is missing, else None."""
        for name in self.requires:
            value = getattr(sample, name)
            if value is None or (isinstance(value, (str, list)) and not _nonblank(value)):
                return Failure(
                    kind=FailureKind.MISSING_INPUT,
                    message=f"{self.name} needs the sample's {name!r}, which is empty",
                )
        if self.needs_judge and ctx.judge is None:
            return Failure(
                kind=FailureKind.MISSING_INPUT, message=f"{self.name} needs a judge (judge=...)"
            )
        if self.needs_embedder and ctx.embedder is None:
            return Failure(
                kind=FailureKind.MISSING_INPUT,
                message=f"{self.name} needs an embedder (embedder=...)",
            )
        if self.needs_nli and ctx.nli is None:
            return Failure(
                kind=FailureKind.MISSING_INPUT,
                message=f"{self.name} (provider {self.provider!r}) needs an NLI model (nli=...)",
            )
        return None

    def plan(self, sample: Sample, shared_tags: frozenset[str] = frozenset()) -> list[PlannedCall]:
        """The judge calls `score` would make for ``sample`` (for the dry-run estimate)."""
        if not self.own_provider or self._edge(sample) is not None:
            return []
        return self._plan(sample, shared_tags)

    def _plan(self, sample: Sample, shared_tags: frozenset[str]) -> list[PlannedCall]:
        return []

    def share_tags(self) -> frozenset[str]:
        """Tags of combined judge tasks this metric can take part in.

        When two metrics of one run declare the same tag (ContextPrecision and ContextRecall
        both declare ``context.assess``), the runner tells them through
        `MetricContext.shared_tags`, and they answer from one combined call instead of two.
        """
        return self._share_tags() if self.own_provider else frozenset()

    def _share_tags(self) -> frozenset[str]:
        return frozenset()

    def _stamp(self, score: Score, ctx: MetricContext, started: float) -> Score:
        update: dict[str, Any] = {"provider": self.provider}
        if score.latency_s is None:
            update["latency_s"] = time.perf_counter() - started
        if score.judge_model is None:
            # the model that judged: the LLM, or the embedder / NLI model of offline providers
            if self.needs_judge and ctx.judge is not None:
                update["judge_model"] = ctx.judge.model
            elif self.needs_nli and ctx.nli is not None:
                update["judge_model"] = ctx.nli.model
            elif self.needs_embedder and not self.needs_judge and ctx.embedder is not None:
                update["judge_model"] = ctx.embedder.model
        if self.needs_judge and self.prompt_version is not None and score.prompt_version is None:
            update["prompt_version"] = self.prompt_version
        return score.stamped(update)  # `model_copy(update=...)`, checked, without its cost

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def declare(
    cls: type[Metric],
    *,
    meaning: str,
    how: str,
    needs: tuple[str, ...] = (),
    judge_calls: str = "0",
    edges: dict[str, str] | None = None,
    kind: str = "judge",
) -> MeasureSpec:
    """Register ``cls`` as a measure, and the way the class itself scores as its default
    provider (named ``cls.provider``). Name, ``requires`` and direction come from the class, so
    they are written once; other providers of the measure register against it by name."""
    own = ProviderSpec(
        measure=cls.name,
        name=cls.provider,
        how=how,
        needs=frozenset(needs),
        judge_calls=judge_calls,
    )
    measure = MeasureSpec(
        name=cls.name,
        meaning=meaning,
        requires=cls.requires,
        higher_is_better=cls.higher_is_better,
        edges=edges or {},
        kind=kind,
        factory=cls,
    )
    return register_measure(measure, default=own)


def _nonblank(value: str | list[Any]) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return bool(value)


_NO_USAGE = Usage()


def usage_of(*calls: JudgeCall[Any] | None, owned: tuple[bool, ...] | None = None) -> Usage:
    """Total usage of the calls this metric paid for (shared calls count for their owner only).

    A metric that paid for nothing gets the one shared zero `Usage` (it is frozen): half the
    cells of a run are such, and every object a kept result holds is rescanned by the garbage
    collector for the rest of the run.
    """
    total = _NO_USAGE
    for i, call in enumerate(calls):
        if call is not None and (owned is None or owned[i]):
            total += call.usage
    return total
