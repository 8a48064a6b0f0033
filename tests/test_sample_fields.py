"""The one field mapping (`ragbridge.core.sample_fields`): a Sample goes out in a framework's
names and comes back unchanged; a bad value is named by record and by the framework's field."""

from __future__ import annotations

from typing import Any

import pytest

from ragbridge.core.sample import Context, Sample
from ragbridge.core.sample_fields import (
    DEEPEVAL_FIELDS,
    RAGAS_FIELDS,
    FieldError,
    FieldNames,
    build_sample,
    extras_of,
    fields_of,
    sample_from_fields,
)

FULL = Sample(
    id="q7",
    question="How many PTO days?",
    answer="25 days.",
    contexts=[
        Context(text="PTO is 25 days.", id="pto-4", score=0.8, metadata={"page": 2}),
        Context(text="VPN setup.", id="vpn-1"),
    ],
    reference="25",
    reference_contexts=["PTO is 25 days."],
    relevance={"pto-4": 2, "vpn-1": 0},
    metadata={"team": "hr"},
)


@pytest.mark.parametrize("names", [RAGAS_FIELDS, DEEPEVAL_FIELDS], ids=["ragas", "deepeval"])
def test_a_sample_goes_out_and_comes_back_the_same(names: FieldNames) -> None:
    values = fields_of(FULL, names)
    back = sample_from_fields(values, names, where="row 0", default_id="x", extras=extras_of(FULL))
    assert back == FULL


def test_without_extras_the_framework_fields_alone_still_make_a_sample() -> None:
    values = fields_of(FULL, RAGAS_FIELDS)
    assert values["retrieved_context_ids"] == ["pto-4", "vpn-1"]
    assert values["reference_context_ids"] == ["pto-4"]  # grade 0 is not relevant
    back = sample_from_fields(values, RAGAS_FIELDS, where="row 0", default_id="row-0")
    assert back.id == "row-0"
    assert [c.id for c in back.contexts] == ["pto-4", "vpn-1"]
    assert back.relevance == {"pto-4": 1}  # the grades needed the extras
    assert back.contexts[0].score is None


def test_context_ids_go_out_only_when_every_context_has_one() -> None:
    partial = FULL.model_copy(update={"contexts": [Context(text="a", id="1"), Context(text="b")]})
    assert fields_of(partial, RAGAS_FIELDS)["retrieved_context_ids"] is None


@pytest.mark.parametrize(
    ("values", "extras", "message"),
    [
        ({"input": 3}, None, "test case 2: input: expected a string, got 3"),
        ({"input": "q", "actual_output": 5}, None, "actual_output: expected a string, got 5"),
        ({"input": "q", "retrieval_context": "one"}, None,
         'retrieval_context: expected a list of strings, got "one"'),
        ({"input": "q", "retrieval_context": ["a", 2]}, None,
         "retrieval_context[1]: expected a string, got 2"),
        ({"input": "q", "retrieval_context": ["a"]}, {"contexts": []},
         "ragbridge.contexts: expected one entry per retrieved context (1), got 0"),
        ({"input": "q", "retrieval_context": ["a"]}, {"contexts": ["x"]},
         "ragbridge.contexts[0]: expected an object"),
        ({"input": "q"}, {"metadata": 3}, "ragbridge.metadata: expected an object"),
        ({"input": "q"}, {"relevance": {"d": "high"}}, 'relevance["d"]: '),
    ],
)  # fmt: skip
def test_a_bad_value_is_named_by_record_and_framework_field(
    values: dict[str, Any], extras: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(FieldError) as info:
        sample_from_fields(
            values, DEEPEVAL_FIELDS, where="test case 2", default_id="x", extras=extras
        )
    assert message in str(info.value)
    assert str(info.value).startswith("test case 2: ")


def test_ids_must_line_up_with_the_contexts_and_with_the_extras() -> None:
    row = {"user_input": "q", "retrieved_contexts": ["a", "b"], "retrieved_context_ids": ["1"]}
    with pytest.raises(FieldError, match=r"retrieved_context_ids: expected one id per retrieved"):
        sample_from_fields(row, RAGAS_FIELDS, where="row 1", default_id="x")
    row["retrieved_context_ids"] = ["1", "2"]
    extras = {"contexts": [{"id": "1"}, {"id": "9"}]}
    with pytest.raises(FieldError, match=r"retrieved_context_ids\[1\]: '2' disagrees with"):
        sample_from_fields(row, RAGAS_FIELDS, where="row 1", default_id="x", extras=extras)


def test_record_metadata_sits_under_the_extras_metadata() -> None:
    sample = sample_from_fields(
        {"input": "q"},
        DEEPEVAL_FIELDS,
        where="w",
        default_id="x",
        extras={"metadata": {"a": 2}},
        metadata={"a": 1, "b": 1},
    )
    assert sample.metadata == {"a": 2, "b": 1}


def test_build_sample_turns_a_validation_error_into_one_named_line() -> None:
    with pytest.raises(FieldError) as info:
        build_sample(where="run 'abc'", id="1", question="q", contexts=[{"text": 5}])
    assert str(info.value) == "run 'abc': contexts[0].text: expected a string, got 5"
    assert info.value.field == "contexts[0].text"


def test_fields_of_refuses_what_is_not_a_sample() -> None:
    with pytest.raises(TypeError, match="expected a ragbridge Sample, got dict"):
        fields_of({"question": "q"}, RAGAS_FIELDS)  # type: ignore[arg-type]
