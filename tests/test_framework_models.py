"""Framework model objects passed as judge= / embedder= are wrapped once, when `Settings` is
built, or refused with one TypeError (issue 16: "Judges and models")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from ragbridge.core import Sample, evaluate
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.judging.judge import Judge, JudgeReply
from ragbridge.core.settings import Settings
from ragbridge.core.testing import HashEmbedder

VERDICT = json.dumps({"explanation": "It answers the question.", "verdict": True})
SAMPLE = Sample(id="s", question="When does the office open?", answer="At 9 am.")


def _helpfulness(judge: Any) -> float | None:
    evaluation = evaluate([SAMPLE], ["helpfulness:llm"], judge=judge)
    score = evaluation.get("s", "helpfulness")
    assert score is not None
    assert score.failure is None, score.failure
    return score.value


def test_a_langchain_chat_model_is_a_judge() -> None:
    from langchain_core.language_models import FakeListChatModel

    from ragbridge.adapters.langchain import LangChainJudge

    model = FakeListChatModel(responses=[VERDICT])
    assert isinstance(Settings(judge=model).judge, LangChainJudge)
    assert _helpfulness(model) == 1.0


def test_a_llamaindex_llm_is_a_judge() -> None:
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    from ragbridge.adapters.llamaindex.capture import LlamaIndexJudge

    class Scripted(CustomLLM):  # LlamaIndex's documented way to write an LLM
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="scripted")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
            return CompletionResponse(text=VERDICT)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            raise NotImplementedError

    llm = Scripted()
    wrapped = Settings(judge=llm).judge
    assert isinstance(wrapped, LlamaIndexJudge)
    assert wrapped.model == "scripted"
    assert _helpfulness(llm) == 1.0


def test_a_deepeval_model_is_a_judge() -> None:
    from deepeval.models import DeepEvalBaseLLM

    from ragbridge.adapters.framework_models import DeepEvalModelJudge

    class Scripted(DeepEvalBaseLLM):  # DeepEval's documented custom-model shape
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def load_model(self) -> None:
            return None

        def generate(self, prompt: str) -> str:
            self.prompts.append(prompt)
            return VERDICT

        async def a_generate(self, prompt: str) -> str:  # takes no schema: the judge copes
            return self.generate(prompt)

        def get_model_name(self) -> str:
            return "scripted-deepeval"

    model = Scripted()
    wrapped = Settings(judge=model).judge
    assert isinstance(wrapped, DeepEvalModelJudge)
    assert wrapped.model == "scripted-deepeval"
    assert _helpfulness(model) == 1.0
    assert "When does the office open?" in model.prompts[0]


def test_ragbridges_own_framework_wrappers_unwrap_to_their_engine() -> None:
    from ragbridge.adapters.deepeval import DeepEvalJudge

    engine = JudgeEngine(_Plain())
    assert Settings(judge=DeepEvalJudge(engine)).judge is engine


class _Plain:
    model = "plain"

    async def generate(self, messages: Sequence[Any], *, schema: Any = None) -> JudgeReply:
        return JudgeReply(text=VERDICT)


def test_a_ragbridge_judge_passes_through_unchanged() -> None:
    judge = _Plain()
    assert isinstance(judge, Judge)
    assert Settings(judge=judge).judge is judge
    assert _helpfulness(judge) == 1.0


def test_frameworks_embeddings_are_embedders() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from llama_index.core.embeddings import MockEmbedding

    from ragbridge.adapters.langchain import LangChainEmbedder
    from ragbridge.adapters.llamaindex.capture import LlamaIndexEmbedder

    assert isinstance(
        Settings(embedder=DeterministicFakeEmbedding(size=8)).embedder, LangChainEmbedder
    )
    assert isinstance(Settings(embedder=MockEmbedding(embed_dim=8)).embedder, LlamaIndexEmbedder)
    evaluation = evaluate(
        [SAMPLE], ["answer_relevance:offline"], embedder=DeterministicFakeEmbedding(size=8)
    )
    score = evaluation.get("s", "answer_relevance")
    assert score is not None
    assert score.value is not None


def test_what_cannot_be_a_judge_is_refused_at_once_with_what_would_do() -> None:
    with pytest.raises(TypeError, match=r"a model name is not a judge.*OpenAIJudge"):
        Settings(judge="gpt-4o")
    with pytest.raises(TypeError, match=r"judge=builtins.object is not a ragbridge Judge"):
        Settings(judge=object())

    class SyncOnly:
        model = "sync"

        def generate(self, messages: Any, *, schema: Any = None) -> JudgeReply:
            return JudgeReply(text="")

    with pytest.raises(TypeError, match="async"):
        Settings(judge=SyncOnly())
    with pytest.raises(TypeError, match="not a ragbridge Embedder"):
        Settings(embedder=42)
    assert isinstance(Settings(embedder=HashEmbedder()).embedder, HashEmbedder)


def test_an_openai_client_needs_a_model_name() -> None:
    openai = pytest.importorskip("openai")
    from ragbridge.adapters.framework_models import as_judge
    from ragbridge.adapters.openai import OpenAIJudge

    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="not-a-key")
    with pytest.raises(TypeError, match=r"names no model.*as_judge\(client, model="):
        Settings(judge=client)
    judge = as_judge(client, model="tiny")
    assert isinstance(judge, OpenAIJudge)
    assert judge.model == "tiny"
    asyncio.run(client.close())


def test_ragbridges_ragas_embedders_unwrap_to_their_engine() -> None:
    from ragbridge.adapters.ragas import RagasEmbedder, RagasModernEmbedder
    from ragbridge.core.judging.embedding import EmbeddingEngine

    engine = EmbeddingEngine(HashEmbedder())
    for wrapper in (RagasEmbedder, RagasModernEmbedder):
        assert Settings(embedder=wrapper(engine)).embedder is engine


def test_a_package_can_register_a_wrapper_for_its_own_models() -> None:
    from ragbridge.core.judging.model_objects import register_wrapper

    class TheirModel:  # a model of a framework ragbridge does not know
        name = "theirs"

    def wrap(obj: Any, kind: str) -> Any:
        if kind == "judge" and isinstance(obj, TheirModel):
            return _Plain()
        return None

    with pytest.raises(TypeError, match="no installed adapter wraps it"):
        Settings(judge=TheirModel())
    register_wrapper(wrap)
    assert isinstance(Settings(judge=TheirModel()).judge, _Plain)
