"""RAGAS's ``MultiTurnSample`` and ragbridge's `Conversation`, both ways, against real ragas
0.4.3 (offline: converting needs no model): exact round trips (in memory and through RAGAS's
JSONL form), what RAGAS itself sees and scores, samples written the way RAGAS's docs write them
(no ragbridge records), what RAGAS cannot hold, and the single-turn readers' pointers here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbridge.core import Context, Conversation, Sample, ToolCall, Turn
from ragbridge.core.testing import CountingJudge, HashEmbedder

ragas = pytest.importorskip("ragas")

from ragas.dataset_schema import EvaluationDataset, MultiTurnSample  # noqa: E402
from ragas.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from ragas.messages import ToolCall as RagasToolCall  # noqa: E402

from ragbridge.adapters.ragas import (  # noqa: E402
    conversation_from_multi_turn,
    from_multi_turn_dataset,
    from_ragas_dataset,
    from_ragas_jsonl,
    to_multi_turn_dataset,
    to_multi_turn_sample,
    to_ragas_dataset,
)
from ragbridge.core.scoring.runner import evaluate  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _hermetic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # RAGAS writes under ~/.local/share/ragas: keep it in a temporary home. Module-scoped, so
    # the hypothesis tests below may use it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGAS_DO_NOT_TRACK", "true")
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield


# An agent conversation with everything a turn can carry: a system prompt, ids, a retriever
# tool call and its answer, contexts with ids/scores/metadata, graded relevance, references.
CHAT = Conversation(
    id="chat-7",
    turns=[
        Turn(role="system", content="Answer from the staff handbook."),
        Turn(role="user", content="How many days of leave do full-timers get?", id="u1"),
        Turn(
            role="assistant",
            id="a1",
            tool_calls=[ToolCall(name="search_handbook", args={"query": "leave"}, id="k1")],
        ),
        Turn(role="tool", content="Full-time staff get 25 days.", tool_call_id="k1"),
        Turn(
            role="assistant",
            content="25 days.",
            id="a2",
            contexts=[
                Context(
                    text="Full-time staff get 25 days.", id="hb-3", score=0.8, metadata={"p": 4}
                )
            ],
            reference="25 days",
            reference_contexts=["Full-time staff get 25 days of leave."],
            relevance={"hb-3": 2, "hb-9": 0},
            metadata={"latency_s": 0.4},
        ),
        Turn(role="user", content="And for part-timers?", id="u2"),
        Turn(
            role="assistant",
            content="Pro rata.",
            contexts=[Context(text="Part-time staff get leave pro rata.", id="hb-4")],
            relevance={},
            # the answering turn's expected calls are RAGAS's reference_tool_calls
            reference_tool_calls=[
                ToolCall(name="search_handbook", args={"query": "leave"}, id="r1")
            ],
        ),
        Turn(role="system", content="Session closed."),
    ],
    expected_outcome="The user learns the leave of full- and part-timers.",
    metadata={
        "channel": "chat",
        "ragas": {
            "reference_topics": ["leave"],
            "rubrics": {"score1": "wrong", "score5": "right"},
        },
    },
)


def _seen_by_ragas(sample: MultiTurnSample) -> list[dict[str, Any]]:
    """What RAGAS's metrics read of a sample: each message without its metadata."""
    return [m.model_dump(exclude={"metadata"}) for m in sample.user_input]


# --------------------------------------------------------------------------- out and back


def test_a_conversation_comes_back_equal_and_ragas_sees_its_messages() -> None:
    sample = to_multi_turn_sample(CHAT)
    assert conversation_from_multi_turn(sample) == CHAT
    # RAGAS sees the exchange: human, AI (its tool call), tool, AI, ... and no system message.
    assert [m.type for m in sample.user_input] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert _seen_by_ragas(sample)[1] == {
        "content": "",
        "type": "ai",
        "tool_calls": [{"name": "search_handbook", "args": {"query": "leave"}}],
    }
    assert "handbook" not in sample.pretty_repr().split("\n")[0]  # the system turn is no message
    assert sample.reference == CHAT.expected_outcome
    assert sample.reference_topics == ["leave"]
    assert sample.rubrics == {"score1": "wrong", "score5": "right"}
    assert sample.reference_tool_calls == [
        RagasToolCall(name="search_handbook", args={"query": "leave"})
    ]
    # the turn's own metadata is the message's, next to the record
    assert sample.user_input[3].metadata is not None
    assert sample.user_input[3].metadata["latency_s"] == 0.4


def test_ragas_own_tool_call_metric_scores_what_we_write() -> None:
    from ragas.metrics._tool_call_accuracy import ToolCallAccuracy

    sample = to_multi_turn_sample(CHAT)
    assert asyncio.run(ToolCallAccuracy().multi_turn_ascore(sample)) == 1.0
    wrong = _with_answering_refs(CHAT, [ToolCall(name="web")])
    assert asyncio.run(ToolCallAccuracy().multi_turn_ascore(to_multi_turn_sample(wrong))) == 0.0


def _with_answering_refs(conversation: Conversation, calls: list[ToolCall] | None) -> Conversation:
    """``conversation`` with its last assistant turn's reference tool calls replaced."""
    turns = list(conversation.turns)
    last = max(i for i, t in enumerate(turns) if t.role == "assistant")
    turns[last] = turns[last].model_copy(update={"reference_tool_calls": calls})
    return conversation.model_copy(update={"turns": turns})


def test_reference_tool_calls_are_the_answering_turns_with_their_ids() -> None:
    sample = to_multi_turn_sample(CHAT)
    last = sample.user_input[-1]
    assert last.metadata is not None
    record = last.metadata["ragbridge"]["turn"]
    assert "reference_tool_calls" not in record  # the sample's field holds them
    assert record["reference_tool_call_ids"] == ["r1"]
    back = conversation_from_multi_turn(sample)
    assert back.turns[-2].reference_tool_calls == CHAT.turns[-2].reference_tool_calls
    assert "reference_tool_calls" not in back.metadata["ragas"]
    # the answering turn scored as a sample carries them, next to the calls it made
    answer = back.turn_sample(len(back.turns) - 2)
    assert answer.reference_tool_calls == [
        ToolCall(name="search_handbook", args={"query": "leave"}, id="r1")
    ]


def test_reference_tool_calls_kept_in_metadata_before_turns_had_them_round_trip() -> None:
    # A conversation written before turns had the field: its last assistant turn has none, the
    # conversation's metadata holds them. RAGAS still sees them, and they come back there.
    legacy = _with_answering_refs(CHAT, None).model_copy(
        update={"metadata": {"ragas": {"reference_tool_calls": [{"name": "s", "args": {}}]}}}
    )
    sample = to_multi_turn_sample(legacy)
    assert sample.reference_tool_calls == [RagasToolCall(name="s", args={})]
    assert conversation_from_multi_turn(sample) == legacy
    # both at once: RAGAS's field is the turn's; the metadata's stay plain metadata
    both = legacy.model_copy(update={"turns": CHAT.turns})
    sample = to_multi_turn_sample(both)
    assert sample.reference_tool_calls == [
        RagasToolCall(name="search_handbook", args={"query": "leave"})
    ]
    assert conversation_from_multi_turn(sample) == both
    # no assistant turn to hold them: a RAGAS sample's calls go to the metadata
    no_answer = MultiTurnSample(
        user_input=[HumanMessage(content="hi")],
        reference_tool_calls=[RagasToolCall(name="s", args={"q": 1})],
    )
    read = conversation_from_multi_turn(no_answer, id="h")
    assert read.metadata["ragas"]["reference_tool_calls"] == [{"name": "s", "args": {"q": 1}}]
    assert to_multi_turn_sample(read).reference_tool_calls == no_answer.reference_tool_calls


def test_a_dataset_round_trips_through_ragas_jsonl(tmp_path: Path) -> None:
    plain = Conversation(
        id="c2", turns=[Turn(role="user", content="hi"), Turn(role="assistant", content="")]
    )
    dataset = to_multi_turn_dataset([CHAT, plain])
    assert dataset.is_multi_turn()
    path = tmp_path / "convs.jsonl"
    dataset.to_jsonl(path)
    again = EvaluationDataset.from_jsonl(path)
    assert from_multi_turn_dataset(again) == [CHAT, plain]
    assert from_multi_turn_dataset(dataset) == [CHAT, plain]
    assert to_multi_turn_dataset([]).samples == []


# The strategy: conversations RAGAS can hold (a tool turn right after the assistant turn that
# called tools, or another tool turn; system turns anywhere), with every optional field, ids
# that collide with nothing, metadata that uses the keys the mapping itself uses, and empty
# strings where None would be wrong.
_TEXT = st.text(max_size=8)
_ID = st.text(min_size=1, max_size=5)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_TEXT, inner, max_size=2),
    max_leaves=4,
)
_KEY = st.sampled_from(["ragbridge", "ragas", "turn"]) | _ID
_META = st.dictionaries(_KEY, _JSON, max_size=2)
_RAGAS_META = st.fixed_dictionaries(
    {},
    optional={
        "reference_topics": st.lists(_TEXT, max_size=2),
        "rubrics": st.dictionaries(_TEXT, _TEXT, max_size=2),
        "reference_tool_calls": st.lists(
            st.fixed_dictionaries(
                {"name": _TEXT, "args": st.dictionaries(_TEXT, _JSON, max_size=2)}
            ),
            max_size=2,
        ),
        "generated": st.lists(_TEXT, max_size=1),
        "other": _JSON,
    },
)
_CONTEXTS = st.lists(
    st.builds(
        Context,
        text=_TEXT,
        id=st.none() | _ID,
        score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
        metadata=_META,
    ),
    max_size=2,
)


@st.composite
def _conversations(draw: st.DrawFn) -> Conversation:
    used: set[str] = set()

    def fresh() -> str | None:
        name = draw(st.none() | _ID)
        if name is None or name in used:
            return None
        used.add(name)
        return name

    def expected() -> list[ToolCall] | None:
        if draw(st.booleans()):
            return None
        return [
            ToolCall(
                name=draw(_ID), args=draw(st.dictionaries(_TEXT, _JSON, max_size=2)), id=fresh()
            )
            for _ in range(draw(st.integers(0, 2)))
        ]

    def assistant(calls: list[ToolCall]) -> Turn:
        return Turn(
            role="assistant",
            reference_tool_calls=expected(),
            content=draw(st.none() | _TEXT),
            id=fresh(),
            contexts=draw(_CONTEXTS),
            tool_calls=calls,
            reference=draw(st.none() | _TEXT),
            reference_contexts=draw(st.none() | st.lists(_TEXT, max_size=2)),
            relevance=draw(st.none() | st.dictionaries(_ID, st.integers(-10, 1000), max_size=2)),
            metadata=draw(_META),
        )

    def plain(role: str) -> Turn:
        return Turn(role=role, content=draw(_TEXT), id=fresh(), metadata=draw(_META))  # type: ignore[arg-type]

    turns: list[Turn] = []
    kinds = st.sampled_from(["user", "assistant", "agent", "system"])
    for kind in draw(st.lists(kinds, min_size=1, max_size=5)):
        if kind in ("user", "system"):
            turns.append(plain(kind))
        elif kind == "assistant":
            turns.append(assistant([]))
        else:  # an assistant turn calling tools, then the tool turns answering some calls
            calls = [
                ToolCall(
                    name=draw(_ID), args=draw(st.dictionaries(_TEXT, _JSON, max_size=2)), id=fresh()
                )
                for _ in range(draw(st.integers(1, 3)))
            ]
            turns.append(assistant(calls))
            answerable = [c.id for c in calls if c.id is not None]
            for call_id in draw(st.permutations(answerable))[: draw(st.integers(0, 3))]:
                if draw(st.booleans()):
                    turns.append(plain("system"))
                turns.append(
                    Turn(
                        role="tool",
                        content=draw(_TEXT),
                        tool_call_id=call_id,
                        id=fresh(),
                        metadata=draw(_META),
                    )
                )
    if all(t.role == "system" for t in turns):
        turns.append(plain("user"))
    metadata = draw(_META)
    if draw(st.booleans()):
        metadata["ragas"] = draw(_RAGAS_META)
    return Conversation(
        id=draw(_ID),
        turns=turns,
        expected_outcome=draw(st.none() | _TEXT),
        metadata=metadata,
    )


@settings(max_examples=150, deadline=None)
@given(conversation=_conversations())
def test_any_conversation_comes_back_exactly(conversation: Conversation) -> None:
    sample = to_multi_turn_sample(conversation)
    assert conversation_from_multi_turn(sample) == conversation
    # ... and through RAGAS's own list (JSONL) form, which is what to_jsonl/from_jsonl write
    rows = json.loads(json.dumps(EvaluationDataset(samples=[sample]).to_list()))
    assert from_multi_turn_dataset(EvaluationDataset.from_list(rows)) == [conversation]
    # RAGAS sees each non-system turn as a message, in order, with its content
    shown = [t for t in conversation.turns if t.role != "system"]
    assert [m.content for m in sample.user_input] == [t.content or "" for t in shown]


# --------------------------------------------------------------------------- written by RAGAS users


def _weather() -> MultiTurnSample:
    """The multi-turn sample of RAGAS's docs ("Evaluation Sample" page), as they build it, with
    the expected tool call that RAGAS's ToolCallAccuracy reads."""
    conversation = [
        HumanMessage(content="What's the weather like in New York City today?"),
        AIMessage(
            content="Let me check the current weather in New York City for you.",
            tool_calls=[RagasToolCall(name="WeatherAPI", args={"location": "New York City"})],
        ),
        ToolMessage(content="It's sunny with a temperature of 75°F in New York City."),
        AIMessage(content="It's sunny and 75 degrees Fahrenheit in New York City today."),
    ]
    return MultiTurnSample(
        user_input=conversation,
        reference="Provide the current weather in New York City to the user.",
        reference_tool_calls=[RagasToolCall(name="WeatherAPI", args={"location": "New York City"})],
    )


def test_a_sample_built_as_ragas_docs_build_it_reads_and_scores_per_turn() -> None:
    sample = _weather()
    before = sample.model_dump()
    conversation = conversation_from_multi_turn(sample)
    assert sample.model_dump() == before  # reading changes nothing in the sample
    assert [t.role for t in conversation.turns] == ["user", "assistant", "tool", "assistant"]
    call = conversation.turns[1].tool_calls[0]
    assert call == ToolCall(name="WeatherAPI", args={"location": "New York City"}, id="call-1-0")
    assert conversation.turns[2].tool_call_id == "call-1-0"
    assert conversation.expected_outcome == sample.reference
    ragas_meta = conversation.metadata["ragas"]
    # RAGAS's expected calls are the answering (last assistant) turn's
    assert "reference_tool_calls" not in ragas_meta
    assert conversation.turns[3].reference_tool_calls == [
        ToolCall(name="WeatherAPI", args={"location": "New York City"})
    ]
    # what was made up is said, and the id is stable across reads
    assert ragas_meta["generated"] == ["id", "turns[1].tool_calls[0].id", "turns[2].tool_call_id"]
    assert conversation.id.startswith("ragas-")
    assert conversation_from_multi_turn(_weather()).id == conversation.id
    assert conversation_from_multi_turn(sample, id="nyc").id == "nyc"

    # scored turn by turn as ragbridge scores any conversation
    turns = [i for i, t in conversation.assistant_turns() if t.content]
    samples = [conversation.turn_sample(i) for i in turns]
    assert [s.id for s in samples] == [f"{conversation.id}#1", f"{conversation.id}#3"]
    assert {s.question for s in samples} == {"What's the weather like in New York City today?"}
    assert samples[1].answer == "It's sunny and 75 degrees Fahrenheit in New York City today."
    # the answering turn's sample has the call made on the way and the call expected
    assert samples[1].trajectory is not None
    assert [s.call() for s in samples[1].trajectory] == [call]
    returned = "It's sunny with a temperature of 75°F in New York City."
    assert samples[1].trajectory[0].output == returned
    assert samples[1].reference_tool_calls == [
        ToolCall(name="WeatherAPI", args={"location": "New York City"})
    ]
    judge = CountingJudge()
    evaluation = evaluate(samples, ["answer_relevance"], judge=judge, embedder=HashEmbedder())
    for s in samples:
        score = evaluation.get(s.id, "answer_relevance")
        assert score is not None
        assert score.failure is None, score
        assert score.value is not None
        assert 0.0 <= score.value <= 1.0
    assert judge.calls == len(samples)

    # out to RAGAS again: RAGAS sees the very messages its user wrote, and scores them the same
    back = to_multi_turn_sample(conversation)
    assert _seen_by_ragas(back) == _seen_by_ragas(sample)
    assert back.reference_tool_calls == sample.reference_tool_calls
    assert conversation_from_multi_turn(back) == conversation


def test_tool_messages_answer_the_calls_before_them_in_order() -> None:
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="Weather and time in Paris?"),
            AIMessage(
                content="",
                tool_calls=[
                    RagasToolCall(name="weather", args={"city": "Paris"}),
                    RagasToolCall(name="clock", args={"city": "Paris"}),
                ],
            ),
            ToolMessage(content="Rain."),
            ToolMessage(content="10:00."),
            AIMessage(content="Rainy, and it is ten.", metadata={"model": "m1"}),
        ]
    )
    conversation = conversation_from_multi_turn(sample, id="paris")
    calls = conversation.turns[1].tool_calls
    assert conversation.turns[1].content is None  # "" is RAGAS's "only calls tools"
    assert [c.id for c in calls] == ["call-1-0", "call-1-1"]
    assert [conversation.turns[i].tool_call_id for i in (2, 3)] == ["call-1-0", "call-1-1"]
    assert conversation.turns[4].metadata == {"model": "m1"}
    assert conversation.metadata == {
        "ragas": {
            "generated": [
                "turns[1].tool_calls[0].id",
                "turns[2].tool_call_id",
                "turns[1].tool_calls[1].id",
                "turns[3].tool_call_id",
            ]
        }
    }


def test_a_tool_message_with_no_call_left_is_refused() -> None:
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="q"),
            AIMessage(content="", tool_calls=[RagasToolCall(name="search", args={})]),
            ToolMessage(content="one"),
            ToolMessage(content="two"),
        ]
    )
    with pytest.raises(ValueError, match=r"user_input\[3\]: a tool message with no tool call left"):
        conversation_from_multi_turn(sample)


def test_dataset_ids_come_from_records_then_ids_then_the_row() -> None:
    native = [_weather(), MultiTurnSample(user_input=[HumanMessage(content="hi")])]
    read = from_multi_turn_dataset(EvaluationDataset(samples=native))
    assert [c.id for c in read] == ["0", "1"]
    assert read[1].metadata == {"ragas": {"generated": ["id"]}}
    named = from_multi_turn_dataset(native, ids=["w", "h"])
    assert [c.id for c in named] == ["w", "h"]
    assert "id" not in named[1].metadata.get("ragas", {}).get("generated", [])
    ours = to_multi_turn_sample(CHAT)
    assert [c.id for c in from_multi_turn_dataset([ours, native[1]], ids=["x", "y"])] == [
        "chat-7",
        "y",
    ]
    with pytest.raises(ValueError, match=r"row 1: id: duplicate conversation id 'chat-7'"):
        from_multi_turn_dataset([ours, ours])
    with pytest.raises(ValueError, match="ids has 1 entries for 2 rows"):
        from_multi_turn_dataset(native, ids=["a"])


# --------------------------------------------------------------------------- what RAGAS cannot hold


def test_what_ragas_cannot_hold_is_refused_with_the_reason() -> None:
    only_system = Conversation(id="s", turns=[Turn(role="system", content="Be brief.")])
    with pytest.raises(ValueError, match="only system turns, and RAGAS has no system message"):
        to_multi_turn_sample(only_system)
    late_tool = Conversation(
        id="t",
        turns=[
            Turn(role="user", content="q"),
            Turn(role="assistant", tool_calls=[ToolCall(name="s", id="k")]),
            Turn(role="user", content="well?"),
            Turn(role="tool", content="r", tool_call_id="k"),
        ],
    )
    with pytest.raises(
        ValueError, match=r"'t': turns\[3\] is a tool turn after a user turn; RAGAS needs"
    ):
        to_multi_turn_sample(late_tool)
    legacy = _with_answering_refs(CHAT, None)  # the calls in the metadata, as before
    no_args = legacy.model_copy(
        update={"metadata": {"ragas": {"reference_tool_calls": [{"name": "s"}]}}}
    )
    with pytest.raises(ValueError, match=r"'chat-7': RAGAS refuses it: reference_tool_calls"):
        to_multi_turn_sample(no_args)
    extra_key = legacy.model_copy(
        update={
            "metadata": {"ragas": {"reference_tool_calls": [{"name": "s", "args": {}, "id": 1}]}}
        }
    )
    with pytest.raises(ValueError, match=r"metadata.ragas.reference_tool_calls: RAGAS would give"):
        to_multi_turn_sample(extra_key)
    with pytest.raises(TypeError, match=r"got Sample \(Conversation.from_sample makes one\)"):
        to_multi_turn_sample(Sample(id="x", question="q"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"conversations\[1\]: expected a Conversation"):
        to_multi_turn_dataset([CHAT, "x"])  # type: ignore[list-item]


def test_an_edited_record_is_named() -> None:
    sample = to_multi_turn_sample(CHAT)
    ai = sample.user_input[1]
    assert isinstance(ai, AIMessage)
    assert ai.metadata is not None
    ai.metadata["ragbridge"]["turn"]["tool_call_ids"] = ["k1", "k2"]
    with pytest.raises(
        ValueError,
        match=r"user_input\[1\]: metadata.ragbridge.turn.tool_call_ids: expected one id per "
        r"tool call \(1\)",
    ):
        conversation_from_multi_turn(sample)
    edited = to_multi_turn_sample(CHAT)
    last = edited.user_input[-1]
    assert last.metadata is not None
    last.metadata["ragbridge"]["turn"]["reference_tool_call_ids"] = ["r1", "r2"]
    with pytest.raises(ValueError, match=r"reference_tool_call_ids: expected one id per reference"):
        conversation_from_multi_turn(edited)
    human = to_multi_turn_sample(CHAT).user_input[0]
    assert human.metadata is not None
    human.metadata["ragbridge"]["turn"]["reference"] = "misplaced"
    bad = MultiTurnSample(user_input=[human])
    with pytest.raises(ValueError, match=r"user_input\[0\]: reference: a reference belongs"):
        conversation_from_multi_turn(bad)


# --------------------------------------------------------------------------- the pointers here


def test_single_turn_readers_point_multi_turn_data_here(tmp_path: Path) -> None:
    dataset = to_multi_turn_dataset([CHAT])
    with pytest.raises(ValueError, match=r"got MultiTurnSample \(a multi-turn sample is a conv"):
        from_ragas_dataset(dataset)
    path = tmp_path / "multi.jsonl"
    dataset.to_jsonl(path)
    # the row's own keys (reference_tool_calls, ...) do not hide what the row is
    with pytest.raises(ValueError, match=r"row 0: user_input: multi-turn sample") as info:
        from_ragas_jsonl(path)
    assert "from_multi_turn_dataset" in str(info.value)
    with pytest.raises(TypeError, match=r"got Conversation \(a conversation goes to RAGAS as a"):
        to_ragas_dataset([CHAT])  # type: ignore[list-item]
    single = to_ragas_dataset([Sample(id="s", question="q")])
    with pytest.raises(ValueError, match=r"row 0: expected a MultiTurnSample, got SingleTurnS"):
        from_multi_turn_dataset(single)
