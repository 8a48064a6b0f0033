"""``ragbridge split`` and the held-out check of ``eval`` and ``gate`` (issue 17).

``ragbridge split DATA.jsonl --dev 0.5 --seed 7`` writes ``DATA.dev.jsonl``, ``DATA.test.jsonl``
and the test file's lock ``DATA.test.lock.json`` (`ragbridge.core.heldout`), and prints the
sizes per stratum. An existing lock is never replaced without ``--force``: replacing the lock is
how a held-out set gets quietly swapped for a friendlier one.

``ragbridge eval X.jsonl`` then checks, before anything is scored, the file against its lock
(the sibling ``X.lock.json``, or ``--lock``) and its questions against the lock's dev file and
any ``--prompt-file``: each kind of problem one warning line on stderr, or with ``--strict`` one
error line and exit 2 before the first judge call. The check's record goes into the results
header (``heldout``), where ``ragbridge gate`` reads it (`gate_command`). A file with no lock
and no ``--prompt-file`` is not checked, unless ``--strict`` demands a lock.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import require_open_share
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.paths import check_input, check_output

__all__ = [
    "NEAR_DUPLICATE",
    "add_heldout_options",
    "check_heldout",
    "heldout_record",
    "register",
]

NEAR_DUPLICATE = 0.8
"""`ragbridge.core.heldout.NEAR_DUPLICATE`, copied: ``--help`` must not import the core."""
_GROUPS_SHOWN = 5


def register(sub: Any) -> None:
    parser = add_command(
        sub,
        "split",
        "Split DATA.jsonl into DATA.dev.jsonl and DATA.test.jsonl, stratified by "
        "no-answer vs answerable, and lock the test file (DATA.test.lock.json: a content hash "
        "of every test sample, the seed and the sizes). The split depends on the seed and the "
        "sample ids, not on the order of the lines; questions that duplicate each other stay "
        "in one half. `ragbridge eval` and `gate` then warn (with --strict: refuse) when the "
        "test file was edited since, or a test question occurs in the dev file or a prompt.",
    )
    parser.add_argument("data", metavar="DATA.jsonl", help="the samples to split")
    parser.add_argument(
        "--dev",
        type=float,
        default=0.5,
        metavar="SHARE",
        help="share of the samples that go to dev, within (0, 1) (default 0.5)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the split (default 0)"
    )
    parser.add_argument(
        "--out-dir", metavar="DIR", help="folder for the three files (default: DATA's folder)"
    )
    _near_option(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace existing split files and lock (the old lock is lost: results checked "
        "against it are no longer comparable)",
    )
    parser.set_defaults(handler=_run)


def _near_option(parser: argparse.ArgumentParser | Any) -> None:
    parser.add_argument(
        "--near-duplicate",
        type=float,
        default=NEAR_DUPLICATE,
        metavar="JACCARD",
        help="two questions are near duplicates from this Jaccard similarity of their content "
        f"words, within (0, 1] (default {NEAR_DUPLICATE})",
    )


def _check_numbers(args: argparse.Namespace) -> None:
    dev = getattr(args, "dev", None)
    if dev is not None:
        require_open_share("--dev", dev)
    near = args.near_duplicate
    if not (math.isfinite(near) and 0.0 < near <= 1.0):
        raise UserError(f"--near-duplicate must lie within (0, 1], got {near}")


def _relative(path: Path, folder: Path) -> str:
    """``path`` as the lock names it: relative to the lock's folder, with ``/``."""
    try:
        return Path(os.path.relpath(path, folder)).as_posix()
    except ValueError:  # another drive (Windows): no relative path exists
        return path.name


def _run(args: argparse.Namespace) -> int:
    from ragbridge.adapters.cli.options import read_samples
    from ragbridge.core.heldout import (
        LockError,
        make_lock,
        read_lock,
        split_paths,
        split_samples,
        write_lock,
    )
    from ragbridge.core.sample import save_samples

    data = check_input(args.data)
    _check_numbers(args)
    if args.out_dir is not None:
        folder = Path(args.out_dir)
        if not folder.is_dir():
            raise UserError(f"--out-dir {args.out_dir}: no such folder")
    dev_path, test_path, lock_path = split_paths(data, args.out_dir)
    flag = "--out-dir" if args.out_dir is not None else "split"
    for path in (dev_path, test_path, lock_path):
        check_output(str(path), flag, inputs=[data])
    if not args.force:
        if lock_path.exists():
            raise UserError(
                f"{lock_path} exists: replacing a split lock is how a held-out test set gets "
                "quietly swapped, so it is never done silently; give --force to split again"
            )
        for path in (dev_path, test_path):
            if path.exists():
                raise UserError(f"{path} exists; give --force to overwrite it")
    old = None
    if lock_path.exists():
        try:
            old = read_lock(lock_path)
        except LockError:
            old = None
    samples = read_samples(args.data)
    try:
        split = split_samples(samples, args.dev, args.seed, near_duplicate=args.near_duplicate)
    except ValueError as exc:
        raise UserError(f"{args.data}: {exc}") from None
    save_samples(split.dev, dev_path)
    save_samples(split.test, test_path)
    folder = lock_path.parent
    lock = make_lock(
        split,
        source=_relative(data, folder),
        dev_file=_relative(dev_path, folder),
        test_file=_relative(test_path, folder),
        near_duplicate=args.near_duplicate,
    )
    write_lock(lock, lock_path)  # last: a lock exists only for a completely written split
    if old is not None:
        console.warn(
            f"replaced the split lock {lock_path} (seed {old.seed}, {old.sizes.get('test')} "
            f"test samples, made {old.created_at}); results checked against it are no longer "
            "comparable with new ones"
        )
    console.say(
        f"split {args.data} with seed {args.seed}, dev share {args.dev:g}",
        *_size_table(split.counts()),
        *_group_lines(split.duplicate_groups),
        f"wrote {dev_path}",
        f"wrote {test_path}",
        f"wrote {lock_path}: eval and gate check {test_path.name} against it",
    )
    return EXIT_OK


def _size_table(counts: dict[str, dict[str, int]]) -> list[str]:
    from ragbridge.core.heldout.split import STRATA

    rows = [("", "dev", "test")]
    rows += [(s, str(counts["dev"][s]), str(counts["test"][s])) for s in STRATA]
    rows.append(("total", str(sum(counts["dev"].values())), str(sum(counts["test"].values()))))
    first = max(len(r[0]) for r in rows)
    width = max(len(c) for r in rows for c in r[1:])
    return [f"  {r[0]:<{first}}  {r[1]:>{width}}  {r[2]:>{width}}".rstrip() for r in rows]


def _group_lines(groups: list[list[str]]) -> list[str]:
    if not groups:
        return []
    shown = ", ".join("+".join(g) for g in groups[:_GROUPS_SHOWN])
    more = f", … and {len(groups) - _GROUPS_SHOWN} more" if len(groups) > _GROUPS_SHOWN else ""
    n = len(groups)
    return [
        f"kept {n} group{'s' if n > 1 else ''} of duplicate questions in one half each: "
        f"{shown}{more}"
    ]


# --------------------------------------------------------------------------- eval and gate


def add_heldout_options(parser: argparse.ArgumentParser, *, gate: bool = False) -> None:
    """The options of ``eval`` (and ``gate``) that check a locked test split."""
    group = parser.add_argument_group(
        "held-out test split",
        "A file X.jsonl with a split lock X.lock.json next to it (written by `ragbridge "
        "split`), or one named by --lock, is checked before scoring: test samples edited, "
        "added or removed since the lock, and test questions that also occur (exactly or as "
        "near duplicates) in the lock's dev file or in a --prompt-file."
        if not gate
        else "Read the held-out check eval recorded in the results header; with --data, "
        "check a test file again now.",
    )
    if gate:
        group.add_argument(
            "--data",
            metavar="DATA.jsonl",
            help="check this test file against its split lock (and --prompt-file) now, too",
        )
    group.add_argument(
        "--lock",
        metavar="LOCK.json",
        help="the split lock to check against (default: the data file's sibling X.lock.json)",
    )
    group.add_argument(
        "--prompt-file",
        action="append",
        default=[],
        metavar="PATH",
        help="a prompt (text, Markdown, JSON, YAML) whose few-shot examples must not hold a "
        "test question; repeatable",
    )
    group.add_argument(
        "--strict",
        action="store_true",
        help="fail the gate (exit 1) when the held-out check found a problem or none was made"
        if gate
        else "refuse to score (exit 2, nothing paid) when the data has no split lock, "
        "differs from it, or a test question leaks",
    )
    _near_option(group)


def _lock_for(args: argparse.Namespace, data: Path) -> Path | None:
    from ragbridge.core.heldout import lock_path_for

    if args.lock:
        try:
            return check_input(args.lock)
        except UserError as exc:
            raise UserError(f"--lock {exc}") from None
    sibling = lock_path_for(data)
    return sibling if sibling.is_file() else None


def heldout_record(args: argparse.Namespace, data: Path) -> dict[str, Any] | None:
    """Run the held-out check of ``data``; its record (`HeldoutReport.to_metadata`), or None
    when there is nothing to check (no lock, no prompt file, no ``--strict``). Prints nothing."""
    from ragbridge.core.heldout import LockError, check_file, lock_path_for

    _check_numbers(args)
    lock = _lock_for(args, data)
    prompts: list[Path] = []
    for path in args.prompt_file:
        try:
            prompts.append(check_input(path))
        except UserError as exc:
            raise UserError(f"--prompt-file {exc}") from None
    if lock is None and not prompts:
        if args.strict:
            raise UserError(
                f"--strict: {data} has no split lock ({lock_path_for(data)} does not exist); "
                "make one with `ragbridge split` or name it with --lock"
            )
        return None
    try:
        report = check_file(
            data, lock=lock, prompt_files=prompts, near_duplicate=args.near_duplicate
        )
    except LockError as exc:
        raise UserError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"a --prompt-file is not UTF-8 text: {exc.reason}") from None
    return report.to_metadata()


def check_heldout(args: argparse.Namespace, data: Path) -> dict[str, Any] | None:
    """Check ``data`` against its split lock, if it has one; the result goes to the run's
    metadata (``heldout``) so ``gate`` can read it from the results file.

    Problems are warnings, one line per kind; with ``--strict`` they are one `UserError`
    (exit 2) raised before anything is scored.
    """
    from ragbridge.core.heldout.check import note_lines, ok_line, problem_lines, summary

    meta = heldout_record(args, data)
    if meta is None:
        return None
    problems = problem_lines(meta)
    if problems and args.strict:
        raise UserError(f"--strict: {summary(meta)}; nothing was scored")
    for line in problems:
        console.warn(line)
    for line in note_lines(meta):
        console.note(line)
    if problems:
        console.note("scoring anyway: these are not clean held-out scores (--strict refuses)")
    else:
        console.note(ok_line(meta))
    meta["strict"] = bool(args.strict)
    return meta
