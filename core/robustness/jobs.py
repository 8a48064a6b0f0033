"""The (question, condition) answers a robustness run asks for, built from the clean run.

Shared by the harness (which runs them) and the plan (which counts the ones a cache already
holds), so both agree on every key and every skip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..sample import Context, Sample
from .answers import answer_key, failed
from .conditions import CLEAN, Condition, default_conditions
from .counterfactual import Counterfactual
from .perturb import NoisePool, PoolTooSmall, perturb
from .types import Perturb

__all__ = ["Job", "JobBuilder", "marked", "run_conditions"]


def run_conditions(conditions: Sequence[Condition] | None) -> list[Condition]:
    """A run's conditions (default `default_conditions`), the clean run first (added when
    missing: every other condition is built from it), each once."""
    given = list(conditions) if conditions is not None else default_conditions()
    out = [CLEAN]
    for cond in given:
        if not isinstance(cond, Condition):
            raise TypeError(f"not a Condition: {cond!r} (use Condition.parse for names)")
        if cond not in out:
            out.append(cond)
    return out


@dataclass
class Job:
    """One (question, condition) to answer: what the pipeline is given, and how."""

    source: Sample
    condition: Condition
    key: str
    perturb: Perturb | None
    counterfactual: Counterfactual | None = None


def marked(contexts: Sequence[Context]) -> int:
    """How many passages the perturbation injected or changed (its ``"robustness"`` mark)."""
    return sum(1 for c in contexts if c.metadata.get("robustness"))


class JobBuilder:
    """Turns clean answers into the jobs of the other conditions, or skips with a reason."""

    def __init__(self, clean: Mapping[str, Sample], pool: NoisePool, identity: str, seed: int):
        self.clean = clean
        self.pool = pool
        self.identity = identity
        self.seed = seed

    def job(
        self, source: Sample, cond: Condition, fact: Counterfactual | None, why: str | None
    ) -> Job | str:
        """The job of ``source`` under ``cond`` (``fact``: its counterfactual, ``why``: the
        reason there is none), or the reason it cannot be built."""
        clean = self.clean[source.id]
        if failed(clean):
            return f"the clean run failed: {clean.metadata.get('error')}"
        live = list(clean.contexts)
        if not live:
            return "the clean run retrieved no passage to perturb"
        if cond.kind == "counterfactual" and fact is None:
            return f"no counterfactual: {why or 'none could be built'}"
        try:
            given = perturb(clean, live, cond, self.pool, seed=self.seed, counterfactual=fact)
        except PoolTooSmall as exc:
            return str(exc)
        if cond.kind == "counterfactual" and not marked(given):
            assert fact is not None
            return f"no retrieved passage states the fact {fact.original!r} to change"
        pool, seed = self.pool, self.seed

        def change(now: list[Context]) -> list[Context]:
            return perturb(clean, list(now), cond, pool, seed=seed, counterfactual=fact)

        key = answer_key(self.identity, source.question, cond, seed=seed, given=given)
        return Job(source, cond, key, change, fact if cond.kind == "counterfactual" else None)
