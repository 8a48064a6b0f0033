"""The offline demo pipelines (`ragbridge.adapters.demo.pipelines`) with the real frameworks.

Both pipelines run over every handbook question through ragbridge's own adapters
(`run_pipeline` for LangChain, `run_query_engine` for LlamaIndex), with the packaged
all-MiniLM-L6-v2 and the network forbidden; each runs once per module (fixtures), and the tests
read the filled-in samples field by field. The bridges and the `ExtractiveAnswerer` are also
tested on their own, with ragbridge's model-free `HashEmbedder` where retrieval quality does not
matter.

Skipped as a whole when LangChain, LlamaIndex or the ``local`` extra (tokenizers, for the
default numpy embedder) is missing (``find_spec``, so collection imports nothing heavy).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _module, _extra in [
    ("langchain_core", "langchain"),
    ("llama_index.core", "llamaindex"),
    ("tokenizers", "local"),
]:
    try:
        _found = importlib.util.find_spec(_module) is not None
    except ModuleNotFoundError:
        _found = False
    if not _found:
        pytest.skip(
            f'{_module} is not installed (pip install ".[{_extra}]")',
            allow_module_level=True,
        )

from ragbridge.adapters.demo import (  # noqa: E402 - after the skip check, by design
    FALLBACK_ANSWER,
    GENERATOR_MODEL,
    LANGCHAIN_PIPELINE,
    LLAMAINDEX_PIPELINE,
    ExtractiveAnswerer,
    corpus,
    langchain_pipeline,
    llamaindex_pipeline,
    questions,
    run_langchain_demo,
    run_llamaindex_demo,
)
from ragbridge.adapters.demo.pipelines import (  # noqa: E402
    CachedEmbedder,
    langchain_embeddings,
    llamaindex_embedding,
    split_sentences,
    tag_samples,
)
from ragbridge.adapters.langchain import run_pipeline  # noqa: E402
from ragbridge.adapters.llamaindex import run_query_engine  # noqa: E402
from ragbridge.adapters.local import LocalEmbedder  # noqa: E402
from ragbridge.core import evaluate  # noqa: E402
from ragbridge.core.cache.disk import Cache  # noqa: E402
from ragbridge.core.sample import Sample  # noqa: E402
from ragbridge.core.testing import HashEmbedder  # noqa: E402

K = 4


@pytest.fixture(scope="module")
def offline() -> Iterator[list[Any]]:
    """Offline Hugging Face settings for the whole module; any connection attempt fails it."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(address)
        raise OSError(f"test forbids network access (tried to connect to {address!r})")

    def refuse_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        raise OSError(f"test forbids network access (tried to resolve {host!r})")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket.socket, "connect_ex", refuse)
        mp.setattr(socket, "getaddrinfo", refuse_lookup)
        yield attempts
    assert attempts == [], f"the demo pipelines tried to use the network: {attempts}"


@pytest.fixture(scope="module")
def embedder(offline: list[Any]) -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="module")
def lc_run(embedder: LocalEmbedder) -> list[Sample]:
    return run_langchain_demo(embedder=embedder, k=K)


@pytest.fixture(scope="module")
def li_run(embedder: LocalEmbedder) -> list[Sample]:
    return run_llamaindex_demo(embedder=embedder, k=K)


RUNS = ["lc_run", "li_run"]
NAMES = {"lc_run": LANGCHAIN_PIPELINE, "li_run": LLAMAINDEX_PIPELINE}


def _run(request: pytest.FixtureRequest, name: str) -> list[Sample]:
    ran: list[Sample] = request.getfixturevalue(name)
    return ran


# -- both pipelines, all questions ----------------------------------------------------------------


@pytest.mark.parametrize("name", RUNS)
def test_one_filled_sample_per_question_with_labels_kept(
    request: pytest.FixtureRequest, name: str
) -> None:
    ran = _run(request, name)
    asked = questions()
    assert [s.id for s in ran] == [q.id for q in asked]
    for got, want in zip(ran, asked, strict=True):
        assert got.question == want.question
        assert got.reference == want.reference
        assert got.relevance == want.relevance
        assert got.metadata["kind"] == want.metadata["kind"]
        assert "error" not in got.metadata, got.metadata.get("error")
        assert isinstance(got.answer, str), got.id
        assert got.answer.strip(), got.id
        assert got.metadata["pipeline"] == NAMES[name]
        assert got.metadata["generator_model"] == GENERATOR_MODEL == "extractive-answerer"
        assert got.metadata["embedding_model"] == "all-MiniLM-L6-v2:fp16"  # the numpy default
        assert got.metadata["retrieval_k"] == K
        assert got.metadata["latency_s"] >= 0


@pytest.mark.parametrize("name", RUNS)
def test_contexts_carry_document_ids_and_their_text(
    request: pytest.FixtureRequest, name: str
) -> None:
    texts = corpus()
    for sample in _run(request, name):
        assert len(sample.contexts) == K, sample.id
        for ctx in sample.contexts:
            assert ctx.id in texts, (sample.id, ctx.id)
            if name == "lc_run":
                assert ctx.text == texts[ctx.id]  # whole documents
                assert ctx.metadata["title"]
            else:
                assert ctx.text in texts[ctx.id]  # a chunk of the document ...
                assert ctx.text != texts[ctx.id]  # ... not all of it
                assert ctx.metadata["ref_doc_id"] == ctx.id
                assert ctx.metadata["node_id"] != ctx.id


def test_the_two_pipelines_rank_differently(lc_run: list[Sample], li_run: list[Sample]) -> None:
    # LlamaIndex returns chunks, so one document can fill several ranks; LangChain cannot.
    assert all(len(set(s.context_ids)) == K for s in lc_run)
    assert sum(len(set(s.context_ids)) < K for s in li_run) >= 10
    differing = sum(a.context_ids != b.context_ids for a, b in zip(lc_run, li_run, strict=True))
    assert differing >= 20


@pytest.mark.parametrize("name", RUNS)
def test_answers_are_quoted_from_the_retrieved_contexts(
    request: pytest.FixtureRequest, name: str
) -> None:
    answered = 0
    for sample in _run(request, name):
        if sample.answer == FALLBACK_ANSWER:
            continue
        answered += 1
        retrieved = " ".join(c.text for c in sample.contexts)
        for sentence in split_sentences(sample.answer or ""):
            assert sentence in retrieved, (sample.id, sentence)
    assert answered >= 20


@pytest.mark.parametrize("name", RUNS)
def test_no_answer_questions_get_the_fallback(request: pytest.FixtureRequest, name: str) -> None:
    ran = _run(request, name)
    no_answer = [s for s in ran if s.is_no_answer]
    assert len(no_answer) >= 4
    assert [s.answer for s in no_answer] == [FALLBACK_ANSWER] * len(no_answer)
    # ... while most single-hop questions are answered, with the reference's numbers in them.
    number = re.compile(r"\d+(?:[.,:]\d+)*")
    right = 0
    for s in ran:
        if s.metadata["kind"] == "single-hop":
            assert s.answer != FALLBACK_ANSWER, s.id
            right += set(number.findall(s.reference or "")) <= set(number.findall(s.answer or ""))
    assert right >= 15


def _recall(sample: Sample, k: int) -> float:
    assert sample.relevance
    relevant = {d for d, g in sample.relevance.items() if g >= 1}
    return len(relevant & set(sample.context_ids[:k])) / len(relevant)


@pytest.mark.parametrize("name", RUNS)
def test_retrieval_quality_is_sane(request: pytest.FixtureRequest, name: str) -> None:
    ran = _run(request, name)
    answerable = [s for s in ran if not s.is_no_answer]
    evaluation = evaluate(ran, ["recall@4", "hit_rate@4", "mrr", "ndcg@4"])
    summary = evaluation.summary()
    recall = summary["recall@4"]
    assert recall.n_scored == len(answerable) == 37
    assert recall.mean is not None
    assert recall.mean >= 0.6
    # The core's per-sample values are the hand-computed ones.
    for sample in answerable:
        score = evaluation.get(sample.id, "recall@4")
        assert score is not None, sample.id
        assert score.value == pytest.approx(_recall(sample, 4)), sample.id
    assert recall.mean == pytest.approx(sum(_recall(s, 4) for s in answerable) / len(answerable))
    hit = summary["hit_rate@4"].mean
    mrr = summary["mrr"].mean
    assert hit is not None
    assert hit >= 0.9
    assert mrr is not None
    assert mrr >= 0.8
    for sample in ran:
        if sample.is_no_answer:  # ranking measures are undefined without a relevant document
            score = evaluation.get(sample.id, "recall@4")
            assert score is None or score.value is None


# -- building blocks, model-free ------------------------------------------------------------------


def test_langchain_pipeline_runs_with_the_plain_adapter_and_any_embedder() -> None:
    chain = langchain_pipeline(HashEmbedder(), k=2)
    ran = run_pipeline(chain, questions()[:3], retriever_name="handbook_retriever")
    assert [s.id for s in ran] == ["q01", "q02", "q03"]
    texts = corpus()
    for s in ran:
        assert len(s.contexts) == 2
        assert all(c.id in texts and c.text == texts[c.id] for c in s.contexts)
        assert s.metadata["retriever"] == "handbook_retriever"
        assert "pipeline" not in s.metadata  # only the run_*_demo helpers tag
    # The chain itself: question in, answer string out.
    answer = chain.invoke("Who is the data protection officer?")
    assert isinstance(answer, str)
    assert answer


def test_llamaindex_pipeline_runs_with_the_plain_adapter_and_any_embedder() -> None:
    engine = llamaindex_pipeline(HashEmbedder(), k=3)
    ran = run_query_engine(engine, questions()[:3])
    texts = corpus()
    for s in ran:
        assert len(s.contexts) == 3
        assert all(c.id in texts and c.text in texts[c.id] for c in s.contexts)
    response = engine.query("How long does the probation period last?")
    assert len(response.source_nodes) == 3
    assert response.metadata == {"generator_model": GENERATOR_MODEL}


def test_run_langchain_demo_reuses_a_chain_already_built() -> None:
    """Building the chain embeds the handbook; running a built one embeds only the questions
    (the CLI demo builds it once for its run and its LangSmith step)."""
    inner = HashEmbedder()
    chain = langchain_pipeline(inner, k=2)
    built = inner.texts_embedded
    assert built == len(corpus())
    ran = run_langchain_demo(questions()[:3], embedder=inner, k=2, chain=chain)
    assert inner.texts_embedded == built + 3
    assert [s.metadata["pipeline"] for s in ran] == [LANGCHAIN_PIPELINE] * 3


def test_a_cached_embedder_makes_a_rebuild_and_a_rerun_embed_nothing(tmp_path: Path) -> None:
    inner = HashEmbedder()
    with Cache(tmp_path / "cache.sqlite") as cache:
        cached = CachedEmbedder(inner, cache)
        assert cached.model == inner.model  # the cache key and the samples' embedding_model
        first = run_langchain_demo(questions()[:4], embedder=cached, k=2)
        spent = inner.texts_embedded
        assert spent == len(corpus()) + 4
    with Cache(tmp_path / "cache.sqlite") as cache:  # a new process, the same folder
        again = run_langchain_demo(questions()[:4], embedder=CachedEmbedder(inner, cache), k=2)
    assert inner.texts_embedded == spent
    assert [(s.answer, s.contexts) for s in again] == [(s.answer, s.contexts) for s in first]


def test_k_is_validated() -> None:
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        langchain_pipeline(HashEmbedder(), k=0)
    with pytest.raises(ValueError, match="k must be a positive integer, got True"):
        llamaindex_pipeline(HashEmbedder(), k=True)


def test_tag_samples_adds_pipeline_and_generator_and_keeps_the_rest() -> None:
    original = Sample(id="a", question="q?", metadata={"kind": "single-hop"})
    (tagged,) = tag_samples([original], "mine", retrieval_k=3)
    assert tagged.metadata == {
        "kind": "single-hop",
        "pipeline": "mine",
        "generator_model": "extractive-answerer",
        "retrieval_k": 3,
    }
    assert original.metadata == {"kind": "single-hop"}


def test_langchain_embeddings_bridge_gives_the_embedders_vectors() -> None:
    inner = HashEmbedder()
    bridge = langchain_embeddings(inner)
    want = asyncio.run(HashEmbedder().embed(["annual leave", "sick leave"]))
    assert bridge.embed_documents(["annual leave", "sick leave"]) == want
    assert bridge.embed_query("sick leave") == want[1]
    assert asyncio.run(bridge.aembed_documents(["annual leave"])) == want[:1]
    assert asyncio.run(bridge.aembed_query("annual leave")) == want[0]

    async def sync_call_inside_a_running_loop() -> list[float]:
        return bridge.embed_query("annual leave")

    assert asyncio.run(sync_call_inside_a_running_loop()) == want[0]
    assert inner.texts_embedded == 6


def test_llamaindex_embedding_bridge_gives_the_embedders_vectors() -> None:
    inner = HashEmbedder()
    bridge = llamaindex_embedding(inner, embed_batch_size=2)
    want = asyncio.run(HashEmbedder().embed(["a b", "c d", "e f"]))
    assert bridge.model_name == "hash-embedder"
    assert bridge.get_text_embedding_batch(["a b", "c d", "e f"]) == want
    assert bridge.get_query_embedding("c d") == want[1]
    assert asyncio.run(bridge.aget_query_embedding("e f")) == want[2]
    assert asyncio.run(bridge.aget_text_embedding_batch(["a b", "e f"])) == [want[0], want[2]]


# -- the extractive answerer ----------------------------------------------------------------------

SICK = corpus()["leave-sick"]
CHILD = corpus()["leave-child-sick"]


def test_answerer_quotes_the_best_matching_sentence() -> None:
    answerer = ExtractiveAnswerer(corpus().values())
    answer = answerer.answer("From which day is a doctor's certificate required?", [CHILD, SICK])
    assert answer == (
        "A doctor's certificate is required from the fourth calendar day of illness onwards "
        "and is uploaded to Lumen."
    )


def test_answerer_falls_back_when_the_question_is_not_covered() -> None:
    answerer = ExtractiveAnswerer(corpus().values())
    (jury,) = [q for q in questions("no-answer") if "jury" in q.question]
    assert answerer.answer(jury.question, [corpus()["leave-special"], SICK]) == FALLBACK_ANSWER
    assert answerer.answer("Can I bring my dog to the office?", [SICK]) == FALLBACK_ANSWER
    assert answerer.answer("What is the dress code?", []) == FALLBACK_ANSWER
    assert answerer.answer("the and of?", [SICK]) == FALLBACK_ANSWER  # no content words
    custom = ExtractiveAnswerer(fallback="Not in the handbook.")
    assert custom.answer("Is there a company daycare?", [SICK]) == "Not in the handbook."


def test_answerer_adds_a_second_sentence_for_the_other_half_of_a_question() -> None:
    answerer = ExtractiveAnswerer(corpus().values())
    answer = answerer.answer(
        "How many days can single parents take, and when is a paediatrician note needed?",
        [CHILD],
    )
    assert answer == (
        "Single parents may take up to 20 such days per child per year. "
        "A note from the paediatrician is needed from the third day."
    )
    one = ExtractiveAnswerer(corpus().values(), max_sentences=1)
    assert (
        one.answer(
            "How many days can single parents take, and when is a paediatrician note needed?",
            [CHILD],
        )
        == "A note from the paediatrician is needed from the third day."
    )


def test_answerer_ranking_is_deterministic_and_bounded() -> None:
    answerer = ExtractiveAnswerer()  # IDF from the contexts at hand
    ranked = answerer.rank("Who do I notify when I am ill?", [SICK, CHILD])
    assert ranked == answerer.rank("Who do I notify when I am ill?", [SICK, CHILD])
    assert all(0.0 <= s.coverage <= 1.0 for s in ranked)
    assert [s.coverage for s in ranked] == sorted((s.coverage for s in ranked), reverse=True)
    assert ranked[0].text.startswith("Employees who are unwell and cannot work notify")
    assert ranked[0].terms == frozenset({"notify"})
    assert len(ranked) == len(split_sentences(SICK)) + len(split_sentences(CHILD))


def test_answerer_rejects_bad_settings_and_a_bare_string() -> None:
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\], got 1\.5"):
        ExtractiveAnswerer(threshold=1.5)
    with pytest.raises(ValueError, match="max_sentences must be >= 1, got 0"):
        ExtractiveAnswerer(max_sentences=0)
    with pytest.raises(ValueError, match="second_gain must be in"):
        ExtractiveAnswerer(second_gain=-0.1)
    with pytest.raises(TypeError, match="not a single string"):
        ExtractiveAnswerer().answer("q?", SICK)  # a str is a Sequence[str]: checked at run time


# -- import fences --------------------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_importing_the_demo_imports_no_framework_and_no_torch() -> None:
    done = _python(
        "import sys, ragbridge.adapters.demo as d; d.questions(); d.corpus();"
        "heavy = [m for m in ('langchain_core', 'llama_index', 'torch') if m in sys.modules];"
        "print(heavy)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_missing_framework_names_the_extra() -> None:
    done = _python(
        "import sys; sys.modules['langchain_core'] = None; sys.modules['llama_index'] = None\n"
        "from ragbridge.adapters.demo import langchain_pipeline, llamaindex_pipeline\n"
        "from ragbridge.core.testing import HashEmbedder\n"
        "for build in (langchain_pipeline, llamaindex_pipeline):\n"
        "    try:\n"
        "        build(HashEmbedder())\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2
    assert 'pip install ".[langchain]" (in your ragbridge clone)' in lines[0]
    assert 'pip install ".[llamaindex]" (in your ragbridge clone)' in lines[1]


_ANSWER_IN_A_FRESH_PROCESS = """
import json
from ragbridge.adapters.demo.handbook import document
from ragbridge.adapters.demo.pipelines import _answerer
ids = ["leave-child-sick", "leave-sick", "leave-parental", "leave-carryover"]
question = "How many child sick days can a single parent take per child per year?"
print(json.dumps(_answerer().answer(question, [document(i).full_text for i in ids])))
"""


def test_the_answerer_does_not_depend_on_the_hash_seed() -> None:
    """Two sentences of this context tie on coverage; summing the IDF weights in set order
    (which follows PYTHONHASHSEED) broke the tie by rounding differently per process, so a
    demo rerun could answer differently (seeds 0 and 26 did). Sums are exact now (fsum)."""
    answers = {
        subprocess.run(
            [sys.executable, "-c", _ANSWER_IN_A_FRESH_PROCESS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (0, 1, 26)
    }
    assert len(answers) == 1, answers
