"""MTRAG (IBM, TACL 2025), the public multi-turn RAG benchmark, read into ragbridge's records.

MTRAG (github.com/IBM/mt-rag-benchmark) has 110 human-written conversations over four corpora
(ClapNQ, Cloud, FiQA, Govt), cut into 842 *tasks*: one per user turn, each holding every turn
before it. This module reads the files MTRAG ships, with nothing optional imported:

* **Generation tasks** (``mtrag-human/generation_tasks/*.jsonl``, the evaluation scripts'
  ``sample_data``, MTRAG-UN's ``reference.jsonl``): `load_conversations` joins the tasks of a
  conversation into one `Conversation` whose assistant turns carry MTRAG's labels, and
  `load_task_samples` gives one `Sample` per task, the way MTRAG scores a task: the reference
  conversation before the question as ``history`` and a system's ``predictions`` as the answer.
* **Retrieval tasks** (BEIR format, ``mtrag-human/retrieval_tasks/<domain>/``): `read_qrels`,
  `read_queries`.
* **Retrieval predictions** (a task file whose ``contexts`` carry ``document_id`` and ``score``:
  MTRAG's Task A format, and its ``RAG.jsonl``): `read_predictions`, ranked by score as MTRAG's
  evaluator (pytrec_eval) ranks them.

Where MTRAG's labels go, on the assistant turn answering task k's question: ``reference`` is the
task's target answer; ``contexts`` are the task's passages (the reference passages the answer
was written from in the reference setting, the top 5 retrieved in the RAG setting), with
``document_id`` as their id, ranked by their ``score`` as MTRAG's evaluator ranks them (the
file's order when a passage has none); ``relevance`` is

* ``{}`` when the task is UNANSWERABLE or CONVERSATIONAL: MTRAG says no passage answers it (its
  retrieval tasks leave such turns out), so `Sample.is_no_answer` holds, ranking measures skip
  the turn and the ``no_answer`` measure scores it;
* otherwise the qrels' grades of the task when qrels are given (MTRAG's retrieval labels), else
  the passages' annotator ``feedback`` (``yes`` 1, ``no`` 0; the latest judgement counts, since a
  reviewer's repair comes after the author's), else None: not labelled (MTRAG-UN's
  UNDERSPECIFIED turns, say, which no qrels cover).

``reference_contexts`` are the texts of the turn's passages labelled relevant. The task's other
fields (``answerability``, ``Question Type``, ``Multi-Turn``, ...) go to the turn's metadata
under ``"mtrag"``, with the task id, the turn number, the collection and its domain.

Task ids: MTRAG writes ``<conversation id><::><turn>`` in its retrieval files and
``<conversation id>::<turn>`` in some sample files. Both are read; ragbridge uses the first
(`task_id`), so qrels, runs and turns line up whichever file they came from.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragbridge.core.conversation import Conversation
from ragbridge.core.record_fields import Context
from ragbridge.core.retrieval import Qrels, Run
from ragbridge.core.sample import Sample
from ragbridge.core.turn import Turn

__all__ = [
    "DOMAINS",
    "NO_PASSAGE",
    "SEPARATOR",
    "MtragMessage",
    "MtragRun",
    "MtragTask",
    "canonical_task_id",
    "domain_of",
    "load_conversations",
    "load_task_samples",
    "read_predictions",
    "read_qrels",
    "read_queries",
    "read_tasks",
    "split_task_id",
    "task_id",
]

SEPARATOR = "<::>"
"""What joins a conversation id and a turn number in MTRAG's task ids."""

DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
"""MTRAG's four corpora, as `domain_of` names them."""

NO_PASSAGE = frozenset({"UNANSWERABLE", "CONVERSATIONAL"})
"""Answerability labels under which MTRAG holds that no passage answers the turn."""

# Fields of a task that are its structure, not labels to keep in metadata.
_STRUCTURE = frozenset(
    {
        "conversation_id",
        "task_id",
        "task_type",
        "turn",
        "Turn",
        "dataset",
        "contexts",
        "input",
        "targets",
        "predictions",
        "Collection",
        "collection",
    }
)
_SPEAKERS = {"user": "user", "agent": "assistant", "assistant": "assistant"}
# Substrings of a collection name, checked in this order ("ibmcloud" before anything shorter).
_DOMAIN_WORDS: tuple[tuple[str, str], ...] = (
    ("ibmcloud", "cloud"),
    ("cloud", "cloud"),
    ("clapnq", "clapnq"),
    ("fiqa", "fiqa"),
    ("govt", "govt"),
)


# --------------------------------------------------------------------------- ids


def task_id(conversation_id: str, turn: int) -> str:
    """MTRAG's id of the task asking turn ``turn`` (counted from 1) of a conversation."""
    return f"{conversation_id}{SEPARATOR}{turn}"


def split_task_id(text: str) -> tuple[str, int]:
    """``(conversation id, turn)`` of a task id, in either of MTRAG's spellings.

    Raises ValueError for anything else: a run or qrels line whose id names no turn cannot be
    placed in a conversation, and guessing would score it against the wrong turn.
    """
    head, sep, tail = text.rpartition(SEPARATOR)
    if not sep:
        head, sep, tail = text.rpartition("::")
    if not sep or not head or not tail.isdigit() or int(tail) < 1:
        raise ValueError(
            f"{text!r} is not an MTRAG task id ('<conversation id><::><turn>', turn from 1)"
        )
    return head, int(tail)


def canonical_task_id(text: str) -> str:
    """``text`` with the ``<::>`` separator when it is a task id spelled with ``::``; any other
    id unchanged (qrels of other collections may name their queries freely)."""
    try:
        conversation, turn = split_task_id(text)
    except ValueError:
        return text
    return task_id(conversation, turn)


def domain_of(collection: str | None) -> str | None:
    """The corpus of an MTRAG collection name (``mt-rag-ibmcloud-elser-512-100-20240502`` ->
    ``cloud``; MTRAG-UN writes just ``ibmcloud``), or None for a name it does not know."""
    if not collection:
        return None
    name = collection.lower()
    for word, domain in _DOMAIN_WORDS:
        if word in name:
            return domain
    return None


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class MtragMessage:
    """One message of a task's ``input``: ``role`` is ragbridge's (MTRAG's ``agent`` is the
    ``assistant``); ``enrichments`` are a user message's labels, NaN values dropped."""

    role: str
    text: str | None
    enrichments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MtragTask:
    """One task of a generation-task file: the question of turn ``turn`` of a conversation.

    ``messages`` are the conversation up to that question (MTRAG's ``input``); ``target`` the
    reference answer; ``contexts`` the passages as the file has them; ``labels`` the task's other
    fields (NaN values dropped); ``prediction`` a system's answer when the file holds one;
    ``where`` the ``file:line`` it came from, for errors.
    """

    conversation_id: str
    turn: int
    task_id: str
    source_id: str
    messages: tuple[MtragMessage, ...]
    target: str | None
    contexts: tuple[Mapping[str, Any], ...]
    labels: dict[str, Any]
    collection: str | None
    dataset: str | None
    prediction: str | None
    where: str

    @property
    def answerability(self) -> frozenset[str]:
        """The task's answerability labels, upper-cased (MTRAG writes a list)."""
        value = self.labels.get("answerability", self.labels.get("Answerability"))
        items = value if isinstance(value, list) else [value]
        return frozenset(str(v).strip().upper() for v in items if isinstance(v, str) and v)


def _missing(value: Any) -> bool:
    """NaN (pandas writes it for an empty cell: MTRAG's sample files have ``"Multi-Turn": NaN``),
    None, or MTRAG-UN's ``["N/A"]``."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, list) and all(v in ("N/A", None) for v in value) and bool(value)


def _json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    with Path(path).open("r", encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(raw)  # accepts NaN, which MTRAG's pandas-written files hold
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not a JSON line ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield where, record


def _text(record: Mapping[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {key}: expected a non-empty string, got {value!r}")
    return value


def _message(raw: Any, where: str) -> MtragMessage:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a message object, got {type(raw).__name__}")
    role = _SPEAKERS.get(str(raw.get("speaker", "")).lower())
    if role is None:
        raise ValueError(
            f"{where}: speaker: expected 'user' or 'agent', got {raw.get('speaker')!r}"
        )
    text = raw.get("text")
    if not isinstance(text, str):
        raise ValueError(f"{where}: text: expected a string, got {type(text).__name__}")
    enrichments = raw.get("enrichments")
    kept = {k: v for k, v in enrichments.items() if not _missing(v)} if enrichments else {}
    return MtragMessage(role, text, kept)


def _first_text(items: Any, key: str, where: str) -> str | None:
    """The text of the first item of ``targets`` / ``predictions`` (MTRAG keeps one)."""
    if _missing(items) or items == []:
        return None
    if not isinstance(items, list) or not isinstance(items[0], dict):
        raise ValueError(f"{where}: {key}: expected a list of objects with a 'text'")
    text = items[0].get("text")
    if not isinstance(text, str):
        raise ValueError(f"{where}: {key}[0].text: expected a string")
    return text


def _task(where: str, record: Mapping[str, Any]) -> MtragTask:
    conversation = _text(record, "conversation_id", where)
    source_id = _text(record, "task_id", where)
    raw_input = record.get("input")
    if not isinstance(raw_input, list) or not raw_input:
        raise ValueError(f"{where}: input: expected the conversation's messages (a list)")
    messages = tuple(_message(m, f"{where}: input[{i}]") for i, m in enumerate(raw_input))
    if messages[-1].role != "user":
        raise ValueError(f"{where}: input: a task ends with the user's question, not an answer")
    turn = sum(1 for m in messages if m.role == "user")
    stated = record.get("turn", record.get("Turn"))
    if stated is not None and str(stated).strip() != str(turn):
        raise ValueError(f"{where}: turn: says {stated!r}, but input holds {turn} user messages")
    if split_task_id(source_id) != (conversation, turn):
        raise ValueError(
            f"{where}: task_id {source_id!r} does not name turn {turn} of conversation "
            f"{conversation!r}"
        )
    contexts = record.get("contexts") or []
    if not isinstance(contexts, list) or not all(isinstance(c, dict) for c in contexts):
        raise ValueError(f"{where}: contexts: expected a list of passage objects")
    collection = record.get("Collection", record.get("collection"))
    dataset = record.get("dataset")
    return MtragTask(
        conversation_id=conversation,
        turn=turn,
        task_id=task_id(conversation, turn),
        source_id=source_id,
        messages=messages,
        target=_first_text(record.get("targets"), "targets", where),
        contexts=tuple(contexts),
        labels={k: v for k, v in record.items() if k not in _STRUCTURE and not _missing(v)},
        collection=collection if isinstance(collection, str) else None,
        dataset=dataset if isinstance(dataset, str) else None,
        prediction=_first_text(record.get("predictions"), "predictions", where),
        where=where,
    )


def read_tasks(path: str | os.PathLike[str]) -> list[MtragTask]:
    """The tasks of a generation-task JSONL file, in file order; a task id twice is an error."""
    tasks: list[MtragTask] = []
    seen: dict[str, str] = {}
    for where, record in _json_lines(path):
        task = _task(where, record)
        if task.task_id in seen:
            raise ValueError(
                f"{where}: task {task.task_id!r} again (first at {seen[task.task_id]})"
            )
        seen[task.task_id] = where
        tasks.append(task)
    return tasks


# --------------------------------------------------------------------------- labels


def _context(raw: Mapping[str, Any], where: str) -> Context:
    text = raw.get("text")
    if not isinstance(text, str):
        raise ValueError(f"{where}.text: expected the passage's text (a string)")
    doc = raw.get("document_id")
    if not isinstance(doc, (str, int)) or isinstance(doc, bool) or doc == "":
        raise ValueError(f"{where}.document_id: expected the passage's id")
    metadata = {k: raw[k] for k in ("title", "url") if isinstance(raw.get(k), str) and raw[k]}
    return Context(text=text, id=str(doc), score=_finite(raw.get("score")), metadata=metadata)


def _finite(value: Any) -> float | None:
    """A finite number as a float; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _feedback_grade(raw: Mapping[str, Any]) -> int | None:
    """1 or 0 from a passage's annotator ``feedback`` (the latest yes/no), None if unjudged."""
    feedback = raw.get("feedback")
    judged = feedback.get("relevant") if isinstance(feedback, dict) else None
    latest: tuple[float, str] | None = None
    for verdict in judged.values() if isinstance(judged, dict) else ():
        value = str(verdict.get("value", "")).lower() if isinstance(verdict, dict) else ""
        if value not in ("yes", "no"):
            continue
        stamp = verdict.get("timestamp")
        when = float(stamp) if isinstance(stamp, (int, float)) else 0.0
        if latest is None or when >= latest[0]:
            latest = (when, value)
    return None if latest is None else int(latest[1] == "yes")


def _relevance(
    task: MtragTask, contexts: list[Context], qrels: Qrels | None
) -> dict[str, int] | None:
    if task.answerability & NO_PASSAGE:
        return {}
    if qrels is not None:
        judged = qrels.get(task.task_id)
        if judged is not None:
            return dict(judged)
    grades: dict[str, int] = {}
    for raw, context in zip(task.contexts, contexts, strict=True):
        grade = _feedback_grade(raw)
        if grade is not None and context.id is not None:
            grades[context.id] = max(grade, grades.get(context.id, 0))
    return grades or None


def _ranked(contexts: list[Context]) -> list[Context]:
    """The passages in the order MTRAG's evaluator ranks them: by score, highest first, ties by
    document id descending (trec_eval's rule), so a turn's ranking measures agree with MTRAG's;
    the file's order when a passage has no score (then there is no ranking but the list)."""
    if any(c.score is None for c in contexts):
        return contexts
    by_id = sorted(contexts, key=lambda c: c.id or "", reverse=True)
    return sorted(by_id, key=lambda c: -(c.score or 0.0))


def _answer_turn(content: str | None, task: MtragTask, qrels: Qrels | None) -> Turn:
    contexts = [_context(c, f"{task.where}: contexts[{j}]") for j, c in enumerate(task.contexts)]
    relevance = _relevance(task, contexts, qrels)
    contexts = _ranked(contexts)
    relevant = [c.text for c in contexts if relevance and relevance.get(c.id or "", 0) > 0]
    where = {
        "task_id": task.source_id,
        "turn": task.turn,
        "collection": task.collection,
        "domain": domain_of(task.collection),
        **task.labels,
    }
    return Turn(
        role="assistant",
        content=content,
        id=task.task_id,
        contexts=contexts,
        reference=task.target,
        reference_contexts=relevant or None,
        relevance=relevance,
        metadata={"mtrag": where},
    )


# --------------------------------------------------------------------------- conversations


def _joined(tasks: list[MtragTask], qrels: Qrels | None) -> tuple[Conversation, dict[str, int]]:
    """One conversation from its tasks, and the position of each task's answer in it.

    The turns are those of the task asked last (its input, then its target); every other task's
    question must be the same user turn of it, or the labels would land on a wrong turn.
    """
    last = max(tasks, key=lambda t: t.turn)
    messages = [*last.messages, MtragMessage("assistant", last.target)]
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    answers: dict[int, MtragTask] = {}
    positions: dict[str, int] = {}
    for task in tasks:
        asked = users[task.turn - 1]
        if messages[asked].text != task.messages[-1].text:
            raise ValueError(
                f"{task.where}: the question of task {task.task_id!r} differs from turn "
                f"{task.turn} of the same conversation in task {last.task_id!r} ({last.where})"
            )
        if messages[asked + 1].role != "assistant":
            raise ValueError(
                f"{last.where}: turn {task.turn} of conversation {task.conversation_id!r} has "
                "no answer before the next question"
            )
        answers[asked + 1] = task
        positions[task.task_id] = asked + 1
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        if message.role == "user":
            meta = {"mtrag": {"enrichments": message.enrichments}} if message.enrichments else {}
            turns.append(Turn(role="user", content=message.text, metadata=meta))
        elif index in answers:
            turns.append(_answer_turn(message.text, answers[index], qrels))
        else:
            turns.append(Turn(role="assistant", content=message.text))
    about = {"collection": last.collection, "domain": domain_of(last.collection)}
    if last.dataset is not None:
        about["dataset"] = last.dataset
    conversation = Conversation(id=last.conversation_id, turns=turns, metadata={"mtrag": about})
    return conversation, positions


def _conversations(
    tasks: list[MtragTask], qrels: Qrels | None
) -> tuple[list[Conversation], dict[str, tuple[Conversation, int]]]:
    grouped: dict[str, list[MtragTask]] = {}
    for task in tasks:
        grouped.setdefault(task.conversation_id, []).append(task)
    conversations: list[Conversation] = []
    placed: dict[str, tuple[Conversation, int]] = {}
    for group in grouped.values():
        conversation, positions = _joined(group, qrels)
        conversations.append(conversation)
        placed.update({tid: (conversation, at) for tid, at in positions.items()})
    return conversations, placed


def load_conversations(
    path: str | os.PathLike[str], *, qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None
) -> list[Conversation]:
    """The conversations of a generation-task file, one per conversation id (in order of first
    appearance), each assistant turn labelled from its task (see the module's docstring).

    An assistant turn's ``content`` is the conversation's own answer there (MTRAG's reference),
    so the conversation is ready to score as written, or to `replay` as a script through a
    pipeline (a replay replaces every answer). A file's ``predictions`` are not turns of the
    conversation (MTRAG asks each task after the *reference* history): `load_task_samples`
    reads them. ``qrels`` (`read_qrels`) label the turns MTRAG's retrieval tasks cover.
    """
    return _conversations(read_tasks(path), _as_qrels(qrels))[0]


def load_task_samples(
    path: str | os.PathLike[str], *, qrels: Qrels | Mapping[str, Mapping[str, int]] | None = None
) -> list[Sample]:
    """One `Sample` per task, in file order, as MTRAG evaluates a task.

    ``history`` is the conversation before the task's question as MTRAG gives it (reference
    answers included); ``answer`` is the task's prediction, or None when the file holds none (a
    reference file: retrieval and label views only); ``id`` is the task id. The rest is the
    labelled turn's (`Conversation.turn_sample`), metadata included.
    """
    tasks = read_tasks(path)
    _, placed = _conversations(tasks, _as_qrels(qrels))
    samples: list[Sample] = []
    for task in tasks:
        conversation, position = placed[task.task_id]
        turn = conversation.turn_sample(position)
        samples.append(turn.model_copy(update={"id": task.task_id, "answer": task.prediction}))
    return samples


def _as_qrels(qrels: Qrels | Mapping[str, Mapping[str, int]] | None) -> Qrels | None:
    if qrels is None or isinstance(qrels, Qrels):
        return qrels
    return Qrels({canonical_task_id(q): dict(j) for q, j in qrels.items()})


# --------------------------------------------------------------------------- retrieval files


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """MTRAG's qrels (BEIR TSV: a ``query-id corpus-id score`` header, then one judgement a
    line), task ids made canonical. A document judged twice for one task is an error, as in
    trec_eval. For TREC-format qrels use `ragbridge.core.retrieval.read_qrels`."""
    data: dict[str, dict[str, int]] = {}
    with Path(path).open("r", encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            fields = raw.rstrip("\r\n").split("\t")
            if not raw.strip() or (number == 1 and fields[0] == "query-id"):
                continue
            where = f"{path}:{number}"
            if len(fields) != 3:
                raise ValueError(f"{where}: expected 3 tab-separated fields, got {len(fields)}")
            qid, doc, grade_text = (f.strip() for f in fields)
            try:
                grade = int(grade_text)
            except ValueError:
                raise ValueError(f"{where}: score {grade_text!r} is not an integer") from None
            judged = data.setdefault(canonical_task_id(qid), {})
            if doc in judged:
                raise ValueError(f"{where}: document {doc!r} judged twice for task {qid!r}")
            judged[doc] = grade
    return Qrels(data)


def read_queries(path: str | os.PathLike[str]) -> dict[str, str]:
    """MTRAG's queries (BEIR JSONL: ``{"_id": ..., "text": ...}``) by canonical task id. The
    texts are as MTRAG wrote them (``|user|: `` prefixes, ``\\n`` between the turns of the
    all-questions variant)."""
    queries: dict[str, str] = {}
    for where, record in _json_lines(path):
        qid = canonical_task_id(_text(record, "_id", where))
        text = record.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{where}: text: expected a string")
        if qid in queries:
            raise ValueError(f"{where}: query {qid!r} again")
        queries[qid] = text
    return queries


@dataclass(frozen=True)
class MtragRun:
    """A retrieval run read from MTRAG's prediction format.

    ``scores``: ``{task id: {document id: score}}``; ``collections``: each task's collection.
    ``repeated`` counts contexts naming a document already listed for the same task: as in
    MTRAG's evaluator (a dict per task), the later score counts. trec_eval would refuse such a
    run; the count is here so a report can say so.
    """

    scores: dict[str, dict[str, float]]
    collections: dict[str, str | None]
    repeated: int = 0

    def run(self, run_id: str | None = None) -> Run:
        """The run ranked as trec_eval and pytrec_eval rank it (score descending, ties by
        document id descending), for `ragbridge.core.retrieval.evaluate_run`."""
        return Run.from_scores(self.scores, run_id=run_id)


def read_predictions(path: str | os.PathLike[str]) -> MtragRun:
    """A run from a task file whose ``contexts`` hold ``document_id`` and ``score``.

    The score orders the ranking (MTRAG's evaluator ranks by it, not by list position); a
    context without a finite score is an error naming it.
    """
    scores: dict[str, dict[str, float]] = {}
    collections: dict[str, str | None] = {}
    repeated = 0
    for where, record in _json_lines(path):
        qid = canonical_task_id(_text(record, "task_id", where))
        if qid in scores:
            raise ValueError(f"{where}: task {qid!r} again")
        contexts = record.get("contexts") or []
        if not isinstance(contexts, list):
            raise ValueError(f"{where}: contexts: expected a list")
        docs: dict[str, float] = {}
        for j, context in enumerate(contexts):
            at = f"{where}: contexts[{j}]"
            doc = context.get("document_id") if isinstance(context, dict) else None
            if not isinstance(doc, (str, int)) or isinstance(doc, bool) or doc == "":
                raise ValueError(f"{at}.document_id: expected the passage's id")
            score = context.get("score")
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise ValueError(f"{at}.score: expected a number (the ranking is by score)")
            if not math.isfinite(score):
                raise ValueError(f"{at}.score: {score} is not a finite number")
            repeated += str(doc) in docs
            docs[str(doc)] = float(score)
        scores[qid] = docs
        collection = record.get("Collection", record.get("collection"))
        collections[qid] = collection if isinstance(collection, str) else None
    return MtragRun(scores, collections, repeated)
