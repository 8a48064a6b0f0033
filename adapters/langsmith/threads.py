"""LangSmith threads as ragbridge `Conversation`s (the source side, for chat assistants).

Why it exists: a chat assistant traced with LangSmith records one trace per user message, and
LangSmith links the traces of one conversation into a *thread*. Read as samples
(`ragbridge.adapters.langsmith.runs`), a follow-up ("and for part-timers?") loses the turns that
give it its meaning; read as a conversation, every turn keeps them and is scored with them.

How runs become conversations:

* **Which runs form a thread.** LangSmith groups the root runs (traces) of a project by a
  metadata key on the root run: ``session_id``, ``conversation_id`` or ``thread_id``. When a root
  run has more than one, the first present in that order wins — the order LangSmith's ingest
  checks them in (`THREAD_KEYS`; langchain-ai/docs pull request 5774 quotes the ingest code).
  A value is the thread's id as a string; an empty one counts as absent. A run that carries
  the thread id the API computed (a ``thread_id`` field of the run itself, as the runs API of
  ``client.runs`` returns it) is grouped by that. Metadata on child runs is not read: LangSmith
  groups traces by their root run's metadata.
* **Turns.** The root runs of a thread, in start order, are its exchanges: each gives a user turn
  (the question) and an assistant turn (the answer, the contexts retrieved for it, the run's ids
  in ``metadata["langsmith"]``; the assistant turn's id is the root run id, so feedback can go
  back to the run). The question and the answer are read as `sample_from_run` reads them
  (``question_key``, ``answer_key``, ``answer_run``), with one addition for chat apps below.
* **Messages in a run's inputs.** When a root run's inputs hold a ``messages`` list (LangSmith's
  format for multi-turn evaluation; also one level down), the turn's question is the *last user
  message* of that list. The app may have been sent the whole conversation so far, but the turns
  before it are already the thread's earlier runs: reading the history out of every run again
  would repeat each turn once per later turn. The number of messages the run was sent is kept in
  the turn's ``metadata["langsmith"]["messages_in"]``. Likewise outputs holding ``messages``
  give as the answer the last assistant message with text after the last user message (an
  output that repeats the conversation must not answer with an earlier turn's reply).
  ``question_key`` / ``answer_key`` override both rules.
* **Contexts.** Each turn's retriever runs are found at any depth below its root, as
  `sample_from_run` finds them (``retriever``: None for ``run_type == "retriever"``, a run name,
  or a predicate). With ``retrievals="last"`` (the default, as for samples) the last retrieval
  is the turn's contexts and the others are listed in its metadata; ``"all"`` joins every
  retrieval of the turn in start order (an agent that searched twice for one answer). A turn
  with no retriever run retrieved nothing: its contexts are ``[]``, which the turn measures read
  as "this turn did not retrieve". A named ``retriever`` that matches no run in any turn is an
  error (a typo would otherwise read as a pipeline that never retrieves).
* **Runs without thread metadata** are not a conversation of one: they are left out and
  *reported* — `ThreadRead.unthreaded` lists their ids, and `conversations_from_runs` warns
  with their number (`UnthreadedRunsWarning`).

`read_threads` lists a project's traces with a `langsmith.Client` (``list_runs``) and reads
them; `conversations_from_runs` and `read_thread_runs` read runs you already have (live
``RunTree``s, ``schemas.Run`` objects, exported dicts, flat or as trees).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from typing_extensions import Unpack

from ragbridge.core.conversation import Conversation
from ragbridge.core.sample import Context
from ragbridge.core.turn import Turn

from .messages import after_last, last_text, messages_in
from .reading import (
    RetrieverSelector,
    field_of,
    retrieved_contexts,
    run_label,
    select_retrievers,
    start_key,
)
from .runs import RunReading, build_run_trees, run_answer, run_model_names, run_question

__all__ = [
    "THREAD_KEYS",
    "ThreadRead",
    "ThreadReading",
    "UnthreadedRunsWarning",
    "conversations_from_runs",
    "read_thread_runs",
    "read_threads",
    "thread_key",
]

THREAD_KEYS = ("session_id", "conversation_id", "thread_id")
"""The metadata keys that put a root run in a thread, in the order LangSmith checks them."""

Thread = tuple[str, str]
"""A root run's thread: the key that put it there and the thread id."""


class UnthreadedRunsWarning(UserWarning):
    """Some root runs had no thread metadata and were left out of the conversations."""


class ThreadReading(RunReading, total=False):
    """How each root run of a thread is read: `sample_from_run`'s options, plus ``retrievals``
    (``"last"`` or ``"all"``, see the module doc)."""

    retrievals: Literal["last", "all"]


@dataclass(frozen=True)
class ThreadRead:
    """What reading runs as threads gave: the ``conversations`` (one per thread, in the order
    their first turns started) and the ids of the root runs that belong to no thread
    (``unthreaded``, in start order)."""

    conversations: list[Conversation]
    unthreaded: list[str] = field(default_factory=list)

    def report(self) -> str:
        """One line: how many threads and turns were read, and how many runs were left out."""
        turns = sum(len(c.assistant_turns()) for c in self.conversations)
        line = f"{_count(len(self.conversations), 'thread')} ({_count(turns, 'turn')})"
        if self.unthreaded:
            shown = ", ".join(self.unthreaded[:3]) + (", ..." if len(self.unthreaded) > 3 else "")
            line += (
                f"; {_count(len(self.unthreaded), 'root run')} without thread metadata "
                f"({', '.join(THREAD_KEYS)}) left out: {shown}"
            )
        return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# --------------------------------------------------------------------------- thread membership


def _metadata(run: Any) -> Mapping[str, Any]:
    extra = field_of(run, "extra")
    found = extra.get("metadata") if isinstance(extra, Mapping) else None
    if not isinstance(found, Mapping):  # an export, or the v2 API's run, keeps it on top
        found = field_of(run, "metadata")
    return found if isinstance(found, Mapping) else {}


def _id_text(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text or None


def thread_key(run: Any) -> Thread | None:
    """``(key, thread id)`` of a root run — the API's own ``thread_id`` field when the run has
    it, else the first of `THREAD_KEYS` in its metadata with a value — or None for a run that
    belongs to no thread."""
    computed = _id_text(field_of(run, "thread_id"))
    if computed is not None:
        return "thread_id", computed
    metadata = _metadata(run)
    for key in THREAD_KEYS:
        value = _id_text(metadata.get(key))
        if value is not None:
            return key, value
    return None


# --------------------------------------------------------------------------- one exchange


def thread_question(root: Any, question_key: str | None) -> tuple[str, int | None]:
    """The turn's question, and how many messages the run was sent (None: no message list)."""
    inputs = field_of(root, "inputs")
    history = messages_in(inputs) if question_key is None else None
    if history is None:
        return run_question(root, question_key), None
    question = last_text(history, "user")
    if question is None:
        raise ValueError(
            f"{run_label(root)}: the inputs' messages hold no user message with text; pass "
            "question_key=<input name>"
        )
    return question, len(history)


def thread_answer(root: Any, answer_key: str | None, answer_run: str | None) -> str | None:
    if answer_key is None and answer_run is None:
        said = messages_in(field_of(root, "outputs"))
        if said is not None:  # only what came after the user's message answers it
            return last_text(after_last(said, "user"), "assistant")
    return run_answer(root, answer_key, answer_run)


def _retrievals(root: Any, retriever: RetrieverSelector) -> list[Any]:
    """The turn's retriever runs in start order; none is a turn that did not retrieve."""
    try:
        return select_retrievers(root, retriever)
    except ValueError:
        return []


def _run_ref(run: Any) -> dict[str, Any]:
    return {"id": str(field_of(run, "id")), "name": field_of(run, "name")}


def _exchange(root: Any, thread: Thread, reading: ThreadReading) -> tuple[Turn, Turn, bool]:
    """The user and assistant turns one root run records, and whether it retrieved."""
    question, sent = thread_question(root, reading.get("question_key"))
    answer = thread_answer(root, reading.get("answer_key"), reading.get("answer_run"))
    found = _retrievals(root, reading.get("retriever"))
    used = found if reading.get("retrievals", "last") == "all" else found[-1:]
    contexts: list[Context] = [c for run in used for c in retrieved_contexts(run)]
    start = field_of(root, "start_time")
    trace = field_of(root, "trace_id")
    info: dict[str, Any] = {
        "run_id": str(field_of(root, "id")),
        "run_name": field_of(root, "name"),
        "trace_id": None if trace is None else str(trace),
        "start_time": start.isoformat() if hasattr(start, "isoformat") else start,
        "thread_key": thread[0],
        "thread_id": thread[1],
        "retriever_runs": [_run_ref(r) for r in used],
    }
    if len(used) < len(found):
        info["other_retriever_runs"] = [_run_ref(r) for r in found[: len(found) - len(used)]]
    if sent is not None:
        info["messages_in"] = sent
    metadata: dict[str, Any] = {"langsmith": info}
    models = run_model_names(root)
    if models:
        metadata["generator_model"] = models[-1]
    user = Turn(role="user", content=question)
    assistant = Turn(
        role="assistant",
        content=answer,
        id=info["run_id"],
        contexts=contexts,
        metadata=metadata,
    )
    return user, assistant, bool(found)


# --------------------------------------------------------------------------- many runs


def _grouped(runs: Iterable[Any]) -> list[tuple[Any, Thread | None]]:
    """The root runs of ``runs`` with their threads; flat runs are rebuilt into trees first.

    The thread is read from the record as given: a rebuilt ``schemas.Run`` has no field for
    the ``thread_id`` the API computes, so it would be lost after rebuilding.
    """
    items = list(runs)
    ids = {str(field_of(r, "id")) for r in items}
    threads = {str(field_of(r, "id")): thread_key(r) for r in items}
    if any(str(field_of(r, "parent_run_id")) in ids for r in items):
        items = build_run_trees(items)
    roots = [r for r in items if str(field_of(r, "parent_run_id")) not in ids]
    return [(r, threads.get(str(field_of(r, "id"))) or thread_key(r)) for r in roots]


def _check(reading: ThreadReading, caller: str) -> None:
    unknown = sorted(set(reading) - set(ThreadReading.__annotations__))
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword arguments: {unknown}")
    if reading.get("retrievals", "last") not in ("last", "all"):
        raise ValueError(f"retrievals must be 'last' or 'all', got {reading['retrievals']!r}")


def _read(roots: list[tuple[Any, Thread | None]], reading: ThreadReading) -> ThreadRead:
    threads: dict[str, list[tuple[Any, Thread]]] = {}
    unthreaded: list[str] = []
    for root, thread in sorted(roots, key=lambda pair: start_key(pair[0])):
        if thread is None:
            unthreaded.append(str(field_of(root, "id")))
        else:
            threads.setdefault(thread[1], []).append((root, thread))
    conversations: list[Conversation] = []
    retrieved = False
    for thread_id, members in threads.items():
        turns: list[Turn] = []
        for root, thread in members:
            user, assistant, did = _exchange(root, thread, reading)
            turns += [user, assistant]
            retrieved = retrieved or did
        info = {
            "thread_id": thread_id,
            "thread_keys": sorted({thread[0] for _, thread in members}),
            "run_ids": [str(field_of(root, "id")) for root, _ in members],
        }
        conversations.append(Conversation(id=thread_id, turns=turns, metadata={"langsmith": info}))
    selector = reading.get("retriever")
    if isinstance(selector, str) and conversations and not retrieved:
        raise ValueError(
            f"no run named {selector!r} in any turn of {len(conversations)} threads "
            "(retriever=); pass the retriever run's name, or None for run_type='retriever'"
        )
    return ThreadRead(conversations, unthreaded)


def read_thread_runs(runs: Iterable[Any], **reading: Unpack[ThreadReading]) -> ThreadRead:
    """Runs grouped into threads, each thread a `Conversation` (see the module doc).

    ``runs`` are root runs with their children (live ``RunTree``s, ``schemas.Run`` trees from
    `load_runs`) or a flat list linked by ``parent_run_id`` (dicts or ``Run``s, as
    ``client.list_runs`` yields them), which is rebuilt into trees first. ``reading`` is
    `ThreadReading`. The conversation id is the thread id; its metadata names the thread key(s)
    and the root run ids. Raises ValueError naming the run when a trace does not fit (no
    question, a retriever run without documents).
    """
    _check(reading, "read_thread_runs")
    return _read(_grouped(runs), reading)


def conversations_from_runs(
    runs: Iterable[Any], **reading: Unpack[ThreadReading]
) -> list[Conversation]:
    """One `Conversation` per thread in ``runs`` (`read_thread_runs`' conversations).

    Root runs without thread metadata are left out with an `UnthreadedRunsWarning` naming how
    many (use `read_thread_runs` for their ids).
    """
    read = read_thread_runs(runs, **reading)
    if read.unthreaded:
        warnings.warn(read.report(), UnthreadedRunsWarning, stacklevel=2)
    return read.conversations


def _thread_filter(thread_ids: Sequence[str] | None, filter: str | None) -> str | None:
    """``filter`` narrowed to ``thread_ids`` (LangSmith's computed ``thread_id`` field)."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a list of thread ids, not a single string")
    if not thread_ids:
        return filter
    terms = [f'eq(thread_id, "{t}")' for t in thread_ids]
    wanted = terms[0] if len(terms) == 1 else f"or({', '.join(terms)})"
    return f"and({wanted}, {filter})" if filter else wanted


def read_threads(
    client: Any,
    *,
    project_name: str,
    thread_ids: Sequence[str] | None = None,
    filter: str | None = None,
    start_time: datetime | None = None,
    limit: int | None = None,
    **reading: Unpack[ThreadReading],
) -> ThreadRead:
    """The threads of a LangSmith project, read with ``client`` (a `langsmith.Client`).

    Root runs are listed with ``client.list_runs(project_name=..., is_root=True, filter=...,
    start_time=..., limit=...)``; ``thread_ids`` narrows that to some threads (``eq(thread_id,
    ...)``, the filter ``Client.read_thread`` uses), combined with your ``filter``. ``limit``
    counts root runs, i.e. turns: a thread cut by it, or by ``start_time``, starts or ends
    early — pass ``thread_ids`` to read whole threads. Each threaded trace's runs are then
    fetched by ``trace_id`` and rebuilt into a tree; unthreaded roots are only counted
    (`ThreadRead.unthreaded`). ``reading`` is `read_thread_runs`'.
    """
    _check(reading, "read_threads")
    listed = list(
        client.list_runs(
            project_name=project_name,
            is_root=True,
            filter=_thread_filter(thread_ids, filter),
            start_time=start_time,
            limit=limit,
        )
    )
    roots: list[tuple[Any, Thread | None]] = []
    for root in listed:
        thread = thread_key(root)
        if thread is None:  # reported as unthreaded; its children are not needed
            roots.append((root, None))
            continue
        root_id = str(field_of(root, "id"))
        trace = list(client.list_runs(project_name=project_name, trace_id=field_of(root, "id")))
        if not any(str(field_of(r, "id")) == root_id for r in trace):
            trace.append(root)
        roots += [(t, thread) for t in build_run_trees(trace) if str(t.id) == root_id]
    return _read(roots, reading)
