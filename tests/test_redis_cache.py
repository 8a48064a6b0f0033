"""The Redis cache backend against a real ``redis-server``, and against the SQLite cache.

The conformance tests run every `CacheBackend` operation on both backends with the same inputs
and the same expectations, so the two cannot drift; the rest checks what only Redis has (the
key layout, round trips, connection errors) and the paths a user takes to it: `open_cache`,
`evaluate` and ``ragbridge eval --cache redis://...``.
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("redis", reason='redis-py not installed: pip install ".[redis]"')

import redis

from ragbridge.adapters.cli import main
from ragbridge.adapters.redis_cache import (
    BATCH,
    RedisCache,
    RedisCacheError,
    open_redis_cache,
)
from ragbridge.core import Context, Sample, Settings, evaluate
from ragbridge.core.cache.backend import CacheBackend, redact_url
from ragbridge.core.cache.disk import Cache, open_cache
from ragbridge.core.cache.stored import CachedReply, facts_json, text_hash
from ragbridge.core.sample import save_samples
from ragbridge.core.testing import CountingJudge, HashEmbedder

# The redis_url fixture: one real server for the session. The helpers of the same module are
# imported inside the tests that use them: imported here, before pytest loads the module as a
# plugin, it would be loaded without pytest's assertion rewriting (and pytest warns).
pytest_plugins = ["redis_server"]

Opener = Callable[[], CacheBackend]

# ------------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a new object on one store, SQLite file or Redis database (empty at the start).

    Every object opened is closed at the end; two objects from one opener share the store.
    """
    opened: list[CacheBackend] = []
    if request.param == "sqlite":
        path = tmp_path / "cache.sqlite"

        def make() -> CacheBackend:
            opened.append(Cache(path))
            return opened[-1]
    else:
        url = request.getfixturevalue("redis_url")

        def make() -> CacheBackend:
            opened.append(RedisCache(url))
            return opened[-1]

    yield make
    for cache in opened:
        cache.close()


@pytest.fixture
def cache(opener: Opener) -> CacheBackend:
    return opener()


def _raw(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


# ----------------------------------------------------------- conformance: both backends


def test_is_a_cache_backend(cache: CacheBackend) -> None:
    assert isinstance(cache, CacheBackend)


def test_reply_round_trip_replace_and_counts(cache: CacheBackend) -> None:
    assert cache.get_reply("k1") is None
    reply = CachedReply('{"verdict": "yes"} — ünïcode', prompt_tokens=12, completion_tokens=3)
    cache.put_reply("k1", reply, model="m", template_id="faithfulness.verify")
    assert cache.get_reply("k1") == reply
    cache.put_reply("k1", CachedReply("second"), model="m", template_id="t")
    assert cache.get_reply("k1") == CachedReply("second", 0, 0)
    cache.put_reply("k2", CachedReply(""), model="m", template_id="t")
    assert cache.get_reply("k2") == CachedReply("")  # an empty text is a hit, not a miss
    stats = cache.stats()
    assert (stats.replies, stats.hits, stats.misses) == (2, 3, 1)


def test_put_reply_refuses_what_is_not_a_cached_reply(cache: CacheBackend) -> None:
    with pytest.raises(TypeError, match="CachedReply"):
        cache.put_reply("k", "text", model="m", template_id="t")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mapping keys must be str"):
        cache.put_reply("k", CachedReply("x"), model="m", template_id="t", facts={1: 2})
    assert cache.get_reply("k") is None


def test_embeddings_aligned_with_misses_duplicates_and_models(cache: CacheBackend) -> None:
    vectors = np.random.default_rng(0).normal(size=(3, 384)).tolist()
    cache.put_embeddings("minilm", ["a", "b", "c"], vectors)
    got = cache.get_embeddings("minilm", ["c", "zz", "a", "a"])
    assert got[1] is None
    for got_vec, want in ((got[0], vectors[2]), (got[2], vectors[0]), (got[3], vectors[0])):
        assert got_vec is not None
        np.testing.assert_array_equal(got_vec, np.asarray(want, dtype=np.float32))
    assert got[2] is not got[3]  # each position is its own list: a caller may mutate one
    assert cache.get_embeddings("other", ["a"]) == [None]
    assert cache.get_embeddings("minilm", []) == []
    cache.put_embeddings("minilm", ["a"], np.array([[1.0, 2.0]], dtype=np.float32))
    assert cache.get_embeddings("minilm", ["a"]) == [[1.0, 2.0]]  # replaced, new dimension
    stats = cache.stats()
    assert (stats.embeddings, stats.hits, stats.misses) == (3, 4, 2)


def test_many_embeddings_in_one_call(cache: CacheBackend) -> None:
    texts = [f"passage {i}" for i in range(2 * BATCH + 7)]
    vectors = [[float(i), 1.0] for i in range(len(texts))]
    cache.put_embeddings("m", texts[::2], vectors[::2])
    got = cache.get_embeddings("m", texts)
    assert got == [[float(i), 1.0] if i % 2 == 0 else None for i in range(len(texts))]


def test_put_embeddings_length_mismatch(cache: CacheBackend) -> None:
    with pytest.raises(ValueError, match="2 texts but 1 vectors"):
        cache.put_embeddings("m", ["a", "b"], [[1.0]])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e39])
def test_a_bad_vector_names_its_index_and_writes_nothing(cache: CacheBackend, bad: float) -> None:
    with pytest.raises(ValueError, match=r"text #2 contains non-finite values"):
        cache.put_embeddings("m", ["a", "b", "c"], [[1.0, 2.0], [3.0, 4.0], [5.0, bad]])
    assert cache.get_embeddings("m", ["a", "b", "c"]) == [None, None, None]
    assert cache.stats().embeddings == 0


@pytest.mark.parametrize("bad", [[], [[1.0], [2.0]], ["x", "y"]])
def test_put_embeddings_rejects_non_vectors(cache: CacheBackend, bad: Any) -> None:
    with pytest.raises(ValueError, match="text #0"):
        cache.put_embeddings("m", ["a"], [bad])
    assert cache.stats().embeddings == 0


def test_results_round_trip_and_replace(cache: CacheBackend) -> None:
    assert cache.get_results([]) == {}
    assert cache.get_results(["r1"]) == {}
    cache.put_results([])
    cache.put_results([("r1", "faithfulness", "c1", '{"value": 1.0}'), ("r2", "mrr", "c1", "{}")])
    assert cache.get_results(["r2", "nope", "r1"]) == {"r1": '{"value": 1.0}', "r2": "{}"}
    cache.put_results([("r1", "faithfulness", "c2", '{"value": 0.5}')])
    assert cache.get_results(["r1"]) == {"r1": '{"value": 0.5}'}
    stats = cache.stats()
    assert (stats.results, stats.hits, stats.misses) == (2, 0, 0)  # results are not counted


def test_two_objects_share_entries(opener: Opener) -> None:
    first, second = opener(), opener()
    first.put_reply("k", CachedReply("shared", 1, 2), model="m", template_id="t")
    first.put_embeddings("m", ["x"], [[0.5, 0.25]])
    first.put_results([("r", "metric", "code", "{}")])
    assert second.get_reply("k") == CachedReply("shared", 1, 2)
    assert second.get_embeddings("m", ["x"]) == [[0.5, 0.25]]
    assert second.get_results(["r"]) == {"r": "{}"}
    assert (first.stats().hits, second.stats().hits) == (0, 2)  # counters are per object


def test_threads_lose_no_writes_and_miscount_nothing(cache: CacheBackend) -> None:
    def work(t: int) -> None:
        for i in range(40):
            cache.put_reply(f"{t}-{i}", CachedReply(f"r{t}-{i}"), model="m", template_id="t")
            assert cache.get_reply(f"{t}-{i}") == CachedReply(f"r{t}-{i}")
            cache.get_reply(f"missing-{t}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = cache.stats()
    assert (stats.replies, stats.hits, stats.misses) == (320, 320, 320)


def test_close_twice_then_use_is_a_value_error(cache: CacheBackend) -> None:
    cache.close()
    cache.close()
    with pytest.raises(ValueError, match="is closed"):
        cache.get_reply("k")
    with pytest.raises(ValueError, match="is closed"):
        cache.put_embeddings("m", ["a"], [[1.0]])


def test_a_rerun_through_evaluate_makes_no_judge_call(opener: Opener) -> None:
    """The promise of the cache, on either backend: reply cache and kept results alike."""
    samples = [
        Sample(
            id=f"s{i}",
            question=f"What is the capital of France? ({i})",
            answer="Paris is the capital of France.",
            contexts=[Context(text=f"Paris is the capital of France ({i}).", id="d1")],
            reference="Paris.",
        )
        for i in range(3)
    ]
    metrics = ["faithfulness", "answer_relevance", "context_precision"]

    def run(judge: CountingJudge, embedder: HashEmbedder, reuse: bool) -> Any:
        cache = opener()
        settings = Settings(judge=judge, embedder=embedder, cache=cache, reuse_results=reuse)
        return evaluate(samples, metrics, settings=settings)

    first_judge, first_embedder = CountingJudge(), HashEmbedder()
    first = run(first_judge, first_embedder, reuse=False)
    assert first_judge.calls > 0
    assert first_embedder.texts_embedded > 0
    again_judge, again_embedder = CountingJudge(), HashEmbedder()
    again = run(again_judge, again_embedder, reuse=False)  # from the replies and vectors
    assert (again_judge.calls, again_embedder.texts_embedded) == (0, 0)
    assert again.metadata["judge_stats"]["cached"] == first_judge.calls
    kept_judge = CountingJudge()
    run(kept_judge, HashEmbedder(), reuse=True)  # stores whole Scores
    reused = run(kept_judge, HashEmbedder(), reuse=True)
    assert kept_judge.calls == 0
    assert reused.metadata["results_reused"] == {"hits": 9, "misses": 0}
    for sample_id, metric, score in first:
        rerun = again.get(sample_id, metric)
        assert rerun is not None
        assert (rerun.value, rerun.failure) == (score.value, score.failure)


# ------------------------------------------------------------- Redis against SQLite, bytes


def test_embeddings_are_the_bytes_sqlite_stores(redis_url: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    texts = ["alpha", "beta", "ünïcode \ud800 surrogate", "gamma"]
    vectors = [
        rng.normal(size=16).tolist(),  # float64: rounded to float32 on the way in
        rng.normal(size=16).astype(np.float32),
        [1e-45, -0.0, 3.4028234e38, 0.1],  # subnormal, negative zero, float32 max
        list(range(1, 9)),  # ints
    ]
    path = tmp_path / "c.sqlite"
    with Cache(path) as sqlite_cache, RedisCache(redis_url) as redis_cache:
        sqlite_cache.put_embeddings("m", texts, vectors)
        redis_cache.put_embeddings("m", texts, vectors)
        from_sqlite = sqlite_cache.get_embeddings("m", [*texts, "missing"])
        from_redis = redis_cache.get_embeddings("m", [*texts, "missing"])
    assert from_redis == from_sqlite
    assert math.copysign(1.0, from_redis[2][1]) == -1.0  # type: ignore[index]
    with closing(sqlite3.connect(path)) as raw:
        blobs = dict(raw.execute("SELECT text_hash, vector FROM embeddings").fetchall())
    client = _raw(redis_url)
    for text in texts:
        digest = text_hash(text)
        assert client.get(f"ragbridge:1:emb:m:{digest}") == blobs[digest]


def test_reply_metadata_is_kept_as_sqlite_keeps_it(redis_url: str, tmp_path: Path) -> None:
    facts = {"CONTEXT": 4, "CLAIM": 3.0, "nested": {"b": [1, 2], "a": "ü"}}
    with Cache(tmp_path / "c.sqlite") as sqlite_cache, RedisCache(redis_url) as redis_cache:
        for cache in (sqlite_cache, redis_cache):
            cache.put_reply(
                "key1",
                CachedReply("text", 5, 6),
                model="gpt-x",
                template_id="faithfulness.verify",
                template_version="3",
                facts=facts,
            )
            cache.put_reply("key2", CachedReply("bare"), model="gpt-x", template_id="t")
        (row1, row2) = sorted(sqlite_cache.reply_rows(), key=lambda r: r.key)
    fields = _raw(redis_url).hgetall("ragbridge:1:reply:key1")
    stored = {k.decode(): v.decode() for k, v in fields.items()}
    assert stored.pop("created")
    assert stored == {
        "text": row1.text,
        "prompt_tokens": "5",
        "completion_tokens": "6",
        "model": row1.model,
        "template_id": row1.template_id,
        "template_version": row1.template_version,
        "facts": facts_json(facts),
    }
    assert row1.facts == {"CONTEXT": 4, "CLAIM": 3, "nested": {"a": "ü", "b": [1, 2]}}
    bare = _raw(redis_url).hgetall("ragbridge:1:reply:key2")
    assert row2.template_version is None
    assert row2.facts is None
    assert b"template_version" not in bare
    assert b"facts" not in bare


def test_a_replaced_reply_loses_the_old_metadata(redis_url: str) -> None:
    with RedisCache(redis_url) as cache:
        cache.put_reply("k", CachedReply("a"), model="m", template_id="t", template_version="1")
        cache.put_reply("k", CachedReply("b"), model="m", template_id="t")
    assert _raw(redis_url).hget("ragbridge:1:reply:k", "template_version") is None


def test_a_value_that_is_not_whole_float32s_is_a_miss(redis_url: str) -> None:
    with RedisCache(redis_url) as cache:
        cache.put_embeddings("m", ["a", "b"], [[1.0, 2.0], [3.0]])
        _raw(redis_url).set(f"ragbridge:1:emb:m:{text_hash('a')}", b"\x00\x00\x80")
        assert cache.get_embeddings("m", ["a", "b"]) == [None, [3.0]]


# ------------------------------------------------------------------ layout and round trips


def test_keys_are_namespaced_by_prefix_and_format(redis_url: str) -> None:
    with (
        RedisCache(redis_url) as default,
        RedisCache(redis_url + "?prefix=team-a") as team_a,
        RedisCache(redis_url, prefix="team*b") as team_b,
    ):
        assert (default.prefix, team_a.prefix, team_b.prefix) == ("ragbridge", "team-a", "team*b")
        for cache in (default, team_a, team_b):
            cache.put_reply("k", CachedReply(cache.prefix), model="m", template_id="t")
        team_a.put_embeddings("m", ["x", "y"], [[1.0], [2.0]])
        team_a.put_results([("r", "metric", "code", "{}")])
        assert default.get_reply("k") == CachedReply("ragbridge")
        assert team_a.get_reply("k") == CachedReply("team-a")
        assert default.get_embeddings("m", ["x"]) == [None]
        stats = team_a.stats()
        assert (stats.replies, stats.embeddings, stats.results) == (1, 2, 1)
        assert team_b.stats().replies == 1  # the * of the prefix is not a wildcard in SCAN
        assert default.stats().replies == 1
    names = sorted(k.decode() for k in _raw(redis_url).keys("*"))
    assert names == [
        "ragbridge:1:reply:k",
        "team*b:1:reply:k",
        f"team-a:1:emb:m:{text_hash('x')}",
        f"team-a:1:emb:m:{text_hash('y')}",
        "team-a:1:reply:k",
        "team-a:1:result:r",
    ]


def test_two_prefixes_for_one_cache_is_a_value_error(redis_url: str) -> None:
    with pytest.raises(ValueError, match="prefix 'b' given, but the URL says prefix='a'"):
        RedisCache(redis_url + "?prefix=a", prefix="b")
    with pytest.raises(ValueError, match="must not be empty"):
        RedisCache(redis_url, prefix="")


def test_the_urls_own_options_still_reach_redis_py(redis_url: str) -> None:
    with RedisCache(redis_url + "?socket_timeout=7&prefix=p") as cache:
        kwargs = cache._client.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == 7.0
        assert "prefix" not in kwargs
        assert cache.location == redis_url + "?socket_timeout=7&prefix=p"


def test_ten_thousand_lookups_are_ten_round_trips(redis_url: str) -> None:
    texts = [f"passage {i}" for i in range(10_000)]
    keys = [f"result-{i}" for i in range(10_000)]
    with RedisCache(redis_url) as cache:
        client = cache._client
        client.config_resetstat()
        cache.put_embeddings("m", texts, np.ones((len(texts), 4), dtype=np.float32))
        cache.put_results([(k, "metric", "code", "{}") for k in keys])
        writes = {name: s["calls"] for name, s in client.info("commandstats").items()}
        client.config_resetstat()
        assert all(v is not None for v in cache.get_embeddings("m", texts))
        assert len(cache.get_results(keys)) == len(keys)
        reads = {name: s["calls"] for name, s in client.info("commandstats").items()}
    # One MULTI/EXEC per put: all of the batch or none of it.
    assert writes["cmdstat_exec"] == 2
    assert writes["cmdstat_mset"] == 10
    # Embeddings: one MGET per 1000 texts. Results: one pipelined round trip per 1000 keys.
    assert reads["cmdstat_mget"] == 10
    assert "cmdstat_get" not in reads


# ------------------------------------------------------------------------- opening it


def test_open_cache_opens_a_redis_url(redis_url: str) -> None:
    cache = open_cache(redis_url)
    try:
        assert isinstance(cache, RedisCache)
        assert open_cache(cache) is cache
        assert repr(cache) == f"RedisCache('{redis_url}')"
    finally:
        assert cache is not None
        cache.close()
    assert repr(cache).endswith(", closed)")
    assert isinstance(open_redis_cache(redis_url), RedisCache)


def test_an_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="no cache backend for bogus://") as caught:
        open_cache("bogus://user:secret@x/0")
    message = str(caught.value)
    assert "known: redis://, rediss://" in message
    assert "secret" not in message


def test_a_wrong_port_is_one_line_naming_the_url_and_the_fix() -> None:
    from redis_server import free_port

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with pytest.raises(RedisCacheError) as caught:
        open_cache(url)
    assert str(caught.value) == (
        f"cache {url}: cannot connect (Connection refused); is redis-server running?"
    )
    assert isinstance(caught.value, OSError)  # the CLI's one-line error, exit 2


def test_a_password_never_shows(redis_url: str) -> None:
    with_password = redis_url.replace("redis://", "redis://user:s3cret@")
    with pytest.raises(RedisCacheError) as caught:
        RedisCache(with_password)  # this server has no such user
    assert "s3cret" not in str(caught.value)
    assert "redis://user:***@127.0.0.1" in str(caught.value)
    assert "authentication failed" in str(caught.value)
    # This server has no password, so redis-py's AUTH with one is let through; still hidden.
    with RedisCache(redis_url + "?password=s3cret&prefix=p") as cache:
        assert cache.location == redis_url + "?password=***&prefix=p"
        assert "s3cret" not in repr(cache)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:p@ss:w@h/0", "rediss://user:***@h/0"),  # an unencoded @ in it
        ("redis://h/0?db=1&password=pw&prefix=a", "redis://h/0?db=1&password=***&prefix=a"),
        ("redis://user@h:6379/0?x=a:b@c", "redis://user@h:6379/0?x=a:b@c"),  # nothing to hide
    ],
)
def test_redact_url_hides_every_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_server_lost_during_a_run_is_an_error_not_a_wrong_answer() -> None:
    """The cache raises, never answers wrong; a run over it goes on uncached, with a warning."""
    from redis_server import redis_server

    with redis_server() as url:
        cache = RedisCache(url)
        cache.put_reply("k", CachedReply("x"), model="m", template_id="t")
    with pytest.raises(RedisCacheError, match=r"get_reply: lost the connection .*redis-server"):
        cache.get_reply("k")
    with pytest.raises(RedisCacheError, match="put_embeddings: lost the connection"):
        cache.put_embeddings("m", ["a"], [[1.0]])
    sample = Sample(
        id="a",
        question="Where is Paris?",
        answer="Paris is in France.",
        contexts=[Context(text="Paris is in France.", id="d")],
    )
    judge = CountingJudge()
    run = evaluate(
        [sample], ["faithfulness"], settings=Settings(judge=judge, cache=cache, reuse_results=False)
    )
    score = run.get("a", "faithfulness")
    assert score is not None
    assert score.failure is None  # scored without the cache (tests/test_operator_faults.py)
    (warning,) = run.metadata["warnings"]
    assert warning.startswith(f"cache {url}: get_reply: lost the connection")
    assert "went on without the cache" in warning
    cache.close()


def test_two_processes_share_one_cache(redis_url: str) -> None:
    code = textwrap.dedent(
        f"""
        from ragbridge.core.cache.disk import open_cache
        from ragbridge.core.cache.stored import CachedReply
        cache = open_cache({redis_url!r})
        cache.put_reply("from-child", CachedReply("hello", 1, 1), model="m", template_id="t")
        cache.put_embeddings("m", ["child text"], [[0.1, 0.2]])
        print(cache.get_reply("from-parent").text)
        """
    )
    with RedisCache(redis_url) as cache:
        cache.put_reply("from-parent", CachedReply("hi child"), model="m", template_id="t")
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "hi child"
        assert cache.get_reply("from-child") == CachedReply("hello", 1, 1)
        with Cache(":memory:") as memory:
            memory.put_embeddings("m", ["child text"], [[0.1, 0.2]])
            assert cache.get_embeddings("m", ["child text"]) == memory.get_embeddings(
                "m", ["child text"]
            )


def test_import_without_redis_py_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["redis"] = None  # makes `import redis` raise ImportError
        try:
            import ragbridge.adapters.redis_cache
        except ImportError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install ".[redis]" (in your ragbridge clone)' in out.stdout
    assert "needs redis-py" in out.stdout


def test_a_url_given_to_the_sqlite_cache_is_refused_not_made_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="is a URL, not an SQLite file") as caught:
        Cache("redis://:pw@127.0.0.1:6379/0")
    assert "pw" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_the_server_helper_skips_without_the_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    from redis_server import SKIP_REASON, redis_server

    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="apt-get install redis-server"), redis_server():
        pass  # pragma: no cover
    assert "CI installs it" in SKIP_REASON


# ------------------------------------------------------------------------------- the CLI


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(
        [
            Sample(
                id=f"q{i}",
                question=f"What is fact number {i}?",
                answer=f"Fact {i} is that the sky is blue.",
                contexts=[Context(text=f"Fact {i}: the sky is blue.", id=f"d{i}")],
                reference=f"Fact {i} is that the sky is blue.",
            )
            for i in range(4)
        ],
        path,
    )
    return path


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_twice_with_a_redis_cache_pays_once(
    data: Path, tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", str(data), "--metrics", "faithfulness,correctness",
            "--judge", "python:ragbridge.core.testing:CountingJudge", "--cache", redis_url,
            "--out", str(tmp_path / "results.jsonl")]  # fmt: skip
    code, out, err = _cli(capsys, *argv)
    assert code == 0, err
    assert "judge counting-judge: 12 calls (0 cached)" in out
    code, out, err = _cli(capsys, *argv)
    assert code == 0, err
    assert "judge counting-judge: 0 calls" in out
    assert not list(tmp_path.glob("redis*"))  # the URL was not taken for a path


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        (
            "bogus://x",
            "--cache bogus://x: no cache backend for bogus:// (known: redis://, rediss://)",
        ),
        (
            "redis://127.0.0.1:{port}/0",
            "cannot connect (Connection refused); is redis-server running?",
        ),
    ],
)
def test_eval_with_a_cache_it_cannot_use_is_one_line_exit_2(
    data: Path, cache: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from redis_server import free_port

    argv = ["eval", str(data), "--metrics", "faithfulness",
            "--judge", "python:ragbridge.core.testing:CountingJudge",
            "--cache", cache.format(port=free_port())]  # fmt: skip
    code, _, err = _cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message in lines[0]


@pytest.mark.parametrize("action", [[], ["stats"], ["prune", "--failed"]])
def test_the_cache_command_says_it_reads_sqlite_files_only(
    action: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "cache", "redis://:pw@127.0.0.1:6379/0", *action)
    assert code == 2
    assert err.strip() == (
        "ragbridge: error: redis://:***@127.0.0.1:6379/0: `ragbridge cache` works on SQLite "
        "cache files only; a networked cache is inspected and expired on its server (e.g. "
        "redis-cli, maxmemory-policy)"
    )


def test_a_cache_urls_password_stays_out_of_the_run_history() -> None:
    import argparse

    from ragbridge.adapters.cli.eval_command import history_config

    args = argparse.Namespace(cache="redis://:s3cret@cache.internal:6379/0", metrics="mrr")
    config = history_config(args)
    assert "s3cret" not in str(config)
    assert config["cache"].startswith("redis://")
    assert "cache.internal:6379/0" in config["cache"]
