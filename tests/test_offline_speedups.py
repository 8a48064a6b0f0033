"""The offline providers' text helpers are memoised (cold offline runs split and tokenise the same
contexts once per measure) without changing what they return or letting callers share state."""

from __future__ import annotations

import importlib

# the module, not the function of the same name that ragbridge.core.text exports
w = importlib.import_module("ragbridge.core.text.words")

TEXT = "Dr. Smith approves the leave form within 12 days. The team reviews it.\nA new line here."


def test_sentences_are_memoised_and_each_call_gets_its_own_list() -> None:
    first = w.sentences(TEXT)
    hits = w._sentences.cache_info().hits
    second = w.sentences(TEXT)
    assert w._sentences.cache_info().hits == hits + 1  # the second split came from the cache
    assert (
        first
        == second
        == [
            "Dr. Smith approves the leave form within 12 days.",
            "The team reviews it.",
            "A new line here.",
        ]
    )
    first.append("changed by a caller")
    assert w.sentences(TEXT) == second  # a caller's change does not reach the cache


def test_words_and_term_are_memoised_with_the_same_values() -> None:
    tokens = w.words("The Manager's Approvals")
    hits = w._words.cache_info().hits
    assert w.words("The Manager's Approvals") == tokens == ["the", "manager's", "approvals"]
    assert w._words.cache_info().hits == hits + 1
    tokens.clear()
    assert w.words("The Manager's Approvals") == ["the", "manager's", "approvals"]
    before = w.term.cache_info().hits
    assert w.term("approvals") == w.term("approvals") == "approv"
    assert w.term.cache_info().hits >= before + 1
    assert w.normalise("a  –  b") == "a - b"
