"""``ragbridge cache PATH``: stats, and pruning failed, old-prompt and old entries."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from ragbridge.adapters.cli.main import main
from ragbridge.core import Context, Sample, evaluate
from ragbridge.core.cache.disk import Cache
from ragbridge.core.cache.stored import CachedReply
from ragbridge.core.prompts.faithfulness import ANSWER_ANALYZE, FAITHFULNESS_VERIFY
from ragbridge.core.prompts.testset import TESTSET_SINGLE
from ragbridge.core.testing import CountingJudge, HashEmbedder, minimal_instance

VERDICT = {"reason": "r", "verdict": "supported", "context": 1}
GOOD_VERIFY = json.dumps({"verdicts": [VERDICT, VERDICT]})
TOO_MANY = json.dumps({"verdicts": [VERDICT, VERDICT, VERDICT]})
CITES_3 = json.dumps({"verdicts": [VERDICT, {**VERDICT, "context": 3}]})
ANALYSIS = json.dumps({"claims": ["c"], "questions": ["q?"], "noncommittal": False})
NO_QUESTIONS = json.dumps({"claims": ["c"], "questions": [], "noncommittal": False})


def run_cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


def put(
    cache: Cache, key: str, text: str, template: str, version: str | None, **facts: int
) -> None:
    cache.put_reply(
        key,
        CachedReply(text),
        model="gpt-x",
        template_id=template,
        template_version=version,
        facts=facts or None,
    )


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A cache with good replies, failed ones, an old prompt version and a framework's reply."""
    path = tmp_path / "cache.sqlite"
    verify, analyze = FAITHFULNESS_VERIFY, ANSWER_ANALYZE
    with Cache(path) as cache:
        put(cache, "good", GOOD_VERIFY, verify.id, verify.version, CLAIM=2, CONTEXT=2)
        put(cache, "too-many", TOO_MANY, verify.id, verify.version, CLAIM=2, CONTEXT=2)
        put(cache, "cites-3", CITES_3, verify.id, verify.version, CLAIM=2, CONTEXT=2)
        put(cache, "legacy-ok", GOOD_VERIFY, verify.id, None)  # stored before facts were
        put(cache, "legacy-garbage", "Sorry, I can't.", verify.id, None)
        put(cache, "no-questions", NO_QUESTIONS, analyze.id, analyze.version)
        put(cache, "analysis", ANALYSIS, analyze.id, analyze.version)
        put(cache, "old-prompt", ANALYSIS, analyze.id, "0")
        written = minimal_instance(TESTSET_SINGLE.schema).model_dump_json()
        put(cache, "old-testset", written, TESTSET_SINGLE.id, "0")  # the test-set writer's too
        put(cache, "testset", written, TESTSET_SINGLE.id, TESTSET_SINGLE.version)
        put(cache, "testset-garbage", "no JSON here", TESTSET_SINGLE.id, TESTSET_SINGLE.version)
        put(cache, "framework", "free text of another framework", "deepeval", "4.3")
        put(cache, "framework-empty", "   ", "deepeval", "4.3")
        cache.put_embeddings("embed-x", ["a", "b"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return path


def keys(path: Path) -> set[str]:
    with Cache(path) as cache:
        return {r.key for r in cache.reply_rows()}


def test_stats_counts_by_model_template_and_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    samples = [
        Sample(id=f"s{i}", question="q?", answer=f"A{i}. B.", contexts=[Context(text="c")])
        for i in range(3)
    ]
    evaluate(
        samples,
        ["faithfulness", "answer_relevance"],
        judge=CountingJudge(model="judge-m"),
        embedder=HashEmbedder(),
        cache=path,
    )
    code, out, err = run_cli(str(path), capsys=capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].startswith(f"{path}: ")
    assert "replies" in out.splitlines()[0]
    assert "judge-m  answer.analyze" in out
    assert "faithfulness.verify" in out
    assert "hash-embedder  64" in out
    again = run_cli(str(path), "stats", capsys=capsys)[1]
    assert again.splitlines()[1:] == out.splitlines()[1:]


def test_stats_marks_old_prompt_versions(planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(str(planted), "stats", capsys=capsys)
    assert f"0 (old; current {ANSWER_ANALYZE.version})" in out
    assert "deepeval" in out


def test_prune_failed_removes_replies_that_fail_todays_checks(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(str(planted), "prune", "--failed", capsys=capsys)
    assert code == 0
    assert "removed 6 failed of 13 replies" in out
    assert keys(planted) == {
        "good", "legacy-ok", "analysis", "old-prompt", "framework", "old-testset", "testset"
    }  # fmt: skip


def test_prune_old_prompts_keeps_current_and_foreign_templates(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(str(planted), "prune", "--old-prompts", capsys=capsys)
    assert code == 0
    assert "removed 2 replies to old prompt versions" in out
    assert not {"old-prompt", "old-testset"} & keys(planted)
    assert {"framework", "legacy-ok", "good", "testset"} <= keys(planted)


def test_prune_older_than_removes_replies_and_embeddings(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with closing(sqlite3.connect(planted)) as raw, raw:
        raw.execute("UPDATE replies SET created = created - 40 * 86400 WHERE key LIKE 'legacy%'")
        raw.execute("UPDATE embeddings SET created = created - 40 * 86400")
    code, out, _ = run_cli(str(planted), "prune", "--older-than", "30", capsys=capsys)
    assert code == 0
    assert "removed 2 replies and 2 embeddings older than 30 days" in out
    assert not {"legacy-ok", "legacy-garbage"} & keys(planted)
    with Cache(planted) as cache:
        assert cache.stats().embeddings == 0


def test_dry_run_removes_nothing(planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = keys(planted)
    code, out, _ = run_cli(
        str(planted), "prune", "--failed", "--old-prompts", "--dry-run", capsys=capsys
    )
    assert code == 0
    assert "would remove 6 failed" in out
    assert "would remove 2 replies to old prompt versions" in out
    assert keys(planted) == before


def test_a_missing_file_is_one_line_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nope.sqlite"
    code, _, err = run_cli(str(path), capsys=capsys)
    assert code == 2
    assert err == f"ragbridge: error: {path}: no such cache file\n"
    assert not path.exists()


def test_a_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(str(tmp_path), "stats", capsys=capsys)
    assert code == 2
    assert err == f"ragbridge: error: {tmp_path}: is a folder, not a cache file\n"


def test_a_file_that_is_not_a_cache_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, just text " * 100)
    code, _, err = run_cli(str(path), capsys=capsys)
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "is not a valid ragbridge cache file" in err


def test_prune_needs_an_option_and_days_must_be_a_number(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(str(planted), "prune", capsys=capsys)
    assert code == 2
    assert "give --failed, --old-prompts and/or --older-than DAYS" in err
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(SystemExit) as info:
            main(["cache", str(planted), "prune", "--older-than", bad])
        assert info.value.code == 2
        assert "number of days" in capsys.readouterr().err
