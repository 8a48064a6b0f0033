"""A ready-made demo for ragbridge: a fictional employee handbook, labelled questions, and two
offline RAG pipelines (LangChain and LlamaIndex) that answer them.

Why it exists: evaluating a RAG system needs a corpus, an eval set and a pipeline before the first
score can be shown. This package ships all three, fully offline and deterministic, so the CLI demo,
the examples and the tests can show real framework pipelines being captured and scored without an
API key.

* `ragbridge.adapters.demo.handbook`: the data (`corpus`, `documents`, `questions`). Needs only
  the core.
* `ragbridge.adapters.demo.pipelines`: `ExtractiveAnswerer`, `langchain_pipeline`,
  `llamaindex_pipeline` and the `run_*_demo` helpers. Each pipeline needs its framework's extra
  and the ``local`` extra (for the default embedding model); the module itself imports neither.
"""

from __future__ import annotations

from .handbook import COMPANY, HandbookDocument, corpus, document, documents, questions
from .pipelines import (
    FALLBACK_ANSWER,
    GENERATOR_MODEL,
    LANGCHAIN_PIPELINE,
    LLAMAINDEX_PIPELINE,
    ExtractiveAnswerer,
    langchain_pipeline,
    llamaindex_pipeline,
    run_langchain_demo,
    run_llamaindex_demo,
)

__all__ = [
    "COMPANY",
    "FALLBACK_ANSWER",
    "GENERATOR_MODEL",
    "LANGCHAIN_PIPELINE",
    "LLAMAINDEX_PIPELINE",
    "ExtractiveAnswerer",
    "HandbookDocument",
    "corpus",
    "document",
    "documents",
    "langchain_pipeline",
    "llamaindex_pipeline",
    "questions",
    "run_langchain_demo",
    "run_llamaindex_demo",
]
