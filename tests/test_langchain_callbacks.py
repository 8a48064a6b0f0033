"""The LangChain capture's callbacks, written once (`ragbridge.adapters.langchain.capture`).

A nested ``capture_retrievals`` block's capture is the only handler LangChain calls; it passes
each event it records on to the enclosing block's capture. These tests drive the *sync* path
(``invoke``), where LangChain passes the most keywords (``on_tool_start`` gets ``inputs=``
besides its positional ``input_str``), through a retriever wrapped as an agent tool, a chat
model and a failing retriever, and check that the inner and the outer capture record the same.
"""

from __future__ import annotations

import inspect
import itertools

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.callbacks.manager import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import create_retriever_tool

from ragbridge.adapters.langchain import RetrievalCapture, capture_retrievals


class _Shelf(BaseRetriever):
    """Returns one document named after the query, or fails when asked to."""

    fail: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.fail:
            raise RuntimeError("the shelf is empty")
        return [Document(id=f"doc-{query}", page_content=f"about {query}")]


class _NamedChat(GenericFakeChatModel):
    """A fake chat model reporting a model name (``ls_model_name``), as real ones do."""

    model_name: str = "named-model"


def test_every_recorded_event_is_passed_to_the_enclosing_capture() -> None:
    """Each ``on_*`` callback the capture overrides hands its event on (a recorder added
    without the wrapper would leave an enclosing ``capture_retrievals`` block blind to it)."""
    overridden = [
        name
        for name, member in vars(RetrievalCapture).items()
        if name.startswith("on_") and hasattr(BaseCallbackHandler, name)
    ]
    assert sorted(overridden) == [
        "on_chain_start",
        "on_chat_model_start",
        "on_llm_start",
        "on_retriever_end",
        "on_retriever_error",
        "on_retriever_start",
        "on_tool_start",
    ]
    for name in overridden:
        assert hasattr(vars(RetrievalCapture)[name], "__wrapped__"), name
        # LangChain dispatches by name: the handed-on event keeps the callback's own signature
        assert "run_id" in inspect.signature(getattr(RetrievalCapture, name)).parameters


def test_nested_captures_see_a_tool_retrieval_and_the_model_under_sync_invoke() -> None:
    tool = create_retriever_tool(_Shelf(), "search", "Searches the shelf.")
    chat = _NamedChat(messages=itertools.cycle(["an answer"]))
    chain = RunnableLambda(lambda q: {"query": q}) | tool | chat

    with capture_retrievals(id_key="missing") as outer:
        chain.invoke("apples")
        with capture_retrievals() as inner:
            chain.invoke("pears")

    assert [r.query for r in outer.retrievals] == ["apples", "pears"]
    assert [r.query for r in inner.retrievals] == ["pears"]
    for cap in (inner, outer):
        root = cap.roots()[-1]
        # the retrieval ran inside the tool run: it groups under the chain's root only when
        # the tool's start (called with input_str and inputs=) was recorded
        assert cap.root_input(root) == "pears"
        assert [c.id for c in cap.contexts(root)] == ["doc-pears"]
        assert cap.models_for(root) == ["named-model"]
    # each capture reads ids with its own settings, whoever recorded the event
    assert outer.retrievals[-1].id_key == "missing"
    assert inner.retrievals[-1].id_key is None


def test_nested_captures_both_record_a_failed_retrieval() -> None:
    failing = _Shelf(fail=True)
    with (
        capture_retrievals() as outer,
        capture_retrievals() as inner,
        pytest.raises(RuntimeError, match="shelf is empty"),
    ):
        failing.invoke("figs")
    for cap in (inner, outer):
        (record,) = cap.retrievals
        assert isinstance(record.error, RuntimeError)
        assert record.documents is None
        assert record.ended is not None
        chosen, info = cap.select(cap.roots()[0])
        assert chosen is None
        assert info["retrieval_errors"] == ["RuntimeError: the shelf is empty"]


def test_a_capture_passed_as_a_callback_forwards_nothing() -> None:
    """Only `capture_retrievals` links captures; one passed in ``config`` stands alone."""
    cap = RetrievalCapture()
    with capture_retrievals() as block:
        _Shelf().invoke("plums", config={"callbacks": [cap]})
    assert [r.query for r in cap.retrievals] == ["plums"]
    assert [r.query for r in block.retrievals] == ["plums"]  # the hook adds the block's own
    assert cap._forward == ()
