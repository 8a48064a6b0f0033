"""What a team's own criteria cost: judge calls and prompt characters, next to DeepEval's
``GEval`` and RAGAS's ``AspectCritic``; steps written once per run; log-probability weighting.

    python benchmarks/criteria_cost.py            # every section (about 30 s on 2 cores)
    python benchmarks/criteria_cost.py --only calls,chars

Sections (issue 30's figures; nothing is sent anywhere, no LLM, no network but loopback):

* ``calls`` — judge calls per sample for five criteria judged separately (goal: at most one
  per criterion) and batched (goal: one per sample per group of criteria reading the same
  fields), measured by a counting judge and compared with ``ragbridge estimate``'s dry run.
* ``chars`` — prompt characters per sample for the same five criteria, with the same counting
  judge: ragbridge separate and batched; DeepEval 4.3's own ``GEval`` (one metric per
  criterion, given the same evaluation steps, so no steps call is counted for either side);
  RAGAS 0.4.3's own ``AspectCritic`` (one per criterion, the criterion as its definition).
  Goal: ragbridge batched <= 0.5x the cheaper peer. The steps call (G-Eval writes the steps
  once per criterion) is printed apart for ragbridge and GEval.
* ``steps`` — a criterion's steps are written once per run (not per sample), and a rerun on
  the same cache makes no call at all; frozen steps make no steps call even without a cache.
* ``logprobs`` — against ``tests/fake_openai.py`` (a real socket on 127.0.0.1) returning
  ``top_logprobs``: the criterion's score is the probability-weighted mean of the levels,
  equal to the expectation computed by hand; a server refusing log-probabilities gives the
  integer, and the details say which.

The samples are the twelve of ``tests/data/twelve_samples.jsonl``. Characters are the sum of
``len(content)`` over a request's messages, the same rule for every framework.
"""

from __future__ import annotations

import os

# Before any framework import: no telemetry, no .env loading.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import asyncio
import contextlib
import io
import math
import platform
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from ragbridge.core import Sample, estimate, evaluate
from ragbridge.core.criteria import Aspect, Criterion, CriterionSpec, criteria_metrics
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.sample import load_samples
from ragbridge.core.testing import CountingJudge, task_of

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "data" / "twelve_samples.jsonl"
SECTIONS = ("calls", "chars", "steps", "logprobs")

STEPS = (
    "Read the question and the answer.",
    "Check the answer against the criterion, point by point.",
    "Give a low score when the criterion is not met and a high one when it fully is.",
)
CRITERIA: dict[str, str] = {
    "tone": "Is the tone polite and right for an employee asking the HR helpdesk?",
    "direct": "Does the answer answer the question directly, in its first sentence?",
    "concise": "Is the answer concise, without filler or repetition?",
    "plain": "Is the answer written in plain language, without jargon?",
    "cites_policy": "Does the answer name the policy it relies on?",
}


def criteria(*, steps: bool = True, kind: str = "criterion") -> list[CriterionSpec]:
    """The five criteria (reading question and answer) as scored criteria or aspects."""
    if kind == "aspect":
        return [Aspect(name, text) for name, text in CRITERIA.items()]
    return [
        Criterion(name, text, evaluation_steps=STEPS if steps else None)
        for name, text in CRITERIA.items()
    ]


@dataclass
class CharJudge(CountingJudge):
    """A `CountingJudge` that also counts prompt characters, by ragbridge task (or, for a
    peer's prompt, by the name of the schema it asks for)."""

    chars: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        kind = task_of(messages) or (schema.__name__ if schema is not None else "text")
        self.kinds[kind] += 1
        self.chars[kind] += sum(len(m.get("content", "")) for m in messages)
        return await super().generate(messages, schema=schema)


def samples() -> list[Sample]:
    return list(load_samples(SAMPLES))


def quiet() -> contextlib.ExitStack:
    """Frameworks print banners and progress bars: keep them out of the table."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


# --------------------------------------------------------------------------- sections


def run_ours(specs: Sequence[CriterionSpec], batch: bool) -> CharJudge:
    judge = CharJudge()
    with quiet():
        evaluate(samples(), criteria_metrics(specs, batch=batch), judge=judge)
    return judge


def section_calls() -> None:
    n = len(samples())
    print("\n(a) judge calls per sample, 5 criteria reading question+answer, 12 samples")
    print(f"  {'setting':<36}{'calls/sample':>13}{'steps calls':>12}{'total':>7}{'dry run':>9}")
    mixed = criteria(steps=False)
    mixed[3] = Criterion("plain", CRITERIA["plain"], reads=("answer", "contexts"))
    mixed[4] = Criterion("cites_policy", CRITERIA["cites_policy"], reads=("answer", "contexts"))
    rows = [
        ("separate (one call per criterion)", criteria(steps=False), False, 5),
        ("batched (batch=True)", criteria(steps=False), True, 1),
        ("batched, two reads-groups (3 + 2)", mixed, True, 2),
    ]
    for label, specs, batch, goal in rows:
        judge = run_ours(specs, batch)
        steps = judge.kinds["criteria.steps"]
        per_sample = (judge.calls - steps) / n
        dry = estimate(samples(), criteria_metrics(specs, batch=batch))
        verdict = "ok" if per_sample <= goal else "MISSED"
        print(
            f"  {label:<36}{per_sample:>13.2f}{steps:>12}{judge.calls:>7}{dry.calls:>9}"
            f"   goal <= {goal}/sample: {verdict}"
        )


def _geval(judge: CharJudge, docs: list[Sample]) -> None:
    from deepeval.metrics import GEval
    from deepeval.test_case import LLMTestCase, LLMTestCaseParams

    from ragbridge.adapters.deepeval.models import DeepEvalJudge

    model = DeepEvalJudge(judge)
    params = [LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT]
    metrics = [
        GEval(
            name=name,
            criteria=text,
            evaluation_steps=list(STEPS),
            evaluation_params=params,
            model=model,
            async_mode=True,
        )
        for name, text in CRITERIA.items()
    ]

    async def every() -> None:
        for sample in docs:
            case = LLMTestCase(input=sample.question, actual_output=sample.answer or "")
            await asyncio.gather(*(m.a_measure(case, _show_indicator=False) for m in metrics))

    asyncio.run(every())


def _geval_steps(judge: CharJudge) -> None:
    """One GEval metric without steps: the call DeepEval makes to write them."""
    from deepeval.metrics import GEval
    from deepeval.test_case import LLMTestCase, LLMTestCaseParams

    from ragbridge.adapters.deepeval.models import DeepEvalJudge

    metric = GEval(
        name="tone",
        criteria=CRITERIA["tone"],
        evaluation_params=[LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT],
        model=DeepEvalJudge(judge),
        async_mode=True,
    )
    case = LLMTestCase(input="How many days?", actual_output="Ten.")
    asyncio.run(metric.a_measure(case, _show_indicator=False))


def _aspect_critic(judge: CharJudge, docs: list[Sample]) -> None:
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics import AspectCritic

    from ragbridge.adapters.ragas.models import RagasJudge

    llm = RagasJudge(judge)
    metrics = [AspectCritic(name=name, definition=text, llm=llm) for name, text in CRITERIA.items()]

    async def every() -> None:
        for sample in docs:
            row = SingleTurnSample(user_input=sample.question, response=sample.answer or "")
            await asyncio.gather(*(m.single_turn_ascore(row) for m in metrics))

    asyncio.run(every())


def section_chars() -> None:
    docs = samples()
    n = len(docs)
    print("\n(b) prompt characters per sample, the same 5 criteria, the same counting judge")
    print(f"  {'setting':<52}{'calls/sample':>13}{'chars/sample':>13}")
    rows: list[tuple[str, float, float]] = []
    for label, specs, batch in (
        ("ragbridge, 5 scored criteria, separate", criteria(), False),
        ("ragbridge, 5 scored criteria, batched", criteria(), True),
        ("ragbridge, 5 aspects (yes/no), separate", criteria(kind="aspect"), False),
        ("ragbridge, 5 aspects (yes/no), batched", criteria(kind="aspect"), True),
    ):
        judge = run_ours(specs, batch)
        rows.append((label, judge.calls / n, sum(judge.chars.values()) / n))
    peers: list[tuple[str, float, float]] = []
    try:
        judge = CharJudge()
        with quiet():
            _geval(judge, docs)
        peers.append(("DeepEval 4.3 GEval x5 (same steps given)", judge.calls / n,
                      sum(judge.chars.values()) / n))  # fmt: skip
    except ImportError:
        print("  DeepEval GEval: skipped, install ragbridge[deepeval]")
    try:
        judge = CharJudge()
        with quiet():
            _aspect_critic(judge, docs)
        peers.append(("RAGAS 0.4.3 AspectCritic x5", judge.calls / n,
                      sum(judge.chars.values()) / n))  # fmt: skip
    except ImportError:
        print("  RAGAS AspectCritic: skipped, install ragbridge[ragas]")
    for label, calls, chars in rows + peers:
        print(f"  {label:<52}{calls:>13.2f}{chars:>13,.0f}")
    chars_of = {label: chars for label, _, chars in rows + peers}
    pairs = [(rows[1][0], p[0]) for p in peers if "GEval" in p[0]]  # scored vs G-Eval
    pairs += [(rows[3][0], p[0]) for p in peers if "AspectCritic" in p[0]]  # yes/no vs yes/no
    if peers:
        cheaper = min(peers, key=lambda p: p[2])[0]
        pairs += [(rows[1][0], cheaper)] if (rows[1][0], cheaper) not in pairs else []
        pairs += [(rows[3][0], cheaper)] if (rows[3][0], cheaper) not in pairs else []
    for ours_label, peer in pairs:
        ratio = chars_of[ours_label] / chars_of[peer]
        verdict = "ok" if ratio <= 0.5 else "MISSED"
        what = "the cheaper peer" if peer == min(peers, key=lambda p: p[2])[0] else "its peer"
        print(f"  {ours_label.removeprefix('ragbridge, ')} / {peer.split(' x5')[0]} "
              f"({what}): {ratio:.3f}x   goal <= 0.5x: {verdict}")  # fmt: skip
    ours = CharJudge()
    with quiet():
        evaluate(docs[:1], criteria_metrics(criteria(steps=False)[:1]), judge=ours)
    written_here = ours.chars["criteria.steps"]
    line = f"  writing the steps, once per criterion per run: ragbridge {written_here:,}"
    with contextlib.suppress(ImportError):
        judge = CharJudge()
        with quiet():
            _geval_steps(judge)
        written = sum(c for k, c in judge.chars.items() if judge.kinds[k] and "Steps" in k)
        line += f", DeepEval GEval {written:,}"
    print(line + " characters")


def section_steps() -> None:
    print("\n(c) steps written once per run; a rerun on the cache asks nothing")
    print(f"  {'run':<60}{'steps calls':>12}{'all calls':>10}")
    with tempfile.TemporaryDirectory() as folder:
        cache = str(Path(folder) / "cache.sqlite")
        for label, specs, use_cache, reuse in (
            ("1st run, 5 criteria x 12 samples, cold cache", criteria(steps=False), True, True),
            ("2nd run, same cache (fresh metrics)", criteria(steps=False), True, True),
            ("3rd run, same cache, kept Scores not reused", criteria(steps=False), True, False),
            ("no cache, steps frozen (given)", criteria(steps=True), False, True),
        ):
            judge = CharJudge()
            with quiet():
                evaluate(
                    samples(),
                    criteria_metrics(specs),
                    judge=judge,
                    cache=cache if use_cache else None,
                    reuse_results=reuse,
                )
            steps = judge.kinds["criteria.steps"]
            print(f"  {label:<60}{steps:>12}{judge.calls:>10}")


def section_logprobs() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_openai import FakeOpenAI

    from ragbridge.adapters.openai import OpenAIJudge

    print("\n(d) log-probability weighting on a fake OpenAI-compatible server (127.0.0.1)")
    probs = {"4": 0.6, "5": 0.3, "3": 0.1}
    expected = sum(int(k) * p for k, p in probs.items())
    token = ("4", math.log(probs["4"]), {k: math.log(p) for k, p in probs.items()})
    tokens = ['{"', "reason", '":"', "fine", '","', "score", '":', token, "}"]
    text = '{"reason":"fine","score":4}'
    spec = Criterion("tone", CRITERIA["tone"], evaluation_steps=STEPS, scale=(1, 5))
    sample = samples()[:1]
    print(f"  top_logprobs at the score: {probs}; by hand: sum p*s = {expected:.3f}"
          f" -> ({expected:.3f}-1)/4 = {(expected - 1) / 4:.4f}")  # fmt: skip
    for label, refuse in (("server returns top_logprobs", False), ("server refuses them", True)):
        with FakeOpenAI(answer=lambda _: text, logprobs=[tokens], refuse_logprobs=refuse) as server:
            judge = OpenAIJudge("gpt-fake", base_url=server.base_url, api_key="dummy")
            with quiet():
                result = evaluate(sample, [spec.metric()], judge=judge, max_retries=1)
        score = result.get(sample[0].id, "tone")
        assert score is not None
        if score.value is None:
            print(f"  {label}: failed: {score.failure}")
            continue
        raw = score.details.get("raw")
        weighting = score.details.get("weighting")
        want = (expected - 1) / 4 if not refuse else (4 - 1) / 4
        verdict = "ok" if math.isclose(score.value, want, abs_tol=1e-9) else "MISSED"
        print(f"  {label:<30} raw {raw!s:<8} value {score.value:.4f} weighting {weighting:<9}"
              f" expected {want:.4f}: {verdict}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; use {', '.join(SECTIONS)}")
    shown = "" if chosen == list(SECTIONS) else f" --only {','.join(chosen)}"
    print(f"$ python benchmarks/criteria_cost.py{shown}")
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}")
    if hasattr(os, "getloadavg"):
        print("load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    start = time.perf_counter()
    for name in chosen:
        {"calls": section_calls, "chars": section_chars, "steps": section_steps,
         "logprobs": section_logprobs}[name]()  # fmt: skip
    print(f"\n{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
