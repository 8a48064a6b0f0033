"""The fast paths of model-free measures at scale give today's cells, bytes and summary.

``ragbridge eval --out`` of cheap measures (ranking, string, context usage) spent most of its
time around the arithmetic: pydantic validation of each Score and of its stamp, the regex
searches of `canonical` on every answer, SQuAD normalisation done twice per text, and a
bootstrap of 2,000 × n draws per metric. Each has a faster path now (`Score.trusted`,
`Score.stamped`, a substring pre-test in `canonical`, a memo of `normalize_answer`, a grouped
bootstrap at large n). The reference here is the run with every one of them switched back to
the code it replaced, one sample at a time and written by `cell_line`: the same bytes (save
``latency_s``, a clock reading) and the same summary.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import ragbridge.adapters.strings as strings
import ragbridge.core.metrics.providers.offline.context_usage as context_usage
import ragbridge.core.results.evaluation as evaluation_module
import ragbridge.core.results.stats as stats
import ragbridge.core.results.writer as writer
import ragbridge.core.scoring.collector as collector
import ragbridge.core.scoring.runner as runner
import ragbridge.core.text.case_blind as case_blind
import ragbridge.core.text.quantities as quantities
from ragbridge.adapters.cli.main import main
from ragbridge.core.results.cell_json import cell_line
from ragbridge.core.results.evaluation import Evaluation, Failure, FailureKind, Score, header_line
from ragbridge.core.results.usage import Usage

words_module = importlib.import_module("ragbridge.core.text.words")  # the package's `words` is
# the function of that name

METRICS = "recall@4,mrr,ndcg@4,token_f1,exact_match,context_usage"

_WORDS = ["leave", "days", "twenty", "May", "the", "a", "Übung", "naïve", "ſix", "metres", "km"]


def _text(rng: random.Random) -> str:
    parts = [rng.choice(_WORDS) for _ in range(rng.randrange(0, 6))]
    if rng.random() < 0.6:
        parts.insert(rng.randrange(len(parts) + 1), str(rng.randrange(0, 3000)))
    if rng.random() < 0.1:
        parts.append("on 12 March 2021, 8,849 m or 3.0 km")
    return " ".join(parts)


def _write(path: Path, n: int, seed: int = 3) -> None:
    """``n`` samples like the benchmark's, with every edge: no answer, no reference, no labels,
    a no-answer query, a context without an id, non-ASCII and number words."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            docs = [rng.randrange(40) for _ in range(5)]
            relevant = rng.choice(docs) if rng.random() < 0.7 else rng.randrange(40)
            row: dict[str, Any] = {
                "id": f"q{i}",
                "question": f"How many days does section {i} give?",
                "contexts": [
                    {"id": f"doc-{d}", "text": f"Passage {d}: " + _text(random.Random(d))}
                    for d in docs
                ],
            }
            if rng.random() < 0.95:
                row["answer"] = f"Section {i} gives {_text(rng)}."
            if rng.random() < 0.9:
                row["reference"] = rng.choice([row.get("answer") or "x", _text(rng) or "y"])
            roll = rng.random()
            if roll < 0.85:
                row["relevance"] = {f"doc-{relevant}": rng.choice([1, 2])}
            elif roll < 0.92:
                row["relevance"] = {}
            if rng.random() < 0.02:
                del row["contexts"][0]["id"]
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _todays_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fast path switched back to the code it replaced."""
    monkeypatch.setattr(runner.Batched, "of", classmethod(lambda cls, metrics, size=None: None))
    monkeypatch.setattr(Score, "trusted", classmethod(lambda cls, **kw: cls(**kw)))
    monkeypatch.setattr(Score, "stamped", lambda self, update: self.model_copy(update=update))
    _canonical_without_fast_paths(monkeypatch)
    monkeypatch.setattr(collector, "rare_full_collections", contextlib.nullcontext)
    monkeypatch.setattr(strings, "normalize_answer", strings.normalize_answer.__wrapped__)
    monkeypatch.setattr(writer, "cell_json", cell_line)
    monkeypatch.setattr(stats, "_GROUPED_MIN_N", 10**12)


def _canonical_without_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """`canonical` with every regex run as it was: no substring pre-test, case-blind patterns
    matched case-blindly, `_UNIT` tried at every position."""
    monkeypatch.setattr(
        quantities, "_found", lambda pattern, text, words: pattern.search(text) is not None
    )
    monkeypatch.setattr(quantities, "_may_hold", lambda text, words: True)
    monkeypatch.setattr(case_blind, "TWINS", False)
    monkeypatch.setattr(quantities, "_AT_DIGIT_RUNS", False)
    monkeypatch.setattr(words_module, "_ASCII_AT_ONCE", False)


_MEMOS = (
    quantities.canonical,
    context_usage._context_words,
    strings.normalize_answer,
    words_module._words,
)


def _clear_memos() -> None:
    for memo in _MEMOS:
        memo.cache_clear()


def _eval(data: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    _clear_memos()
    command = ["eval", str(data), "--metrics", METRICS, "--out", str(out)]
    code = main([*command, "--max-failed-share", "1"])  # the edges fail cells on purpose
    assert code == 0
    said = capsys.readouterr()
    summary = said.out.replace(str(out), "OUT") + said.err
    return re.sub(r'"latency_s": [0-9.e+-]+', '"latency_s": T', out.read_text("utf-8")), summary


def test_a_2000_sample_file_gives_todays_bytes_and_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "eval.jsonl"
    _write(data, 2000)
    now_bytes, now_summary = _eval(data, tmp_path / "now.jsonl", capsys)
    with monkeypatch.context() as patch:
        _todays_code(patch)
        then_bytes, then_summary = _eval(data, tmp_path / "then.jsonl", capsys)
    assert now_bytes.count("\n") == 1 + 2000 * 6
    assert '"failure": {"kind"' in now_bytes  # the edges are hit
    assert '"value": null' in now_bytes
    assert now_bytes == then_bytes
    assert now_summary == then_summary
    assert "context_usage" in now_summary


# -- Score.trusted and Score.stamped ----------------------------------------------------------

_FAILURE = Failure(kind=FailureKind.NO_CLAIMS, message="no words")
_GOOD: list[dict[str, Any]] = [
    {"value": 0.5},
    {"value": 1.0, "details": {"a": [1, 2.5, None, True, "é"], "b": {"c": []}}, "provider": "p"},
    {"value": 0.0, "reason": None, "details": [{"x": 1}], "latency_s": 0.0},
    {"failure": _FAILURE, "details": {"n": 3}},
    {"reason": "does not apply", "provider": "retrieval", "usage": Usage(calls=2)},
]
_CONVERTED: list[dict[str, Any]] = [
    {"value": 1},  # an int value becomes a float
    {"value": 0.5, "details": {"t": (1, 2)}},  # a tuple becomes a list
    {"value": 0.5, "details": {"n": np.float64(0.25)}},  # a numpy number becomes a float
]
_REFUSED: list[dict[str, Any]] = [
    {"value": 1.5},
    {"value": float("nan")},
    {"value": True},
    {"value": 0.5, "failure": _FAILURE},
    {"reason": ""},
    {"value": 0.5, "details": {"x": float("inf")}},
    {"value": 0.5, "details": {1: "a"}},
    {"value": 0.5, "latency_s": -1.0},
    {"value": 0.5, "unknown": 1},
]


@pytest.mark.parametrize("fields", _GOOD + _CONVERTED)
def test_trusted_scores_are_the_validated_ones(fields: dict[str, Any]) -> None:
    made, validated = Score.trusted(**fields), Score(**fields)
    assert made == validated
    assert made.__pydantic_fields_set__ == validated.__pydantic_fields_set__
    assert made.model_dump_json() == validated.model_dump_json()
    assert cell_line("s", "m", made) == cell_line("s", "m", validated)
    with pytest.raises(ValidationError):
        made.value = 0.1  # type: ignore[misc]  # still frozen


@pytest.mark.parametrize("fields", _REFUSED)
def test_trusted_refuses_what_validation_refuses(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Score.trusted(**fields)


@pytest.mark.parametrize(
    "update",
    [
        {"provider": "string", "latency_s": 0.25},
        {"provider": "llm", "judge_model": "m", "prompt_version": "v1"},
        {"latency_s": 3},  # not a float: model_copy's unchecked path, as before
    ],
)
def test_stamped_is_model_copy(update: dict[str, Any]) -> None:
    for fields in _GOOD:
        score = Score(**fields)
        made, copied = score.stamped(update), score.model_copy(update=update)
        assert made == copied
        assert made.__pydantic_fields_set__ == copied.__pydantic_fields_set__
        assert made.model_dump_json() == copied.model_dump_json()


# -- canonical's substring pre-test -----------------------------------------------------------


def test_canonical_pre_test_agrees_with_the_regexes() -> None:
    rng = random.Random(5)
    pool = [*_WORDS, "Twenty-one", "FIRST", "sept.", "Kelvin", "K", "dec", "one", "8", "%"]
    texts = [" ".join(rng.choice(pool) for _ in range(rng.randrange(1, 7))) for _ in range(3000)]
    texts += ["ſix days", "on 3 SEPT 2020", "\u212aelvin"]
    for pattern, words in (
        (quantities._WORDY, quantities._WORDY_WORDS),
        (quantities._MONTHLY, quantities._MONTH_WORDS),
    ):
        for text in texts:
            assert quantities._found(pattern, text, words) == (pattern.search(text) is not None)
    quantities.canonical.cache_clear()
    fast = [quantities.canonical(t) for t in texts]
    quantities.canonical.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        _canonical_without_fast_paths(patch)
        slow = [quantities.canonical(t) for t in texts]
    quantities.canonical.cache_clear()
    assert fast == slow


# -- the grouped bootstrap --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["binary", "ranks", "f1"])
def test_grouped_bootstrap_is_the_bootstrap(kind: str) -> None:
    """At large n, `mean_ci` draws counts per distinct value: the same bootstrap distribution of
    the mean, other random draws. Its bounds agree with resampling the values to within the
    bootstrap's own Monte Carlo error (a few thousandths of the interval's half-width here),
    and a seed still gives one interval."""
    rng = np.random.default_rng(2)
    n = 20_000
    values = {
        "binary": (rng.random(n) < 0.3).astype(float),
        "ranks": rng.choice([0.0, 0.2, 0.25, 1 / 3, 0.5, 1.0], n),
        "f1": np.round(rng.beta(5, 3, n), 2),
    }[kind]
    assert stats._grouped_mean_ci(values, confidence=0.95, n_resamples=2000, seed=0) is not None
    grouped = stats.mean_ci(values)
    resampled = stats.bootstrap_ci(values)
    half = (resampled[1] - resampled[0]) / 2
    assert abs(grouped.low - resampled[0]) < 0.1 * half
    assert abs(grouped.high - resampled[1]) < 0.1 * half
    assert stats.mean_ci(values) == grouped
    assert stats.mean_ci(values, seed=1) != grouped


def test_small_or_continuous_samples_keep_the_resampled_interval() -> None:
    rng = np.random.default_rng(4)
    small = (rng.random(500) < 0.5).astype(float)
    spread = rng.random(20_000)  # every value distinct: counts would cost more than indices
    for values in (small, spread):
        assert stats._grouped_mean_ci(values, confidence=0.95, n_resamples=50, seed=0) is None
    ci = stats.mean_ci(small)
    assert (ci.low, ci.high) == stats.bootstrap_ci(small)


# -- one line encoder -------------------------------------------------------------------------


def test_to_jsonl_writes_through_the_one_fast_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cells = [
        ("s1", "m", Score(value=0.5, details={"x": [1.5, "ü"]}, latency_s=1e-7)),
        ("s2", "m", Score.fail("timeout", "no reply in 30 s", provider="llm")),
        ("s3", "m", Score.skip("n/a", usage=Usage(calls=1, prompt_tokens=9))),
    ]
    ev = Evaluation(cells, metadata={"k": "v"})
    seen: list[str] = []
    real = evaluation_module.cell_json

    def spy(sample_id: str, metric: str, score: Score) -> str:
        seen.append(sample_id)
        return real(sample_id, metric, score)

    monkeypatch.setattr(evaluation_module, "cell_json", spy)
    path = tmp_path / "r.jsonl"
    ev.to_jsonl(path)
    assert seen == ["s1", "s2", "s3"]
    expected = header_line({"k": "v"}) + "".join(cell_line(*cell) for cell in cells)
    assert path.read_text("utf-8") == expected
    assert Evaluation.from_jsonl(path) == ev


# -- token F1's common count -----------------------------------------------------------------


def test_token_f1_common_count_is_the_counter_intersection() -> None:
    from collections import Counter

    rng = random.Random(7)
    vocabulary = ["a", "b", "c", "d", "é", "29", "days"]
    for _ in range(5000):
        pred = [rng.choice(vocabulary) for _ in range(rng.randrange(0, 9))]
        gold = [rng.choice(vocabulary) for _ in range(rng.randrange(0, 9))]
        expected = sum((Counter(pred) & Counter(gold)).values())
        assert strings._common(pred, gold) == expected


# -- ranking cells read their values as Python floats ------------------------------------------


def test_ranking_cells_hold_the_kernels_values_bit_for_bit() -> None:
    """`_ranking_cells` reads each measure's column with one ``tolist()``: the values are the
    ``float(values[m][i])`` of `evaluate_run`'s arrays, to the last bit."""
    from ragbridge.core.retrieval.compute import evaluate_run
    from ragbridge.core.retrieval.measures import parse_measures
    from ragbridge.core.retrieval.per_sample import ranking_rows
    from ragbridge.core.retrieval.ranking import Qrels, Run
    from ragbridge.core.sample import Context, Sample

    rng = random.Random(11)
    samples = []
    for i in range(300):
        docs = list(dict.fromkeys(f"d{rng.randrange(30)}" for _ in range(8)))
        labels = {f"d{rng.randrange(30)}": rng.choice([1, 2, 3]) for _ in range(3)}
        samples.append(
            Sample(
                id=f"q{i}",
                question="q",
                contexts=[Context(id=d, text=d) for d in docs],
                relevance=labels,
            )
        )
    measures = parse_measures(["recall@4", "mrr", "ndcg@4", "precision@3", "average_precision"])
    rows = ranking_rows(samples, measures)
    result = evaluate_run(
        Qrels({s.id: s.relevance or {} for s in samples}),
        Run({s.id: [c.id or "" for c in s.contexts] for s in samples}),
        measures,
    )
    row_of = {qid: i for i, qid in enumerate(result.qids)}
    by_name = {m.name: m for m in measures}
    assert len(rows) == 300 * len(measures)
    for sample_id, name, score in rows:
        expected = float(result.values[by_name[name]][row_of[sample_id]])
        assert score.value is not None
        assert score.value.hex() == min(1.0, max(0.0, expected)).hex()
