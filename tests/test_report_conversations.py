"""A turn's drill-down shows the conversation before it, turn by turn, linking earlier turns."""

from __future__ import annotations

from ragbridge.adapters.report import render_report
from ragbridge.adapters.report.markup import sample_anchor
from ragbridge.core import Context, Conversation, Evaluation, Score, Turn

CHAT = Conversation(
    id="leave",
    turns=[
        Turn(role="user", content="How many days of leave do full-timers get?"),
        Turn(
            role="assistant",
            content="25 days.",
            contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
        ),
        Turn(role="user", content="And for <b>part-timers</b>?"),
        Turn(role="assistant", content="Pro rata.", contexts=["Part-time: pro rata."]),
    ],
)


def _evaluation(*ids: str) -> Evaluation:
    ev = Evaluation()
    for sid in ids:
        ev.add(sid, "faithfulness", Score(value=1.0, reason="ok"))
    return ev


def test_a_follow_up_shows_the_turns_before_it_and_links_the_scored_ones() -> None:
    samples = [CHAT.turn_sample(1), CHAT.turn_sample(3)]
    html = render_report({"run": _evaluation("leave#1", "leave#3")}, samples={"run": samples})
    follow_up = html[html.index('id="samples"') :]  # the drill-downs
    assert "Conversation so far</strong> (2 turns)" in html
    assert "How many days of leave do full-timers get?" in follow_up
    assert "(1 context; <a" in follow_up
    assert f'href="#{sample_anchor("leave#1", "run")}">its scores</a>' in follow_up
    assert "none: this is the first question" in html
    assert "<b>part-timers</b>" not in html  # escaped like every user string
    # an earlier turn that was not scored has no link to a drill-down that does not exist
    unlinked = render_report({"run": _evaluation("leave#3")}, samples={"run": samples[1:]})
    assert "Conversation so far" in unlinked
    assert "its scores" not in unlinked


def test_a_plain_sample_has_no_conversation_block() -> None:
    sample = CHAT.turn_sample(1).model_copy(update={"history": None, "id": "q1"})
    html = render_report({"run": _evaluation("q1")}, samples={"run": [sample]})
    assert "Conversation so far" not in html


def test_an_agents_sample_shows_its_trajectory_step_by_step() -> None:
    from ragbridge.core import Sample, ToolCall
    from ragbridge.core.trajectory import Step

    sample = Sample(
        id="agent-1",
        question="How many days of leave?",
        answer="25 days.",
        trajectory=[
            Step(
                name="search",
                args={"query": "leave <days>"},
                output="Full-time staff get 25 days.",
                contexts=[Context(text="Full-time staff get 25 days.", id="hb-3")],
                latency_s=0.25,
            ),
            Step(name="calendar", args={}, error="timeout"),
        ],
        reference_tool_calls=[ToolCall(name="search", args={"query": "leave"})],
    )
    html = render_report({"run": _evaluation("agent-1")}, samples={"run": [sample]})
    drill = html[html.index('id="samples"') :]
    assert "Trajectory</strong> (2 steps)" in drill
    first, second = drill.index("search("), drill.index("calendar(")
    assert first < second  # in the order the agent made them
    assert "(0.25 s; 1 context)" in drill
    assert "error: timeout" in drill
    assert "leave &lt;days&gt;" in drill  # arguments are text
    assert "Reference tool calls</strong> <code>search(" in drill
    plain = sample.model_copy(update={"trajectory": None, "reference_tool_calls": None})
    assert "Trajectory" not in render_report(
        {"run": _evaluation("agent-1")}, samples={"run": [plain]}
    )
