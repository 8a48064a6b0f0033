"""The LangSmith and LlamaIndex adapters read alike, guard alike and share what they share.

Issue 29 ("the house"): each adapter imports its framework once behind the one optional-import
guard (`ragbridge.adapters._extras`), keeps no module that imports another's private names, maps
LlamaIndex's ``llm=``/``embed_model=`` in one place, and the LangSmith sink builds its `Sample`
through the mapping every sink shares (`ragbridge.core.sample_fields.build_sample`).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters._extras import install_hint

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
PACKAGES = {
    "langsmith": ("langsmith",),
    "llamaindex": ("llama_index", "llama_index_instrumentation"),
}


def _modules(package: str) -> list[Path]:
    return sorted((ADAPTERS / package).glob("*.py"))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_imports_a_private_name_of_another(package: str) -> None:
    found = []
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                found += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_framework_is_imported_in_one_module_behind_the_guard(package: str) -> None:
    importers = set()
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.split(".")[0] in PACKAGES[package] for n in names):
                importers.add(path.name)
    assert importers == {"_framework.py"}
    framework = (ADAPTERS / package / "_framework.py").read_text(encoding="utf-8")
    assert "missing_extra(" in framework


def test_install_hints_are_the_clone_form() -> None:
    pytest.importorskip("langsmith")
    pytest.importorskip("llama_index.core")
    from ragbridge.adapters import langsmith, llamaindex

    assert install_hint("langsmith") == langsmith.INSTALL_HINT
    assert install_hint("llamaindex") == llamaindex.INSTALL_HINT


# --------------------------------------------------------------------------- LangSmith sink


def test_a_value_the_sample_refuses_is_one_line_naming_run_and_field() -> None:
    pytest.importorskip("langsmith")
    from ragbridge.adapters.langsmith import RagbridgeEvaluators

    suite = RagbridgeEvaluators(["mrr"])
    run = {
        "id": "run-1",
        "name": "bot",
        "inputs": {"question": "Where is Paris?"},
        "outputs": {"answer": "France.", "contexts": [{"page_content": "x", "id": "d1"}]},
    }
    example = {"id": "ex-1", "outputs": {"relevance": {"d1": 5000}}}
    outcome = suite.outcome(run, example)
    comment = suite.result("mrr", outcome).comment
    assert outcome.sample is None
    assert comment is not None
    assert "\n" not in comment
    assert comment.startswith(
        "failed (invalid_input): run run-1 ('bot'): relevance[\"d1\"]: grade 5000 is out of range"
    )


def test_the_sink_still_reads_every_field_it_found() -> None:
    pytest.importorskip("langsmith")
    from ragbridge.adapters.langsmith import RagbridgeEvaluators

    suite = RagbridgeEvaluators(["mrr"], id_key="source")
    run = {
        "id": "run-2",
        "name": "bot",
        "inputs": {"inputs": {"question": "Where is Paris?"}},
        "outputs": {
            "answer": "France.",
            "documents": [{"page_content": "Paris.", "metadata": {"source": "doc-7"}, "id": "c"}],
        },
    }
    example = {
        "id": "ex-2",
        "outputs": {
            "reference": "In France.",
            "relevant_ids": ["doc-7"],
            "reference_contexts": [1],
        },
    }
    sample = suite.sample(run, example)
    assert sample.id == "ex-2"
    assert sample.question == "Where is Paris?"
    assert sample.answer == "France."
    assert [c.id for c in sample.contexts] == ["doc-7"]
    assert sample.reference == "In France."
    assert sample.reference_contexts == ["1"]
    assert sample.relevance == {"doc-7": 1}
    assert sample.metadata == {
        "langsmith": {"run_id": "run-2", "run_name": "bot", "example_id": "ex-2"}
    }
    assert suite.outcome(run, example).scores["mrr"].value == 1.0


# --------------------------------------------------------------------------- LlamaIndex aliases


class _Engine:
    """Enough of a query engine for `shadow` to accept it before it reads the models."""

    async def aquery(self, query: Any) -> Any:  # pragma: no cover - never asked
        raise AssertionError("not asked")


@pytest.mark.parametrize(("alias", "name"), [("llm", "judge"), ("embed_model", "embedder")])
def test_every_llamaindex_entry_point_refuses_both_names_in_the_same_words(
    alias: str, name: str
) -> None:
    pytest.importorskip("llama_index.core")
    from ragbridge.adapters.llamaindex import RagbridgeEvaluator, score_queries, shadow
    from ragbridge.core.testing import HashEmbedder, ScriptedJudge

    model = ScriptedJudge([]) if name == "judge" else HashEmbedder()
    both: dict[str, Any] = {alias: model, name: model}
    messages = []
    for build in (
        lambda: shadow(_Engine(), ["faithfulness"], **both),
        lambda: RagbridgeEvaluator("faithfulness", **both),
        lambda: score_queries(["faithfulness"], **both),
    ):
        with pytest.raises(ValueError, match=f"{alias}= and {name}= name the same model") as info:
            build()
        messages.append(str(info.value))
    assert len(set(messages)) == 1, messages


def test_samples_from_runs_refuses_what_is_not_a_reading_option() -> None:
    """``sample_id`` is `sample_from_run`'s own: passed on to every trace it would give them all
    one id, so the many-trace readers refuse it as their explicit signature used to."""
    from ragbridge.adapters.langsmith.runs import samples_from_runs

    with pytest.raises(TypeError, match=r"unexpected keyword arguments: \['sample_id'\]"):
        samples_from_runs([], sample_id="same")  # type: ignore[call-arg]
