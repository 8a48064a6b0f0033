"""A team's own criteria as measures: scored criteria (G-Eval), yes/no aspects (AspectCritic),
rubrics (RubricsScore); written in Python or in a YAML/JSON file, checked against people with
``ragbridge agreement`` like any judge measure.

Where each part lives:

* `spec` — `Criterion`, `Aspect`, `Rubric` (checked at construction) and `criteria_metrics`;
* `measures` — one `Metric` class per criterion, one judge call each per sample;
* `batch` — several criteria reading the same fields in one call (``batch=True``);
* `inputs` — what a call is given (the fields a criterion reads), shared by those two;
* `steps` — evaluation steps written once per run and versioned; `lock` — pinned steps;
* `weighting` — G-Eval's probability-weighted score from token log-probabilities;
* `files` — criteria files (the format, with a runnable example, is in its docstring);
  `errors` — what reading a file or a lock raises;
* `registration` — criteria in the measure registry (``ragbridge metrics``, kind ``criteria``);
  `reserved` — the built-in measures' names a criterion may not take.

Imports run one way, never back: registration -> files -> lock and measures; measures ->
batch -> inputs, verdicts, steps -> spec. `spec`, which every other module reads, builds
measures through a builder `measures` installs into it when imported; importing this package
(which any import of one of its modules does first) imports `measures`, so
``Criterion(...).metric()`` finds it whichever of them was imported.

A minimal run::

    from ragbridge.core import evaluate
    from ragbridge.core.criteria import Aspect, Criterion, criteria_metrics

    metrics = criteria_metrics(
        [
            Criterion("tone", "Is the tone right for a customer of a bank?"),
            Aspect("cites_policy", "The answer cites the policy number it relies on."),
        ],
        batch=True,
    )
    result = evaluate(samples, metrics, judge=judge)
"""

from __future__ import annotations

from . import measures  # noqa: F401  (installs the builder criteria_metrics calls)
from .errors import CriteriaFileError, StaleStepsError
from .files import CriteriaFile, load_criteria, stale_steps
from .lock import freeze, lock_path_for
from .registration import register_criteria
from .spec import (
    FIELD_NAMES,
    Aspect,
    Criterion,
    CriterionSpec,
    Rubric,
    SpecError,
    criteria_metrics,
)
from .steps import criteria_sha, generate_steps, steps_version
from .weighting import weighted_score

__all__ = [
    "FIELD_NAMES",
    "Aspect",
    "CriteriaFile",
    "CriteriaFileError",
    "Criterion",
    "CriterionSpec",
    "Rubric",
    "SpecError",
    "StaleStepsError",
    "criteria_metrics",
    "criteria_sha",
    "freeze",
    "generate_steps",
    "load_criteria",
    "lock_path_for",
    "register_criteria",
    "stale_steps",
    "steps_version",
    "weighted_score",
]
