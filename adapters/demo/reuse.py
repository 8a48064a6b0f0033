"""What a rerun of ``ragbridge demo`` reads back from its cache instead of computing again.

A rerun in the same folder runs both pipelines again, scores, exports and reports again; what
it reads back is only what an earlier run computed from the same inputs, with the same code
and the same installed packages. Before this module, a rerun took about 0.6-0.8x the first
run, three quarters of it Python importing frameworks, two of them for a result already on
disk:

* **LlamaIndex's chunks of the handbook.** The pipeline splits the documents with LlamaIndex's
  ``SentenceSplitter``, whose sentence tokenizer is nltk's Punkt; importing nltk (which imports
  scipy.stats and scikit-learn) was ~15% of a rerun, to produce the same chunks again. The
  pipeline ingests through LlamaIndex's own ``IngestionPipeline`` and ``IngestionCache``, which
  hands back the nodes of a transformation it has seen (same documents, same splitter
  settings: LlamaIndex's hash); `KeptIngestion` keeps that cache in the demo's cache file.
* **The ragbridge vs RAGAS comparison.** Importing RAGAS was ~15% of a rerun, to compute the
  same string and id-based scores of the same answers. `Kept` keeps the comparison under a key
  of everything that decides it: the LangChain samples (less ``metadata["latency_s"]``, which
  differs on every run and which no compared measure reads) and the embedding model. (The
  RAGAS dataset file needs no RAGAS at all: `ragbridge.adapters.ragas.rows`.)

Both are kept under `environment_digest`: ragbridge's own source, the Python version, and the
name and version of every installed distribution. An edit of ragbridge, or an upgraded
LlamaIndex, nltk, RAGAS, sacrebleu, ..., makes the rerun compute again; so does a changed
answer or retrieval. The demo says on stderr what it reused. Entries live in the ``results``
table of the cache (``metric`` = ``demo:<what>``); ``ragbridge cache prune --old-prompts``
removes them, which costs one recomputation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.core.cache.backend import CacheBackend
from ragbridge.core.sample import Sample

if TYPE_CHECKING:  # LlamaIndex is imported when its cache is asked for
    from llama_index.core.ingestion import IngestionCache

__all__ = ["VOLATILE", "Kept", "KeptIngestion", "comparison_inputs", "environment_digest"]

VOLATILE = ("latency_s",)
"""Sample metadata that differs between two runs of the same pipeline on the same question, and
that nothing the comparison computes reads: left out of its key."""


def _distributions() -> list[str]:
    """``name-version.dist-info`` (or ``.egg-info``) of every installed distribution, sorted.

    Read from the folder names on ``sys.path`` (no metadata file is opened); the working
    directory is skipped, so where the demo is started from does not matter.
    """
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # a working directory that was removed
        here = None
    names: set[str] = set()
    for entry in sys.path:
        if not entry:
            continue
        folder = Path(entry)
        try:
            if folder.resolve() == here:
                continue
            with os.scandir(folder) as found:
                names.update(e.name for e in found if e.name.endswith((".dist-info", ".egg-info")))
        except OSError:  # a zip file, a missing folder
            continue
    return sorted(names)


@functools.cache
def environment_digest() -> str:
    """A digest of what decides a kept result besides its inputs: every ``.py`` file of
    ``ragbridge.core`` and ``ragbridge.adapters``, the Python version, and the installed
    distributions with their versions. Computed once per process (~20 ms)."""
    import ragbridge.adapters
    import ragbridge.core

    digest = hashlib.sha256(sys.version.encode())
    for name in _distributions():
        digest.update(b"\0" + name.encode())
    for package in (ragbridge.core, ragbridge.adapters):
        assert package.__file__ is not None
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(b"\0" + path.relative_to(root.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


class Kept:
    """One text the demo keeps in the cache's ``results`` table, under a key of ``what``, its
    ``inputs`` and `environment_digest`."""

    def __init__(self, cache: CacheBackend, what: str, inputs: str = "") -> None:
        self.what = what
        self._cache = cache
        body = "\0".join(("ragbridge demo", what, environment_digest(), inputs))
        self.key = f"demo:{what}:{hashlib.sha256(body.encode()).hexdigest()}"

    def load(self) -> str | None:
        """The kept text, or None when nothing is kept under this key."""
        return self._cache.get_results([self.key]).get(self.key)

    def save(self, text: str) -> None:
        self._cache.put_results([(self.key, f"demo:{self.what}", environment_digest(), text)])


def comparison_inputs(samples: Iterable[Sample], embedder_model: str) -> str:
    """What the framework comparison reads, as canonical JSON: the samples, less `VOLATILE`
    metadata, and the embedding model (the offline measures' vectors)."""
    rows: list[dict[str, Any]] = []
    for sample in samples:
        row = sample.model_dump(mode="json")
        row["metadata"] = {k: v for k, v in row["metadata"].items() if k not in VOLATILE}
        rows.append(row)
    return json.dumps(
        {"embedder": embedder_model, "samples": rows}, sort_keys=True, ensure_ascii=False
    )


class KeptIngestion:
    """LlamaIndex's ``IngestionCache`` (``.cache``), loaded from and saved to the demo's cache.

    Pass ``.cache`` to `ragbridge.adapters.demo.pipelines.run_llamaindex_demo`, then call
    `save`: it keeps what LlamaIndex added and says whether LlamaIndex served every
    transformation from the cache (nothing was added). LlamaIndex's own key covers the text and
    metadata of the documents and the splitter's settings, not the document ids the chunks
    carry; the handbook's documents, ids included, are part of this entry's key.
    """

    def __init__(self, cache: CacheBackend) -> None:
        from llama_index.core.ingestion import IngestionCache
        from llama_index.core.storage.kvstore import SimpleKVStore

        from .handbook import documents

        handbook = [[d.id, d.title, d.text] for d in documents()]
        self._kept = Kept(cache, "llamaindex-ingestion", json.dumps(handbook, ensure_ascii=False))
        text = self._kept.load()
        try:
            data = json.loads(text) if text else {}
        except json.JSONDecodeError:
            data = {}
        self.cache: IngestionCache = IngestionCache(
            cache=SimpleKVStore.from_dict(data if isinstance(data, dict) else {})
        )
        self._before = self._entries()

    def _entries(self) -> set[tuple[str, str]]:
        store: Any = self.cache.cache
        return {(c, key) for c, entries in store.to_dict().items() for key in entries}

    def save(self) -> bool:
        """Keep LlamaIndex's new entries, if any; True when it added none (all were reused)."""
        if self._entries() == self._before:
            return bool(self._before)
        store: Any = self.cache.cache
        self._kept.save(json.dumps(store.to_dict(), ensure_ascii=False))
        return False
