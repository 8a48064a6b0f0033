"""The held-out split (`ragbridge.core.heldout`): split, lock, check, leaks."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ragbridge.core.heldout import (
    ANSWERABLE,
    NEAR_DUPLICATE,
    NO_ANSWER,
    LockError,
    LockFinding,
    Split,
    SplitLock,
    check_against_lock,
    check_file,
    duplicate_groups,
    find_leaks,
    lock_path_for,
    make_lock,
    problem_lines,
    read_lock,
    read_prompt_file,
    split_paths,
    split_samples,
    stratum,
    write_lock,
)
from ragbridge.core.heldout.leaks import prompt_text, question_terms, similarity
from ragbridge.core.heldout.lock import lock_text, sample_hash
from ragbridge.core.sample import Context, Sample, save_samples

TOPICS = [
    "parental leave", "the travel budget", "remote work", "the dress code", "overtime pay",
    "the pension plan", "company laptops", "the parking garage", "the gym membership",
    "expense reports", "the bonus scheme", "jury duty", "the coffee machine", "badge access",
    "the cafeteria menu", "password resets", "the probation period", "sick notes",
    "the office plants", "conference tickets",
]  # fmt: skip
"""Unrelated subjects: questions about two of them are never near duplicates."""


def _samples(n_answerable: int = 30, n_no_answer: int = 10) -> list[Sample]:
    out: list[Sample] = []
    for i in range(n_answerable + n_no_answer):
        no_answer = i >= n_answerable
        topic = TOPICS[i % len(TOPICS)]
        out.append(
            Sample(
                id=f"q{i}",
                question=f"Question {i}: what does the handbook say about {topic} in year {i}?",
                answer="Something.",
                contexts=[Context(text="A passage.", id="d1")],
                reference=None if no_answer else f"Answer {i}.",
                relevance={} if no_answer else {f"d{i}": 1},
            )
        )
    return out


# --------------------------------------------------------------------------- split


def test_a_split_is_determined_by_the_seed() -> None:
    samples = _samples()
    a = split_samples(samples, 0.5, seed=7)
    b = split_samples(samples, 0.5, seed=7)
    c = split_samples(samples, 0.5, seed=8)
    assert [s.id for s in a.test] == [s.id for s in b.test]
    assert {s.id for s in a.test} != {s.id for s in c.test}
    assert {s.id for s in a.dev} | {s.id for s in a.test} == {s.id for s in samples}
    assert not {s.id for s in a.dev} & {s.id for s in a.test}


def test_a_split_does_not_depend_on_the_order_of_the_lines() -> None:
    samples = _samples()
    shuffled = samples[:]
    random.Random(3).shuffle(shuffled)
    a = split_samples(samples, 0.5, seed=7)
    b = split_samples(shuffled, 0.5, seed=7)
    assert {s.id for s in a.test} == {s.id for s in b.test}
    # each half keeps the input's order
    assert [s.id for s in b.test] == [s.id for s in shuffled if s.id in {t.id for t in b.test}]


@pytest.mark.parametrize(
    ("answerable", "no_answer", "share", "test_answerable", "test_no_answer"),
    [(30, 10, 0.5, 15, 5), (31, 9, 0.5, 16, 5), (45, 15, 0.3, 32, 11), (7, 3, 0.5, 4, 2)],
)
def test_each_half_gets_the_files_share_of_no_answer_questions(
    answerable: int, no_answer: int, share: float, test_answerable: int, test_no_answer: int
) -> None:
    split = split_samples(_samples(answerable, no_answer), share, seed=1)
    counts = split.counts()
    # round(n * (1 - share)) per stratum, a tie going to the test half
    assert counts["test"] == {ANSWERABLE: test_answerable, NO_ANSWER: test_no_answer}
    assert counts["dev"] == {
        ANSWERABLE: answerable - test_answerable,
        NO_ANSWER: no_answer - test_no_answer,
    }
    for half in (split.dev, split.test):
        share_no_answer = sum(s.is_no_answer for s in half) / len(half)
        assert abs(share_no_answer - no_answer / (answerable + no_answer)) < 1.5 / len(half)


def test_strata_follow_the_relevance_contract() -> None:
    assert stratum(Sample(id="a", question="q", relevance={})) == NO_ANSWER
    assert stratum(Sample(id="a", question="q", relevance={"d": 0})) == NO_ANSWER
    assert stratum(Sample(id="a", question="q", relevance={"d": 2})) == ANSWERABLE
    assert stratum(Sample(id="a", question="q")) == ANSWERABLE  # unlabelled


def test_duplicate_questions_land_in_the_same_half() -> None:
    samples = _samples(40, 0)
    samples.append(Sample(id="dup-exact", question=samples[0].question.upper() + "  "))
    samples.append(
        Sample(id="dup-near", question="In year 3, what does the handbook say on the dress code?")
    )
    for seed in range(10):
        split = split_samples(samples, 0.5, seed=seed)
        test = {s.id for s in split.test}
        assert ("q0" in test) == ("dup-exact" in test)
        assert ("q3" in test) == ("dup-near" in test)
        assert sorted(map(sorted, split.duplicate_groups)) == [["dup-exact", "q0"],
                                                               ["dup-near", "q3"]]  # fmt: skip


@pytest.mark.parametrize("share", [0.0, 1.0, -0.1, float("nan")])
def test_a_share_outside_0_1_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="dev share"):
        split_samples(_samples(), share, seed=1)


def test_too_few_samples_and_duplicate_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="too few"):
        split_samples(_samples(1, 0), 0.5, seed=1)
    twice = [*_samples(2, 0), Sample(id="q0", question="again?")]
    with pytest.raises(ValueError, match="duplicate sample id 'q0'"):
        split_samples(twice, 0.5, seed=1)


# --------------------------------------------------------------------------- lock


def _lock(samples: list[Sample] | None = None, seed: int = 7) -> tuple[Split, SplitLock]:
    split = split_samples(samples or _samples(), 0.5, seed=seed)
    when = datetime(2026, 1, 2, tzinfo=timezone.utc)
    lock = make_lock(
        split,
        source="data.jsonl",
        dev_file="data.dev.jsonl",
        test_file="data.test.jsonl",
        near_duplicate=NEAR_DUPLICATE,
        created_at=when,
    )
    return split, lock


def test_a_lock_round_trips_through_its_file(tmp_path: Path) -> None:
    split, lock = _lock()
    path = tmp_path / "data.test.lock.json"
    write_lock(lock, path)
    again = read_lock(path)
    assert again == lock
    assert again.seed == 7
    assert again.sizes == {"dev": len(split.dev), "test": len(split.test)}
    assert again.strata == split.counts()
    assert set(again.test_samples) == {s.id for s in split.test}
    assert again.created_at == "2026-01-02T00:00:00+00:00"
    text = path.read_text()
    # one test sample per line: diffs of a committed lock read well
    assert sum(1 for line in text.splitlines() if '"sha256"' in line) == len(split.test)
    assert json.loads(text)["format"] == "ragbridge-split-lock"


def test_a_lock_without_test_samples_is_still_valid_json() -> None:
    _, lock = _lock()
    empty = lock.model_copy(update={"test_samples": {}})
    assert json.loads(lock_text(empty))["test_samples"] == {}


def test_an_unchanged_test_split_matches_its_lock() -> None:
    split, lock = _lock()
    check = check_against_lock(reversed(split.test), lock)  # line order does not matter
    assert check.ok
    assert check.checked == check.locked == len(split.test)


def test_edits_additions_removals_and_renames_are_found_by_id() -> None:
    split, lock = _lock()
    test = list(split.test)
    a, b, _, d, e = (s.id for s in test[:5])
    test[0] = test[0].model_copy(update={"reference": "A friendlier reference."})
    test[1] = test[1].model_copy(update={"question": test[1].question + " ", "relevance": {}})
    test[2] = test[2].model_copy(update={"answer": "A new answer.", "metadata": {"x": 1}})
    renamed = test[3].model_copy(update={"id": "renamed"})
    test = [t for t in test if t.id not in {d, e}]
    test += [renamed, Sample(id="new", question="An easy new question?")]
    check = check_against_lock(test, lock)
    assert not check.ok
    assert check.findings == (
        LockFinding("edited", a, ("reference",)),
        LockFinding("edited", b, ("question", "relevance")),
        LockFinding("added", "new"),
        LockFinding("removed", e),
        LockFinding("renamed", "renamed", previous_id=d),
    )
    # answer and metadata are the system's output and notes, not the held-out test: c is clean


def test_the_sample_hash_is_canonical() -> None:
    one = Sample(id="x", question="Q?", relevance={"a": 1, "b": 2})
    other = Sample.model_validate_json('{"relevance": {"b": 2, "a": 1}, "question": "Q?", '
                                       '"id": "x", "reference": null}')  # fmt: skip
    assert sample_hash(one) == sample_hash(other)
    assert sample_hash(one) != sample_hash(one.model_copy(update={"question": "Q? "}))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "invalid JSON"),
        ('{"a": 1}', "not a ragbridge split lock"),
        ('{"format": "ragbridge-split-lock", "version": 9}', "format version 9"),
        ('{"format": "ragbridge-split-lock", "version": 1}', "damaged split lock"),
    ],
)
def test_a_bad_lock_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.lock.json"
    path.write_text(text)
    with pytest.raises(LockError, match=message) as info:
        read_lock(path)
    assert str(info.value).startswith(str(path))


# --------------------------------------------------------------------------- leaks


def test_exact_and_near_duplicates_leak_into_dev_and_unrelated_questions_do_not() -> None:
    test = {
        "t-exact": "What is the refund period for damaged items?",
        "t-near": "Can I carry over unused vacation days into the next year?",
        "t-other-item": "What is the refund period for digital items?",
        "t-other-number": "How many days of leave do I get after 5 years?",
        "t-unrelated": "Who approves conference travel?",
    }
    dev = {
        "d1": "what is the REFUND period for damaged items",
        "d2": "Can unused vacation days be carried over to next year?",
        "d3": "How many days of leave do I get after 2 years?",
        "d4": "Where is the parking garage?",
    }
    leaks = find_leaks(test, dev)
    assert [(x.test_id, x.source, x.where, x.kind) for x in leaks] == [
        ("t-exact", "dev", "d1", "exact"),
        ("t-near", "dev", "d2", "near"),
    ]
    assert leaks[1].similarity == 1.0
    assert leaks[1].text == dev["d2"]


def test_the_near_duplicate_rule() -> None:
    def sim(a: str, b: str) -> float:
        return similarity(question_terms(a), question_terms(b))

    base = "What is the refund period for damaged items?"
    assert sim(base, "What's the refund period for items that are damaged?") == 1.0
    assert sim(base, "What is the exact refund period for damaged items?") == 0.8  # one more
    assert sim(base, "What is the refund period for digital items?") == 0.6  # one other
    annual = "How many days of annual leave do employees get?"
    assert sim(annual, "How many days of sick leave do employees get?") < NEAR_DUPLICATE
    # a different number is a different question even with every word shared
    assert find_leaks({"t": "Leave after 2 years for new staff?"},
                      {"d": "Leave after 5 years for new staff?"}) == []  # fmt: skip
    # one or two content words say too little: only an exact match counts
    assert find_leaks({"t": "What is RAG?"}, {"d": "Why RAG?"}) == []
    assert [x.kind for x in find_leaks({"t": "What is RAG?"}, {"d": "what is rag"})] == ["exact"]


def test_a_threshold_of_1_still_finds_rewordings_and_nothing_looser() -> None:
    test = {"t": "What is the exact refund period for damaged items?"}
    dev = {"d": "What is the refund period for damaged items?"}
    assert len(find_leaks(test, dev, threshold=0.8)) == 1
    assert find_leaks(test, dev, threshold=1.0) == []
    with pytest.raises(ValueError, match="threshold"):
        find_leaks(test, dev, threshold=0.0)


def test_test_questions_in_a_markdown_prompt_are_found_with_their_line(tmp_path: Path) -> None:
    prompt = tmp_path / "fewshot.md"
    prompt.write_text(
        "# Answer from the handbook\n\n"
        "Examples:\n"
        "1. Q: What is the refund period for damaged items? A: 30 days.\n"
        "- **User:** can i carry over unused vacation days to the next year\n"
        "Question: who approves expense reports over 500 euros\n"
        "   and how fast?\n"
        "Now answer: {question}\n",
        encoding="utf-8",
    )
    test = {
        "t1": "What is the refund period for damaged items?",
        "t2": "Can unused vacation days be carried over to the next year?",
        "t3": "Who approves expense reports over 500 euros and how fast?",
        "t4": "Where is the parking garage?",
        "t5": "Answer from the handbook?",  # the prompt's own heading: contained, 4 words
        "t6": "Why?",
    }
    leaks = find_leaks(test, None, [read_prompt_file(prompt)])
    found = {x.test_id: (x.where, x.kind) for x in leaks}
    assert found["t1"] == ("line 4", "exact")
    assert found["t2"] == ("line 5", "near")
    assert found["t3"] == ("across lines", "exact")  # contained in the text, over two lines
    assert found["t5"] == ("line 1", "exact")
    assert "t4" not in found
    assert "t6" not in found
    assert all(x.source == str(prompt) for x in leaks)


def test_test_questions_in_json_and_yaml_prompts_are_found(tmp_path: Path) -> None:
    examples = {
        "system": "Answer from the handbook.",
        "examples": [
            {"question": "What is the refund period\nfor damaged items?", "answer": "30 days"},
            {"question": 'Who signs the "travel" form?', "answer": "HR"},
        ],
    }
    (tmp_path / "p.json").write_text(json.dumps(examples), encoding="utf-8")
    (tmp_path / "p.yaml").write_text(
        'examples:\n  - question: "What is the refund period for damaged items?"\n'
        "    answer: 30 days\n",
        encoding="utf-8",
    )
    test = {
        "t1": "What is the refund period for damaged items?",
        "t2": "Who signs the travel form?",
    }
    leaks = find_leaks(test, None, [read_prompt_file(tmp_path / n) for n in ("p.json", "p.yaml")])
    got = [(x.test_id, Path(x.source).name, x.where, x.kind) for x in leaks]
    assert got == [
        ("t1", "p.json", "examples[0].question", "exact"),
        ("t2", "p.json", "examples[1].question", "exact"),
        ("t1", "p.yaml", "line 2", "exact"),
    ]


def test_prompt_candidates_drop_labels_and_markup() -> None:
    text = '> Q: Where is the office?\n* User: "How do I reset my password?",\n'
    found = [c for _, c in prompt_text("p", text).candidates]
    assert found == ["Where is the office?", "How do I reset my password?"]


def test_duplicate_groups_are_transitive_and_independent_of_order() -> None:
    questions = {
        "a": "What is the refund period for damaged items?",
        "b": "What's the refund period for items that are damaged?",
        "c": "What is the exact refund period for damaged items?",
        "d": "Where is the parking garage?",
        "e": "where is the parking garage",
        "f": "Who approves conference travel?",
    }
    groups = duplicate_groups(questions)
    assert groups == [["a", "b", "c"], ["d", "e"]]
    reordered = dict(reversed(list(questions.items())))
    assert sorted(map(sorted, duplicate_groups(reordered))) == [["a", "b", "c"], ["d", "e"]]


# --------------------------------------------------------------------------- files


def test_file_names() -> None:
    assert split_paths("in/data.jsonl") == (
        Path("in/data.dev.jsonl"), Path("in/data.test.jsonl"), Path("in/data.test.lock.json"),
    )  # fmt: skip
    assert split_paths("in/data.jsonl", "out")[1] == Path("out/data.test.jsonl")
    assert lock_path_for("x/data.test.jsonl") == Path("x/data.test.lock.json")
    assert lock_path_for("notes") == Path("notes.lock.json")


def test_check_file_reports_the_lock_and_both_kinds_of_leak(tmp_path: Path) -> None:
    split, lock = _lock()
    dev_path, test_path, lock_path = split_paths(tmp_path / "data.jsonl")
    save_samples(split.dev, dev_path)
    write_lock(lock, lock_path)
    test = list(split.test)
    test[0] = test[0].model_copy(update={"reference": "changed"})
    test[1] = test[1].model_copy(update={"question": split.dev[0].question})  # also edited
    save_samples(test, test_path)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(f"Example: {test[2].question}\n", encoding="utf-8")
    report = check_file(test_path, lock=lock_path, prompt_files=[prompt])
    meta = report.to_metadata()
    assert not report.ok
    assert meta["ok"] is False
    assert meta["counts"] == {"edited": 2, "added": 0, "removed": 0, "renamed": 0,
                              "dev_leaks": 1, "prompt_leaks": 1}  # fmt: skip
    assert meta["dev"] == "checked"
    assert json.loads(json.dumps(meta)) == meta  # goes into a results header as it is
    lines = problem_lines(meta)
    assert lines[0] == (
        f"2 test samples edited since the lock {lock_path}: {test[0].id} (reference), "
        f"{test[1].id} (question)"
    )
    assert lines[1] == (
        f"1 test question also in the dev split {dev_path}: "
        f"{test[1].id} (exact: dev {split.dev[0].id})"
    )
    assert lines[2] == (
        f"1 test question also in the prompt file {prompt}: {test[2].id} (exact: line 1)"
    )


def test_long_lists_are_capped_with_a_count(tmp_path: Path) -> None:
    split, lock = _lock(_samples(200, 0))
    test_path = tmp_path / "data.test.jsonl"
    save_samples([s.model_copy(update={"reference": "x"}) for s in split.test], test_path)
    lock_path = tmp_path / "data.test.lock.json"
    write_lock(lock, lock_path)
    meta = check_file(test_path, lock=lock_path).to_metadata()
    assert meta["counts"]["edited"] == 100
    assert len(meta["edited"]) == 50
    assert meta["dev"] == "missing"
    (line,) = problem_lines(meta)
    assert line.startswith("100 test samples edited since the lock")
    assert line.endswith(", … and 95 more")
