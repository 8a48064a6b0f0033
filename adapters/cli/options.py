"""What the scoring commands share: metric lists, judge and embedder specs, progress, summaries.

Specs are strings so they fit on a command line and in CI config; the model registry
(`ragbridge.adapters.model_registry`) builds them, and every message names the flag:

* ``--judge openai:MODEL`` — any OpenAI-compatible endpoint (``--base-url``); the key is read
  from ``OPENAI_API_KEY`` (or ``RAGBRIDGE_API_KEY``) and is never printed or written anywhere.
* ``--judge langchain:MODULE:FACTORY`` / ``llamaindex:MODULE:FACTORY`` — a callable (or an
  object) in an importable module returning a LangChain chat model / LlamaIndex LLM; wrapped with
  the adapter's judge.
* ``--judge python:MODULE:FACTORY`` — anything implementing ragbridge's `Judge` protocol
  (tests use ``python:ragbridge.core.testing:CountingJudge``).
* ``--embedder local`` (default: the packaged all-MiniLM-L6-v2), ``local:MODEL``,
  ``openai:MODEL``, ``langchain:…``, ``llamaindex:…``, ``python:…``, ``hash`` (a model-free
  test embedder).

Without ``--judge`` metric names resolve to their offline provider where they have one
(``faithfulness`` → ``faithfulness:offline``, said once on stderr); a metric that exists only as
a judge metric is refused with the fix, before anything runs (see
`ragbridge.adapters.metric_choice`). A metric that needs an embedder gets the local one unless
``--embedder`` names another; when the ``local`` extra is missing that is one line naming
``--embedder`` and the extra.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from ragbridge.adapters import model_registry
from ragbridge.adapters.cli.argtypes import non_negative_int, positive_int
from ragbridge.adapters.cli.default_metrics import FieldCounts
from ragbridge.adapters.cli.errors import UserError
from ragbridge.adapters.cli.outcome import DEFAULT_MAX_FAILED_SHARE
from ragbridge.adapters.cli.paths import check_input

# ragbridge's core (pydantic, numpy, the metrics) and rich are imported inside the functions
# that use them: every subcommand's parser is built from this module, and `ragbridge --help`
# must not pay ~0.2 s of imports it never uses.
if TYPE_CHECKING:
    from ragbridge.core.judging.judge import Embedder, EntailmentModel, Judge
    from ragbridge.core.judging.ratelimit import RateLimits
    from ragbridge.core.judging.self_preference import SelfPreference
    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results.evaluation import Evaluation
    from ragbridge.core.results.tally import Tally
    from ragbridge.core.sample import Sample
    from ragbridge.core.settings import SettingsOptions

__all__ = [
    "DEFAULT_METRICS",
    "SampleScan",
    "UserError",
    "add_generator_option",
    "add_model_options",
    "add_scoring_options",
    "build_embedder",
    "build_judge",
    "build_nli",
    "choose_metrics",
    "count_own_answers",
    "embedder_for",
    "metrics_for",
    "own_answers_warning",
    "progress",
    "read_samples",
    "scan_samples",
    "self_judged",
    "self_judging_warning",
    "split_names",
    "summary_lines",
]

DEFAULT_METRICS = "faithfulness,answer_relevance,context_recall,recall@5,mrr,ndcg@5"
LOCAL_EXTRA = model_registry.LOCAL_HINT
"""What installs the default embedder (``--embedder local``)."""

_T = TypeVar("_T")


def add_scoring_options(
    parser: argparse.ArgumentParser,
    *,
    metrics: bool = True,
    default_metrics: str = DEFAULT_METRICS,
    nli: bool = True,
) -> None:
    if metrics:
        parser.add_argument(
            "--metrics",
            default=default_metrics,
            help=f"comma-separated metric names (default: {default_metrics}); add ':offline' "
            "or ':nli' to pick a provider; without --judge the offline provider is used",
        )
    add_model_options(parser, nli=nli)
    parser.add_argument(
        "--max-failed-share",
        type=_share,
        default=DEFAULT_MAX_FAILED_SHARE,
        metavar="SHARE",
        help="exit 1 when more than this share of a metric's non-skipped cells failed "
        f"(default {DEFAULT_MAX_FAILED_SHARE}); a metric whose every cell failed always fails",
    )


def add_generator_option(parser: argparse.ArgumentParser) -> None:
    """``--generator-model``: the model that wrote the answers, for the self-preference check
    where the samples' metadata does not name it (``generator_model``, which the LangChain,
    LlamaIndex and LangSmith captures record)."""
    parser.add_argument(
        "--generator-model",
        metavar="MODEL",
        help="the model that wrote the answers whose metadata names none (generator_model); "
        "a judge of the same model is said once on stderr and in the results header",
    )


def add_model_options(
    parser: argparse.ArgumentParser,
    *,
    nli: bool = True,
    embedder: bool = True,
    judge_help: str | None = None,
    embedder_help: str | None = None,
    cache_help: str | None = None,
) -> None:
    """The flags that say how a command calls its models: the `Settings` fields as options
    (``--judge``, ``--base-url``, ``--embedder``, ``--nli``, ``--cache``, ``--concurrency``,
    ``--timeout``, ``--max-retries``), read back by `settings_from`. Declared once, so every
    command spells and checks them alike; a command may word the help of the three whose role
    differs (what the judge, the embedder and the cache are for). ``embedder=False`` leaves
    out ``--embedder`` for a command that only asks a judge."""
    parser.add_argument(
        "--judge",
        metavar="SPEC",
        help=judge_help
        or "openai:MODEL | langchain:MODULE:FACTORY | llamaindex:MODULE:FACTORY | "
        "python:MODULE:FACTORY (default: none, offline providers)",
    )
    parser.add_argument(
        "--base-url",
        help="base URL of an OpenAI-compatible endpoint for openai: specs "
        "(default: OPENAI_BASE_URL or https://api.openai.com/v1)",
    )
    if embedder:
        parser.add_argument(
            "--embedder",
            metavar="SPEC",
            help=embedder_help
            or "local | local:MODEL | openai:MODEL | langchain:… | llamaindex:… | python:… | "
            "hash (default: local, when a metric needs one)",
        )
    if nli:
        parser.add_argument(
            "--nli",
            metavar="MODEL",
            help="NLI cross-encoder (a local folder or a model id in the Hugging Face cache) "
            "for the ':nli' providers, e.g. faithfulness:nli",
        )
    parser.add_argument(
        "--cache",
        metavar="PATH",
        help=cache_help
        or "SQLite cache of judge replies and embeddings (reruns are free and resumable)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=8,
        metavar="N",
        help="judge calls in flight at most (default 8)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="seconds one judge call attempt may take before it is retried (default 60)",
    )
    parser.add_argument(
        "--max-retries",
        type=non_negative_int,
        default=4,
        metavar="N",
        help="retries of a judge call after a transient error (default 4); permanent errors "
        "(401, 404, invalid URL) are not retried",
    )
    parser.add_argument(
        "--rpm",
        type=_positive_number,
        metavar="N",
        help="the judge key's requests per minute: calls are paced under it, shared with other "
        "runs on this machine using the same key (default: no rate limit; see --follow-limits)",
    )
    parser.add_argument(
        "--tpm",
        type=_positive_number,
        metavar="N",
        help="the judge key's tokens per minute (prompt + completion), as --rpm",
    )
    parser.add_argument(
        "--follow-limits",
        action="store_true",
        help="pace judge calls by the limits the provider states in its x-ratelimit-* headers "
        "(and its 429s), shared with other runs on this machine using the same key",
    )
    parser.add_argument(
        "--rate-ledger",
        type=_ledger_url,
        metavar="URL",
        help="share the judge key's rate budgets with every machine that reaches URL "
        "(redis://host:6379/0; implies --follow-limits); a redis:// --cache is used by default",
    )


def _rate_limits(args: argparse.Namespace) -> RateLimits | None:
    """`RateLimits` from ``--rpm``/``--tpm``/``--follow-limits``/``--rate-ledger``; None when
    none was given."""
    rpm, tpm = getattr(args, "rpm", None), getattr(args, "tpm", None)
    ledger = getattr(args, "rate_ledger", None)
    if rpm is None and tpm is None and ledger is None and not getattr(args, "follow_limits", False):
        return None
    from ragbridge.core.judging.ratelimit import RateLimits

    return RateLimits(rpm=rpm, tpm=tpm, shared=ledger if ledger is not None else True)


def settings_from(
    args: argparse.Namespace,
    *,
    judge: Judge | None = None,
    embedder: Embedder | None = None,
    nli: EntailmentModel | None = None,
) -> SettingsOptions:
    """The `Settings` fields the model flags (``--cache``, ``--concurrency``, ``--timeout``,
    ``--max-retries``) and the built models give; every command passes them on as they are."""
    return {
        "judge": judge,
        "embedder": embedder,
        "nli": nli,
        "cache": getattr(args, "cache", None),
        "max_concurrency": args.concurrency,
        "timeout": args.timeout,
        "max_retries": args.max_retries,
        "rate_limits": _rate_limits(args),
    }


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive_number(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _ledger_url(text: str) -> str:
    """A ``SCHEME://...`` URL (the scheme is checked when the ledger opens)."""
    if "://" not in text:
        raise argparse.ArgumentTypeError(f"expected a URL (redis://host:6379/0), got {text!r}")
    return text


def _positive_seconds(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _share(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must lie within [0, 1], got {text}")
    return value


def split_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--metrics is empty; name at least one metric, e.g. --metrics mrr")
    return names


def choose_metrics(
    names: Sequence[str], *, have_judge: bool, have_nli: bool = False
) -> tuple[list[Metric], str | None]:
    """Resolve ``--metrics`` by the no-judge rule; returns the metrics and the note to print.

    Everything the run would need and does not have is refused here, before anything is paid:
    a judge-only measure without ``--judge``, an ``:nli`` provider without ``--nli``.
    """
    from ragbridge.adapters.metric_choice import (
        JudgeOnlyError,
        UnknownMetricError,
        choose_without_judge,
    )
    from ragbridge.core.scoring.runner import resolve_metrics

    try:
        choice = choose_without_judge(names, have_judge=have_judge)
    except JudgeOnlyError as exc:
        raise UserError(
            f"{', '.join(exc.names)} {'needs' if len(exc.names) == 1 else 'need'} a judge "
            "and no offline provider exists: "
            "pass --judge SPEC (e.g. --judge openai:gpt-4o-mini) or drop them from --metrics"
        ) from None
    except UnknownMetricError as exc:
        raise UserError(f"--metrics: {exc}") from None
    except ValueError as exc:
        raise UserError(f"--metrics: {exc}") from None
    judged = [m.name for m in choice.metrics if m.needs_judge and not have_judge]
    if judged:
        raise UserError(
            f"{', '.join(judged)} {'needs' if len(judged) == 1 else 'need'} a judge: "
            "pass --judge SPEC (e.g. --judge openai:gpt-4o-mini)"
        )
    nli = [f"{m.name}:{m.provider}" for m in choice.metrics if m.needs_nli and not have_nli]
    if nli:
        raise UserError(
            f"{', '.join(nli)} {'needs' if len(nli) == 1 else 'need'} an NLI model: "
            "pass --nli MODEL (a local NLI cross-encoder folder or a cached model id)"
        )
    try:
        metrics = resolve_metrics(choice.metrics)
    except (KeyError, ValueError) as exc:
        raise UserError(f"--metrics: {str(exc).strip(chr(39) + chr(34))}") from None
    return metrics, choice.note()


def metrics_for(names: Sequence[str], *, have_judge: bool) -> list[Metric]:
    """Resolve names; without a judge, pick each measure's offline provider or refuse."""
    metrics, _ = choose_metrics(names, have_judge=have_judge, have_nli=True)
    return metrics


def _cli(build: Callable[[], _T]) -> _T:
    """``build()``, with a spec it cannot build reported as the one-line `UserError`."""
    try:
        return build()
    except model_registry.ModelSpecError as exc:
        raise UserError(str(exc)) from None


def _made(spec: str, what: str) -> Any:
    """The object a MODULE:OBJECT spec names; classes and functions are called with no args."""
    return _cli(lambda: model_registry.made(spec, what))


def build_judge(spec: str | None, base_url: str | None = None) -> Judge | None:
    """``--judge SPEC`` (`ragbridge.adapters.model_registry.judge_from`)."""
    return _cli(lambda: model_registry.judge_from(spec, base_url=base_url, what="--judge"))


def build_embedder(spec: str | None, base_url: str | None = None) -> Embedder | None:
    """``--embedder SPEC`` (`ragbridge.adapters.model_registry.embedder_from`)."""
    return _cli(lambda: model_registry.embedder_from(spec, base_url=base_url, what="--embedder"))


def embedder_for(
    spec: str | None, base_url: str | None, metrics: Sequence[Metric]
) -> Embedder | None:
    """The ``--embedder`` SPEC, or the local default when a metric needs one (as --help says);
    a missing ``local`` extra is one line naming ``--embedder`` and the extra, before any call."""
    return _cli(
        lambda: model_registry.embedder_for(spec, metrics, base_url=base_url, what="--embedder")
    )


def build_nli(spec: str | None) -> EntailmentModel | None:
    """``--nli MODEL``: the offline NLI cross-encoder of the ``:nli`` providers."""
    return _cli(lambda: model_registry.nli_from(spec, what="--nli"))


def read_samples(path: str) -> list[Sample]:
    """Every sample of ``path`` in a list (for commands that need them all at once).

    Scoring commands stream instead: `scan_samples` checks the file, then they read it again.
    """
    from ragbridge.core.sample import SampleValidationError, load_samples

    source = check_input(path)
    try:
        samples = list(load_samples(source))
    except SampleValidationError as exc:
        raise UserError(str(exc)) from None
    if not samples:
        raise UserError(f"{path}: holds no samples (only blank lines)")
    return samples


@dataclass(frozen=True)
class SampleScan:
    """What one validating pass over a samples file found, without keeping the samples."""

    path: Path
    count: int
    own_answers: int
    """How many answers the judge's own model wrote (`ragbridge.core.judging.self_preference`)."""
    fields: FieldCounts = field(default_factory=FieldCounts)
    """How many samples carry each field (what the default metric set is fitted to)."""


def scan_samples(path: str, judge: Judge | None = None, generator: str | None = None) -> SampleScan:
    """Validate every line of ``path`` (memory flat in the file size) before anything is paid.

    A bad line on line 50,000 must stop the run before the first judge call, not after 49,999
    paid ones. Also counts the samples (the progress bar's total) and the answers written by
    the judge model itself (`self_judging_warning`; ``generator`` wrote those whose metadata
    names no model).
    """
    from ragbridge.core.records import load_records
    from ragbridge.core.sample import Sample, SampleValidationError

    source = check_input(path)
    own = _own_answers(judge, generator)
    count = 0
    fields = FieldCounts()
    try:
        # the records reader: a conversation after the first sample says the file mixes kinds
        for sample in load_records(source, spill_ids=True):  # ids: bounded memory
            if not isinstance(sample, Sample):
                raise UserError(f"{path}: holds conversations; read it as a conversations file")
            count += 1
            if own is not None:
                own.add(sample.metadata, sample.answer is not None)
            fields.add(sample)
    except SampleValidationError as exc:
        raise UserError(str(exc)) from None
    if not count:
        raise UserError(f"{path}: holds no samples (only blank lines)")
    return SampleScan(source, count, own.answers if own is not None else 0, fields)


def _own_answers(judge: Judge | None, generator: str | None) -> SelfPreference | None:
    from ragbridge.core.judging.self_preference import SelfPreference

    if judge is None or not judge.model:
        return None
    return SelfPreference(judge.model, generator)


def count_own_answers(
    samples: Iterable[Sample], judge: Judge | None, generator: str | None = None
) -> int:
    """How many of ``samples``' answers the judge's own model wrote (same model family:
    `ragbridge.core.judging.self_preference.same_model`)."""
    own = _own_answers(judge, generator)
    if own is None:
        return 0
    for sample in samples:
        own.add(sample.metadata, sample.answer is not None)
    return own.answers


def self_judging_warning(
    samples: Iterable[Sample], judge: Judge | None, generator: str | None = None
) -> str | None:
    """A warning when the judge model generated the answers it is about to grade."""
    if judge is None or not judge.model:
        return None
    return own_answers_warning(judge.model, count_own_answers(samples, judge, generator))


def own_answers_warning(model: str, own: int) -> str | None:
    """The one line the command says (stderr) when ``own`` answers are the judge's own."""
    from ragbridge.core.judging.self_preference import self_preference_line

    return f"warning: {self_preference_line(model, own)}" if own else None


def self_judged(judge: Judge | None, own: int) -> dict[str, Any]:
    """The results-header entry (``self_judged``) for ``own`` answers of the judge's model;
    empty when there are none."""
    from ragbridge.core.judging.self_preference import METADATA_KEY

    if judge is None or not own:
        return {}
    return {METADATA_KEY: {"model": judge.model, "answers": own}}


@contextmanager
def progress(description: str, total: int | None, stream: TextIO | None = None) -> Iterator[Any]:
    """A rich progress bar with ETA on stderr; yields ``advance(done, total)``."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(file=stream or sys.stderr)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal and os.environ.get("RAGBRIDGE_PROGRESS") != "1",
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(done: int, total_now: int | None) -> None:
            # A stream reports no total; keep the one counted before the run.
            bar.update(task, completed=done, total=total if total_now is None else total_now)

        yield advance


def summary_lines(evaluation: Evaluation | Tally) -> list[str]:
    """The summary table: metric, mean, 95% CI, scored / failed / skipped, failures by kind.

    From a run's cells or, for a run that streamed them to a file, from their `Tally`.
    """
    rows = [("metric", "mean", "95% CI", "scored", "failed", "skipped", "failures")]
    for name, s in evaluation.summary().items():
        mean = "—" if s.mean is None else f"{s.mean:.3f}"
        ci = "—" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.failures_by_kind.items())) or ""
        rows.append((name, mean, ci, str(s.n_scored), str(s.n_failed), str(s.n_skipped), kinds))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
