"""The DeepEval adapter as a package: which parts load DeepEval, and whose mapping reads a record.

The package's names are exported lazily and its provider imports no DeepEval, so the registry
lists DeepEval's providers (the ``ragbridge.providers`` entry point) without DeepEval's start-up,
and without DeepEval installed; a name that needs DeepEval imports it on first use and, without
it, says which extra to install. Test cases become Samples through the mapping every framework
sink shares (`ragbridge.core.sample_fields`).
"""

from __future__ import annotations

import pytest

from ragbridge.adapters._extras import install_hint
from tests.test_ragas_package import _run


def test_the_package_its_hint_and_its_provider_load_no_deepeval() -> None:
    out = _run(
        """
        import sys
        import ragbridge.adapters.deepeval as adapter
        from ragbridge.adapters.deepeval import INSTALL_HINT, provider
        from ragbridge.core.registry import REGISTRY
        REGISTRY.load_plugins()
        assert REGISTRY.provider("faithfulness", "deepeval").extra == "deepeval"
        assert callable(provider.register) and INSTALL_HINT == adapter.INSTALL_HINT
        print("deepeval" in sys.modules)
        """
    )
    assert out == "False"


def test_without_deepeval_the_entry_point_registers_and_names_say_the_extra() -> None:
    out = _run(
        """
        import asyncio, sys
        sys.modules["deepeval"] = None
        from ragbridge.core.registry import REGISTRY
        REGISTRY.load_plugins()
        assert not [e for e in REGISTRY.plugin_errors if "deepeval" in e], REGISTRY.plugin_errors
        assert REGISTRY.provider("faithfulness", "deepeval").extra == "deepeval"
        try:
            from ragbridge.adapters.deepeval import DeepEvalJudge
        except ImportError as exc:
            print(exc)
        from ragbridge.adapters.deepeval.provider import deepeval_score
        from ragbridge.core.judging.engine import JudgeEngine
        from ragbridge.core.sample import Context, Sample
        from ragbridge.core.testing import CountingJudge
        sample = Sample(id="s", question="q", answer="a", contexts=[Context(text="c")])
        try:
            asyncio.run(deepeval_score("faithfulness", sample, JudgeEngine(CountingJudge())))
        except ImportError as exc:
            print(exc)
        """
    )
    lines = out.splitlines()
    assert len(lines) == 2, out
    for line in lines:  # the name, and the provider asked for a score
        assert line.startswith("ragbridge.adapters.deepeval needs deepeval"), line
        assert install_hint("deepeval") in line


def test_a_test_case_is_read_by_the_shared_field_mapping() -> None:
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from ragbridge.adapters.deepeval import from_test_case
    from ragbridge.core.sample_fields import FieldError

    case = LLMTestCase(input="q", actual_output="a", name="bad", context=["x"])
    case.context = ["x", 3]  # type: ignore[list-item]  # DeepEval does not check assignments
    with pytest.raises(FieldError) as info:
        from_test_case(case)
    assert (info.value.where, info.value.field) == ("test case name='bad'", "context[1]")
    assert str(info.value) == "test case name='bad': context[1]: expected a string, got 3"
