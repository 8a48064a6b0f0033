"""`ragbridge eval | run | estimate` on a conversations file, through the real entry point.

A conversations file (lines with ``"turns"``) is scored turn by turn and per conversation in
one run; after the usual summary the command prints each metric over conversations and a roll-up
per conversation, which must be what the core's `rollup` / `conversation_summary` say of the
same results. ``run`` replays a script (the user side) through a real LlamaIndex chat engine
or LangChain history chain. Judges are the suite's counting judge, imported by spec
(``--judge python:MODULE:FACTORY``) from a module written into the test's folder.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.adapters.report import sample_anchor
from ragbridge.core.conversation import Conversation, load_conversations, save_conversations
from ragbridge.core.multiturn import LEVELS_KEY, conversation_summary, rollup
from ragbridge.core.record_fields import Context
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Sample, save_samples
from ragbridge.core.turn import Turn

TESTS = Path(__file__).parent

LEAVE = Context(text="Full-time staff get 25 days of annual leave per year.", id="leave")
PART = Context(text="Part-time staff receive annual leave pro rata to their hours.", id="part")
CARRY = Context(text="Up to 5 days of leave may be carried over to the next year.", id="carry")


def _chats(*, references: bool = True) -> list[Conversation]:
    """Two conversations of two exchanges; the last turn of the second retrieved nothing and
    leans on what the user said in turn 0 (cross-turn support)."""

    def ref(text: str) -> str | None:
        return text if references else None

    return [
        Conversation(
            id="c1",
            expected_outcome="The user knows the leave rules.",
            turns=[
                Turn(role="user", content="How many days of annual leave do full-time staff get?"),
                Turn(
                    role="assistant",
                    content="Full-time staff get 25 days of annual leave per year.",
                    contexts=[LEAVE],
                    reference=ref("25 days."),
                ),
                Turn(role="user", content="And part-time staff?"),
                Turn(
                    role="assistant",
                    content="Part-time staff receive annual leave pro rata to their hours.",
                    contexts=[PART],
                    reference=ref("Pro rata to their hours."),
                ),
            ],
        ),
        Conversation(
            id="c2",
            turns=[
                Turn(role="user", content="I work 20 hours a week. Can leave be carried over?"),
                Turn(
                    role="assistant",
                    content="Up to 5 days of leave may be carried over to the next year.",
                    contexts=[CARRY],
                    reference=ref("Up to 5 days."),
                ),
                Turn(role="user", content="Who do I ask?"),
                Turn(
                    role="assistant",
                    content="You work 20 hours a week, so ask your manager.",
                    contexts=[],
                    reference=ref("Your manager."),
                ),
            ],
        ),
    ]


@pytest.fixture
def chats(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    save_conversations(_chats(), path)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def judge_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``--judge python:recording_judge:build``: a counting judge keeping every prompt."""
    (tmp_path / "recording_judge.py").write_text(
        textwrap.dedent(
            """
            from ragbridge.core.testing import CountingJudge

            JUDGES = []

            class Recording(CountingJudge):
                def __init__(self):
                    super().__init__()
                    self.prompts = []

                async def generate(self, messages, *, schema=None):
                    self.prompts.append("\\n".join(m["content"] for m in messages))
                    return await super().generate(messages, schema=schema)

            def build():
                JUDGES.append(Recording())
                return JUDGES[-1]
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("recording_judge", None)
    yield lambda: sys.modules["recording_judge"].JUDGES
    sys.modules.pop("recording_judge", None)


def _block(out: str, title: str) -> list[str]:
    """The lines of the table after the line starting with ``title``, up to a blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    block: list[str] = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        block.append(line)
    return block


# --------------------------------------------------------------------------- eval


def test_eval_scores_each_turn_and_prints_the_rollups_the_core_computes(
    chats: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path, store = tmp_path / "results.jsonl", tmp_path / "runs.db"
    code, out, err = run_cli(
        capsys, "eval", str(chats), "--embedder", "hash", "--out", str(out_path),
        "--history", str(store),
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "2 conversations (4 turns), 4 metrics"
    # the default set for conversations, said on one line: no judge, no conversation measures
    assert (
        "metrics: faithfulness, answer_relevance, context_precision, context_recall (default "
        "for conversations; knowledge_retention, conversation_completeness need a judge: left "
        "out)"
    ) in err
    # the streamed results: a row per answering turn, the run's levels in the header
    results = Evaluation.from_jsonl(out_path)
    assert set(results.sample_ids) == {"c1#1", "c1#3", "c2#1", "c2#3"}
    assert results.metadata[LEVELS_KEY]["faithfulness"] == "turn"
    assert "recorded run" in out
    # the turn that retrieved nothing is skipped by the retrieval measures, not failed
    assert results.get("c2#3", "context_precision").status == "skipped"  # type: ignore[union-attr]
    # over conversations: conversation_summary of the same results
    over = _block(out, "over 2 conversations")
    for metric in results.metrics:
        s = conversation_summary(results, metric)
        row = next(line for line in over if line.split()[0] == metric)
        assert row.split()[1] == f"{s.mean:.3f}", row
        if s.ci_low is not None:
            assert f"[{s.ci_low:.3f}, {s.ci_high:.3f}]" in row
    # per conversation: rollup of the same results, turn by turn
    table = _block(out, "per conversation")
    assert table[0].split() == [
        "conversation",
        "metric",
        "turns",
        "mean",
        "worst",
        "first",
        "failing",
    ]
    for metric in results.metrics:
        for r in rollup(results, metric):
            at = next(i for i, line in enumerate(table) if line.startswith(r.conversation))
            row = next(line for line in table[at:] if f" {metric} " in line)
            cells = row.split()[-5:] if row.startswith(r.conversation) else row.split()[1:]
            assert cells[0] == f"{r.turns_scored}/{r.turns}", row
            assert cells[1] == ("—" if r.mean is None else f"{r.mean:.3f}"), row
            worst = f"#{r.worst_turn}" if r.worst_turn is not None else "—"
            assert cells[2] == worst, row
            first = f"#{r.first_failing_turn}" if r.first_failing_turn is not None else "—"
            assert cells[-1] == first, row


def test_eval_with_a_judge_adds_the_conversation_measures_and_estimate_is_exact(
    chats: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], judge_module: Any
) -> None:
    report = tmp_path / "report.html"
    code, out, err = run_cli(
        capsys, "eval", str(chats), "--judge", "python:recording_judge:build",
        "--embedder", "hash", "--report", str(report),
    )  # fmt: skip
    assert code == 0, err
    (judge,) = judge_module()
    head = out.splitlines()[0]
    assert head.startswith("2 conversations (4 turns), 6 metrics; judge counting-judge: ")
    assert f"{judge.calls} calls (0 cached)" in head
    assert judge.by_task["conversation.assess"] == 2  # one shared call per conversation
    per = _block(out, "per conversation")
    assert any(line.split()[:3] == ["knowledge_retention", "whole", "1.000"] for line in per)
    # estimate: the same calls, counted before anything is sent
    code, est, _ = run_cli(capsys, "estimate", str(chats))
    assert code == 0
    assert est.splitlines()[0] == (
        "2 conversations (4 turns), metrics: faithfulness, answer_relevance, context_precision, "
        "context_recall, knowledge_retention, conversation_completeness"
    )
    assert f"judge calls: {judge.calls} ({judge.calls / 2:.1f} per conversation)" in est
    assert "  conversation.assess: 2 calls" in est
    # the report: turn rows and conversation rows in the drill-down, a roll-up per conversation
    html = report.read_text(encoding="utf-8")
    assert '<a href="#conversations">Conversations</a>' in html
    assert '<tr data-conversation="c1"><td>c1</td>' in html
    assert f'href="#{sample_anchor("c2#3")}"' in html  # a turn, linked to its drill-down
    assert f'id="{sample_anchor("c2#3")}"' in html
    assert f'id="{sample_anchor("c1")}"' in html  # the conversation row's own drill-down
    assert "Conversation so far" in html


def test_a_rerun_with_a_cache_reuses_every_cell_and_counts_no_other(
    chats: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], judge_module: Any
) -> None:
    # Turn metrics are not looked up on conversation rows, nor the reverse: the reuse count
    # is the run's cells (it counted lookups of every metric on every row: 25 here).
    argv = ["eval", str(chats), "--judge", "python:recording_judge:build", "--embedder", "hash",
            "--cache", str(tmp_path / "cache.db")]  # fmt: skip
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "first.jsonl"))
    assert code == 0, err
    cells = len(Evaluation.from_jsonl(tmp_path / "first.jsonl"))
    assert cells == 4 * 4 + 2 * 2
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert out.splitlines()[0].endswith(
        f"0 calls (13 cached), 0 prompt tokens; {cells} scores reused from the cache"
    )
    assert judge_module()[-1].calls == 0


def test_turn_support_turn_leaves_the_conversation_out_of_a_turns_support(
    chats: Path, capsys: pytest.CaptureFixture[str], judge_module: Any
) -> None:
    source = "[From the conversation, turn 0: what the user said]"
    argv = ["eval", str(chats), "--metrics", "faithfulness", "--judge",
            "python:recording_judge:build"]  # fmt: skip
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    code, _, err = run_cli(capsys, *argv, "--turn-support", "turn")
    assert code == 0, err
    shared, own = judge_module()
    assert any(source in p for p in shared.prompts)
    assert not any("[From the conversation" in p for p in own.prompts)
    # c2#3 retrieved nothing: with its own contexts only, there is nothing to verify against
    _, conversation, _ = run_cli(capsys, "estimate", str(chats), "--metrics", "faithfulness")
    _, turn, _ = run_cli(
        capsys, "estimate", str(chats), "--metrics", "faithfulness", "--turn-support", "turn"
    )
    assert "  faithfulness.verify: 4 calls" in conversation
    assert "  faithfulness.verify: 3 calls" in turn
    assert own.calls == 7
    assert shared.calls == 8


def test_a_report_keeps_a_hostile_conversation_id_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = '<img src=x onerror="alert(1)">'
    data = tmp_path / "chats.jsonl"
    save_conversations([c.model_copy(update={"id": evil if c.id == "c1" else c.id})
                        for c in _chats()], data)  # fmt: skip
    report = tmp_path / "report.html"
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "context_precision", "--report", str(report)
    )
    assert code == 0, err
    html = report.read_text(encoding="utf-8")
    section = html[html.index('<section id="conversations">') :]
    section = section[: section.index("</section>")]
    assert "<img" not in section
    assert "<td>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</td>" in section


# --------------------------------------------------------------------------- bad input, exits


def test_a_bad_line_is_the_file_line_field_error_and_nothing_is_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], judge_module: Any
) -> None:
    good = json.dumps(_chats()[0].model_dump(mode="json", exclude_none=True))
    bad = json.dumps(
        {"id": "c9", "turns": [{"role": "user", "content": "Hi?"},
                               {"role": "assistant", "content": "Hi.", "contexts": [{"text": 1}]}]}
    )  # fmt: skip
    data = tmp_path / "chats.jsonl"
    data.write_text(f"{good}\n\n{bad}\n", encoding="utf-8")
    for argv in (["eval", "--judge", "python:recording_judge:build"], ["estimate"]):
        code, out, err = run_cli(capsys, *argv, str(data))
        assert code == 2
        assert out == ""
        assert err.strip().splitlines()[-1] == (
            f"ragbridge: error: {data}:3: turns[1].contexts[0].text: expected a string, got 1"
        )
    assert all(j.calls == 0 for j in judge_module())
    # a file holds one kind of record, either way round
    sample = json.dumps({"id": "q1", "question": "What is leave?"})
    data.write_text(f"{good}\n{sample}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "eval", str(data))
    assert code == 2
    assert f"{data}:2: turns: required field is missing: line 1 is a conversation" in err
    data.write_text(f"{sample}\n{good}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", "context_precision")
    assert code == 2
    assert f"{data}:2: turns: this line is a conversation, but line 1 is a sample" in err


def test_what_only_a_samples_file_has_is_refused_in_one_line(
    chats: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra, said in (
        (["--repeat", "2"], "--repeat scores a samples file"),
        (["--strict"], "--strict: the held-out check reads a samples file"),
    ):
        code, out, err = run_cli(capsys, "eval", str(chats), "--metrics", "faithfulness", *extra)
        assert code == 2
        assert out == ""
        assert err.startswith(f"ragbridge: error: {said}")
        assert len(err.strip().splitlines()) == 1


def test_a_script_given_to_eval_says_to_run_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.jsonl"
    save_conversations(
        [Conversation(id="s1", turns=[Turn(role="user", content="How much leave?")])], script
    )
    code, _, err = run_cli(capsys, "eval", str(script))
    assert code == 2
    assert "no assistant turn answers a user turn" in err
    assert "ragbridge run PIPELINE script.jsonl" in err


def test_exit_1_when_a_turn_metric_fails_its_bar_and_3_when_the_judge_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "chats.jsonl"
    save_conversations(_chats(references=False)[:1] + _chats()[1:], data)
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", "context_recall")
    assert code == 1
    assert "context_recall: 2 of 3 cells failed" in err  # c2#3 retrieved nothing: skipped
    (tmp_path / "refusing_judge.py").write_text(
        textwrap.dedent(
            """
            from ragbridge.core.judging.judge import ProviderUnusable

            class Refused:
                model = "refused-model"

                async def generate(self, messages, *, schema=None):
                    raise ProviderUnusable("401 Unauthorized: invalid API key")
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    out_path = tmp_path / "r.jsonl"
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "knowledge_retention", "--judge",
        "python:refusing_judge:Refused", "--out", str(out_path),
    )  # fmt: skip
    assert code == 3, err
    assert err.strip().splitlines()[-1].startswith("ragbridge: error: ")
    assert "401" in err
    assert out_path.exists()


# --------------------------------------------------------------------------- run a script


SCRIPT = [
    Conversation(
        id="s1",
        turns=[
            Turn(role="user", content="How many days of annual leave do full-time staff get?"),
            Turn(role="assistant", reference="25 days.", relevance={"leave": 1}),
            Turn(role="user", content="And what do part-time staff receive?"),
            Turn(role="assistant", relevance={"part": 1}),
        ],
    ),
    Conversation(
        id="s2",
        turns=[
            Turn(role="user", content="Can leave be carried over to the next year?"),
            Turn(role="assistant", relevance={"carry": 1}),
        ],
    ),
]


def _pipeline_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``my_chat.py``: a real LlamaIndex index over three one-topic documents (hash-embedded,
    so each question retrieves its topic) and a mock LLM; a chat engine and a query engine."""
    (tmp_path / "my_chat.py").write_text(
        textwrap.dedent(
            f"""
            from llama_index.core import Document, VectorStoreIndex
            from llama_index.core.llms import MockLLM
            from llamaindex_fakes import HashEmbedding

            TOPICS = {{
                "leave": {LEAVE.text!r},
                "part": {PART.text!r},
                "carry": {CARRY.text!r},
            }}

            def _index():
                return VectorStoreIndex.from_documents(
                    [Document(text=t, id_=k) for k, t in TOPICS.items()],
                    embed_model=HashEmbedding(model_name="hash-64"),
                )

            def chat():
                return _index().as_chat_engine(
                    chat_mode="context", llm=MockLLM(max_tokens=8), similarity_top_k=1
                )

            def query():
                return _index().as_query_engine(llm=MockLLM(), similarity_top_k=1)
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(TESTS))  # llamaindex_fakes
    script = tmp_path / "script.jsonl"
    save_conversations(SCRIPT, script)
    return script


def test_run_replays_a_script_through_a_llamaindex_chat_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_index.core")
    script = _pipeline_module(tmp_path, monkeypatch)
    code, out, err = run_cli(
        capsys, "run", "my_chat:chat", str(script), "--metrics", "context_precision,recall@1",
        "--embedder", "hash", "--save-samples", "captured.jsonl",
    )  # fmt: skip
    assert code == 0, err
    assert "2 conversations (3 turns), 2 metrics" in out.splitlines()
    captured = list(load_conversations(tmp_path / "captured.jsonl"))
    assert [c.id for c in captured] == ["s1", "s2"]
    first = captured[0]
    assert [t.role for t in first.turns] == ["user", "assistant", "user", "assistant"]
    # each turn holds what was retrieved for it; the script's labels stay on their turn
    assert [[c.id for c in t.contexts] for t in first.turns[1::2]] == [["leave"], ["part"]]
    assert first.turns[1].reference == "25 days."
    assert first.turns[1].relevance == {"leave": 1}
    assert first.turns[3].metadata["engine"] == "ContextChatEngine"
    table = _block(out, "per conversation")
    assert table[1].split() == ["s1", "context_precision", "2/2", "1.000", "#1", "1.000", "—"]
    assert table[2].split() == ["recall@1", "2/2", "1.000", "#1", "1.000", "—"]
    # a query engine holds no conversation: one line saying what a script needs
    code, _, err = run_cli(capsys, "run", "my_chat:query", str(script), "--metrics", "recall@1")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "ragbridge: error: my_chat:query is a RetrieverQueryEngine (a query engine): a script "
        "(a conversations file) is replayed through a chat pipeline: a LlamaIndex chat engine "
        "(index.as_chat_engine()), a LangChain RunnableWithMessageHistory, a chain that takes "
        "the chat history in its input (name its key with --chat-history-key), or a LangGraph "
        "graph whose state is a message list"
    )


def test_run_replays_a_script_through_a_langchain_history_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_core")
    (tmp_path / "my_chain.py").write_text(
        textwrap.dedent(
            f"""
            from langchain_core.documents import Document
            from langchain_core.language_models.fake_chat_models import FakeListChatModel
            from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
            from langchain_core.retrievers import BaseRetriever
            from langchain_core.runnables import RunnableLambda, RunnablePassthrough

            DOCS = {{"leave": {LEAVE.text!r}, "part": {PART.text!r}, "carry": {CARRY.text!r}}}

            class Lookup(BaseRetriever):
                def _get_relevant_documents(self, query, *, run_manager):
                    words = set(query.lower().split())
                    best = max(DOCS, key=lambda k: len(words & set(DOCS[k].lower().split())))
                    return [Document(page_content=DOCS[best], id=best)]

            def chain():
                # the question is the last message of the history it is given
                retriever = Lookup()
                prompt = ChatPromptTemplate.from_messages(
                    [("system", "Context: {{context}}"), MessagesPlaceholder("history")]
                )
                llm = FakeListChatModel(responses=["Staff get 25 days of leave."] * 10)
                return RunnablePassthrough.assign(
                    context=lambda x: retriever.invoke(x["history"][-1].content)[0].page_content
                ) | prompt | llm

            def broken():
                return RunnableLambda(lambda x: 1 / 0)

            def plain():
                return RunnableLambda(lambda q: {{"answer": "no memory"}})
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "script.jsonl"
    save_conversations(SCRIPT, script)
    code, out, err = run_cli(
        capsys, "run", "my_chain:chain", str(script), "--chat-history-key", "history",
        "--metrics", "recall@1", "--save-samples", "captured.jsonl",
    )  # fmt: skip
    assert code == 0, out + err
    captured = list(load_conversations(tmp_path / "captured.jsonl"))
    assert [[c.id for c in t.contexts] for t in captured[0].turns[1::2]] == [["leave"], ["part"]]
    assert captured[0].turns[1].relevance == {"leave": 1}
    assert "2 conversations (3 turns), 1 metric" in out.splitlines()
    assert re.search(r"^recall@1\s+1\.000", out, re.M)
    code, _, err = run_cli(capsys, "run", "my_chain:plain", str(script), "--metrics", "recall@1")
    assert code == 2
    assert "my_chain:plain is a RunnableLambda, which holds no conversation: a script" in err
    # a pipeline that fails on every turn is said in one line, not scored as an empty run
    code, out, err = run_cli(
        capsys, "run", "my_chain:broken", str(script), "--chat-history-key", "history",
        "--metrics", "recall@1",
    )  # fmt: skip
    assert code == 2
    assert out == ""
    assert err.strip().splitlines()[-1] == (
        f"ragbridge: error: my_chain:broken answered none of the 3 turns of {script} (first: "
        "conversation 's1', turns[1]: ZeroDivisionError: division by zero); nothing was scored"
    )


def test_a_samples_file_is_scored_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "eval.jsonl"
    save_samples(
        [Sample(id="q1", question="How much leave?", answer="25 days.", contexts=[LEAVE],
                relevance={"leave": 1})],
        data,
    )  # fmt: skip
    code, out, _ = run_cli(capsys, "eval", str(data), "--metrics", "recall@1")
    assert code == 0
    assert out.splitlines()[0] == "1 sample, 1 metric"
    assert "over " not in out
    assert "per conversation" not in out
    assert re.search(r"^recall@1\s+1\.000", out, re.M)


def test_a_turn_that_retrieved_nothing_is_not_named_as_lacking_a_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default-metrics note counts what the measures would miss: context recall skips a
    turn without contexts, so that turn's missing reference is not a failure to announce."""
    chat = Conversation(
        id="c",
        turns=[
            Turn(role="user", content="How many days of leave do full-timers get?"),
            Turn(role="assistant", content="25 days.", contexts=[LEAVE], reference="25 days"),
            Turn(role="user", content="Thanks!"),
            Turn(role="assistant", content="You're welcome."),
        ],
    )
    path = tmp_path / "thanks.jsonl"
    save_conversations([chat], path)
    code, _, err = run_cli(capsys, "eval", str(path), "--embedder", "hash")
    assert code == 0, err
    assert "lacks a reference" not in err
    # the same exchange asked twice, the second retrieving but with no reference: named
    lacking = chat.model_copy(
        update={
            "turns": [
                *chat.turns[:2],
                chat.turns[0],
                Turn(role="assistant", content="25.", contexts=[LEAVE]),
            ]
        }
    )
    save_conversations([lacking], path)
    code, _, err = run_cli(capsys, "eval", str(path), "--embedder", "hash")
    assert "1 of 2 turns lacks a reference" in err
