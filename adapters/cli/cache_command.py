"""``ragbridge cache PATH [stats | prune ...]``: look inside a judge cache and clean it.

The cache makes reruns free, which is only a virtue while its entries are right. Entries can go
bad in three ways, and each has its prune:

* ``--failed`` — a reply that does not parse, or that today's checks reject (one verdict too many,
  a context number that was never shown). ragbridge no longer stores such replies and treats an
  old one as a miss, but files written before that still hold them.
* ``--old-prompts`` — replies to a template version older than the one this ragbridge sends,
  and whole Scores kept by other code than this ragbridge's metrics: they are never read again
  (the version, or the code's digest, is part of the key), only taking space.
* ``--older-than DAYS`` — anything stored before a date, replies and embeddings alike.

``stats`` (the default) counts replies by model, template and version and embeddings by model,
with their sizes, and the whole Scores kept for reruns (`ragbridge.core.cache.scores`). Errors
are one line: a missing file, a folder, a file that is not a cache, a cache URL (``redis://``:
these commands read SQLite files only; a networked cache is looked after by its server).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbridge.adapters.cli import console
from ragbridge.adapters.cli.argtypes import number
from ragbridge.adapters.cli.commands import add_command
from ragbridge.adapters.cli.errors import EXIT_OK, UserError
from ragbridge.adapters.cli.plural import plural
from ragbridge.adapters.cli.tables import aligned

if TYPE_CHECKING:  # imported where used: `ragbridge --help` builds this parser without them
    from ragbridge.core.cache.disk import Cache
    from ragbridge.core.cache.stored import ReplyRow

__all__ = ["register", "run_cache"]


def register(sub: Any) -> None:
    cache = add_command(
        sub,
        "cache",
        "Show what a ragbridge cache file holds, or remove entries that are "
        "failed, answer an old prompt version, or are older than a number of days.",
    )
    cache.add_argument("path", metavar="PATH", help="the cache file (e.g. the --cache of a run)")
    actions = cache.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("stats", help="replies and embeddings by model and template (default)")
    prune = actions.add_parser(
        "prune",
        help="remove failed, old-prompt or old entries",
        description="Remove entries; give at least one of the options (they combine).",
    )
    prune.add_argument(
        "--failed",
        action="store_true",
        help="replies that do not parse or fail today's checks of their request",
    )
    prune.add_argument(
        "--old-prompts",
        action="store_true",
        help="replies to prompt template versions older than the current ones",
    )
    prune.add_argument(
        "--older-than",
        type=_days,
        metavar="DAYS",
        help="replies and embeddings stored more than DAYS days ago",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, remove nothing"
    )
    cache.set_defaults(handler=run_cache, action=None)


_days = number(
    lambda days: math.isfinite(days) and days >= 0,
    "expected a number of days >= 0, got {text!r}",
    expected="a number of days",
)


def run_cache(args: argparse.Namespace) -> int:
    from ragbridge.core.cache.backend import is_cache_url, redact_url
    from ragbridge.core.cache.disk import Cache

    if is_cache_url(args.path):
        raise UserError(
            f"{redact_url(args.path)}: `ragbridge cache` works on SQLite cache files only; "
            "a networked cache is inspected and expired on its server (e.g. redis-cli, "
            "maxmemory-policy)"
        )
    path = Path(args.path)
    if path.is_dir():
        raise UserError(f"{args.path}: is a folder, not a cache file")
    if not path.exists():
        raise UserError(f"{args.path}: no such cache file")
    with Cache(path) as cache:
        if args.action == "prune":
            return _prune(cache, path, args)
        return _stats(cache, path)


# -- stats ------------------------------------------------------------------------------------


def current_versions() -> dict[str, str]:
    """The version this ragbridge sends of each of its templates: the scoring prompts and the
    test-set writer's (kept out of the scoring registry, but their replies are cached alike)."""
    from ragbridge.core.prompts import templates
    from ragbridge.core.prompts.testset import TESTSET_TEMPLATES

    return {t.id: t.version for t in (*templates(), *TESTSET_TEMPLATES)}


def _stats(cache: Cache, path: Path) -> int:
    current = current_versions()
    groups = cache.groups()
    n_replies = sum(g.count for g in groups.replies)
    n_vectors = sum(g.count for g in groups.embeddings)
    n_results = cache.stats().results
    console.say(
        f"{path}: {_size(_file_bytes(path))}, {plural(n_replies, 'reply', 'replies')}, "
        f"{plural(n_vectors, 'embedding')}, {plural(n_results, 'kept result')}",
    )
    if groups.replies:
        rows: list[tuple[str, ...]] = [
            ("model", "template", "version", "replies", "size", "newest")
        ]
        for g in groups.replies:
            version = g.template_version or "?"
            if g.template_id in current and _older(g.template_version, current[g.template_id]):
                version += f" (old; current {current[g.template_id]})"
            rows.append(
                (g.model, g.template_id, version, str(g.count), _size(g.text_bytes), _day(g.newest))
            )
        console.say("replies:", *aligned(rows, indent="  "))
    if groups.embeddings:
        vector_rows: list[tuple[str, ...]] = [("model", "dim", "vectors", "size", "")]
        for e in groups.embeddings:
            unknown = f"{e.unknown_age} of unknown age" if e.unknown_age else ""
            vector_rows.append((e.model, str(e.dim), str(e.count), _size(e.vector_bytes), unknown))
        console.say("embeddings:", *aligned(vector_rows, indent="  "))
    return EXIT_OK


def _age(days: float) -> str:
    return f"{days:g} {'day' if days == 1 else 'days'}"


# -- prune ------------------------------------------------------------------------------------


def _prune(cache: Cache, path: Path, args: argparse.Namespace) -> int:
    if not (args.failed or args.old_prompts or args.older_than is not None):
        raise UserError("cache prune: give --failed, --old-prompts and/or --older-than DAYS")
    before = _file_bytes(path)
    verb = "would remove" if args.dry_run else "removed"
    lines: list[str] = []
    if args.failed or args.old_prompts:
        rows = list(cache.reply_rows())
        if args.failed:
            rows = _prune_failed(cache, rows, verb, args.dry_run, lines)
        if args.old_prompts:
            _prune_old_prompts(cache, rows, verb, args.dry_run, lines)
    if args.older_than is not None:
        lines.append(_prune_older(cache, args.older_than, verb, args.dry_run))
    if not args.dry_run:
        cache.vacuum()
        lines.append(f"{path}: {_size(before)} -> {_size(_file_bytes(path))}")
    console.say(*lines)
    return EXIT_OK


def _prune_failed(
    cache: Cache, rows: list[ReplyRow], verb: str, dry_run: bool, lines: list[str]
) -> list[ReplyRow]:
    """Remove the replies that fail today's checks (`failed_replies`); the rows left."""
    failed, unchecked = failed_replies(rows)
    lines.append(
        f"{verb} {len(failed)} failed of {plural(len(rows), 'reply', 'replies')}"
        + (f" ({unchecked} checked for parsing only: stored before checks)" if unchecked else "")
    )
    if not dry_run:
        cache.delete_replies([r.key for r in failed])
    gone = {r.key for r in failed}
    return [r for r in rows if r.key not in gone]


def _prune_old_prompts(
    cache: Cache, rows: list[ReplyRow], verb: str, dry_run: bool, lines: list[str]
) -> None:
    """Remove replies to old template versions, and kept Scores of other code versions."""
    old = old_prompt_replies(rows)
    lines.append(f"{verb} {plural(len(old), 'reply', 'replies')} to old prompt versions")
    if not dry_run:
        cache.delete_replies([r.key for r in old])
    codes = current_codes()
    stale = sum(n for code, n in cache.result_codes().items() if code not in codes)
    lines.append(f"{verb} {plural(stale, 'kept result')} of other code versions")
    if not dry_run:
        cache.delete_results(keep_codes=codes)


def _prune_older(cache: Cache, days: float, verb: str, dry_run: bool) -> str:
    """Remove (or, dry, count) what was stored more than ``days`` days ago."""
    cutoff = time.time() - days * 86400.0
    if dry_run:
        replies = sum(1 for r in cache.reply_rows() if r.created is not None and r.created < cutoff)
        return f"{verb} {plural(replies, 'reply', 'replies')} older than {_age(days)}"
    replies, vectors = cache.delete_older_than(cutoff)
    return (
        f"{verb} {plural(replies, 'reply', 'replies')} and "
        f"{plural(vectors, 'embedding')} older than {_age(days)}"
    )


def current_codes() -> set[str]:
    """Code digests of this ragbridge's metrics: kept results written by others are stale."""
    from ragbridge.core.cache.scores import code_digest
    from ragbridge.core.metrics import ALL_LLM_METRICS, OFFLINE_METRICS

    found = (code_digest(cls) for cls in (*ALL_LLM_METRICS, *OFFLINE_METRICS))
    return {code for code in found if code is not None}


def failed_replies(rows: Iterable[ReplyRow]) -> tuple[list[ReplyRow], int]:
    """Replies that fail today's parse or checks, and how many could be checked for parsing
    only (no stored facts: written before ragbridge recorded them).

    Replies to templates that are not ragbridge's (RAGAS's or DeepEval's prompts, parsed by
    their frameworks) fail only when empty.
    """
    from ragbridge.core.judging.reply_parse import parse_reply
    from ragbridge.core.prompts import get
    from ragbridge.core.prompts.testset import TESTSET_TEMPLATES

    writers = {t.id: t for t in TESTSET_TEMPLATES}
    failed: list[ReplyRow] = []
    parse_only = 0
    for row in rows:
        try:
            template = writers.get(row.template_id) or get(row.template_id)
        except KeyError:
            if not row.text.strip():
                failed.append(row)
            continue
        value, _ = parse_reply(row.text, template.schema)
        if value is None:
            failed.append(row)
            continue
        if row.facts is None:
            parse_only += 1
        facts = {k: v for k, v in (row.facts or {}).items() if isinstance(v, int)}
        if template.check(value, facts) is not None:
            failed.append(row)
    return failed, parse_only


def old_prompt_replies(rows: Iterable[ReplyRow]) -> list[ReplyRow]:
    """Replies to a ragbridge template at a version older than the current one."""
    current = current_versions()
    return [
        r
        for r in rows
        if r.template_id in current and _older(r.template_version, current[r.template_id])
    ]


def _older(version: str | None, current: str) -> bool:
    """Whether ``version`` precedes ``current`` (numeric when both are; unknown is not old)."""
    if version is None or version == current:
        return False
    try:
        return float(version) < float(current)
    except ValueError:
        return True  # a version string this ragbridge does not send


# -- formatting -------------------------------------------------------------------------------


def _file_bytes(path: Path) -> int:
    """The file and its write-ahead log: what the cache occupies on disk."""
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):  # no WAL file: nothing to add
            total += os.path.getsize(f"{path}{suffix}")
    return total


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


def _day(when: float | None) -> str:
    from datetime import datetime, timezone

    if when is None:
        return "?"
    return datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%d")
