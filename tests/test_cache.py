"""Tests of ragbridge.core.cache.disk: key canonicalisation, durability, sharing and concurrency.

The properties that matter to a user are that a repeated run is served entirely from the cache,
that a killed run loses nothing already finished, and that changing a request never returns a
stale reply; each test below pins one of them. None depends on timing.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbridge.core.cache.disk import SCHEMA_VERSION, Cache, default_cache_path, open_cache
from ragbridge.core.cache.request_key import cache_key, canonical_json
from ragbridge.core.cache.stored import CachedReply, CacheStats

BASE: dict[str, Any] = {
    "model": "gpt-x",
    "template_id": "faithfulness.verify",
    "template_version": "1",
    "messages": [
        {"role": "system", "content": "You verify claims."},
        {"role": "user", "content": "Claim: the sky is blue. Context: ..."},
    ],
    "schema": {"type": "object", "properties": {"verdict": {"type": "boolean"}}},
    "params": {"temperature": 0, "max_tokens": 64},
}


def _key(**changes: Any) -> str:
    return cache_key(**{**BASE, **changes})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cache.sqlite"


# ---------------------------------------------------------------- keys


def test_key_is_sha256_hex_and_stable() -> None:
    key = _key()
    assert len(key) == 64
    assert int(key, 16) >= 0
    assert key == _key()


def test_key_golden_value() -> None:
    # Guards the canonical form: if this changes, every existing cache silently misses, so a
    # change here must come with a CACHE_FORMAT_VERSION bump and an updated value.
    assert _key() == "4daae35d35d73d1b83a9f6f492ec998accc2696520bd8394539f287f594b71c0"


@pytest.mark.parametrize(
    "changes",
    [
        {"model": "gpt-y"},
        {"template_id": "faithfulness.extract"},
        {"template_version": "2"},
        {
            "messages": [
                {"role": "system", "content": "You verify claims!"},
                BASE["messages"][1],
            ]
        },
        {"messages": [{"role": "user", "content": m["content"]} for m in BASE["messages"]]},
        {"messages": list(reversed(BASE["messages"]))},
        {"messages": BASE["messages"][:1]},
        {"schema": None},
        {"schema": {}},
        {"schema": {"type": "object", "properties": {"verdict": {"type": "string"}}}},
        {"params": {"temperature": 0.5, "max_tokens": 64}},
        {"params": {"temperature": 0, "max_tokens": 65}},
        {"params": {"temperature": 0, "max_tokens": 64, "seed": 1}},
        {"params": None},
    ],
)
def test_every_part_changes_the_key(changes: dict[str, Any]) -> None:
    assert _key(**changes) != _key()


def test_dict_key_order_does_not_change_the_key() -> None:
    reordered = _key(
        messages=[{"content": m["content"], "role": m["role"]} for m in BASE["messages"]],
        schema={"properties": {"verdict": {"type": "boolean"}}, "type": "object"},
        params={"max_tokens": 64, "temperature": 0},
    )
    assert reordered == _key()


def test_equal_values_share_a_key() -> None:
    # temperature=0 and 0.0 are the same request; params None and {} both mean "no params".
    assert _key(params={"temperature": 0.0, "max_tokens": 64}) == _key()
    assert _key(params=None) == _key(params={})
    assert _key(messages=tuple(BASE["messages"])) == _key()
    # ...but bool is not int, and a string is not a number.
    assert _key(params={"flag": True}) != _key(params={"flag": 1})
    assert _key(params={"n": "1"}) != _key(params={"n": 1})


def test_key_handles_non_ascii_text() -> None:
    one = _key(messages=[{"role": "user", "content": "café ☕"}])
    two = _key(messages=[{"role": "user", "content": "cafe ☕"}])
    assert one != two


def test_key_rejects_ambiguous_inputs() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        _key(params={"temperature": math.nan})
    with pytest.raises(TypeError, match="keys must be str"):
        _key(params={1: "a"})
    with pytest.raises(TypeError, match="not JSON-like"):
        _key(params={"x": object()})


def test_a_preserialised_schema_gives_the_same_key() -> None:
    # The engine hands over the schema serialised once per class; the key must not change,
    # or every cache written before would silently miss.
    serialised = canonical_json(BASE["schema"], "schema")
    assert _key(schema=None, schema_json=serialised) == _key()
    other = canonical_json({"type": "object"}, "schema")
    assert _key(schema=None, schema_json=other) != _key()
    with pytest.raises(TypeError, match="not both"):
        _key(schema_json=serialised)


def test_messages_that_are_not_plain_dicts_of_strings_take_the_general_path() -> None:
    from types import MappingProxyType

    proxied = [MappingProxyType(m) for m in BASE["messages"]]
    assert _key(messages=proxied) == _key()
    # a non-string value is canonicalised (1.0 is 1) or refused, as before
    assert _key(messages=[{"role": "user", "n": 1.0}]) == _key(messages=[{"role": "user", "n": 1}])
    with pytest.raises(TypeError, match="keys must be str"):
        _key(messages=[{1: "user"}])


# ---------------------------------------------------------------- replies


def test_reply_round_trip_and_replace() -> None:
    with Cache(":memory:") as cache:
        assert cache.get_reply("k") is None
        reply = CachedReply(text='{"verdict": true} — ok', prompt_tokens=12, completion_tokens=5)
        cache.put_reply("k", reply, model="gpt-x", template_id="faithfulness.verify")
        assert cache.get_reply("k") == reply
        newer = CachedReply(text="second")
        cache.put_reply("k", newer, model="gpt-x", template_id="faithfulness.verify")
        assert cache.get_reply("k") == newer
        assert cache.stats().replies == 1


def test_reply_row_keeps_model_and_template(db: Path) -> None:
    with Cache(db) as cache:
        cache.put_reply("k", CachedReply("t", 3, 4), model="gpt-x", template_id="tpl")
    with closing(sqlite3.connect(db)) as raw, raw:
        row = raw.execute(
            "SELECT model, template_id, text, prompt_tokens, completion_tokens, created "
            "FROM replies WHERE key = 'k'"
        ).fetchone()
    assert row[:5] == ("gpt-x", "tpl", "t", 3, 4)
    assert isinstance(row[5], float)


def test_cached_reply_validates() -> None:
    with pytest.raises(ValueError, match="prompt_tokens"):
        CachedReply(text="x", prompt_tokens=-1)
    with pytest.raises(TypeError):
        CachedReply(text=None)  # type: ignore[arg-type]
    with Cache(":memory:") as cache, pytest.raises(TypeError):
        cache.put_reply("k", "text", model="m", template_id="t")  # type: ignore[arg-type]


# ---------------------------------------------------------------- embeddings


def test_embeddings_round_trip_aligned_with_misses() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 384)).tolist()
    with Cache(":memory:") as cache:
        cache.put_embeddings("minilm", ["a", "b", "c"], vectors)
        got = cache.get_embeddings("minilm", ["c", "zz", "a", "a"])
        assert got[1] is None
        for got_vec, want in ((got[0], vectors[2]), (got[2], vectors[0]), (got[3], vectors[0])):
            assert got_vec is not None
            assert len(got_vec) == 384
            np.testing.assert_allclose(got_vec, want, rtol=1e-6)
        # Another model's vectors are a different cache entry.
        assert cache.get_embeddings("other", ["a"]) == [None]
        assert cache.get_embeddings("minilm", []) == []


def test_embeddings_accept_numpy_and_replace() -> None:
    with Cache(":memory:") as cache:
        cache.put_embeddings("m", ["x", "y"], np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
        cache.put_embeddings("m", ["x"], [[5.0, 6.0, 7.0]])
        assert cache.get_embeddings("m", ["x", "y"]) == [[5.0, 6.0, 7.0], [3.0, 4.0]]
        assert cache.stats().embeddings == 2


def test_embeddings_stored_as_float32_bytes(db: Path) -> None:
    with Cache(db) as cache:
        cache.put_embeddings("m", ["x"], [[0.1, 0.2, 0.3]])
    with closing(sqlite3.connect(db)) as raw, raw:
        dim, blob = raw.execute("SELECT dim, vector FROM embeddings").fetchone()
    assert dim == 3
    assert len(blob) == 3 * 4
    np.testing.assert_array_equal(
        np.frombuffer(blob, dtype="<f4"), np.array([0.1, 0.2, 0.3], dtype=np.float32)
    )


def test_many_texts_are_looked_up_in_batches() -> None:
    texts = [f"passage {i}" for i in range(1234)]
    vectors = [[float(i), 1.0] for i in range(len(texts))]
    with Cache(":memory:") as cache:
        cache.put_embeddings("m", texts[::2], vectors[::2])
        got = cache.get_embeddings("m", texts)
    for i, vec in enumerate(got):
        assert vec == ([float(i), 1.0] if i % 2 == 0 else None)


def test_put_embeddings_length_mismatch() -> None:
    with Cache(":memory:") as cache, pytest.raises(ValueError, match="2 texts but 1 vectors"):
        cache.put_embeddings("m", ["a", "b"], [[1.0]])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e39])
def test_put_embeddings_rejects_non_finite_naming_index(bad: float) -> None:
    with Cache(":memory:") as cache:
        with pytest.raises(ValueError, match="text #2"):
            cache.put_embeddings("m", ["a", "b", "c"], [[1.0, 2.0], [3.0, 4.0], [5.0, bad]])
        # Nothing of the bad batch was written.
        assert cache.stats().embeddings == 0


@pytest.mark.parametrize("bad", [[], [[1.0], [2.0]], ["x", "y"]])
def test_put_embeddings_rejects_non_vectors(bad: Any) -> None:
    with Cache(":memory:") as cache, pytest.raises(ValueError, match="text #0"):
        cache.put_embeddings("m", ["a"], [bad])


# ---------------------------------------------------------------- persistence and sharing


def test_persists_across_close_and_reopen(db: Path) -> None:
    # The "resume" property: what was put before the process stopped is there afterwards.
    cache = Cache(db)
    cache.put_reply("k1", CachedReply("one", 1, 2), model="m", template_id="t")
    cache.put_embeddings("m", ["a"], [[0.5, 0.25]])
    cache.close()
    with Cache(db) as again:
        assert again.get_reply("k1") == CachedReply("one", 1, 2)
        assert again.get_embeddings("m", ["a"]) == [[0.5, 0.25]]


def test_writes_survive_without_close(tmp_path: Path) -> None:
    # A killed process never calls close(): each put must already be committed.
    db = tmp_path / "killed.sqlite"
    script = (
        "import os, sys\n"
        "from ragbridge.core.cache.disk import Cache\n"
        "from ragbridge.core.cache.stored import CachedReply\n"
        "c = Cache(sys.argv[1])\n"
        "c.put_reply('done', CachedReply('finished'), model='m', template_id='t')\n"
        "c.put_embeddings('m', ['a'], [[1.0]])\n"
        "os._exit(9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(db)], check=False)
    assert proc.returncode == 9
    with Cache(db) as cache:
        assert cache.get_reply("done") == CachedReply("finished")
        assert cache.get_embeddings("m", ["a"]) == [[1.0]]


def test_two_caches_on_one_file_see_each_other(db: Path) -> None:
    with Cache(db) as one, Cache(db) as two:
        one.put_reply("a", CachedReply("from one"), model="m", template_id="t")
        two.put_reply("b", CachedReply("from two"), model="m", template_id="t")
        two.put_embeddings("m", ["x"], [[2.0]])
        assert two.get_reply("a") == CachedReply("from one")
        assert one.get_reply("b") == CachedReply("from two")
        assert one.get_embeddings("m", ["x"]) == [[2.0]]
        assert one.stats().replies == two.stats().replies == 2


def test_file_uses_wal_and_expected_schema(db: Path) -> None:
    Cache(db).close()
    with closing(sqlite3.connect(db)) as raw, raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        replies = [r[1] for r in raw.execute("PRAGMA table_info(replies)")]
        embeddings = [r[1] for r in raw.execute("PRAGMA table_info(embeddings)")]
        version = raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert replies == [
        "key",
        "model",
        "template_id",
        "text",
        "prompt_tokens",
        "completion_tokens",
        "created",
        "template_version",
        "facts",
        "logprobs",
    ]
    assert embeddings == ["model", "text_hash", "dim", "vector", "created"]
    assert version == (str(SCHEMA_VERSION),)


def test_parent_folders_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c.sqlite"
    with Cache(path) as cache:
        cache.put_reply("k", CachedReply("v"), model="m", template_id="t")
    assert path.is_file()


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("shared", [True, False], ids=["one-object", "object-per-thread"])
def test_threads_lose_no_writes(db: Path, shared: bool) -> None:
    n_threads, n_ops = 8, 200
    common = Cache(db)
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def work(t: int) -> None:
        cache = common if shared else Cache(db)
        try:
            barrier.wait()
            for i in range(n_ops):
                key = f"t{t}-{i}"
                cache.put_reply(key, CachedReply(key, i, t), model="m", template_id="t")
                assert cache.get_reply(key) == CachedReply(key, i, t)
                cache.put_embeddings("m", [key], [[float(t), float(i)]])
                assert cache.get_embeddings("m", [key]) == [[float(t), float(i)]]
        except BaseException as exc:
            errors.append(exc)
        finally:
            if not shared:
                cache.close()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    stats = common.stats()
    common.close()
    assert stats.replies == n_threads * n_ops
    assert stats.embeddings == n_threads * n_ops


def test_asyncio_tasks_lose_no_writes(db: Path) -> None:
    n_tasks = 100

    async def task(cache: Cache, n: int) -> None:
        for i in range(5):
            key = f"task{n}-{i}"
            cache.put_reply(key, CachedReply(key), model="m", template_id="t")
            await asyncio.sleep(0)  # let the other tasks interleave between put and get
            assert cache.get_reply(key) == CachedReply(key)
            # Also from a worker thread, as a judge engine may offload blocking work.
            await asyncio.to_thread(cache.put_embeddings, "m", [key], [[float(n)]])
            assert cache.get_embeddings("m", [key]) == [[float(n)]]

    async def main() -> None:
        with Cache(db) as cache:
            await asyncio.gather(*(task(cache, n) for n in range(n_tasks)))

    asyncio.run(main())
    with Cache(db) as cache:
        stats = cache.stats()
    assert stats.replies == n_tasks * 5
    assert stats.embeddings == n_tasks * 5


# ---------------------------------------------------------------- stats, clear, lifecycle


def test_hits_and_misses() -> None:
    with Cache(":memory:") as cache:
        assert cache.stats() == CacheStats(replies=0, embeddings=0, hits=0, misses=0)
        cache.get_reply("k")  # miss
        cache.put_reply("k", CachedReply("v"), model="m", template_id="t")
        cache.get_reply("k")  # hit
        cache.get_reply("k")  # hit
        cache.put_embeddings("m", ["a"], [[1.0]])
        cache.get_embeddings("m", ["a", "b", "a", "c"])  # 2 hits, 2 misses
        assert cache.stats() == CacheStats(replies=1, embeddings=1, hits=4, misses=3)


def test_counters_belong_to_the_object(db: Path) -> None:
    with Cache(db) as one:
        one.put_reply("k", CachedReply("v"), model="m", template_id="t")
        one.get_reply("k")
    with Cache(db) as two:
        assert two.stats() == CacheStats(replies=1, embeddings=0, hits=0, misses=0)


def test_clear() -> None:
    with Cache(":memory:") as cache:
        cache.put_reply("k", CachedReply("v"), model="m", template_id="t")
        cache.put_embeddings("m", ["a"], [[1.0]])
        cache.clear()
        assert cache.get_reply("k") is None
        assert cache.get_embeddings("m", ["a"]) == [None]
        assert cache.stats() == CacheStats(replies=0, embeddings=0, hits=0, misses=2)


def test_repr_and_close(db: Path) -> None:
    cache = Cache(db)
    assert repr(cache) == f"Cache({str(db)!r})"
    assert cache.path == str(db)
    with cache:
        pass
    assert "closed" in repr(cache)
    cache.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        cache.get_reply("k")


# ---------------------------------------------------------------- bad files


def test_corrupt_file_is_a_clear_value_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_bytes(b"this is not a database at all\n" * 100)
    with pytest.raises(ValueError, match="delete") as info:
        Cache(bad)
    assert str(bad) in str(info.value)
    assert not isinstance(info.value, sqlite3.Error)


def test_newer_schema_version_is_refused(db: Path) -> None:
    Cache(db).close()
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    with pytest.raises(ValueError, match=f"schema version {SCHEMA_VERSION + 1}") as info:
        Cache(db)
    assert str(db) in str(info.value)


def test_empty_path_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        Cache("")


# ---------------------------------------------------------------- helpers


def test_open_cache_variants(db: Path) -> None:
    assert open_cache(None) is None
    existing = Cache(":memory:")
    assert open_cache(existing) is existing
    for spec in (db, str(db)):
        opened = open_cache(spec)
        assert isinstance(opened, Cache)
        assert opened.path == str(db)
        opened.close()
    existing.close()


def test_default_cache_path_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RAGBRIDGE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_path() == tmp_path / "home" / ".cache" / "ragbridge" / "cache.sqlite"

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "ragbridge" / "cache.sqlite"

    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG spec says
    assert default_cache_path() == tmp_path / "home" / ".cache" / "ragbridge" / "cache.sqlite"

    monkeypatch.setenv("RAGBRIDGE_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_path() == tmp_path / "mine" / "cache.sqlite"


# ---------------------------------------------------------------- inspection and pruning

_OLD_LAYOUT = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, template_id TEXT, text TEXT,
    prompt_tokens INT, completion_tokens INT, created REAL);
CREATE TABLE embeddings (model TEXT, text_hash TEXT, dim INT, vector BLOB,
    PRIMARY KEY (model, text_hash));
INSERT INTO replies VALUES ('old', 'gpt-x', 'faithfulness.verify', '{"verdicts": []}', 5, 6, 1.0);
"""


def test_a_file_of_the_first_layout_gains_the_new_columns_and_keeps_its_rows(db: Path) -> None:
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.executescript(_OLD_LAYOUT)
    with Cache(db) as cache:
        assert cache.get_reply("old") == CachedReply('{"verdicts": []}', 5, 6)
        (row,) = cache.reply_rows()
        assert (row.template_version, row.facts, row.created) == (None, None, 1.0)
        cache.put_embeddings("m", ["a"], [[1.0, 2.0]])
        (group,) = cache.groups().embeddings
        assert group.unknown_age == 0
    with closing(sqlite3.connect(db)) as raw, raw:
        columns = [r[1] for r in raw.execute("PRAGMA table_info(replies)")]
    assert columns[-3:] == ["template_version", "facts", "logprobs"]


def test_replies_keep_their_template_version_and_facts(db: Path) -> None:
    with Cache(db) as cache:
        cache.put_reply(
            "k",
            CachedReply("t"),
            model="gpt-x",
            template_id="faithfulness.verify",
            template_version="1",
            facts={"CLAIM": 3, "CONTEXT": 2},
        )
        cache.put_reply("plain", CachedReply("u"), model="gpt-x", template_id="deepeval")
        rows = {r.key: r for r in cache.reply_rows()}
    assert rows["k"].template_version == "1"
    assert rows["k"].facts == {"CLAIM": 3, "CONTEXT": 2}
    assert rows["plain"].template_version is None
    assert rows["plain"].facts is None


def test_groups_delete_and_age_pruning(db: Path) -> None:
    with Cache(db) as cache:
        for i, version in enumerate(["1", "1", "2"]):
            cache.put_reply(
                f"k{i}", CachedReply("abc"), model="m", template_id="t", template_version=version
            )
        cache.put_embeddings("e", ["a", "b"], [[1.0, 0.0], [0.0, 1.0]])
        groups = cache.groups()
        assert [(g.template_version, g.count, g.text_bytes) for g in groups.replies] == [
            ("1", 2, 6),
            ("2", 1, 3),
        ]
        assert [(g.model, g.dim, g.count, g.vector_bytes) for g in groups.embeddings] == [
            ("e", 2, 2, 16)
        ]
        assert cache.delete_replies(["k0", "missing"]) == 1
        with closing(sqlite3.connect(db)) as raw, raw:
            raw.execute("UPDATE replies SET created = 100.0 WHERE key = 'k1'")
            raw.execute("UPDATE embeddings SET created = 100.0 WHERE text_hash IS NOT NULL")
        assert cache.delete_older_than(1000.0) == (1, 2)
        assert [r.key for r in cache.reply_rows()] == ["k2"]
        cache.vacuum()
        assert cache.stats().replies == 1
