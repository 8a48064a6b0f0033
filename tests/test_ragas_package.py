"""The RAGAS adapter as a package: which parts load RAGAS, and what its classes share.

The rows, the name table and the provider import no RAGAS, so the registry lists RAGAS's
providers (the ``ragbridge.providers`` entry point) and ``ragbridge demo`` writes the RAGAS file
without RAGAS's seconds-long start-up, and without RAGAS installed. A name that needs RAGAS
imports it on first use, and without it says which extra to install.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ragbridge.adapters._extras import install_hint


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_rows_names_and_provider_load_no_framework() -> None:
    out = _run(
        """
        import sys
        import ragbridge.adapters.ragas as adapter
        from ragbridge.adapters.ragas import provider, rows, names
        from ragbridge.adapters.ragas import EXTRAS_KEY, INSTALL_HINT, RAGAS_NAMES, to_ragas_jsonl
        assert to_ragas_jsonl is rows.to_ragas_jsonl and callable(provider.register)
        print(sorted(m for m in ("ragas", "langchain_core", "datasets") if m in sys.modules))
        """
    )
    assert out == "[]"


def test_without_ragas_the_entry_point_registers_and_names_say_the_extra() -> None:
    out = _run(
        """
        import sys
        sys.modules["ragas"] = None
        from ragbridge.core.registry import REGISTRY
        REGISTRY.load_plugins()
        assert not [e for e in REGISTRY.plugin_errors if "ragas" in e], REGISTRY.plugin_errors
        assert REGISTRY.provider("faithfulness", "ragas").extra == "ragas"
        try:
            from ragbridge.adapters.ragas import RagasJudge
        except ImportError as exc:
            print(exc)
        """
    )
    assert install_hint("ragas") in out
    assert "ragbridge.adapters.ragas needs ragas" in out


def test_the_two_judges_and_the_two_embedders_share_one_constructor() -> None:
    pytest.importorskip("ragas")
    from ragbridge.adapters.ragas import (
        RagasEmbedder,
        RagasInstructorJudge,
        RagasJudge,
        RagasModernEmbedder,
    )

    assert RagasJudge.__init__ is RagasInstructorJudge.__init__
    assert RagasEmbedder.__init__ is RagasModernEmbedder.__init__
    assert RagasJudge.engine is RagasInstructorJudge.engine  # one property, one ledger
