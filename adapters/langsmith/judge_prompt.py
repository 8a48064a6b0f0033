"""An openevals prompt read as a ragbridge criterion: what it asks, and which fields it shows.

Why a module of its own: `ragbridge.adapters.langsmith.criteria` is about the evaluator (judge,
call convention, result); this is the translation of openevals' ``create_llm_as_judge``
arguments into a `Criterion` or an `Aspect`, which can be read and tested without a judge.

openevals formats its prompt with ``str.format`` and sends it as the instructions. Here the
prompt *describes* the criterion and is data: it goes into the criterion's block of ragbridge's
own prompt (`ragbridge.core.prompts.criteria`), which a criterion cannot rewrite. Each
placeholder becomes a field the criterion reads, and in the criterion's text a pointer to the
block that holds it:

====================================  ===========================  ==========================
openevals placeholder                 ragbridge field (``reads``)  block the judge sees
====================================  ===========================  ==========================
``{inputs}``                          ``question``                 QUESTION
``{outputs}``                         ``answer``                   ANSWER
``{reference_outputs}``               ``reference``                REFERENCE
``{context}``                         ``contexts``                 CONTEXT 1..n
any other ``{name}`` (a keyword)      ``metadata.name``            METADATA name
====================================  ===========================  ==========================

The kind of criterion follows openevals' score type: ``continuous=False`` (a boolean score) is
an `Aspect`; ``continuous=True`` (a float in [0, 1]) a scored `Criterion` on an integer scale
(0..10 unless ``scale`` says otherwise) normalised to [0, 1]; ``choices`` (the score must be one
of these numbers) a scored `Criterion` whose levels are the choices (`Choices`). ``system``
and ``few_shot_examples`` join the criterion's text, as data too.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbridge.core.criteria import Aspect, Criterion

__all__ = [
    "ARGUMENT_OF",
    "CONTINUOUS_SCALE",
    "PLACEHOLDER_FIELDS",
    "Choices",
    "JudgePrompt",
    "criterion_name",
    "read_prompt",
]

PLACEHOLDER_FIELDS: Mapping[str, str] = {
    "inputs": "question",
    "outputs": "answer",
    "reference_outputs": "reference",
    "context": "contexts",
}
"""openevals' placeholders → the ragbridge field each one shows."""

ARGUMENT_OF: Mapping[str, str] = {field: arg for arg, field in PLACEHOLDER_FIELDS.items()}
"""A ragbridge field → the evaluator's keyword argument that gives it."""

CONTINUOUS_SCALE = (0, 10)
"""The integer scale of ``continuous=True``: openevals asks for a float in [0, 1]; judges are
steadier on integers, and 0..10 keeps tenths (``raw / 10``). With log-probabilities the score
is G-Eval's weighted mean, so it is not limited to tenths."""

_BLOCK_OF = {
    "question": "the QUESTION block",
    "answer": "the ANSWER block",
    "reference": "the REFERENCE block",
    "contexts": "the CONTEXT blocks",
}
_METADATA_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def criterion_name(feedback_key: str) -> str:
    """A criterion name for ``feedback_key`` (names are ``[A-Za-z][A-Za-z0-9_]*``): the key
    itself when it is one, else its letters and digits joined by ``_``."""
    if not isinstance(feedback_key, str) or not feedback_key:
        raise ValueError(f"feedback_key must be non-empty text, got {feedback_key!r}")
    name = re.sub(r"[^A-Za-z0-9_]+", "_", feedback_key).strip("_")
    if not name or not name[0].isalpha():
        name = f"judge_{name}".rstrip("_")
    return name


@dataclass(frozen=True)
class Choices:
    """openevals' ``choices`` as a scale: level ``low + i`` stands for the i-th smallest choice.

    Consecutive integers (``[1, 2, 3, 4, 5]``) are their own levels; any other numbers
    (``[0.0, 0.5, 1.0]``) are numbered from 0, and the criterion's text says which level means
    which number. The evaluator returns the number the level stands for (a probability-weighted
    level is rounded to the nearest one first), as openevals returns one of the choices.
    """

    values: tuple[float, ...]

    @classmethod
    def of(cls, choices: Sequence[float]) -> Choices:
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            raise TypeError(f"choices must be a list of numbers, got {choices!r}")
        values: list[float] = []
        for c in choices:
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
                raise ValueError(f"choices must be finite numbers, got {c!r}")
            values.append(c)
        ordered = tuple(sorted(set(values)))
        if len(ordered) < 2:
            raise ValueError(f"choices must hold at least two different numbers, got {choices!r}")
        return cls(ordered)

    @property
    def integers(self) -> bool:
        """Whether the choices are consecutive integers (then they are the levels)."""
        first = self.values[0]
        return all(float(v).is_integer() for v in self.values) and list(self.values) == list(
            range(int(first), int(first) + len(self.values))
        )

    @property
    def scale(self) -> tuple[int, int]:
        if self.integers:
            return (int(self.values[0]), int(self.values[-1]))
        return (0, len(self.values) - 1)

    def value_at(self, raw: float) -> float:
        """The choice a (possibly weighted) level stands for: the nearest level's."""
        low, high = self.scale
        index = min(max(round(raw) - low, 0), high - low)
        return self.values[index]

    def level_of(self, value: float) -> int:
        """The level whose choice is nearest ``value`` (a few-shot example's score)."""
        nearest = min(range(len(self.values)), key=lambda i: abs(self.values[i] - value))
        return self.scale[0] + nearest

    def legend(self) -> str:
        if self.integers:
            return ""
        pairs = ", ".join(f"{self.scale[0] + i} = {_number(v)}" for i, v in enumerate(self.values))
        return f"The score's levels stand for these values: {pairs}."


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class JudgePrompt:
    """What an openevals prompt asks: the criterion built from it, the placeholder behind each
    field it reads, and the ``choices`` scale when there is one."""

    spec: Aspect | Criterion
    placeholders: Mapping[str, str]
    """ragbridge field (``answer``, ``metadata.policy``) → the placeholder that names it."""
    choices: Choices | None = None

    @property
    def metadata_keys(self) -> tuple[str, ...]:
        """The keyword arguments the prompt names besides inputs/outputs/reference/context."""
        return tuple(f.partition(".")[2] for f in self.spec.reads if f.startswith("metadata."))


def _fields(prompt: str) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    """The prompt's pieces (literal text, placeholder or None) and field → placeholder."""
    try:
        parsed = list(string.Formatter().parse(prompt))
    except ValueError as exc:
        raise ValueError(
            f"prompt: not a str.format template ({exc}); write {{{{ for a brace"
        ) from None
    pieces: list[tuple[str, str | None]] = []
    named: dict[str, str] = {}
    for literal, field, _spec, _conversion in parsed:
        if field is None:
            pieces.append((literal, None))
            continue
        if field == "attachments":
            raise ValueError(
                "prompt: {attachments} (images, audio, files) is not judged by ragbridge "
                "criteria, which read text; keep openevals for multimodal prompts"
            )
        if not field or not _METADATA_KEY.fullmatch(field):
            raise ValueError(
                f"prompt: placeholder {{{field}}} is not a plain name; use {{inputs}}, "
                "{outputs}, {reference_outputs}, {context} or {your_keyword}"
            )
        ours = PLACEHOLDER_FIELDS.get(field, f"metadata.{field}")
        named[ours] = field
        pieces.append((literal, ours))
    if not named:
        raise ValueError(
            "prompt: it names no placeholder ({inputs}, {outputs}, {reference_outputs}, "
            "{context} or a keyword), so the judge would see nothing of the run"
        )
    return pieces, named


def _pointer(field: str) -> str:
    shown = _BLOCK_OF.get(field)
    if shown is None:
        shown = f"the METADATA {field.partition('.')[2]} block"
    return f"[{shown}]"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _example_score(score: Any, *, continuous: bool, choices: Choices | None) -> str:
    if choices is not None and isinstance(score, (int, float)) and not isinstance(score, bool):
        return str(choices.level_of(float(score)))
    if continuous and isinstance(score, (int, float)) and not isinstance(score, bool):
        low, high = CONTINUOUS_SCALE
        return str(round(low + min(max(float(score), 0.0), 1.0) * (high - low)))
    if isinstance(score, bool):
        return "meets it" if score else "does not meet it"
    return _shown(score)


def _examples(
    examples: Sequence[Mapping[str, Any]], *, continuous: bool, choices: Choices | None
) -> str:
    """Few-shot examples as text of the criterion (data, like the rest of it)."""
    lines = ["Examples of judged data:"]
    for i, example in enumerate(examples, start=1):
        if not isinstance(example, Mapping) or "inputs" not in example or "outputs" not in example:
            raise ValueError(
                f"few_shot_examples[{i - 1}] must be a dict with 'inputs' and 'outputs' (and "
                "'score', 'reasoning'), as openevals takes them"
            )
        lines.append(f"Example {i}. Input: {_shown(example['inputs'])}")
        lines.append(f"Output: {_shown(example['outputs'])}")
        if example.get("reasoning") is not None:
            lines.append(f"Reasoning: {_shown(example['reasoning'])}")
        if "score" in example:
            score = _example_score(example["score"], continuous=continuous, choices=choices)
            lines.append(f"Judgement: {score}")
    return "\n".join(lines)


def read_prompt(
    prompt: str,
    *,
    name: str,
    system: str | None = None,
    continuous: bool = False,
    choices: Sequence[float] | None = None,
    few_shot_examples: Sequence[Mapping[str, Any]] | None = None,
    scale: tuple[int, int] | None = None,
    evaluation_steps: Sequence[str] | None = None,
) -> JudgePrompt:
    """The criterion an openevals prompt describes (see the module doc); ValueError naming the
    argument when the prompt cannot be one."""
    if not isinstance(prompt, str):
        raise TypeError(
            f"prompt must be a str.format template, got {type(prompt).__name__}: ragbridge "
            "reads the prompt as the criterion's text (a LangChain prompt template or a "
            "function returning messages has no text to read); pass the template's text"
        )
    pieces, named = _fields(prompt)
    body = "".join(literal + ("" if f is None else _pointer(f)) for literal, f in pieces)
    parts = [system.strip()] if system and system.strip() else []
    parts.append(body.strip())
    picked = None if choices is None else Choices.of(choices)
    if picked is not None and picked.legend():
        parts.append(picked.legend())
    if few_shot_examples:
        parts.append(_examples(few_shot_examples, continuous=continuous, choices=picked))
    text = "\n\n".join(p for p in parts if p)
    reads = tuple(named)
    spec: Aspect | Criterion
    if picked is None and not continuous:
        if scale is not None or evaluation_steps is not None:
            raise ValueError(
                "scale= and evaluation_steps= are for a scored criterion (continuous=True or "
                "choices=...); a boolean judge has neither"
            )
        spec = Aspect(name=name, definition=text, reads=reads)
    else:
        if picked is not None and scale is not None:
            raise ValueError("pass choices= or scale=, not both: the choices are the scale")
        levels = picked.scale if picked is not None else (scale or CONTINUOUS_SCALE)
        spec = Criterion(
            name=name,
            criteria=text,
            evaluation_steps=None if evaluation_steps is None else tuple(evaluation_steps),
            reads=reads,
            scale=levels,
        )
    return JudgePrompt(spec=spec, placeholders=named, choices=picked)
