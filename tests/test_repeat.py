"""``eval --repeat N`` and `ragbridge.core.labels.repeatability`: variance, flips, the CI over
repeats, and the cache bypassed for runs 2..N (and only for them)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragbridge.adapters.cli.main import main
from ragbridge.core import Sample
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.judge import JudgeReply, Message
from ragbridge.core.labels.repeatability import evaluate_repeated, repeatability
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score


def _run(values: dict[str, float | None]) -> Evaluation:
    ev = Evaluation()
    for sample_id, value in values.items():
        if value is None:
            ev.add(
                sample_id, "m", Score(failure=Failure(kind=FailureKind.PARSE_ERROR, message="x"))
            )
        else:
            ev.add(sample_id, "m", Score(value=value))
    return ev


def test_variance_flips_and_incomplete_samples_are_counted() -> None:
    runs = [
        _run({"a": 1.0, "b": 0.2, "c": 0.6, "d": 0.9}),
        _run({"a": 1.0, "b": 0.8, "c": 0.4, "d": None}),
        _run({"a": 1.0, "b": 0.2, "c": 0.6, "d": 0.9}),
    ]
    f = repeatability(runs, judged=["m"])["m"]
    assert f.n_samples == 3
    assert f.incomplete == ["d"]
    assert f.flipped == ["b", "c"]
    assert f.flip_share == pytest.approx(2 / 3)
    # population variance of (0.2, 0.8, 0.2) is 0.08; of (0.6, 0.4, 0.6) 0.00888...
    assert f.max_variance == pytest.approx(0.08)
    assert f.most_variable == "b"
    assert f.mean_variance == pytest.approx((0.0 + 0.08 + 0.08 / 9) / 3)
    assert f.run_means == pytest.approx([0.6, 0.7333333, 0.6])
    assert f.mean == pytest.approx((1.0 + 0.4 + 0.5333333) / 3)
    assert f.ci_low is not None
    assert f.ci_high is not None
    assert f.ci_low <= f.mean <= f.ci_high


def test_agreeing_runs_have_no_flips_and_zero_variance() -> None:
    run = {"a": 0.3, "b": 0.7}
    f = repeatability([_run(run), _run(run)])["m"]
    assert f.flipped == []
    assert f.mean_variance == 0.0
    assert f.most_variable is None
    assert f.judged is False


def test_a_score_of_exactly_the_threshold_is_a_no_as_in_agreement() -> None:
    f = repeatability([_run({"a": 0.5, "b": 0.5}), _run({"a": 0.5, "b": 0.6})])["m"]
    assert f.flipped == ["b"]


def test_threshold_is_checked() -> None:
    with pytest.raises(ValueError, match="threshold"):
        repeatability([_run({"a": 1.0})], threshold=1.5)


class FlakyJudge:
    """Helpfulness grader whose verdict on questions containing "flaky" alternates per call."""

    model = "flaky-judge"

    def __init__(self) -> None:
        self.calls = 0
        self.seen: dict[str, int] = {}

    async def generate(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> JudgeReply:
        self.calls += 1
        user = messages[-1]["content"]
        n = self.seen[user] = self.seen.get(user, 0) + 1
        verdict = n % 2 == 1 if "flaky" in user else True
        return JudgeReply(text=json.dumps({"explanation": "e", "verdict": verdict}))


SAMPLES = [
    Sample(id="s1", question="How many days of leave?", answer="25 days."),
    Sample(id="s2", question="A flaky question?", answer="Maybe."),
]


def test_repeats_bypass_the_cache_and_leave_run_one_cached(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache.sqlite")
    judge = FlakyJudge()
    first = evaluate_repeated(SAMPLES, ["helpfulness"], repeats=3, judge=judge, cache=cache)
    assert judge.calls == 6  # 2 samples x 3 runs: the repeats were sent, not read back
    f = first.summary()["helpfulness"]
    assert f.flipped == ["s2"]
    assert f.n_samples == 2
    assert f.judged
    assert [run.metadata["repeat"] for run in first.runs] == [1, 2, 3]
    assert [run.metadata["judge_stats"]["calls"] for run in first.runs] == [2, 2, 2]

    again = FlakyJudge()
    second = evaluate_repeated(SAMPLES, ["helpfulness"], repeats=2, judge=again, cache=cache)
    # run 1 comes from the cache (what the first run 1 wrote, not a repeat's reply); run 2 is
    # sent: one call per sample
    assert again.calls == 2
    kept = first.runs[0].get("s2", "helpfulness")
    reread = second.runs[0].get("s2", "helpfulness")
    assert kept is not None
    assert reread is not None
    assert reread.value == kept.value == 1.0
    with Cache(cache) as store:
        assert store.stats().replies == 2  # the repeats wrote nothing


def test_an_unusable_judge_ends_the_repetition() -> None:
    from ragbridge.core.judging.judge import ProviderUnusable

    class Refusing:
        model = "refusing"
        calls = 0

        async def generate(self, messages: Any, *, schema: Any = None) -> JudgeReply:
            Refusing.calls += 1
            raise ProviderUnusable("401 Unauthorized", cause="401 Unauthorized")

    samples = [Sample(id=f"s{i}", question="q?", answer="a") for i in range(12)]
    repeated = evaluate_repeated(
        samples, ["helpfulness"], repeats=3, judge=Refusing(), max_concurrency=1
    )
    assert len(repeated.runs) == 1
    assert repeated.aborted
    assert Refusing.calls == 5  # stop_after: runs 2 and 3 sent nothing


def test_repeats_must_be_positive() -> None:
    with pytest.raises(ValueError, match="repeats"):
        evaluate_repeated(SAMPLES, ["helpfulness"], repeats=0)


# -- the command ----------------------------------------------------------------------------


JUDGE_MODULE = textwrap.dedent(
    """
    import json


    class FlakyJudge:
        model = "flaky-judge"

        def __init__(self):
            self.seen = {}

        async def generate(self, messages, *, schema=None):
            from ragbridge.core.judging.judge import JudgeReply

            user = messages[-1]["content"]
            n = self.seen[user] = self.seen.get(user, 0) + 1
            verdict = n % 2 == 1 if "flaky" in user else True
            return JudgeReply(text=json.dumps({"explanation": "e", "verdict": verdict}))
    """
)


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "flaky_judge_module.py").write_text(JUDGE_MODULE)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data.jsonl"
    lines = [
        {"id": "s1", "question": "How many days of leave?", "answer": "25 days."},
        {"id": "s2", "question": "A flaky question?", "answer": "Maybe."},
        {"id": "s3", "question": "Who approves travel?", "answer": "The lead."},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_cli_repeat_reports_flips_and_writes_them_to_the_header(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    code = main(
        [
            "eval", str(data), "--repeat", "3", "--metrics", "helpfulness",
            "--judge", "python:flaky_judge_module:FlakyJudge",
            "--cache", str(tmp_path / "c.sqlite"), "--out", str(out),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "runs 2..3 bypass it for judge replies (helpfulness)" in captured.err
    row = next(line for line in captured.out.splitlines() if line.startswith("helpfulness  "))
    assert "1/3 (33%)" in row
    assert "judge calls: 9 (run 1: 3, runs 2..: 6)" in captured.out
    assert "helpfulness flipped on: s2" in captured.out
    header = json.loads(out.read_text().splitlines()[0])
    figures = header["metadata"]["repeatability"]["metrics"]["helpfulness"]
    assert figures["flipped"] == ["s2"]
    assert figures["runs"] == 3
    assert Evaluation.from_jsonl(out).get("s2", "helpfulness") is not None  # run 1's cells


def test_cli_repeat_with_offline_metrics_says_they_are_deterministic(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", str(data), "--repeat", "2", "--metrics", "exact_match"])
    captured = capsys.readouterr()
    assert "no metric calls a judge" in captured.err
    assert "exact_match: deterministic provider (no judge), repeats agree" in captured.out
    assert code == 1  # exact_match needs a reference: every cell failed, as in a single run


@pytest.mark.parametrize("value", ["0", "101", "two"])
def test_cli_repeat_refuses_bad_counts(
    data: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["eval", str(data), "--repeat", value, "--metrics", "mrr"])
    assert info.value.code == 2
    assert "--repeat" in capsys.readouterr().err
