"""A case-blind regular expression that runs case-sensitively on lower-cased ASCII text.

Why: `ragbridge.core.text.quantities` tests every answer and context against long case-blind
alternations (number words, ordinals, month names). Python's ``re`` compares each character
case-blindly there, which made those searches four to five times slower than the same pattern
matched case-sensitively (a 100-character context: 50 µs against 6 µs), and they were most of
`canonical`'s time. For ASCII text, matching case-blindly equals matching the lower-cased
pattern against the lower-cased text, position for position (lower-casing ASCII keeps every
length, and ``\\b``, ``\\s``, ``\\w`` do not depend on case). So `CaseBlind` runs its twin on
``text.lower()``, and for a substitution re-reads each match case-blindly at its known start in
the original text (one anchored attempt), so a replacement sees the original letters. Non-ASCII
text always goes through the case-blind pattern: its folding reaches beyond ASCII ("ſ" is "s").
``TWINS = False`` switches the twin off (the tests compare both ways).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["TWINS", "CaseBlind"]

TWINS = True
"""Whether ASCII text is matched by the lower-case twin (False: always case-blindly)."""


class CaseBlind:
    """``re.compile(source, re.IGNORECASE)``, with a faster path for ASCII text.

    ``source`` must be written in lower case (no upper-case letter, so no ``\\D``, ``\\W``
    or ``\\S``) and hold no inline flags (nor, to keep the rule simple, lookbehinds): then
    its twin ``re.compile(source)`` on lower-cased ASCII text matches exactly where the
    case-blind pattern matches on the text.
    """

    __slots__ = ("pattern", "twin")

    def __init__(self, source: str) -> None:
        plain_groups = source.replace("(?:", "").replace("(?=", "").replace("(?!", "")
        if source != source.lower() or "(?" in plain_groups:
            raise ValueError(
                "a CaseBlind pattern is written in lower case, with no special group but "
                "(?:...), (?=...) and (?!...)"
            )
        self.pattern = re.compile(source, re.IGNORECASE)
        self.twin = re.compile(source)

    def search(self, text: str) -> re.Match[str] | None:
        """The case-blind search (the reference the twin is held to)."""
        return self.pattern.search(text)

    def found_in(self, text: str, lower: str) -> bool:
        """Whether the pattern occurs in ``text``; ``lower`` is ``text.lower()``, passed by a
        caller that already made it."""
        if TWINS and text.isascii():
            return self.twin.search(lower) is not None
        return self.pattern.search(text) is not None

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        """``self.pattern.sub(repl, text)``; ``repl`` is given the case-blind match."""
        if not (TWINS and text.isascii()):
            return self.pattern.sub(repl, text)
        out: list[str] = []
        last = 0
        for found in self.twin.finditer(text.lower()):
            match = self.pattern.match(text, found.start())
            if match is None or match.end() != found.end():  # pragma: no cover - cannot differ
                return self.pattern.sub(repl, text)
            out.append(text[last : match.start()])
            out.append(repl(match))
            last = match.end()
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)
