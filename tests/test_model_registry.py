"""One model registry outside the CLI (issue 29): specs and model objects resolve alike.

The command line, the Dask worker and the pytest plugin used to reach model construction and the
no-judge rule through ``ragbridge.adapters.cli``; now `ragbridge.adapters.model_registry` builds
models from a spec (``openai:MODEL``, ``langchain:MODULE:FACTORY``, ``python:…``) or takes a
framework's object, and `ragbridge.adapters.metric_choice` holds the metric-name rules.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters import model_registry
from ragbridge.adapters._loaded_once import LoadedOnce
from ragbridge.adapters.model_registry import (
    ModelSpecError,
    embedder_from,
    judge_from,
    model_from,
    nli_from,
)
from ragbridge.core import Sample, evaluate
from ragbridge.core.testing import CountingJudge, HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
CLI = "ragbridge.adapters.cli"
VERDICT = json.dumps({"explanation": "It answers the question.", "verdict": True})
SAMPLE = Sample(id="s", question="When does the office open?", answer="At 9 am.")
MODULE = "h_registry_models"  # a name no other test writes, so sys.modules holds only ours


# --------------------------------------------------------------------------- no CLI import


def _package(path: Path) -> str:
    """The package a source file under core/ or adapters/ belongs to, as imported (an
    ``__init__.py``'s relative imports are relative to its own package, like a module's)."""
    return ".".join(["ragbridge", *path.relative_to(ROOT).parent.parts])


def _imported(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports (statements anywhere, ``import_module("…")`` calls), with
    relative imports resolved against ``package``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:  # `from ragbridge.adapters import cli`
                yield node.lineno, f"{base}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _is_cli(name: str) -> bool:
    return name == CLI or name.startswith(CLI + ".")


def test_no_module_outside_the_cli_imports_the_cli() -> None:
    """The CLI is a client of the package, never a dependency of it."""
    offenders = []
    for folder in ("core", "adapters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.is_relative_to(ROOT / "adapters" / "cli"):
                continue
            for line, name in _imported(path, _package(path)):
                if _is_cli(name):
                    offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert offenders == []


@pytest.mark.parametrize(
    "form",
    [
        "from ragbridge.adapters.cli import options",
        "from ..cli.options import build_judge",
        "from ..cli import options",
        "from ragbridge.adapters import cli",
        "import ragbridge.adapters.cli.options",
        "importlib.import_module('ragbridge.adapters.cli.metric_names')",
    ],
)
def test_the_scan_sees_each_form_of_a_cli_import(form: str, tmp_path: Path) -> None:
    """The scan itself works, inside a function too (as the Dask worker's import was)."""
    probe = tmp_path / "worker.py"
    probe.write_text(f"def f():\n    {form}\n", encoding="utf-8")
    assert any(_is_cli(name) for _, name in _imported(probe, "ragbridge.adapters.dask"))
    probe.write_text("from ..clients import x\nimport ragbridge.adapters.client\n")
    assert not any(_is_cli(name) for _, name in _imported(probe, "ragbridge.adapters.dask"))


# --------------------------------------------------------------------------- same judge


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A module of model factories in the current folder, as a user names one in a spec."""
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(
            f"""
            VERDICT = {VERDICT!r}

            def chat():
                from langchain_core.language_models import FakeListChatModel
                return FakeListChatModel(responses=[VERDICT])

            def embeddings():
                from langchain_core.embeddings import DeterministicFakeEmbedding
                return DeterministicFakeEmbedding(size=8)
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    yield
    sys.modules.pop(MODULE, None)


def _helpfulness(judge: Any) -> float | None:
    score = evaluate([SAMPLE], ["helpfulness:llm"], judge=judge).get("s", "helpfulness")
    assert score is not None
    assert score.failure is None, score.failure
    return score.value


def test_a_langchain_spec_and_a_langchain_object_give_the_same_judge(factories: None) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.language_models import FakeListChatModel

    from ragbridge.adapters.langchain import LangChainJudge

    by_spec = judge_from(f"langchain:{MODULE}:chat")
    by_object = judge_from(FakeListChatModel(responses=[VERDICT]))
    assert isinstance(by_spec, LangChainJudge)
    assert isinstance(by_object, LangChainJudge)
    assert by_spec.model == by_object.model
    assert _helpfulness(by_spec) == _helpfulness(by_object) == 1.0


def test_a_langchain_spec_and_object_give_the_same_embedder(factories: None) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from ragbridge.adapters.langchain import LangChainEmbedder

    by_spec = embedder_from(f"langchain:{MODULE}:embeddings")
    by_object = embedder_from(DeterministicFakeEmbedding(size=8))
    assert isinstance(by_spec, LangChainEmbedder)
    assert isinstance(by_object, LangChainEmbedder)
    texts = ["the office opens at 9"]
    assert asyncio.run(by_spec.embed(texts)) == asyncio.run(by_object.embed(texts))


def test_an_openai_spec_and_an_openai_client_give_the_same_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    openai = pytest.importorskip("openai")
    pytest.importorskip("httpx")
    from ragbridge.adapters.openai import OpenAIJudge

    url = "http://127.0.0.1:9/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    monkeypatch.delenv("RAGBRIDGE_API_KEY", raising=False)
    client = openai.AsyncOpenAI(base_url=url, api_key="not-a-key")
    by_spec = judge_from("openai:tiny", base_url=url)
    by_object = judge_from(client, model="tiny")
    assert isinstance(by_spec, OpenAIJudge)
    assert isinstance(by_object, OpenAIJudge)
    assert (by_spec.model, by_spec.base_url) == (by_object.model, by_object.base_url)
    assert repr(by_spec) == repr(by_object)
    asyncio.run(client.close())


def test_a_python_spec_and_a_judge_object_are_the_same_kind() -> None:
    assert type(judge_from("python:ragbridge.core.testing:CountingJudge")) is CountingJudge
    judge = CountingJudge()
    assert judge_from(judge) is judge
    assert type(embedder_from("hash")) is type(embedder_from(HashEmbedder())) is HashEmbedder
    assert judge_from(None) is None
    assert embedder_from(None) is None
    assert nli_from(None) is None


def test_framework_models_as_judge_is_the_registry() -> None:
    """The public adapter keeps its names and builds through the one registry."""
    from ragbridge.adapters import framework_models

    judge = CountingJudge()
    assert framework_models.as_judge(judge) is judge
    embedder = HashEmbedder()
    assert framework_models.as_embedder(embedder) is embedder
    with pytest.raises(TypeError, match="a model name is not a judge"):
        framework_models.as_judge("gpt-4o")


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt4", "judge 'gpt4': expected KIND:…, e.g. openai:gpt-4o-mini"),
        ("nope:x", "judge 'nope:x': unknown kind 'nope'; use openai, langchain"),
        ("python:json:loads", "must be callable with no arguments for judge"),
        ("python:json", "judge must look like MODULE:OBJECT, got 'json'"),
        ("python:ragbridge.core.testing:HashEmbedder", "HashEmbedder is not a ragbridge Judge"),
    ],
)
def test_a_bad_spec_is_one_line_naming_its_label(spec: str, message: str) -> None:
    with pytest.raises(ModelSpecError) as info:
        judge_from(spec)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(ModelSpecError, match=r"^--judge"):
        judge_from("gpt4", what="--judge")


def test_the_cli_reports_a_bad_spec_as_a_user_error() -> None:
    from ragbridge.adapters.cli.errors import UserError
    from ragbridge.adapters.cli.options import build_embedder, build_judge

    with pytest.raises(UserError, match=r"^--judge 'gpt4': expected KIND"):
        build_judge("gpt4")
    with pytest.raises(UserError, match=r"^--embedder 'nope:x': unknown kind 'nope'; use local"):
        build_embedder("nope:x")


def test_the_dask_worker_builds_specs_through_the_registry() -> None:
    pytest.importorskip("distributed")
    from ragbridge.adapters.dask import worker

    built = worker._build("judge", "python:ragbridge.core.testing:CountingJudge", None)
    assert type(built) is CountingJudge
    assert type(model_from("embedder", "hash")) is HashEmbedder
    with pytest.raises(ModelSpecError, match=r"^judge 'gpt4'"):  # no CLI flag in the message
        worker._build("judge", "gpt4", None)


def test_the_registry_imports_no_framework_and_no_core() -> None:
    """It sits on the path of ``ragbridge --help``, which must stay light (the core alone
    would load pydantic and numpy)."""
    from tests.test_cli_imports import _loaded_after

    assert _loaded_after("import ragbridge.adapters.model_registry") == []


def test_embedder_for_names_its_label_when_the_default_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if importlib.util.find_spec("tokenizers") is None:
        pytest.skip("needs the local extra")
    from ragbridge.core.metrics import resolve

    monkeypatch.setattr("ragbridge.adapters.local._installed", lambda module: False)
    metrics = [resolve("answer_relevance:offline")]
    with pytest.raises(ModelSpecError, match=r"\(embedder local\) is not installed: pip install"):
        model_registry.embedder_for(None, metrics)
    assert model_registry.embedder_for(None, [resolve("mrr")]) is None


# --------------------------------------------------------------------------- loaded once


def test_a_model_is_loaded_once_by_concurrent_callers_and_a_failure_is_retried() -> None:
    calls: list[int] = []
    fail = [True]

    def build() -> str:
        calls.append(1)
        time.sleep(0.05)  # long enough for the other threads to arrive while it loads
        if fail[0]:
            fail[0] = False
            raise OSError("not there yet")
        return "model"

    once = LoadedOnce(build)
    with pytest.raises(OSError, match="not there yet"):
        once.get()
    assert not once.loaded
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(once.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == ["model"] * 8
    assert len(calls) == 2  # the failed build and one more, shared by all eight
    assert once.loaded


def test_calls_queue_per_event_loop_and_run_in_a_worker_thread() -> None:
    once = LoadedOnce(lambda: "model")
    running: list[int] = []
    most: list[int] = []

    def work(n: int) -> tuple[int, bool]:
        running.append(n)
        most.append(len(running))
        time.sleep(0.01)
        running.remove(n)
        return n, threading.current_thread() is threading.main_thread()

    async def many() -> list[tuple[int, bool]]:
        return list(await asyncio.gather(*(once.in_thread(work, n) for n in range(5))))

    for _ in range(2):  # a second loop gets its own queue (an asyncio.Lock is bound to one)
        assert asyncio.run(many()) == [(n, False) for n in range(5)]
    assert max(most) == 1
