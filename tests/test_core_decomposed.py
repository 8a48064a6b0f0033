"""Functions of the core that were split into named steps (issue 29: no block above cyclomatic
complexity 25) keep their behaviour: the cases each step decides, pinned here without any
optional framework installed (`minimal_json`'s other tests live with the RAGAS adapter's)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from ragbridge.core.judging.judge import (
    ConnectionRefused,
    JudgeTimeout,
    PermanentJudgeError,
    ProviderUnusable,
    RateLimited,
    ServerError,
    classify_error,
)
from ragbridge.core.monitoring import MonitorStore, RequestRecord, RunRecord
from ragbridge.core.testing import minimal_json

DEFS = {"$defs": {"Leaf": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, {}),
        ({"type": ["null", "string"]}, None),
        ({"type": ["string", "integer"]}, "x"),
        ({"type": "integer", "exclusiveMinimum": 3}, 4),
        ({"type": "number", "minimum": 2.5}, 2.5),
        ({"type": "number", "minimum": -2}, 0.0),
        ({"type": "boolean"}, False),
        ({"const": 7, "type": "string"}, 7),
        ({"enum": ["b", "a"]}, "b"),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, None),
        ({"anyOf": [], "oneOf": [{"type": "boolean"}]}, False),
        ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}, ["x", 0]),
        ({"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 2}, ["x"] * 2),
        ({"properties": {"a": {"type": "string"}, "b": {}}, "required": ["a"]}, {"a": "x"}),
        (
            {
                "allOf": [
                    {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            },
            {"a": "x", "b": 0},
        ),
        ({**DEFS, "$ref": "#/$defs/Leaf"}, {}),
        (
            {
                **DEFS,
                "type": "object",
                "properties": {"l": {"$ref": "#/$defs/Leaf"}},
                "required": ["l"],
            },
            {"l": {}},
        ),
    ],
)
def test_minimal_json_takes_the_first_value_each_keyword_allows(
    schema: dict[str, Any], expected: Any
) -> None:
    assert minimal_json(schema) == expected


def test_minimal_json_refuses_a_recursive_or_foreign_ref() -> None:
    with pytest.raises(ValueError, match="nests too deeply"):
        minimal_json({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"})
    with pytest.raises(ValueError, match="only local"):
        minimal_json({"$ref": "http://example.org/schema"})


class _Http(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status_code = status


class APITimeoutError(Exception):
    pass


def _wrapped(inner: BaseException) -> Exception:
    outer = Exception("request failed")
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("exc", "kind", "cause"),
    [
        (_wrapped(ConnectionRefusedError("[Errno 111]")), ConnectionRefused, "connection refused"),
        (_wrapped(socket.gaierror("Name or service not known")), ProviderUnusable, None),
        (
            ValueError("Request URL is missing an 'http://' or 'https://' protocol"),
            ProviderUnusable,
            None,
        ),
        (APITimeoutError("slow"), JudgeTimeout, "timeout"),
        # a timeout is told apart before its status: a 504 from a gateway that timed out
        (type("GatewayTimeoutError", (_Http,), {})("late", 504), JudgeTimeout, "timeout"),
        (_Http("Too many requests", 429), RateLimited, "429 rate limited"),
        (_Http("insufficient_quota", 429), ProviderUnusable, "429 quota exceeded"),
        (_Http("boom", 503), ServerError, "HTTP 503"),
        (_Http("The model `x` does not exist", 404), ProviderUnusable, "404 unknown model"),
        (_Http("no such path", 404), ProviderUnusable, "404 Not Found"),
        (_Http("prompt too long", 400), PermanentJudgeError, None),
        (ConnectionResetError("reset by peer"), ServerError, "connection lost"),
    ],
)
def test_classify_error_rules_decide_in_order(
    exc: BaseException, kind: type[Exception], cause: str | None
) -> None:
    error = classify_error(exc)
    assert type(error) is kind
    if cause is not None:
        assert error is not None
        assert error.cause == cause


def test_classify_error_says_nothing_of_an_error_it_cannot_read() -> None:
    assert classify_error(KeyError("x")) is None
    assert classify_error(_Http("moved", 301)) is None


def test_monitor_store_listings_filter_by_what_is_given(tmp_path: Path) -> None:
    with MonitorStore(tmp_path / "m.sqlite") as store:
        for i, (ts, pipeline) in enumerate(((10.0, "a"), (11.0, "b"), (12.0, "a"))):
            store.add_request(RequestRecord(request_id=f"r{i}", timestamp=ts, pipeline=pipeline))
            store.add_run(
                RunRecord(
                    run_id=f"run{i}", timestamp=ts, command=("eval", "gate")[i % 2],
                    source=f"s{i % 2}.jsonl",
                )
            )  # fmt: skip

        def ids(**filters: Any) -> list[str]:
            return [r.request_id for r in store.requests(**filters)]

        assert ids() == ["r0", "r1", "r2"]
        assert ids(since=11.0) == ["r1", "r2"]
        assert ids(since=10.0, until=12.0, pipeline="a") == ["r0"]
        assert ids(pipeline="c") == []
        assert [r.run_id for r in store.runs(command="eval")] == ["run0", "run2"]
        assert [r.run_id for r in store.runs(command="eval", source="s1.jsonl")] == []
        assert [r.run_id for r in store.runs(source="s1.jsonl", limit=5)] == ["run1"]
