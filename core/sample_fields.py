"""One mapping between a framework's record fields and a `Sample`, both ways.

Why one: RAGAS rows, DeepEval test cases and LangSmith runs each carry a question, an answer,
retrieved passages and a reference under their own names. Each sink used to read them with its
own hand-written mapper, and each checked types, merged ids and wrote errors in its own way. Here
a framework says only what it calls each field (`FieldNames`); reading, checking and the error
text ("where: field: problem", in the framework's own field names, as `load_samples` words a bad
JSONL line) are shared, and so is the way back (`fields_of`).

What a framework has no field for — the sample id, each context's id, score and metadata, the
graded ``relevance``, the sample's ``metadata`` — rides along as *extras* (`extras_of`), a JSON
object the adapter stores where its framework keeps free-form data (a ``ragbridge`` column or
metadata key). `sample_from_fields` takes the extras back, so a Sample that goes out to a framework
and comes back is the same Sample.

What stays in an adapter: its framework's quirks before the values are plain (DeepEval's
``RetrievedContextData``, RAGAS's legacy column names, LangSmith's search through nested
inputs), and where its extras are stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .sample import Sample, validation_problems

__all__ = [
    "DEEPEVAL_FIELDS",
    "RAGAS_FIELDS",
    "FieldError",
    "FieldNames",
    "build_sample",
    "extras_of",
    "fields_of",
    "sample_from_fields",
]


@dataclass(frozen=True)
class FieldNames:
    """A framework's name for each `Sample` field; None where the framework has no such field.

    ``context_ids`` holds one id per retrieved context (RAGAS's ``retrieved_context_ids``);
    ``relevant_ids`` the ids of the relevant documents, read as relevance grade 1 when the
    extras carry no graded ``relevance`` (RAGAS's ``reference_context_ids``).
    """

    question: str
    answer: str | None
    contexts: str
    reference: str | None
    reference_contexts: str | None
    context_ids: str | None = None
    relevant_ids: str | None = None

    def names(self) -> tuple[str, ...]:
        """Every field name this framework uses, in `Sample` order."""
        fields = (
            self.question,
            self.contexts,
            self.context_ids,
            self.reference_contexts,
            self.relevant_ids,
            self.answer,
            self.reference,
        )
        return tuple(name for name in fields if name is not None)


RAGAS_FIELDS = FieldNames(
    question="user_input",
    answer="response",
    contexts="retrieved_contexts",
    reference="reference",
    reference_contexts="reference_contexts",
    context_ids="retrieved_context_ids",
    relevant_ids="reference_context_ids",
)
"""RAGAS's ``SingleTurnSample`` fields."""

DEEPEVAL_FIELDS = FieldNames(
    question="input",
    answer="actual_output",
    contexts="retrieval_context",
    reference="expected_output",
    reference_contexts="context",
)
"""DeepEval's ``LLMTestCase`` / ``Golden`` fields."""


class FieldError(ValueError):
    """A record's field cannot become part of a Sample: ``where: field: problem``."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        self.where = where
        self.field = field
        self.problem = problem
        super().__init__(f"{where}: {field}: {problem}" if where else f"{field}: {problem}")


# --------------------------------------------------------------------------- Sample -> fields


def extras_of(sample: Sample) -> dict[str, Any]:
    """What no framework field holds: the id, each context's id/score/metadata, the graded
    ``relevance`` and ``metadata``. Plain JSON data."""
    return {
        "id": sample.id,
        "contexts": [
            {"id": c.id, "score": c.score, "metadata": dict(c.metadata)} for c in sample.contexts
        ],
        "relevance": None if sample.relevance is None else dict(sample.relevance),
        "metadata": dict(sample.metadata),
    }


def fields_of(sample: Sample, names: FieldNames) -> dict[str, Any]:
    """``sample`` in a framework's field names, None where a field is absent.

    Context ids go out only when every context has one (a partial list would not line up);
    relevant ids are the labelled ids with a grade above 0.
    """
    if not isinstance(sample, Sample):
        raise TypeError(f"expected a ragbridge Sample, got {type(sample).__name__}")
    out: dict[str, Any] = {
        names.question: sample.question,
        names.contexts: [c.text for c in sample.contexts],
    }
    if names.answer is not None:
        out[names.answer] = sample.answer
    if names.reference is not None:
        out[names.reference] = sample.reference
    if names.reference_contexts is not None:
        refs = sample.reference_contexts
        out[names.reference_contexts] = None if refs is None else list(refs)
    if names.context_ids is not None:
        ids = [c.id for c in sample.contexts]
        out[names.context_ids] = ids if ids and all(i is not None for i in ids) else None
    if names.relevant_ids is not None:
        graded = sample.relevance
        out[names.relevant_ids] = (
            None if graded is None else [doc for doc, grade in graded.items() if grade > 0]
        )
    return out


# --------------------------------------------------------------------------- fields -> Sample


def sample_from_fields(
    values: Mapping[str, Any],
    names: FieldNames,
    *,
    where: str,
    default_id: str,
    extras: Mapping[str, Any] | None = None,
    extras_name: str = "ragbridge",
    metadata: Mapping[str, Any] | None = None,
) -> Sample:
    """The `Sample` a framework record describes, its values read by the framework's names.

    ``extras`` (from `extras_of`, stored under ``extras_name``) restore what the framework cannot
    hold; ``metadata`` is the record's own free-form metadata, under the extras' ``metadata``.
    Raises `FieldError` naming ``where`` and the framework's field for the first bad value.
    """
    read = _Reader(values, where)
    extra = _Extras(extras, where, extras_name)
    texts = read.texts(names.contexts) or []
    ids = read.ids(names.context_ids, len(texts))
    return build_sample(
        where=where,
        id=extra.value("id", default_id),
        question=read.text(names.question, required=True),
        answer=read.text(names.answer),
        contexts=extra.contexts(texts, ids, names.context_ids),
        reference=read.text(names.reference),
        reference_contexts=read.texts(names.reference_contexts),
        relevance=extra.relevance(read.relevant(names.relevant_ids)),
        metadata={**(metadata or {}), **extra.metadata()},
    )


def build_sample(*, where: str, **fields: Any) -> Sample:
    """``Sample(**fields)``, with a validation error turned into one `FieldError` line."""
    try:
        return Sample.model_validate(fields)
    except ValidationError as exc:
        problem = validation_problems(exc)[0]
        field, _, text = problem.partition(": ")
        raise FieldError(where, field, text or problem) from None


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text[:60] + "…" if len(text) > 60 else text


class _Reader:
    """Typed reads of one record's values, each failing with the record and the field named."""

    def __init__(self, values: Mapping[str, Any], where: str) -> None:
        self.values = values
        self.where = where

    def bad(self, field: str, problem: str) -> FieldError:
        return FieldError(self.where, field, problem)

    def text(self, name: str | None, *, required: bool = False) -> Any:
        value = None if name is None else self.values.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            assert name is not None
            raise self.bad(name, f"expected a string, got {_shown(value)}")
        return value

    def texts(self, name: str | None) -> list[str] | None:
        value = None if name is None else self.values.get(name)
        if value is None:
            return None
        assert name is not None
        if not isinstance(value, (list, tuple)):
            raise self.bad(name, f"expected a list of strings, got {_shown(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.bad(f"{name}[{i}]", f"expected a string, got {_shown(item)}")
        return list(value)

    def ids(self, name: str | None, count: int) -> list[Any] | None:
        value = None if name is None else self.values.get(name)
        if value is None:
            return None
        assert name is not None
        if not isinstance(value, (list, tuple)) or len(value) != count:
            raise self.bad(
                name, f"expected one id per retrieved context ({count}), got {_shown(value)}"
            )
        return list(value)

    def relevant(self, name: str | None) -> dict[str, int] | None:
        value = None if name is None else self.values.get(name)
        if value is None:
            return None
        assert name is not None
        if not isinstance(value, (list, tuple)):
            raise self.bad(name, f"expected a list of ids, got {_shown(value)}")
        return {str(doc): 1 for doc in value}


class _Extras:
    """The extras object of one record, checked as it is read."""

    def __init__(self, extras: Mapping[str, Any] | None, where: str, name: str) -> None:
        if extras is not None and not isinstance(extras, Mapping):
            raise FieldError(where, name, f"expected an object, got {_shown(extras)}")
        self.extras = extras
        self.where = where
        self.name = name

    def value(self, key: str, default: Any) -> Any:
        if self.extras is None or self.extras.get(key) is None:
            return default
        return self.extras[key]

    def contexts(
        self, texts: Sequence[str], ids: Sequence[Any] | None, ids_name: str | None
    ) -> list[dict[str, Any]]:
        items = self._context_extras(len(texts))
        contexts: list[dict[str, Any]] = []
        for i, text in enumerate(texts):
            ctx: dict[str, Any] = {"text": text}
            if items is not None:
                ctx.update({k: v for k, v in items[i].items() if k != "text" and v is not None})
            if ids is not None:
                if "id" in ctx and str(ctx["id"]) != str(ids[i]):
                    raise FieldError(
                        self.where,
                        f"{ids_name}[{i}]",
                        f"{ids[i]!r} disagrees with {self.name}.contexts[{i}].id {ctx['id']!r}",
                    )
                ctx["id"] = ids[i]
            contexts.append(ctx)
        return contexts

    def _context_extras(self, count: int) -> list[Mapping[str, Any]] | None:
        items = None if self.extras is None else self.extras.get("contexts")
        if items is None:
            return None
        field = f"{self.name}.contexts"
        if not isinstance(items, list) or len(items) != count:
            got = len(items) if isinstance(items, list) else _shown(items)
            raise FieldError(
                self.where,
                field,
                f"expected one entry per retrieved context ({count}), got {got}; "
                "were the contexts edited after conversion?",
            )
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise FieldError(self.where, f"{field}[{i}]", "expected an object")
        return items

    def relevance(self, fallback: dict[str, int] | None) -> Any:
        if self.extras is not None and "relevance" in self.extras:
            return self.extras["relevance"]
        return fallback

    def metadata(self) -> dict[str, Any]:
        inner = None if self.extras is None else self.extras.get("metadata")
        if inner is None:
            return {}
        if not isinstance(inner, Mapping):
            raise FieldError(self.where, f"{self.name}.metadata", "expected an object")
        return dict(inner)
