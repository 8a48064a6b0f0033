"""Test sets from documents: the judge writes questions, references and quotes; filters check them.

``generate_testset(documents, size=50, ...)`` returns ``(samples, report)``: ragbridge `Sample`s
ready for ``ragbridge run`` (question, reference, reference contexts, relevance, no answer yet)
and a `TestsetReport` counting what was written, dropped and spent. ``estimate_testset`` is the
dry run. Modules, by what they hold:

* `documents` — `SourceDocument`; reading a JSONL corpus or a folder of ``.txt``/``.md`` files;
* `chunks` — splitting long documents into ``docid#n`` chunks (and why those ids);
* `styles` — question styles, stated proportions, exact counts;
* `plan` — `TestsetSpec` and the seeded, deterministic requests of each round;
* `prompting` — each request's prompt (templates in `ragbridge.core.prompts.testset`);
* `passages` — the check that a quote occurs in its source;
* `dedup` — near-duplicate questions by embedding;
* `no_answer` — retrieval and the judge's check of no-answer candidates;
* `estimate` — the dry run; `report` — the counts; `generate` — the run itself.

Framework documents come in through adapters: ``ragbridge.adapters.langchain.source_documents``
(LangChain ``Document``s) and ``ragbridge.adapters.llamaindex.source_documents`` (LlamaIndex
nodes and Documents).
"""

from __future__ import annotations

from .chunks import DEFAULT_CHUNK_CHARS, Chunk, split_documents
from .dedup import DEFAULT_DEDUP_THRESHOLD, NearDuplicates
from .documents import DocumentsError, SourceDocument, load_documents
from .estimate import TestsetEstimate, estimate_testset
from .generate import Testset, agenerate_testset, generate_testset
from .no_answer import NO_ANSWER_REFERENCE
from .passages import locate_passage
from .plan import TestsetSpec
from .report import TestsetReport
from .styles import DEFAULT_NO_ANSWER_SHARE, DEFAULT_STYLES, STYLES, parse_styles

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_DEDUP_THRESHOLD",
    "DEFAULT_NO_ANSWER_SHARE",
    "DEFAULT_STYLES",
    "NO_ANSWER_REFERENCE",
    "STYLES",
    "Chunk",
    "DocumentsError",
    "NearDuplicates",
    "SourceDocument",
    "Testset",
    "TestsetEstimate",
    "TestsetReport",
    "TestsetSpec",
    "agenerate_testset",
    "estimate_testset",
    "generate_testset",
    "load_documents",
    "locate_passage",
    "parse_styles",
    "split_documents",
]
