"""The report's sample explorer in a real headless Chromium: sort, filter, search, open a
sample, diff two runs, trends; no console error; planted scripts stay text.

Runs where a Chromium binary exists (Debian: ``apt-get install -y chromium``; or
``RAGBRIDGE_CHROMIUM=/path/to/chromium``), skipped with that advice elsewhere. The browser is
driven through the DevTools protocol (`_chromium`, standard library only) with real mouse clicks
on the column headers, rows and links, and real typing into the search box. Every expected
order, count and number is computed here in Python from the same evaluations (the differences
from `ragbridge.core.results.stats.compare`), not read back from the page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _chromium import SKIP_REASON, Browser, Page, find_chromium

from ragbridge.adapters.report import sample_anchor, write_report
from ragbridge.core.monitoring.records import RunRecord
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import compare
from ragbridge.core.sample import Context, Sample

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

BREAKOUT = (
    "</script><script>document.body.setAttribute('data-pwned','1'); window.pwned = 1</script>"
    "Is this <b>bold</b>?"
)
HANDLER = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2'); window.pwned = 2\">"
HOSTILE_ID = "evil\"'</script><script>window.pwned = 3</script>"
METRICS = ("recall@5", "faithfulness", "answer_relevance")


def _samples() -> list[Sample]:
    topics = ["annual leave", "sick leave", "laptops", "travel", "pension", "parental leave"]
    out = [
        Sample(
            id=f"s{i:02d}",
            question=f"What is the rule on {topics[i % len(topics)]} for case {i}?",
            answer=f"The rule for case {i} is {i}.",
            contexts=[Context(text=f"Case {i}: rule {i}.", id=f"d{i}")],
            relevance={f"d{i}": 1},
        )
        for i in range(10)
    ]
    out.append(Sample(id=HOSTILE_ID, question=BREAKOUT, answer=HANDLER, contexts=[]))
    return out


def _runs() -> dict[str, Evaluation]:
    base, cand = Evaluation(), Evaluation()
    for i, s in enumerate(_samples()):
        base.add(s.id, "recall@5", Score(value=[1.0, 0.0, 0.5][i % 3]))
        cand.add(s.id, "recall@5", Score(value=[1.0, 0.5, 0.5][i % 3]))
        if i == 3:
            base.add(s.id, "faithfulness", Score.fail("timeout", "judge did not answer"))
        elif i == 4:
            base.add(s.id, "faithfulness", Score.skip("abstained"))
        else:
            base.add(s.id, "faithfulness", Score(value=round((i * 37 % 11) / 10, 2)))
        cand.add(s.id, "faithfulness", Score(value=round(min(1.0, (i * 37 % 11) / 10 + 0.1), 2)))
        base.add(s.id, "answer_relevance", Score(value=round(0.3 + i / 20, 3)))
        cand.add(s.id, "answer_relevance", Score(value=round(0.3 + i / 20, 3)))
    return {"baseline": base, "candidate": cand}


def _history() -> list[RunRecord]:
    return [
        RunRecord(
            run_id=f"run-{i}",
            timestamp=1_800_000_000 + 3600 * i,
            command="eval",
            commit=f"{i}abcdef0123",
            summary={m: {"mean": 0.5 + i / 20, "ci_low": 0.4, "ci_high": 0.9} for m in METRICS},
        )
        for i in range(5)
    ]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser(CHROMIUM, tmp_path_factory.mktemp("chromium")) as b:
        yield b


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(
        tmp_path_factory.mktemp("report") / "report.html",
        _runs(),
        samples=_samples(),
        history=_history(),
        source="eval.jsonl",
        title="Explorer check",
    )


@pytest.fixture
def page(browser: Browser, report: Path) -> Iterator[Page]:
    tab = browser.new_page()
    tab.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    tab.goto(report.as_uri())
    yield tab
    # whatever the test did, the page logged nothing and no planted script or handler ran
    assert tab.console_problems() == []
    assert tab.evaluate("document.body.hasAttribute('data-pwned')") is False
    assert tab.evaluate("typeof window.pwned") == "undefined"
    tab.call("Page.close")


def _rows(page: Page) -> list[str]:
    ids: list[str] = page.evaluate(
        "Array.from(document.querySelectorAll('#ex-table tbody tr'))"
        ".map(function (tr) { return tr.getAttribute('data-sample'); })"
    )
    return ids


def _column(page: Page, key: str) -> list[str]:
    cells = f"#ex-table tbody td[data-column={json.dumps(key)}]"
    texts: list[str] = page.evaluate(
        f"Array.from(document.querySelectorAll({json.dumps(cells)}))"
        ".map(function (td) { return td.textContent; })"
    )
    return texts


def _choose(page: Page, select: str, value: str) -> None:
    """Pick an option as a user would: the value changes, then a change event."""
    page.evaluate(
        f"(function () {{ var s = document.getElementById({json.dumps(select)});"
        f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
    )


def _sort_key(value: Any) -> tuple[int, float]:
    return (0, value) if isinstance(value, float) else (1, 0.0)


def _cell(ev: Evaluation, sid: str, metric: str) -> float | str | None:
    score = ev.get(sid, metric)
    if score is None:
        return None
    if score.failure is not None:
        return "failed"
    return "skipped" if score.value is None else score.value


def test_sort_by_a_metric_both_ways(page: Page) -> None:
    runs = _runs()
    ids = [s.id for s in _samples()]
    _choose(page, "ex-view", "run:0")
    assert _rows(page) == ids  # the file's order until a header is clicked
    header = '#ex-table th[data-column="faithfulness"]'
    page.click(f"{header} button")
    cells = {sid: _cell(runs["baseline"], sid, "faithfulness") for sid in ids}
    ascending = sorted(ids, key=lambda sid: _sort_key(cells[sid]))  # stable: ties keep order
    assert _rows(page) == ascending
    assert page.evaluate(f"document.querySelector('{header}').getAttribute('aria-sort')") == (
        "ascending"
    )
    shown = _column(page, "faithfulness")
    assert shown[-2:] == ["failed", "skipped"]  # never sorted in as low scores
    page.click(f"{header} button")
    numbered = [sid for sid in ids if isinstance(cells[sid], float)]
    descending = sorted(numbered, key=lambda sid: -float(cells[sid] or 0))
    assert _rows(page)[: len(numbered)] == descending
    assert _rows(page)[len(numbered) :] == ["s03", "s04"]  # still last
    assert page.evaluate(f"document.querySelector('{header}').getAttribute('aria-sort')") == (
        "descending"
    )
    others = page.evaluate(
        "Array.from(document.querySelectorAll('#ex-table th[aria-sort=\"none\"]')).length"
    )
    assert others == 2 + len(METRICS) - 1


def test_filter_by_status_and_range_and_search(page: Page) -> None:
    runs = _runs()
    base = runs["baseline"]
    samples = _samples()
    _choose(page, "ex-view", "run:0")
    _choose(page, "ex-status", "failed")
    assert _rows(page) == ["s03"]
    assert page.evaluate("document.getElementById('ex-count').textContent") == (
        f"Showing 1 of {len(samples)} samples"
    )
    _choose(page, "ex-status", "skipped")
    assert _rows(page) == ["s04"]
    _choose(page, "ex-status", "all")
    _choose(page, "ex-range-col", "3")  # Id, Question, recall@5, faithfulness
    page.click("#ex-min")
    page.type_text("0.5")
    page.click("#ex-max")
    page.type_text("0.8")
    expected = [
        s.id
        for s in samples
        if isinstance(v := _cell(base, s.id, "faithfulness"), float) and 0.5 <= v <= 0.8
    ]
    assert 0 < len(expected) < len(samples)
    assert _rows(page) == expected
    page.click("#ex-reset")
    assert len(_rows(page)) == len(samples)
    page.click("#ex-search")
    page.type_text("LEAVE")
    leave = [s.id for s in samples if "leave" in s.question.lower()]
    assert _rows(page) == leave
    page.click("#ex-reset")
    page.click("#ex-search")
    page.type_text("window.pwned = 2")  # the hostile answer is searchable text
    assert _rows(page) == [HOSTILE_ID]


def test_a_row_opens_its_sample_and_a_pair_row_opens_both_runs(page: Page) -> None:
    _choose(page, "ex-view", "run:1")
    anchor = sample_anchor("s05", "candidate")
    assert page.evaluate(f"document.getElementById('{anchor}').open") is False
    page.click('#ex-table tbody tr[data-sample="s05"] td[data-column="question"]')
    assert page.evaluate("window.location.hash") == f"#{anchor}"
    assert page.evaluate(f"document.getElementById('{anchor}').open") is True
    top = page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")
    assert -1 <= top < page.evaluate("window.innerHeight")  # scrolled into view
    # the drill-down's content: the full question and the sample's scores
    assert page.evaluate(f"document.querySelector('#{anchor} .text').textContent") == next(
        s.question for s in _samples() if s.id == "s05"
    )
    _choose(page, "ex-view", "pair:0")
    page.click('#ex-table tbody tr[data-sample="s07"] td[data-column="diff"]')
    for run in ("baseline", "candidate"):
        assert page.evaluate(f"document.getElementById('{sample_anchor('s07', run)}').open")
    assert page.evaluate("window.location.hash") == f"#{sample_anchor('s07', 'baseline')}"


def test_two_runs_side_by_side_with_paired_differences(page: Page) -> None:
    runs = _runs()
    base, cand = runs["baseline"], runs["candidate"]
    result = compare(base, cand)
    # the paired table: compare()'s numbers, as the demo prints them
    head = page.evaluate(
        "Array.from(document.querySelectorAll('table.paired th')).map(function (th) {"
        " return th.textContent; })"
    )
    assert head == [
        "Metric", "Pairs", "Unpaired", "baseline", "candidate", "Diff", "95% CI", "p-value", "",
    ]  # fmt: skip
    for metric, c in result.items():
        row = f'table.paired tr[data-metric="{metric}"]'
        cells = page.evaluate(
            f"Array.from(document.querySelectorAll('{row} td')).map(function (td) {{"
            " return td.textContent; })"
        )
        assert c.mean_a is not None
        assert c.mean_b is not None
        assert c.diff is not None
        assert c.p_value is not None
        assert cells == [
            metric,
            str(c.n_paired),
            str(c.n_unpaired),
            f"{c.mean_a:.3f}",
            f"{c.mean_b:.3f}",
            f"{c.diff:+.3f}",
            f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]",
            "< 0.001" if c.p_value < 0.001 else f"{c.p_value:.3f}",
            "per question",
        ]
    assert result["faithfulness"].n_unpaired == 2  # failed and skipped in the baseline
    # the explorer opens on the pair, on the metric with the smallest p-value
    assert page.evaluate("document.getElementById('ex-view').value") == "pair:0"
    smallest = min((c.p_value or 1.0, m) for m, c in result.items())[1]
    assert page.evaluate("document.getElementById('ex-metric').value") == smallest
    ids = [s.id for s in _samples()]
    for metric in METRICS:
        _choose(page, "ex-metric", metric)
        a = [_cell(base, sid, metric) for sid in ids]
        b = [_cell(cand, sid, metric) for sid in ids]
        assert _column(page, "a") == [f"{v:.3f}" if isinstance(v, float) else v for v in a]
        assert _column(page, "b") == [f"{v:.3f}" for v in b]  # type: ignore[str-format]
        diffs = [
            y - x if isinstance(x, float) and isinstance(y, float) else None
            for x, y in zip(a, b, strict=True)
        ]
        assert _column(page, "diff") == ["—" if d is None else f"{d:+.3f}" for d in diffs]
        # the per-question differences average to the paired difference
        paired = [d for d in diffs if d is not None]
        assert sum(paired) / len(paired) == pytest.approx(result[metric].diff)
    # only the questions the runs scored differently
    _choose(page, "ex-metric", "recall@5")
    _choose(page, "ex-status", "changed")
    changed = [sid for sid in ids if _cell(base, sid, "recall@5") != _cell(cand, sid, "recall@5")]
    assert _rows(page) == changed
    assert (
        page.evaluate(
            "document.querySelector('#ex-table tbody td[data-column=\"diff\"]').className"
        )
        == "num better"
    )
    # a "per question" link of the paired table switches the explorer to that metric
    page.click('table.paired a.per-question[data-metric="answer_relevance"]')
    assert page.evaluate("document.getElementById('ex-metric').value") == "answer_relevance"
    assert page.evaluate("window.location.hash") == "#explorer"


def test_trend_charts_and_the_readable_quadrant_chart(page: Page) -> None:
    assert page.evaluate("document.querySelectorAll('svg.trend').length") == len(METRICS)
    assert page.evaluate("document.querySelectorAll('svg.trend circle.run-pt').length") == 15
    title = page.evaluate(
        'document.querySelector(\'svg.trend[data-metric="recall@5"] circle.run-pt:last-of-type'
        " title').textContent"
    )
    assert title.startswith("recall@5 0.700 [0.400, 0.900]")
    assert "run run-4" in title
    assert "commit 4abcdef0123" in title
    points = page.evaluate(
        'Array.from(document.querySelectorAll(\'svg.quadrants[data-pipeline="baseline"]'
        " circle.pt')).map(function (c) { return c.getAttribute('cx') + ',' +"
        " c.getAttribute('cy'); })"
    )
    assert len(points) == len(set(points)) > 0  # no two samples drawn on one spot
    assert page.evaluate("document.querySelectorAll('svg.quadrants text.qcount').length") > 0
    assert "Input file" in page.evaluate("document.getElementById('overview').textContent")


def test_planted_markup_stays_text(page: Page) -> None:
    assert page.evaluate("document.querySelectorAll('script').length") == 2
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    _choose(page, "ex-view", "run:0")
    row = f"#ex-table tbody tr[data-sample={json.dumps(HOSTILE_ID)}]"
    assert page.evaluate(f"document.querySelector({json.dumps(row)}) !== null")
    question = page.evaluate(
        f"document.querySelector({json.dumps(row + ' td[data-column=question]')}).textContent"
    )
    assert question == BREAKOUT
    page.click(row + " td[data-column=question]")
    anchor = sample_anchor(HOSTILE_ID, "baseline")
    assert page.evaluate(f"document.getElementById('{anchor}').open") is True
    texts = page.evaluate(
        f"Array.from(document.querySelectorAll('#{anchor} .text')).map(function (d) {{"
        " return d.textContent; })"
    )
    assert texts[:2] == [BREAKOUT, HANDLER]
