"""``ragbridge serve`` in a real headless Chromium: navigation, the sample table's search, sort
and pages, the diff of two runs, trends, and the token cookie; no console error or CSP refusal,
and no planted script runs.

The server is the command itself (``python -m ragbridge.adapters.cli serve STORE --port P
--token T``) on 127.0.0.1; the browser is driven through the DevTools protocol (`_chromium`,
standard library only) with real clicks and typing. Expected orders and numbers are computed
here from the recorded evaluations (`compare` for the diff), not read back from the app.
Skipped with the install line when no Chromium binary exists.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from _chromium import SKIP_REASON, Browser, Page, find_chromium
from serve_store import HOSTILE, HOSTILE_ID, StoreFixture, build_store

from ragbridge.core.results.stats import compare

pytest.importorskip("uvicorn", reason="the serve extra: pip install '.[serve]'")
CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
TOKEN = "browser-test-token"
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str) -> int | None:
    """The HTTP status of a GET of ``url``, or None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> StoreFixture:
    return build_store(tmp_path_factory.mktemp("serve-browser") / "runs.sqlite")


@pytest.fixture(scope="module")
def server(made: StoreFixture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = (tmp_path_factory.mktemp("serve-log") / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ragbridge.adapters.cli", "serve", str(made.path),
         "--port", str(port), "--token", TOKEN],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while (status := _status(f"{base}/")) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ragbridge serve did not start: {Path(log.name).read_text()}")
            time.sleep(0.1)
        assert status == 401  # up, and asking for the token
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser(CHROMIUM, tmp_path_factory.mktemp("chromium")) as b:
        yield b


@pytest.fixture(scope="module")
def signed_in(browser: Browser, server: str) -> str:
    """The browser holds the token cookie: one visit with ?token=, redirected without it."""
    tab = browser.new_page()
    tab.goto(f"{server}/?token={TOKEN}")
    assert tab.evaluate("location.search") == ""  # the token left the address
    assert tab.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
    assert tab.evaluate("document.querySelectorAll('#runs tbody tr').length") == 3
    tab.call("Page.close")
    return server


@pytest.fixture
def page(browser: Browser, signed_in: str) -> Iterator[Page]:
    tab = browser.new_page()
    tab.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
             deviceScaleFactor=1, mobile=False)  # fmt: skip
    yield tab
    assert tab.console_problems() == []  # no CSP refusal, no error
    assert tab.evaluate("document.body.hasAttribute('data-pwned')") is False
    assert tab.evaluate("typeof window.pwned") == "undefined"
    tab.call("Page.close")


def _url(base: str, path: str, **params: str) -> str:
    return f"{base}{path}?{urlencode(params)}" if params else f"{base}{path}"


def _until(page: Page, check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def _rows(page: Page) -> list[str]:
    ids: list[str] = page.evaluate(
        "Array.from(document.querySelectorAll('#sample-table tbody tr'))"
        ".map(function (tr) { return tr.getAttribute('data-sample'); })"
    )
    return ids


def _after_reload(page: Page, action: Callable[[], None]) -> None:
    """Run ``action`` (which makes the script re-query the table) and wait for the new rows."""
    before = page.evaluate("document.body.getAttribute('data-table-ready')")
    action()
    _until(
        page,
        lambda: page.evaluate("document.body.getAttribute('data-table-ready')") != before,
        "the sample table to reload",
    )


def test_navigation_from_runs_to_a_run_and_a_sample(
    page: Page, signed_in: str, made: StoreFixture
) -> None:
    page.goto(f"{signed_in}/")
    rows = page.evaluate(
        "Array.from(document.querySelectorAll('#runs tbody tr'))"
        ".map(function (tr) { return tr.getAttribute('data-run'); })"
    )
    assert rows == made.runs[::-1]  # newest first, the hostile run id as an attribute value
    page.click(f'#runs tr[data-run="{made.runs[1]}"] a')
    _until(page, lambda: page.evaluate("location.pathname") == "/run", "the run page")
    _until(page, lambda: page.evaluate("document.readyState") == "complete", "the load")
    assert _rows(page) == sorted(made.cand.sample_ids)
    page.click(f"#sample-table tr[data-sample={json.dumps('q007')}] a")
    _until(page, lambda: page.evaluate("location.pathname") == "/sample", "the sample page")
    _until(page, lambda: page.evaluate("document.readyState") == "complete", "the load")
    assert page.evaluate("document.getElementById('sample-id').textContent") == "q007"


def test_search_sort_and_pages_of_the_sample_table(
    page: Page, signed_in: str, made: StoreFixture
) -> None:
    page.goto(_url(signed_in, "/run", id=made.runs[1], limit="10"))
    assert _rows(page) == sorted(made.cand.sample_ids)[:10]

    def search() -> None:
        page.click("#st-q")
        page.type_text("q01")

    _after_reload(page, search)
    assert _rows(page) == [f"q01{i}" for i in range(10)]
    # sort by a column: a real click on its header, twice for descending
    _after_reload(page, lambda: page.click('#sample-table th[data-metric="faithfulness"]'))
    _after_reload(page, lambda: page.click('#sample-table th[data-metric="faithfulness"]'))
    ids, values = made.cand.values("faithfulness")
    wanted = sorted(
        ((-v, s) for s, v in zip(ids, values, strict=True) if s.startswith("q01")),
    )
    assert _rows(page) == [s for _, s in wanted][:10]
    assert "sort=faithfulness" in page.evaluate("location.search")  # the state is in the URL
    # clear the search: 42 samples, pages of 10, the next page by the pager
    page.evaluate("document.getElementById('st-q').value = ''")
    _after_reload(page, lambda: page.evaluate(
        "document.getElementById('st-q').dispatchEvent(new Event('input', {bubbles: true}))"
    ))  # fmt: skip
    everything = sorted((-v, s) for s, v in zip(ids, values, strict=True))
    assert _rows(page) == [s for _, s in everything][:10]
    _after_reload(page, lambda: page.click('#pager a[rel="next"]'))
    assert _rows(page) == [s for _, s in everything][10:20]
    assert page.evaluate("document.getElementById('st-count').textContent").startswith(
        "42 of 42 samples match; showing 11"
    )
    # the hostile id is searchable text, and stays text
    page.evaluate("document.getElementById('st-q').value = 'window.pwned'")
    _after_reload(page, lambda: page.evaluate(
        "document.getElementById('st-q').dispatchEvent(new Event('input', {bubbles: true}))"
    ))  # fmt: skip
    assert _rows(page) == [HOSTILE_ID]
    link = "#sample-table tbody tr a"
    assert page.evaluate(f"document.querySelector('{link}').textContent") == HOSTILE_ID


def test_the_diff_view_shows_compare_and_the_samples_that_moved(
    page: Page, signed_in: str, made: StoreFixture
) -> None:
    page.goto(_url(signed_in, "/compare", a=made.runs[0], b=made.runs[1]))
    expected = compare(made.base, made.cand)
    shown = page.evaluate(
        "Array.from(document.querySelectorAll('#paired tbody tr')).map(function (tr) {"
        "  return [tr.getAttribute('data-metric'), tr.querySelector('.diff').textContent,"
        "          tr.querySelector('.ci').textContent, tr.querySelector('.n-paired').textContent];"
        "})"
    )
    assert shown == [
        [m, f"{c.diff:+.3f}", f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]", str(c.n_paired)]
        for m, c in expected.items()
    ]
    first = page.evaluate(
        "document.querySelector('table.moved[data-metric=\"faithfulness\"] tbody tr')"
        ".getAttribute('data-sample')"
    )
    page.click('table.moved[data-metric="faithfulness"] tbody tr a')
    _until(page, lambda: page.evaluate("location.pathname") == "/sample", "the sample page")
    _until(page, lambda: page.evaluate("document.readyState") == "complete", "the load")
    assert page.evaluate("document.getElementById('sample-id').textContent") == first


def test_trends_mark_the_run_that_changed_a_metric(
    page: Page, signed_in: str, made: StoreFixture
) -> None:
    page.goto(f"{signed_in}/trends")
    marked = page.evaluate(
        "Array.from(document.querySelectorAll("
        "'section[data-metric=\"faithfulness\"] circle.change'))"
        ".map(function (c) { return [c.getAttribute('data-run'), c.getAttribute('class')]; })"
    )
    assert marked == [[made.runs[1], "point change better"]]
    # the chart's marker is drawn (a box), and the table row says the same
    box = page.evaluate(
        "document.querySelector('section[data-metric=\"faithfulness\"] circle.change')"
        ".getBoundingClientRect().width"
    )
    assert box > 0
    row = f'section[data-metric="faithfulness"] tr[data-run="{made.runs[1]}"] .mark'
    assert page.evaluate(f"document.querySelector('{row}').textContent") == "▲"


def test_hostile_pages_run_no_script(page: Page, signed_in: str, made: StoreFixture) -> None:
    for path, params in (
        ("/run", {"id": made.runs[2]}),
        ("/sample", {"run": made.runs[2], "id": HOSTILE[5]}),
        ("/sample", {"run": made.runs[1], "id": HOSTILE_ID}),
        ("/sample", {"run": made.runs[0], "id": HOSTILE_ID}),  # kept texts, reasons, claims
        ("/production", {"days": "0"}),
        ("/", {"source": f"evals/{HOSTILE[5]}.jsonl"}),
    ):
        page.goto(_url(signed_in, path, **params))
    # the page fixture checks: no console problem, no data-pwned, no window.pwned


def test_without_the_cookie_a_new_profile_is_refused(server: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server}/api/runs", timeout=5)
    assert refused.value.code == 401
    request = urllib.request.Request(
        f"{server}/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert len(json.loads(answer.read())) == 3
    assert os.environ.get("RAGBRIDGE_SERVE_TOKEN") is None  # the token came from --token
