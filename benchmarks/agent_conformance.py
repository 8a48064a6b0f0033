"""Conformance of the deterministic agent measures with RAGAS and agentevals on random trajectories.

    python benchmarks/agent_conformance.py                 # 1,000 trajectories per variant
    python benchmarks/agent_conformance.py --cases 3000 --seed 7

For every random case (a reference list of tool calls, and the calls an agent made) each variant
is computed by ragbridge and by the peer, on the same inputs:

* RAGAS 0.4.3 — ``ToolCallAccuracy`` (the metric ``ragas.metrics`` exports, scored with
  ``_multi_turn_ascore`` on a ``MultiTurnSample``; ``strict_order`` on and off; arguments by
  ``ExactMatch``, by ``NonLLMStringSimilarity`` with each of its four distances, and by that
  similarity thresholded at 0.8 (a two-line ``NonLLMStringSimilarity`` subclass: RAGAS has no
  threshold of its own)), the newer ``ragas.metrics.collections.ToolCallAccuracy`` (``ascore``),
  and ``ToolCallF1`` of both stacks — against ragbridge's ``compat="ragas"``;
* agentevals 0.0.9 — ``create_trajectory_match_evaluator`` in each of its four trajectory
  modes with each of its four argument modes, with per-tool overrides (a mode, a list of
  argument paths, a function), and with calls grouped into parallel-call messages at random
  (`match_trajectory_messages`) — against ragbridge's ``compat="agentevals"``.

Printed per variant: the largest absolute difference (must be 0: the script exits 1 otherwise),
the number of cases where the values are exactly equal, the peer's mean value (for the yes/no
trajectory matches, the share of matches), the time each side took (ragbridge's with both its
compat and its default value), and how often ragbridge's default
definition (no ``compat``) gives the peer's value — where it does not, the peer's definition is
the odd one (see ``ragbridge.core.agent.tool_calls`` and ``trajectory_match``).

The cases (seeded): 0-5 reference calls to tools drawn from five, 0-3 arguments each, values
drawn from near-identical strings ("Paris", "paris", "Pariss", "Paris "), numbers and their
look-alikes (1, 1.0, "1", True), null, nested objects (in either key order) and arrays; the
agent's calls are the reference perturbed 0-3 times (an argument changed, dropped or added, two
calls swapped, all shuffled, a call added, repeated, dropped or renamed), or random (1 in 8).
"""

from __future__ import annotations

import os

# Before any framework import: no telemetry.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.pop("LANGSMITH_TRACING", None)  # never try to reach the API (a test imports this)

import argparse
import asyncio
import json
import platform
import random
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbridge.core.agent import (
    match_trajectory,
    match_trajectory_messages,
    tool_call_accuracy,
    tool_call_f1,
)

TOOLS = ("search", "lookup", "calculator", "weather", "fetch_doc")
ARG_NAMES = ("query", "q", "k", "filters", "city", "units")
WORDS = (
    "Paris",
    "paris",
    "Pariss",
    "Paris ",
    "Parsi",
    "London",
    "Londn",
    "capital of France",
    "the capital of France",
    "",
    "1",
)
LOOKALIKES: tuple[Any, ...] = (1, 1.0, "1", True, 0, False, None, 2.5, "2.5")
DISTANCES = ("levenshtein", "hamming", "jaro", "jaro_winkler")
MODES = ("strict", "unordered", "subset", "superset")
ARG_MODES = ("exact", "ignore", "subset", "superset")
THRESHOLD = 0.8


@dataclass(frozen=True)
class Call:
    """A tool call: what both peers and ragbridge read (``name``, ``args``)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Case:
    """The calls expected and the calls made, and how the made calls are grouped into
    assistant messages (sizes, summing to the number of calls) on each side."""

    reference: list[Call]
    calls: list[Call]
    groups: list[int]
    reference_groups: list[int]


# --------------------------------------------------------------------------- random cases


def _near(rng: random.Random, text: str) -> str:
    """``text`` with one character changed, added or dropped (or its case changed)."""
    if not text:
        return rng.choice("aP ")
    i = rng.randrange(len(text))
    op = rng.randrange(4)
    if op == 0:
        return text[:i] + text[i + 1 :]
    if op == 1:
        return text[:i] + rng.choice("aeisP ") + text[i:]
    if op == 2:
        return text[:i] + rng.choice("aeisP") + text[i + 1 :]
    return text.swapcase()


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(WORDS)
    if kind < 0.55:
        return _near(rng, rng.choice(WORDS))
    if kind < 0.75:
        return rng.choice(LOOKALIKES)
    if kind < 0.88 and depth < 2:
        keys = rng.sample(("a", "b", "c"), rng.randint(1, 3))
        return {k: _value(rng, depth + 1) for k in keys}
    if depth < 2:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(WORDS)


def _twin(rng: random.Random, value: Any) -> Any:
    """A value that is equal, nearly equal, or equal-looking to ``value``."""
    if isinstance(value, str):
        return _near(rng, value) if rng.random() < 0.7 else rng.choice(LOOKALIKES)
    if isinstance(value, dict) and value:
        items = list(value.items())
        if rng.random() < 0.5:
            return dict(reversed(items))  # the same object, keys in another order
        key = rng.choice([k for k, _ in items])
        return {**value, key: _twin(rng, value[key])}
    if isinstance(value, list) and value:
        return list(reversed(value)) if rng.random() < 0.5 else [*value, _value(rng, 2)]
    return rng.choice(LOOKALIKES)


def _call(rng: random.Random) -> Call:
    names = rng.sample(ARG_NAMES, rng.randint(0, 3))
    return Call(rng.choice(TOOLS), {n: _value(rng) for n in names})


def _perturb(rng: random.Random, calls: list[Call]) -> list[Call]:
    out = list(calls)
    for _ in range(rng.randint(0, 3)):
        op = rng.randrange(9)
        i = rng.randrange(len(out)) if out else None
        if op == 0 and i is not None and out[i].args:
            key = rng.choice(list(out[i].args))
            out[i] = Call(out[i].name, {**out[i].args, key: _twin(rng, out[i].args[key])})
        elif op == 1 and i is not None and out[i].args:
            key = rng.choice(list(out[i].args))
            out[i] = Call(out[i].name, {k: v for k, v in out[i].args.items() if k != key})
        elif op == 2 and i is not None:
            out[i] = Call(out[i].name, {**out[i].args, rng.choice(ARG_NAMES): _value(rng)})
        elif op == 3 and len(out) > 1:
            a, b = rng.sample(range(len(out)), 2)
            out[a], out[b] = out[b], out[a]
        elif op == 4:
            rng.shuffle(out)
        elif op == 5:
            out.insert(rng.randint(0, len(out)), _call(rng))
        elif op == 6 and i is not None:
            out.insert(rng.randint(0, len(out)), out[i])
        elif op == 7 and i is not None:
            del out[i]
        elif op == 8 and i is not None:
            out[i] = Call(rng.choice(TOOLS), out[i].args)
    return out


def _groups(rng: random.Random, n: int) -> list[int]:
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(min(rng.choice((1, 1, 1, 2, 3)), n - sum(sizes)))
    return sizes


def make_cases(count: int, *, seed: int = 32) -> list[Case]:
    """``count`` seeded random cases (see the module)."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        reference = [_call(rng) for _ in range(rng.randint(0, 5))]
        if rng.random() < 1 / 8:
            calls = [_call(rng) for _ in range(rng.randint(0, 5))]
        else:
            calls = _perturb(rng, reference)
        cases.append(Case(reference, calls, _groups(rng, len(calls)), _groups(rng, len(reference))))
    return cases


# --------------------------------------------------------------------------- the peers


def _grouped(calls: Sequence[Call], sizes: Sequence[int]) -> list[list[Call]]:
    out, start = [], 0
    for size in sizes:
        out.append(list(calls[start : start + size]))
        start += size
    return out


def _ragas_sample(case: Case) -> Any:
    from ragas.dataset_schema import MultiTurnSample
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

    messages: list[Any] = [HumanMessage(content="Where is it?")]
    for group in _grouped(case.calls, case.groups):
        calls = [ToolCall(name=c.name, args=c.args) for c in group]
        messages.append(AIMessage(content="", tool_calls=calls))
        messages += [ToolMessage(content="done") for _ in group]
    messages.append(AIMessage(content="Here."))
    return MultiTurnSample(
        user_input=messages,
        reference_tool_calls=[ToolCall(name=c.name, args=c.args) for c in case.reference],
    )


def _openai_messages(calls: Sequence[Call], sizes: Sequence[int]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where is it?"}]
    n = 0
    for group in _grouped(calls, sizes):
        ids = [f"call_{n + k}" for k in range(len(group))]
        n += len(group)
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.args)},
                    }
                    for i, c in zip(ids, group, strict=True)
                ],
            }
        )
        messages += [{"role": "tool", "content": "done", "tool_call_id": i} for i in ids]
    messages.append({"role": "assistant", "content": "Here."})
    return messages


def _our_messages(calls: Sequence[Call], sizes: Sequence[int]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("user", None)]
    for group in _grouped(calls, sizes):
        out.append(("assistant", group))
        out += [("tool", None)] * len(group)
    out.append(("assistant", None))
    return out


def _keys_subset(made: dict[str, Any], expected: dict[str, Any]) -> bool:
    """An override function that is not symmetric: the call made names no argument beyond the
    expected call's."""
    return set(made) <= set(expected)


OVERRIDES: dict[str, Any] = {
    "search": ["query", "filters.a"],
    "lookup": "ignore",
    "calculator": _keys_subset,
    "weather": "superset",
}


@dataclass
class Variant:
    """One measure/mode: ragbridge's compat value, the peer's, and ragbridge's default value."""

    measure: str
    peer: str
    ours: Callable[[Case], float]
    theirs: Callable[[Case], float]
    default: Callable[[Case], float]


def ragas_variants() -> list[Variant]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the stack ragas.evaluate runs
        from ragas.metrics import ToolCallAccuracy, ToolCallF1
    from ragas.metrics._string import DistanceMeasure, NonLLMStringSimilarity
    from ragas.metrics.collections import ToolCallAccuracy as CollectionsAccuracy
    from ragas.metrics.collections import ToolCallF1 as CollectionsF1

    @dataclass
    class Thresholded(NonLLMStringSimilarity):
        threshold: float = THRESHOLD

        async def _single_turn_ascore(self, sample: Any, callbacks: Any) -> float:
            score = await super()._single_turn_ascore(sample, callbacks)
            return float(score >= self.threshold)

    loop = asyncio.new_event_loop()

    def legacy(metric: Any) -> Callable[[Case], float]:
        return lambda case: float(
            loop.run_until_complete(metric._multi_turn_ascore(_ragas_sample(case), None))
        )

    def collections(metric: Any) -> Callable[[Case], float]:
        def run(case: Case) -> float:
            sample = _ragas_sample(case)
            result = loop.run_until_complete(
                metric.ascore(
                    user_input=sample.user_input,
                    reference_tool_calls=sample.reference_tool_calls,
                )
            )
            return float(result.value)

        return run

    def ours_acc(compat: str, **kw: Any) -> Callable[[Case], float]:
        return lambda case: (
            tool_call_accuracy(case.calls, case.reference, compat=compat, **kw).value
        )

    out: list[Variant] = []
    for strict in (True, False):
        order = "strict_order" if strict else "any order"
        arg_metrics: list[tuple[str, Any, dict[str, Any]]] = [("exact", None, {})]
        arg_metrics += [
            (d, NonLLMStringSimilarity(distance_measure=DistanceMeasure(d)), {"arg_match": d})
            for d in DISTANCES
        ]
        arg_metrics.append(
            (
                f"levenshtein>={THRESHOLD}",
                Thresholded(distance_measure=DistanceMeasure.LEVENSHTEIN),
                {"arg_match": "levenshtein", "threshold": THRESHOLD},
            )
        )
        for label, arg_metric, kw in arg_metrics:
            extra = {} if arg_metric is None else {"arg_comparison_metric": arg_metric}
            metric = ToolCallAccuracy(strict_order=strict, **extra)
            out.append(
                Variant(
                    f"tool_call_accuracy [{order}, args {label}]",
                    "ragas ToolCallAccuracy",
                    ours_acc("ragas", strict_order=strict, **kw),
                    legacy(metric),
                    ours_acc("ragbridge", strict_order=strict, **kw),
                )
            )
        out.append(
            Variant(
                f"tool_call_accuracy [{order}, args exact]",
                "ragas collections ToolCallAccuracy",
                ours_acc("ragas", strict_order=strict),
                collections(CollectionsAccuracy(strict_order=strict)),
                ours_acc("ragbridge", strict_order=strict),
            )
        )
    for peer, theirs in (
        ("ragas ToolCallF1", legacy(ToolCallF1())),
        ("ragas collections ToolCallF1", collections(CollectionsF1())),
    ):
        out.append(
            Variant(
                "tool_call_f1",
                peer,
                lambda case: tool_call_f1(case.calls, case.reference, compat="ragas").value,
                theirs,
                lambda case: tool_call_f1(case.calls, case.reference).value,
            )
        )
    return out


def agentevals_variants() -> list[Variant]:
    from agentevals.trajectory.match import create_trajectory_match_evaluator

    def theirs(mode: str, args_mode: str, overrides: Any, grouped: bool) -> Callable[[Case], float]:
        evaluator = create_trajectory_match_evaluator(
            trajectory_match_mode=mode,  # type: ignore[arg-type]
            tool_args_match_mode=args_mode,  # type: ignore[arg-type]
            tool_args_match_overrides=overrides,
        )

        def run(case: Case) -> float:
            groups = case.groups if grouped else [1] * len(case.calls)
            ref_groups = case.reference_groups if grouped else [1] * len(case.reference)
            result = evaluator(
                outputs=_openai_messages(case.calls, groups),
                reference_outputs=_openai_messages(case.reference, ref_groups),
            )
            assert isinstance(result, dict)
            return float(result["score"])

        return run

    def ours(
        mode: str, args_mode: str, overrides: Any, grouped: bool, compat: str
    ) -> Callable[[Case], float]:
        kw: dict[str, Any] = {
            "mode": mode,
            "tool_args_match_mode": args_mode,
            "tool_args_match_overrides": overrides,
            "compat": compat,
        }
        if not grouped:
            return lambda case: match_trajectory(case.calls, case.reference, **kw).value
        return lambda case: (
            match_trajectory_messages(
                _our_messages(case.calls, case.groups),
                _our_messages(case.reference, case.reference_groups),
                **kw,
            ).value
        )

    out: list[Variant] = []
    settings: list[tuple[str, str, Any, bool]] = [
        (mode, args_mode, None, False) for mode in MODES for args_mode in ARG_MODES
    ]
    settings += [(mode, "exact", OVERRIDES, False) for mode in MODES]
    settings += [(mode, "exact", None, True) for mode in MODES]
    for mode, args_mode, overrides, grouped in settings:
        label = f"trajectory_{mode}_match [args {args_mode}"
        label += ", overrides" if overrides else ""
        label += ", parallel calls grouped]" if grouped else "]"
        out.append(
            Variant(
                label,
                "agentevals",
                ours(mode, args_mode, overrides, grouped, "agentevals"),
                theirs(mode, args_mode, overrides, grouped),
                ours(mode, args_mode, overrides, grouped, "ragbridge"),
            )
        )
    return out


@dataclass
class Row:
    measure: str
    peer: str
    cases: int
    max_diff: float
    exact: int
    default_agrees: int
    seconds_ours: float
    seconds_theirs: float
    peer_total: float = 0.0
    first_difference: Case | None = None

    @property
    def peer_mean(self) -> float:
        """The peer's mean value: how often a yes/no variant says yes."""
        return self.peer_total / self.cases if self.cases else 0.0


def compare(variant: Variant, cases: Sequence[Case]) -> Row:
    """Both values of ``variant`` on every case."""
    row = Row(variant.measure, variant.peer, len(cases), 0.0, 0, 0, 0.0, 0.0)
    for case in cases:
        started = time.perf_counter()
        ours = variant.ours(case)
        default = variant.default(case)
        row.seconds_ours += time.perf_counter() - started
        started = time.perf_counter()
        theirs = variant.theirs(case)
        row.seconds_theirs += time.perf_counter() - started
        row.peer_total += theirs
        diff = abs(ours - theirs)
        if diff > row.max_diff:
            row.max_diff = diff
            row.first_difference = row.first_difference or case
        row.exact += ours == theirs
        row.default_agrees += default == theirs
    return row


def run(cases: Sequence[Case], *, peers: Sequence[str] = ("ragas", "agentevals")) -> list[Row]:
    variants: list[Variant] = []
    if "ragas" in peers:
        variants += ragas_variants()
    if "agentevals" in peers:
        variants += agentevals_variants()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RAGAS warns on every length mismatch
        return [compare(v, cases) for v in variants]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="random trajectories (1000)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--only", choices=("ragas", "agentevals"), help="one peer only")
    args = parser.parse_args(argv)
    command = "python benchmarks/agent_conformance.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print(f"$ {command.strip()}")
    print(f"python {platform.python_version()} on {platform.machine()}", end="")
    if hasattr(os, "getloadavg"):
        print("; load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()), end="")
    print()
    import importlib.metadata as md

    import ragas

    print(f"ragas {ragas.__version__}, agentevals {md.version('agentevals')}")
    cases = make_cases(args.cases, seed=args.seed)
    started = time.perf_counter()
    rows = run(cases, peers=(args.only,) if args.only else ("ragas", "agentevals"))
    elapsed = time.perf_counter() - started
    width = max(len(r.measure) for r in rows)
    peer_width = max(len(r.peer) for r in rows)
    print(
        f"{'measure [variant]':<{width}}  {'peer':<{peer_width}}  cases  peer mean  max|diff|  "
        "exact  default=peer  ours ms  peer ms"
    )
    for r in rows:
        print(
            f"{r.measure:<{width}}  {r.peer:<{peer_width}}  {r.cases:5d}  {r.peer_mean:9.3f}  "
            f"{r.max_diff:9.3g}  "
            f"{r.exact:5d}  {r.default_agrees:12d}  {1000 * r.seconds_ours:7.0f}  "
            f"{1000 * r.seconds_theirs:7.0f}"
        )
    worst = max((r.max_diff for r in rows), default=0.0)
    print(f"{len(rows)} variants x {len(cases)} cases in {elapsed:.1f} s; max |diff| {worst:g}")
    bad = [r for r in rows if r.max_diff != 0]
    for r in bad:
        print(f"DIFFERS: {r.measure} vs {r.peer}, first on {r.first_difference}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
