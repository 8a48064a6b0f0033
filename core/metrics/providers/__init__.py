"""The core-side measure providers: every way the core computes a measure other than its judge.

A measure (`ragbridge.core.registry.MeasureSpec`) says *what* is measured; a provider says *how*.
The judge is each LLM measure's default provider and lives with the measure's class
(`ragbridge.core.metrics.faithfulness`, ...); the other ways the core computes them live here, in
one home, so a reader finds them where the folder name says and a new provider has an obvious
room. Providers of the frameworks (RAGAS, DeepEval) and string checks are the adapters' side.

Every provider here has the same contract:

* an ``async (metric, sample, ctx) -> Score`` function, registered for one measure with
  `ragbridge.core.registry.register_provider` (its name after the colon: ``faithfulness:offline``,
  ``hallucination:nli``), saying what it needs (``embedder``, ``nli``) and what of a sample it
  reads (the key of a kept Score, `ragbridge.core.cache.result_key`);
* the measure's own checks (required fields, edge cases, abstentions) run before it is called;
  its settings come from the metric (``metric.settings``, ``metric.entailment``), its models from
  ``ctx`` (`ragbridge.core.metrics.base.MetricContext`);
* it returns a value in [0, 1] or a typed failure (`ragbridge.core.results.evaluation.Score`).

`offline` computes the RAG measures from sentence embeddings and exact checks (and holds the two
measures that exist only offline, `AnswerSimilarity` and `ContextUsage`); `nli` computes
faithfulness and hallucination with an entailment model. Importing this package registers both.
"""

from . import nli, offline

__all__ = ["nli", "offline"]
