"""``ragbridge eval | run | estimate`` on a conversations file.

A records file holds samples or conversations (`ragbridge.core.records`: a line with
``"turns"`` is a conversation, and a file mixing the two is refused at the first line of the
other kind). The three commands look at the first record and hand a conversations file here:

* ``eval chats.jsonl`` scores it with `ragbridge.core.multiturn.evaluate_conversations`: turn
  metrics on each answering turn (rows ``"<id>#<position>"``), conversation metrics on each
  conversation (rows ``"<id>"``), in one run. Everything else is ``eval``'s own life cycle
  (`eval_command`): the file is checked line by line before the first call (``file:line:
  field`` errors), ``--out`` and ``--history`` stream, ``--report``, ``--cache``, progress and
  the exit codes are the same. After the summary come the roll-ups (`conversation_rollups`).
* ``run PIPELINE script.jsonl`` treats the file as a *script* (`ragbridge.core.replay`): its
  user turns are replayed through a chat pipeline — a LlamaIndex chat engine
  (`capture_chat_sessions`), a LangChain ``RunnableWithMessageHistory``, a chain taking the chat
  history in its input (``--chat-history-key``) or a LangGraph message graph
  (`capture_conversations`) — and the conversations it had are scored as ``eval`` scores them;
  ``--save-samples`` writes them. A pipeline that holds no conversation (a query engine, a
  plain chain) is one line saying what a script needs, before anything runs.
* ``estimate chats.jsonl`` counts the calls of that run exactly
  (`ragbridge.core.multiturn.estimate_conversations`).

**Default metrics.** The turn measures (`TURN_METRICS`: faithfulness, answer relevance, context
precision and recall) fitted to what the turns carry, as for samples, plus the conversation
measures (`CONVERSATION_METRICS`: knowledge retention, conversation completeness) when there is
a judge; without one they have no offline provider and are left out — the choice is one line.
``--metrics`` names either kind: a conversation measure is scored per conversation, every other
per turn. ``--turn-support turn`` restricts a turn's faithfulness to its own contexts (default
``conversation``: what the user said earlier and what earlier turns retrieved support it too).

What a samples file has and a conversations file has not: ``--repeat``, ``--dask`` (the
roll-ups read cells in record order, which a cluster does not keep) and the held-out split
check (a split lock lists samples). Each is refused in one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.conversation_rollups import RollupTally, rollup_lines
from ragbridge.adapters.cli.default_metrics import (
    DefaultMetrics,
    FieldCounts,
    _present,
    fit_default,
)
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:
    from ragbridge.adapters.cli.eval_command import Plan
    from ragbridge.core.conversation import Conversation
    from ragbridge.core.criteria import CriteriaFile
    from ragbridge.core.judging.judge import Judge
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.monitoring.history import RunCellWriter
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.tally import Tally
    from ragbridge.core.sample import Sample
    from ragbridge.core.scoring.runner import OnResult

__all__ = [
    "add_conversation_options",
    "holds_conversations",
    "run_estimate",
    "run_eval",
    "run_script",
    "with_turn_support",
]

SUPPORTS = ("conversation", "turn")

NEEDS_CHAT = (
    "a script (a conversations file) is replayed through a chat pipeline: a LlamaIndex chat "
    "engine (index.as_chat_engine()), a LangChain RunnableWithMessageHistory, a chain that "
    "takes the chat history in its input (name its key with --chat-history-key), or a "
    "LangGraph graph whose state is a message list"
)


def add_conversation_options(parser: argparse.ArgumentParser, *, chat: bool = False) -> None:
    """``--turn-support`` (and, for ``run``, ``--chat-history-key``)."""
    parser.add_argument(
        "--turn-support",
        choices=SUPPORTS,
        default=None,
        help="what can support the claims of a conversation's turn (faithfulness, "
        "hallucination): 'conversation' (default) the turn's contexts, what the user said "
        "earlier and what earlier turns retrieved; 'turn' the turn's own contexts only",
    )
    if chat:
        parser.add_argument(
            "--chat-history-key",
            metavar="KEY",
            help="for a script run through a LangChain runnable that takes the chat history "
            "in its input: the input key that holds it",
        )


def with_turn_support(metrics: Sequence[Metric], args: argparse.Namespace) -> list[Metric]:
    """``metrics`` with ``--turn-support`` set on those that read it (faithfulness and
    hallucination: their ``support``); the rest as they are."""
    support = getattr(args, "turn_support", None)
    if support is not None:
        from ragbridge.core.metrics.turn_sources import checked_support

        for metric in metrics:
            if isinstance(getattr(metric, "support", None), str):
                setattr(metric, "support", checked_support(support))  # noqa: B010 - typed per class
    return list(metrics)


def holds_conversations(path: Path) -> bool:
    """Whether the first record of ``path`` is a conversation; a file the samples reader
    refuses (not UTF-8, unreadable) is left to it, which says why."""
    from ragbridge.core.records import record_kind

    try:
        with path.open("rb") as handle:
            for number, data in enumerate(handle, start=1):
                text = (data.removeprefix(b"\xef\xbb\xbf") if number == 1 else data).decode()
                if text.strip():
                    return record_kind(text) == "conversation"
    except (OSError, UnicodeDecodeError):
        return False
    return False


# --------------------------------------------------------------------------- reading


def _conversations(path: Path) -> Iterator[Conversation]:
    """The conversations of ``path``, streamed; a bad line is the ``file:line: field`` error."""
    from ragbridge.core.conversation import Conversation
    from ragbridge.core.records import load_records
    from ragbridge.core.sample import SampleValidationError

    try:
        for record in load_records(path):
            if not isinstance(record, Conversation):  # the first record was one: mixing fails
                raise UserError(f"{path}: holds samples and conversations")
            yield record
    except SampleValidationError as exc:
        raise UserError(str(exc)) from None


@dataclass
class ConversationScan:
    """What one pass over conversations found: counts, the turns' fields, own answers."""

    conversations: int = 0
    turns: int = 0
    """Turn rows: assistant turns that answer a user turn and hold text or contexts."""
    fields: FieldCounts = field(default_factory=FieldCounts)
    own_answers: int = 0
    unasked: str | None = None
    """The first conversation with no user turn (no conversation measure can score it)."""


def _scan(
    conversations: Iterable[Conversation], judge: Judge | None, generator: str | None
) -> ConversationScan:
    from ragbridge.core.judging.self_preference import SelfPreference
    from ragbridge.core.multiturn.record import conversation_record, turn_rows

    own = SelfPreference(judge.model, generator) if judge is not None and judge.model else None
    scan = ConversationScan()
    for conversation in conversations:
        scan.conversations += 1
        for row in turn_rows(conversation):
            scan.turns += 1
            scan.fields.add(row)
            if not row.contexts:
                # The retrieval measures skip a turn that retrieved nothing, so its labels are
                # not missing for them (the note would say "fail there" of a skipped turn).
                for label in ("reference", "reference_contexts", "relevance"):
                    if not _present(getattr(row, label)):
                        scan.fields.present[label] += 1
            if own is not None:
                own.add(row.metadata, row.answer is not None)
        if scan.unasked is None:
            try:
                conversation_record(conversation)
            except ValueError:
                scan.unasked = conversation.id
    scan.own_answers = own.answers if own is not None else 0
    if scan.fields.present["contexts"]:
        # A turn that retrieved nothing is skipped by the retrieval measures ("this turn
        # retrieved nothing"), not failed: only a file where no turn retrieved lacks contexts.
        scan.fields.present["contexts"] = scan.fields.total
    return scan


# --------------------------------------------------------------------------- metrics


def _names(
    args: argparse.Namespace,
    fields: FieldCounts | None,
    have_judge: bool,
    criteria: CriteriaFile | None,
) -> list[str]:
    """``--metrics`` as given; else the conversation default, fitted to the turns' ``fields``
    (when known) and to the judge, said on one line."""
    from ragbridge.adapters.cli import criteria_command
    from ragbridge.adapters.cli.options import split_names
    from ragbridge.core.multiturn import CONVERSATION_METRICS, TURN_METRICS

    asked = not isinstance(args.metrics, DefaultMetrics)
    if criteria is not None:
        names = split_names(args.metrics) if asked else []
        return criteria_command.criteria_names(names, criteria, asked=asked)
    if asked:
        return split_names(args.metrics)
    names = [*TURN_METRICS, *(CONVERSATION_METRICS if have_judge else ())]
    if fields is None:
        return names
    notes = [] if have_judge else [f"{', '.join(CONVERSATION_METRICS)} need a judge: left out"]
    try:
        choice = fit_default(
            names, fields, record="turn", notes=notes, label="default for conversations"
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if choice.line:
        console.note(choice.line)
    return choice.names


def _levels(plan: Plan) -> dict[str, str]:
    """Each metric's level: a conversation measure per conversation, the rest per turn."""
    from ragbridge.core.multiturn import CONVERSATION_METRICS

    return {
        m.name: "conversation" if m.name in CONVERSATION_METRICS else "turn" for m in plan.metrics
    }


def _refuse_sample_options(args: argparse.Namespace) -> None:
    """What works on a samples file only, refused before anything is built."""
    if getattr(args, "repeat", 1) > 1:
        raise UserError("--repeat scores a samples file; score a conversations file once per run")
    if getattr(args, "dask", None) is not None:
        raise UserError(
            "--dask scores a samples file; a conversations file is scored on this machine"
        )
    held = [
        flag
        for flag, given in (
            ("--lock", getattr(args, "lock", None)),
            ("--prompt-file", getattr(args, "prompt_file", None)),
            ("--strict", getattr(args, "strict", False)),
        )
        if given
    ]
    if held:
        raise UserError(
            f"{', '.join(held)}: the held-out check reads a samples file and its split lock; "
            "a conversations file has none"
        )


def _check_rows(path: Path | str, scan: ConversationScan, levels: dict[str, str]) -> None:
    whole = [m for m, level in levels.items() if level == "conversation"]
    if whole and scan.unasked is not None:
        raise UserError(
            f"{path}: conversation {scan.unasked!r} has no user turn: {', '.join(whole)} "
            "have nothing to score there"
        )


# --------------------------------------------------------------------------- scoring


def _score(
    args: argparse.Namespace,
    plan: Plan,
    levels: dict[str, str],
    conversations: Iterable[Conversation],
    total: int,
    *,
    on_result: OnResult,
    keep: bool,
    metadata: dict[str, Any],
) -> Evaluation:
    from ragbridge.adapters.cli.options import progress, settings_from
    from ragbridge.core.multiturn import evaluate_conversations

    if plan.note:
        console.note(plan.note)
    turn = [m for m in plan.metrics if levels[m.name] == "turn"]
    whole = [m for m in plan.metrics if levels[m.name] == "conversation"]
    with progress("scoring", total) as advance:
        evaluation = evaluate_conversations(
            conversations,
            turn,
            whole,
            **settings_from(args, judge=plan.judge, embedder=plan.embedder, nli=plan.nli),
            progress=advance,
            on_result=on_result,
            keep=keep,
            generator_model=getattr(args, "generator_model", None),
        )
    evaluation.metadata.update(metadata)
    return evaluation


def _rows(conversations: Iterable[Conversation], levels: dict[str, str]) -> Iterator[Sample]:
    """The records the run scored (turn rows, conversation rows), for the report."""
    from ragbridge.core.multiturn import conversation_rows

    values = set(levels.values())
    return conversation_rows(conversations, turns="turn" in values, whole="conversation" in values)


def _total(scan: ConversationScan, levels: dict[str, str]) -> int:
    values = set(levels.values())
    return (scan.turns if "turn" in values else 0) + (
        scan.conversations if "conversation" in values else 0
    )


@dataclass(frozen=True)
class _Finish:
    """`eval_command.finish` of a conversations run, with its head and its roll-ups."""

    args: argparse.Namespace
    scan: ConversationScan
    levels: dict[str, str]
    rollups: RollupTally
    rows: Callable[[], Iterable[Sample]]
    command: str

    def __call__(
        self,
        evaluation: Evaluation,
        streamed: Tally | None = None,
        write_problems: list[str] | None = None,
        cells: RunCellWriter | None = None,
    ) -> int:
        from ragbridge.adapters.cli import eval_command

        self.rollups.close()
        head = (
            f"{plural(self.scan.conversations, 'conversation')} ({plural(self.scan.turns, 'turn')})"
        )
        return eval_command.finish(
            self.args,
            evaluation,
            n_samples=_total(self.scan, self.levels),
            samples=self.rows,
            command=self.command,
            streamed=streamed,
            write_problems=write_problems,
            cells=cells,
            records=head,
            more=rollup_lines(self.rollups),
        )


def _both(first: OnResult, second: OnResult) -> OnResult:
    def both(sample_id: str, metric: str, score: Any) -> None:
        first(sample_id, metric, score)
        second(sample_id, metric, score)

    return both


# --------------------------------------------------------------------------- the commands


def run_eval(args: argparse.Namespace, data: Path) -> int:
    """``ragbridge eval chats.jsonl``."""
    from ragbridge.adapters.cli import eval_command, recording

    _refuse_sample_options(args)
    found: list[ConversationScan] = []

    def pick(judge: Judge | None, criteria: CriteriaFile | None) -> list[str]:
        found.append(_scan(_conversations(data), judge, getattr(args, "generator_model", None)))
        if not found[0].turns:
            raise UserError(
                f"{data}: no assistant turn answers a user turn, so there is nothing to score "
                "(a script? replay it with `ragbridge run PIPELINE "
                f"{data.name}`)"
            )
        return _names(args, found[0].fields, judge is not None, criteria)

    plan = eval_command.prepare(args, [data], pick=pick)
    scan = found[0]
    levels = _levels(plan)
    _check_rows(data, scan, levels)
    metadata = {
        **eval_command._said_self_judging(plan, scan.own_answers),
        **recording.history_metadata(args),
    }
    rollups = RollupTally(levels)
    end = _Finish(args, scan, levels, rollups, lambda: _rows(_conversations(data), levels), "eval")
    total = _total(scan, levels)

    def run(on_result: OnResult) -> Evaluation:
        return _score(
            args, plan, levels, _conversations(data), total,
            on_result=_both(on_result, rollups.add), keep=False, metadata=metadata,
        )  # fmt: skip

    if args.report:  # the report needs every cell at hand
        evaluation = _score(
            args, plan, levels, _conversations(data), total,
            on_result=rollups.add, keep=True, metadata=metadata,
        )  # fmt: skip
        return end(evaluation)
    return eval_command._stream_eval(args, plan, data, total, metadata, run=run, end=end)


def _read_scripts(data: Path) -> list[Conversation]:
    from ragbridge.core.replay import script_steps

    scripts = list(_conversations(data))
    if not scripts:
        raise UserError(f"{data}: holds no conversations (only blank lines)")
    for script in scripts:
        try:
            script_steps(script)
        except ValueError as exc:
            raise UserError(f"{data}: {exc}") from None
    return scripts


def _expected(scripts: Sequence[Conversation]) -> FieldCounts:
    """What the replayed turns will carry: every user turn gets an answer and contexts from the
    pipeline; references and labels come from the script's expected turns."""
    from ragbridge.core.replay import script_steps
    from ragbridge.core.sample import Sample

    rows = []
    for script in scripts:
        for step in script_steps(script):
            expected = step.expected
            rows.append(
                Sample(
                    id=f"{script.id}#{step.position}",
                    question=step.user.content or "?",
                    reference=expected.reference if expected is not None else None,
                    reference_contexts=(
                        expected.reference_contexts if expected is not None else None
                    ),
                    relevance=expected.relevance if expected is not None else None,
                )
            )
    return FieldCounts.of(rows, produced=("answer", "contexts"))


def _replay(pipeline: Any, scripts: list[Conversation], args: argparse.Namespace) -> list[Any]:
    """The conversations ``pipeline`` has when asked each script's user turns."""
    from ragbridge.adapters.cli.options import progress

    spec: str = args.pipeline
    what = f"{spec} is a {type(pipeline).__name__}"
    module = type(pipeline).__module__
    chat_key = getattr(args, "chat_history_key", None)
    with progress("running pipeline", len(scripts)) as advance:
        if module.startswith("llama_index") or callable(getattr(pipeline, "chat", None)):
            if not callable(getattr(pipeline, "chat", None)):
                kind = " (a query engine)" if callable(getattr(pipeline, "aquery", None)) else ""
                raise UserError(f"{what}{kind}: {NEEDS_CHAT}")
            if chat_key is not None:
                raise UserError("--chat-history-key is for a LangChain runnable")
            return _chat_sessions(pipeline, scripts, what, advance)
        if module.startswith(("langchain", "langgraph")) or callable(
            getattr(pipeline, "abatch", None)
        ):
            from ragbridge.adapters.langchain import capture_conversations

            try:
                return capture_conversations(
                    pipeline, scripts, history_key=chat_key, progress=advance
                )
            except TypeError:
                raise UserError(f"{what}, which holds no conversation: {NEEDS_CHAT}") from None
    raise UserError(f"{what}: {NEEDS_CHAT}")


def _chat_sessions(
    engine: Any, scripts: list[Conversation], what: str, advance: Callable[[int, int], None]
) -> list[Any]:
    """`capture_chat_sessions`, one conversation at a time (the progress bar moves)."""
    from ragbridge.adapters.llamaindex import ChatTurnError, capture_chat_sessions

    out = []
    for done, script in enumerate(scripts, start=1):
        try:
            out.extend(capture_chat_sessions(engine, [script]))
        except (ChatTurnError, TypeError, RuntimeError) as exc:
            raise UserError(f"{what}: {exc}; nothing was scored") from None
        advance(done, len(scripts))
    return out


def run_script(args: argparse.Namespace, data: Path) -> int:
    """``ragbridge run PIPELINE script.jsonl``."""
    from ragbridge.adapters.cli import eval_command, recording
    from ragbridge.adapters.cli.options import _made

    _refuse_sample_options(args)
    scripts = _read_scripts(data)  # before the pipeline: its import may take minutes
    expected = _expected(scripts)
    plan = eval_command.prepare(
        args,
        [data],
        pick=lambda judge, criteria: _names(args, expected, judge is not None, criteria),
    )
    levels = _levels(plan)
    pipeline = _made(args.pipeline, "PIPELINE")
    conversations = _replay(pipeline, scripts, args)
    if args.save_samples:
        from ragbridge.core.conversation import save_conversations

        save_conversations(conversations, args.save_samples)
        console.say(f"wrote {args.save_samples}")
    missed = _Unanswered.of(conversations)
    missed.say(args.pipeline, data)
    scan = _scan(conversations, plan.judge, getattr(args, "generator_model", None))
    _check_rows(data, scan, levels)
    metadata = {
        **eval_command._said_self_judging(plan, scan.own_answers),
        **recording.history_metadata(args),
    }
    rollups = RollupTally(levels)
    evaluation = _score(
        args, plan, levels, conversations, _total(scan, levels),
        on_result=rollups.add, keep=True, metadata=metadata,
    )  # fmt: skip
    rows = list(_rows(conversations, levels))
    code = _Finish(args, scan, levels, rollups, lambda: rows, "run")(evaluation)
    return missed.settle(code, args.pipeline, args.max_failed_share)


@dataclass(frozen=True)
class _Unanswered:
    """The turns a pipeline failed on (its error in the turn's metadata) or never reached
    (``not_asked``: the turns after a failed one). They hold no answer, so no turn measure
    scores them: the run says so instead, and they count against ``--max-failed-share``."""

    failed: int
    asked: int
    first: str | None

    @classmethod
    def of(cls, conversations: Iterable[Conversation]) -> _Unanswered:
        failed = asked = 0
        first: str | None = None
        for conversation in conversations:
            for position, turn in conversation.assistant_turns():
                if conversation.question_for(position) is None:
                    continue
                asked += 1
                why = turn.metadata.get("error") or turn.metadata.get("not_asked")
                if why:
                    failed += 1
                    first = first or f"conversation {conversation.id!r}, turns[{position}]: {why}"
        return cls(failed, asked, first)

    def say(self, spec: str, data: Path) -> None:
        """Refuse a run where the pipeline answered nothing; warn when it missed some turns."""
        if self.asked and self.failed == self.asked:
            raise UserError(
                f"{spec} answered none of the {plural(self.asked, 'turn')} of {data} "
                f"(first: {self.first}); nothing was scored"
            )
        if self.failed:
            console.warn(
                f"{spec} failed on {self.failed} of {plural(self.asked, 'turn')} (first: "
                f"{self.first}); a conversation stops at its failed turn, and the turns not "
                "answered are not scored"
            )

    def settle(self, code: int, spec: str, max_failed_share: float) -> int:
        """A passing run fails (exit 1) when more turns failed in the pipeline than the bar
        allows; a worse exit code stands."""
        from ragbridge.adapters.cli.errors import EXIT_FAILED

        if code != EXIT_OK or not self.asked or self.failed / self.asked <= max_failed_share:
            return code
        console.error(
            f"{spec}: {self.failed} of {plural(self.asked, 'turn')} failed in the pipeline "
            f"({self.failed / self.asked:.0%}, more than --max-failed-share {max_failed_share:g})"
        )
        return EXIT_FAILED


def run_estimate(args: argparse.Namespace, data: Path) -> int:
    """``ragbridge estimate chats.jsonl``: the calls of the conversations run, exactly."""
    from ragbridge.adapters.cli import criteria_command, eval_command
    from ragbridge.adapters.cli.options import choose_metrics
    from ragbridge.core.multiturn import CONVERSATION_METRICS, estimate_conversations

    conversations = list(_conversations(data))
    if not conversations:
        raise UserError(f"{data}: holds no conversations (only blank lines)")
    criteria = criteria_command.criteria_of(args)
    names = _names(args, None, True, criteria)
    metrics, _ = choose_metrics(names, have_judge=True, have_nli=True)
    metrics = with_turn_support(criteria_command.bind(metrics, criteria), args)
    turn = [m for m in metrics if m.name not in CONVERSATION_METRICS]
    whole = [m for m in metrics if m.name in CONVERSATION_METRICS]
    scan = _scan(conversations, None, None)
    levels = {m.name: "conversation" if m.name in CONVERSATION_METRICS else "turn" for m in metrics}
    _check_rows(data, scan, levels)
    est = estimate_conversations(conversations, turn, whole)
    per = est.calls / scan.conversations
    console.say(
        f"{plural(scan.conversations, 'conversation')} ({plural(scan.turns, 'turn')}), "
        f"metrics: {', '.join(m.name for m in metrics)}",
        f"judge calls: {est.calls} ({per:.1f} per conversation)",
        *eval_command.estimate_lines(args, est),
    )
    return EXIT_OK
