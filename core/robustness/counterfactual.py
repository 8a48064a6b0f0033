"""The wrong fact of RGB's counterfactual condition: where it comes from, and how it is put in.

RGB (Chen et al., 2023) asks whether a RAG system follows its passages when they state a wrong
fact, or notices the conflict with what it knows. The harness gives the pipeline its own clean
passages with the reference answer's key fact replaced (`replace_fact`, through
`ragbridge.core.robustness.perturb.perturb`). A `Counterfactual` comes from one of three places:

* the user: ``sample.metadata["counterfactual"] = {"original": ..., "wrong": ...}``
  (`user_counterfactual`), which wins over the other two;
* the offline rule (`offline_counterfactual`): a number, year or date of the reference that the
  clean passages also state, changed deterministically and plausibly (a year moved by a few, an
  amount scaled, a small count moved by one to three), else a capitalised name of the reference
  the passages state, swapped for a name of the same number of words from another sample
  (preferably the answer to a question of the same kind);
* the judge (`judge_counterfactual`, prompt ``robustness.counterfactual``), whose ``original``
  must occur in a passage.

**Why none could be built.** `offline_counterfactual` and `judge_counterfactual` return None
when they cannot build one; `offline_counterfactual_attempt` and `judge_counterfactual_attempt`
return a `CounterfactualAttempt` instead, whose ``reason`` is a short sentence saying why not
("no number, date or name of the reference is stated in the clean passages", "the judge's
original '1889' is in no passage", ...). The harness skips that question's counterfactual
condition and shows ``reason`` in the summary; nothing is dropped silently.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Literal

from ..prompts.robustness import COUNTERFACTUAL, CounterfactualFact
from ..results.evaluation import Usage
from ..sample import Context, Sample
from ..text.quantities import canonical
from ..text.words import STOPWORDS, normalise, numbers, words
from .seeds import stable_seed

if TYPE_CHECKING:
    from ..judging.engine import JudgeCall, JudgeEngine

__all__ = [
    "Counterfactual",
    "CounterfactualAttempt",
    "CounterfactualSource",
    "judge_counterfactual",
    "judge_counterfactual_attempt",
    "offline_counterfactual",
    "offline_counterfactual_attempt",
    "replace_fact",
    "states_fact",
    "user_counterfactual",
]

CounterfactualSource = Literal["user", "offline", "judge"]


@dataclass(frozen=True)
class Counterfactual:
    """A fact of the passages (``original``, as they write it) and the wrong value that
    replaces it (``wrong``), with where the pair came from."""

    original: str
    wrong: str
    source: CounterfactualSource

    def __post_init__(self) -> None:
        for name in ("original", "wrong"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"counterfactual {name} must be a non-empty string")
        if self.original.strip().casefold() == self.wrong.strip().casefold():
            raise ValueError(f"counterfactual wrong value equals the original {self.original!r}")

    def as_metadata(self) -> dict[str, str]:
        """What the harness stores in a perturbed sample's ``metadata["counterfactual"]``: the
        shape `user_counterfactual` reads and the counterfactual measure scores against."""
        return {"original": self.original, "wrong": self.wrong, "source": self.source}


@dataclass(frozen=True)
class CounterfactualAttempt:
    """The outcome of building a counterfactual: the pair, or None with ``reason`` saying why
    not (when built, ``reason`` says how). ``usage``: the judge call's, when one was made."""

    counterfactual: Counterfactual | None
    reason: str
    usage: Usage | None = None


# --------------------------------------------------------------------------- matching a fact


def _fact_pattern(fact: str) -> re.Pattern[str]:
    """``fact`` as whole words, any case, any run of whitespace between its words; a number
    does not match inside a longer number ("849" is not in "8,849" or "849.5")."""
    parts = [re.escape(p) for p in fact.split()]
    body = r"\s+".join(parts)
    return re.compile(rf"(?<!\w)(?<!\d[.,]){body}(?!\w)(?![.,]\d)", re.IGNORECASE)


def states_fact(text: str, fact: str) -> bool:
    """Whether ``text`` states ``fact`` verbatim: whole words, any case (what `replace_fact`
    replaces, and what a judge's ``original`` must be found as)."""
    return bool(fact.strip()) and _fact_pattern(fact).search(text) is not None


def replace_fact(context: Context, counterfactual: Counterfactual) -> Context:
    """``context`` with every whole-word, case-insensitive occurrence of the original replaced
    by the wrong value; the same object when it does not state it (callers test identity)."""
    pattern = _fact_pattern(counterfactual.original)
    wrong = counterfactual.wrong.strip()
    text, count = pattern.subn(lambda _m: wrong, context.text)
    if count == 0:
        return context
    return context.model_copy(update={"text": text})


# --------------------------------------------------------------------------- from the user


def user_counterfactual(sample: Sample) -> Counterfactual | None:
    """The pair a user wrote in ``sample.metadata["counterfactual"]`` (``{"original": ...,
    "wrong": ...}``; other keys are ignored), None when there is none. A malformed value is a
    ValueError naming the sample and the field (``metadata.counterfactual.wrong``)."""
    raw = sample.metadata.get("counterfactual")
    if raw is None:
        return None
    where = f"sample {sample.id!r}: metadata.counterfactual"
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"{where}: expected an object with 'original' and 'wrong', got {type(raw).__name__}"
        )
    values: dict[str, str] = {}
    for name in ("original", "wrong"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            got = "missing" if value is None else f"got {value!r}"
            raise ValueError(f"{where}.{name}: expected a non-empty string ({got})")
        values[name] = value.strip()
    if values["original"].casefold() == values["wrong"].casefold():
        raise ValueError(f"{where}.wrong: the same as original ({values['original']!r})")
    return Counterfactual(values["original"], values["wrong"], "user")


# --------------------------------------------------------------------------- the offline rule

_DIGITS = re.compile(
    r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\w|[.,]\d)"
)  # 8,849 / 2021 / 3.5, not a piece of a longer number; "28," in "March 28, 1941" is 28
_NAME = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:(?:of|de|van|von|la|le|da|del|the)\s+)?[A-Z][\w'’-]*)*")
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_MONTH_SET = frozenset(m.casefold() for m in _MONTHS)
_DAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday".split()  # noqa: SIM905
)
_OPENERS = frozenset((
    "however", "yes", "according", "although", "because", "therefore", "thus", "today",
    "currently", "approximately", "around", "only", "both", "each", "every", "many", "most",
    "some", "several", "yesterday", "tomorrow",
))  # fmt: skip
_YEAR_DELTAS = (-3, -2, 2, 3, -4, 4, -1, 1, -5, 5)
_SMALL_DELTAS = (1, -1, 2, -2, 3, -3)
_FACTORS = ("1.5", "0.6", "2", "0.75", "1.25", "0.5", "3", "0.4")


def _rng(*parts: object) -> random.Random:
    return random.Random(stable_seed(*parts))


def _number_key(span: str) -> str | None:
    keys = numbers(span)
    return next(iter(keys)) if len(keys) == 1 else None


def _reference_numbers(reference: str, question: str) -> list[str]:
    """The reference's number keys in the order it states them, minus the question's."""
    asked = numbers(question)
    out: list[str] = []
    for match in _DIGITS.finditer(canonical(normalise(reference))):
        key = _number_key(match.group(0))
        if key is not None and key not in asked and key not in out:
            out.append(key)
    return out


def _spans(texts: Iterable[str], key: str) -> list[str]:
    """The written forms of the number ``key`` in ``texts``, most frequent first."""
    counts: dict[str, int] = {}
    for text in texts:
        for match in _DIGITS.finditer(text):
            if _number_key(match.group(0)) == key:
                counts[match.group(0)] = counts.get(match.group(0), 0) + 1
    return sorted(counts, key=lambda s: (-counts[s], s))


def _is_percent(texts: Iterable[str], span: str) -> bool:
    pattern = re.compile(rf"(?<![\w.,]){re.escape(span)}\s*(?:%|per\s*cent|percent)", re.I)
    return any(pattern.search(t) for t in texts)


_MONTH_WORD = "(?:" + "|".join(_MONTHS) + "|" + "|".join(m[:3] for m in _MONTHS) + r")\.?"


def _is_day(texts: Iterable[str], span: str) -> bool:
    """Whether ``span`` is a day of a month somewhere ("March 28", "28th of March"; not the
    year of "June 1961")."""
    if not (span.isdigit() and len(span) <= 2):
        return False
    number = re.escape(span)
    pattern = re.compile(
        rf"\b{_MONTH_WORD}\s+{number}(?!\w|[.,]\d)|(?<![\w.,]){number}(?:st|nd|rd|th)?\s+"
        rf"(?:of\s+)?{_MONTH_WORD}\b",
        re.IGNORECASE,
    )
    return any(pattern.search(t) for t in texts)


def _written(value: Decimal, like: str) -> str:
    """``value`` written as ``like`` is: its decimals, its thousands commas."""
    decimals = len(like.partition(".")[2])
    if decimals:
        return f"{value:,.{decimals}f}" if "," in like else f"{value:.{decimals}f}"
    whole = int(value)
    return f"{whole:,}" if "," in like else str(whole)


def _wrong_numbers(span: str, percent: bool, day: bool, rng: random.Random) -> list[str]:
    """Plausible wrong values for the number written ``span``, in a seeded order: a year
    moved by one to five years, a day of a month or a count up to 12 moved by one to three
    (a day stays in 1..28), anything else scaled (x0.4 to x3) and rounded as coarsely as the
    original (12,000 -> 18,000, 3.5 -> 5.2)."""
    try:
        value = Decimal(span.replace(",", ""))
    except InvalidOperation:
        return []
    integral = "." not in span
    out: list[Decimal] = []
    if integral and day and 1 <= value <= 31:
        deltas = list(_SMALL_DELTAS)
        rng.shuffle(deltas)
        out = [value + d for d in deltas if 1 <= value + d <= 28]
    elif integral and "," not in span and len(span) == 4 and 1000 <= value <= 2100:
        deltas = list(_YEAR_DELTAS)
        rng.shuffle(deltas)
        out = [value + d for d in deltas]
    elif integral and value <= 12:
        deltas = list(_SMALL_DELTAS)
        rng.shuffle(deltas)
        out = [value + d for d in deltas if value + d > 0]
    else:
        digits = span.replace(",", "").partition(".")
        zeros = len(digits[0]) - len(digits[0].rstrip("0")) if integral and value else 0
        step = Decimal(10) ** zeros if integral else Decimal(1).scaleb(-len(digits[2]))
        factors = list(_FACTORS)
        rng.shuffle(factors)
        for factor in factors:
            scaled = (value * Decimal(factor) / step).to_integral_value() * step
            if scaled > 0 and not (percent and scaled > 100):
                out.append(scaled)
    written = [_written(v, span) for v in out if v != value]
    return list(dict.fromkeys(written))


def _number_counterfactual(
    sample: Sample, texts: Sequence[str], reference: str
) -> Counterfactual | None:
    """A number of the reference the passages state, changed; the day of a date only when
    no other number (its year) can be: a wrong year is the fact a reader notices."""
    taken = set().union(*(numbers(t) for t in [*texts, reference, sample.question]))
    found = []
    for key in _reference_numbers(reference, sample.question):
        spans = _spans(texts, key)
        if spans:
            found.append((spans[0], _is_day(texts, spans[0])))
    found.sort(key=lambda item: item[1])  # stable: days last, else the reference's order
    for original, day in found:
        percent = _is_percent([*texts, reference], original)
        rng = _rng("counterfactual-number", sample.id, original)
        for wrong in _wrong_numbers(original, percent, day, rng):
            if _number_key(wrong) not in taken:
                return Counterfactual(original, wrong, "offline")
    return None


@functools.lru_cache(maxsize=1 << 14)
def _names(text: str, *, strict: bool) -> tuple[str, ...]:
    """Capitalised names of ``text`` (runs of capitalised words, "of"/"de"/... inside),
    without a possessive, a leading stop word ("The", "In") or a weekday.

    A single capitalised word opening a sentence may be no name ("However", "Engineers"). In a
    reference it often is the answer ("Paris is ..."), so there only common openers are dropped
    (and the passages must write it capitalised, `_found`); with ``strict`` (names offered by
    other samples, nobody checks them) it is dropped unless it is the whole text ("Tokyo.").
    """
    out: list[str] = []
    text = normalise(text)
    for match in _NAME.finditer(text):
        parts = match.group(0).split()
        lead = len(parts)
        while parts and parts[0].casefold() in STOPWORDS:
            parts = parts[1:]
        while parts and parts[-1].casefold() in STOPWORDS:
            parts = parts[:-1]
        if not parts:
            continue
        parts[-1] = re.sub(r"['’]s$", "", parts[-1])
        if any(len(w) < 2 for w in parts):  # initials, "F.E.A.R." read as "F"
            continue
        name = " ".join(parts)
        if len(parts) == 1:
            before = text[: match.start()].rstrip()
            opening = len(parts) == lead and (not before or before[-1] in ".!?:;\"'(")
            lone = text.strip(" .!?\"'").casefold() == name.casefold()
            if name.casefold() in _DAYS or (
                opening and not lone and (strict or name.casefold() in _OPENERS)
            ):
                continue
        if name and name not in out:
            out.append(name)
    return tuple(out)


def _found(texts: Iterable[str], fact: str, *, capitalised: bool = False) -> str | None:
    """How ``texts`` write ``fact`` (whole words, any case), or None. A name must be written
    ``capitalised`` there: "however" in a passage is not the name "However"."""
    pattern = _fact_pattern(fact)
    for text in texts:
        for match in pattern.finditer(text):
            if not capitalised or match.group(0)[:1].isupper():
                return match.group(0)
    return None


def _asks(question: str) -> str:
    """What kind of answer a question asks for, by its opening: "who", "where", "what
    nationality", "which country" (a name answering the same kind is the plausible swap)."""
    opening = words(question)[:2]
    if opening and opening[0] in ("what", "which") and len(opening) == 2:
        return " ".join(opening)
    return opening[0] if opening else ""


def _name_tiers(sample: Sample, original: str, others: Sequence[Sample]) -> list[list[str]]:
    """Names other samples offer for ``original``, most plausible first: names ending in the
    same word ("Lawrence County" for "Orange County"), then answers to questions of the same
    kind ("who ..."), then any other answer, then names in other samples' passages."""
    kind = _asks(sample.question)
    same_kind: set[str] = set()
    refs: set[str] = set()
    ctxs: set[str] = set()
    for other in others:
        if other.id == sample.id:
            continue
        found = _names(other.reference or "", strict=True)
        refs.update(found)
        if kind and _asks(other.question) == kind:
            same_kind.update(found)
        for context in other.contexts:
            ctxs.update(_names(context.text, strict=True))
    last = original.split()[-1].casefold()
    tail: set[str] = set()
    if len(original.split()) > 1:
        tail = {n for n in refs | ctxs if n.split()[-1].casefold() == last}
    return [sorted(tail), sorted(same_kind), sorted(refs), sorted(ctxs - refs)]


def _name_counterfactual(
    sample: Sample, texts: Sequence[str], reference: str, others: Sequence[Sample]
) -> tuple[Counterfactual | None, str | None]:
    """The reference's longest name the passages state, swapped for another of its shape; or
    None with why not (None, None: the reference names nothing the passages state)."""
    seen = [*texts, reference, sample.question]
    names = [n for n in _names(reference, strict=False) if not states_fact(sample.question, n)]
    names.sort(key=lambda n: -len(n.split()))
    for name in names:
        original = _found(texts, name, capitalised=True)
        if original is None:
            continue
        size = len(original.split())
        rng = _rng("counterfactual-name", sample.id, original)
        if size == 1 and original.casefold() in _MONTH_SET:
            months = [m for m in _MONTHS if m.casefold() != original.casefold()]
            return Counterfactual(original, rng.choice(months), "offline"), None
        for tier in _name_tiers(sample, original, others):
            fits = [
                c
                for c in tier
                if len(c.split()) == size
                and c.casefold() not in _MONTH_SET
                and not any(states_fact(t, c) for t in seen)
            ]
            if fits:
                return Counterfactual(original, rng.choice(fits), "offline"), None
        noun = "word" if size == 1 else "words"
        return None, (
            f"the reference's name {original!r} is in the passages, but no other sample "
            f"offers a name of {size} {noun} to put in its place"
        )
    return None, None


def offline_counterfactual_attempt(
    sample: Sample, clean: Sequence[Context], others: Sequence[Sample]
) -> CounterfactualAttempt:
    """`offline_counterfactual` with the reason: why none could be built, or what was built."""
    reference = (sample.reference or "").strip()
    if not reference:
        return CounterfactualAttempt(None, "no reference answer to take the fact from")
    texts = [c.text for c in clean if c.text.strip()]
    if not texts:
        return CounterfactualAttempt(None, "the clean run retrieved no passage to change")
    built = _number_counterfactual(sample, texts, reference)
    why: str | None = None
    if built is None:
        built, why = _name_counterfactual(sample, texts, reference, others)
    if built is None:
        return CounterfactualAttempt(
            None,
            why or "no number, date or name of the reference is stated in the clean passages",
        )
    return CounterfactualAttempt(built, f"offline: {built.original!r} -> {built.wrong!r}")


def offline_counterfactual(
    sample: Sample, clean: Sequence[Context], others: Sequence[Sample]
) -> Counterfactual | None:
    """The reference's key fact as the clean passages write it, and a same-shaped wrong value;
    None when none can be built (`offline_counterfactual_attempt` says why: the harness skips
    the question's counterfactual condition with that reason).

    The fact is, in this order: a number of the reference (digits; a year, a count, an amount,
    the year of a date) that the question does not contain and a passage states, in its most
    frequent written form; else the longest capitalised name of the reference (not one of the
    question's) that a passage states. The wrong value: a year moved by 1 to 5, a day of a
    month (within 1..28) or a count up to 12 moved by 1 to 3, another number scaled (x0.4 to
    x3) and rounded as coarsely as the original, keeping its commas and decimals (a
    percentage stays at most 100); for a name, a
    name of the same number of words that other samples offer, most plausible first (one
    ending in the same word, "Dutchess County" for "Lawrence County"; an answer to a question
    of the same kind, "who ..." for "who ..."; any other answer; a name in their passages), a
    month for a month. Never a value the passages, the reference or the question already
    state. Deterministic: every choice is seeded by a stable hash of the sample id and the
    fact; ``others`` are the other clean samples (order does not matter).
    """
    return offline_counterfactual_attempt(sample, clean, others).counterfactual


# --------------------------------------------------------------------------- from the judge


async def judge_counterfactual_attempt(
    engine: JudgeEngine, sample: Sample, clean: Sequence[Context]
) -> CounterfactualAttempt:
    """`judge_counterfactual` with the reason and the call's usage."""
    reference = (sample.reference or "").strip()
    if not reference:
        return CounterfactualAttempt(None, "no reference answer to take the fact from")
    texts = [c.text for c in clean if c.text.strip()]
    if not texts:
        return CounterfactualAttempt(None, "the clean run retrieved no passage to change")
    call: JudgeCall[Any] = await COUNTERFACTUAL.ask(
        engine, question=sample.question, reference=reference, contexts=texts
    )
    usage = call.usage
    reply = call.value
    if not isinstance(reply, CounterfactualFact):
        message = call.failure.message if call.failure is not None else "no reply"
        return CounterfactualAttempt(None, f"the judge gave no counterfactual: {message}", usage)
    original, wrong = reply.original.strip(), reply.wrong.strip()
    if not original:
        return CounterfactualAttempt(
            None, "the judge found no passage stating the reference's fact", usage
        )
    written = _found(texts, original)  # as the passage writes it
    if written is None:
        return CounterfactualAttempt(
            None, f"the judge's original {original!r} is in no passage", usage
        )
    if not wrong or wrong.casefold() == original.casefold():
        return CounterfactualAttempt(
            None, f"the judge gave no wrong value different from {original!r}", usage
        )
    built = Counterfactual(written, wrong, "judge")
    return CounterfactualAttempt(built, f"judge: {written!r} -> {wrong!r}", usage)


async def judge_counterfactual(
    engine: JudgeEngine, sample: Sample, clean: Sequence[Context]
) -> Counterfactual | None:
    """The judge's counterfactual for ``sample`` (one ``robustness.counterfactual`` call through
    ``engine``: cached, retried, budgeted like every call), from its question, reference and
    clean passages. None when the sample has no reference or passages, the call fails, the
    judge finds no fact, its ``original`` is not in any passage verbatim (whole words, any
    case: the harness could not replace it), or its ``wrong`` is empty or the same;
    `judge_counterfactual_attempt` says which."""
    return (await judge_counterfactual_attempt(engine, sample, clean)).counterfactual
