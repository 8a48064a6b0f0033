"""A rerun of ``ragbridge demo`` reads back what it may, says so, and writes the same files.

Issue 28: a rerun in the same folder took 0.6-0.8x the first run, mostly Python importing RAGAS
(for a comparison already on disk and a JSONL file written without it) and nltk (for LlamaIndex
chunks already computed). The rerun now reads LlamaIndex's chunks from LlamaIndex's own
ingestion cache and the ragbridge vs RAGAS comparison from the demo's cache
(`ragbridge.adapters.demo.reuse`), and writes the RAGAS file without importing RAGAS
(`ragbridge.adapters.ragas.rows`).

The fast tests check each part on its own; `rerun` runs the demo twice in one folder as a user
does (a subprocess each, so what the process imported can be read) and checks that the rerun
imports neither RAGAS nor nltk, says what it reused on stderr only, grows no cache table and
writes the same files as the first run, less what differs on every run (latencies and the
run's own counters of cache hits and embedding calls).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.demo.reuse import Kept, comparison_inputs, environment_digest
from ragbridge.core.cache.disk import Cache
from ragbridge.core.sample import Context, Sample

DEMO_NEEDS = ("langchain_core", "llama_index", "langsmith", "ragas", "deepeval", "tokenizers")


def _installed(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _sample(answer: str = "28 days.", latency: float = 0.1) -> Sample:
    return Sample(
        id="q-1",
        question="How many days of leave?",
        answer=answer,
        contexts=[Context(text="Employees get 28 days.", id="leave")],
        relevance={"leave": 1},
        metadata={"pipeline": "demo-langchain", "latency_s": latency},
    )


# -- what decides a kept comparison ---------------------------------------------------------


def test_the_comparison_key_ignores_the_latency_and_nothing_else() -> None:
    base = comparison_inputs([_sample()], "model-a")
    assert comparison_inputs([_sample(latency=9.5)], "model-a") == base
    assert comparison_inputs([_sample(answer="30 days.")], "model-a") != base
    assert comparison_inputs([_sample()], "model-b") != base  # the offline measures' vectors
    moved = _sample().model_copy(update={"metadata": {"pipeline": "other", "latency_s": 0.1}})
    assert comparison_inputs([moved], "model-a") != base  # any other metadata counts


def test_kept_text_is_found_again_only_under_the_same_code_and_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Cache(tmp_path / "cache.sqlite") as cache:
        kept = Kept(cache, "comparison", "inputs")
        assert kept.load() is None
        kept.save('{"n": 1}')
        assert Kept(cache, "comparison", "inputs").load() == '{"n": 1}'
        assert Kept(cache, "comparison", "other inputs").load() is None
        assert Kept(cache, "llamaindex-ingestion", "inputs").load() is None
        monkeypatch.setattr(
            "ragbridge.adapters.demo.reuse.environment_digest", lambda: "an upgraded package"
        )
        assert Kept(cache, "comparison", "inputs").load() is None


def test_the_environment_digest_covers_ragbridge_and_the_installed_packages() -> None:
    import ragbridge.adapters.demo.reuse as reuse

    names = reuse._distributions()
    assert any(n.startswith(("ragas-", "pydantic-")) for n in names)
    assert len(environment_digest()) == 64
    assert environment_digest() == environment_digest()


# -- LlamaIndex's chunks, from its own ingestion cache ---------------------------------------


@pytest.fixture
def llama() -> None:
    missing = _installed("llama_index", "nltk")
    if missing:
        pytest.skip(f"needs pip install 'ragbridge[llamaindex]' (missing: {', '.join(missing)})")


def _chunks(engine: Any) -> list[tuple[str, str | None, str]]:
    """The index's nodes in order: (node id, document id, text)."""
    docs = engine.retriever._index.docstore.docs
    return [(node.node_id, node.ref_doc_id, node.get_content()) for node in docs.values()]


@pytest.mark.usefixtures("llama")
def test_the_llamaindex_pipeline_chunks_as_from_documents_did() -> None:
    """The ingestion pipeline gives the chunks ``VectorStoreIndex.from_documents`` gave, in order
    (the demo's answers and contexts are unchanged)."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter

    from ragbridge.adapters.demo.handbook import documents
    from ragbridge.adapters.demo.pipelines import llamaindex_embedding, llamaindex_pipeline
    from ragbridge.core.testing import HashEmbedder

    reference = VectorStoreIndex.from_documents(
        [Document(text=d.text, id_=d.id, metadata={"title": d.title}) for d in documents()],
        embed_model=llamaindex_embedding(HashEmbedder()),
        transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=0)],
    )
    expected = [(n.ref_doc_id, n.get_content()) for n in reference.docstore.docs.values()]
    got = _chunks(llamaindex_pipeline(HashEmbedder()))
    assert [(doc, text) for _, doc, text in got] == expected
    assert len(expected) > len(documents())  # the splitter did split


@pytest.mark.usefixtures("llama")
def test_a_second_build_takes_llamaindex_chunks_from_the_kept_cache_without_splitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llama_index.core.node_parser import SentenceSplitter

    from ragbridge.adapters.demo.pipelines import llamaindex_pipeline
    from ragbridge.adapters.demo.reuse import KeptIngestion
    from ragbridge.core.testing import HashEmbedder

    splits = {"n": 0}
    real = SentenceSplitter.split_text_metadata_aware

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        splits["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SentenceSplitter, "split_text_metadata_aware", counted)
    with Cache(tmp_path / "cache.sqlite") as cache:
        first = KeptIngestion(cache)
        built = _chunks(llamaindex_pipeline(HashEmbedder(), ingestion_cache=first.cache))
        assert first.save() is False  # computed, and kept
        assert splits["n"] > 0
        splits["n"] = 0
        second = KeptIngestion(cache)  # a new process would start from the file
        again = _chunks(llamaindex_pipeline(HashEmbedder(), ingestion_cache=second.cache))
        assert second.save() is True
    assert splits["n"] == 0
    assert again == built  # node ids included


# -- the RAGAS file, written without RAGAS ----------------------------------------------------


def test_the_ragas_file_is_written_without_importing_ragas(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from ragbridge.adapters.demo.handbook import questions
        from ragbridge.adapters.ragas.rows import to_ragas_jsonl
        assert to_ragas_jsonl(questions()[:3], Path(sys.argv[1])) == 3
        print(sorted(m for m in ("ragas", "datasets", "torch") if m in sys.modules))
        """
    )
    out = tmp_path / "ragas.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_the_ragas_adapter_still_exports_the_same_writer() -> None:
    if _installed("ragas"):
        pytest.skip("needs pip install 'ragbridge[ragas]'")
    from ragbridge.adapters import ragas
    from ragbridge.adapters.ragas import rows as ragas_rows

    assert ragas.to_ragas_jsonl is ragas_rows.to_ragas_jsonl
    assert ragas.ragas_extras is ragas_rows.ragas_extras
    assert ragas.EXTRAS_KEY == ragas_rows.EXTRAS_KEY


# -- the demo, run twice in one folder ---------------------------------------------------------

RUNNER = textwrap.dedent(
    """
    import json, sys
    from ragbridge.adapters.cli.main import main
    code = main(["demo", "--out", sys.argv[1]])
    loaded = sorted({name.split(".")[0] for name in sys.modules})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(loaded, f)
    sys.exit(code)
    """
)

RUN_COUNTERS = {"latency_s", "hits", "misses", "calls", "cached_texts", "max_in_flight"}
"""What differs between any two runs of the same demo: latencies, and the run's own counters of
cache hits and embedding calls (a rerun hits where the first run computed)."""


@dataclass
class DemoRun:
    stdout: str
    stderr: str
    modules: list[str]
    files: dict[str, Any]
    rows: dict[str, int]


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _read(out: Path) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for path in sorted(out.iterdir()):
        if path.name.startswith("cache.sqlite"):
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            files[path.name] = [_without(json.loads(x), RUN_COUNTERS) for x in text.splitlines()]
        elif path.suffix == ".json":
            files[path.name] = _without(json.loads(text), RUN_COUNTERS)
        else:  # the report: the same page but for the minute it was generated
            files[path.name] = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "", text)
    return files


def _rows(cache: Path) -> dict[str, int]:
    with sqlite3.connect(cache) as conn:
        return {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("results", "replies", "embeddings")
        }


def _demo(work: Path, n: int) -> DemoRun:
    modules = work / f"modules{n}.json"
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "out", str(modules)],
        cwd=work, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return DemoRun(
        done.stdout,
        done.stderr,
        json.loads(modules.read_text(encoding="utf-8")),
        _read(work / "out"),
        _rows(work / "out" / "cache.sqlite"),
    )


@pytest.fixture(scope="module")
def rerun(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoRun, DemoRun]:
    missing = _installed(*DEMO_NEEDS)
    if missing:
        pytest.skip(f"the demo needs pip install 'ragbridge[all]' (missing: {', '.join(missing)})")
    work = tmp_path_factory.mktemp("demo-rerun")
    return _demo(work, 1), _demo(work, 2)


def test_a_rerun_imports_neither_ragas_nor_nltk(rerun: tuple[DemoRun, DemoRun]) -> None:
    cold, warm = rerun
    assert {"ragas", "nltk"} <= set(cold.modules)  # the check can fail
    assert "ragas" not in warm.modules
    assert "nltk" not in warm.modules
    assert {"llama_index", "langchain_core", "langsmith", "deepeval"} <= set(warm.modules)


def test_a_rerun_says_what_it_reused_on_stderr_only(rerun: tuple[DemoRun, DemoRun]) -> None:
    cold, warm = rerun
    assert "reused" not in cold.stderr
    reused = [line for line in warm.stderr.splitlines() if "reused from" in line]
    assert len(reused) == 2, warm.stderr[-2000:]
    assert all(line.startswith("ragbridge: reused from out") for line in reused)
    assert "LlamaIndex's chunks" in reused[0]
    assert "RAGAS did not run" in reused[1]
    assert warm.stdout == cold.stdout


def test_a_rerun_writes_the_same_files_and_grows_no_cache_table(
    rerun: tuple[DemoRun, DemoRun],
) -> None:
    cold, warm = rerun
    assert set(warm.files) == set(cold.files)
    for name in cold.files:
        assert warm.files[name] == cold.files[name], name
    assert warm.rows == cold.rows
