"""Running LangChain over `Sample`s: a chain (`run_pipeline`) or a retriever alone
(`retrieve_only`) on each sample's question, the answer and retrieved contexts filled in.

Why it is built this way: each input gets its own root run id, so the retrieval a
`RetrievalCapture` records inside the chain is matched to *its* sample however ``ainvoke`` calls
interleave; one failing sample is recorded in its metadata and the run goes on; the sync
functions run the async ones (`run_sync`: on a worker thread when a loop is already running,
as in Jupyter).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from uuid import uuid4

from typing_extensions import TypedDict, Unpack

from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.runner import run_sync

from ._framework import BaseMessage, Runnable, RunnableConfig
from .capture import RetrievalCapture
from .documents import document_to_context
from .models import message_text

__all__ = [
    "PipelineOptions",
    "Progress",
    "RetrieveOptions",
    "answer_of",
    "aretrieve_only",
    "arun_pipeline",
    "retrieve_only",
    "run_pipeline",
]

Progress = Callable[[int, int], Any]


class PipelineOptions(TypedDict, total=False):
    """`arun_pipeline`'s keyword arguments, which `run_pipeline` passes on to it."""

    retriever_name: str | None
    max_concurrency: int
    progress: Progress | None
    answer_key: str | None
    input_key: str | None
    id_key: str | Sequence[str] | None
    config: RunnableConfig | None


class RetrieveOptions(TypedDict, total=False):
    """`aretrieve_only`'s keyword arguments, which `retrieve_only` passes on to it."""

    max_concurrency: int
    id_key: str | Sequence[str] | None


"""Called as ``progress(done, total)`` after each sample."""

_T = TypeVar("_T")

_ANSWER_KEYS = ("answer", "output", "result")


def answer_of(output: Any, answer_key: str | None) -> str | None:
    """The answer in a chain's output: a str, a message, or a dict's answer/output/result."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return message_text(output)
    if isinstance(output, Mapping):
        keys = (answer_key,) if answer_key is not None else _ANSWER_KEYS
        for key in keys:
            if key in output:
                return answer_of(output[key], None)
        return None
    return None


def _chain_input(question: str, input_key: str | None) -> Any:
    return question if input_key is None else {input_key: question}


async def _run_one(
    call: Callable[[], Awaitable[Any]], metadata: dict[str, Any], read: Callable[[Any], _T]
) -> _T | None:
    """``read`` of what ``call`` returns, or None when it fails: one failing sample must not stop
    the run, so its error goes to ``metadata["error"]``; ``metadata["latency_s"]`` is the wall
    time of the call (and of ``read``) either way. Cancellation is not a failure: it goes on."""
    start = time.perf_counter()
    result: _T | None = None
    try:
        output = await call()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        metadata["error"] = f"{type(exc).__name__}: {exc}"
    else:
        result = read(output)
    metadata["latency_s"] = time.perf_counter() - start
    return result


async def arun_pipeline(
    chain: Runnable[Any, Any],
    samples: Iterable[Sample],
    *,
    retriever_name: str | None = None,
    max_concurrency: int = 8,
    progress: Progress | None = None,
    answer_key: str | None = None,
    input_key: str | None = None,
    id_key: str | Sequence[str] | None = None,
    config: RunnableConfig | None = None,
) -> list[Sample]:
    """Async `run_pipeline`."""
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be >= 1")
    items = list(samples)
    cap = RetrievalCapture(id_key=id_key)
    sem = asyncio.Semaphore(max_concurrency)
    done = 0
    base = dict(config or {})
    user_callbacks = base.pop("callbacks", None)

    async def one(sample: Sample) -> Sample:
        nonlocal done
        run_id = uuid4()
        callbacks: list[Any] = [cap]
        if isinstance(user_callbacks, list):
            callbacks.extend(user_callbacks)
        run_config: RunnableConfig = {
            **base,  # type: ignore[typeddict-item]
            "callbacks": callbacks,
            "run_id": run_id,
            "metadata": {**dict(base.get("metadata") or {}), "ragbridge_sample_id": sample.id},
        }
        metadata = dict(sample.metadata)

        def read_answer(output: Any) -> str | None:
            answer = answer_of(output, answer_key)
            if answer is None:
                metadata["answer_note"] = (
                    f"no answer found in chain output of type {type(output).__name__}"
                )
            return answer

        async with sem:
            answer = await _run_one(
                lambda: chain.ainvoke(_chain_input(sample.question, input_key), run_config),
                metadata,
                read_answer,
            )
        chosen, info = cap.select(run_id, retriever_name)
        metadata.update(info)
        models = cap.models_for(run_id)
        if models:  # the last model to run wrote the answer; ragbridge eval warns if it judges
            metadata["generator_model"] = models[-1]
            if len(models) > 1:
                metadata["generator_models"] = models
        contexts = [] if chosen is None else chosen.contexts(id_key=id_key)
        done += 1
        if progress is not None:
            progress(done, len(items))
        return sample.model_copy(
            update={"answer": answer, "contexts": contexts, "metadata": metadata}
        )

    return list(await asyncio.gather(*(one(s) for s in items)))


def run_pipeline(
    chain: Runnable[Any, Any], samples: Iterable[Sample], **options: Unpack[PipelineOptions]
) -> list[Sample]:
    """Run ``chain`` on each sample's question; return copies with ``contexts`` and ``answer``.

    Each input gets its own root run id, so the retrieval captured inside the chain is matched
    to *its* sample however the runs interleave. When several retrievals ran, the one named
    ``retriever_name`` (run name or tag) is used, else the last to finish; ``metadata`` says which
    (``retriever``, ``retrieval_query``, ``retrieval_note``). ``answer`` is the output string,
    an AIMessage's content, or the dict key ``answer_key`` (default: answer/output/result).
    ``metadata["latency_s"]`` is the wall time of the invocation; ``metadata["generator_model"]``
    the model that ran last inside it (``ls_model_name``), so a judge of the same model is
    flagged by ``ragbridge eval``. A chain error on one sample is
    recorded as ``metadata["error"]`` (no answer) and the run continues. ``input_key`` sends
    ``{input_key: question}`` instead of the bare question. At most ``max_concurrency``
    invocations run at once (default 8). Reference, relevance and metadata are kept.
    ``options`` are `PipelineOptions`; ``config`` is the `RunnableConfig` each invocation
    starts from (its callbacks are kept next to the capture). The others default to None.
    """
    return run_sync(arun_pipeline(chain, samples, **options))


async def aretrieve_only(
    retriever: Runnable[Any, Any],
    samples: Iterable[Sample],
    k: int | None = None,
    *,
    max_concurrency: int = 8,
    id_key: str | Sequence[str] | None = None,
) -> list[Sample]:
    """Async `retrieve_only`."""
    items = list(samples)
    sem = asyncio.Semaphore(max_concurrency)

    async def one(sample: Sample) -> Sample:
        metadata = dict(sample.metadata)

        def read_contexts(docs: Any) -> list[Context]:
            ranked = list(docs)[:k] if k is not None else list(docs)
            return [document_to_context(d, id_key=id_key) for d in ranked]

        async with sem:
            found = await _run_one(
                lambda: retriever.ainvoke(sample.question), metadata, read_contexts
            )
        contexts = [] if found is None else found
        return sample.model_copy(update={"contexts": contexts, "metadata": metadata})

    return list(await asyncio.gather(*(one(s) for s in items)))


def retrieve_only(
    retriever: Runnable[Any, Any],
    samples: Iterable[Sample],
    k: int | None = None,
    **options: Unpack[RetrieveOptions],
) -> list[Sample]:
    """Retrieval-only run: each sample's ``contexts`` from ``retriever`` (top ``k`` if given).

    For scoring a retriever alone with the ranking measures, without paying for generation.
    ``k`` cuts the returned ranking; it cannot make a retriever return *more* documents (set its
    ``search_kwargs`` for that). Errors are recorded per sample as in `run_pipeline`.
    ``options`` are `RetrieveOptions` (``max_concurrency=8``, ``id_key=None``).
    """
    return run_sync(aretrieve_only(retriever, samples, k, **options))
