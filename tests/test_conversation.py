"""Conversation/Turn/ToolCall records: checks that name file, line and field, JSONL round trips,
the per-turn views measures use, the exact Sample <-> one-exchange conversation mapping, and the
one reader for samples and conversations files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragbridge.core import (
    Context,
    Conversation,
    Sample,
    SampleValidationError,
    ToolCall,
    Turn,
    conversation_json_schema,
    load_conversations,
    load_records,
    load_samples,
    save_conversations,
    save_samples,
)
from ragbridge.core.trajectory import Step


def _write(path: Path, *rows: object) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def _assistant(text: str | None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


GOOD = {
    "id": "c1",
    "turns": [
        _user("How many days of leave do full-timers get?"),
        _assistant("25 days.", contexts=["Full-time staff get 25 days."], reference="25"),
    ],
}

# An agent turn: the assistant calls a retriever tool, the tool answers, the assistant answers.
AGENT = Conversation(
    id="c2",
    turns=[
        Turn(role="system", content="Answer from the handbook."),
        Turn(role="user", content="How many days of leave?", id="u1"),
        Turn(
            role="assistant",
            id="a1",
            tool_calls=[ToolCall(name="search_handbook", args={"query": "leave"}, id="call-1")],
        ),
        Turn(role="tool", content="Full-time staff get 25 days.", tool_call_id="call-1"),
        Turn(
            role="assistant",
            content="25 days.",
            id="a2",
            contexts=[Context(text="Full-time staff get 25 days.", id="hb-3", score=0.8)],
            reference="25 days",
            relevance={"hb-3": 2, "hb-9": 0},
            metadata={"latency_s": 0.4},
        ),
        Turn(role="user", content="And for part-timers?", id="u2"),
        Turn(
            role="assistant",
            content="Pro rata.",
            contexts=[Context(text="Part-time staff get leave pro rata.", id="hb-4")],
        ),
    ],
    expected_outcome="The user learns the leave for full- and part-timers.",
    metadata={"channel": "chat"},
)


# --------------------------------------------------------------------------- files


def test_jsonl_round_trip_keeps_every_field(tmp_path: Path) -> None:
    conversations = [Conversation.model_validate(GOOD), AGENT]
    path = tmp_path / "out" / "convs.jsonl"
    assert save_conversations(conversations, path) == 2
    assert list(load_conversations(path)) == conversations
    first = json.loads(path.read_text().splitlines()[0])
    # defaults stay out of the file; bare-string contexts come back as objects
    assert first["turns"][0] == {"role": "user", "content": GOOD["turns"][0]["content"]}
    assert first["turns"][1]["contexts"] == [{"text": "Full-time staff get 25 days."}]


PROBLEMS = [
    ({"id": "c", "turns": []}, "turns: a conversation needs at least one turn"),
    (
        {"id": "c", "turns": [_user("q", reference="r")]},
        "turns[0].reference: a reference belongs to an assistant turn",
    ),
    (
        {"id": "c", "turns": [_user("q"), _assistant("a"), _user("q2", contexts=["p"])]},
        "turns[2].contexts: contexts belong to the assistant turn that retrieved them (or to the "
        "tool turn of a retrieval tool that returned them), not to a user turn",
    ),
    (
        {"id": "c", "turns": [_user("q"), {"role": "tool", "content": "x"}]},
        "turns[1].tool_call_id: a tool turn needs the id of the tool call it answers",
    ),
    (
        {
            "id": "c",
            "turns": [
                _user("q"),
                _assistant(None, tool_calls=[{"name": "search", "id": "k1"}]),
                {"role": "tool", "content": "x", "tool_call_id": "k2"},
            ],
        },
        "turns[2].tool_call_id: 'k2' answers no tool call of an earlier assistant turn "
        "(calls so far: 'k1')",
    ),
    (
        {
            "id": "c",
            "turns": [
                _user("q"),
                {"role": "tool", "content": "early", "tool_call_id": "k1"},
                _assistant(None, tool_calls=[{"name": "search", "id": "k1"}]),
            ],
        },
        "turns[1].tool_call_id: 'k1' answers no tool call of an earlier assistant turn "
        "(calls so far: none)",
    ),
    (
        {
            "id": "c",
            "turns": [
                _assistant(None, tool_calls=[{"name": "search", "id": "k1"}]),
                {"role": "tool", "content": "x", "tool_call_id": "k1"},
                {"role": "tool", "content": "y", "tool_call_id": "k1"},
            ],
        },
        "turns[2].tool_call_id: tool call 'k1' was already answered at turns[1]",
    ),
    (
        {"id": "c", "turns": [_user("q", id="t"), _assistant("a", id="t")]},
        "turns[1].id: duplicate turn id 't' (first at turns[0])",
    ),
    (
        {
            "id": "c",
            "turns": [
                _assistant(None, tool_calls=[{"name": "a", "id": 7}]),
                _assistant(None, tool_calls=[{"name": "b", "id": "8"}, {"name": "c", "id": "7"}]),
            ],
        },
        "turns[1].tool_calls[1].id: duplicate tool call id '7' (first at turns[0].tool_calls[0])",
    ),
    ({"id": "c", "turns": [{"role": "user"}]}, "turns[0].content: a user turn needs content"),
    (
        {"id": "c", "turns": [{"role": "human", "content": "q"}]},
        "turns[0].role: input should be 'user', 'assistant', 'system' or 'tool'",
    ),
    (
        {"id": "c", "turns": [_user("q", tool_calls=[{"name": "s"}])]},
        "turns[0].tool_calls: tool calls belong to an assistant turn, not to a user turn",
    ),
    (
        {"id": "c", "turns": [_assistant("a", tool_call_id="k")]},
        "turns[0].tool_call_id: tool_call_id belongs to a tool turn, not to an assistant turn",
    ),
    (
        {"id": "c", "turns": [_user("q", relevance={"d": 1})]},
        "turns[0].relevance: relevance labels belong to an assistant turn",
    ),
    (
        {"id": "c", "turns": [_assistant("a", relevance={"d 1": 5000})]},
        'turns[0].relevance["d 1"]: grade 5000 is out of range',
    ),
    (
        {"id": "c", "turns": [_assistant("a", contexts=[{"text": 3}])]},
        "turns[0].contexts[0].text: expected a string, got 3",
    ),
    (
        {"id": "c", "turns": [{"role": "user", "text": "q"}]},
        "turns[0].content: a user turn needs content",
    ),
    (
        {"id": "c", "turns": [_user("q")], "expected_output": "x"},
        "expected_output: unknown field",
    ),
    (
        {"id": "s1", "question": "q", "answer": "a"},
        "turns: required field is missing; this is a sample (it has 'question')",
    ),
    ({"turns": [_user("q")]}, "id: required field is missing"),
]


@pytest.mark.parametrize(("line", "problem"), PROBLEMS)
def test_a_bad_line_is_named_by_file_line_and_field(
    tmp_path: Path, line: dict[str, Any], problem: str
) -> None:
    path = _write(tmp_path / "convs.jsonl", GOOD, {**GOOD, "id": "c0"}, line)
    with pytest.raises(SampleValidationError) as info:
        list(load_conversations(path))
    assert str(info.value).startswith(f"{path}:3: {problem}")
    assert (info.value.source, info.value.line) == (str(path), 3)
    with pytest.raises(ValidationError):  # the same checks hold in Python
        Conversation.model_validate(line)


def test_an_unknown_turn_field_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", {"id": "c", "turns": [_user("q", name="ada")]})
    with pytest.raises(SampleValidationError, match=r"c\.jsonl:1: turns\[0\]\.name: unknown field"):
        list(load_conversations(path))


def test_conversation_ids_are_unique_in_a_file_and_a_lenient_load_reports(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path / "c.jsonl", {**GOOD, "id": 1}, "", {**GOOD, "id": "1"}, "{oops")
    with pytest.raises(SampleValidationError) as info:
        list(load_conversations(path))
    assert str(info.value) == f"{path}:3: id: duplicate conversation id '1' (first on line 1)"
    reader = load_conversations(path, skip_invalid=True)
    assert [c.id for c in reader] == ["1"]
    assert str(reader.report).splitlines()[0] == (
        f"{path}: 1 conversations loaded, 2 invalid lines skipped"
    )
    assert [bad.line for bad in reader.report.invalid] == [3, 4]


def test_the_file_checks_are_the_samples_reader_s(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes((json.dumps(GOOD) + "\n").encode("utf-16"))
    with pytest.raises(SampleValidationError, match=r"c\.jsonl:1: the file is UTF-16"):
        list(load_conversations(path))
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(GOOD) + "\n").encode())  # a BOM is harmless
    assert [c.id for c in load_conversations(path)] == ["c1"]


def test_ids_are_names_even_when_written_as_integers() -> None:
    conversation = Conversation.model_validate(
        {
            "id": 4,
            "turns": [
                {"role": "user", "content": "q", "id": 1},
                _assistant(None, tool_calls=[{"name": "s", "id": 2}]),
                {"role": "tool", "content": "r", "tool_call_id": 2},
            ],
        }
    )
    assert conversation.id == "4"
    assert conversation.turns[0].id == "1"
    assert conversation.turns[1].tool_calls[0].id == "2"
    assert conversation.turns[2].tool_call_id == "2"


def test_save_refuses_a_sample_and_says_how_to_convert(tmp_path: Path) -> None:
    sample = Sample(id="s", question="q")
    with pytest.raises(TypeError, match=r"Conversation\.from_sample"):
        save_conversations([sample], tmp_path / "c.jsonl")  # type: ignore[list-item]
    assert not (tmp_path / "c.jsonl").exists()


def test_json_schema_describes_the_accepted_lines() -> None:
    schema = conversation_json_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert schema["$id"].endswith("conversation-1.json")
    assert set(schema["required"]) == {"id", "turns"}
    assert schema["additionalProperties"] is False
    assert schema["properties"]["turns"]["minItems"] == 1
    turn = schema["$defs"]["Turn"]
    assert turn["required"] == ["role"]
    assert turn["properties"]["role"]["enum"] == ["user", "assistant", "system", "tool"]
    assert {"type": "string"} in turn["properties"]["contexts"]["items"]["anyOf"]
    assert {"type": "integer"} in turn["properties"]["tool_call_id"]["anyOf"]
    assert schema["$defs"]["ToolCall"]["required"] == ["name"]
    assert "Context" in schema["$defs"]
    json.dumps(schema)


# --------------------------------------------------------------------------- views


def test_assistant_turns_history_and_the_question_each_answers() -> None:
    assert [(i, t.content) for i, t in AGENT.assistant_turns()] == [
        (2, None),
        (4, "25 days."),
        (6, "Pro rata."),
    ]
    assert AGENT.history(0) == []
    assert [t.id for t in AGENT.history(4)] == [None, "u1", "a1", None]
    assert AGENT.history(len(AGENT.turns)) == AGENT.turns
    asked = AGENT.question_for(6)
    assert asked is not None
    assert (asked.position, asked.turn.content) == (5, "And for part-timers?")
    assert AGENT.question_for(1) is None  # the system turn asks nothing
    with pytest.raises(IndexError, match="has 7 turns; no turn 8"):
        AGENT.history(8)
    with pytest.raises(IndexError):
        AGENT.question_for(-1)


def test_an_assistant_turn_is_a_sample_a_single_turn_measure_can_score() -> None:
    sample = AGENT.turn_sample(4)
    assert sample == Sample(
        id="c2#4",
        question="How many days of leave?",
        answer="25 days.",
        contexts=[Context(text="Full-time staff get 25 days.", id="hb-3", score=0.8)],
        reference="25 days",
        relevance={"hb-3": 2, "hb-9": 0},
        metadata={
            "channel": "chat",
            "latency_s": 0.4,
            "conversation": {"id": "c2", "turn": 4, "turn_id": "a2"},
        },
        history=[AGENT.turns[0]],  # the turns before its question (u1)
        trajectory=[  # the call made between u1 and this answer, with the tool turn's output
            Step(
                name="search_handbook",
                args={"query": "leave"},
                id="call-1",
                output="Full-time staff get 25 days.",
            )
        ],
    )
    follow_up = AGENT.turn_sample(6)
    assert follow_up.history == AGENT.turns[:5]
    assert (follow_up.id, follow_up.question) == ("c2#6", "And for part-timers?")
    assert follow_up.relevance is None  # not labelled, not "no relevant document"
    assert AGENT.turn_sample(2).answer is None  # a step that only calls a tool


def test_turn_sample_refuses_what_is_not_an_answer() -> None:
    with pytest.raises(ValueError, match=r"turns\[1\] is a user turn"):
        AGENT.turn_sample(1)
    greeting = Conversation(id="g", turns=[Turn(role="assistant", content="Hello!")])
    with pytest.raises(ValueError, match="no user turn before it"):
        greeting.turn_sample(0)
    with pytest.raises(IndexError):
        greeting.turn_sample(1)


def test_a_one_exchange_conversation_equals_its_sample() -> None:
    sample = Sample(
        id="q1",
        question="Who?",
        answer="Ada.",
        contexts=[Context(text="Ada wrote it.", id="d1", score=0.9, metadata={"src": "a"})],
        reference="Ada Lovelace",
        reference_contexts=["Ada wrote the first program."],
        relevance={},
        metadata={"split": "dev"},
    )
    conversation = Conversation.from_sample(sample)
    assert [t.role for t in conversation.turns] == ["user", "assistant"]
    assert conversation.to_sample() == sample
    view = conversation.turn_sample(1)
    assert view.model_dump(exclude={"id", "metadata", "history"}) == sample.model_dump(
        exclude={"id", "metadata", "history"}
    )
    assert (view.history, sample.history) == ([], None)  # a turn, the first of its conversation
    assert view.metadata == {
        "split": "dev",
        "conversation": {"id": "q1", "turn": 1, "turn_id": None},
    }


def test_to_sample_refuses_to_drop_what_a_sample_cannot_hold() -> None:
    base = Conversation.from_sample(Sample(id="s", question="q", answer="a"))
    with pytest.raises(ValueError, match=r"not one exchange .* \['user', 'assistant', 'user'\]"):
        Conversation(id="s", turns=[*base.turns, Turn(role="user", content="q2")]).to_sample()
    tagged = Conversation.model_validate(
        {
            "id": "s",
            "turns": [_user("q", id="u"), _assistant("a", metadata={"k": 1})],
            "expected_outcome": "done",
        }
    )
    with pytest.raises(
        ValueError, match=r"no place for turns\[0\].id, turns\[1\].metadata, expected_outcome"
    ):
        tagged.to_sample()


_TEXT = st.text(max_size=12)
_ID = st.text(min_size=1, max_size=6)
_SAMPLES = st.builds(
    Sample,
    id=_ID,
    question=_TEXT,
    answer=st.none() | _TEXT,
    contexts=st.lists(
        st.builds(
            Context,
            text=_TEXT,
            id=st.none() | _ID,
            score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
            metadata=st.dictionaries(_ID, st.integers() | _TEXT, max_size=2),
        ),
        max_size=3,
    ),
    reference=st.none() | _TEXT,
    reference_contexts=st.none() | st.lists(_TEXT, max_size=2),
    relevance=st.none() | st.dictionaries(_ID, st.integers(-10, 1000), max_size=3),
    metadata=st.dictionaries(_ID, st.none() | st.integers() | _TEXT, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(sample=_SAMPLES)
def test_any_sample_round_trips_through_a_conversation_and_its_file(sample: Sample) -> None:
    conversation = Conversation.from_sample(sample)
    assert conversation.to_sample() == sample
    line = conversation.model_dump_json(exclude_defaults=True)
    assert Conversation.model_validate_json(line) == conversation


# --------------------------------------------------------------------------- one reader


def test_load_records_reads_a_samples_file_or_a_conversations_file(tmp_path: Path) -> None:
    samples = [Sample(id="s1", question="q", answer="a"), Sample(id="s2", question="q2")]
    save_samples(samples, tmp_path / "s.jsonl")
    reader = load_records(tmp_path / "s.jsonl")
    assert reader.kind is None  # nothing read yet
    assert list(reader) == samples
    assert reader.kind == "sample"
    save_conversations([AGENT], tmp_path / "c.jsonl")
    reader = load_records(tmp_path / "c.jsonl")
    assert list(reader) == [AGENT]
    assert reader.kind == "conversation"
    empty = load_records(_write(tmp_path / "e.jsonl", ""))
    assert (list(empty), empty.kind) == ([], None)


def test_load_records_refuses_a_file_that_mixes_kinds(tmp_path: Path) -> None:
    sample = {"id": "s1", "question": "q"}
    path = _write(tmp_path / "mixed.jsonl", sample, "", GOOD)
    with pytest.raises(SampleValidationError) as info:
        list(load_records(path))
    assert str(info.value).startswith(
        f"{path}:3: turns: this line is a conversation, but line 1 is a sample; a file holds one "
        "kind of record"
    )
    path = _write(tmp_path / "mixed2.jsonl", GOOD, sample)
    with pytest.raises(SampleValidationError) as info:
        list(load_records(path))
    assert str(info.value).startswith(
        f"{path}:2: turns: required field is missing: line 1 is a conversation and this line is "
        "a sample"
    )
    lenient = load_records(path, skip_invalid=True)
    assert [r.id for r in lenient] == ["c1"]
    assert [bad.line for bad in lenient.report.invalid] == [2]


def test_load_records_checks_each_kind_as_its_own_loader_does(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", GOOD, {**GOOD, "id": "c1"})
    with pytest.raises(SampleValidationError, match=r"r\.jsonl:2: id: duplicate record id 'c1'"):
        list(load_records(path))
    path = _write(tmp_path / "s.jsonl", {"id": "s", "question": "q", "contexts": [{"txt": "p"}]})
    with pytest.raises(SampleValidationError, match=r"s\.jsonl:1: contexts\[0\]\.txt: unknown"):
        list(load_records(path))
    with pytest.raises(SampleValidationError, match=r"s\.jsonl:1: invalid JSON"):
        list(load_records(_write(tmp_path / "s.jsonl", "{nope")))


def test_the_samples_reader_is_unchanged_by_the_family(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", {"id": "a", "question": "q"}, {"id": "a", "question": "q"})
    with pytest.raises(SampleValidationError, match=r"s\.jsonl:2: id: duplicate sample id 'a'"):
        list(load_samples(path))
    reader = load_samples(path, skip_invalid=True)
    assert len(list(reader)) == 1
    assert str(reader.report).startswith(f"{path}: 1 samples loaded, 1 invalid lines skipped")


def test_a_sample_with_history_is_the_last_exchange_of_its_conversation() -> None:
    """``from_sample`` puts a sample's history before its question, so the turn view of the
    answer is the sample again, history included."""
    follow_up = AGENT.turn_sample(6)
    again = Conversation.from_sample(follow_up)
    assert again.turns[: len(AGENT.turns) - 2] == AGENT.turns[:5]
    view = again.turn_sample(len(again.turns) - 1)
    assert view.model_dump(exclude={"id", "metadata"}) == follow_up.model_dump(
        exclude={"id", "metadata"}
    )


def test_an_agents_turn_is_a_sample_with_its_trajectory() -> None:
    """The tool calls between the question and the answer, each with the tool turn that answered
    it (its output and the contexts a retrieval returned), are the turn sample's trajectory."""
    agent = Conversation(
        id="agent",
        turns=[
            Turn(role="user", content="How many days of leave?"),
            Turn(
                role="assistant",
                tool_calls=[
                    ToolCall(name="search", args={"query": "leave"}, id="c1"),
                    ToolCall(name="clock", id="c2"),
                ],
            ),
            Turn(role="tool", content="noon", tool_call_id="c2", metadata={"latency_s": 0.2}),
            Turn(
                role="tool",
                content="Full-time staff get 25 days.",
                tool_call_id="c1",
                contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
                metadata={"error": None, "source": "hb"},
            ),
            Turn(
                role="assistant",
                content="25 days.",
                reference_tool_calls=[ToolCall(name="search", args={"query": "leave"})],
            ),
        ],
    )
    sample = agent.turn_sample(4)
    assert sample.trajectory == [
        Step(
            name="search",
            args={"query": "leave"},
            id="c1",
            output="Full-time staff get 25 days.",
            contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
            metadata={"source": "hb"},
        ),
        Step(name="clock", id="c2", output="noon", latency_s=0.2),
    ]
    assert sample.reference_tool_calls == [ToolCall(name="search", args={"query": "leave"})]
    assert AGENT.turn_sample(6).trajectory is None  # no tool call between u2 and its answer
    with pytest.raises(ValidationError, match="reference tool calls belong to an assistant turn"):
        Turn(role="user", content="q", reference_tool_calls=[ToolCall(name="search")])


def test_an_agents_sample_is_a_conversation_with_its_steps_as_messages() -> None:
    """``from_sample`` writes a trajectory as tool calls and tool turns (`turns_of`), so the
    turn view of the answer has the same steps back, errors and contexts included."""
    steps = [
        Step(
            name="search",
            args={"q": "leave"},
            id="c1",
            output="25 days.",
            latency_s=0.1,
            contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
            metadata={"message": "m1"},
        ),
        Step(name="clock", id="c2", output="noon", metadata={"message": "m1"}),
        Step(name="search", args={"q": "pro rata"}, id="c3", error="timeout"),
    ]
    sample = Sample(
        id="a",
        question="Leave?",
        answer="25 days.",
        trajectory=steps,
        reference_tool_calls=[ToolCall(name="search", args={"q": "leave"})],
    )
    conversation = Conversation.from_sample(sample)
    roles = [t.role for t in conversation.turns]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    view = conversation.turn_sample(len(conversation.turns) - 1)
    assert view.trajectory == steps
    assert view.reference_tool_calls == sample.reference_tool_calls
