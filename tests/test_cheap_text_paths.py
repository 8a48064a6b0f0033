"""`canonical`'s faster regex paths give the regexes' own answers, and a word the case-blind
patterns match is found in their tables (issue 34).

* `CaseBlind` matches ASCII text with a lower-case twin of its pattern: the same matches, the
  same replacements, as the case-blind pattern (which still serves non-ASCII text).
* `_units` tries the unit pattern only where a run of digits ends: ``_UNIT.sub``'s result.
* "ſeptember 3" raised KeyError: the month pattern matched it case-blindly ("ſ", long s, is
  "s" to ``re``), and the lookup after ``.lower()`` did not find "ſeptember". Lookups now key
  a matched word by the regex engine's own rule (`_key`).
* `rare_full_collections` makes young and full garbage collections rarer during a streamed
  run and puts the thresholds back.
"""

from __future__ import annotations

import gc
import importlib
import random
import re
from pathlib import Path

import pytest

import ragbridge.core.scoring.collector as collector
import ragbridge.core.text.case_blind as case_blind
import ragbridge.core.text.quantities as quantities
from ragbridge.adapters.cli.main import main
from ragbridge.core.scoring.collector import FULL_EVERY, YOUNG_EVERY, rare_full_collections
from ragbridge.core.text.case_blind import CaseBlind
from ragbridge.core.text.quantities import canonical

_PIECES = [
    "one", "Two", "twenty", "TWENTY-one", "first", "Fourth", "twenty-first", "ninety-ninth",
    "a", "an", "and", "hundred", "Thousand", "dozen", "million", "meters", "Kilometer", "liter",
    "metres", "sept", "SEPT.", "March", "may", "Dec", "ſix", "ſeptember", "fıve", "\u212ailo",
    "İ", "é", "5", "12", "3.5", "1990", "8,849", "8 849", " ", " ", "-", ",", ".", "th", "st",
    "km", "m", "s", "%", "percent", "ſt", "Passage", "leave", "after", "five", "years",
]  # fmt: skip


def _texts(n: int, seed: int, *, ascii_only: bool = False) -> list[str]:
    rng = random.Random(seed)
    pool = [p for p in _PIECES if p.isascii()] if ascii_only else _PIECES
    out = []
    for _ in range(n):
        parts = [rng.choice(pool) for _ in range(rng.randrange(1, 9))]
        out.append(rng.choice(["", " "]).join(parts))
    return out


_BLIND = {
    "_RUN": quantities._RUN,
    "_ORDINAL_WORD": quantities._ORDINAL_WORD,
    "_US_SPELLING": quantities._US_SPELLING,
    "_WORDY": quantities._WORDY,
    "_MONTHLY": quantities._MONTHLY,
}


@pytest.mark.parametrize("name", sorted(_BLIND))
def test_the_lower_case_twin_finds_what_the_case_blind_pattern_finds(name: str) -> None:
    blind = _BLIND[name]

    def spans(match: re.Match[str]) -> str:
        return f"<{match.group(0)}|{match.start()}|{match.lastindex}>"

    for text in _texts(4000, 1) + _texts(4000, 2, ascii_only=True):
        expected = blind.pattern.sub(spans, text)
        assert blind.sub(spans, text) == expected, text
        assert blind.found_in(text, text.lower()) == (blind.search(text) is not None), text


def test_a_case_blind_pattern_must_be_written_in_lower_case() -> None:
    for source in (r"\bA", r"\D+", r"(?i:x)", r"(?<=a)b"):
        with pytest.raises(ValueError, match="lower case"):
            CaseBlind(source)
    assert CaseBlind(r"\b(?:a|b)(?=c)").sub(lambda m: "X", "Ac bc") == "Xc Xc"


def test_units_are_tried_where_digits_end_with_the_same_result() -> None:
    rng = random.Random(3)
    pieces = [
        "5", "12", "3.5", "1990", "\u0663", "km", "km2", "km²", "m", "M", "s", " s", "h", "hrs",
        "°C", "º", "˚F", "degrees", "-", "/", " ", "  ", "\u00a0", "kg", "lbs", "mph", "m/s",
        "sq km", "square miles", "x", "ſ", "\u212a", "kilometers", "'", "²", "mi", "l", "g",
    ]  # fmt: skip
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 9)))
        assert quantities._units(text) == quantities._UNIT.sub(quantities._unit, text), text


def test_canonical_is_the_same_with_every_fast_path_off() -> None:
    texts = _texts(3000, 4) + _texts(3000, 5, ascii_only=True)
    texts += [
        "Passage 7985: employees in band 4 get 28 days of paid leave a year, and 3 more after "
        "five years.",
        "the twenty-first of March, 2021: 8,849 meters, 5 km2 s",
    ]
    canonical.cache_clear()
    fast = [canonical(t) for t in texts]
    canonical.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quantities, "_may_hold", lambda text, words: True)
        patch.setattr(case_blind, "TWINS", False)
        patch.setattr(quantities, "_AT_DIGIT_RUNS", False)
        slow = [canonical(t) for t in texts]
    canonical.cache_clear()
    assert fast == slow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ſeptember 3", "3 september"),
        ("3 auguſt 2020", "3 august 2020"),
        ("aprıl 3, 2020", "3 april 2020"),  # dotless i: "i" to re's case folding
        ("Aprİl 3, 2020", "3 April 2020"),  # dotted capital I: .lower() makes two characters
        ("the ſixth day", "the 6th day"),
        ("ſixty-fifth", "65th"),
        ("5 thouſand and 5 billion", "5000 and 5000000000"),
        ("September 3", "3 September"),
    ],
)
def test_a_word_the_patterns_match_case_blindly_is_found_in_their_tables(
    text: str, expected: str
) -> None:
    canonical.cache_clear()
    assert canonical(text) == expected
    assert canonical(expected) == expected  # still idempotent


def test_every_case_blind_match_of_a_table_word_has_its_key() -> None:
    """Each month, ordinal and scale word, with each letter swapped for every character that
    re holds equal to it case-blindly, is found by `_key` in its table."""
    twins = {
        letter: [chr(c) for c in range(0x80, 0x250) if re.fullmatch(letter, chr(c), re.I)]
        for letter in "abcdefghijklmnopqrstuvwxyz"
    }
    twins["k"].append("\u212a")  # the Kelvin sign
    tables = [quantities._MONTH_OF, quantities._ORDINAL_SMALL, quantities._ORDINAL_TENS,
              quantities._ORDINAL_UNITS, quantities._TENS, quantities._SCALE_OF]  # fmt: skip
    for table in tables:
        for word in table:
            for i, letter in enumerate(word):
                for twin in twins.get(letter, []):
                    odd = word[:i] + twin + word[i + 1 :]
                    assert re.fullmatch(word, odd, re.I)
                    assert quantities._key(odd) == word, odd


def test_full_collections_are_rarer_in_the_block_and_restored_after() -> None:
    before = gc.get_threshold()
    with rare_full_collections():
        young, middle, old = gc.get_threshold()
        assert young == max(before[0], YOUNG_EVERY)
        assert middle == before[1]
        assert old == max(before[2], FULL_EVERY)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), rare_full_collections():
        raise RuntimeError
    assert gc.get_threshold() == before


def test_a_streamed_eval_scores_with_rare_full_collections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "eval.jsonl"
    row = '{"id": "q1", "question": "How long?", "answer": "5 days", "reference": "5 days"}'
    data.write_text(row + "\n", "utf-8")
    seen: list[tuple[int, int, int]] = []
    real = rare_full_collections

    def spy() -> object:
        seen.append(gc.get_threshold())
        return real()

    monkeypatch.setattr(collector, "rare_full_collections", spy)  # `eval` imports it when run
    before = gc.get_threshold()
    code = main(["eval", str(data), "--metrics", "exact_match", "--out", str(tmp_path / "r")])
    assert code == 0
    assert seen == [before]
    assert gc.get_threshold() == before


def test_ascii_words_split_after_one_lower_case_are_the_words() -> None:
    words_module = importlib.import_module("ragbridge.core.text.words")  # not the function

    texts = _texts(4000, 6) + _texts(4000, 7, ascii_only=True)
    texts += ["Don't STOP: it's 8,849 m", "O'Neill's", "a_b c-d e.f", "İstanbul’s"]
    words_module._words.cache_clear()
    fast = [words_module.words(t) for t in texts]
    words_module._words.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(words_module, "_ASCII_AT_ONCE", False)
        slow = [words_module.words(t) for t in texts]
    words_module._words.cache_clear()
    assert fast == slow
