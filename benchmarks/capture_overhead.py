"""Latency that capturing retrievals adds to a pipeline (LangChain and LlamaIndex).

    python benchmarks/capture_overhead.py [--calls 2000]

For each framework: a retriever that returns 5 documents, called ``--calls`` times, without
capture and with ragbridge's capture (the callback handler, and the context-manager hook that
needs no change to the chain). Reported per call: the added time, measured with an instant retriever
so sleep jitter cannot hide it (best of 3), and that time as a share of a 10 ms retriever.
Targets: < 0.5 ms and < 5% of a 10 ms retriever.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

SLEEP = 0.010


def timed(fn: Callable[[], Any], calls: int, repeat: int = 3) -> float:
    """Best-of-``repeat`` seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def slow_call_seconds() -> float:
    """What a 10 ms retriever really takes here (sleep overshoots), for the share column."""
    return timed(lambda: time.sleep(SLEEP), 100, repeat=1)


def langchain_rows(calls: int) -> list[tuple[str, float]]:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from ragbridge.adapters.langchain import RetrievalCapture, capture_retrievals

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content=f"passage {i} on {query}", id=f"d{i}") for i in range(5)]

    retriever = Fixed()
    handler = RetrievalCapture()
    base = timed(lambda: retriever.invoke("q"), calls)
    with_handler = timed(lambda: retriever.invoke("q", config={"callbacks": [handler]}), calls)
    with capture_retrievals():
        with_hook = timed(lambda: retriever.invoke("q"), calls)
    return [
        ("LangChain, callback handler", with_handler - base),
        ("LangChain, context manager (hook)", with_hook - base),
    ]


def llamaindex_rows(calls: int) -> list[tuple[str, float]]:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from ragbridge.adapters.llamaindex import capture_retrievals

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [
                NodeWithScore(node=TextNode(text=f"passage {i}", id_=f"n{i}"), score=1.0 - i / 10)
                for i in range(5)
            ]

    retriever = Fixed()
    base = timed(lambda: retriever.retrieve("q"), calls)
    with capture_retrievals():
        captured = timed(lambda: retriever.retrieve("q"), calls)
    return [("LlamaIndex, instrumentation handler", captured - base)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    print(f"# python benchmarks/capture_overhead.py --calls {args.calls}")
    rows: list[tuple[str, float]] = []
    for name, build in (("langchain", langchain_rows), ("llamaindex", llamaindex_rows)):
        try:
            rows.extend(build(args.calls))
        except ImportError as exc:
            print(f"skipped {name}: {exc}", file=sys.stderr)
    slow = slow_call_seconds()
    print(f"{'capture':<40} {'added per call':>15} {'of a 10 ms retriever':>21}")
    for label, added in rows:
        print(f"{label:<40} {added * 1000:12.3f} ms {added / slow:20.2%}")
    if rows:
        worst = max(added for _, added in rows)
        print(
            f"worst: {worst * 1000:.3f} ms per call (target < 0.5 ms), "
            f"{worst / slow:.2%} of a 10 ms retriever (target < 5%)"
        )


if __name__ == "__main__":
    main()
