"""Where the LangSmith evaluators find each field of a `Sample` in a run and its example.

Why a module of its own: `ragbridge.adapters.langsmith.evaluators` is about scoring and about
what LangSmith gets back; this is the other half, reading. `Fields` holds, per field, the keys
to try (or the user's callable), checked when the evaluators are built so a typo fails before
the experiment runs, and reads a run with them. Once the values are found, the `Sample` is
built by the mapping every framework sink shares (`ragbridge.core.sample_fields.build_sample`),
so a value the Sample refuses is said in one line, ``run <id> ('<name>'): field: problem``.

Which keys are tried for each field, and how ``id_key`` re-reads context ids, is the "How a
run becomes a `Sample`" part of `ragbridge.adapters.langsmith.evaluators` (the user's page);
the key lists themselves are `QUESTION_KEYS` ... `RELEVANCE_KEYS` here.

A field that cannot be read is a `FieldMissing`: a ``missing_input`` failure when it is not
there, an ``invalid_input`` one when it is there but unusable. The answer and the reference are
optional here (`FieldsRead.notes` says where they were looked for); scoring turns their absence
into failures of the metrics that need them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbridge.core.results.evaluation import FailureKind
from ragbridge.core.sample import Context, Sample
from ragbridge.core.sample_fields import FieldError, build_sample

from .reading import (
    RetrieverSelector,
    context_of,
    example_id_of,
    field_of,
    find_text,
    keys_of,
    reference_contexts_of,
    retrieved_contexts,
    run_label,
    select_retrievers,
)

__all__ = [
    "ANSWER_KEYS",
    "CONTEXT_KEYS",
    "QUESTION_KEYS",
    "REFERENCE_KEYS",
    "RELEVANCE_KEYS",
    "FieldMissing",
    "FieldSpec",
    "Fields",
    "FieldsRead",
    "IdKey",
    "field_keys",
    "id_keys",
]

FieldSpec = str | Sequence[str] | Callable[[Any, Any], Any] | None
"""How to find a field: None for the defaults, a key name, key names tried in order, or a
callable ``(run, example) -> value`` for full control."""

IdKey = str | Sequence[str] | Callable[[Context], Any] | None
"""Where a context's id comes from: None for its own, a metadata key, metadata keys tried in
order, or a callable ``(Context) -> id | None`` (None keeps the context's own id)."""

QUESTION_KEYS = ("question", "input", "query")
ANSWER_KEYS = ("answer", "output")
CONTEXT_KEYS = ("contexts", "documents", "context")
REFERENCE_KEYS = ("reference", "ground_truth", "expected_output", "answer", "output")
RELEVANCE_KEYS = ("relevance", "qrels", "relevant_ids")

Keys = tuple[str, ...] | Callable[..., Any]
"""A checked field spec: the keys to try, or the user's callable."""


class FieldMissing(Exception):
    """A field that could not be read from the run or example (message names both and keys)."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.MISSING_INPUT) -> None:
        super().__init__(message)
        self.kind = kind


def _invalid(message: str) -> FieldMissing:
    return FieldMissing(message, FailureKind.INVALID_INPUT)


def _checked(name: str, spec: object, what: str) -> Keys | None:
    """``spec`` as keys or a callable, checked at construction so a typo fails before the run."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return (spec,)
    if callable(spec):
        return spec
    if isinstance(spec, Sequence) and spec and all(isinstance(k, str) for k in spec):
        return tuple(spec)
    raise TypeError(f"{name} must be {what}, got {spec!r}")


def field_keys(name: str, spec: FieldSpec, default: tuple[str, ...]) -> Keys:
    """The keys (or callable) the ``name=`` argument gives, ``default`` when it is None;
    TypeError for anything else."""
    checked = _checked(name, spec, "a key name, a list of key names or a callable (run, example)")
    return default if checked is None else checked


def id_keys(id_key: IdKey) -> Keys | None:
    """The metadata keys (or callable) ``id_key=`` gives (see `IdKey`); TypeError otherwise."""
    what = "a metadata key, a list of metadata keys or a callable (context) -> id"
    return _checked("id_key", id_key, what)


def _first_key(data: Any, keys: Sequence[str]) -> tuple[str, Any] | None:
    """The first of ``keys`` present in ``data`` with a non-None value."""
    if not isinstance(data, Mapping):
        return None
    for key in keys:
        if data.get(key) is not None:
            return key, data[key]
    return None


def _call(name: str, fn: Callable[..., Any], run: Any, example: Any) -> Any:
    try:
        return fn(run, example)
    except Exception as exc:
        raise _invalid(
            f"{run_label(run)}: the {name} callable raised {type(exc).__name__}: {exc}"
        ) from exc


def _example_label(example: Any) -> str:
    return f"example {field_of(example, 'id')}"


def _to_contexts(run: Any, items: list[Any]) -> list[Context]:
    out: list[Context] = []
    for i, item in enumerate(items):
        if isinstance(item, Context):
            out.append(item)
            continue
        try:
            out.append(context_of(run, i, item))
        except ValueError as exc:
            raise _invalid(str(exc)) from None
    return out


def _grades(value: Any, where: str) -> dict[str, int]:
    """Relevance labels as ``{id: grade}``: a mapping id → grade, or a list of relevant ids."""
    if isinstance(value, Mapping):
        grades = dict(value.items())
    elif isinstance(value, (list, tuple, set)):
        grades = {item: 1 for item in value}
    else:
        raise _invalid(
            f"{where} is {type(value).__name__}, expected a mapping id -> grade or a list "
            "of relevant ids"
        )
    for key, grade in grades.items():
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise _invalid(f"{where}: grade of {key!r} must be an integer, got {grade!r}")
    return {str(k): int(v) for k, v in grades.items()}


@dataclass(frozen=True)
class FieldsRead:
    """What `Fields.read` made of a run: the sample, and why optional fields are missing
    (field → where it was looked for)."""

    sample: Sample
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fields:
    """Where each field of a `Sample` is read from (see the module doc for the defaults).

    Built from the evaluators' keyword arguments with `field_keys` and `id_keys`; ``retriever``
    and ``sample_from`` are checked here. Every check raises TypeError at construction.
    """

    question: Keys
    answer: Keys
    contexts: Keys
    contexts_given: bool
    retriever: RetrieverSelector
    reference: Keys
    relevance: Keys
    id_key: Keys | None = None
    sample_from: Callable[[Any, Any], Sample] | None = None
    contexts_read: bool = True
    """False when no measure of the set reads contexts (a criterion of the question and the
    answer): the run is then not asked for any, and a pipeline without retrieval scores."""

    def __post_init__(self) -> None:
        retriever, sample_from = self.retriever, self.sample_from
        if retriever is not None and not (isinstance(retriever, str) or callable(retriever)):
            raise TypeError(f"retriever must be a run name, a callable or None, got {retriever!r}")
        if sample_from is not None and not callable(sample_from):
            raise TypeError(f"sample_from must be a callable (run, example), got {sample_from!r}")

    # ----------------------------------------------------------------- the whole sample

    def read(
        self,
        run: Any,
        example: Any,
        *,
        ids_seen: Callable[[tuple[int, int]], None] | None = None,
    ) -> FieldsRead:
        """The `Sample` ``run`` (and its ``example``) become; `FieldMissing` when a required
        field (question, contexts) cannot be read or a value is unusable.

        With ``id_key``, ``ids_seen`` hears ``(contexts without an id there, contexts)`` as
        soon as the contexts are read, even when a later field then fails.
        """
        if self.sample_from is not None:
            return FieldsRead(self._sample_from(run, example))
        notes: dict[str, str] = {}
        question = self.question_of(run, example)
        read = self.contexts_of(run, example) if self.contexts_read else []
        contexts, missed = self.with_ids(run, read)
        if self.id_key is not None and ids_seen is not None:
            ids_seen((missed, len(contexts)))
        answer = self._optional("answer", self.answer_of, run, example, notes)
        reference = self._optional("reference", self.reference_of, run, example, notes)
        relevance = self.relevance_of(run, example)
        if relevance is None:
            notes["relevance"] = self.no_relevance(run, example)
        example_id = example_id_of(run, example)
        info: dict[str, Any] = {
            "run_id": str(field_of(run, "id")),
            "run_name": field_of(run, "name"),
        }
        if example_id is not None:
            info["example_id"] = str(example_id)
        try:
            sample = build_sample(
                where=run_label(run),
                id=str(example_id if example_id is not None else field_of(run, "id")),
                question=question,
                answer=answer,
                contexts=contexts,
                reference=reference,
                reference_contexts=reference_contexts_of(example),
                relevance=relevance,
                metadata={"langsmith": info},
            )
        except FieldError as exc:
            raise _invalid(str(exc)) from None
        return FieldsRead(sample, notes)

    def _sample_from(self, run: Any, example: Any) -> Sample:
        assert self.sample_from is not None
        try:
            built = self.sample_from(run, example)
        except Exception as exc:
            raise _invalid(
                f"{run_label(run)}: sample_from raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(built, Sample):
            raise _invalid(
                f"{run_label(run)}: sample_from returned {type(built).__name__}, expected a Sample"
            )
        return built

    @staticmethod
    def _optional(
        name: str,
        reader: Callable[[Any, Any], str],
        run: Any,
        example: Any,
        notes: dict[str, str],
    ) -> str | None:
        """``reader``'s value, or None with a note when it is missing (not when it is bad)."""
        try:
            return reader(run, example)
        except FieldMissing as exc:
            if exc.kind is not FailureKind.MISSING_INPUT:
                raise
            notes[name] = str(exc)
            return None

    # ----------------------------------------------------------------- one field each

    def question_of(self, run: Any, example: Any) -> str:
        inputs = field_of(run, "inputs") or {}
        if callable(self.question):
            value = _call("question_key", self.question, run, example)
        elif self.question == QUESTION_KEYS:  # defaults: also one level down, or a lone string
            value = find_text(inputs, QUESTION_KEYS)
        else:
            found = _first_key(inputs, self.question)
            value = None if found is None else find_text(found[1], QUESTION_KEYS)
        if not isinstance(value, str):
            tried = (
                "the question_key callable"
                if callable(self.question)
                else ("keys tried: " + ", ".join(self.question))
            )
            raise FieldMissing(
                f"{run_label(run)}: no question in the run's inputs ({tried}; inputs have: "
                f"{keys_of(inputs)}); pass question_key=<input name>"
            )
        return value

    def answer_of(self, run: Any, example: Any) -> str:
        outputs = field_of(run, "outputs")
        if callable(self.answer):
            value = _call("answer_key", self.answer, run, example)
            tried = "the answer_key callable returned no text"
        else:
            found = _first_key(outputs, self.answer)
            value = None if found is None else find_text(found[1], ANSWER_KEYS)
            tried = "keys tried: " + ", ".join(self.answer)
        if not isinstance(value, str):
            error = field_of(run, "error")
            why = f"; the target failed: {str(error).splitlines()[0]}" if error else ""
            raise FieldMissing(
                f"{run_label(run)}: no answer in the run's outputs ({tried}; outputs have: "
                f"{keys_of(outputs)}){why}; pass answer_key=<output name>"
            )
        return value

    def contexts_of(self, run: Any, example: Any) -> list[Context]:
        if callable(self.contexts):
            items = _call("contexts_from", self.contexts, run, example)
            if items is None:
                items = []
            if not isinstance(items, (list, tuple)):
                raise _invalid(
                    f"{run_label(run)}: the contexts_from callable returned "
                    f"{type(items).__name__}, expected a list"
                )
            return _to_contexts(run, list(items))
        outputs = field_of(run, "outputs")
        if self.retriever is None or self.contexts_given:
            found = _first_key(outputs, self.contexts)
            if found is not None:
                value = found[1]
                items = [value] if isinstance(value, str) else value
                if not isinstance(items, (list, tuple)):
                    raise _invalid(
                        f"{run_label(run)}: outputs[{found[0]!r}] is {type(value).__name__}, "
                        "expected a list of contexts"
                    )
                return _to_contexts(run, list(items))
            if self.contexts_given:
                raise FieldMissing(
                    f"{run_label(run)}: no contexts in the run's outputs (keys tried: "
                    f"{', '.join(self.contexts)}; outputs have: {keys_of(outputs)})"
                )
        try:
            return retrieved_contexts(select_retrievers(run, self.retriever)[-1])
        except ValueError as exc:
            raise FieldMissing(
                f"no contexts: the run's outputs have none of {', '.join(self.contexts)} "
                f"(outputs have: {keys_of(outputs)}) and {exc}; pass contexts_from=<output "
                "name> or a callable (run, example), e.g. lambda run, example: [] for a "
                "pipeline without retrieval"
            ) from None

    def with_ids(self, run: Any, contexts: list[Context]) -> tuple[list[Context], int]:
        """``contexts`` with their ids read through ``id_key``, and how many had none there
        (those keep their own id, as `ragbridge.adapters.langchain.document_to_context` does)."""
        if self.id_key is None:
            return contexts, 0
        out: list[Context] = []
        missed = 0
        for i, context in enumerate(contexts):
            value = self._id_of(run, i, context)
            if value is None:
                missed += 1
                out.append(context)
            else:
                out.append(context.model_copy(update={"id": str(value)}))
        return out, missed

    def _id_of(self, run: Any, index: int, context: Context) -> Any:
        assert self.id_key is not None
        if not callable(self.id_key):
            meta = context.metadata
            return next((meta[k] for k in self.id_key if meta.get(k) is not None), None)
        try:
            return self.id_key(context)
        except Exception as exc:
            raise _invalid(
                f"{run_label(run)}: the id_key callable raised {type(exc).__name__} on "
                f"context {index}: {exc}"
            ) from exc

    def reference_of(self, run: Any, example: Any) -> str:
        if callable(self.reference):
            value = _call("reference_key", self.reference, run, example)
            tried = "the reference_key callable returned no text"
        else:
            if example is None:
                raise FieldMissing(f"{run_label(run)}: no example, so no reference answer")
            found = _first_key(field_of(example, "outputs"), self.reference)
            value = None if found is None else find_text(found[1], REFERENCE_KEYS)
            tried = "keys tried: " + ", ".join(self.reference)
        if not isinstance(value, str):
            raise FieldMissing(
                f"{_example_label(example)}: no reference in the example's outputs ({tried}; "
                f"outputs have: {keys_of(field_of(example, 'outputs'))}); "
                "pass reference_key=<output name>"
            )
        return value

    def no_relevance(self, run: Any, example: Any) -> str:
        """Why a run has no relevance labels (appended to ranking metrics' failures)."""
        if callable(self.relevance):
            return f"{run_label(run)}: the relevance_key callable returned None"
        if example is None:
            return f"{run_label(run)}: no example, so no relevance labels"
        return (
            f"{_example_label(example)}: no relevance labels in the example's outputs (keys "
            f"tried: {', '.join(self.relevance)}; outputs have: "
            f"{keys_of(field_of(example, 'outputs'))}); pass relevance_key=<output name>"
        )

    def relevance_of(self, run: Any, example: Any) -> dict[str, int] | None:
        if callable(self.relevance):
            value = _call("relevance_key", self.relevance, run, example)
            where = f"{run_label(run)}: the relevance_key callable"
        else:
            found = _first_key(field_of(example, "outputs"), self.relevance)
            if found is None:
                return None
            value = found[1]
            where = f"{_example_label(example)}: outputs[{found[0]!r}]"
        return None if value is None else _grades(value, where)
