"""ragbridge's judge and embedder as RAGAS's models, and RAGAS's (or LangChain's) models as
ragbridge's.

RAGAS has two metric stacks with incompatible model interfaces whose methods share names
(``generate`` is async with ``n``/``temperature`` in one, sync with a response model in the
other), so one class cannot serve both:

* `RagasJudge` is a ``BaseRagasLLM`` for ``ragas.evaluate`` and the legacy metrics. Their prompts
  state the output JSON Schema in the text and RAGAS parses the reply, so each prompt goes through
  `JudgeEngine.complete` (free text; retries, timeout, cache keyed ``"ragas"`` + RAGAS's version).
  ``n`` completions are ``n`` calls, each its own cache entry. RAGAS's own tenacity retry around
  the model is bypassed (the engine already retried); ``temperature`` and ``stop`` are ignored.
* `RagasInstructorJudge` (``judge.for_collections()``) is an ``InstructorBaseRagasLLM`` for
  ``ragas.metrics.collections``: prompts with a response model go through `JudgeEngine.ask`
  (validated, repaired, cached). Identical prompts share a cache entry: with a cache,
  ``AnswerRelevancy``'s ``strictness`` repeats of one prompt are one call plus cache hits.
* `RagasEmbedder` is a ``BaseRagasEmbeddings`` (legacy); ``.for_collections()`` gives the
  ``BaseRagasEmbedding`` the collections metrics require. Both embed through one cached
  `EmbeddingEngine`. (``ragas.evaluate`` wraps any LangChain ``Embeddings`` — ours included, as
  ``BaseRagasEmbeddings`` subclasses it — in its ``LangchainEmbeddingsWrapper``, which calls our
  methods; harmless, but RAGAS's deprecation warning for that wrapper comes from there.)

The two judges share one base (`_EngineJudge`: the engine, its model and the running usage) and
the two embedders another (`_EngineEmbedder`); each class adds only what its RAGAS interface
names. The two judges made by ``for_collections`` share one engine and one running `usage`. A
failed call raises `RagasJudgeError` naming the ragbridge failure kind; RAGAS turns it into NaN,
and `ragbridge.adapters.ragas.results.scores_from_ragas` turns every NaN into a typed `Score`
failure, so no NaN reaches a report. Sync methods work inside a running event loop
(`run_sync`).

The other way, `judge_from_ragas` and `embedder_from_ragas` turn what RAGAS calls an evaluator
LLM or embeddings (``LangchainLLMWrapper(ChatOpenAI())``, ``llm_factory(...)``, a bare LangChain
model) into a ragbridge `Judge` / `Embedder`, so ragbridge's measures inside ``ragas.evaluate``
judge with the model RAGAS hands its metrics.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from typing_extensions import Self

from . import _framework  # noqa: F401  (first: RAGAS through the one guard)

# isort: split
import ragas
from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import Generation, LLMResult
from langchain_core.prompt_values import ChatPromptValue, PromptValue
from pydantic import BaseModel
from ragas.embeddings.base import BaseRagasEmbedding, BaseRagasEmbeddings
from ragas.llms.base import BaseRagasLLM, InstructorBaseRagasLLM, LangchainLLMWrapper
from ragas.run_config import RunConfig

from ragbridge.core.cache.disk import Cache, open_cache
from ragbridge.core.files import StrPath
from ragbridge.core.judging.embedding import EmbeddingEngine
from ragbridge.core.judging.engine import JudgeCall, JudgeEngine
from ragbridge.core.judging.judge import (
    Embedder,
    Judge,
    JudgeReply,
    Message,
    PermanentJudgeError,
    classify_error,
)
from ragbridge.core.results.evaluation import Failure, Usage
from ragbridge.core.scoring.runner import run_sync

__all__ = [
    "TEMPLATE_ID",
    "RagasEmbedder",
    "RagasInstructorJudge",
    "RagasJudge",
    "RagasJudgeError",
    "RagasModernEmbedder",
    "as_embedder",
    "as_judge",
    "embedder_from_ragas",
    "judge_from_ragas",
]

T = TypeVar("T", bound=BaseModel)
E = TypeVar("E", JudgeEngine, EmbeddingEngine)

TEMPLATE_ID = "ragas"
"""Cache template id of every RAGAS prompt; the version is ``ragas.__version__``."""


class RagasJudgeError(RuntimeError):
    """A judge call failed after ragbridge's retries; ``failure`` says why (typed)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"ragbridge judge call failed ({failure.kind.value}): {failure.message}")
        self.failure = failure


def _engine_of(model: Any, cache: StrPath | Cache | None, kind: type[E], **options: Any) -> E:
    """``model`` when it is already an engine of ``kind`` (which has its own cache), else a new
    one on it with ``cache`` and ``options``."""
    if isinstance(model, kind):
        if cache is not None:
            raise ValueError(f"pass cache= to the {kind.__name__}, not next to one")
        return model
    return kind(model, cache=open_cache(cache), **options)


# --------------------------------------------------------------------------- judges


class _Ledger:
    """The engine and running usage shared by the judges of both RAGAS stacks."""

    def __init__(self, engine: JudgeEngine) -> None:
        self.engine = engine
        self.usage = Usage()
        self.lock = threading.Lock()

    def record(self, call: JudgeCall[Any]) -> None:
        with self.lock:
            self.usage = self.usage + call.usage
        if call.failure is not None:
            raise RagasJudgeError(call.failure)


_ROLES = {"human": "user", "system": "system", "ai": "assistant"}


def _messages(prompt: PromptValue | str) -> list[Message]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    out: list[Message] = []
    for message in prompt.to_messages():
        content = message.content if isinstance(message.content, str) else message.text
        out.append({"role": _ROLES.get(message.type, "user"), "content": content})
    return out


class _EngineJudge:
    """A ragbridge judge on one `JudgeEngine` (cache, retries, timeout, in-flight cap), with the
    running usage of its calls: what both RAGAS judges are, before RAGAS's interface.

    ``cache`` is a ragbridge cache (path or `Cache`): a rerun with a fresh wrapper on the same
    file makes no judge calls. Given a `JudgeEngine`, the engine's own cache and limits apply.
    """

    # BaseRagasLLM is a dataclass: its generated __eq__ would make any two wrappers equal and
    # unhashable. A wrapper is an identity (its engine, cache and usage), not a value.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        judge: Judge | JudgeEngine,
        *,
        cache: StrPath | Cache | None = None,
        max_concurrency: int = 8,
        timeout: float | None = 60.0,
        max_retries: int = 4,
    ) -> None:
        engine = _engine_of(
            judge,
            cache,
            JudgeEngine,
            max_concurrency=max_concurrency,
            timeout=timeout,
            max_retries=max_retries,
        )
        self._ledger = _Ledger(engine)
        self._ragas_fields()

    @classmethod
    def _shared(cls, ledger: _Ledger) -> Self:
        """A judge on ``ledger``'s engine and usage (the other stack's twin)."""
        twin = cls.__new__(cls)
        twin._ledger = ledger
        twin._ragas_fields()
        return twin

    def _ragas_fields(self) -> None:
        """Set what RAGAS's base class expects on an instance (its own ``__init__`` is not run:
        it would take RAGAS's model arguments)."""

    @property
    def engine(self) -> JudgeEngine:
        return self._ledger.engine

    @property
    def model(self) -> str:
        return self._ledger.engine.model

    @property
    def usage(self) -> Usage:
        """Calls and tokens spent so far through this judge and its twin of the other stack."""
        return self._ledger.usage

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


class RagasJudge(_EngineJudge, BaseRagasLLM):
    """A ragbridge `Judge` as RAGAS's ``BaseRagasLLM``, for ``ragas.evaluate`` and legacy metrics.

    ``cache`` is a ragbridge cache (path or `Cache`): a rerun with a fresh wrapper on the same file
    makes no judge calls. (RAGAS's own ``cache`` attribute, a different mechanism, stays None.)
    ``usage`` is the running total of calls and tokens, shared with `for_collections`.
    """

    def _ragas_fields(self) -> None:
        self.run_config = RunConfig()
        self.multiple_completion_supported = True  # we make the n calls ourselves
        self.cache = None  # RAGAS's disk cache: unused, ragbridge's engine caches

    def for_collections(self) -> RagasInstructorJudge:
        """The ``InstructorBaseRagasLLM`` twin for ``ragas.metrics.collections``, on the same
        engine, cache and usage."""
        return RagasInstructorJudge._shared(self._ledger)

    async def agenerate_text(
        self,
        prompt: PromptValue,
        n: int = 1,
        temperature: float | None = 0.01,
        stop: list[str] | None = None,
        callbacks: Any = None,
    ) -> LLMResult:
        """``n`` completions of ``prompt`` (one call each); raises `RagasJudgeError` on failure."""
        messages = _messages(prompt)
        calls = await asyncio.gather(
            *(
                self.engine.complete(
                    messages,
                    template_id=TEMPLATE_ID if i == 0 else f"{TEMPLATE_ID}#{i}",
                    template_version=ragas.__version__,
                )
                for i in range(max(1, n))
            )
        )
        for call in calls:
            self._ledger.record(call)
        return LLMResult(generations=[[Generation(text=call.value or "") for call in calls]])

    def generate_text(
        self,
        prompt: PromptValue,
        n: int = 1,
        temperature: float = 0.01,
        stop: list[str] | None = None,
        callbacks: Any = None,
    ) -> LLMResult:
        result: LLMResult = run_sync(self.agenerate_text(prompt, n, temperature, stop, callbacks))
        return result

    # Bypasses RAGAS's tenacity retry around agenerate_text (up to 10 attempts with minute-long
    # waits): the engine has already retried transient errors, and a parse failure is RAGAS's
    # to handle.
    generate = agenerate_text

    def is_finished(self, response: LLMResult) -> bool:
        # Judges report no finish reason through the protocol; an empty reply was already retried.
        return True


class RagasInstructorJudge(_EngineJudge, InstructorBaseRagasLLM):
    """A ragbridge `Judge` as RAGAS's ``InstructorBaseRagasLLM``, for ``ragas.metrics.collections``
    (``Faithfulness(llm=...)``, ``AnswerRelevancy(llm=..., embeddings=...)``, ...).

    Each prompt goes to `JudgeEngine.ask` with RAGAS's response model as the schema: validated,
    repaired once, retried, cached. Usually made by `RagasJudge.for_collections`.
    """

    is_async = True  # RAGAS's prompt helpers check this before choosing agenerate

    async def agenerate(self, prompt: str, response_model: type[T]) -> T:
        call = await self.engine.ask(
            _messages(prompt),
            response_model,
            template_id=TEMPLATE_ID,
            template_version=ragas.__version__,
        )
        self._ledger.record(call)
        assert call.value is not None
        return call.value

    def generate(self, prompt: str, response_model: type[T]) -> T:
        result: T = run_sync(self.agenerate(prompt, response_model))
        return result


# --------------------------------------------------------------------------- embedders


class _EngineEmbedder:
    """A ragbridge embedder on one cached, batching `EmbeddingEngine`: what both RAGAS embedders
    are. The two RAGAS interfaces name the same four calls differently (``embed_query`` /
    ``embed_text``, ...); each class points its names at the ones here."""

    def __init__(
        self, embedder: Embedder | EmbeddingEngine, *, cache: StrPath | Cache | None = None
    ) -> None:
        self.engine = _engine_of(embedder, cache, EmbeddingEngine)
        self._ragas_fields()

    def _ragas_fields(self) -> None:
        """Run RAGAS's base ``__init__`` with its cache off (ragbridge's engine caches)."""

    @property
    def model(self) -> str:
        return self.engine.model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    async def _aembed_one(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.engine.embed([text]))[0]

    async def _aembed_many(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return await self.engine.embed(list(texts))

    def _embed_one(self, text: str, **kwargs: Any) -> list[float]:
        result: list[float] = run_sync(self._aembed_one(text))
        return result

    def _embed_many(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        result: list[list[float]] = run_sync(self._aembed_many(texts))
        return result


class RagasEmbedder(_EngineEmbedder, BaseRagasEmbeddings):
    """A ragbridge `Embedder` as RAGAS's ``BaseRagasEmbeddings`` (legacy metrics, e.g.
    answer_relevancy), embedding through a cached, batching `EmbeddingEngine`."""

    aembed_query = _EngineEmbedder._aembed_one
    aembed_documents = _EngineEmbedder._aembed_many
    embed_query = _EngineEmbedder._embed_one
    embed_documents = _EngineEmbedder._embed_many

    def for_collections(self) -> RagasModernEmbedder:
        """The ``BaseRagasEmbedding`` twin that ``ragas.metrics.collections`` require."""
        return RagasModernEmbedder(self.engine)

    def _ragas_fields(self) -> None:
        BaseRagasEmbeddings.__init__(self, cache=None)
        self.run_config = RunConfig()


class RagasModernEmbedder(_EngineEmbedder, BaseRagasEmbedding):
    """A ragbridge `Embedder` as RAGAS's modern ``BaseRagasEmbedding`` (collections metrics).
    Usually made by `RagasEmbedder.for_collections`; batches go to the engine in one request."""

    aembed_text = _EngineEmbedder._aembed_one
    aembed_texts = _EngineEmbedder._aembed_many
    embed_text = _EngineEmbedder._embed_one
    embed_texts = _EngineEmbedder._embed_many

    def _ragas_fields(self) -> None:
        BaseRagasEmbedding.__init__(self, cache=None)


# --------------------------------------------------------------------------- RAGAS's models


def _model_name(obj: Any) -> str:
    """The model name a RAGAS LLM or embeddings object wraps, for the cache key and reports."""
    for inner in (getattr(obj, attr, None) for attr in ("langchain_llm", "llm", "embeddings")):
        for attr in ("model_name", "model"):
            name = getattr(inner, attr, None)
            if isinstance(name, str) and name:
                return name
    name = getattr(obj, "model", None)
    return name if isinstance(name, str) and name else type(obj).__name__


_MESSAGE_TYPES: dict[str, type[BaseMessage]] = {
    "system": SystemMessage,
    "user": HumanMessage,
    "assistant": AIMessage,
}


def _usage_of(result: LLMResult) -> Usage:
    """Tokens from a LangChain result: the provider's ``token_usage`` or a message's metadata."""
    token_usage = (result.llm_output or {}).get("token_usage") or {}
    prompt, completion = token_usage.get("prompt_tokens"), token_usage.get("completion_tokens")
    if prompt is None and result.generations and result.generations[0]:
        message = getattr(result.generations[0][0], "message", None)
        metadata = getattr(message, "usage_metadata", None) or {}
        prompt, completion = metadata.get("input_tokens"), metadata.get("output_tokens")
    return Usage(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))


class _FromRagas:
    """A RAGAS (or LangChain) model seen from ragbridge: the object, and the name of the model
    it wraps (for the cache key and reports)."""

    made_by: ClassVar[str]

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.model = _model_name(wrapped)

    def __repr__(self) -> str:
        return f"{self.made_by}({type(self.wrapped).__name__}, model={self.model!r})"


class _RagasLLMJudge(_FromRagas):
    """A RAGAS LLM as a ragbridge `Judge`: a ``BaseRagasLLM`` (``LangchainLLMWrapper``,
    ``LlamaIndexLLMWrapper``, a custom one) answers free text that the engine parses; an
    instructor-style ``InstructorBaseRagasLLM`` answers with the schema's instance.

    RAGAS's own retry around the model is bypassed (``agenerate_text``, not ``generate``): the
    engine retries, and provider errors are mapped by `classify_error` like every adapter's.
    """

    made_by = "judge_from_ragas"
    wrapped: BaseRagasLLM | InstructorBaseRagasLLM

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        try:
            if isinstance(self.wrapped, InstructorBaseRagasLLM):
                return await self._instructed(messages, schema)
            value = ChatPromptValue(
                messages=[
                    _MESSAGE_TYPES.get(m["role"], HumanMessage)(m["content"]) for m in messages
                ]
            )
            result = await self.wrapped.agenerate_text(value)
        except PermanentJudgeError:
            raise
        except Exception as exc:
            mapped = classify_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise
        generations = result.generations[0] if result.generations else []
        return JudgeReply(text=generations[0].text if generations else "", usage=_usage_of(result))

    async def _instructed(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> JudgeReply:
        llm = self.wrapped
        assert isinstance(llm, InstructorBaseRagasLLM)
        if schema is None:
            raise PermanentJudgeError(
                f"{type(llm).__name__} (an instructor-style RAGAS LLM) answers "
                "only with a response model; this prompt asks for free text"
            )
        prompt = "\n\n".join(m["content"] for m in messages)
        parsed: BaseModel = await llm.agenerate(prompt, schema)
        return JudgeReply(text=parsed.model_dump_json(), parsed=parsed)


class _RagasEmbeddingsEmbedder(_FromRagas):
    """RAGAS embeddings (legacy ``BaseRagasEmbeddings`` / LangChain ``Embeddings``, or the modern
    ``BaseRagasEmbedding``) as a ragbridge `Embedder`."""

    made_by = "embedder_from_ragas"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if hasattr(self.wrapped, "aembed_documents"):
            vectors = await self.wrapped.aembed_documents(list(texts))
        else:
            vectors = await self.wrapped.aembed_texts(list(texts))
        return [[float(x) for x in vector] for vector in vectors]


def as_judge(llm: Any) -> Any:
    """A RAGAS or LangChain model as a ragbridge judge; anything else unchanged."""
    if isinstance(llm, _EngineJudge):
        return llm.engine
    if isinstance(llm, (BaseRagasLLM, InstructorBaseRagasLLM)):
        return _RagasLLMJudge(llm)
    if isinstance(llm, BaseLanguageModel):
        return _RagasLLMJudge(LangchainLLMWrapper(llm))
    return llm


def as_embedder(embeddings: Any) -> Any:
    """RAGAS or LangChain embeddings as a ragbridge embedder; anything else unchanged."""
    if isinstance(embeddings, _EngineEmbedder):
        return embeddings.engine
    if isinstance(embeddings, (BaseRagasEmbeddings, BaseRagasEmbedding)):
        return _RagasEmbeddingsEmbedder(embeddings)
    if not isinstance(embeddings, (Embedder, EmbeddingEngine)) and hasattr(
        embeddings, "aembed_documents"
    ):
        return _RagasEmbeddingsEmbedder(embeddings)  # LangChain Embeddings
    return embeddings


def judge_from_ragas(llm: Any) -> Judge | JudgeEngine:
    """What RAGAS calls an evaluator LLM, as a ragbridge judge.

    ragbridge's own `RagasJudge` / `RagasInstructorJudge` give back their engine (same cache,
    in-flight cap and usage); any other ``BaseRagasLLM`` (``LangchainLLMWrapper(ChatOpenAI())``,
    as RAGAS's tutorials write it) or ``InstructorBaseRagasLLM`` (``llm_factory(...)``) is
    called through its RAGAS interface; a bare LangChain model is wrapped the way
    ``ragas.evaluate`` wraps it. A ragbridge `Judge` or `JudgeEngine` is returned as it is.
    """
    judge = as_judge(llm)
    if isinstance(judge, (JudgeEngine, Judge)):
        return judge
    raise _refused(llm, "a RAGAS LLM, a LangChain model nor a ragbridge Judge")


def embedder_from_ragas(embeddings: Any) -> Embedder | EmbeddingEngine:
    """RAGAS embeddings (or LangChain ``Embeddings``) as a ragbridge embedder; ragbridge's own
    `RagasEmbedder` / `RagasModernEmbedder` give back their engine. See `judge_from_ragas`."""
    embedder = as_embedder(embeddings)
    if isinstance(embedder, (EmbeddingEngine, Embedder)):
        return embedder
    raise _refused(embeddings, "RAGAS embeddings, LangChain embeddings nor a ragbridge Embedder")


def _refused(given: Any, what: str) -> TypeError:
    return TypeError(f"{type(given).__module__}.{type(given).__qualname__} is neither {what}")
