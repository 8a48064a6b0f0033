"""``ragbridge serve`` over HTTP (Starlette's TestClient): every route, bad ids, a vanished
store, the token, the security headers, the XSS set on every page, and the paired comparison
equal to `ragbridge.core.results.stats.compare` on the evaluations that were recorded."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlencode

import numpy as np
import pytest
from serve_store import EVIL_METRIC, HOSTILE, HOSTILE_ID, T0, StoreFixture, build_store

pytest.importorskip("starlette", reason="the serve extra: pip install '.[serve]'")
from starlette.testclient import TestClient

from ragbridge.adapters.cli.main import main
from ragbridge.adapters.cli.serve_command import is_loopback
from ragbridge.adapters.serve import COOKIE, ServeError, create_app
from ragbridge.adapters.serve.data import RunTable, TableQuery, query_table
from ragbridge.core.monitoring.history import metric_history
from ragbridge.core.monitoring.store import MonitorStore
from ragbridge.core.results.stats import compare

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> StoreFixture:
    return build_store(tmp_path_factory.mktemp("serve") / "runs.sqlite")


@pytest.fixture(scope="module")
def client(made: StoreFixture) -> Iterator[TestClient]:
    with TestClient(create_app(made.path), base_url=LOCAL) as c:
        yield c


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def _tags(body: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag of ``body`` as a browser's tokenizer reads it, with its attributes."""
    parser = _Tags()
    parser.feed(body)
    parser.close()
    return parser.found


def q(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}"


def _pages(made: StoreFixture) -> list[str]:
    base, cand, evil = made.runs
    return [
        "/",
        q("/", branch="", source=f"evals/{HOSTILE[5]}.jsonl"),
        q("/run", id=base),
        q("/run", id=cand, sort="faithfulness", desc="1"),
        q("/run", id=cand, q="evil"),
        q("/run", id=evil),
        q("/run", id=evil, sort=EVIL_METRIC, status="failed"),
        q("/sample", run=cand, id=HOSTILE_ID),
        q("/sample", run=base, id=HOSTILE_ID),  # kept texts, reasons and claims (schema 3)
        q("/sample", run=evil, id=HOSTILE[5]),
        "/compare",
        q("/compare", a=base, b=cand),
        q("/compare", a=base, b=evil),
        "/trends",
        q("/trends", source=f"evals/{HOSTILE[5]}.jsonl"),
        q("/production", days="0"),
        q("/run", id=HOSTILE_ID),  # a 404 naming a hostile id
    ]


def test_every_page_escapes_the_xss_set_and_carries_the_csp(
    client: TestClient, made: StoreFixture
) -> None:
    for path in _pages(made):
        response = client.get(path)
        assert response.status_code in (200, 404), (path, response.status_code)
        body = response.text
        for payload in [*HOSTILE, EVIL_METRIC]:
            assert payload not in body, (path, payload)
        # the only script element is the app's own, from /static/
        assert body.count("<script") == 1, path
        assert '<script src="/static/serve.js" defer></script>' in body
        tags = _tags(body)
        assert not [t for t in tags if t[0] in ("img", "iframe", "object", "embed")], path
        handlers = [
            (tag, name) for tag, attrs in tags for name, _ in attrs if name.startswith("on")
        ]
        assert handlers == [], (path, handlers)
        scripts = [dict(attrs) for tag, attrs in tags if tag == "script"]
        assert scripts == [{"src": "/static/serve.js", "defer": None}], path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "default-src 'none'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
    # the hostile texts are there, as text
    page = client.get(q("/sample", run=made.runs[1], id=HOSTILE_ID)).text
    assert "evil&quot;&#x27;&lt;/script&gt;&lt;script&gt;window.pwned = 3&lt;/script&gt;" in page


def test_json_api_routes(client: TestClient, made: StoreFixture) -> None:
    base, cand, evil = made.runs
    runs = client.get("/api/runs").json()
    assert [r["run_id"] for r in runs] == [evil, cand, base]  # newest first
    assert (
        client.get(q("/api/runs", source=f"evals/{HOSTILE[5]}.jsonl")).json()[0]["run_id"] == cand
    )
    assert client.get(q("/api/run", id="0190cand")).json()["run_id"] == cand  # a prefix
    detail = client.get(q("/api/sample", run=base, id="q005")).json()
    cells = {c["metric"]: c for c in detail["cells"]}
    assert cells["recall@5"]["status"] == "failed"
    assert cells["recall@5"]["failure"] == "timeout"
    evil_cell = client.get(q("/api/sample", run=evil, id=HOSTILE[5])).json()["cells"][0]
    assert evil_cell["failure"] == HOSTILE[4]  # kept verbatim in JSON, served as JSON
    assert client.get("/api/trends").headers["content-type"].startswith("application/json")
    assert client.get("/static/serve.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/serve.css").status_code == 200


def test_sample_table_pages_sorts_filters_and_searches(
    client: TestClient, made: StoreFixture
) -> None:
    cand = made.runs[1]
    ev = made.cand
    got = client.get(q("/api/samples", run=cand, sort="faithfulness", desc="1", limit="7")).json()
    ids, values = ev.values("faithfulness")
    expected = [s for _, s in sorted(zip((-v for v in values), ids, strict=False))][:7]
    assert [r["id"] for r in got["rows"]] == expected
    assert got["matched"] == got["total"] == len(ev.sample_ids)
    second = client.get(q("/api/samples", run=cand, offset="7", limit="7")).json()
    assert [r["id"] for r in second["rows"]] == sorted(ev.sample_ids)[7:14]
    found = client.get(q("/api/samples", run=cand, q="EVIL")).json()
    assert [r["id"] for r in found["rows"]] == [HOSTILE_ID]
    ranged = client.get(
        q("/api/samples", run=cand, metric="faithfulness", low="0.5", high="0.8", limit="500")
    ).json()
    inside = sorted(s for s, v in zip(ids, values, strict=False) if 0.5 <= v <= 0.8)
    assert [r["id"] for r in ranged["rows"]] == inside
    failed = client.get(q("/api/samples", run=made.runs[0], status="failed")).json()
    assert [r["id"] for r in failed["rows"]] == ["q005"]
    assert failed["rows"][0]["cells"][1] == "failed (timeout)"


def test_comparison_equals_core_compare(client: TestClient, made: StoreFixture) -> None:
    base, cand, _ = made.runs
    got = client.get(q("/api/compare", a=base, b=cand)).json()
    expected = compare(made.base, made.cand, n_resamples=10_000, seed=0)
    assert got["metrics"] == {m: c.model_dump(mode="json") for m, c in expected.items()}
    # only-in-candidate, and the base's failed and skipped cells: not scored, so not paired
    assert got["metrics"]["recall@5"]["n_unpaired"] == 3
    # the samples that moved most, computed here from the evaluations
    a_ids, a_vals = made.base.values("faithfulness")
    after = dict(zip(*made.cand.values("faithfulness"), strict=False))
    moves = sorted(
        (-abs(after[s] - v), s)
        for s, v in zip(a_ids, a_vals, strict=False)
        if s in after and after[s] != v
    )
    assert [m["id"] for m in got["moved"]["faithfulness"]] == [s for _, s in moves[:10]]
    html = client.get(q("/compare", a=base, b=cand)).text
    c = expected["faithfulness"]
    assert f"{c.diff:+.3f}" in html
    assert f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]" in html


def test_trends_mark_the_run_the_history_rule_marks(client: TestClient, made: StoreFixture) -> None:
    got = client.get("/api/trends").json()["faithfulness"]
    with MonitorStore(made.path) as store:
        expected = metric_history(store, "faithfulness")
    assert [(p["run_id"], p["change"], p["p_value"]) for p in got] == [
        (p.run_id, p.change, p.p_value) for p in expected
    ]
    assert got[-1]["change"] == "up"  # the candidate: +0.2 on 40 paired samples
    page = client.get("/trends").text
    assert 'class="point change better"' in page
    assert "▲" in page


def test_production_counts_and_alert_episodes(client: TestClient) -> None:
    got = client.get(q("/api/production", days="0")).json()
    assert got["requests"] == 400
    assert got["sampled"] == 400
    assert sum(b["requests"] for b in got["buckets"]) == 400
    assert sum(b["errors"] for b in got["buckets"]) == 5  # i % 97 == 0 for i < 400
    fired = [e for e in got["episodes"] if e["signal"] == "faithfulness"]
    assert fired
    assert fired[0]["started"] >= T0 + 10_000 + 60 * 300
    page = client.get(q("/production", days="0")).text
    assert 'id="episodes"' in page
    assert "faithfulness fell" in page


def test_bad_ids_are_404_pages_naming_them(client: TestClient, made: StoreFixture) -> None:
    response = client.get(q("/run", id="nosuchrun"))
    assert response.status_code == 404
    assert "no run &#x27;nosuchrun&#x27;" in response.text
    assert client.get(q("/sample", run=made.runs[0], id="nosuchsample")).status_code == 404
    assert "nosuchsample" in client.get(q("/sample", run=made.runs[0], id="nosuchsample")).text
    assert client.get(q("/compare", a="nosuchrun", b=made.runs[0])).status_code == 404
    api = client.get(q("/api/run", id="nosuchrun"))
    assert api.status_code == 404
    assert "nosuchrun" in api.json()["error"]
    assert client.get("/run").status_code == 404  # no id at all
    assert client.get("/nowhere").status_code == 404
    assert client.get(q("/run", id=made.runs[0], status="bogus")).status_code == 400
    assert client.get(q("/api/samples", run=made.runs[0], limit="0")).status_code == 400
    assert client.get(q("/api/samples", run=made.runs[0], low="nan")).status_code == 400
    assert client.post("/").status_code == 405  # read-only


def test_missing_store_refused_at_start_and_503_when_it_vanishes(
    made: StoreFixture, tmp_path: Path
) -> None:
    with pytest.raises(ServeError, match="no results store at"):
        create_app(tmp_path / "missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()  # serving never creates a store
    copy = tmp_path / "copy.sqlite"
    shutil.copy(made.path, copy)
    with TestClient(create_app(copy), base_url=LOCAL) as c:
        assert c.get("/").status_code == 200
        copy.unlink()
        gone = c.get(q("/run", id=made.runs[0]))
        assert gone.status_code == 503
        assert "is gone" in gone.text
        assert c.get("/api/runs").status_code == 503


def test_token_bearer_cookie_and_query(made: StoreFixture) -> None:
    app = create_app(made.path, token="s3cret-token")
    with TestClient(app, base_url="http://10.0.0.5:8765", follow_redirects=False) as c:
        assert c.get("/").status_code == 401
        assert c.get("/static/serve.js").status_code == 401
        assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = c.get("/api/runs", headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        assert c.get("/?token=wrong").status_code == 401
        hop = c.get(q("/run", id=made.runs[0], token="s3cret-token"))
        assert hop.status_code == 303
        assert hop.headers["location"] == q("/run", id=made.runs[0])  # the token left the URL
        cookie = hop.headers["set-cookie"]
        assert f"{COOKIE}=s3cret-token" in cookie
        assert "httponly" in cookie.lower()
        assert "samesite=strict" in cookie.lower()
        c.cookies.set(COOKIE, "s3cret-token")
        assert c.get(q("/run", id=made.runs[0])).status_code == 200
    with pytest.raises(ValueError, match="empty"):
        create_app(made.path, token=" ")


def test_without_a_token_only_loopback_hosts_are_answered(made: StoreFixture) -> None:
    with TestClient(create_app(made.path), base_url="http://rebound.example:8765") as c:
        assert c.get("/").status_code == 421
    for host in ("http://localhost:8765", "http://[::1]:8765", LOCAL):
        with TestClient(create_app(made.path), base_url=host) as c:  # shutdown closes the store
            assert c.get("/").status_code == 200, host


def test_cli_refuses_a_public_host_without_token_and_a_missing_store(
    made: StoreFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(made.path), "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "nope.sqlite")]) == 2
    assert "no results store at" in capsys.readouterr().err
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.4")


def test_ten_thousand_samples_page_fast() -> None:
    """Server-side paging: one sorted, filtered page of 10k samples × 8 metrics is cheap."""
    from ragbridge.core.monitoring.records import RunRecord

    rng = np.random.default_rng(0)
    n, m = 10_000, 8
    values = rng.random((n, m))
    status = np.zeros((n, m), dtype=np.int8)
    ids = [f"s{i:05d}" for i in range(n)]
    table = RunTable(
        RunRecord(run_id="r", command="eval"), ids, [f"m{j}" for j in range(m)],
        values, status, {}, ids,
    )  # fmt: skip
    query = TableQuery(sort="m3", desc=True, q="s0", metric="m1", low=0.2, high=0.9)
    start = time.process_time()
    for _ in range(20):
        got = query_table(table, query)
    per_query = (time.process_time() - start) / 20
    keep = [i for i in range(n) if "s0" in ids[i] and 0.2 <= values[i, 1] <= 0.9]
    expected = sorted(keep, key=lambda i: (-values[i, 3], i))[:50]
    assert [r["id"] for r in got["rows"]] == [ids[i] for i in expected]
    assert per_query < 0.25, f"{per_query:.3f} CPU s per query"


def test_ids_with_url_characters_round_trip(client: TestClient, made: StoreFixture) -> None:
    hostile = made.runs[2]
    assert client.get(f"/run?id={quote(hostile, safe='')}").status_code == 200
    page = client.get(q("/run", id=hostile)).text
    assert quote(HOSTILE[5], safe="")[:20] in page or "%3Cimg" in page


def test_a_missing_extra_is_named(made: StoreFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)  # as if not installed
    with pytest.raises(ImportError, match=r"ragbridge serve needs starlette.*\.\[serve\]"):
        create_app(made.path)


def test_runs_by_branch(client: TestClient, made: StoreFixture) -> None:
    runs = client.get("/api/runs").json()
    if all(r["branch"] is None for r in runs):
        pytest.skip("this store does not keep RunRecord.branch yet (store schema 2)")
    assert [r["run_id"] for r in client.get(q("/api/runs", branch="main")).json()] == [made.runs[0]]
    page = client.get(q("/", branch="feature/x")).text
    assert f'data-run="{made.runs[1]}"' in page
    assert f'data-run="{made.runs[0]}"' not in page
    assert '<option value="feature/x" selected>' in page


def test_a_sample_beside_its_previous_run(client: TestClient, made: StoreFixture) -> None:
    base, cand, _ = made.runs
    got = client.get(q("/api/sample", run=cand, id="q005")).json()
    assert got["previous_run"] == base
    cells = {c["metric"]: c for c in got["cells"]}
    assert cells["recall@5"]["previous"] == "failed (timeout)"
    assert cells["faithfulness"]["previous"] == made.base.get("q005", "faithfulness").value
    assert cells["faithfulness"]["value"] == made.cand.get("q005", "faithfulness").value
    only = client.get(q("/api/sample", run=cand, id="only-in-candidate")).json()
    assert only["previous_run"] is None  # the base run never saw it
    assert client.get(q("/api/sample", run=base, id="q005")).json()["previous_run"] is None
    page = client.get(q("/sample", run=cand, id="q005")).text
    assert 'id="previous"' in page
    assert "failed (timeout)" in page
