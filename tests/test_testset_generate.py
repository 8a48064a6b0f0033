"""`generate_testset` end to end with scripted judges (tests/testset_judge.py) on the handbook.

The scripted judges quote real sentences of the chunk they are shown, and make the mistakes an
LLM makes — a paraphrase passed off as a quote, the same question for two chunks, a "no-answer"
question the corpus answers — so each filter is seen removing exactly what it should.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from testset_judge import (
    Faults,
    UnusableJudge,
    clean_judge,
    handbook_judge,
    paraphrasing_judge,
    scripted_judge,
)

from ragbridge.adapters.demo.handbook import documents
from ragbridge.core.cache.disk import Cache
from ragbridge.core.judging.engine import Price
from ragbridge.core.sample import load_samples, save_samples
from ragbridge.core.testing import HashEmbedder, ScriptedJudge
from ragbridge.core.testset import (
    NO_ANSWER_REFERENCE,
    SourceDocument,
    Testset,
    agenerate_testset,
    estimate_testset,
    generate_testset,
    locate_passage,
)

HANDBOOK = [SourceDocument(d.id, d.text, d.title) for d in documents()]
TEXTS = {d.id: d.text for d in HANDBOOK}


def _run(judge: object, size: int = 50, **kwargs: object) -> Testset:
    kwargs.setdefault("embedder", HashEmbedder())
    return generate_testset(HANDBOOK, size, judge=judge, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def handbook_set() -> tuple[Testset, ScriptedJudge]:
    judge = handbook_judge()
    return _run(judge), judge


def test_the_set_has_the_size_and_the_stated_proportions(
    handbook_set: tuple[Testset, ScriptedJudge],
) -> None:
    (samples, report), _ = handbook_set
    assert len(samples) == 50
    styles = [s.metadata["style"] for s in samples]
    counts = {s: styles.count(s) for s in set(styles)}
    # 5 no-answer (10%, rounded up), 45 split 0.5/0.25/0.25 by largest remainder
    assert counts == {"single": 23, "multi": 11, "reasoning": 11, "no-answer": 5}
    assert report.written == counts
    assert report.shortfall == {}
    assert [s.id for s in samples] == [f"testset-{i:03d}" for i in range(1, 51)]


def test_proportions_follow_the_styles_argument() -> None:
    samples, _report = _run(clean_judge(), 20, styles={"single": 1, "reasoning": 3})
    styles = [s.metadata["style"] for s in samples]
    assert styles.count("no-answer") == 2
    assert (styles.count("single"), styles.count("reasoning"), styles.count("multi")) == (5, 13, 0)


def test_relevance_names_the_chunks_the_question_was_written_from(
    handbook_set: tuple[Testset, ScriptedJudge],
) -> None:
    (samples, _), _ = handbook_set
    for sample in samples:
        if sample.metadata["style"] == "no-answer":
            continue
        source = sample.metadata["source"]
        assert sample.relevance == dict.fromkeys(source, 2)
        assert set(source) <= set(TEXTS)  # unsplit handbook documents: chunk id = document id
        assert len(source) == (2 if sample.metadata["style"] == "multi" else 1)
        assert (
            sample.metadata["kind"]
            == {
                "single": "single-hop",
                "multi": "multi-hop",
                "reasoning": "reasoning",
            }[sample.metadata["style"]]
        )
        # the reference contexts are the sources' own text, one per source chunk
        assert sample.reference_contexts is not None
        assert len(sample.reference_contexts) == len(source)
        for quote, doc_id in zip(sample.reference_contexts, source, strict=True):
            assert quote in TEXTS[doc_id]
        assert sample.answer is None
        assert sample.contexts == []


def test_fake_passages_are_dropped_and_counted(
    handbook_set: tuple[Testset, ScriptedJudge],
) -> None:
    (samples, report), judge = handbook_set
    # Count the judge's paraphrased "quotes" from its own call log.
    fakes = 0
    for call in judge.calls:
        if call.task not in {"testset.single", "testset.reasoning"}:
            continue
        reply = judge.script[call.task](call.messages)  # type: ignore[operator]
        text = call.messages[1]["content"].split("<<<BEGIN TEXT>>>\n", 1)[1].split("\n<<<END")[0]
        fakes += locate_passage(reply["passage"], text) is None
    assert fakes > 0
    assert report.passages_dropped == fakes
    assert report.passages_verified == report.generated - report.passages_dropped - sum(
        1 for c in judge.calls if c.task == "testset.no_answer"
    )
    kept_questions = {s.question for s in samples}
    assert all(s.reference_contexts for s in samples if s.metadata["style"] != "no-answer")
    assert len(kept_questions) == len(samples)


def test_without_fakes_nothing_is_dropped() -> None:
    _, report = _run(scripted_judge(Faults(fake_every=0)))
    assert report.passages_dropped == 0
    _, report = _run(paraphrasing_judge(), 10)
    assert report.passages_verified == 0
    assert report.total == 0


def test_near_duplicates_are_dropped_and_counted(
    handbook_set: tuple[Testset, ScriptedJudge],
) -> None:
    (samples, report), judge = handbook_set
    written = [
        judge.script[c.task](c.messages)["question"]  # type: ignore[operator]
        for c in judge.calls
        if c.task == "testset.single"
    ]
    leave = {q for q in written if q.startswith("How many days of annual leave do")}
    assert len(leave) == 2  # two wordings, so the embedding (not the text) has to catch it
    kept = [s.question for s in samples if s.question in leave]
    assert len(kept) == 1
    assert report.duplicates_dropped >= sum(q in leave for q in written) - 1
    _, clean = _run(scripted_judge(Faults(duplicates=False, fake_every=0, answerable=False)))
    assert clean.duplicates_dropped == 0


def test_the_dedup_threshold_decides(tmp_path: Path) -> None:
    _, strict = _run(clean_judge(), 30, dedup_threshold=0.3)
    _, default = _run(clean_judge(), 30)
    assert strict.duplicates_dropped > default.duplicates_dropped


def test_no_answer_questions_have_their_share_and_empty_relevance(
    handbook_set: tuple[Testset, ScriptedJudge],
) -> None:
    (samples, report), judge = handbook_set
    no_answer = [s for s in samples if s.metadata["style"] == "no-answer"]
    assert len(no_answer) / len(samples) >= 0.1
    assert report.no_answer_share == pytest.approx(0.1)
    for sample in no_answer:
        assert sample.relevance == {}
        assert sample.is_no_answer
        assert sample.reference == NO_ANSWER_REFERENCE
        assert sample.metadata["kind"] == "no-answer"
        assert len(sample.metadata["checked_against"]) == 5
        assert sample.reference_contexts is None
    # Every candidate was checked; the answerable ones were rejected and are not in the set.
    checks = [c for c in judge.calls if c.task == "testset.answerable"]
    assert report.no_answer_checked == len(checks)
    assert report.no_answer_rejected >= 1
    assert report.no_answer_checked - report.no_answer_rejected == len(no_answer)
    assert not any("gym membership" in s.question for s in no_answer)


def test_an_answerable_candidate_is_rejected_by_retrieval_and_the_judge() -> None:
    """The gym question: on topic, thought unanswered, answered by the fitness subsidy."""
    script = dict(clean_judge().script)
    script["testset.no_answer"] = {
        "reason": "a perk people ask about",
        "question": "Does the company offer a gym membership subsidy?",
    }
    judge = ScriptedJudge(script)
    samples, report = _run(judge, 10, max_rounds=1)
    assert report.no_answer_checked == 1
    assert report.no_answer_rejected == 1
    assert [s for s in samples if s.is_no_answer] == []
    assert report.shortfall == {"no-answer": 1}
    check = next(c for c in judge.calls if c.task == "testset.answerable")
    assert "fitness studio" in check.messages[1]["content"]  # retrieval found the answer


def test_the_no_answer_share_is_at_least_the_one_asked_for() -> None:
    for size, share in ((50, 0.1), (25, 0.1), (20, 0.25)):
        samples, _ = _run(clean_judge(), size, no_answer_share=share)
        no_answer = sum(s.is_no_answer for s in samples)
        assert no_answer == math.ceil(size * share)
        assert no_answer / len(samples) >= share


def test_a_rerun_through_the_cache_makes_no_call(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    first_judge = handbook_judge()
    first, report1 = _run(first_judge, 30, cache=str(cache))
    assert report1.judge_calls == len(first_judge.calls) > 0
    second_judge = handbook_judge()
    second, report2 = _run(second_judge, 30, cache=str(cache))
    assert second_judge.calls == []
    assert report2.judge_calls == 0
    assert report2.cached_calls == report1.requests
    assert second == first


def test_an_interrupted_run_resumes_paying_only_for_unfinished_calls(tmp_path: Path) -> None:
    """A run cancelled half-way (what Ctrl-C does to the event loop); the rerun pays only for
    the calls that had not finished, and the set is the one an uninterrupted run writes."""
    cache_path = tmp_path / "cache.sqlite"
    slow = handbook_judge()
    slow.delay = 0.01

    async def interrupted() -> None:
        with Cache(cache_path) as cache:
            task = asyncio.ensure_future(
                agenerate_testset(
                    HANDBOOK, 30, judge=slow, embedder=HashEmbedder(), cache=cache,
                    max_concurrency=4,
                )
            )  # fmt: skip
            while len(slow.calls) < 12:
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(interrupted())
    paid_before = len(slow.calls)
    resumed_judge = handbook_judge()
    resumed, report = _run(resumed_judge, 30, cache=str(cache_path))
    reference_judge = handbook_judge()
    reference, _ = _run(reference_judge, 30)
    assert resumed == reference
    assert len(resumed_judge.calls) < len(reference_judge.calls)
    assert len(resumed_judge.calls) + paid_before >= len(reference_judge.calls)
    assert report.cached_calls > 0


def test_the_same_seed_gives_the_same_set_and_another_seed_another() -> None:
    a, _ = _run(clean_judge(), 20, seed=3)
    b, _ = _run(clean_judge(), 20, seed=3)
    c, _ = _run(clean_judge(), 20, seed=4)
    assert a == b
    assert [s.question for s in a] != [s.question for s in c]


def test_the_estimate_equals_the_calls_of_a_run_with_nothing_dropped() -> None:
    estimate = estimate_testset(HANDBOOK, 50)
    judge = clean_judge()
    _, report = _run(judge, 50)
    assert report.duplicates_dropped == report.passages_dropped == 0
    assert report.no_answer_rejected == 0
    assert estimate.calls == report.requests == len(judge.calls) == 55
    assert estimate.by_template == {
        "testset.single": 23,
        "testset.multi": 11,
        "testset.reasoning": 11,
        "testset.no_answer": 5,
        "testset.answerable": 5,
    }
    assert report.estimate == estimate
    # prompt tokens are approximate (neighbours are not known without embeddings): within 10%
    sent = sum(len(m["content"]) for c in judge.calls for m in c.messages) / 4
    assert estimate.prompt_tokens == pytest.approx(sent, rel=0.1)


def test_the_estimate_bounds_a_run_with_drops_and_sends_nothing() -> None:
    judge = handbook_judge()
    estimate = estimate_testset(HANDBOOK, 50)
    assert judge.calls == []  # the estimate never touches a judge: it has none
    _, report = _run(judge, 50)
    assert estimate.calls < report.requests <= estimate.max_calls == 3 * estimate.calls
    assert estimate.cost(Price(1.0, 2.0), 100) == pytest.approx(
        (estimate.prompt_tokens * 1.0 + estimate.calls * 100 * 2.0) / 1e6
    )


def test_cost_is_reported_at_the_price() -> None:
    _, report = _run(clean_judge(), 10, price=Price(1.0, 4.0))
    assert report.cost_usd == pytest.approx(
        (report.prompt_tokens * 1.0 + report.completion_tokens * 4.0) / 1e6
    )


def test_progress_reaches_its_total() -> None:
    seen: list[tuple[int, int | None]] = []
    _run(handbook_judge(), 20, progress=lambda done, total: seen.append((done, total)))
    done, total = seen[-1]
    assert done == total
    assert all(d <= (t or 0) for d, t in seen)


def test_an_unusable_judge_stops_the_run_with_the_cause() -> None:
    judge = UnusableJudge()
    samples, report = _run(judge, 50)
    assert samples == []
    assert report.aborted is not None
    assert "401 Unauthorized" in report.aborted
    assert judge.calls <= 5  # the breaker's stop_after, not one call per question
    assert report.failed_calls == report.requests


def test_without_a_judge_nothing_starts() -> None:
    with pytest.raises(ValueError, match="needs a judge"):
        generate_testset(HANDBOOK, 10, embedder=HashEmbedder())


def test_long_documents_are_labelled_by_chunk_or_by_document() -> None:
    body = "\n\n".join(
        f"Section {i}. " + " ".join(d.text for d in HANDBOOK[i * 3 : i * 3 + 3]) for i in range(4)
    )
    long_doc = [SourceDocument("manual", body, "Manual")]
    samples, _ = generate_testset(
        long_doc, 8, judge=clean_judge(), embedder=HashEmbedder(), chunk_chars=1500,
        styles={"single": 1},
    )  # fmt: skip
    answerable = [s for s in samples if not s.is_no_answer]
    assert answerable
    for sample in answerable:
        [chunk_id] = sample.relevance or {}
        assert chunk_id.startswith("manual#")
    by_doc, _ = generate_testset(
        long_doc, 8, judge=clean_judge(), embedder=HashEmbedder(), chunk_chars=1500,
        styles={"single": 1}, relevance="document",
    )  # fmt: skip
    assert all(s.relevance == {"manual": 2} for s in by_doc if not s.is_no_answer)


def test_the_output_is_a_valid_samples_file(
    handbook_set: tuple[Testset, ScriptedJudge], tmp_path: Path
) -> None:
    (samples, _), _ = handbook_set
    path = tmp_path / "eval.jsonl"
    save_samples(samples, path)
    assert list(load_samples(path)) == samples


def test_questions_that_lean_on_the_passage_are_dropped() -> None:
    script = dict(clean_judge().script)
    inner = script["testset.single"]

    def leaning(messages: list[dict[str, str]]) -> dict[str, str]:
        reply = dict(inner(messages))  # type: ignore[operator]
        reply["question"] = "According to the passage, " + reply["question"]
        return reply

    script["testset.single"] = leaning
    _, report = _run(ScriptedJudge(script), 10, styles={"single": 1}, max_rounds=1)
    assert report.not_standalone == 9
    assert report.written["single"] == 0


def test_a_failed_call_is_counted_and_replaced() -> None:
    script = dict(clean_judge().script)
    good = script["testset.single"]
    script["testset.single"] = ["not json at all", "still not json", good]  # type: ignore[list-item]
    _, report = _run(ScriptedJudge(script), 10, styles={"single": 1}, max_retries=0)
    assert report.failed_calls >= 1
    assert report.failures.get("parse_error", 0) >= 1
    assert report.shortfall == {}
