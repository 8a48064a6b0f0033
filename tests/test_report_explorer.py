"""The report as an explorer, without a browser: the explorer's data block, the paired
comparison, columns only where the run has something to show, the input file's name, the trend
charts and the readable quadrant chart.

What the page's script does with the data is checked in headless Chromium
(tests/test_report_explorer_chromium.py).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest

from ragbridge.adapters.report import render_report, sample_anchor
from ragbridge.adapters.report.markup import json_for_script
from ragbridge.core.monitoring.records import RunRecord
from ragbridge.core.results.evaluation import Evaluation, Score, Usage
from ragbridge.core.results.stats import compare
from ragbridge.core.sample import Context, Sample

BREAKOUT = "</script><script>document.body.setAttribute('data-pwned','1')</script>"
SNEAKY = [
    BREAKOUT,
    "</SCRIPT ><script>alert(1)</script>",
    "<!-- <script>alert(2)</script> -->",
    "a & b < c > d",
    "line\u2028separator\u2029paragraph",
    '"quoted" \\ backslash',
]


class _Scripts(HTMLParser):
    """Each ``<script>``: its attributes and its text as the browser's parser sees it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append((dict(attrs), ""))
            self._open = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = False

    def handle_data(self, data: str) -> None:
        if self._open:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def _scripts(page: str) -> list[tuple[dict[str, str | None], str]]:
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    return parser.scripts


def _data(page: str) -> dict[str, object]:
    blocks = [text for attrs, text in _scripts(page) if attrs.get("id") == "explorer-data"]
    assert len(blocks) == 1
    loaded: dict[str, object] = json.loads(blocks[0])
    return loaded


def _runs() -> tuple[list[Sample], Evaluation, Evaluation]:
    samples = [
        Sample(
            id=f"q{i:02d}",
            question=f"Question number {i}?" if i else BREAKOUT,
            answer=f"Answer {i}" if i != 3 else SNEAKY[2],
            contexts=[Context(text=f"passage {i}", id=f"d{i}")],
            relevance={f"d{i}": 1},
        )
        for i in range(12)
    ]
    a, b = Evaluation(), Evaluation()
    for i, s in enumerate(samples):
        a.add(s.id, "recall@5", Score(value=1.0 if i % 3 else 0.0))
        b.add(s.id, "recall@5", Score(value=1.0 if i % 4 else 0.0))
        a.add(s.id, "faithfulness", Score(value=round(0.5 + i / 40, 3)))
        b.add(s.id, "faithfulness", Score(value=round(0.6 + i / 40, 3)))
        a.add(s.id, "no_answer", Score.skip("the question has an answer"))
        b.add(s.id, "no_answer", Score.skip("the question has an answer"))
    a.add("q05", "answer_relevance", Score.fail("timeout", "judge did not answer"))
    return samples, a, b


# -- the data block ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", SNEAKY)
def test_json_for_script_cannot_end_its_element_and_reads_back(text: str) -> None:
    encoded = json_for_script({"q": text, "list": [text]})
    assert not set(encoded) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(encoded) == {"q": text, "list": [text]}


def test_a_script_end_tag_in_a_question_stays_inside_the_data_block() -> None:
    samples, a, b = _runs()
    page = render_report({"a": a, "b": b}, samples=samples)
    scripts = _scripts(page)
    # the data block and the page's own script, nothing else: the planted one never became one
    assert [attrs for attrs, _ in scripts] == [
        {"type": "application/json", "id": "explorer-data"},
        {},
    ]
    assert page.count("<script") == 2
    assert page.count("</script>") == 2
    assert "data-pwned" not in scripts[1][1]
    data = _data(page)
    rows = data["rows"]
    assert isinstance(rows, list)
    assert rows[0]["q"] == BREAKOUT  # read back exactly, by textContent + JSON.parse
    assert rows[3]["answers"] == [SNEAKY[2]]  # the same answer in both runs: searched once
    assert "\\u003c/script\\u003e" in page


def test_the_data_has_one_row_per_sample_with_cells_in_column_order() -> None:
    samples, a, b = _runs()
    data = _data(render_report({"a": a, "b": b}, samples=samples))
    assert data["pipelines"] == ["a", "b"]
    # no_answer is skipped everywhere: no column. answer_relevance failed once: a column.
    assert data["metrics"] == {
        "a": ["recall@5", "faithfulness", "answer_relevance"],
        "b": ["recall@5", "faithfulness"],
    }
    rows = data["rows"]
    assert isinstance(rows, list)
    assert [r["id"] for r in rows] == [s.id for s in samples]
    q05 = rows[5]
    assert q05["runs"]["a"]["anchor"] == sample_anchor("q05", "a")
    assert q05["runs"]["b"]["anchor"] == sample_anchor("q05", "b")
    assert q05["runs"]["a"]["cells"] == [1.0, 0.625, "failed (timeout)"]
    assert q05["runs"]["b"]["cells"] == [1.0, 0.725]
    assert rows[1]["runs"]["a"]["cells"][2] is None  # not scored on that sample
    assert data["hasQuestions"] is True


def test_without_samples_there_is_no_question_column() -> None:
    _, a, _ = _runs()
    data = _data(render_report(a))
    assert data["hasQuestions"] is False
    assert data["pairs"] == []
    rows = data["rows"]
    assert isinstance(rows, list)
    assert all(r["q"] is None and r["answers"] == [] for r in rows)


def test_a_metric_skipped_everywhere_is_named_not_given_a_column() -> None:
    samples, a, b = _runs()
    page = render_report({"a": a, "b": b}, samples=samples)
    notes = re.findall(r'<p class="muted hidden-metrics">(.*?)</p>', page)
    assert notes == [
        "No column in a for no_answer: skipped on every sample.",
        "No column in b for no_answer: skipped on every sample.",
    ]


# -- the paired comparison ----------------------------------------------------------------------


def test_paired_table_numbers_equal_compare() -> None:
    samples, a, b = _runs()
    page = render_report({"a": a, "b": b}, samples=samples)
    table = re.search(r'<table class="paired" data-a="a" data-b="b">(.*?)</table>', page, re.S)
    assert table is not None
    result = compare(a, b)
    assert list(result) == ["recall@5", "faithfulness", "no_answer"]
    for metric, c in result.items():
        row = re.search(rf'<tr data-metric="{re.escape(metric)}">(.*?)</tr>', table.group(1))
        assert row is not None, metric
        cells = row.group(1)
        assert f'<td class="num n-paired">{c.n_paired}</td>' in cells
        if c.diff is None:
            assert '<td class="num diff">—</td>' in cells
            continue
        assert c.mean_a is not None
        assert c.mean_b is not None
        assert f'<td class="num mean-a">{c.mean_a:.3f}</td>' in cells
        assert f'<td class="num mean-b">{c.mean_b:.3f}</td>' in cells
        assert re.search(rf'<td class="num diff[^"]*">{re.escape(f"{c.diff:+.3f}")}</td>', cells)
        assert f'<td class="num ci">[{c.ci_low:+.3f}, {c.ci_high:+.3f}]</td>' in cells
        assert c.p_value is not None
        shown = "&lt; 0.001" if c.p_value < 0.001 else f"{c.p_value:.3f}"
        assert f'<td class="num p-value">{shown}</td>' in cells
    faith = result["faithfulness"]
    assert faith.diff == pytest.approx(0.1)
    assert faith.ci_low is not None
    assert faith.ci_low > 0
    assert faith.p_value is not None
    assert faith.p_value < 0.001
    assert re.search(r'<tr data-metric="faithfulness">.*class="num diff better"', table.group(1))
    assert "b vs a <span" in page  # as the demo prints it: second vs first


def test_the_explorer_opens_a_pair_on_its_smallest_p_value() -> None:
    samples, a, b = _runs()
    data = _data(render_report({"a": a, "b": b}, samples=samples))
    result = compare(a, b)
    smallest = min((c.p_value, m) for m, c in result.items() if c.p_value is not None)[1]
    assert data["pairs"] == [{"a": "a", "b": "b", "metric": smallest}]
    assert smallest == "faithfulness"


def test_one_run_has_no_paired_section_and_unpaired_runs_say_why() -> None:
    samples, a, _ = _runs()
    single = render_report(a, samples=samples)
    assert 'id="paired"' not in single
    assert '<a href="#paired">' not in single
    other = Evaluation([("elsewhere", "recall@5", Score(value=1.0))])
    page = render_report({"a": a, "z": other})
    assert '<p class="note">Not compared: the two evaluations share no sample id' in page


def test_three_runs_are_each_compared_with_the_first() -> None:
    samples, a, b = _runs()
    page = render_report({"base": a, "b": b, "c": a}, samples=samples)
    assert re.findall(r'<table class="paired" data-a="([^"]+)" data-b="([^"]+)">', page) == [
        ("base", "b"),
        ("base", "c"),
    ]
    data = _data(page)
    pairs = data["pairs"]
    assert isinstance(pairs, list)
    assert [(p["a"], p["b"]) for p in pairs] == [("base", "b"), ("base", "c")]


# -- no empty columns ---------------------------------------------------------------------------


def test_summary_drops_failure_and_usage_columns_when_the_run_has_none() -> None:
    ev = Evaluation([("s1", "recall@5", Score(value=1.0)), ("s2", "recall@5", Score(value=0.0))])
    page = render_report(ev)
    summary = re.search(r'<table class="summary"[^>]*>(.*?)</table>', page, re.S)
    assert summary is not None
    assert "Failures by kind" not in summary.group(1)
    assert "Calls / tokens" not in summary.group(1)
    assert "<th>Source</th>" not in page  # drill-down: no provider, model or prompt
    assert "Reason and verdicts" not in page
    used = Usage(calls=1, prompt_tokens=5, completion_tokens=1)
    ev.add("s3", "faithfulness", Score(value=0.5, usage=used, judge_model="m", reason="ok"))
    ev.add("s4", "faithfulness", Score.fail("timeout", "slow"))
    page = render_report(ev)
    summary = re.search(r'<table class="summary"[^>]*>(.*?)</table>', page, re.S)
    assert summary is not None
    assert "<th>Failures by kind</th>" in summary.group(1)
    assert '<th class="num">Calls / tokens</th>' in summary.group(1)
    assert "<th>Source</th>" in page
    assert "<th>Reason and verdicts</th>" in page


def test_context_table_drops_ids_and_retriever_scores_that_nobody_gave() -> None:
    sample = Sample(id="s", question="q", contexts=[Context(text="one"), Context(text="two")])
    ev = Evaluation([("s", "answer_relevance", Score(value=0.5))])
    page = render_report(ev, samples=[sample])
    table = re.search(r'<table class="contexts">(.*?)</table>', page, re.S)
    assert table is not None
    assert "<th>Id</th>" not in table.group(1)
    assert "Retriever score" not in table.group(1)
    assert "<th>Label</th><th>Text</th>" in table.group(1)


def test_a_drilldown_links_the_same_sample_in_the_other_runs() -> None:
    samples, a, b = _runs()
    page = render_report({"a": a, "b": b}, samples=samples)
    one = page[page.index(f'id="{sample_anchor("q04", "a")}"') :]
    one = one[: one.index("</details>")]
    assert f'The same sample in <a href="#{sample_anchor("q04", "b")}">b</a>.' in one
    assert '<span class="q">Question number 4?</span>' in one


# -- the input file's name ----------------------------------------------------------------------


def test_the_input_file_is_named_in_the_overview() -> None:
    _samples, a, b = _runs()
    page = render_report({"a": a, "b": b}, source={"a": "eval <a>.jsonl", "b": "other.jsonl"})
    assert "<dt>Input file</dt><dd>eval &lt;a&gt;.jsonl</dd>" in page
    assert "<dt>Input file</dt><dd>other.jsonl</dd>" in page
    a.metadata["source"] = "from-metadata.jsonl"
    assert "<dt>Input file</dt><dd>from-metadata.jsonl</dd>" in render_report(a)
    assert "<dt>Input file</dt><dd>given.jsonl</dd>" in render_report(a, source="given.jsonl")
    with pytest.raises(ValueError, match=r"source\['zz'\]: no such pipeline"):
        render_report({"a": a}, source={"zz": "x"})
    with pytest.raises(TypeError, match="source must be a str or a mapping"):
        render_report(a, source=3)  # type: ignore[arg-type]


# -- trends -------------------------------------------------------------------------------------


def _history(n: int = 4) -> list[RunRecord]:
    runs = []
    for i in range(n):
        summary: dict[str, dict[str, object]] = {
            "recall@5": {"mean": 0.7 + i / 20, "ci_low": 0.6 + i / 20, "ci_high": 0.8 + i / 20,
                         "n_scored": 40, "n_failed": 0, "n_skipped": 2},
        }  # fmt: skip
        if i != 1:  # one run did not score faithfulness: the line breaks there
            summary["faithfulness"] = {"mean": 0.9, "ci_low": None, "ci_high": None}
        runs.append(
            RunRecord(
                run_id=f"run-{i}-<x>",
                timestamp=1_800_000_000 + i * 86_400,
                command="eval",
                source="eval.jsonl",
                commit=f"{i:x}" * 40 if i != 2 else None,
                summary=summary,
            )
        )
    return runs[::-1]  # any order: the chart sorts by time


def test_trend_charts_one_per_metric_with_band_points_and_labels() -> None:
    _, a, _ = _runs()
    history = _history()
    page = render_report(a, history=history)
    assert '<a href="#trends">Trends</a>' in page
    section = page[page.index('<section id="trends">') :]
    section = section[: section.index("</section>")]
    svgs = re.findall(r'<svg class="trend" data-metric="([^"]+)"(.*?)</svg>', section, re.S)
    assert [m for m, _ in svgs] == ["recall@5", "faithfulness"]
    recall, faith = (body for _, body in svgs)
    points = re.findall(r'<circle class="run-pt" data-run="([^"]+)" data-mean="([^"]+)"', recall)
    assert [html.unescape(r) for r, _ in points] == [f"run-{i}-<x>" for i in range(4)]
    assert [float(v) for _, v in points] == pytest.approx([0.7, 0.75, 0.8, 0.85])
    assert recall.count('<polygon class="ci-band"') == 1
    assert recall.count('<polyline class="trend-line"') == 1
    # hover values: mean, CI, counts, run id, commit
    assert "recall@5 0.850 [0.750, 0.950] (40 scored, 0 failed, 2 skipped)" in recall
    assert "run run-3-&lt;x&gt;" in recall
    assert "commit 333333333333" in recall
    labels = re.findall(r'<text class="run-label"[^>]*>([^<]+)</text>', recall)
    assert labels == ["0000000", "1111111", "run-2-&lt;x", "3333333"]  # commit, else run id
    # faithfulness: three runs, no CI, the line broken by the run without it
    assert len(re.findall(r'<circle class="run-pt"', faith)) == 3
    assert "ci-band" not in faith
    assert faith.count('<polyline class="trend-line"') == 1  # runs 2-3; run 0 stands alone
    assert "faithfulness — 3 of 4 runs" in section


def test_no_history_no_trends_and_an_empty_one_says_so() -> None:
    _, a, _ = _runs()
    assert 'id="trends"' not in render_report(a)
    empty = render_report(a, history=[])
    assert '<p class="note">The history holds no run yet.</p>' in empty
    with pytest.raises(TypeError, match=r"history\[0\]: expected a RunRecord"):
        render_report(a, history=[{"run_id": "x"}])  # type: ignore[list-item]


# -- the quadrant chart -------------------------------------------------------------------------


def test_samples_at_one_spot_are_spread_and_counted_on_their_side_of_the_threshold() -> None:
    ev = Evaluation()
    for i in range(7):  # seven at recall 1, faithfulness 1 (a corner)
        ev.add(f"top{i}", "recall@5", Score(value=1.0))
        ev.add(f"top{i}", "faithfulness", Score(value=1.0))
    for i in range(4):  # four exactly on the retrieval threshold: good retrieval
        ev.add(f"mid{i}", "recall@5", Score(value=0.5))
        ev.add(f"mid{i}", "faithfulness", Score(value=0.8))
    ev.add("alone", "recall@5", Score(value=0.2))
    ev.add("alone", "faithfulness", Score(value=0.3))
    page = render_report(ev)
    svg = re.search(r'<svg class="quadrants"(.*?)</svg>', page, re.S)
    assert svg is not None
    points = {
        sid: (float(x), float(y))
        for sid, x, y in re.findall(
            r'data-sample="([^"]+)" cx="([\d.]+)" cy="([\d.]+)"', svg.group(1)
        )
    }
    assert len(points) == 12
    assert len(set(points.values())) == 12  # no two points on top of each other

    def px(v: float) -> float:
        return 44 + v * (420 - 2 * 44)

    def py(v: float) -> float:
        return 44 + (1 - v) * (420 - 2 * 44)

    for i in range(7):  # inside the frame: left of x=1, below y=1
        x, y = points[f"top{i}"]
        assert x <= px(1.0) + 1e-9
        assert y >= py(1.0) - 1e-9
    for i in range(4):  # never across the threshold into the bad-retrieval quadrant
        assert points[f"mid{i}"][0] >= px(0.5) - 1e-9
    assert points["alone"] == (px(0.2), py(0.3))
    counts = re.findall(r'<text class="qcount" data-count="(\d+)"[^>]*>\d+<title>([^<]*)', page)
    assert counts == [
        ("7", "7 samples at recall@5 1, faithfulness 1"),
        ("4", "4 samples at recall@5 0.5, faithfulness 0.8"),
    ]
    titles = re.findall(r"<circle[^>]*><title>([^<]*)</title>", svg.group(1))
    assert "mid0: recall@5 0.500, faithfulness 0.800 (good retrieval, good answer)" in titles
