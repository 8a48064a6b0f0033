"""docs/architecture.md says what the code does: its measure × provider table is the registry's,
and its Python example compiles."""

from __future__ import annotations

import re
from pathlib import Path

from ragbridge.core import metrics  # noqa: F401  (registers the built-in measures)
from ragbridge.core.registry import REGISTRY

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
START, END = "<!-- registry table: start -->\n", "<!-- registry table: end -->"


def test_the_table_is_the_registrys() -> None:
    text = DOC.read_text(encoding="utf-8")
    kept = text[text.index(START) + len(START) : text.index(END)]
    expected = REGISTRY.markdown()
    assert kept == expected, (
        "docs/architecture.md's table differs from the registry; replace the lines between its "
        "markers with the output of `ragbridge metrics --markdown`"
    )
    assert kept.count("\n") == len(REGISTRY.pairs()) + 2  # header, rule, a row per pair


def test_the_python_example_compiles() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        compile(block, str(DOC), "exec")
