"""What the scoring commands share: metric lists, judge and embedder specs, progress, summaries.

Specs are strings so they fit on a command line and in CI config:

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
(``faithfulness`` → ``faithfulness:offline``); a metric that exists only as a judge metric is
refused with the fix, before anything runs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from ragbridge.core.judge import Embedder, Judge
from ragbridge.core.metrics import by_name
from ragbridge.core.metrics.base import Metric
from ragbridge.core.results import Evaluation
from ragbridge.core.runner import resolve_metrics
from ragbridge.core.sample import Sample, SampleValidationError, load_samples

DEFAULT_METRICS = "faithfulness,answer_relevance,context_recall,recall@5,mrr,ndcg@5"
API_KEY_VARS = ("RAGBRIDGE_API_KEY", "OPENAI_API_KEY")


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


def add_scoring_options(parser: argparse.ArgumentParser, *, metrics: bool = True) -> None:
    if metrics:
        parser.add_argument(
            "--metrics",
            default=DEFAULT_METRICS,
            help=f"comma-separated metric names (default: {DEFAULT_METRICS}); add ':offline' "
            "or ':nli' to pick a provider; without --judge the offline provider is used",
        )
    parser.add_argument(
        "--judge",
        metavar="SPEC",
        help="openai:MODEL | langchain:MODULE:FACTORY | llamaindex:MODULE:FACTORY | "
        "python:MODULE:FACTORY (default: none, offline providers)",
    )
    parser.add_argument(
        "--base-url",
        help="base URL of an OpenAI-compatible endpoint for openai: specs "
        "(default: OPENAI_BASE_URL or https://api.openai.com/v1)",
    )
    parser.add_argument(
        "--embedder",
        metavar="SPEC",
        help="local | local:MODEL | openai:MODEL | langchain:… | llamaindex:… | python:… | hash "
        "(default: local, when a metric needs one)",
    )
    parser.add_argument(
        "--cache",
        metavar="PATH",
        help="SQLite cache of judge replies and embeddings (reruns are free and resumable)",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=8,
        metavar="N",
        help="judge calls in flight at most (default 8)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def split_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--metrics is empty; name at least one metric, e.g. --metrics mrr")
    return names


def metrics_for(names: Sequence[str], *, have_judge: bool) -> list[Metric]:
    """Resolve names; without a judge, pick each measure's offline provider or refuse."""
    chosen: list[Metric | str] = []
    judge_only: list[str] = []
    for name in names:
        if have_judge or ":" in name:
            chosen.append(name)
            continue
        try:
            metric = by_name(name)
        except KeyError:
            chosen.append(name)  # ranking measures (recall@5) and typos: resolve_metrics decides
            continue
        if not metric.needs_judge:
            chosen.append(metric)
        elif "offline" in type(metric).providers:
            chosen.append(f"{name}:offline")
        else:
            judge_only.append(name)
    if judge_only:
        raise UserError(
            f"{', '.join(judge_only)} {'needs' if len(judge_only) == 1 else 'need'} a judge "
            "and no offline provider exists: "
            "pass --judge SPEC (e.g. --judge openai:gpt-4o-mini) or drop them from --metrics"
        )
    try:
        return resolve_metrics(chosen)
    except (KeyError, ValueError) as exc:
        raise UserError(str(exc).strip("'\"")) from None


def _import_object(spec: str, what: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UserError(f"{what} must look like MODULE:OBJECT, got {spec!r}")
    sys.path.insert(0, os.getcwd())  # let users name a module in the current folder
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r} for {what}: {exc}") from None
    finally:
        sys.path.pop(0)
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise UserError(f"module {module_name!r} has no {attr!r} (for {what})") from None
    return obj


def _made(spec: str, what: str) -> Any:
    """The object a MODULE:OBJECT spec names; classes and functions are called with no args."""
    obj = _import_object(spec, what)
    if isinstance(obj, type) or inspect.isroutine(obj):
        try:
            return obj()
        except TypeError as exc:
            raise UserError(
                f"{spec} must be callable with no arguments for {what}: {exc}"
            ) from None
        except Exception as exc:  # the user's factory failed: say so in one line
            first = (str(exc).strip().splitlines() or [""])[0]
            raise UserError(f"{spec}() raised {type(exc).__name__} for {what}: {first}") from None
    return obj


def api_key() -> str | None:
    for var in API_KEY_VARS:
        value = os.environ.get(var)
        if value:
            return value
    return None


def build_judge(spec: str | None, base_url: str | None = None) -> Judge | None:
    if spec is None:
        return None
    kind, _, rest = spec.partition(":")
    if not rest:
        raise UserError(f"--judge {spec!r}: expected KIND:…, e.g. openai:gpt-4o-mini")
    if kind == "openai":
        from ragbridge.adapters.openai import DEFAULT_BASE_URL, OpenAIJudge

        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return OpenAIJudge(rest, base_url=url, api_key=api_key())
    if kind == "langchain":
        from ragbridge.adapters.langchain import LangChainJudge

        return LangChainJudge(_made(rest, "--judge"))
    if kind == "llamaindex":
        from ragbridge.adapters.llamaindex import LlamaIndexJudge

        return LlamaIndexJudge(_made(rest, "--judge"))
    if kind == "python":
        judge = _made(rest, "--judge")
        if not (hasattr(judge, "generate") and hasattr(judge, "model")):
            raise UserError(f"--judge {spec}: {type(judge).__name__} is not a ragbridge Judge")
        return judge  # type: ignore[no-any-return]
    raise UserError(
        f"--judge {spec!r}: unknown kind {kind!r}; use openai, langchain, llamaindex or python"
    )


def build_embedder(spec: str | None, base_url: str | None = None) -> Embedder | None:
    if spec is None:
        return None
    kind, _, rest = spec.partition(":")
    if kind == "local":
        from ragbridge.adapters.local import LocalEmbedder

        return LocalEmbedder(rest or None)
    if kind == "hash":
        from ragbridge.core.testing import HashEmbedder

        return HashEmbedder()
    if not rest:
        raise UserError(f"--embedder {spec!r}: expected KIND:…, e.g. local or openai:MODEL")
    if kind == "openai":
        from ragbridge.adapters.openai import DEFAULT_BASE_URL, OpenAIEmbedder

        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return OpenAIEmbedder(rest, base_url=url, api_key=api_key())
    if kind == "langchain":
        from ragbridge.adapters.langchain import LangChainEmbedder

        return LangChainEmbedder(_made(rest, "--embedder"))
    if kind == "llamaindex":
        from ragbridge.adapters.llamaindex import LlamaIndexEmbedder

        return LlamaIndexEmbedder(_made(rest, "--embedder"))
    if kind == "python":
        embedder = _made(rest, "--embedder")
        if not hasattr(embedder, "embed"):
            raise UserError(f"--embedder {spec}: {type(embedder).__name__} is not an Embedder")
        return embedder  # type: ignore[no-any-return]
    raise UserError(f"--embedder {spec!r}: unknown kind {kind!r}")


def read_samples(path: str) -> list[Sample]:
    source = Path(path)
    if not source.exists():
        raise UserError(f"{path}: no such file")
    try:
        samples = list(load_samples(source))
    except SampleValidationError as exc:
        raise UserError(str(exc)) from None
    if not samples:
        raise UserError(f"{path}: holds no samples")
    return samples


def self_judging_warning(samples: Iterable[Sample], judge: Judge | None) -> str | None:
    """A warning when the judge model generated the answers it is about to grade."""
    if judge is None:
        return None
    model = judge.model
    own = sum(
        1
        for s in samples
        if model
        and str(s.metadata.get("generator_model") or s.metadata.get("model") or "") == model
    )
    if not own:
        return None
    return (
        f"warning: the judge model {model!r} generated {own} of the answers it grades; "
        "a model judging its own outputs is biased towards them — use a different judge model"
    )


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
            bar.update(task, completed=done, total=total_now)

        yield advance


def summary_lines(evaluation: Evaluation) -> list[str]:
    """The summary table: metric, mean, 95% CI, scored / failed / skipped, failures by kind."""
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
