"""The robustness adapters (`ragbridge.adapters.langchain.robustness`,
`ragbridge.adapters.llamaindex.robustness`, the dispatcher `ragbridge.adapters.robustness`) on
the REAL demo pipelines, built with the model-free `HashEmbedder` (retrieval quality does not
matter here, only what reaches the answerer).

What is pinned: no perturbation gives exactly ``ragbridge run``'s sample; a perturbation
replacing every passage makes the extractive answer quote the new passage and is recorded as
the contexts; concurrent answers under different perturbations (forced to overlap by an
embedder that waits for all of them) each see their own, and a plain run beside them sees the
real retrieval; the base retriever methods are the originals again after; a ``retriever_name``
that matches nothing is an error on the sample, not a silently clean answer.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

for _module, _extra in [("langchain_core", "langchain"), ("llama_index.core", "llamaindex")]:
    try:
        _found = importlib.util.find_spec(_module) is not None
    except ModuleNotFoundError:
        _found = False
    if not _found:
        pytest.skip(
            f'{_module} is not installed (pip install ".[{_extra}]")', allow_module_level=True
        )

from langchain_core.retrievers import BaseRetriever as LCRetriever  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever as LIRetriever  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402

from ragbridge.adapters.demo import questions  # noqa: E402
from ragbridge.adapters.demo.pipelines import (  # noqa: E402
    ExtractiveAnswerer,
    langchain_embeddings,
    langchain_pipeline,
    llamaindex_pipeline,
)
from ragbridge.adapters.langchain import robustness as lc_robust  # noqa: E402
from ragbridge.adapters.langchain import run_pipeline  # noqa: E402
from ragbridge.adapters.langchain.robustness import LangChainRobustPipeline  # noqa: E402
from ragbridge.adapters.llamaindex import robustness as li_robust  # noqa: E402
from ragbridge.adapters.llamaindex import run_query_engine  # noqa: E402
from ragbridge.adapters.llamaindex.robustness import LlamaIndexRobustPipeline  # noqa: E402
from ragbridge.adapters.robustness import robust_pipeline  # noqa: E402
from ragbridge.core.robustness.types import RobustPipeline  # noqa: E402
from ragbridge.core.sample import Context, Sample  # noqa: E402
from ragbridge.core.testing import HashEmbedder  # noqa: E402

RETRIEVER = "handbook_retriever"
LC_ORIGINALS = {name: LCRetriever.__dict__[name] for name in ("invoke", "ainvoke")}
LI_ORIGINALS = {name: LIRetriever.__dict__[name] for name in ("retrieve", "aretrieve")}


class MeetingEmbedder(HashEmbedder):
    """A `HashEmbedder` whose query embeddings (one text), once ``armed`` for ``parties``
    callers, wait until all of them are in flight: the answers under test then overlap for
    certain. While they wait, it records whether the retriever patch is installed."""

    def __init__(self) -> None:
        super().__init__()
        self.parties = 0
        self.arrived = 0
        self.patched_while_waiting: list[bool] = []
        self._all_in: asyncio.Event | None = None

    def arm(self, parties: int) -> None:
        self.parties, self.arrived, self._all_in = parties, 0, None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.parties and len(texts) == 1:
            if self._all_in is None:
                self._all_in = asyncio.Event()
            self.arrived += 1
            if self.arrived >= self.parties:
                self._all_in.set()
            await asyncio.wait_for(self._all_in.wait(), timeout=20)
            self.patched_while_waiting.append(
                lc_robust.RETRIEVER_PATCH.active or li_robust.RETRIEVER_PATCH.active
            )
        return await super().embed(texts)


@pytest.fixture(scope="module")
def embedder() -> MeetingEmbedder:
    return MeetingEmbedder()


@pytest.fixture(scope="module")
def chain(embedder: MeetingEmbedder) -> Any:
    return langchain_pipeline(embedder, k=3)


@pytest.fixture(scope="module")
def engine(embedder: MeetingEmbedder) -> Any:
    return llamaindex_pipeline(embedder, k=3)


@pytest.fixture
def lc(chain: Any) -> LangChainRobustPipeline:
    return LangChainRobustPipeline(chain, retriever_name=RETRIEVER)


@pytest.fixture
def li(engine: Any) -> LlamaIndexRobustPipeline:
    return LlamaIndexRobustPipeline(engine)


PIPELINES = ["lc", "li"]


def _pipeline(request: pytest.FixtureRequest, name: str) -> Any:
    return request.getfixturevalue(name)


def _plain(request: pytest.FixtureRequest, name: str, sample: Sample) -> Sample:
    """``ragbridge run``'s result for ``sample`` (run_pipeline / run_query_engine)."""
    if name == "lc":
        return run_pipeline(request.getfixturevalue("chain"), [sample], retriever_name=RETRIEVER)[0]
    return run_query_engine(request.getfixturevalue("engine"), [sample])[0]


def _leave_question() -> Sample:
    return next(q for q in questions() if q.id == "q01")  # paid annual leave days


def _fact(days: int) -> Context:
    return Context(
        text=f"Full-time employees get {days} days of paid annual leave per year.",
        id=f"fake-{days}",
        metadata={"robustness": "counterfactual", "from": "test"},
    )


def _replace_all(days: int) -> Any:
    def perturb(live: list[Context]) -> list[Context]:
        assert live, "the perturbation was called with no live context"
        return [_fact(days)]

    return perturb


def _assert_restored() -> None:
    assert not lc_robust.RETRIEVER_PATCH.active
    assert not li_robust.RETRIEVER_PATCH.active
    for name, original in LC_ORIGINALS.items():
        assert LCRetriever.__dict__[name] is original, name
    for name, original in LI_ORIGINALS.items():
        assert LIRetriever.__dict__[name] is original, name


# -- both pipelines ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PIPELINES)
def test_both_are_robust_pipelines(request: pytest.FixtureRequest, name: str) -> None:
    pipeline = _pipeline(request, name)
    assert isinstance(pipeline, RobustPipeline)
    assert pipeline.identity


@pytest.mark.parametrize("name", PIPELINES)
def test_no_perturbation_is_the_plain_run(request: pytest.FixtureRequest, name: str) -> None:
    pipeline = _pipeline(request, name)
    for sample in questions()[:4]:
        got = asyncio.run(pipeline.answer(sample, None))
        want = _plain(request, name, sample)
        assert got.answer == want.answer
        assert got.contexts == want.contexts
        assert got.contexts, sample.id
        drop = {"latency_s"}
        assert {k: v for k, v in got.metadata.items() if k not in drop} == {
            k: v for k, v in want.metadata.items() if k not in drop
        }
    _assert_restored()


@pytest.mark.parametrize("name", PIPELINES)
def test_the_identity_perturbation_changes_nothing_the_pipeline_reports(
    request: pytest.FixtureRequest, name: str
) -> None:
    pipeline = _pipeline(request, name)
    seen: list[list[Context]] = []

    def same(live: list[Context]) -> list[Context]:
        seen.append(live)
        return live

    for sample in questions()[:3]:
        got = asyncio.run(pipeline.answer(sample, same))
        want = _plain(request, name, sample)
        assert got.answer == want.answer
        assert [(c.id, c.text) for c in got.contexts] == [(c.id, c.text) for c in want.contexts]
        assert "error" not in got.metadata
    assert len(seen) == 3
    _assert_restored()


@pytest.mark.parametrize("name", PIPELINES)
def test_replacing_every_passage_changes_the_answer_and_the_contexts(
    request: pytest.FixtureRequest, name: str
) -> None:
    pipeline = _pipeline(request, name)
    sample = _leave_question()
    clean = asyncio.run(pipeline.answer(sample, None))
    assert "99" not in (clean.answer or "")
    got = asyncio.run(pipeline.answer(sample, _replace_all(99)))
    assert got.answer == _fact(99).text
    assert [(c.id, c.text) for c in got.contexts] == [("fake-99", _fact(99).text)]
    assert got.contexts[0].metadata["robustness"] == "counterfactual"
    assert got.id == sample.id
    assert got.reference == sample.reference
    _assert_restored()


@pytest.mark.parametrize("name", PIPELINES)
def test_concurrent_answers_each_see_their_own_perturbation(
    request: pytest.FixtureRequest, name: str, embedder: MeetingEmbedder
) -> None:
    pipeline = _pipeline(request, name)
    sample = _leave_question()
    clean = asyncio.run(pipeline.answer(sample, None))

    async def together() -> list[Sample]:
        embedder.arm(3)
        try:
            return list(
                await asyncio.gather(
                    pipeline.answer(sample, _replace_all(11)),
                    pipeline.answer(sample, _replace_all(77)),
                    pipeline.answer(sample, None),  # a plain run beside them: untouched
                )
            )
        finally:
            embedder.arm(0)

    embedder.patched_while_waiting.clear()
    eleven, seventy_seven, plain = asyncio.run(together())
    assert embedder.patched_while_waiting == [True, True, True]  # they did overlap, patched
    assert eleven.answer == _fact(11).text
    assert [c.id for c in eleven.contexts] == ["fake-11"]
    assert seventy_seven.answer == _fact(77).text
    assert [c.id for c in seventy_seven.contexts] == ["fake-77"]
    assert plain.answer == clean.answer
    assert plain.contexts == clean.contexts
    _assert_restored()


@pytest.mark.parametrize("name", PIPELINES)
def test_a_failing_perturbation_is_the_samples_error_and_the_patch_is_gone(
    request: pytest.FixtureRequest, name: str
) -> None:
    pipeline = _pipeline(request, name)

    def broken(live: list[Context]) -> list[Context]:
        raise RuntimeError("no noise left")

    got = asyncio.run(pipeline.answer(_leave_question(), broken))
    assert got.answer is None
    assert "no noise left" in got.metadata["error"]
    _assert_restored()


@pytest.mark.parametrize("name", PIPELINES)
def test_a_retrieval_outside_any_answer_is_not_perturbed_while_the_patch_is_held(
    request: pytest.FixtureRequest, name: str
) -> None:
    sample = _leave_question()
    want = _plain(request, name, sample)
    patch = lc_robust.RETRIEVER_PATCH if name == "lc" else li_robust.RETRIEVER_PATCH
    with patch.applied(), patch.applied():  # re-entrant: nested holders share one install
        assert patch.active
        got = _plain(request, name, sample)
    assert got.answer == want.answer
    assert got.contexts == want.contexts
    _assert_restored()


# -- LangChain -----------------------------------------------------------------------------------


def test_a_retriever_name_that_matches_nothing_is_an_error_on_the_sample(chain: Any) -> None:
    pipeline = LangChainRobustPipeline(chain, retriever_name="no_such_retriever")
    got = asyncio.run(pipeline.answer(_leave_question(), _replace_all(99)))
    assert got.answer is None
    error = got.metadata["error"]
    assert error.startswith("RobustnessError: retriever_name 'no_such_retriever' matched none")
    assert RETRIEVER in error
    assert "not applied" in error
    _assert_restored()


def test_without_a_name_the_outermost_retrieval_is_perturbed(chain: Any) -> None:
    got = asyncio.run(LangChainRobustPipeline(chain).answer(_leave_question(), _replace_all(42)))
    assert got.answer == _fact(42).text
    assert [c.id for c in got.contexts] == ["fake-42"]


def test_a_sync_retriever_call_in_a_worker_thread_is_perturbed_too() -> None:
    """``invoke`` (not ``ainvoke``) reached from a sync step, which LangChain runs on a worker
    thread with the context copied."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda
    from langchain_core.vectorstores import InMemoryVectorStore

    from ragbridge.adapters.demo.handbook import documents

    store = InMemoryVectorStore(langchain_embeddings(HashEmbedder()))
    store.add_documents([Document(id=d.id, page_content=d.text) for d in documents()])
    retriever = store.as_retriever(search_kwargs={"k": 2})
    answerer = ExtractiveAnswerer()

    def answer(question: str) -> str:
        docs = retriever.invoke(question)
        return answerer.answer(question, [d.page_content for d in docs])

    pipeline = LangChainRobustPipeline(RunnableLambda(answer))
    got = asyncio.run(pipeline.answer(_leave_question(), _replace_all(5)))
    assert got.answer == _fact(5).text
    assert [c.id for c in got.contexts] == ["fake-5"]
    _assert_restored()


def test_unchanged_passages_keep_their_documents_and_new_ones_hide_the_markers() -> None:
    from langchain_core.documents import Document

    docs = [
        Document(id="a", page_content="A.", metadata={"title": "t"}),
        Document(page_content="B."),
    ]
    live = [Context(text="A.", id="a", metadata={"title": "t"}), Context(text="B.")]
    new = Context(text="N.", id="n", metadata={"robustness": "noise", "from": "q9", "title": "u"})
    out = lc_robust.documents_for(
        [Context(text="A.", id="a", metadata={"title": "t"}), new], live, docs
    )
    assert out[0] is docs[0]  # an equal context keeps the retrieved object
    assert (out[1].id, out[1].page_content, out[1].metadata) == ("n", "N.", {"title": "u"})
    assert lc_robust.documents_for([live[1]], live, docs)[0] is docs[1]


_IDENTITIES = """
from ragbridge.adapters.demo.pipelines import langchain_pipeline, llamaindex_pipeline
from ragbridge.adapters.robustness import robust_pipeline
from ragbridge.core.testing import HashEmbedder
for build in (langchain_pipeline, llamaindex_pipeline):
    print(robust_pipeline(build(HashEmbedder(), k=3)).identity)
"""


def test_default_identity_is_stable_across_builds_and_processes_and_follows_k() -> None:
    lc3 = LangChainRobustPipeline(langchain_pipeline(HashEmbedder(), k=3)).identity
    li3 = LlamaIndexRobustPipeline(llamaindex_pipeline(HashEmbedder(), k=3)).identity
    assert lc3 == LangChainRobustPipeline(langchain_pipeline(HashEmbedder(), k=3)).identity
    assert lc3 != LangChainRobustPipeline(langchain_pipeline(HashEmbedder(), k=2)).identity
    assert li3 == LlamaIndexRobustPipeline(llamaindex_pipeline(HashEmbedder(), k=3)).identity
    assert li3 != LlamaIndexRobustPipeline(llamaindex_pipeline(HashEmbedder(), k=2)).identity
    assert lc3.startswith("langchain_core.runnables.base.RunnableBinding@")
    assert li3.startswith("ragbridge.adapters.demo.pipelines.llamaindex_pipeline.")
    done = subprocess.run(
        [sys.executable, "-c", _IDENTITIES], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [lc3, li3]  # a rerun in a new process hits the cache
    named = LangChainRobustPipeline(langchain_pipeline(HashEmbedder()), identity="mine")
    assert named.identity == "mine"


# -- LlamaIndex ----------------------------------------------------------------------------------


def test_new_nodes_carry_the_context_id_and_hide_the_markers_from_the_llm() -> None:
    node = TextNode(text="A.", id_="n1", metadata={"title": "t"})
    items = [NodeWithScore(node=node, score=0.5)]
    live = [li_robust.node_to_context(items[0])]
    new = Context(text="N.", id="doc-9", score=0.1, metadata={"robustness": "noise", "from": "q9"})
    out = li_robust.nodes_for([live[0], new], live, items)
    assert out[0] is items[0]
    made = out[1]
    assert made.node.ref_doc_id == "doc-9"
    assert made.score == 0.1
    assert made.node.get_content(metadata_mode=MetadataMode.NONE) == "N."
    assert "noise" not in made.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "noise" not in made.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert li_robust.node_to_context(made).id == "doc-9"
    assert li_robust.node_to_context(made).metadata["robustness"] == "noise"
    by_node = li_robust.nodes_for([new], live, items, use_ref_doc_id=False)[0]
    assert by_node.node.node_id == "doc-9"


def test_a_partial_perturbation_keeps_the_other_retrieved_chunks(
    li: LlamaIndexRobustPipeline,
) -> None:
    sample = _leave_question()

    def keep_first(live: list[Context]) -> list[Context]:
        return [live[0], _fact(64)]

    clean = asyncio.run(li.answer(sample, None))
    got = asyncio.run(li.answer(sample, keep_first))
    assert got.contexts[0] == clean.contexts[0]
    assert got.contexts[1] == _fact(64)
    assert len(got.contexts) == 2


def test_a_retriever_query_engine_gets_the_perturbed_nodes_without_the_markers() -> None:
    """``index.as_query_engine`` (a ``RetrieverQueryEngine``) with LlamaIndex's ``MockLLM``,
    which answers with its prompt: the prompt holds the injected passage, not its marker."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms.mock import MockLLM

    from ragbridge.adapters.demo.pipelines import llamaindex_embedding

    nodes = [
        TextNode(text="Annual leave is 28 days.", id_="n1"),
        TextNode(text="Sick leave is 10 days.", id_="n2"),
        TextNode(text="Parking is free.", id_="n3"),
    ]
    index = VectorStoreIndex(nodes, embed_model=llamaindex_embedding(HashEmbedder()))
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    pipeline = LlamaIndexRobustPipeline(engine)
    sample = Sample(id="a", question="How long is annual leave?")
    fact = Context(text="Annual leave is 99 days.", id="fake", metadata={"robustness": "x"})
    got = asyncio.run(pipeline.answer(sample, lambda live: [live[0], fact]))
    assert got.answer is not None
    assert "Annual leave is 99 days." in got.answer
    assert "Sick leave" not in got.answer
    assert "robustness" not in got.answer
    assert got.contexts[1] == fact
    assert got.contexts[0].id == "n1"
    _assert_restored()


def test_the_llamaindex_pipeline_refuses_what_is_not_an_engine() -> None:
    with pytest.raises(TypeError):
        LlamaIndexRobustPipeline(object())


# -- the dispatcher ------------------------------------------------------------------------------


def test_robust_pipeline_picks_the_adapter(chain: Any, engine: Any) -> None:
    lc = robust_pipeline(chain, retriever_name=RETRIEVER)
    assert isinstance(lc, LangChainRobustPipeline)
    assert lc.retriever_name == RETRIEVER
    li = robust_pipeline(engine, identity="engine-v1")
    assert isinstance(li, LlamaIndexRobustPipeline)
    assert li.identity == "engine-v1"
    assert robust_pipeline(li) is li
    assert robust_pipeline(li, identity="ignored") is li  # it keeps its own
    with pytest.raises(TypeError, match="already a RobustPipeline"):
        robust_pipeline(li, retriever_name="x")
    with pytest.raises(TypeError, match="LangChain Runnable or a LlamaIndex"):
        robust_pipeline("not a pipeline")


def test_importing_the_dispatcher_imports_no_framework() -> None:
    code = (
        "import sys, ragbridge.adapters.robustness as r\n"
        "loaded = [m for m in ('langchain_core', 'llama_index.core') if m in sys.modules]\n"
        "assert loaded == [], loaded\n"
        "try:\n"
        "    r.robust_pipeline(object())\n"
        "except TypeError:\n"
        "    pass\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- end to end: the harness on both demo pipelines ----------------------------------------------


@pytest.mark.parametrize("name", PIPELINES)
def test_run_robustness_on_the_demo_pipeline_offline_and_a_rerun_pays_nothing(
    request: pytest.FixtureRequest, name: str, tmp_path: Any
) -> None:
    if importlib.util.find_spec("ragbridge.core.robustness.harness") is None:
        pytest.skip("core/robustness/harness.py (helper R3) is not in the tree yet")
    from ragbridge.core.robustness import default_conditions, run_robustness
    from ragbridge.core.settings import Settings

    pipeline = _pipeline(request, name)
    asked = [q for q in questions() if q.reference][:6]
    conds = default_conditions()
    settings = Settings(cache=tmp_path / "cache", embedder=HashEmbedder())
    first = run_robustness(pipeline, asked, conditions=conds, settings=settings)
    assert [c.name for c in first.conditions] == [c.name for c in conds]
    skipped = sum(len(s.skipped) for s in first.summary)
    assert first.pipeline_calls == len(asked) * len(conds) - skipped
    assert first.pipeline_calls > len(asked)  # more than the clean run was answered
    for summary in first.summary:
        assert summary.errors == 0, (summary.name, summary.skipped)
    by_id = {s.id: s for s in first.samples}
    for sample in first.samples:
        assert "robustness_error" not in sample.metadata
        assert "error" not in sample.metadata, sample.metadata["error"]
    for source in asked:  # the contexts recorded are the perturbed ones the pipeline was given
        clean = by_id[f"{source.id}@noise@0"]
        assert not any(c.metadata.get("robustness") for c in clean.contexts)
        noisy = by_id.get(f"{source.id}@noise@0.8")
        if noisy is not None:
            assert any(c.metadata.get("robustness") == "noise" for c in noisy.contexts)
        negative = by_id.get(f"{source.id}@negative")
        if negative is not None:
            assert negative.contexts
            assert all(c.metadata.get("robustness") == "negative" for c in negative.contexts)
    again = run_robustness(pipeline, asked, conditions=conds, settings=settings)
    assert again.pipeline_calls == 0
    assert again.answers_cached == first.pipeline_calls
    assert [s.to_dict() for s in again.summary] == [s.to_dict() for s in first.summary]
    _assert_restored()
