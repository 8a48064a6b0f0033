"""`generate_testset`: a labelled eval set written from documents by the judge, filtered.

One run, in order:

1. split the documents into chunks (`ragbridge.core.testset.chunks`) and embed them;
2. plan round 1 (`ragbridge.core.testset.plan`): one request per question, styles in the
   proportions asked for, no-answer questions at their share;
3. per wave of requests, concurrently: the judge writes each question with its quote and
   answer; a quote not found in its source drops the question
   (`ragbridge.core.testset.passages`), so does a question that leans on "the passage";
4. the survivors are embedded and near-duplicates of kept questions dropped
   (`ragbridge.core.testset.dedup`);
5. each no-answer candidate is checked against the chunks retrieved for it
   (`ragbridge.core.testset.no_answer`); one the corpus answers is rejected;
6. a shortfall is asked for again in a further round, up to ``max_rounds``.

Every judge call goes through the run's `JudgeEngine` (cache, retries, in-flight cap, breaker),
built from `Settings` exactly as `ragbridge.core.scoring.runner.evaluate` builds it. Prompts depend
only on the documents, the spec and earlier replies, so with a cache a rerun — or a run resumed
after an interrupt — sends no call that had finished. When the judge or embedder proves
unusable, no further wave starts and ``report.aborted`` says why.

The samples carry ``question``, ``reference`` (the judge's answer, or `NO_ANSWER_REFERENCE`),
``reference_contexts`` (the verified quotes, in the source's own characters), ``relevance`` (grade
2 for every chunk the question was written from; ``{}`` for no-answer) and ``metadata`` (``kind``,
``style``, ``source`` chunk ids, and for no-answer ``checked_against``). No ``answer`` and no
``contexts``: a pipeline fills those (``ragbridge run``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from typing_extensions import Unpack

from ..judging.embedding import EmbeddingEngine, EmbeddingFailed
from ..judging.engine import JudgeCall, JudgeEngine, cost_of
from ..prompts.testset import (
    AnswerableVerdict,
    NoAnswerQuestion,
    WrittenMultiQuestion,
    WrittenQuestion,
)
from ..results.evaluation import Failure, Usage
from ..sample import Sample
from ..scoring.runner import Engines, build_engines, default_embedder, run_sync
from ..settings import Settings, SettingsOptions
from .chunks import Chunk, split_documents
from .dedup import NearDuplicates, unit_rows
from .documents import SourceDocument, check_unique
from .estimate import estimate_chunks
from .no_answer import NO_ANSWER_REFERENCE, is_unanswered, top_k
from .passages import locate_passages
from .plan import (
    DEFAULT_SIZE,
    Planner,
    Request,
    TestsetOptions,
    TestsetSpec,
    waves,
)
from .prompting import check_prompt, prompt_for
from .report import TestsetReport
from .styles import KINDS, NO_ANSWER

__all__ = [
    "RELEVANT_GRADE",
    "GenerateOptions",
    "Testset",
    "agenerate_testset",
    "generate_testset",
    "leans_on_source",
]

Progress = Callable[[int, int | None], Any]
"""Called as ``progress(done, total)`` after each judge call; ``total`` grows with top-ups."""

RELEVANT_GRADE = 2
"""Grade of a chunk a question was written from (the handbook's "answers it")."""

_LEANS = re.compile(
    r"\b(?:(?:the|this|that|these) (?:passages?|excerpts?|snippets?|chunks?)"
    r"|(?:the|this) (?:above|following|given|provided) (?:texts?|contexts?|documents?|passages?)"
    r"|according to (?:the|this) (?:texts?|documents?|contexts?|passages?))\b",
    re.IGNORECASE,
)


def leans_on_source(question: str) -> bool:
    """Whether a question points at the text it was written from ("According to the passage,
    ..."): a user of a search system has no such passage, so the question is not a test of it."""
    return _LEANS.search(question) is not None


class Testset(NamedTuple):
    """What `generate_testset` returns: ``samples, report = generate_testset(...)``."""

    samples: list[Sample]
    report: TestsetReport


Testset.__test__ = False  # type: ignore[attr-defined]  # not a pytest test class


class GenerateOptions(TestsetOptions, SettingsOptions, total=False):
    """The keyword arguments of `generate_testset` besides ``settings`` and ``progress``: the
    test set's (`TestsetOptions`) and the models' (`SettingsOptions`)."""


@dataclass
class _Candidate:
    key: str
    request: Request
    question: str
    answer: str | None = None
    passages: list[str] = field(default_factory=list)
    checked_against: list[str] = field(default_factory=list)


def generate_testset(
    documents: Iterable[SourceDocument],
    size: int = DEFAULT_SIZE,
    *,
    settings: Settings | None = None,
    progress: Progress | None = None,
    **options: Unpack[GenerateOptions],
) -> Testset:
    """Write ``size`` questions from ``documents``; returns the samples and a `TestsetReport`.

    ``styles`` maps ``single``/``multi``/``reasoning`` to shares (default 0.5/0.25/0.25);
    ``no_answer_share`` of the set (rounded up; default 0.1) are no-answer questions.
    ``seed`` fixes every choice (chunks, pairs, style order), so the same arguments give the
    same prompts and, with a cache, a free rerun. ``dedup_threshold`` is the cosine above which
    a question repeats a kept one; ``chunk_chars`` the length above which documents are split
    (ids ``docid#n``); ``relevance`` grades the ``"chunk"`` ids (default) or the source
    ``"document"`` ids; ``top_k`` chunks are retrieved to check a no-answer candidate;
    ``max_rounds`` bounds the top-up rounds that replace dropped questions. These are
    keywords (`TestsetOptions`); left out, each takes its `TestsetSpec` default.

    Models are called as `Settings` says (``settings=`` or its fields as keywords, like
    `ragbridge.core.evaluate`): a ``judge`` is required; without an ``embedder`` the local
    default (`ragbridge.adapters.local.LocalEmbedder`) is used. ``progress(done, total)`` is
    called after each judge call. Raises ValueError before any call when the arguments or the
    corpus cannot give a set (no judge, no chunk long enough to write from, ...).
    """
    coro = agenerate_testset(documents, size, settings=settings, progress=progress, **options)
    result: Testset = run_sync(coro)
    return result


async def agenerate_testset(
    documents: Iterable[SourceDocument],
    size: int = DEFAULT_SIZE,
    *,
    settings: Settings | None = None,
    progress: Progress | None = None,
    **options: Unpack[GenerateOptions],
) -> Testset:
    """`generate_testset`, awaitable."""
    spec, settings_options = TestsetSpec.split(size, options)
    config = Settings.merged(settings, **settings_options)
    if config.judge is None:
        raise ValueError(
            "generating a test set needs a judge (it writes the questions): pass judge=..."
        )
    docs = check_unique(documents)
    chunks = split_documents(docs, spec.chunk_chars)
    problem = Planner(chunks, spec).problem()
    if problem is not None:
        raise ValueError(problem)
    if config.embedder is None:
        config = config.replace(embedder=default_embedder())
    engines = build_engines(config, [])
    try:
        run = _Run(spec, docs, chunks, engines, progress)
        await run.go()
    finally:
        engines.close()
    return Testset(run.samples(), run.report)


class _Run:
    """The state of one generation run (see the module for the steps)."""

    def __init__(
        self,
        spec: TestsetSpec,
        documents: Sequence[SourceDocument],
        chunks: list[Chunk],
        engines: Engines,
        progress: Progress | None,
    ) -> None:
        assert engines.judge is not None
        assert engines.embedder is not None
        self.spec = spec
        self.chunks = chunks
        self.engines = engines
        self.judge: JudgeEngine = engines.judge
        self.embedder: EmbeddingEngine = engines.embedder
        self.progress = progress
        self.report = TestsetReport(
            requested=spec.size,
            targets=spec.targets(),
            documents=len(documents),
            chunks=len(chunks),
            dedup_threshold=spec.dedup_threshold,
            estimate=estimate_chunks(chunks, spec),
        )
        self.kept: list[_Candidate] = []
        self.counts: dict[str, int] = {}
        self.dedup = NearDuplicates(spec.dedup_threshold)
        self.written_from: dict[str, list[str]] = {}
        self.no_answer_written: list[str] = []
        self.usage = Usage()
        self.matrix: npt.NDArray[np.float64] = np.zeros((0, 0))
        self._ranked: dict[int, list[int]] = {}
        self._serial = 0
        self.done = 0
        self.total = 0
        self._calls_before = self.judge.stats.calls
        self._cached_before = self.judge.stats.cached
        self._embed_before = self.embedder.stats.calls

    # -- the loop -----------------------------------------------------------------------

    async def go(self) -> None:
        try:
            vectors = await self.embedder.embed([c.shown for c in self.chunks])
            self.matrix = unit_rows(vectors)
            planner = Planner(self.chunks, self.spec, self._neighbours)
            for round_ in range(1, self.spec.max_rounds + 1):
                wanted = self._shortfall()
                if not wanted or self.engines.stopped():
                    break
                requests = planner.requests(wanted, round_)
                if not requests:
                    break
                self.report.rounds = round_
                self.total += len(requests) + sum(r.style == NO_ANSWER for r in requests)
                self._tick()
                for wave in waves(requests):
                    if self.engines.stopped():
                        break
                    await self._wave(wave)
        except EmbeddingFailed as exc:
            self.report.aborted = f"embedder: {exc.failure.message}"
        self._finish()

    def _shortfall(self) -> dict[str, int]:
        return {
            s: n - self.counts.get(s, 0)
            for s, n in self.report.targets.items()
            if self.counts.get(s, 0) < n
        }

    def _neighbours(self, index: int) -> list[int]:
        ranked = self._ranked.get(index)
        if ranked is None:
            order = np.argsort(-(self.matrix @ self.matrix[index]), kind="stable")
            ranked = self._ranked[index] = [int(i) for i in order if int(i) != index]
        return ranked

    async def _wave(self, wave: list[Request]) -> None:
        calls = await asyncio.gather(*(self._generate(r) for r in wave))
        fresh: list[_Candidate] = []
        for request, call in zip(wave, calls, strict=True):
            candidate = self._read(request, call)
            if candidate is not None:
                fresh.append(candidate)
            elif request.style == NO_ANSWER:
                self._untick()  # no check will be made for it
        vectors = await self.embedder.embed([c.question for c in fresh]) if fresh else []
        pending: list[tuple[_Candidate, list[float]]] = []
        for candidate, vector in zip(fresh, vectors, strict=True):
            _, duplicate = self.dedup.check(candidate.question, vector)
            if duplicate is not None:
                self.report.duplicates_dropped += 1
                if candidate.request.style == NO_ANSWER:
                    self._untick()
                continue
            self.dedup.add(candidate.key, candidate.question, vector)
            if candidate.request.style == NO_ANSWER:
                pending.append((candidate, vector))
            else:
                self._keep(candidate)
        verdicts = await asyncio.gather(*(self._check(c, v) for c, v in pending))
        for (candidate, _), unanswered in zip(pending, verdicts, strict=True):
            if unanswered:
                self._keep(candidate)
            else:
                self.dedup.remove(candidate.key)

    def _keep(self, candidate: _Candidate) -> None:
        style = candidate.request.style
        self.kept.append(candidate)
        self.counts[style] = self.counts.get(style, 0) + 1

    # -- one request ----------------------------------------------------------------------

    def _avoid(self, request: Request) -> list[str]:
        if request.style == NO_ANSWER:
            return list(self.no_answer_written)
        seen: list[str] = []
        for chunk in request.chunks:
            seen.extend(q for q in self.written_from.get(chunk.id, []) if q not in seen)
        return seen

    async def _generate(self, request: Request) -> JudgeCall[Any]:
        template, values = prompt_for(request, self._avoid(request))
        call = await template.ask(self.judge, **values)
        self._account(call)
        return call

    def _read(self, request: Request, call: JudgeCall[Any]) -> _Candidate | None:
        """The candidate a reply gives, or None (counted under the reason it was dropped)."""
        if call.failure is not None or call.value is None:
            self._failed(call.failure)
            return None
        self.report.generated += 1
        self._serial += 1
        key = f"{request.round}-{self._serial}"
        value = call.value
        question = " ".join(str(value.question).split())
        if isinstance(value, NoAnswerQuestion):
            self.no_answer_written.append(question)
            candidate = _Candidate(key, request, question)
        else:
            assert isinstance(value, (WrittenQuestion, WrittenMultiQuestion))
            for chunk in request.chunks:
                self.written_from.setdefault(chunk.id, []).append(question)
            quotes = value.passages if isinstance(value, WrittenMultiQuestion) else [value.passage]
            spans = locate_passages(quotes, [c.text for c in request.chunks])
            if spans is None:
                self.report.passages_dropped += 1
                return None
            self.report.passages_verified += 1
            candidate = _Candidate(key, request, question, value.answer.strip(), spans)
        if leans_on_source(question):
            self.report.not_standalone += 1
            return None
        return candidate

    async def _check(self, candidate: _Candidate, vector: Sequence[float]) -> bool:
        """Whether the corpus leaves a no-answer candidate unanswered (see `no_answer`)."""
        retrieved = [self.chunks[i] for i in top_k(self.matrix, vector, self.spec.top_k)]
        candidate.checked_against = [c.id for c in retrieved]
        template, values = check_prompt(candidate.question, retrieved)
        call = await template.ask(self.judge, **values)
        self._account(call)
        if call.failure is not None or call.value is None:
            self._failed(call.failure)
            return False
        self.report.no_answer_checked += 1
        assert isinstance(call.value, AnswerableVerdict)
        if is_unanswered(call.value):
            return True
        self.report.no_answer_rejected += 1
        return False

    # -- bookkeeping ----------------------------------------------------------------------

    def _account(self, call: JudgeCall[Any]) -> None:
        self.usage += call.usage
        self.report.requests += 1
        self.done += 1
        self._tick()

    def _failed(self, failure: Failure | None) -> None:
        self.report.failed_calls += 1
        kind = failure.kind.value if failure is not None else "no_value"
        self.report.failures[kind] = self.report.failures.get(kind, 0) + 1

    def _tick(self) -> None:
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))

    def _untick(self) -> None:
        self.total -= 1
        self._tick()

    def _finish(self) -> None:
        report = self.report
        report.written = {s: self.counts.get(s, 0) for s in report.targets}
        report.judge_calls = self.judge.stats.calls - self._calls_before
        report.cached_calls = self.judge.stats.cached - self._cached_before
        report.embedding_calls = self.embedder.stats.calls - self._embed_before
        report.prompt_tokens = self.usage.prompt_tokens
        report.completion_tokens = self.usage.completion_tokens
        report.cost_usd = cost_of(self.usage, self.judge.price)
        report.aborted = report.aborted or self.engines.aborted()

    # -- samples --------------------------------------------------------------------------

    def samples(self) -> list[Sample]:
        width = max(3, len(str(self.spec.size)))
        model = self.judge.model
        out: list[Sample] = []
        for number, candidate in enumerate(self.kept, start=1):
            request = candidate.request
            style = request.style
            metadata: dict[str, Any] = {
                "kind": KINDS[style],
                "style": style,
                "source": [c.id for c in request.chunks],
                "testset_model": model,
                "seed": self.spec.seed,
            }
            sample_id = f"testset-{number:0{width}d}"
            if style == NO_ANSWER:
                metadata["checked_against"] = candidate.checked_against
                out.append(
                    Sample(
                        id=sample_id,
                        question=candidate.question,
                        reference=NO_ANSWER_REFERENCE,
                        relevance={},
                        metadata=metadata,
                    )
                )
                continue
            ids = [c.id if self.spec.relevance == "chunk" else c.group for c in request.chunks]
            out.append(
                Sample(
                    id=sample_id,
                    question=candidate.question,
                    reference=candidate.answer,
                    reference_contexts=candidate.passages,
                    relevance=dict.fromkeys(ids, RELEVANT_GRADE),
                    metadata=metadata,
                )
            )
        return out
