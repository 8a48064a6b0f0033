"""Reference-based string measures of the answer: ROUGE, BLEU, EM, token F1 and BERTScore.

These are the reference-based measures of the QA and summarisation literature. Each is computed by
the library the literature uses, so a ragbridge number equals the number a paper reports:

* ROUGE-1/2/L — Lin 2004, via Google's ``rouge-score`` (the reimplementation of the original Perl
  script used by most papers), Porter stemming on. Its tokenizer lowercases and keeps only
  ``[a-z0-9]`` runs, so non-Latin text has no tokens and scores 0.
* BLEU — Papineni et al. 2002, via ``sacrebleu.sentence_bleu`` (Post 2018: standard ``13a``
  tokenisation, exponential smoothing, effective n-gram order), divided by 100.
* Exact match and token F1 — defined by the SQuAD evaluation script (Rajpurkar et al. 2016/2018),
  implemented here because the script *is* the definition: lowercase, drop ASCII punctuation,
  drop the articles a/an/the, split on whitespace. ``EM = [norm(answer) == norm(reference)]``;
  with ``common`` the multiset intersection of the two token lists,
  ``P = |common| / |answer tokens|``, ``R = |common| / |reference tokens|``, ``F1 = 2PR / (P+R)``.
  As in the SQuAD 2.0 script, when either side normalises to no token F1 is 1 if both do, else 0.
* BERTScore — Zhang et al. 2020, via the authors' ``bert-score`` package (greedy cosine matching
  of contextual token embeddings; precision, recall and F1; F1 is the value).

All are ``provider="string"``, need no judge, and require the sample's ``answer`` and
``reference`` (an empty one is ``Failure(missing_input)``). A missing library raises an ImportError
naming the extra (``pip install ".[strings]"`` or ``".[bertscore]"`` in your ragbridge clone) when
the metric is created.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import re
import string
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ragbridge.adapters._extras import install_hint, missing_extra, require
from ragbridge.adapters._frameworks import framework_noise_off, quiet_frameworks
from ragbridge.adapters._hub import disable_hub, quiet_model_loading
from ragbridge.adapters._hub import installed as _installed
from ragbridge.adapters._loaded_once import LoadedOnce
from ragbridge.core.metrics.base import Metric, MetricContext
from ragbridge.core.registry import MeasureSpec, ProviderSpec, Registry
from ragbridge.core.results.evaluation import Score
from ragbridge.core.sample import Sample

quiet_frameworks()  # before transformers is imported (lazily, by BERTScore)

__all__ = [
    "BERTSCORE_HINT",
    "STRINGS_HINT",
    "BertScore",
    "BertScoreModelNotFoundError",
    "Bleu",
    "ExactMatch",
    "RougeScore",
    "TokenF1",
    "exact_match",
    "normalize_answer",
    "token_f1",
]

STRINGS_HINT = install_hint("strings")
BERTSCORE_HINT = install_hint("bertscore")

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _require(metric: str, extra: str, *modules: str) -> None:
    """Refuse at construction, without importing anything, when a library is not installed."""
    missing = [m for m in modules if not _installed(m)]
    if missing:
        raise missing_extra(metric, ", ".join(missing), extra)


def _unit(x: float) -> float:
    """Clamp to [0, 1]: float32 rounding (BERTScore 1.0000001) and rescaled BERTScore (< 0)."""
    return min(1.0, max(0.0, float(x)))


# -- SQuAD exact match and token F1 ----------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 12)
def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lowercase, drop punctuation, drop articles, collapse whitespace.

    Memoised: a run scoring token F1 and exact match normalises each answer and reference for
    both (`evaluate` scores them a chunk of 512 samples at a time: 1,024 texts a measure)."""
    text = text.lower()
    text = text.translate(_DROP_PUNCTUATION)  # as dropping each char in _PUNCTUATION, faster
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(answer: str, reference: str) -> float:
    """1.0 when the SQuAD-normalised strings are equal, else 0.0."""
    return float(normalize_answer(answer) == normalize_answer(reference))


def _common(pred: list[str], gold: list[str]) -> int:
    """The size of the multiset intersection of ``pred`` and ``gold`` (SQuAD's ``common``:
    ``sum((Counter(pred) & Counter(gold)).values())``), counted with one dict rather than two
    Counters and their intersection, built for every sample."""
    left: dict[str, int] = {}
    for token in gold:
        left[token] = left.get(token, 0) + 1
    common = 0
    for token in pred:
        n = left.get(token)
        if n:
            left[token] = n - 1
            common += 1
    return common


def token_f1(answer: str, reference: str) -> tuple[float, float, float]:
    """SQuAD 2.0 token overlap: ``(f1, precision, recall)`` of the normalised tokens."""
    pred = normalize_answer(answer).split()
    gold = normalize_answer(reference).split()
    if not pred or not gold:
        same = float(pred == gold)
        return same, same, same
    common = _common(pred, gold)
    if common == 0:
        return 0.0, 0.0, 0.0
    precision = common / len(pred)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall), precision, recall


class _StringMetric(Metric):
    """Shared settings: a string comparison with the reference, no judge."""

    requires = ("answer", "reference")
    needs_judge = False
    provider = "string"

    @staticmethod
    def _texts(sample: Sample) -> tuple[str, str]:
        assert sample.answer is not None
        assert sample.reference is not None
        return sample.answer, sample.reference


class ExactMatch(_StringMetric):
    """SQuAD exact match of the answer and the reference (see the module docstring)."""

    scores_inline = True  # `_score` never awaits: batched by `evaluate`

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        answer, reference = self._texts(sample)
        said, meant = normalize_answer(answer), normalize_answer(reference)
        return Score.trusted(  # `exact_match(answer, reference)`, normalising each text once
            value=float(said == meant),
            details={"answer_normalized": said, "reference_normalized": meant},
        )


class TokenF1(_StringMetric):
    """SQuAD token F1 of the answer against the reference (see the module docstring)."""

    scores_inline = True  # `_score` never awaits: batched by `evaluate`

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        f1, precision, recall = token_f1(*self._texts(sample))
        details = {"precision": precision, "recall": recall, "f1": f1}
        return Score.trusted(value=f1, details=details)  # plain floats: no validation needed


# -- ROUGE and BLEU ----------------------------------------------------------------------------

RougeKind = Literal["rouge1", "rouge2", "rougeL"]
RougeStat = Literal["f", "p", "r"]
_ROUGE_NAMES = {"rouge1": "rouge_1", "rouge2": "rouge_2", "rougeL": "rouge_l"}
_STAT_SUFFIX = {"f": "", "p": "_precision", "r": "_recall"}


class RougeScore(_StringMetric):
    """ROUGE-1, ROUGE-2 or ROUGE-L of the answer against the reference (``rouge-score``).

    ``kind`` is ``"rougeL"`` (longest common subsequence), ``"rouge1"`` or ``"rouge2"``
    (unigram / bigram overlap); ``stat`` picks the value: ``"f"`` (F-measure, default), ``"p"``
    or ``"r"``. Names: ``rouge_l``, ``rouge_1``, ``rouge_2``; a non-default ``stat`` appends
    ``_precision`` / ``_recall`` so several can share a run. ``details`` holds all three.
    """

    def __init__(self, kind: RougeKind = "rougeL", stat: RougeStat = "f") -> None:
        if kind not in _ROUGE_NAMES:
            raise ValueError(f"kind must be one of {sorted(_ROUGE_NAMES)}, got {kind!r}")
        if stat not in _STAT_SUFFIX:
            raise ValueError(f"stat must be 'f', 'p' or 'r', got {stat!r}")
        _require("RougeScore", "strings", "rouge_score", "nltk")
        module = require("rouge_score.rouge_scorer", extra="strings", what="RougeScore")
        self.kind = kind
        self.stat = stat
        self.name = _ROUGE_NAMES[kind] + _STAT_SUFFIX[stat]
        with framework_noise_off():  # absl would call logging.basicConfig() on the user's root
            self._scorer = module.RougeScorer([kind], use_stemmer=True)

    def __repr__(self) -> str:
        return f"RougeScore(kind={self.kind!r}, stat={self.stat!r})"

    def _compute(self, answer: str, reference: str) -> Score:
        result = self._scorer.score(reference, answer)[self.kind]  # (target, prediction)
        stats = {"precision": result.precision, "recall": result.recall, "f": result.fmeasure}
        value = stats[{"f": "f", "p": "precision", "r": "recall"}[self.stat]]
        return Score(value=_unit(value), details={k: float(v) for k, v in stats.items()})

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        # LCS is quadratic in pure Python: keep long texts off the event loop.
        return await asyncio.to_thread(self._compute, *self._texts(sample))


class Bleu(_StringMetric):
    """Sentence BLEU of the answer against the reference: ``sacrebleu.sentence_bleu / 100``.

    sacrebleu's defaults (``13a`` tokenisation, ``exp`` smoothing, case-sensitive) unless
    ``lowercase`` or ``tokenize`` say otherwise. ``details``: the four n-gram precisions (as
    fractions), brevity penalty and lengths. BLEU is a corpus measure; per sentence it is noisy
    and harsh on short answers — prefer token F1 or ROUGE for short QA answers.
    """

    def __init__(self, *, lowercase: bool = False, tokenize: str | None = None) -> None:
        _require("Bleu", "strings", "sacrebleu")
        self._sacrebleu = require("sacrebleu", extra="strings", what="Bleu")
        self.lowercase = lowercase
        self.tokenize = tokenize

    def __repr__(self) -> str:
        return f"Bleu(lowercase={self.lowercase}, tokenize={self.tokenize!r})"

    def _compute(self, answer: str, reference: str) -> Score:
        kwargs: dict[str, Any] = {"lowercase": self.lowercase}
        if self.tokenize is not None:
            kwargs["tokenize"] = self.tokenize
        result = self._sacrebleu.sentence_bleu(answer, [reference], **kwargs)
        return Score(
            value=_unit(result.score / 100.0),
            details={
                "precisions": [float(p) / 100.0 for p in result.precisions],
                "brevity_penalty": float(result.bp),
                "answer_length": int(result.sys_len),
                "reference_length": int(result.ref_len),
            },
        )

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        return await asyncio.to_thread(self._compute, *self._texts(sample))


# -- BERTScore ---------------------------------------------------------------------------------


class BertScoreModelNotFoundError(FileNotFoundError):
    """The BERTScore model is not on this machine, and ragbridge never downloads weights."""


@dataclass
class _Pending:
    answer: str
    reference: str
    future: concurrent.futures.Future[tuple[float, float, float]] = field(
        default_factory=concurrent.futures.Future
    )


class BertScore(_StringMetric):
    """BERTScore F1 of the answer against the reference (the ``bert-score`` package).

    ``model_type`` is a Hugging Face model id already in the local cache, or a model folder
    (never downloaded); with ``model_type=None``, ``lang`` picks bert-score's default model for
    that language (``roberta-large`` for ``"en"``). ``num_layers`` is the layer whose embeddings
    are matched: bert-score knows the tuned layer of the models in its table; for a folder or
    any other model it must be given. ``rescale_with_baseline`` applies the authors' packaged
    baseline for (``lang``, model) — it needs ``lang`` and a model bert-score has a baseline for.

    ``value`` is F1 clamped to [0, 1] (rescaled scores can be negative); ``details`` keep the raw
    precision, recall and F1. The scorer loads once per metric on first use. Scoring runs in
    worker threads, and concurrent samples are scored together: whichever thread gets the model
    scores every pair waiting at that moment in one bert-score call.
    """

    def __init__(
        self,
        model_type: str | os.PathLike[str] | None = None,
        num_layers: int | None = None,
        *,
        lang: str | None = None,
        rescale_with_baseline: bool = False,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        _require("BertScore", "bertscore", "bert_score", "torch", "transformers")
        if model_type is None and lang is None:
            raise ValueError("BertScore needs model_type or lang (e.g. lang='en')")
        if rescale_with_baseline and lang is None:
            raise ValueError("rescale_with_baseline=True needs lang (the baseline is per language)")
        if num_layers is not None and (isinstance(num_layers, bool) or num_layers < 0):
            raise ValueError(f"num_layers must be a non-negative integer, got {num_layers!r}")
        name = None if model_type is None else os.fspath(model_type)
        if name is not None and Path(name).expanduser().is_dir() and num_layers is None:
            raise ValueError(
                f"num_layers is required for a model folder ({name!r}): bert-score knows the "
                "tuned layer only of the Hub models in its table"
            )
        disable_hub()
        self.model_type = name
        self.num_layers = num_layers
        self.lang = lang
        self.rescale_with_baseline = rescale_with_baseline
        self.device = device
        self.batch_size = batch_size
        self._scorer: LoadedOnce[Any] = LoadedOnce(self._build)
        self._resolved_name: str | None = None
        self._run_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []

    def __repr__(self) -> str:
        return (
            f"BertScore(model_type={self.model_type!r}, num_layers={self.num_layers}, "
            f"lang={self.lang!r}, rescale_with_baseline={self.rescale_with_baseline})"
        )

    def load(self) -> BertScore:
        """Load the model now (blocking) rather than on the first score; returns ``self``."""
        self._get_scorer()
        return self

    def _get_scorer(self) -> Any:
        return self._scorer.get()

    def _build(self) -> Any:
        bert_score: Any = require("bert_score", extra="bertscore", what="BertScore")
        utils = require("bert_score.utils", extra="bertscore", what="BertScore")
        name = self.model_type or utils.lang2model[self.lang.lower() if self.lang else "en"]
        layers = self.num_layers
        if layers is None:
            if name not in utils.model2layers:
                raise ValueError(
                    f"bert-score has no tuned layer for {name!r}: pass num_layers explicitly"
                )
            layers = int(utils.model2layers[name])
        self.num_layers = layers
        self._resolved_name = name
        folder = self._local_folder(name)
        kwargs: dict[str, Any] = {}
        if self.rescale_with_baseline:
            # bert-score looks the baseline up by model name; we pass a folder, so name it.
            assert self.lang is not None
            baseline = (
                Path(bert_score.__file__).parent / "rescale_baseline" / self.lang / f"{name}.tsv"
            )
            if not baseline.is_file():
                raise ValueError(
                    f"bert-score ships no {self.lang!r} baseline for {name!r}; "
                    "use rescale_with_baseline=False"
                )
            kwargs["baseline_path"] = str(baseline)
        with quiet_model_loading():  # no "Loading weights" bar on the user's stderr
            return bert_score.BERTScorer(
                model_type=folder,
                num_layers=layers,
                lang=self.lang,
                rescale_with_baseline=self.rescale_with_baseline,
                device=self.device,
                batch_size=self.batch_size,
                **kwargs,
            )

    @staticmethod
    def _local_folder(name: str) -> str:
        """A folder for ``name``: itself, or its snapshot in the Hugging Face cache (no download).

        bert-score calls ``from_pretrained`` without ``local_files_only``; giving it a folder is
        what guarantees it never reaches for the network.
        """
        path = Path(name).expanduser()
        if path.is_dir():
            return str(path)
        hub = require("huggingface_hub", extra="bertscore", what="BertScore")
        try:
            return str(hub.snapshot_download(name, local_files_only=True))
        except Exception as exc:  # LocalEntryNotFoundError, HFValidationError, ...
            raise BertScoreModelNotFoundError(
                f"BERTScore model {name!r} is not available locally: it is neither a folder nor "
                "in the Hugging Face cache, and ragbridge never downloads weights. Fetch it once "
                f"where there is internet (`hf download {name}`) or pass a model folder. "
                f"({type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''})"
            ) from None

    def _score_pair(self, answer: str, reference: str) -> tuple[float, float, float]:
        """Blocking: queue the pair; the thread that gets the model scores the whole queue."""
        scorer = self._get_scorer()
        item = _Pending(answer, reference)
        with self._queue_lock:
            self._queue.append(item)
        with self._run_lock:
            if not item.future.done():
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                try:
                    p, r, f = scorer.score(
                        [b.answer for b in batch],
                        [b.reference for b in batch],
                        batch_size=self.batch_size,
                    )
                    for i, b in enumerate(batch):
                        b.future.set_result((float(p[i]), float(r[i]), float(f[i])))
                except Exception as exc:
                    for b in batch:
                        if not b.future.done():
                            b.future.set_exception(exc)
        return item.future.result()

    async def _score(self, sample: Sample, ctx: MetricContext) -> Score:
        precision, recall, f1 = await asyncio.to_thread(self._score_pair, *self._texts(sample))
        return Score(
            value=_unit(f1),
            judge_model=self._resolved_name,
            details={
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "num_layers": self.num_layers,
                "rescaled": self.rescale_with_baseline,
            },
        )


# -- registry ---------------------------------------------------------------------------------

_MEASURES: tuple[tuple[str, Callable[[], Metric], str, str], ...] = (
    ("exact_match", ExactMatch, "1 when the answer equals the reference, SQuAD-normalised", ""),
    ("token_f1", TokenF1, "token-overlap F1 of the answer against the reference (SQuAD)", ""),
    (
        "rouge_l",
        partial(RougeScore, "rougeL"),
        "longest-common-subsequence F of the answer",
        "strings",
    ),
    (
        "rouge_1",
        partial(RougeScore, "rouge1"),
        "unigram-overlap F of the answer (ROUGE-1)",
        "strings",
    ),
    (
        "rouge_2",
        partial(RougeScore, "rouge2"),
        "bigram-overlap F of the answer (ROUGE-2)",
        "strings",
    ),
    ("bleu", Bleu, "sentence BLEU of the answer against the reference, / 100", "strings"),
    ("bert_score", BertScore, "contextual-embedding token match F1 (BERTScore)", "bertscore"),
)
_HOW = {
    "": "the SQuAD evaluation script's definition",
    "strings": "rouge-score / sacrebleu, as papers report them",
    "bertscore": "the authors' bert-score package (a local model)",
}


def register(registry: Registry) -> None:
    """The ``ragbridge.providers`` entry point: list the string measures in the registry, so
    ``resolve("exact_match")`` and ``ragbridge metrics`` find them. Building one still imports
    its library, and a missing one names the extra to install."""
    for name, build, meaning, extra in _MEASURES:
        registry.add_measure(
            MeasureSpec(
                name=name,
                meaning=meaning,
                requires=("answer", "reference"),
                kind="string",
                factory=build,
            ),
            ProviderSpec(
                measure=name,
                name="string",
                how=_HOW[extra],
                needs=frozenset({"reference"}),
                extra=extra or None,
            ),
        )
