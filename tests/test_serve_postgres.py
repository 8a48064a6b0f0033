"""``ragbridge serve`` over a PostgreSQL store: the same pages and numbers as over SQLite.

The app talks to the store through the `ResultsStore` protocol only, so a team's store on a
server is served as a file is: the runs, the sample table, the comparison (equal to `compare`),
the trends, production, the 404s and the escaping. The URL's password is never shown. Runs on
the throwaway cluster of `postgres_server` (skipped with the apt line when PostgreSQL is not
installed, or with the extra's line when psycopg is missing).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from serve_store import HOSTILE, HOSTILE_ID, StoreFixture, build_store

pytest_plugins = ["postgres_server"]
pytest.importorskip("starlette", reason="the serve extra: pip install '.[serve]'")
pytest.importorskip("psycopg", reason='psycopg missing: pip install ".[postgres]"')
from starlette.testclient import TestClient  # noqa: E402

from ragbridge.adapters.serve import create_app  # noqa: E402
from ragbridge.core.results.stats import compare  # noqa: E402


@pytest.fixture
def served(postgres_url: str) -> Iterator[tuple[TestClient, StoreFixture, str]]:
    made = build_store(postgres_url)
    with TestClient(create_app(postgres_url), base_url="http://127.0.0.1:8765") as client:
        yield client, made, postgres_url


def test_a_postgres_store_serves_as_sqlite_does(
    served: tuple[TestClient, StoreFixture, str],
) -> None:
    from postgres_server import PASSWORD

    client, made, _ = served
    base, cand, evil = made.runs
    assert [r["run_id"] for r in client.get("/api/runs").json()] == [evil, cand, base]
    got = client.get(f"/api/compare?{urlencode({'a': base, 'b': cand})}").json()
    expected = compare(made.base, made.cand, n_resamples=10_000, seed=0)
    assert got["metrics"] == {m: c.model_dump(mode="json") for m, c in expected.items()}
    rows = client.get(f"/api/samples?{urlencode({'run': cand, 'q': 'evil'})}").json()["rows"]
    assert [r["id"] for r in rows] == [HOSTILE_ID]
    trends = client.get("/api/trends").json()["faithfulness"]
    assert trends[-1]["run_id"] == cand
    assert trends[-1]["change"] == "up"
    assert client.get("/api/production?days=0").json()["requests"] == 400
    missing = client.get("/run?id=nosuchrun")
    assert missing.status_code == 404
    assert "nosuchrun" in missing.text
    for path in ("/", f"/run?{urlencode({'id': evil})}", "/trends", "/production?days=0"):
        page = client.get(path).text
        assert PASSWORD not in page  # the store's URL is shown without its password
        for payload in HOSTILE:
            assert payload not in page
