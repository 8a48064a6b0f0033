"""A team's own criteria on the command line (issue 30), end to end with a scripted judge.

``eval --criteria`` scores the file's criteria beside ``--metrics``; a bad file and stale
frozen steps are one line and exit 2 before any call; ``criteria freeze`` pins the steps (a
rerun asks nothing) and ``criteria check`` fails CI on stale or unpinned ones; ``metrics
--criteria`` lists them; ``eval --repeat`` reports a criterion's flip rate; ``estimate``
counts the steps once per run. Self-preference is said once, in the results header too, and
by ``ragbridge.core.evaluate`` as one Python warning.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.results.evaluation import Evaluation

JUDGE_MODULE = textwrap.dedent(
    """
    import json

    from ragbridge.core.judging.judge import JudgeReply
    from ragbridge.core.testing import minimal_instance, task_of

    STEPS = ["Read the answer.", "Judge its tone against the criterion."]


    class CriteriaJudge:
        '''Full marks on every criterion, except on a question saying "flaky", whose scored
        criterion gets 5, then 1, then 5 ... each time the same prompt is asked.'''

        model = "criteria-judge"

        def __init__(self):
            self.seen = {}

        async def generate(self, messages, *, schema=None):
            task = task_of(messages)
            user = messages[-1]["content"]
            if task == "criteria.steps":
                reply = {"steps": STEPS}
            elif task == "criteria.score":
                n = self.seen[user] = self.seen.get(user, 0) + 1
                score = 1 if "flaky" in user and n % 2 == 0 else 5
                reply = {"reason": "as asked", "score": score}
            elif task == "criteria.aspect":
                reply = {"reason": "as asked", "verdict": True}
            elif task == "criteria.rubric":
                reply = {"reason": "as asked", "level": 3}
            else:
                reply = minimal_instance(schema).model_dump()
            return JudgeReply(text=json.dumps(reply))


    class BrokenJudge:
        model = "broken-judge"

        async def generate(self, messages, *, schema=None):
            from ragbridge.core.judging.judge import PermanentJudgeError

            raise PermanentJudgeError("401 unauthorized: check the key")
    """
)

JUDGE = "python:criteria_cli_judge:CriteriaJudge"

CRITERIA = textwrap.dedent(
    """\
    # the support team's criteria
    batch: false
    criteria:
      - name: tone                  # scored 1-5
        criteria: Is the tone right for a customer?
      - name: cites_policy
        definition: The answer cites the policy number it relies on.
        reads: [answer]
      - name: completeness
        rubrics:
          1: Misses the point.
          2: Covers part of it.
          3: Covers all of it.
    """
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "criteria_cli_judge.py").write_text(JUDGE_MODULE)
    monkeypatch.chdir(tmp_path)
    rows = [
        {"id": "s1", "question": "How many days of leave?", "answer": "25 days (policy 7).",
         "metadata": {"generator_model": "criteria-judge"}},
        {"id": "s2", "question": "A flaky question?", "answer": "Maybe.",
         "metadata": {"generator_model": "openai/Criteria-Judge-2024-05-13"}},
        {"id": "s3", "question": "Who approves travel?", "answer": "The lead.",
         "metadata": {"generator_model": "another-model"}},
    ]  # fmt: skip
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "criteria.yaml").write_text(CRITERIA)
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def header(path: Path) -> dict[str, Any]:
    metadata: dict[str, Any] = json.loads(path.read_text().splitlines()[0])["metadata"]
    return metadata


# -- eval --criteria ----------------------------------------------------------------------------


def test_eval_scores_the_files_criteria_beside_the_metrics(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml", "--metrics", "exact_match",
        "--judge", JUDGE, "--out", "results.jsonl",
    )  # fmt: skip
    assert code == 1, err  # exact_match: no sample has a reference, every cell fails
    results = Evaluation.from_jsonl(folder / "results.jsonl")
    assert results.metrics == ["exact_match", "tone", "cites_policy", "completeness"]
    tone = results.get("s1", "tone")
    assert tone is not None
    assert tone.value == 1.0
    assert tone.details["kind"] == "criterion"
    assert tone.details["steps_source"] == "generated"
    assert results.get("s1", "cites_policy").value == 1.0  # type: ignore[union-attr]
    assert results.get("s3", "completeness").value == 1.0  # type: ignore[union-attr]
    assert "tone          " in out


def test_without_metrics_the_criteria_run_alone_and_said_so(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
                         "--judge", JUDGE)  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[0].startswith("3 samples, 3 metrics; judge criteria-judge: 10 calls")
    assert "scoring its 3 criteria (tone, cites_policy, completeness)" in err


def test_a_criteria_name_resolves_in_metrics_like_any_measure(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = cli(
        capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
        "--metrics", "cites_policy", "--judge", JUDGE, "--out", "r.jsonl",
    )  # fmt: skip
    assert code == 0, err
    metrics = Evaluation.from_jsonl(folder / "r.jsonl").metrics
    assert metrics == ["cites_policy", "tone", "completeness"]  # named first, then the rest


def test_criteria_without_a_judge_are_refused_before_anything_runs(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml")
    assert code == 2
    assert "tone, cites_policy, completeness need a judge" in err


def test_a_bad_file_is_one_line_naming_its_place_and_exit_2(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = CRITERIA.replace("criteria: Is the tone", "scale: [5, 1]\n    criteria: Is the tone")
    (folder / "criteria.yaml").write_text(bad)
    code, out, err = cli(
        capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml", "--judge", JUDGE,
        "--out", "r.jsonl",
    )  # fmt: skip
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith("ragbridge: error: ")
    assert "criteria.yaml:5: criteria[0].scale: must be two integers, low < high" in err
    assert not (folder / "r.jsonl").exists()
    assert out == ""


def test_batched_criteria_share_one_call_per_sample_and_estimate_agrees(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batched = CRITERIA.replace("batch: false", "batch: true").replace("    reads: [answer]\n", "")
    (folder / "criteria.yaml").write_text(batched)
    code, out, err = cli(capsys, "estimate", "data.jsonl", "--criteria", "criteria.yaml")
    assert code == 0, err
    assert "judge calls: 4 (1.3 per sample)" in out  # the steps once, then 1 call per sample
    assert "criteria.steps: 1 call" in out
    assert "criteria.batch: 3 calls" in out
    code, out, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
                         "--judge", JUDGE)  # fmt: skip
    assert code == 0, err
    assert "judge criteria-judge: 4 calls" in out


def test_estimate_counts_the_steps_once_per_run_then_each_sample(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "estimate", "data.jsonl", "--criteria", "criteria.yaml")
    assert code == 0
    assert "judge calls: 10 (3.3 per sample)" in out  # 1 steps + 3 criteria x 3 samples
    assert "  criteria.steps: 1 call" in out
    assert "  criteria.score: 3 calls" in out


def test_gate_reads_a_criterions_direction_from_the_file(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "lower.yaml").write_text(
        "criteria:\n  - name: padded\n    definition: The answer is padded with filler.\n"
        "    higher_is_better: false\n"
    )
    code, _, err = cli(capsys, "eval", "data.jsonl", "--criteria", "lower.yaml",
                       "--judge", JUDGE, "--out", "r.jsonl")  # fmt: skip
    assert code == 0, err  # the judge finds every answer padded: mean 1.0, the bad end
    code, out, _ = cli(capsys, "gate", "r.jsonl", "--threshold", "padded=0.5",
                       "--criteria", "lower.yaml")  # fmt: skip
    assert code == 1
    assert "padded = 1.000, required <= 0.500" in out


# -- pinned steps ---------------------------------------------------------------------------------


def test_freeze_pins_the_steps_and_a_rerun_asks_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "criteria", "check", "criteria.yaml")
    assert code == 1
    assert "tone: not frozen" in out
    assert "ragbridge criteria freeze criteria.yaml --judge SPEC" in err

    argv = ("criteria", "freeze", "criteria.yaml", "--judge", JUDGE, "--cache", "c.sqlite")
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert "froze the steps of 1 criterion (tone) in criteria.lock.json" in out
    assert "1 call (0 cached)" in out
    lock = json.loads((folder / "criteria.lock.json").read_text())
    assert lock["tone"]["steps"] == ["Read the answer.", "Judge its tone against the criterion."]
    assert lock["tone"]["model"] == "criteria-judge"

    code, out, _ = cli(capsys, *argv, "--all")  # written again: the cache answers
    assert code == 0
    assert "0 calls (1 cached)" in out
    code, out, _ = cli(capsys, "criteria", "check", "criteria.yaml")
    assert code == 0
    assert "ok" in out

    code, out, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
                         "--metrics", "tone", "--judge", JUDGE, "--out", "r.jsonl")  # fmt: skip
    assert code == 0, err
    assert "judge criteria-judge: 9 calls" in out  # 3 criteria x 3 samples: no steps call
    tone = Evaluation.from_jsonl(folder / "r.jsonl").get("s1", "tone")
    assert tone is not None
    assert tone.details["steps_source"] == "frozen"


def test_editing_a_frozen_criterion_is_refused_loudly_until_frozen_again(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "criteria", "freeze", "criteria.yaml", "--judge", JUDGE)
    assert code == 0, err
    edited = CRITERIA.replace("right for a customer?", "right for a bank's customer?")
    (folder / "criteria.yaml").write_text(edited)

    code, out, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
                         "--judge", JUDGE)  # fmt: skip
    assert code == 2
    assert out == ""
    assert err == (
        "ragbridge: error: criteria.yaml: stale steps: criterion 'tone' changed since its "
        "steps were frozen in criteria.lock.json; freeze them again: ragbridge criteria freeze "
        "criteria.yaml --judge SPEC\n"
    )
    code, out, _ = cli(capsys, "criteria", "check", "criteria.yaml")
    assert code == 1
    assert "tone: stale" in out

    code, out, err = cli(capsys, "criteria", "freeze", "criteria.yaml", "--judge", JUDGE)
    assert code == 0, err
    assert "tone: edited since its steps were frozen; writing them again" in err
    assert cli(capsys, "criteria", "check", "criteria.yaml")[0] == 0


def test_freeze_in_file_keeps_the_authors_comments(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = cli(capsys, "criteria", "freeze", "criteria.yaml", "--judge", JUDGE,
                         "--in-file")  # fmt: skip
    assert code == 0, err
    text = (folder / "criteria.yaml").read_text()
    assert "# the support team's criteria" in text
    assert "# scored 1-5" in text
    assert '"Judge its tone against the criterion."' in text
    assert not (folder / "criteria.lock.json").exists()
    assert cli(capsys, "criteria", "check", "criteria.yaml")[0] == 0


def test_a_judge_that_fails_freezes_nothing_and_exits_3(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "criteria", "freeze", "criteria.yaml",
                         "--judge", "python:criteria_cli_judge:BrokenJudge")  # fmt: skip
    assert code == 3
    assert "tone: the steps were not written" in err
    assert "nothing frozen" in err
    assert not (folder / "criteria.lock.json").exists()


def test_freeze_needs_a_judge_and_a_usable_file(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "criteria", "freeze", "criteria.yaml")
    assert code == 2
    assert "criteria freeze needs --judge SPEC" in err
    code, _, err = cli(capsys, "criteria", "check", "missing.yaml")
    assert code == 2
    assert "missing.yaml" in err


# -- metrics --criteria ----------------------------------------------------------------------------


def test_metrics_lists_the_files_criteria(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "metrics", "--criteria", "criteria.yaml")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["name", "type", "reads", "direction", "scale", "steps",
                                "judge", "calls", "meaning"]  # fmt: skip
    tone = next(line for line in lines if line.startswith("tone "))
    assert "question, answer" in tone
    assert "higher" in tone
    assert "1-5" in tone
    assert "1 + 1 per run (steps)" in tone
    assert "written each run" in tone
    cites = next(line for line in lines if line.startswith("cites_policy "))
    assert "yes/no" in cites
    assert " answer " in cites
    code, out, _ = cli(capsys, "metrics", "--criteria", "criteria.yaml", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["measure"], r["kind"], r["type"]) for r in rows] == [
        ("tone", "criteria", "criterion"),
        ("cites_policy", "criteria", "aspect"),
        ("completeness", "criteria", "rubric"),
    ]
    code, out, _ = cli(capsys, "metrics", "--kind", "criteria")
    assert code == 0
    assert "tone:llm" in out


# -- repeat ----------------------------------------------------------------------------------------


def test_repeat_reports_a_criterions_flip_rate_and_writes_its_steps_each_run(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml", "--metrics", "tone",
        "--repeat", "3", "--judge", JUDGE, "--cache", "c.sqlite", "--out", "r.jsonl",
    )  # fmt: skip
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("tone "))
    assert "1/3 (33%)" in row  # s2 scored 5, 1, 5 over the runs
    assert "tone flipped on: s2" in out
    assert "the steps of tone are not frozen: each run has the judge write them again" in err
    assert "no metric calls a judge" not in err
    # run 1: 1 steps + 9 verdicts; runs 2-3 ask the steps again, and every verdict
    assert "judge calls: 30 (run 1: 10, runs 2..: 20)" in out
    figures = header(folder / "r.jsonl")["repeatability"]["metrics"]
    assert figures["tone"]["flipped"] == ["s2"]
    assert figures["cites_policy"]["flipped"] == []


# -- self-preference -------------------------------------------------------------------------------


def test_a_judge_of_the_answers_model_is_said_once_and_in_the_header(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "eval", "data.jsonl", "--criteria", "criteria.yaml",
                       "--judge", JUDGE, "--out", "r.jsonl")  # fmt: skip
    assert code == 0, err
    said = [line for line in err.splitlines() if "generated" in line]
    assert said == [
        "ragbridge: warning: the judge model 'criteria-judge' generated 2 of the answers it "
        "grades; a model judging its own outputs is biased towards them — use a different "
        "judge model"
    ]  # one line, not one per sample, and not repeated as a Python warning
    assert header(folder / "r.jsonl")["self_judged"] == {"model": "criteria-judge", "answers": 2}


def test_the_generator_model_can_be_given_for_answers_that_do_not_name_it(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"id": f"q{i}", "question": "Why?", "answer": "Because."} for i in range(4)]
    (folder / "plain.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ("eval", "plain.jsonl", "--criteria", "criteria.yaml", "--judge", JUDGE,
            "--out", "r.jsonl")  # fmt: skip
    code, _, err = cli(capsys, *argv)
    assert code == 0
    assert "generated" not in err
    assert "self_judged" not in header(folder / "r.jsonl")
    code, _, err = cli(capsys, *argv, "--generator-model", "criteria-judge")
    assert code == 0
    assert "generated 4 of the answers" in err
    assert header(folder / "r.jsonl")["self_judged"]["answers"] == 4


def test_python_evaluate_warns_once_and_records_it() -> None:
    from ragbridge.core import Sample, evaluate
    from ragbridge.core.judging.self_preference import SelfPreferenceWarning, same_model
    from ragbridge.core.testing import CountingJudge

    samples = [
        Sample(id=str(i), question="Why?", answer="Because.",
               metadata={"generator_model": "Counting-Judge-20240513" if i < 3 else "other"})
        for i in range(5)
    ]  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate(samples, ["helpfulness"], judge=CountingJudge())
    said = [w for w in caught if issubclass(w.category, SelfPreferenceWarning)]
    assert len(said) == 1
    assert "generated 3 of the answers" in str(said[0].message)
    assert result.metadata["self_judged"] == {"model": "counting-judge", "answers": 3}
    assert same_model("gpt-4o-2024-08-06", "openai/gpt-4o")
    assert not same_model("gpt-4o", "gpt-4o-mini")
    assert not same_model("llama3:8b", "llama3:70b")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(samples[3:], ["helpfulness"], judge=CountingJudge())
    assert not [w for w in caught if issubclass(w.category, SelfPreferenceWarning)]


def test_a_clusters_partitions_count_the_judges_own_answers_together() -> None:
    from ragbridge.core.scoring.partitions import combine_metadata

    parts = [
        {"judge_model": "m", "self_judged": {"model": "m", "answers": 2}},
        {"judge_model": "m"},
        {"judge_model": "m", "self_judged": {"model": "m", "answers": 3}},
    ]
    assert combine_metadata(parts)["self_judged"] == {"model": "m", "answers": 5}
