"""What the cache classes share: one ``put_reply`` metadata record and one ``with`` behaviour.

`ragbridge.core.cache.stored.ReplyMeta` is the one definition of a reply's metadata keywords;
the protocol, the SQLite cache, the Redis cache and the guard all take ``**meta`` of that type,
and `stored_meta` refuses what the spelt-out keyword-only signature used to (a misspelt or a
missing keyword), so a typo is still a TypeError rather than metadata lost quietly.
`ragbridge.core.cache.backend.BackendBase` gives every one of them ``location`` and ``with``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core.cache.backend import BackendBase, CacheBackend
from ragbridge.core.cache.disk import Cache
from ragbridge.core.cache.guard import CacheGuard
from ragbridge.core.cache.stored import CachedReply, StoredMeta, stored_meta

pytest_plugins = ["redis_server"]

_STORES = ["sqlite", "guarded", "redis"]


def _open(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> CacheBackend:
    if kind == "sqlite":
        return Cache(tmp_path / "cache.sqlite")
    if kind == "guarded":
        return CacheGuard(Cache(tmp_path / "cache.sqlite"))
    pytest.importorskip("redis", reason='redis-py not installed: pip install ".[redis]"')
    from ragbridge.adapters.redis_cache import RedisCache

    return RedisCache(request.getfixturevalue("redis_url"))


@pytest.fixture(params=_STORES)
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CacheBackend]:
    opened = _open(request.param, tmp_path, request)
    yield opened
    opened.close()


def test_stored_meta_gives_the_stored_form() -> None:
    reply = CachedReply("ok")
    assert stored_meta(reply, {"model": "m", "template_id": "t"}) == StoredMeta(
        "m", "t", None, None
    )
    full = stored_meta(
        reply, {"model": "m", "template_id": "t", "template_version": "2", "facts": {"B": 1}}
    )
    assert full == StoredMeta("m", "t", "2", '{"B": 1}')


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"model": "m", "template_id": "t", "template_versoin": "1"}, "'template_versoin'"),
        ({"model": "m"}, "missing .*'template_id'"),
        ({"template_id": "t"}, "missing .*'model'"),
    ],
)
def test_put_reply_refuses_a_keyword_its_signature_would(
    cache: CacheBackend, meta: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        cache.put_reply("k", CachedReply("x"), **meta)
    assert cache.get_reply("k") is None  # nothing written


def test_metadata_reaches_the_store_through_the_guard(tmp_path: Path) -> None:
    inner = Cache(tmp_path / "cache.sqlite")
    with CacheGuard(inner) as guard:
        guard.put_reply(
            "k", CachedReply("x"), model="m", template_id="t", template_version="3", facts={"A": 2}
        )
        (row,) = list(inner.reply_rows())
    assert (row.model, row.template_id, row.template_version, row.facts) == (
        "m",
        "t",
        "3",
        {"A": 2},
    )


def _fail_inside(cache: BackendBase) -> None:
    with cache as entered:
        assert entered is cache
        raise RuntimeError("the block failed")


@pytest.mark.parametrize("kind", _STORES)
def test_with_closes_every_backend(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``with`` works alike on each: the object itself, closed on the way out, even on error."""
    opened = _open(kind, tmp_path, request)
    assert isinstance(opened, BackendBase)
    with pytest.raises(RuntimeError, match="the block failed"):
        _fail_inside(opened)
    with pytest.raises(ValueError, match="is closed"):
        opened.get_reply("k")
    opened.close()  # twice is fine


def test_location_of_each_backend(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with Cache(path) as cache:
        assert cache.location == cache.path == str(path)
        assert CacheGuard(cache).location == str(path)


def _parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    signature = inspect.signature(method)
    return [(p.name, p.kind, p.annotation) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", ["put_reply", "put_embeddings"])
def test_every_backend_takes_the_protocols_signature(name: str) -> None:
    """The protocol and each implementation spell the writes the same way (no drift)."""
    classes: list[type[Any]] = [Cache, CacheGuard]
    try:
        from ragbridge.adapters.redis_cache import RedisCache
    except ImportError:
        pass
    else:
        classes.append(RedisCache)
    expected = _parameters(getattr(CacheBackend, name))
    for cls in classes:
        assert _parameters(getattr(cls, name)) == expected, cls.__name__
