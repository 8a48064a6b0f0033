"""pytest plugin: RAG quality as ordinary test assertions.

Loaded by pytest through the ``pytest11`` entry point whenever ragbridge is installed, so it must
cost nothing at startup: it imports only pytest, and ragbridge's core on first use.

* `assert_rag(sample, metrics, thresholds, judge=...)` scores one `Sample` and fails the test
  with a message that shows, for every metric that missed, its value against the threshold, the
  reason and the per-claim (or per-context) verdicts — what a reviewer needs to see without
  rerunning anything. A judge failure or a skipped measure fails the assertion too: a threshold
  that could not be checked is not a pass.
* ``@pytest.mark.ragbridge_samples("eval.jsonl")`` on a test that takes the ``rag_sample``
  fixture runs it once per sample of the file, with the sample id as the test id, so an eval
  set becomes a parametrised test suite (``pytest -k sample-id`` reruns one).

Thresholds are minima, except for measures where lower is better (``hallucination``), where
they are maxima; `Metric.higher_is_better` says which.

Without a judge, a measure named without a provider uses its offline provider, as the
``ragbridge`` command does (``faithfulness`` → ``faithfulness:offline``), and an assertion
message says so; a measure that exists only as a judge measure raises ValueError asking for
``judge=``. Pass ``"faithfulness:llm"`` to insist on the judge version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ragbridge.core.metrics.base import Metric
    from ragbridge.core.results.evaluation import Score
    from ragbridge.core.sample import Sample
    from ragbridge.core.settings import Settings, SettingsOptions

__all__ = ["RagAssertionError", "assert_rag"]

MARKER = "ragbridge_samples"


class RagAssertionError(AssertionError):
    """A RAG assertion that missed; ``scores`` holds every Score, ``missed`` the metric names."""

    def __init__(self, message: str, scores: Mapping[str, Score], missed: list[str]) -> None:
        super().__init__(message)
        self.scores = dict(scores)
        self.missed = missed


def assert_rag(
    sample: Sample,
    metrics: Iterable[Metric | str],
    thresholds: Mapping[str, float] | float = 0.5,
    *,
    settings: Settings | None = None,
    **options: Unpack[SettingsOptions],
) -> dict[str, Score]:
    """Score ``metrics`` on ``sample`` and raise `RagAssertionError` if any misses its threshold.

    ``thresholds`` is one number for every metric or a mapping by metric name; metrics absent
    from the mapping are scored and reported but not asserted. Returns the scores when all pass.
    ``settings`` (or its fields as keywords: ``judge=``, ``embedder=``, ``cache=``, ...) mean
    what they mean for `ragbridge.core.evaluate`.
    """
    __tracebackhide__ = True
    from ragbridge.adapters.metric_choice import JudgeOnlyError, choose_without_judge
    from ragbridge.core.scoring.scorer import Scorer
    from ragbridge.core.settings import Settings

    config = Settings.of(settings, options)
    try:
        choice = choose_without_judge(metrics, have_judge=config.judge is not None)
    except JudgeOnlyError as exc:
        raise ValueError(
            f"{', '.join(exc.names)} {'needs' if len(exc.names) == 1 else 'need'} a judge and "
            "no offline provider exists: pass judge=..."
        ) from None
    scorer = Scorer(choice.metrics, settings=config)
    if isinstance(thresholds, Mapping):
        unknown = sorted(set(thresholds) - set(scorer.names))
        if unknown:
            raise ValueError(
                f"thresholds name metrics that are not scored: {', '.join(unknown)}; "
                f"scored: {', '.join(scorer.names)}"
            )
        wanted = {name: float(t) for name, t in thresholds.items()}
    else:
        wanted = {name: float(thresholds) for name in scorer.names}
    for name, t in wanted.items():
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold for {name} must lie within [0, 1], got {t}")
    scores = scorer.score(sample)
    direction = {m.name: m.higher_is_better for m in scorer.metrics}
    missed = [
        name
        for name, t in wanted.items()
        if not _meets(scores[name], t, higher_is_better=direction[name])
    ]
    if missed:
        message = _message(sample, scores, wanted, direction, missed, choice.note())
        raise RagAssertionError(message, scores, missed)
    return scores


def _meets(score: Score, threshold: float, *, higher_is_better: bool) -> bool:
    if score.value is None:
        return False
    return score.value >= threshold if higher_is_better else score.value <= threshold


def _message(
    sample: Sample,
    scores: Mapping[str, Score],
    wanted: Mapping[str, float],
    direction: Mapping[str, bool],
    missed: list[str],
    note: str | None = None,
) -> str:
    from ragbridge.core.scoring.scorer import explain

    lines = [f"sample {sample.id!r}: {len(missed)} of {len(wanted)} RAG thresholds missed"]
    if note:
        lines.append(f"  providers: {note.replace('--judge', 'judge')}")
    for name, score in scores.items():
        if name not in wanted:
            shown = "—" if score.value is None else f"{score.value:.3f}"
            lines.append(f"  {name}: {shown} (not asserted)")
            continue
        op = ">=" if direction[name] else "<="
        mark = "✗" if name in missed else "✓"
        shown = score.status if score.value is None else f"{score.value:.3f}"
        lines.append(f"  {mark} {name}: {shown} (wanted {op} {wanted[name]:g})")
    for name in missed:
        lines.append(f"{name}:")
        lines.extend("  " + line for line in explain(scores[name]).splitlines())
    return "\n".join(lines)


# --------------------------------------------------------------------------- pytest hooks


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path, *, skip_invalid=False): run the test once per Sample of a ragbridge "
        "JSONL eval set, given to the test as the `rag_sample` fixture (test id = sample id).",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rag_sample" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return  # the fixture then explains what is missing
    if not marker.args:
        _refuse("needs the path of a JSONL eval set")
    from ragbridge.core.sample import SampleValidationError, load_samples

    path = Path(marker.args[0])
    if not path.is_absolute():
        path = Path(metafunc.definition.fspath).parent / path
    if not path.exists():
        _refuse(f"no such file {path}")
    try:
        samples = list(load_samples(path, skip_invalid=bool(marker.kwargs.get("skip_invalid"))))
    except SampleValidationError as exc:
        _refuse(str(exc))
    if not samples:
        _refuse(f"{path} holds no samples")
    metafunc.parametrize("rag_sample", samples, ids=[s.id for s in samples], indirect=True)


def _refuse(problem: str) -> NoReturn:
    # A collection error with the message alone: the traceback would be pluggy's, not the user's.
    pytest.fail(f"@pytest.mark.{MARKER}: {problem}", pytrace=False)


@pytest.fixture
def rag_sample(request: pytest.FixtureRequest) -> Any:
    """One `Sample` of the eval set named by ``@pytest.mark.ragbridge_samples(path)``."""
    if not hasattr(request, "param"):
        raise pytest.UsageError(
            f"the rag_sample fixture needs @pytest.mark.{MARKER}('eval.jsonl') on the test"
        )
    return request.param
