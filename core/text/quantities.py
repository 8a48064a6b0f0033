"""Numbers, units and dates in one written form, so that two ways of writing a quantity meet.

Why: the offline claim check (`ragbridge.core.metrics.providers.offline.matching`) compares a
claim's numbers and terms with the contexts' and embeds both. "8,849 metres", "8849 m",
"8 849 m" and "8849.0 meters" state one fact and must become the same tokens; "8,849" and
"8,848" must stay two (that difference is how the offline check catches a counterfactual).
`canonical` rewrites the written form only, the same way on both sides: no unit is converted
(5 km is not read as 5,000 m), nothing is rounded, and a text without digits or number words is
returned unchanged (but for US spellings of metre and litre).

The rules:

* **ISO dates** ``2021-03-14`` (and ``2021/03/14``) become ``14 March 2021``. Dates written
  with slashes in another order (``14/03/2021``, ``03/14/2021``) are left alone: day-first and
  month-first cannot be told apart.
* **Digit groups**: commas between groups of three (``8,849``, ``1,500,000``) and spaces between
  them (``8 849``; no-break and thin spaces too) are dropped. A comma followed by exactly three
  digits is always a thousands separator, so ``3,141`` is 3141 (the English reading);
  followed by one or two digits and nothing more it is a decimal comma: ``3,5`` is 3.5 and
  ``0,75`` is 0.75. A dot is always a decimal point (``1.234`` stays 1.234: the European
  ``1.234,5`` is not read). A space joins only a group of one to three digits and groups of
  exactly three, so ``2019 500`` stays two numbers and ``5 200`` reads as 5200.
* **Number words**: ``zero`` to ``ninety-nine``, ``hundred``, ``thousand``, ``million``,
  ``billion``, ``a dozen``, in any well-formed run ("two hundred and fifty", "twenty-one",
  "a thousand") become digits; ``three-year`` becomes ``3-year``. A lone ``one`` or ``two``
  stays a word, as the stop words they are ("one of the best", "the two bands": mostly no
  quantity the context must repeat); in "one hundred" or "twenty-two" they are read.
  `lone_counts` gives their digits, for a context to support a claim's "2 minutes" with
  "two minutes".
* **Scale words after digits**: ``1.5 million`` is 1500000, ``3 thousand`` 3000, and after a
  currency sign ``$5m`` / ``£2bn`` / ``€50k`` are millions, billions and thousands.
* **Ordinals**: ``fourth`` to ``ninety-ninth`` become ``4th`` .. ``99th``; ``1st``, ``2nd``,
  ``3rd`` become ``first``, ``second``, ``third`` (those words are mostly not about counting:
  "first released", "a second time"), so each ordinal has one written form.
* **Dates with a month name**: ``March 14, 2021``, ``March 14th 2021``, ``14th of March, 2021``,
  ``Mar. 14 2021`` all become ``14 March 2021``; without a year ``14 March``.
* **Year ranges**: ``2007-11`` (also with ``--``, an en dash or ``/``) becomes ``2007-2011``
  when the second part is later than the first's last two digits and no month follows
  ("1912 - 16 August" is a date). ``2021-03`` stays: 03 is not later than 21.
* **Percentages**: ``94 percent``, ``94 per cent``, ``94 pct`` and ``94 %`` become ``94%``.
* **Units** after a number: symbols, spellings and plurals become one word, British spelling
  (``m``, ``meter``, ``metres`` -> ``metres``; ``km``, ``kilometers`` -> ``kilometres``; ``kg``;
  ``g``; ``lb``; ``ft``/``foot`` -> ``feet``; ``mi``; ``s``/``sec`` -> ``seconds``; ``min``;
  ``h``/``hr``; ``°C`` -> ``degrees celsius``; ``km/h``, ``mph``, ``km²`` ...). ``8849-metre``
  becomes ``8849 metres``. The US spellings meter/kilometer/liter are made British anywhere.
* **Decimals**: a fraction of only zeros is dropped (``8849.0`` is 8849); other fractions are
  kept as written (``3.10`` stays 3.10: a version number is not 3.1).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation

from .case_blind import CaseBlind

__all__ = ["canonical", "lone_counts"]

_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTH_OF = {name: name for name in _MONTHS}
_MONTH_OF.update(
    {"jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june",
     "jul": "july", "aug": "august", "sep": "september", "sept": "september",
     "oct": "october", "nov": "november", "dec": "december"}
)  # fmt: skip
_MONTH = r"(?:" + "|".join(sorted(_MONTH_OF, key=len, reverse=True)) + r")\b\.?"

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
_ORDINAL_SMALL = {
    "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
    "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
}  # fmt: skip
_ORDINAL_TENS = {
    "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60,
    "seventieth": 70, "eightieth": 80, "ninetieth": 90,
}  # fmt: skip
_ORDINAL_UNITS = {"first": 1, "second": 2, "third": 3}
_ORDINAL_UNITS.update({k: v for k, v in _ORDINAL_SMALL.items() if v < 10})
_FIRST_THREE = {1: "first", 2: "second", 3: "third"}

_NUMBER_WORD = sorted([*_SMALL, *_TENS, *_SCALES, "hundred", "dozen"], key=len, reverse=True)
_RUN = CaseBlind(
    r"\b(?:an?\s+(?=(?:hundred|thousand|million|billion|dozen)\b))?"
    rf"(?:{'|'.join(_NUMBER_WORD)})"
    rf"(?:(?:\s+and\s+|\s+|-)(?:{'|'.join(_NUMBER_WORD)}))*\b"
)
_ORDINAL_WORDS = (*_ORDINAL_SMALL, *_ORDINAL_TENS, *_ORDINAL_UNITS)
_ORDINAL_WORD = CaseBlind(rf"\b(?:({'|'.join(_TENS)})-)?({'|'.join(_ORDINAL_WORDS)})\b")


def _key(word: str) -> str:
    """The lower-case ASCII key of a ``word`` that a case-blind pattern matched, by the same
    rule as the match: Python's IGNORECASE also lets "ſ" (long s) match "s" and "ı" (dotless i)
    match "i", which ``.lower()`` leaves as they are, so "ſeptember" matched the month pattern
    and then missed the table. A non-ASCII letter becomes the ASCII letter the regex engine
    itself holds it equal to (rare: such words only)."""
    lower = word.lower()
    if lower.isascii():
        return lower
    return "".join(_ascii_twin(ch) for ch in word).lower()


@functools.lru_cache(maxsize=256)
def _ascii_twin(ch: str) -> str:
    """The ASCII letter that ``ch`` matches case-blindly (asked of `re` itself), else ``ch``."""
    if ch.isascii():
        return ch
    for letter in "abcdefghijklmnopqrstuvwxyz":
        if re.fullmatch(letter, ch, re.IGNORECASE):
            return letter
    return ch


def _ordinal(n: int) -> str:
    """The one written form of the ordinal ``n``: first/second/third, else 4th, 21st, 112th."""
    if n in _FIRST_THREE:
        return _FIRST_THREE[n]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# --------------------------------------------------------------------------- number words


def _read_number(words: list[str], start: int) -> tuple[int, int]:
    """(value, end) of the longest well-formed number read from ``words[start:]``; ``end ==
    start`` when none starts there. "one two" is two numbers, "two hundred fifty" one."""
    total = 0
    current = 0
    last = ""  # what was read last: "", a, unit, teen, tens, hundred, scale
    smaller_than = 10**12  # scales must fall: "two million three thousand"
    end = start
    for i in range(start, len(words)):
        w = words[i].lower()
        if w in ("a", "an"):
            if i != start:
                break
            current, last = 1, "a"
            continue
        if w in _SMALL:
            v = _SMALL[w]
            if v == 0 and last:
                break
            if 1 <= v <= 9 and last in ("", "tens", "hundred", "scale"):
                last = "unit"
            elif (v == 0 or v >= 10) and last in ("", "hundred", "scale"):
                last = "teen"
            else:
                break
            current += v
        elif w in _TENS:
            if last not in ("", "hundred", "scale"):
                break
            current += _TENS[w]
            last = "tens"
        elif w == "hundred":
            if last not in ("a", "unit", "teen") or current >= 100:
                break
            current *= 100
            last = "hundred"
        elif w in _SCALES:
            scale = _SCALES[w]
            if last not in ("a", "unit", "teen", "tens", "hundred") or scale >= smaller_than:
                break
            total += current * scale
            current, last, smaller_than = 0, "scale", scale
        elif w == "dozen":
            if last not in ("a", "unit"):
                break
            return total + current * 12, i + 1
        else:
            break
        end = i + 1
    return (total + current, end) if end > start else (0, start)


_LONE = {"one": "1", "two": "2"}
_LONE_WORD = re.compile(r"\b(one|two)\b", re.IGNORECASE)


@functools.lru_cache(maxsize=1 << 16)
def lone_counts(text: str) -> frozenset[str]:
    """The digits of the lone "one" and "two" that `canonical` leaves as words in ``text``.

    For the supporting side only: a context's "two minutes" supports a claim's "2 minutes",
    while a claim's "the two bands" asks nothing of the contexts, as before."""
    return frozenset(_LONE[m.group(1).lower()] for m in _LONE_WORD.finditer(canonical(text)))


_SEPARATOR = re.compile(r"(\s+and\s+|\s+|-)")


def _number_words(text: str) -> str:
    """``text`` with its runs of number words written in digits ("two hundred and fifty" ->
    "250", "twenty-one" -> "21", "a dozen" -> "12", "three-year" -> "3-year"); a lone "one" or
    "two" stays a word."""

    def swap(match: re.Match[str]) -> str:
        parts = _SEPARATOR.split(match.group(0))
        words, seps = parts[0::2], parts[1::2]
        out: list[str] = []
        i = 0
        while i < len(words):
            value, j = _read_number(words, i)
            if j == i or (j == i + 1 and words[i].lower() in _LONE):
                out.append(words[i])  # a word that starts no number, or a lone one / two
                j = i + 1
            else:
                out.append(str(value))
            if j < len(words):
                out.append(seps[j - 1])
            i = j
        return "".join(out)

    return _RUN.sub(swap, text)


def _ordinal_words(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        tens, unit = match.group(1), _key(match.group(2))
        if tens is None:
            if unit in _ORDINAL_UNITS and unit not in _ORDINAL_SMALL:
                return match.group(0)  # first / second / third: their own written form
            n = _ORDINAL_SMALL.get(unit) or _ORDINAL_TENS[unit]
            return _ordinal(n)
        if unit not in _ORDINAL_UNITS:
            return match.group(0)  # "twenty-tenth" is no number
        return _ordinal(_TENS[_key(tens)] + _ORDINAL_UNITS[unit])

    return _ORDINAL_WORD.sub(swap, text)


# --------------------------------------------------------------------------- digits

_ISO_DATE = re.compile(r"(?<![\w./-])(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?![\w/]|[-.]\d)")
_THOUSANDS_COMMA = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d])(?!,\d)")
_DECIMAL_COMMA = re.compile(r"(?<![\w.,])(\d{1,3}),(\d{1,2})(?![\d,])")
_THOUSANDS_SPACE = re.compile(
    r"(?<![\w.,])(?<!\d )\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?![\d]|[.,]\d)"
)
_SCALE_AFTER = re.compile(
    r"(?<![\w.,])(\d+(?:\.\d+)?)(?:\s+|-)(thousand|million|billion|trillion|bn)\b", re.IGNORECASE
)
_CURRENCY_SCALE = re.compile(r"([$£€¥])\s?(\d+(?:\.\d+)?)\s?(k|m|mn|bn|b)\b", re.IGNORECASE)
_SCALE_OF = {
    "thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12, "bn": 10**9,
    "k": 10**3, "m": 10**6, "mn": 10**6, "b": 10**9,
}  # fmt: skip
_DIGIT_ORDINAL = re.compile(r"(?<![\w.,])(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MONTH_DAY_YEAR = re.compile(
    rf"\b({_MONTH})\s+{_DAY}\b(?:,?\s+(\d{{4}})\b)?(?![,.]?\d)", re.IGNORECASE
)
_DAY_MONTH_YEAR = re.compile(
    rf"(?<![\w.,]){_DAY}(?:\s+of)?\s+({_MONTH})(?:,?\s+(\d{{4}})\b)?", re.IGNORECASE
)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\s*,?\s+(\d{{4}})\b", re.IGNORECASE)
_YEAR_RANGE = re.compile(
    r"(?<![\w.,])(1\d|20)(\d{2})\s*(?:-{1,2}|–|—|/)\s*(\d{2})(?![\w%]|[.,]\d)"
    rf"(?!\s+{_MONTH})",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"(\d)\s*(?:%|per\s*cent\b|percent\b|pct\b)", re.IGNORECASE)
_ZERO_FRACTION = re.compile(r"(?<![\w.])(\d+)\.0+(?![\d.])")


def _scaled(number: str, scale: int) -> str:
    try:
        value = Decimal(number) * scale
    except InvalidOperation:  # pragma: no cover - the pattern only lets digits through
        return number
    text = format(value.normalize(), "f")
    return text


def _month_name(raw: str) -> str:
    word = raw.rstrip(".")
    name = _MONTH_OF[_key(word)]
    return name.capitalize() if word[:1].isupper() else name


def _date(day: str | None, month: str, year: str | None) -> str | None:
    if day is not None and not 1 <= int(day) <= 31:
        return None
    parts = [str(int(day))] if day is not None else []
    parts.append(_month_name(month))
    if year:
        parts.append(year)
    return " ".join(parts)


def _iso(match: re.Match[str]) -> str:
    year, month, day = match.group(1), int(match.group(2)), int(match.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{day} {_MONTHS[month - 1].capitalize()} {year}"


def _month_day_year(match: re.Match[str]) -> str:
    date = _date(match.group(2), match.group(1), match.group(3))
    return match.group(0) if date is None else date


def _day_month_year(match: re.Match[str]) -> str:
    date = _date(match.group(1), match.group(2), match.group(3))
    return match.group(0) if date is None else date


def _month_year(match: re.Match[str]) -> str:
    return f"{_month_name(match.group(1))} {match.group(2)}"


def _year_range(match: re.Match[str]) -> str:
    century, first, second = match.group(1), match.group(2), match.group(3)
    if int(second) <= int(first):
        return match.group(0)
    return f"{century}{first}-{century}{second}"


def _digit_ordinal(match: re.Match[str]) -> str:
    return _ordinal(int(match.group(1)))


# --------------------------------------------------------------------------- units

_UNIT_TABLE: list[tuple[str, str, int]] = [
    # (pattern after the number, canonical words, regex flags); longer forms first
    (r"km/h|kmh|kph|kilomet(?:re|er)s?\s+(?:per|an)\s+hour", "kilometres per hour", re.I),
    (r"mph|miles?\s+(?:per|an)\s+hour", "miles per hour", re.I),
    (r"m/s|met(?:re|er)s?\s+per\s+second", "metres per second", re.I),
    (r"km²|km2|sq\.?\s*km|square\s+kilomet(?:re|er)s?", "square kilometres", re.I),
    (r"m²|m2|sq\.?\s*m|square\s+met(?:re|er)s?", "square metres", re.I),
    (r"sq\.?\s*mi|square\s+miles?", "square miles", re.I),
    (r"km|kilomet(?:re|er)s?", "kilometres", re.I),
    (r"cm|centimet(?:re|er)s?", "centimetres", re.I),
    (r"mm|millimet(?:re|er)s?", "millimetres", re.I),
    (r"m|(?i:met(?:re|er)s?)", "metres", 0),
    (r"kg|kgs|kilo(?:gram)?s?", "kilograms", re.I),
    (r"mg|milligrams?", "milligrams", re.I),
    (r"g|(?i:grams?)", "grams", 0),
    (r"lbs?|pounds?", "pounds", re.I),
    (r"oz|ounces?", "ounces", re.I),
    (r"ft|foot|feet", "feet", re.I),
    (r"mi|miles?", "miles", re.I),
    (r"ml|millilit(?:re|er)s?", "millilitres", re.I),
    (r"l|lit(?:re|er)s?", "litres", re.I),
    (r"[°º˚]\s*C|degrees?\s+(?:C|celsius|centigrade)", "degrees celsius", re.I),
    (r"[°º˚]\s*F|degrees?\s+(?:F|fahrenheit)", "degrees fahrenheit", re.I),
    (r"[°º˚]|degrees?", "degrees", re.I),
    (r"secs?|seconds?", "seconds", re.I),
    (r"mins?|minutes?", "minutes", re.I),
    (r"hrs?|hours?", "hours", re.I),
]
_UNIT = re.compile(
    r"(?<=\d)(?:\s*|-)(?:"
    + "|".join(
        f"(?P<u{k}>{pattern if not flags else f'(?i:{pattern})'})"
        for k, (pattern, _, flags) in enumerate(_UNIT_TABLE)
    )
    # A bare "s" or "h" is a unit only after a space ("0.9 s"): "1990s" is a decade.
    + r"|(?P<s>(?<=\s)s)|(?P<h>h))(?![\w/²'])"
)
_UNIT_WORDS = {f"u{k}": words for k, (_, words, _) in enumerate(_UNIT_TABLE)}
_UNIT_WORDS.update(s="seconds", h="hours")
_US_SPELLING = CaseBlind(r"\b(kilo|centi|milli)?(met|lit)ers?\b")


def _unit(match: re.Match[str]) -> str:
    return " " + _UNIT_WORDS[match.lastgroup or ""]


_DIGIT_RUN = re.compile(r"\d+")
_AT_DIGIT_RUNS = True
"""Whether `_units` tries `_UNIT` only where a run of digits ends (False: ``_UNIT.sub``)."""


def _units(text: str) -> str:
    """``_UNIT.sub(_unit, text)``, trying the pattern only where a run of digits ends.

    `_UNIT` opens with ``(?<=\\d)`` and no unit it names begins with a digit, so a match can
    only start right after the last digit of a run; ``re.sub`` tried its 27 alternatives at
    every position of every text with a number (a fifth of `canonical`'s time). Matches are
    taken left to right without overlap, as ``re.sub`` takes them; a unit that ends in a digit
    ("km2") may be followed by another at its end, as there."""
    if not _AT_DIGIT_RUNS:
        return _UNIT.sub(_unit, text)
    out: list[str] = []
    last = 0
    for run in _DIGIT_RUN.finditer(text):
        at = run.end()
        if at < last:
            continue
        match = _UNIT.match(text, at)
        if match is None:
            continue
        out.append(text[last:at])
        out.append(_unit(match))
        last = match.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _british(match: re.Match[str]) -> str:
    return re.sub(r"er(s?)$", r"re\1", match.group(0), flags=re.IGNORECASE)


# --------------------------------------------------------------------------- together

_DIGIT = re.compile(r"\d")
_WORDY = CaseBlind(r"\b(?:" + "|".join([*_NUMBER_WORD, *_ORDINAL_SMALL, *_ORDINAL_TENS]) + r")")
_MONTHLY = CaseBlind(_MONTH)
_WORDY_WORDS = (*_NUMBER_WORD, *_ORDINAL_SMALL, *_ORDINAL_TENS)
_MONTH_WORDS = tuple(_MONTH_OF)


def _found(pattern: CaseBlind, text: str, words: tuple[str, ...]) -> bool:
    """``pattern.search(text) is not None`` for a case-blind pattern whose every match holds
    one of the lower-case ``words``: an ASCII text holding none of them is answered without the
    regex (a substring test each: the two searches were half of this module's time on a
    sentence with a number, and most sentences hold neither), one that does by the pattern's
    lower-case twin (`CaseBlind`). Non-ASCII text always goes to the case-blind regex, whose
    folding reaches beyond ASCII."""
    if not _may_hold(text, words):
        return False
    return pattern.found_in(text, text.lower())


def _may_hold(text: str, words: tuple[str, ...]) -> bool:
    """False when ``text`` is ASCII and holds none of the lower-case ``words`` (a pattern whose
    every match holds one of them cannot match then); True otherwise."""
    if not text.isascii():
        return True
    return any(map(text.lower().__contains__, words))


_SCALE_WORDS = ("thousand", "million", "billion", "trillion", "bn")


def _scale(match: re.Match[str]) -> str:
    return _scaled(match.group(1), _SCALE_OF[_key(match.group(2))])


def _currency(match: re.Match[str]) -> str:
    return match.group(1) + _scaled(match.group(2), _SCALE_OF[_key(match.group(3))])


@functools.lru_cache(maxsize=1 << 16)
def canonical(text: str) -> str:
    """``text`` with its numbers, number words, ordinals, dates, percentages and units in one
    written form each (the rules: this module's docstring). Idempotent.

    Each rule runs only when a cheap test says it can apply: most sentences hold a number or
    two and nothing else to rewrite, and this runs on every claim and context sentence.
    Memoised: the offline providers ask for the same sentences once per claim and measure."""
    digits = _DIGIT.search(text) is not None
    wordy = _found(_WORDY, text, _WORDY_WORDS)
    if not (digits or wordy or "ter" in text.lower()):
        return text
    if digits:
        if "-" in text or "/" in text:
            text = _ISO_DATE.sub(_iso, text)
        if "," in text:
            text = _THOUSANDS_COMMA.sub(lambda m: m.group(0).replace(",", ""), text)
            text = _DECIMAL_COMMA.sub(r"\1.\2", text)
        text = _THOUSANDS_SPACE.sub(lambda m: re.sub(r"\D", "", m.group(0)), text)
    if wordy:
        if _may_hold(text, _ORDINAL_WORDS):
            text = _ordinal_words(text)
        text = _number_words(text)
    lower = text.lower()
    if "ter" in lower:
        text = _US_SPELLING.sub(_british, text)
    if not _DIGIT.search(text):
        return text
    if any(word in lower for word in _SCALE_WORDS):
        text = _SCALE_AFTER.sub(_scale, text)
    if any(sign in text for sign in "$£€¥"):
        text = _CURRENCY_SCALE.sub(_currency, text)
    if _found(_MONTHLY, text, _MONTH_WORDS):
        text = _MONTH_DAY_YEAR.sub(_month_day_year, text)
        text = _DAY_MONTH_YEAR.sub(_day_month_year, text)
        text = _MONTH_YEAR.sub(_month_year, text)
    text = _DIGIT_ORDINAL.sub(_digit_ordinal, text)
    if any(dash in text for dash in "-–—/"):
        text = _YEAR_RANGE.sub(_year_range, text)
    if "%" in text or "per" in lower or "pct" in lower:
        text = _PERCENT.sub(r"\1%", text)
    text = _units(text)
    if ".0" in text:
        text = _ZERO_FRACTION.sub(r"\1", text)
    return text
