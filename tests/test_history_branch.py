"""The branch a run was made on: read from ``.git/HEAD`` (no subprocess), from the CI's variables
for a detached checkout, recorded by `record_run` and kept by the store."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ragbridge.core.monitoring import MonitorStore, RunRecord
from ragbridge.core.monitoring.history import (
    BRANCH_VARIABLES,
    RunCellWriter,
    git_branch,
    record_run,
    run_record,
)
from ragbridge.core.results.evaluation import Evaluation, Score

NO_CI = dict.fromkeys(BRANCH_VARIABLES, "")


def _repo(root: Path, head: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text(head + "\n")
    (root / "sub").mkdir()
    return root


def _evaluation() -> Evaluation:
    ev = Evaluation()
    ev.add("s1", "mrr", Score(value=1.0))
    return ev


def test_the_checked_out_branch_is_read_from_head(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r", "ref: refs/heads/feature/faster-retriever")
    assert git_branch(repo / "sub", environ=NO_CI) == "feature/faster-retriever"
    # a checked-out branch wins over the CI's variables (they describe the job, not HEAD)
    assert git_branch(repo, environ={"GITHUB_HEAD_REF": "other"}) == "feature/faster-retriever"


def test_a_worktree_reads_its_own_head(tmp_path: Path) -> None:
    main = _repo(tmp_path / "main", "ref: refs/heads/main")
    own = main / ".git" / "worktrees" / "wt"
    own.mkdir(parents=True)
    (own / "HEAD").write_text("ref: refs/heads/topic\n")
    (own / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {own}\n")
    assert git_branch(wt, environ=NO_CI) == "topic"
    assert git_branch(main, environ=NO_CI) == "main"


def test_a_detached_checkout_takes_the_ci_variables_in_order(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r", "0123456789abcdef0123456789abcdef01234567")
    assert git_branch(repo, environ=NO_CI) is None
    github_pr = {"GITHUB_HEAD_REF": "fix/escape", "GITHUB_REF_NAME": "12/merge"}
    assert git_branch(repo, environ=github_pr) == "fix/escape"
    github_push = {"GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "main"}
    assert git_branch(repo, environ=github_push) == "main"
    assert git_branch(repo, environ={"CI_COMMIT_REF_NAME": "dev"}) == "dev"
    # outside any repository (a CI job that exported the files only) the variables still say
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_branch(outside, environ={"CI_COMMIT_REF_NAME": "dev"}) == "dev"


def test_a_real_repository_and_no_subprocess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True, env=env)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("git_branch must not start a process")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert git_branch(repo, environ=NO_CI) == "trunk"


def test_record_run_records_the_branch_and_the_store_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path / "r", "ref: refs/heads/feature/x")
    monkeypatch.chdir(repo)
    for name in BRANCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with MonitorStore(tmp_path / "h.sqlite") as store:
        run = record_run(store, _evaluation(), "eval", "eval.jsonl", timestamp=1.0)
        assert run.branch == "feature/x"
        given = record_run(store, _evaluation(), "eval", branch="main", timestamp=2.0)
        assert given.branch == "main"
        with RunCellWriter(store, "streamed") as cells:
            cells.add("s1", "mrr", Score(value=0.5))
            cells.finish(run_record(_evaluation(), "eval", run_id="streamed", timestamp=3.0))
    with MonitorStore(tmp_path / "h.sqlite") as again:
        assert [r.branch for r in again.runs()] == ["feature/x", "main", "feature/x"]
        assert again.run(run.run_id) == run


def test_a_run_without_a_branch_stays_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in BRANCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with MonitorStore(tmp_path / "h.sqlite") as store:
        store.add_run(RunRecord(run_id="r", command="eval"))
        assert store.run("r").branch is None
        assert run_record(_evaluation(), "eval").branch is None
