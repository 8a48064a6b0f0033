"""``ragbridge serve``'s sample page with what store schema 3 keeps: the sample's question,
answer, reference and contexts, and each metric's reason and claims, all shown as text (the
fixture's payloads in every one of these fields stay inert), and a note when a run kept none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from serve_store import (
    BREAKOUT,
    HANDLER,
    HOSTILE,
    HOSTILE_DETAILS,
    HOSTILE_ID,
    StoreFixture,
    build_store,
    sample_record_of,
)

pytest.importorskip("starlette", reason="the serve extra: pip install '.[serve]'")
from starlette.testclient import TestClient

from ragbridge.adapters.report.markup import esc
from ragbridge.adapters.serve import create_app

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> StoreFixture:
    return build_store(tmp_path_factory.mktemp("serve-details") / "runs.sqlite")


@pytest.fixture(scope="module")
def client(made: StoreFixture) -> Iterator[TestClient]:
    with TestClient(create_app(made.path), base_url=LOCAL) as c:
        yield c


def q(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}"


def test_the_sample_page_shows_texts_contexts_reasons_and_claims(
    client: TestClient, made: StoreFixture
) -> None:
    base = made.runs[0]
    page = client.get(q("/sample", run=base, id=HOSTILE_ID))
    assert page.status_code == 200
    body = page.text
    record = sample_record_of(HOSTILE_ID)
    # every text is there, escaped, and no payload is there raw
    for text in (record["question"], record["answer"], record["reference"]):
        assert esc(text) in body
    for field in ("question", "answer", "reference"):
        assert f'id="{field}"' in body
    assert "Contexts (2)" in body
    for context in record["contexts"]:
        assert esc(context["text"]) in body
        assert esc(context["id"]) in body
    assert 'id="explanations"' in body
    assert f'<p class="reason">{esc(BREAKOUT)}</p>' in body  # the judge's reason
    for claim in HOSTILE_DETAILS["claims"]:  # the claims and their verdicts
        assert esc(json.dumps(claim["claim"], ensure_ascii=False)) in body
        assert esc(json.dumps(claim["verdict"], ensure_ascii=False)) in body
    for payload in (*HOSTILE, HANDLER, BREAKOUT):
        assert payload not in body
    assert body.count("<script") == 1  # the app's own
    assert 'id="no-texts"' not in body


def test_a_failed_cell_shows_its_message_and_an_unkept_sample_says_so(
    client: TestClient, made: StoreFixture
) -> None:
    base, cand, _ = made.runs
    failed = client.get(q("/sample", run=base, id="q005")).text
    assert '<p class="reason">the judge did not answer</p>' in failed
    # the candidate run kept no sample records: the page says where the texts are
    bare = client.get(q("/sample", run=cand, id="q005")).text
    assert 'id="no-texts"' in bare
    assert 'id="question"' not in bare


def test_the_json_api_gives_the_record_and_each_cells_reason_and_details(
    client: TestClient, made: StoreFixture
) -> None:
    base, cand, evil = made.runs
    detail = client.get(q("/api/sample", run=base, id=HOSTILE_ID)).json()
    assert detail["sample"] == sample_record_of(HOSTILE_ID)
    cells = {c["metric"]: c for c in detail["cells"]}
    assert cells["faithfulness"]["reason"] == BREAKOUT
    assert cells["faithfulness"]["details"] == HOSTILE_DETAILS
    assert (cells["recall@5"]["reason"], cells["recall@5"]["details"]) == (None, None)
    assert client.get(q("/api/sample", run=cand, id="q001")).json()["sample"] is None
    # a hand-written cell of the hostile run keeps its reason and details too
    evil_detail = client.get(q("/api/sample", run=evil, id=HANDLER)).json()
    (cell,) = evil_detail["cells"]
    assert (cell["reason"], cell["details"]) == (HANDLER, HOSTILE_DETAILS)
    # an unknown sample is still a 404, before the store's samples are asked
    assert client.get(q("/api/sample", run=base, id="no-such")).status_code == 404
