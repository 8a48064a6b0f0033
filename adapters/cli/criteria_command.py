"""A team's own criteria on the command line: ``--criteria FILE`` and ``ragbridge criteria``.

* ``ragbridge eval DATA --criteria criteria.yaml [--metrics ...]`` (also ``run``,
  ``langsmith``, ``estimate`` and ``eval --repeat N``): the file's criteria are registered as
  measures (`ragbridge.core.criteria.register_criteria`), so their names resolve like any
  measure's in ``--metrics``, gates and reports, and they run beside the metrics asked for —
  alone when ``--metrics`` is not given (the default set would spend judge calls nobody asked
  for). The file's ``batch:`` decides whether criteria reading the same fields share a call.
* ``ragbridge criteria freeze criteria.yaml --judge SPEC``: has the judge write the evaluation
  steps of every scored criterion that has none (one call each, kept in ``--cache``), and pins
  them in the lock beside the file (``criteria.lock.json``) or, with ``--in-file``, in the file
  itself (line edits: the authors' comments and layout stay). Every machine and run then
  scores with the same steps; editing a criterion makes its pinned steps stale, and every
  command refuses to use them until they are frozen again.
* ``ragbridge criteria check criteria.yaml``: exit 1 listing the criteria whose steps are
  stale or not frozen (for CI), 0 when every scored criterion is pinned.

A file that cannot be used is one line naming the place, ``criteria.yaml:12:
criteria[2].scale: ...``, exit 2, before any call. Nothing heavy is imported at module level:
every command's parser is built from here.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_ABORTED, EXIT_FAILED, EXIT_OK, UserError
from ragbridge.adapters.cli.paths import check_input
from ragbridge.adapters.cli.plural import plural

if TYPE_CHECKING:
    from ragbridge.core.criteria import CriteriaFile, CriterionSpec
    from ragbridge.core.metrics.base import Metric

__all__ = [
    "add_criteria_option",
    "bind",
    "criteria_names",
    "criteria_of",
    "criteria_rows",
    "load_file",
    "register",
    "register_file",
    "renew_steps",
    "written_steps",
]

FREEZE_HINT = "ragbridge criteria freeze {path} --judge SPEC"


def add_criteria_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--criteria",
        metavar="CRITERIA.yaml",
        help="your own criteria (a YAML/JSON criteria file): scored criteria, yes/no aspects "
        "and rubrics, run as measures beside --metrics (alone without --metrics); they need "
        "--judge",
    )


# --------------------------------------------------------------------------- the file


def load_file(
    path: str, *, stale: Literal["error", "regenerate"] = "error"
) -> tuple[CriteriaFile, list[str]]:
    """The criteria file at ``path`` and the warning lines loading it gave; every problem is
    the one-line `UserError` (exit 2): a bad entry names its line and field, stale steps name
    the criterion, the lock and the command that freezes them again."""
    from ragbridge.core.criteria import CriteriaFileError, StaleStepsError, load_criteria

    source = check_input(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            loaded = load_criteria(source, stale=stale)
        except StaleStepsError as exc:
            raise UserError(_stale_line(exc)) from None
        except CriteriaFileError as exc:
            raise UserError(str(exc)) from None
    return loaded, [_first_line(str(w.message)) for w in caught]


def _stale_line(exc: Any) -> str:
    names = ", ".join(repr(n) for n in exc.names)
    noun = "criterion" if len(exc.names) == 1 else "criteria"
    where = exc.lock if Path(exc.lock).exists() else exc.path
    its = "its" if len(exc.names) == 1 else "their"
    return (
        f"{exc.path}: stale steps: {noun} {names} changed since {its} steps were frozen in "
        f"{where}; freeze them again: {FREEZE_HINT.format(path=exc.path)}"
    )


def _count(n: int, kind: str = "") -> str:
    """``1 criterion``, ``3 criteria`` (``kind`` before the noun: ``2 scored criteria``)."""
    return f"{n} {kind}{'criterion' if n == 1 else 'criteria'}"


def _first_line(text: str) -> str:
    return " ".join(text.split("\n")[0].split())


def criteria_of(args: argparse.Namespace) -> CriteriaFile | None:
    """``--criteria FILE`` loaded and registered (its names resolve like any measure's), or
    None without the flag (then nothing of the criteria family is imported)."""
    path = getattr(args, "criteria", None)
    if not path:
        return None
    from ragbridge.core.criteria import register_criteria

    loaded, notes = load_file(path)
    for line in notes:
        console.warn(line)
    try:
        register_criteria(loaded)
    except ValueError as exc:
        raise UserError(f"--criteria {path}: {exc}") from None
    return loaded


def register_file(path: str) -> CriteriaFile:
    """Register the criteria of ``path`` to read results scored with them (their names and
    directions); stale frozen steps do not matter there, so they are not refused."""
    from ragbridge.core.criteria import register_criteria

    loaded, _ = load_file(path, stale="regenerate")
    try:
        register_criteria(loaded)
    except ValueError as exc:
        raise UserError(f"--criteria {path}: {exc}") from None
    return loaded


def criteria_names(names: Sequence[str], file: CriteriaFile, *, asked: bool) -> list[str]:
    """The measures to run: ``names`` (what ``--metrics`` asked for), then the file's criteria
    not named there; only the criteria when ``--metrics`` was not ``asked``."""
    from ragbridge.core.registry import normal_name

    if not asked:
        console.note(
            f"--criteria {file.path.name}: scoring its {_count(len(file.specs))} "
            f"({', '.join(file.names)}); add --metrics to score other measures beside them"
        )
        return list(file.names)
    given = {normal_name(n.partition(":")[0]) for n in names}
    return [*names, *(n for n in file.names if normal_name(n) not in given)]


def bind(metrics: Sequence[Metric], file: CriteriaFile | None) -> list[Metric]:
    """``metrics`` with each criterion replaced by a fresh measure of ``file``: its steps are
    written once for this run (not reused from an earlier run in the same process) and its
    batch group holds exactly this file's criteria."""
    if file is None:
        return list(metrics)
    fresh = {m.name: m for m in file.metrics()}
    return [fresh.get(m.name, m) for m in metrics]


def written_steps(metrics: Sequence[Metric]) -> list[Any]:
    """The steps sources of the criteria among ``metrics`` whose steps the judge writes
    during the run (neither given nor frozen)."""
    sources = (getattr(m, "steps_source", None) for m in metrics)
    return [s for s in sources if s is not None and s.source == "generated"]


def renew_steps(metrics: Sequence[Metric]) -> None:
    """Have the next run write the unpinned criteria's steps again (``eval --repeat``: runs
    2..N ask the judge afresh, and steps that move are part of what the flip rate shows)."""
    for source in written_steps(metrics):
        source.renew()


# --------------------------------------------------------------------------- the listing


def _reads(spec: CriterionSpec) -> str:
    return ", ".join(spec.reads)


def _scale(spec: CriterionSpec) -> str:
    low, high = spec.scale
    return "yes/no" if spec.kind == "aspect" else f"{low}-{high}"


def _steps(spec: CriterionSpec, file: CriteriaFile) -> str:
    from ragbridge.core.criteria import Criterion

    if not isinstance(spec, Criterion):
        return "-"
    if spec.name in file.stale:
        return "stale"
    if spec.name in file.frozen:
        return "frozen"
    return "given" if spec.evaluation_steps else "written each run"


def criteria_rows(file: CriteriaFile) -> list[dict[str, str]]:
    """One row per criterion of ``file`` as ``ragbridge metrics --criteria`` lists it: kind,
    the fields it reads, its direction, scale, steps and judge calls per sample (from the
    registry row, so the two cannot disagree), and its meaning."""
    from ragbridge.core.registry import REGISTRY, normal_name

    rows: list[dict[str, str]] = []
    for spec in file.specs:
        provider = REGISTRY.provider(normal_name(spec.name))
        rows.append(
            {
                "measure": spec.name,
                "provider": provider.name,
                "kind": "criteria",
                "type": spec.kind,
                "reads": _reads(spec),
                "direction": "higher" if spec.higher_is_better else "lower",
                "scale": _scale(spec),
                "steps": _steps(spec, file),
                "judge calls": provider.judge_calls,
                "meaning": spec.meaning,
            }
        )
    return rows


# --------------------------------------------------------------------------- the command


def register(sub: Any) -> None:
    from ragbridge.adapters.cli.options import add_model_options

    parser = add_command(
        sub,
        "criteria",
        "Pin or check the evaluation steps of a criteria file. Steps the judge writes anew "
        "on every run move the yardstick; frozen steps are the same on every machine and run, "
        "and a criterion edited since its steps were frozen is refused until frozen again.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    freeze = actions.add_parser(
        "freeze",
        help="have the judge write missing steps and pin them (lock beside the file)",
        description="Have the judge write the evaluation steps of every scored criterion "
        "without steps of its own (one call each; --cache keeps them, so a rerun is free), "
        "and pin them in the lock beside the file (criteria.yaml -> criteria.lock.json), or "
        "in the file itself with --in-file. Steps already frozen and still current are kept. "
        "Exit codes: 0 frozen, 2 bad arguments or file, 3 the judge failed.",
    )
    freeze.add_argument("file", metavar="CRITERIA.yaml", help="the criteria file")
    freeze.add_argument(
        "--in-file",
        action="store_true",
        help="write the steps into the criteria file itself (comments and layout are kept) "
        "instead of the lock beside it",
    )
    freeze.add_argument(
        "--all",
        action="store_true",
        help="write the steps of every criterion again, also those frozen and current",
    )
    add_model_options(
        freeze,
        nli=False,
        embedder=False,
        judge_help="the model that writes the steps (required): openai:MODEL | "
        "langchain:MODULE:FACTORY | llamaindex:MODULE:FACTORY | python:MODULE:FACTORY",
        cache_help="SQLite cache of judge replies: the same criterion asks the same request, "
        "so a rerun makes no call",
    )
    freeze.set_defaults(handler=run_freeze)

    check = actions.add_parser(
        "check",
        help="exit 1 listing criteria whose steps are stale or not frozen (for CI)",
        description="Exit 0 when every scored criterion of the file has steps of its own or "
        "frozen ones matching its current text; else exit 1 listing those that are stale "
        "(edited since frozen) or not frozen (written anew each run). Exit 2: a bad file.",
    )
    check.add_argument("file", metavar="CRITERIA.yaml", help="the criteria file")
    check.set_defaults(handler=run_check)


def _to_write(file: CriteriaFile, everything: bool) -> list[Any]:
    """The scored criteria whose steps the judge writes: unfrozen or stale ones (all with
    ``everything``); never those whose steps the authors wrote themselves."""
    from ragbridge.core.criteria import Criterion

    out = []
    for spec in file.specs:
        if not isinstance(spec, Criterion):
            continue
        own = spec.evaluation_steps and spec.name not in file.frozen
        if own:
            continue
        if everything or spec.name in file.stale or not spec.evaluation_steps:
            out.append(spec)
    return out


def run_freeze(args: argparse.Namespace) -> int:
    import asyncio

    from ragbridge.adapters.cli.options import build_judge, progress, settings_from
    from ragbridge.core.criteria import Criterion, freeze, generate_steps
    from ragbridge.core.scoring.runner import build_engines, run_sync
    from ragbridge.core.settings import Settings

    if not args.judge:
        raise UserError(
            "criteria freeze needs --judge SPEC: the judge writes the steps (e.g. --judge "
            "openai:gpt-4o-mini)"
        )
    file, _ = load_file(args.file, stale="regenerate")  # stale steps are what freeze renews
    todo = _to_write(file, args.all)
    scored = [s for s in file.specs if isinstance(s, Criterion)]
    if not scored:
        console.say(f"{args.file}: no scored criterion (aspects and rubrics have no steps)")
        return EXIT_OK
    if not todo:
        console.say(f"{args.file}: the steps of {_count(len(scored))} are pinned")
        return EXIT_OK
    for name in file.stale:
        console.note(f"{name}: edited since its steps were frozen; writing them again")
    judge = build_judge(args.judge, args.base_url)
    assert judge is not None
    engines = build_engines(Settings.of(None, settings_from(args, judge=judge)), [])
    engine = engines.judge
    assert engine is not None
    try:
        with progress("writing steps", len(todo)) as advance:
            done = [0]

            async def one(spec: Criterion) -> Any:
                call = await generate_steps(spec, engine)
                done[0] += 1
                advance(done[0], len(todo))
                return call

            async def every() -> list[Any]:
                return list(await asyncio.gather(*(one(s) for s in todo)))

            calls = run_sync(every())
    finally:
        engines.close()
    failed = [(s.name, c.failure) for s, c in zip(todo, calls, strict=True) if c.value is None]
    stats = engine.stats
    spent = f"judge {engine.model}: {plural(stats.calls, 'call')} ({stats.cached} cached)"
    if failed:
        for name, failure in failed:
            console.error(f"{name}: the steps were not written: {failure.message}")
        console.error(f"nothing frozen; {spent}")
        return EXIT_ABORTED
    steps = {s.name: list(c.value.steps) for s, c in zip(todo, calls, strict=True)}
    try:
        written = freeze(file, steps, in_file=args.in_file, model=engine.model)
    except ValueError as exc:
        raise UserError(f"{args.file}: {exc}") from None
    console.say(
        f"froze the steps of {_count(len(steps))} ({', '.join(steps)}) in {written}; {spent}"
    )
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    from ragbridge.core.criteria import Criterion

    file, _ = load_file(args.file, stale="regenerate")
    stale = list(file.stale)
    unfrozen = [
        s.name
        for s in file.specs
        if isinstance(s, Criterion) and not s.evaluation_steps and s.name not in stale
    ]
    scored = sum(isinstance(s, Criterion) for s in file.specs)
    if not stale and not unfrozen:
        console.say(f"{args.file}: ok, the steps of {_count(scored, 'scored ')} are pinned")
        return EXIT_OK
    lines = [f"{name}: stale (edited since its steps were frozen)" for name in stale]
    lines += [f"{name}: not frozen (steps written anew on every run)" for name in unfrozen]
    console.say(*lines)
    console.error(
        f"{args.file}: {_count(len(stale) + len(unfrozen))} without current "
        f"frozen steps; run: {FREEZE_HINT.format(path=args.file)}"
    )
    return EXIT_FAILED
