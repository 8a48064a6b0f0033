"""Run history in the core: runs and cells through the store, streamed cells, the git commit,
and the change point (a real drop is flagged, noise is not)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ragbridge.core.monitoring import MonitorStore, RunRecord, ScoreCell
from ragbridge.core.monitoring.history import (
    RUN_ID_KEY,
    RunCellWriter,
    brief,
    cells_of,
    config_changes,
    git_commit,
    git_dirty,
    metric_history,
    new_run_id,
    record_run,
    run_history,
    run_record,
    short_ids,
    source_name,
)
from ragbridge.core.results.evaluation import Evaluation, Score

GIT = shutil.which("git")


def _evaluation(values: dict[str, list[float | None]], **metadata: object) -> Evaluation:
    ev = Evaluation(metadata=dict(metadata))
    for metric, column in values.items():
        for i, value in enumerate(column):
            score = Score(value=value) if value is not None else Score.fail("timeout", "slow")
            ev.add(f"s{i:03d}", metric, score)
    return ev


def _record(
    store: MonitorStore,
    values: dict[str, list[float | None]],
    ts: float,
    *,
    source: str = "eval.jsonl",
    commit: str | None = None,
    config: dict[str, object] | None = None,
) -> RunRecord:
    return record_run(
        store, _evaluation(values), "eval", source, config or {}, commit, timestamp=ts
    )


# -- recording ----------------------------------------------------------------------------------


def test_a_run_and_its_cells_round_trip_through_the_store(tmp_path: Path) -> None:
    ev = _evaluation(
        {"faithfulness": [1.0, 0.5, None], "mrr": [1.0, 0.0, 0.5]},
        metrics={"faithfulness": {"class": "Faithfulness", "provider": "offline"}},
        judge_model=None,
        warnings=[f"warning {i}" for i in range(50)],
    )
    ev.add("s003", "mrr", Score.skip("no relevant document"))
    with MonitorStore(tmp_path / "h.sqlite") as store:
        run = record_run(store, ev, "eval", "eval.jsonl", {"judge": None}, "abc123")
        back = store.run(run.run_id)
        assert back == run
        assert back.summary["faithfulness"]["mean"] == pytest.approx(0.75)
        assert back.summary["faithfulness"]["n_failed"] == 1
        assert back.summary["faithfulness"]["provider"] == "offline"
        assert back.summary["mrr"]["n_skipped"] == 1
        assert back.summary["mrr"]["ci_low"] is not None
        # the bulky part is cut and says so
        assert len(back.metadata["warnings"]) == 21
        assert back.metadata["warnings"][-1] == "… 30 more"
        cells = store.run_cells(run.run_id)
    assert sorted(cells) == sorted(cells_of(ev))
    # since store schema 3 a failed cell keeps the failure's message as its reason
    assert ("s002", "faithfulness", ScoreCell(failure="timeout", reason="slow")) in cells
    assert ("s003", "mrr", ScoreCell(skipped=True, reason="no relevant document")) in cells


def test_the_run_id_is_the_one_promised_in_the_metadata_and_never_recorded_there() -> None:
    ev = _evaluation({"mrr": [1.0]}, **{RUN_ID_KEY: "0190aaaabbbbcccc1234"})
    run = run_record(ev, "eval")
    assert run.run_id == "0190aaaabbbbcccc1234"
    assert RUN_ID_KEY not in run.metadata


def test_run_ids_sort_by_time_and_do_not_collide() -> None:
    ids = [new_run_id(1_700_000_000.0 + i) for i in range(5)]
    assert ids == sorted(ids)
    assert len({new_run_id(1_700_000_000.0) for _ in range(200)}) == 200
    assert new_run_id(1_700_000_000.0) < new_run_id(1_700_000_000.001)


def test_short_ids_are_unique_prefixes() -> None:
    ids = ["0190aaaa0001ffff", "0190aaaa0002ffff", "0191bbbbcccc0000"]
    short = short_ids(ids)
    assert short == {
        "0190aaaa0001ffff": "0190aaaa0001",
        "0190aaaa0002ffff": "0190aaaa0002",
        "0191bbbbcccc0000": "0191bbbb",
    }


def test_record_run_refuses_an_evaluation_that_kept_no_cells(tmp_path: Path) -> None:
    ev = Evaluation(metadata={"cells_kept": False})
    with MonitorStore(tmp_path / "h.sqlite") as store, pytest.raises(ValueError, match="kept no"):
        record_run(store, ev, "eval")


def test_brief_cuts_lists_and_strings_and_keeps_json_values() -> None:
    assert brief({"a": list(range(3)), "b": "x" * 10}, items=2, chars=5) == {
        "a": [0, 1, "… 1 more"],
        "b": "xxxx…",
    }
    assert brief({"n": float("nan"), "p": Path("x")}) == {"n": None, "p": "x"}


# -- streamed cells -----------------------------------------------------------------------------


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM run_scores").fetchone()[0])


def test_streamed_cells_land_in_batches_and_the_run_appears_only_when_finished(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite"
    ev = _evaluation({"mrr": [i / 25 for i in range(25)]})
    with MonitorStore(path) as store:
        run_id = new_run_id()
        with RunCellWriter(store, run_id, batch=10) as writer:
            for i, (sample_id, metric, score) in enumerate(ev):
                writer.add(sample_id, metric, score)
                assert _rows(path) == (i + 1) // 10 * 10  # written as they come, not held
            assert store.runs() == []  # readers never see a run without its cells
            run = writer.finish(run_record(ev, "eval", run_id=run_id))
        assert [r.run_id for r in store.runs()] == [run.run_id]
        assert sorted(store.run_cells(run_id)) == sorted(cells_of(ev))


def test_a_streamed_run_left_unfinished_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with MonitorStore(path) as store:

        def interrupted() -> None:
            with RunCellWriter(store, "r1", batch=2) as writer:
                for i in range(5):
                    writer.add(f"s{i}", "mrr", Score(value=1.0))
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            interrupted()
        assert _rows(path) == 0
        assert store.runs() == []
        with RunCellWriter(store, "r2", batch=2) as writer:
            writer.add("s0", "mrr", Score(value=1.0))
            writer.add("s1", "mrr", Score(value=1.0))
        assert _rows(path) == 0  # left without finish: nothing stays behind


def test_streaming_a_large_run_holds_one_batch_not_the_run(tmp_path: Path) -> None:
    score = Score(value=0.5)
    with MonitorStore(tmp_path / "h.sqlite") as store:
        writer = RunCellWriter(store, "big", batch=500)
        tracemalloc.start()
        for i in range(60_000):
            writer.add(f"sample-{i:06d}", "faithfulness", score)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        writer.finish(RunRecord(run_id="big", command="eval"))
        assert len(store.run_cells("big")) == 60_000
    # 60 000 cells held would be ~10 MB of tuples and strings; one batch is ~0.1 MB
    assert peak < 2_000_000, peak


# -- git ----------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
         "-c", "commit.gpgsign=false", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_git_commit_is_read_from_the_repository_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    assert git_commit(repo) is None  # no commit yet
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "sub").mkdir()
    assert git_commit(repo) == head
    assert git_commit(repo / "sub") == head
    assert git_dirty(repo) is False
    (repo / "a.txt").write_text("two\n")
    assert git_dirty(repo) is True
    _git(repo, "commit", "-q", "-am", "two")
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "pack-refs", "--all")  # the branch now lives in packed-refs only
    assert not any((repo / ".git" / "refs" / "heads").iterdir())
    assert git_commit(repo) == second
    _git(repo, "checkout", "-q", head)  # detached
    assert git_commit(repo) == head
    _git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), second)
    assert git_commit(tmp_path / "wt") == second
    assert source_name(repo / "sub" / "eval.jsonl") == "sub/eval.jsonl"


def test_git_commit_without_git_installed_and_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert git_commit(tmp_path) is None
    assert git_dirty(tmp_path) is None
    assert source_name(tmp_path / "eval.jsonl") == (tmp_path / "eval.jsonl").as_posix()
    sha = "0123456789abcdef0123456789abcdef01234567"
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(sha + "\n")
    assert git_commit(tmp_path / "repo") == sha
    (git / "refs" / "heads" / "main").unlink()
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/main\n")
    assert git_commit(tmp_path / "repo") == sha
    (git / "HEAD").write_text("ref: refs/heads/unborn\n")
    assert git_commit(tmp_path / "repo") is None


# -- change points ------------------------------------------------------------------------------


def _noisy(base: np.ndarray, rng: np.random.Generator, scale: float) -> list[float | None]:
    return [float(v) for v in np.clip(base + rng.normal(0, scale, base.size), 0, 1)]


def test_a_real_drop_is_flagged_and_noise_is_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.6, 1.0, 60)
    with MonitorStore(tmp_path / "h.sqlite") as store:
        first = _record(store, {"faithfulness": _noisy(base, rng, 0.0)}, 1.0, commit="a" * 40)
        _record(store, {"faithfulness": _noisy(base, rng, 0.05)}, 2.0, commit="b" * 40)
        dropped = base.copy()
        dropped[:45] -= 0.2
        bad = _record(
            store, {"faithfulness": _noisy(dropped, rng, 0.05)}, 3.0, commit="c" * 40,
            config={"judge": "openai:small"},
        )  # fmt: skip
        _record(store, {"faithfulness": _noisy(dropped, rng, 0.05)}, 4.0)
        points = metric_history(store, "faithfulness")
    assert [p.change for p in points] == [None, None, "down", None]
    assert points[0].previous_run_id is None
    assert points[1].previous_run_id == first.run_id
    assert points[1].p_value is None or points[1].p_value >= 0.05
    hit = points[2]
    assert hit.run_id == bad.run_id
    assert hit.commit == "c" * 40
    assert hit.previous_commit == "b" * 40
    assert hit.worse is True
    assert hit.n_paired == 60
    assert hit.p_value is not None
    assert hit.p_value < 0.01
    assert hit.diff == pytest.approx(hit.mean_after - hit.mean_before)  # type: ignore[operator]
    assert -0.2 < hit.diff < -0.1  # type: ignore[operator]
    assert hit.mean == pytest.approx(float(np.mean(_noisy(dropped, rng, 0.0))), abs=0.05)


def test_a_large_but_unreliable_move_is_not_a_change(tmp_path: Path) -> None:
    # mean moves by 0.1 on 6 samples with mixed signs: above min_effect, p far above alpha
    with MonitorStore(tmp_path / "h.sqlite") as store:
        _record(store, {"mrr": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]}, 1.0)
        _record(store, {"mrr": [1.0, 0.0, 1.0, 0.6, 0.5, 0.5]}, 2.0)
        (_, second) = metric_history(store, "mrr")
    assert second.diff == pytest.approx(0.1)
    assert second.p_value is not None
    assert second.p_value > 0.05
    assert second.change is None


def test_direction_is_read_from_the_metric_and_runs_pair_within_their_source(
    tmp_path: Path,
) -> None:
    ones, zeros = [1.0] * 20, [0.0] * 20
    with MonitorStore(tmp_path / "h.sqlite") as store:
        _record(store, {"hallucination": zeros}, 1.0, source="a.jsonl")
        _record(store, {"hallucination": ones}, 2.0, source="b.jsonl")  # other eval set
        _record(store, {"hallucination": zeros}, 3.0, source="a.jsonl")  # unchanged within a
        _record(store, {"hallucination": ones}, 4.0, source="a.jsonl")  # rose: worse
        rows = run_history(store)
        only_a = metric_history(store, "hallucination", source="a.jsonl")
        last = metric_history(store, "hallucination", source="a.jsonl", limit=1)
    changes = [row.points["hallucination"].change for row in rows]
    assert changes == [None, None, None, "up"]
    assert rows[3].points["hallucination"].worse is True
    assert [p.change for p in only_a] == [None, None, "up"]
    # the window shows one run, still set against the run before it
    assert len(last) == 1
    assert last[0].change == "up"
    assert last[0].previous_run_id == only_a[1].run_id


def test_config_changes_name_the_settings_and_provider_that_moved() -> None:
    a = RunRecord(run_id="a", command="eval", config={"judge": None, "concurrency": 8},
                  summary={"faithfulness": {"provider": "offline"}})  # fmt: skip
    b = RunRecord(run_id="b", command="eval", config={"judge": "openai:x", "concurrency": 4},
                  summary={"faithfulness": {"provider": "llm"}})  # fmt: skip
    assert config_changes(a, b, "faithfulness", ignore={"concurrency"}) == [
        "judge null → openai:x",
        "faithfulness provider offline → llm",
    ]


def test_bad_test_settings_are_refused(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "h.sqlite") as store:
        with pytest.raises(ValueError, match="alpha"):
            run_history(store, alpha=1.0)
        with pytest.raises(ValueError, match="min_effect"):
            run_history(store, min_effect=float("nan"))
