"""Whole conversations captured from real LlamaIndex chat engines, offline.

A real `VectorStoreIndex` over four one-topic documents (split into several nodes each),
embedded by the suite's word-hashing `HashEmbedding` so each question retrieves its own topic,
and a ``MockLLM`` that records every prompt it is given and answers a condense prompt from a
table (a follow-up -> the standalone question a real model would write), so what each engine
retrieved on each turn is known in advance. Models are passed explicitly (``Settings.llm``
needs OpenAI). The three chat engines the issue names are all exercised: condense-question
(answers through a query engine), context, and condense-plus-context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llamaindex_fakes import HashEmbedding
from pydantic import PrivateAttr

from ragbridge.adapters.llamaindex import (
    ChatTurnError,
    acapture_chat_sessions,
    capture_chat_sessions,
)
from ragbridge.core import Conversation, Turn
from ragbridge.core.conversation import load_conversations, save_conversations

TOPICS = {
    "france": "Paris is the capital of France. The Eiffel tower stands in Paris.",
    "germany": "Berlin is the capital of Germany. The Brandenburg gate is in Berlin.",
    "italy": "Rome is the capital of Italy. The Colosseum stands in Rome.",
    "spain": "Madrid is the capital of Spain. The Prado museum is in Madrid.",
}

MODES = ("condense_question", "context", "condense_plus_context")
CONDENSING = {"condense_question", "condense_plus_context"}

# Three turns on three topics: a turn holding another turn's contexts names the wrong country.
TOUR = [
    "Where does the Eiffel tower stand in Paris France?",
    "Which gate is in Berlin Germany?",
    "And the Colosseum in Rome Italy?",
]
TOUR_TOPICS = ["france", "germany", "italy"]

# A follow-up that means nothing alone: "it" is Berlin only in the light of the first turn.
VAGUE = ["What is the capital of Germany?", "What stands in it?"]

REWRITES = {
    "Which gate is in Berlin Germany?": "Which gate is in Berlin, the capital of Germany?",
    "And the Colosseum in Rome Italy?": "Where does the Colosseum stand in Rome Italy?",
    "What stands in it?": "Which gate is in Berlin?",
}
"""What the fake model condenses each follow-up to (a real model resolves the reference)."""


class ScriptedLLM(MockLLM):
    """``MockLLM`` that records its prompts, condenses follow-ups as `REWRITES` says, answers
    everything else ``"answer <n>"`` (n counts prompts), and raises on prompt ``fail_at``."""

    _rewrites: dict[str, str] = PrivateAttr(default_factory=dict)
    _prompts: list[str] = PrivateAttr(default_factory=list)
    _fail_at: int | None = PrivateAttr(default=None)

    @classmethod
    def make(cls, rewrites: dict[str, str] | None = None, fail_at: int | None = None) -> Any:
        llm = cls()
        llm._rewrites = dict(REWRITES if rewrites is None else rewrites)
        llm._fail_at = fail_at
        return llm

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        if self._fail_at is not None and len(self._prompts) >= self._fail_at:
            raise RuntimeError("model unavailable")
        if "tandalone question" in prompt:  # both engines' condense prompts end so
            follow_up = prompt[prompt.rfind("Follow Up") :]
            for asked, standalone in self._rewrites.items():
                if asked in follow_up:
                    return CompletionResponse(text=standalone)
        return CompletionResponse(text=f"answer {len(self._prompts)}")


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    documents = [
        Document(text=" ".join([body] * 4) + f" Remember {doc_id} well.", id_=doc_id)
        for doc_id, body in TOPICS.items()
    ]
    return VectorStoreIndex.from_documents(
        documents,
        embed_model=HashEmbedding(model_name="hash-64"),
        transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0)],
    )


def _engine(index: VectorStoreIndex, mode: str, llm: Any | None = None) -> Any:
    return index.as_chat_engine(
        chat_mode=mode, llm=llm if llm is not None else ScriptedLLM.make(), similarity_top_k=2
    )


def _answers(conversation: Conversation) -> list[Turn]:
    return [turn for _, turn in conversation.assistant_turns()]


def _texts(index: VectorStoreIndex, question: str) -> list[str]:
    nodes = index.as_retriever(similarity_top_k=2).retrieve(question)
    return [n.node.get_content() for n in nodes]


# --------------------------------------------------------------------------- per turn


@pytest.mark.parametrize("mode", MODES)
def test_each_turn_holds_what_was_retrieved_for_it(index: VectorStoreIndex, mode: str) -> None:
    engine = _engine(index, mode)
    (conversation,) = capture_chat_sessions(engine, [TOUR])
    answers = _answers(conversation)
    assert [t.role for t in conversation.turns] == ["user", "assistant"] * 3
    assert [t.content for t in conversation.turns[::2]] == TOUR
    for position, (turn, topic, asked) in enumerate(zip(answers, TOUR_TOPICS, TOUR, strict=True)):
        assert turn.contexts, f"turn {position} recorded no contexts"
        assert {c.id for c in turn.contexts} == {topic}, f"turn {position}"
        # exactly the nodes the index returns for what the engine retrieved with
        standalone = asked if mode == "context" or position == 0 else REWRITES[asked]
        assert [c.text for c in turn.contexts] == _texts(index, standalone)
        assert all(c.score is not None and 0 < c.score <= 1 for c in turn.contexts)
        assert all(c.metadata["ref_doc_id"] == topic for c in turn.contexts)
        assert turn.metadata["engine"] == type(engine).__name__
        assert turn.metadata["retrievals"] == 1
        assert "retrieval_query" not in turn.metadata
        if mode in CONDENSING:
            assert turn.metadata["condensed_question"] == standalone
        else:
            assert "condensed_question" not in turn.metadata
        assert (turn.content or "").startswith("answer ")


@pytest.mark.parametrize("mode", MODES)
def test_a_follow_up_is_retrieved_with_what_the_engine_asked(
    index: VectorStoreIndex, mode: str
) -> None:
    (conversation,) = capture_chat_sessions(_engine(index, mode), [VAGUE])
    first, follow_up = _answers(conversation)
    assert {c.id for c in first.contexts} == {"germany"}
    if mode in CONDENSING:  # "it" resolved to Berlin before retrieving
        assert follow_up.metadata["condensed_question"] == "Which gate is in Berlin?"
        assert {c.id for c in follow_up.contexts} == {"germany"}
    else:  # the context engine retrieves with the bare follow-up, and lands elsewhere
        assert "condensed_question" not in follow_up.metadata
        assert "germany" not in {c.id for c in follow_up.contexts}
        assert [c.text for c in follow_up.contexts] == _texts(index, "What stands in it?")


# --------------------------------------------------------------------------- memory


@pytest.mark.parametrize("mode", MODES)
def test_memory_carries_within_a_conversation_and_not_into_the_next(
    index: VectorStoreIndex, mode: str
) -> None:
    llm = ScriptedLLM.make()
    engine = _engine(index, mode, llm)
    tour, vague = capture_chat_sessions(engine, [TOUR, VAGUE])
    assert (tour.id, vague.id) == ("0", "1")

    # What the model saw: every prompt from the second conversation's first one on.
    start = next(i for i, p in enumerate(llm.prompts) if VAGUE[0] in p)
    before, after = llm.prompts[:start], llm.prompts[start:]
    first_conversation = [*TOUR, *(t.content or "" for t in _answers(tour))]
    assert all(first_conversation)
    assert any(TOUR[0] in p for p in before)
    for prompt in after:
        for text in first_conversation:
            assert text not in prompt
    # ... and within a conversation the history is there: the follow-up's prompts hold turn 1
    follow_up = [p for p in after if VAGUE[1] in p or "Which gate is in Berlin?" in p]
    assert follow_up
    assert any(VAGUE[0] in p for p in follow_up)
    if mode in CONDENSING:  # a first turn has no history: nothing to condense
        assert _answers(vague)[0].metadata["condensed_question"] == VAGUE[0]

    # What the engine holds: the last conversation, and only it.
    held = [(m.role.value, m.content) for m in engine.chat_history]
    assert held == [(t.role, t.content) for t in vague.turns]


def test_a_factory_builds_an_engine_per_conversation(index: VectorStoreIndex) -> None:
    built: list[Any] = []

    def factory() -> Any:
        built.append(_engine(index, "condense_plus_context"))
        return built[-1]

    scripts = [TOUR, VAGUE, TOUR[:1]]
    conversations = asyncio.run(acapture_chat_sessions(factory, scripts, max_concurrency=2))
    assert len(built) == 3
    assert [c.id for c in conversations] == ["0", "1", "2"]  # the scripts' order
    by_engine = sorted(
        ([m.content for m in e.chat_history if m.role.value == "user"] for e in built), key=len
    )
    assert by_engine == sorted([TOUR, VAGUE, TOUR[:1]], key=len)
    assert [{c.id for c in t.contexts} for t in _answers(conversations[1])] == [
        {"germany"},
        {"germany"},
    ]


@pytest.mark.parametrize("mode", MODES)
def test_async_capture_records_the_same_turns(index: VectorStoreIndex, mode: str) -> None:
    engine = _engine(index, mode)
    synced = capture_chat_sessions(engine, [TOUR, VAGUE])
    awaited = asyncio.run(acapture_chat_sessions(engine, [TOUR, VAGUE]))

    def shape(conversations: list[Conversation]) -> list[list[Any]]:
        return [
            [
                (
                    [c.id for c in t.contexts],
                    [c.text for c in t.contexts],
                    t.metadata.get("condensed_question"),
                )
                for t in _answers(conversation)
            ]
            for conversation in conversations
        ]

    assert shape(awaited) == shape(synced)
    assert [{c.id for c in t.contexts} for t in _answers(awaited[0])] == [
        {topic} for topic in TOUR_TOPICS
    ]


# --------------------------------------------------------------------------- the script


def test_the_scripts_expected_values_land_on_their_turns(index: VectorStoreIndex) -> None:
    script = Conversation(
        id="tour",
        turns=[
            Turn(role="user", content=TOUR[0]),
            Turn(role="assistant", id="a-paris", reference="In Paris.", relevance={"france": 2}),
            Turn(role="user", content=TOUR[1]),
            Turn(role="user", content=TOUR[2]),  # no expected values for the second turn
            Turn(role="assistant", id="a-rome", reference="In Rome.", relevance={"italy": 1}),
        ],
        expected_outcome="the user knows where the three landmarks are",
        metadata={"suite": "landmarks"},
    )
    (conversation,) = capture_chat_sessions(_engine(index, "context"), [script])
    first, second, third = _answers(conversation)
    assert (first.id, first.reference, first.relevance) == ("a-paris", "In Paris.", {"france": 2})
    assert (second.id, second.reference, second.relevance) == (None, None, None)
    assert (third.id, third.reference, third.relevance) == ("a-rome", "In Rome.", {"italy": 1})
    assert [{c.id for c in t.contexts} for t in (first, second, third)] == [
        {"france"},
        {"germany"},
        {"italy"},
    ]
    assert conversation.expected_outcome == script.expected_outcome
    assert conversation.metadata == {"suite": "landmarks"}
    sample = conversation.turn_sample(5)  # the third answer, scored with its history
    assert sample.question == TOUR[2]
    assert sample.reference == "In Rome."
    assert [t.content for t in sample.history or []][::2] == TOUR[:2]


def test_captured_conversations_save_and_load(index: VectorStoreIndex, tmp_path: Path) -> None:
    conversations = capture_chat_sessions(_engine(index, "condense_question"), [TOUR, VAGUE])
    path = tmp_path / "captured.jsonl"
    assert save_conversations(conversations, path) == 2
    assert list(load_conversations(path)) == conversations


# --------------------------------------------------------------------------- refusals


class ResetKeepsHistory(ContextChatEngine):
    """An engine whose ``reset`` forgets to clear its memory."""

    def reset(self) -> None:
        return None


def test_an_engine_whose_reset_keeps_its_history_is_refused(index: VectorStoreIndex) -> None:
    engine = ResetKeepsHistory.from_defaults(
        retriever=index.as_retriever(similarity_top_k=2), llm=ScriptedLLM.make()
    )
    with pytest.raises(RuntimeError, match=r"still holds 6 messages after reset.*'1'"):
        capture_chat_sessions(engine, [TOUR, VAGUE])


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_failing_turn_names_its_conversation_and_turn(index: VectorStoreIndex, run: str) -> None:
    # The context engine prompts once per turn: the third prompt is the second conversation's
    # first turn.
    engine = _engine(index, "context", ScriptedLLM.make(fail_at=3))
    scripts = [VAGUE, VAGUE]

    def capture() -> object:
        if run == "sync":
            return capture_chat_sessions(engine, scripts)
        return asyncio.run(acapture_chat_sessions(engine, scripts))

    with pytest.raises(ChatTurnError) as caught:
        capture()
    assert (caught.value.conversation_id, caught.value.turn) == ("1", 0)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "model unavailable" in str(caught.value)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda e: capture_chat_sessions(
                e,
                [
                    Conversation(
                        id="c",
                        turns=[
                            Turn(role="system", content="Be brief."),
                            Turn(role="user", content="Hi"),
                        ],
                    )
                ],
            ),
            ValueError,
            r"turns\[0\] is a system turn",
        ),
        (
            # a list of messages is named by its position: "0", as the conversation after it
            lambda e: capture_chat_sessions(
                e, [TOUR, Conversation(id="0", turns=[Turn(role="user", content="Hi")])]
            ),
            ValueError,
            "unique",
        ),
        (lambda e: capture_chat_sessions(e, ["just one string"]), TypeError, r"scripts\[0\]"),
        (
            lambda e: asyncio.run(acapture_chat_sessions(e, [TOUR], max_concurrency=2)),
            ValueError,
            "one memory",
        ),
    ],
)
def test_scripts_and_engines_it_cannot_replay_are_refused(
    index: VectorStoreIndex, call: Callable[[Any], Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call(_engine(index, "context"))


def test_a_query_engine_is_not_a_chat_engine(index: VectorStoreIndex) -> None:
    query_engine = index.as_query_engine(llm=ScriptedLLM.make())
    with pytest.raises(TypeError, match="a query engine: use run_query_engine"):
        capture_chat_sessions(query_engine, [TOUR])
    with pytest.raises(TypeError, match="factory returned a"):
        capture_chat_sessions(lambda: query_engine, [TOUR])
