"""A held-out test split that stays clean: split it, lock it, check it before scoring.

* `split` — `split_samples`: dev and test halves, deterministic for a seed, independent of the
  file's line order, stratified by no-answer vs answerable, duplicate questions kept together.
* `lock` — `SplitLock`: a content hash of every test sample; `check_against_lock` says which
  samples were edited (and in which fields), added, removed or renamed since.
* `leaks` — `find_leaks`: test questions that also occur, exactly or as near duplicates, in the
  dev split or in a prompt file's few-shot examples (lexical rule, no model).
* `check` — `check_file`: both checks of one eval file, as the record a results header keeps.

``ragbridge split`` writes the halves and the lock; ``ragbridge eval`` and ``ragbridge gate``
run the checks (`ragbridge.adapters.cli.split_command`).
"""

from .check import HeldoutReport, check_file, lock_path_for, ok_line, problem_lines, split_paths
from .leaks import NEAR_DUPLICATE, Leak, PromptText, duplicate_groups, find_leaks, read_prompt_file
from .lock import (
    LockCheck,
    LockError,
    LockFinding,
    SplitLock,
    check_against_lock,
    make_lock,
    read_lock,
    write_lock,
)
from .split import ANSWERABLE, NO_ANSWER, Split, split_samples, stratum

__all__ = [
    "ANSWERABLE",
    "NEAR_DUPLICATE",
    "NO_ANSWER",
    "HeldoutReport",
    "Leak",
    "LockCheck",
    "LockError",
    "LockFinding",
    "PromptText",
    "Split",
    "SplitLock",
    "check_against_lock",
    "check_file",
    "duplicate_groups",
    "find_leaks",
    "lock_path_for",
    "make_lock",
    "ok_line",
    "problem_lines",
    "read_lock",
    "read_prompt_file",
    "split_paths",
    "split_samples",
    "stratum",
    "write_lock",
]
