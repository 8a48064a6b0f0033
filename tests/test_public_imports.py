"""Every public name of the release before the house moved (commit 497c567) still imports from
the same place: `__all__` of `ragbridge.core`, `core.metrics`, `core.monitoring`, `core.retrieval`
and of each adapter's top-level module. Moved private modules need no shims; these names do."""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

import pytest

PUBLIC: dict[str, tuple[str, ...]] = {
    module: tuple(names)
    for module, names in json.loads(
        (Path(__file__).parent / "data" / "public_names_497c567.json").read_text(encoding="utf-8")
    ).items()
}
"""The snapshot: module -> its ``__all__`` at 497c567 (data, so the list is kept once)."""


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_still_imports_from_the_same_module(module: str) -> None:
    imported = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a renamed name may warn; it imports
        missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert missing == [], f"{module} lost public names: {missing}"
    listed = set(getattr(imported, "__all__", ()))
    assert set(PUBLIC[module]) <= listed, sorted(set(PUBLIC[module]) - listed)
