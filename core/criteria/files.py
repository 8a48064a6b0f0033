"""Criteria files: a team's criteria in YAML or JSON, for the CLI and for version control.

Why a file: criteria are part of a project's yardstick, reviewed like code, shared by every
machine that runs ``ragbridge eval DATA --criteria criteria.yaml``. A mistake in one is
reported where it is, ``criteria.yaml:12: criteria[2].scale: must be two integers, low <
high, got [5, 1]``, before any judge is called.

The format (YAML shown; JSON is the same structure)::

    batch: true                # optional: judge criteria reading the same fields in one call
    criteria:
      - name: tone             # the measure's name: a letter, then letters, digits, _
        criteria: Is the tone right for a customer of a bank?
        scale: [1, 5]          # optional, default 1-5; evaluation_steps: optional too
      - name: cites_policy
        definition: The answer cites the policy number it relies on.   # a yes/no aspect
        reads: [answer, contexts]
        samples: 3             # optional: self-consistency, majority of 3 verdicts
      - name: completeness
        rubrics:               # a rubric: consecutive levels
          1: Misses the point of the reference.
          2: Covers part of the reference.
          3: Covers all of the reference.
        reads: [question, answer, reference]

An entry's kind is ``criterion`` (it has ``criteria``), ``aspect`` (``definition``) or
``rubric`` (``rubrics``); ``kind:`` may say so explicitly. Every entry may also give
``reads`` (default ``[question, answer]``; ``question``, ``answer``, ``contexts``,
``reference``, ``metadata.<key>``), ``threshold`` (on [0, 1], default 0.5),
``higher_is_better`` (default true) and ``meaning`` (one line for ``ragbridge metrics``).
A bare list of entries is accepted as the file too.

Steps the judge wrote can be frozen (``ragbridge criteria freeze criteria.yaml``) into a lock
beside the file, ``criteria.lock.json``, or into the file itself; `load_criteria` applies
them, and refuses a criterion edited since its steps were frozen (`StaleStepsError`);
`stale_steps` names such criteria without raising. See `ragbridge.core.criteria.lock`.

A runnable example::

    >>> import pathlib, tempfile
    >>> from ragbridge.core.criteria import load_criteria
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "criteria.yaml").write_text(
    ...     "criteria:\\n"
    ...     "  - name: tone\\n"
    ...     "    criteria: Is the tone right for a customer?\\n"
    ...     "  - name: cites_policy\\n"
    ...     "    definition: The answer cites a policy number.\\n"
    ... )
    >>> file = load_criteria(folder / "criteria.yaml")
    >>> [(spec.kind, spec.name) for spec in file.specs]
    [('criterion', 'tone'), ('aspect', 'cites_policy')]
    >>> [metric.name for metric in file.metrics()]
    ['tone', 'cites_policy']
    >>> file.lock_path.name
    'criteria.lock.json'
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from .errors import CriteriaFileError, StaleStepsError
from .lock import FROZEN_FOR, FrozenSteps, lock_path_for, read_lock
from .measures import build_metrics
from .reserved import is_builtin_measure
from .spec import Aspect, Criterion, CriterionSpec, Rubric, SpecError
from .steps import criteria_sha

if TYPE_CHECKING:
    from ..metrics.base import Metric

__all__ = [
    "ENTRY_KEYS",
    "FROZEN_FOR",
    "CriteriaFile",
    "CriteriaFileError",
    "load_criteria",
    "stale_steps",
]

_KINDS: dict[str, type[Criterion] | type[Aspect] | type[Rubric]] = {
    "criterion": Criterion,
    "aspect": Aspect,
    "rubric": Rubric,
}
_TELLS = {"criteria": "criterion", "definition": "aspect", "rubrics": "rubric"}

ENTRY_KEYS: dict[str, tuple[str, ...]] = {
    kind: tuple(f.name for f in dataclasses.fields(cls)) for kind, cls in _KINDS.items()
}
"""The keys an entry of each kind may have (besides ``kind`` and ``steps_frozen_for``)."""


@dataclass(frozen=True)
class CriteriaFile:
    """A loaded criteria file: its specs (frozen steps applied), whether to batch, its lock.

    ``frozen`` names the criteria whose steps came from the lock or were frozen into the file;
    ``stale`` those whose frozen steps no longer match their criterion (loaded with
    ``stale="regenerate"``: their steps are written again each run until frozen anew).
    """

    path: Path
    specs: tuple[CriterionSpec, ...]
    batch: bool = False
    lock_path: Path = Path()
    frozen: frozenset[str] = frozenset()
    stale: tuple[str, ...] = ()

    def metrics(self, *, batch: bool | None = None) -> list[Metric]:
        """One measure per criterion (``batch`` overrides the file's own setting)."""
        use = self.batch if batch is None else batch
        return build_metrics(self.specs, batch=use, frozen=self.frozen)

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.specs]


# ---------------------------------------------------------------------------- reading


@dataclass
class _Where:
    """Line numbers of the parsed document (1-based), by path: ``("criteria", 2, "scale")``."""

    lines: dict[tuple[Any, ...], int]

    def line(self, *path: Any) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def _marks(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name: Any = key.value
            if isinstance(key, yaml.ScalarNode) and name.lstrip("-").isdigit():
                name = int(name)
            here = (*path, name)
            out[here] = key.start_mark.line + 1
            _marks(value, here, out)
            out[here] = key.start_mark.line + 1  # the key's line, not its value's
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _marks(item, (*path, i), out)


def _read(path: Path) -> tuple[Any, _Where]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CriteriaFileError(path, None, "", f"cannot read it: {exc.strerror or exc}") from None
    lines: dict[tuple[Any, ...], int] = {}
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CriteriaFileError(path, exc.lineno, "", f"not valid JSON: {exc.msg}") from None
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            node = None  # valid JSON that YAML reads otherwise: no line numbers, same data
    elif path.suffix.lower() in (".yaml", ".yml"):
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = None if mark is None else mark.line + 1
            problem = getattr(exc, "problem", None) or str(exc)
            raise CriteriaFileError(path, line, "", f"not valid YAML: {problem}") from None
    else:
        raise CriteriaFileError(path, None, "", "a criteria file ends in .yaml, .yml or .json")
    if node is not None:
        _marks(node, (), lines)
    return data, _Where(lines)


def _kind_of(entry: Mapping[str, Any], fail: Any) -> str:
    given = entry.get("kind")
    if given is not None:
        if given not in _KINDS:
            fail("kind", f"must be one of {', '.join(_KINDS)}, got {given!r}")
        return str(given)
    found = [kind for key, kind in _TELLS.items() if key in entry]
    if len(found) != 1:
        fail(
            "",
            "give exactly one of criteria (a scored criterion), definition (a yes/no aspect) "
            "or rubrics (a rubric)",
        )
    return found[0]


def _spec(entry: Any, i: int, path: Path, where: _Where) -> tuple[CriterionSpec, str | None]:
    """Entry ``i`` as a spec, and the criterion hash its in-file frozen steps carry (or None)."""

    def fail(field: str, problem: str) -> None:
        key, _, rest = field.partition("[")
        at: tuple[Any, ...] = ("criteria", i, key) if key else ("criteria", i)
        index = rest.rstrip("]")
        if index.lstrip("-").isdigit():
            at += (int(index),)  # rubrics[2]: the line of level 2
        line = where.line(*at)
        label = f"criteria[{i}].{field}" if field else f"criteria[{i}]"
        raise CriteriaFileError(path, line, label, problem)

    if not isinstance(entry, Mapping):
        fail("", f"must be a mapping of keys (name, criteria, ...), got {type(entry).__name__}")
    kind = _kind_of(entry, fail)
    allowed = ENTRY_KEYS[kind]
    for key in entry:
        if key not in (*allowed, "kind", FROZEN_FOR):
            fail(str(key), f"unknown key for a {kind}; use {', '.join(allowed)}")
    if "name" not in entry:
        fail("", "needs a name")
    frozen_for = entry.get(FROZEN_FOR)
    if frozen_for is not None and (kind != "criterion" or "evaluation_steps" not in entry):
        fail(FROZEN_FOR, "belongs beside the evaluation_steps of a scored criterion")
    values = {k: v for k, v in entry.items() if k not in ("kind", FROZEN_FOR)}
    for key in ("reads", "scale", "evaluation_steps"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    try:
        spec: CriterionSpec = _KINDS[kind](**values)
    except SpecError as exc:
        fail(exc.field, exc.problem)
        raise  # unreachable: fail raises
    except TypeError as exc:
        fail("", str(exc))
        raise
    return spec, None if frozen_for is None else str(frozen_for)


def load_criteria(
    path: str | os.PathLike[str], *, stale: Literal["error", "regenerate"] = "error"
) -> CriteriaFile:
    """Read a criteria file (YAML or JSON; the format is in this module's docstring).

    Frozen steps are applied from the file itself or its lock (``criteria.lock.json`` beside
    it). A criterion edited since its steps were frozen raises `StaleStepsError` naming it,
    the lock and the command that freezes it again; ``stale="regenerate"`` loads it anyway,
    with a warning, its steps written again each run (`CriteriaFile.stale` names it).
    Problems raise `CriteriaFileError`, ``FILE:LINE: criteria[i].field: problem``.
    """
    if stale not in ("error", "regenerate"):
        raise ValueError(f"stale must be 'error' or 'regenerate', got {stale!r}")
    file = Path(path)
    data, where = _read(file)
    batch: Any = False
    if isinstance(data, Mapping):
        for key in data:
            if key not in ("criteria", "batch"):
                raise CriteriaFileError(
                    file, where.line(key), str(key), "unknown key; use criteria and batch"
                )
        batch = data.get("batch", False)
        if not isinstance(batch, bool):
            raise CriteriaFileError(file, where.line("batch"), "batch", "must be true or false")
        entries = data.get("criteria")
        if entries is None:
            raise CriteriaFileError(file, where.line(), "", "needs a list under criteria:")
    else:
        entries = data
        # a bare list: its entries are at the top, so alias their marks under "criteria"
        where.lines.update({("criteria", *k): v for k, v in list(where.lines.items()) if k})
    if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)) or not entries:
        raise CriteriaFileError(
            file, where.line("criteria"), "criteria", "must be a list of entries"
        )
    specs: list[CriterionSpec] = []
    in_file: dict[str, str] = {}
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        spec, frozen_for = _spec(entry, i, file, where)
        if spec.name in seen:
            raise CriteriaFileError(
                file,
                where.line("criteria", i, "name"),
                f"criteria[{i}].name",
                f"{spec.name!r} is used twice; names must be unique",
            )
        if is_builtin_measure(spec.name):
            raise CriteriaFileError(
                file,
                where.line("criteria", i, "name"),
                f"criteria[{i}].name",
                f"{spec.name!r} is a built-in measure; choose another name",
            )
        seen.add(spec.name)
        specs.append(spec)
        if frozen_for is not None:
            in_file[spec.name] = frozen_for
    return _apply_frozen(file, tuple(specs), batch, in_file, stale)


def _apply_frozen(
    file: Path,
    specs: tuple[CriterionSpec, ...],
    batch: bool,
    in_file: Mapping[str, str],
    stale: str,
) -> CriteriaFile:
    lock_path = lock_path_for(file)
    lock: Mapping[str, FrozenSteps] = read_lock(lock_path)
    applied: list[CriterionSpec] = []
    frozen: set[str] = set()
    outdated: list[str] = []
    for spec in specs:
        if not isinstance(spec, Criterion):
            applied.append(spec)
            continue
        sha = criteria_sha(spec)
        if spec.name in in_file:  # steps frozen into the file itself
            if in_file[spec.name] == sha:
                frozen.add(spec.name)
                applied.append(spec)
            else:
                outdated.append(spec.name)
                applied.append(dataclasses.replace(spec, evaluation_steps=None))
            continue
        entry = lock.get(spec.name)
        if spec.evaluation_steps or entry is None:
            applied.append(spec)  # steps of its own win over the lock
        elif entry.criteria_sha == sha:
            frozen.add(spec.name)
            applied.append(dataclasses.replace(spec, evaluation_steps=entry.steps))
        else:
            outdated.append(spec.name)
            applied.append(spec)
    if outdated and stale == "error":
        raise StaleStepsError(outdated, file, lock_path, in_file=set(outdated) & set(in_file))
    if outdated:
        warnings.warn(str(StaleStepsError(outdated, file, lock_path)), stacklevel=3)
    return CriteriaFile(file, tuple(applied), batch, lock_path, frozenset(frozen), tuple(outdated))


def stale_steps(file: CriteriaFile | str | os.PathLike[str]) -> list[str]:
    """Names of the criteria whose frozen steps no longer match the criterion (edited since);
    a path is loaded (``stale="regenerate"``, its warning silenced) to find them."""
    if isinstance(file, CriteriaFile):
        return list(file.stale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the answer is the list; loading it is not the news
        return list(load_criteria(file, stale="regenerate").stale)
