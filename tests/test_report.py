"""The self-contained HTML report: sections, numbers, escaping, no network, well-formed HTML."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ragbridge.adapters.report import (
    histogram_counts,
    render_report,
    sample_anchor,
    write_report,
)
from ragbridge.core.results.crosscheck import Skipped, compare_frameworks
from ragbridge.core.results.diagnosis import Quadrant, diagnose
from ragbridge.core.results.evaluation import Evaluation, Score, Usage
from ragbridge.core.sample import Context, Sample
from ragbridge.core.scoring.scorer import Scorer
from ragbridge.core.testing import CountingJudge

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "</details>",
]
HOSTILE_ID = '"><script>alert("id")</script>'
WHEN = datetime(2026, 11, 22, 4, 30, tzinfo=timezone.utc)


def _samples() -> list[Sample]:
    return [
        Sample(
            id="good",
            question="What is the capital of France?",
            answer="Paris is the capital of France.",
            contexts=[
                Context(
                    text="Paris is the capital and largest city of France.", id="d1", score=0.9
                ),
                Context(text="Lyon is a city in France.", id="d2", score=0.4),
            ],
            reference="Paris",
            relevance={"d1": 2},
        ),
        Sample(
            id="danger",
            question="Who wrote Faust?",
            answer="Goethe wrote Faust.",
            contexts=[Context(text="Schiller wrote plays.", id="d9", score=0.3)],
            reference="Goethe",
            relevance={"d7": 1},
        ),
        Sample(
            id=HOSTILE_ID,
            question="Hostile <b>question</b>?",
            answer="An answer & more </details>",
            contexts=[Context(text=t, id=f"h{i}") for i, t in enumerate(HOSTILE)],
            relevance={"h0": 1},
        ),
        Sample(id="lost", question="Where is the lost sample?", answer=None, relevance=None),
    ]


def _claims(*verdicts: str) -> dict[str, object]:
    return {
        "claims": [
            {"claim": f"claim {i} <i>x</i>", "verdict": v, "reason": f"because {v}"}
            for i, v in enumerate(verdicts)
        ],
        "supported": verdicts.count("supported"),
        "total": len(verdicts),
    }


def _evaluation(shift: float = 0.0, name: str = "judge-a") -> Evaluation:
    ev = Evaluation(
        metadata={"judge_model": name, "embedding_model": "hash-embed", "cost_usd": 0.0123}
    )
    use = Usage(calls=2, prompt_tokens=100, completion_tokens=20)
    ev.add("good", "recall@5", Score(value=1.0))
    ev.add(
        "good",
        "faithfulness",
        Score(
            value=1.0 - shift,
            reason="all claims supported",
            details=_claims("supported", "supported"),
            judge_model=name,
            usage=use,
        ),
    )
    ev.add("good", "answer_relevance", Score(value=0.8, usage=use))
    ev.add("danger", "recall@5", Score(value=0.0))
    ev.add(
        "danger",
        "faithfulness",
        Score(value=0.9, reason="looks fine", details=_claims("supported"), usage=use),
    )
    ev.add("danger", "answer_relevance", Score(value=0.55 + shift, usage=use))
    ev.add(HOSTILE_ID, "recall@5", Score(value=0.25))
    ev.add(
        HOSTILE_ID,
        "faithfulness",
        Score(
            value=0.5,
            reason=HOSTILE[0],
            details=_claims("supported", "unsupported"),
            usage=use,
        ),
    )
    ev.add(
        HOSTILE_ID,
        "answer_relevance",
        Score.fail("parse_error", "judge replied <script>alert(2)</script>"),
    )
    ev.add("lost", "recall@5", Score.skip("no relevance labels"))
    ev.add("lost", "faithfulness", Score.fail("timeout", "judge did not answer in 30 s"))
    ev.add("lost", "answer_relevance", Score(value=0.1))
    return ev


class _Tags(HTMLParser):
    """Counts start/end tags and records every attribute and every script body."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.attrs: list[tuple[str, str, str | None]] = []
        self.ids: list[str] = []
        self.scripts: list[str] = []
        self.script_types: list[str | None] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] += 1
        for key, value in attrs:
            self.attrs.append((tag, key, value))
            if key == "id" and value is not None:
                self.ids.append(value)
        self._in_script = tag == "script"
        if tag == "script":
            self.script_types.append(dict(attrs).get("type"))
            self.scripts.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.ends[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] += 1
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture
def page() -> str:
    a, b = _evaluation(0.0, "judge-a"), _evaluation(0.3, "judge-b")
    comparison = compare_frameworks(
        {"ragbridge": a, "other <fw>": b},
        skipped=[Skipped(framework="deepeval", measure="recall@5", reason="needs <labels>")],
        judge_model="judge-a",
        notes=["note with <b>markup</b>"],
    )
    return render_report(
        {"langchain": a, "llamaindex": b},
        samples=_samples(),
        comparison=comparison,
        title="My <report>",
        generated_by="ci & me",
        generated_at=WHEN,
    )


def test_every_section_is_there(page: str) -> None:
    tags = _parse(page)
    for section in (
        "overview", "summary", "paired", "explorer", "distributions", "quadrants", "comparison",
        "samples",
    ):  # fmt: skip
        assert section in tags.ids, section
        assert f'<section id="{section}">' in page
    assert "<title>My &lt;report&gt;</title>" in page
    assert "<h1>My &lt;report&gt;</h1>" in page
    assert "Generated 2026-11-22 04:30 UTC by ci &amp; me." in page
    # header metadata: judge model, embedding model, samples, usage, cost
    assert "<dt>Judge model</dt><dd>judge-a</dd>" in page
    assert "<dt>Judge model</dt><dd>judge-b</dd>" in page
    assert "<dt>Embedding model</dt><dd>hash-embed</dd>" in page
    assert "<dt>Samples</dt><dd>4</dd>" in page
    usage = _evaluation().usage()
    assert usage.calls == 10
    assert f"<dt>Judge calls</dt><dd>{usage.calls} (0 from cache)</dd>" in page
    assert "<dt>Tokens</dt><dd>500 prompt + 100 completion = 600</dd>" in page
    assert "<dt>Cost</dt><dd>$0.0123</dd>" in page
    assert "Side by side" in page
    assert 'id="trends"' not in page  # no history given
    assert "Input file" not in page  # no source given


def test_summary_numbers_equal_evaluation_summary(page: str) -> None:
    for pipeline, shift in (("langchain", 0.0), ("llamaindex", 0.3)):
        summary = _evaluation(shift).summary()
        table = re.search(
            rf'<table class="summary" data-pipeline="{pipeline}">(.*?)</table>', page, re.S
        )
        assert table is not None
        for metric, s in summary.items():
            row = re.search(rf'<tr data-metric="{re.escape(metric)}">(.*?)</tr>', table.group(1))
            assert row is not None, metric
            cells = row.group(1)
            assert f'<td class="num mean">{s.mean:.3f}</td>' in cells
            assert f"[{s.ci_low:.3f}, {s.ci_high:.3f}]</td>" in cells
            assert f'<td class="num scored">{s.n_scored}</td>' in cells
            assert f'<td class="num failed">{s.n_failed}</td>' in cells
            assert f'<td class="num skipped">{s.n_skipped}</td>' in cells
    s = _evaluation().summary()
    assert s["faithfulness"].failures_by_kind == {"timeout": 1}
    assert s["answer_relevance"].failures_by_kind == {"parse_error": 1}
    assert '<td class="kinds">timeout 1</td>' in page
    assert '<td class="kinds">parse_error 1</td>' in page
    assert s["recall@5"].n_skipped == 1


def test_histograms_count_scored_values_per_bin(page: str) -> None:
    assert histogram_counts([0.0, 0.05, 0.1, 0.3, 0.55, 0.99, 1.0]) == [
        2,
        1,
        0,
        1,
        0,
        1,
        0,
        0,
        0,
        2,
    ]
    tags = _parse(page)
    svgs = [v for t, k, v in tags.attrs if t == "svg" and k == "class"]
    assert svgs.count("histogram") == 3  # one per metric, both pipelines in each
    bars = re.findall(
        r'<rect class="bar" data-pipeline="langchain" data-bin="(\d)" data-count="(\d+)"',
        page,
    )
    by_bin: dict[str, dict[int, int]] = {}
    # bars come metric by metric, 10 per pipeline, in evaluation.metrics order
    for i, metric in enumerate(_evaluation().metrics):
        by_bin[metric] = {int(b): int(c) for b, c in bars[10 * i : 10 * i + 10]}
    ev = _evaluation()
    for metric in ev.metrics:
        _, vals = ev.values(metric)
        expected = histogram_counts(list(vals))
        assert [by_bin[metric][i] for i in range(10)] == expected, metric
    assert by_bin["recall@5"] == {0: 1, 1: 0, 2: 1, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0, 8: 0, 9: 1}


def test_quadrant_chart_has_one_point_per_diagnosed_sample(page: str) -> None:
    for pipeline, shift in (("langchain", 0.0), ("llamaindex", 0.3)):
        diag = diagnose(_evaluation(shift))
        assert diag.retrieval_metric == "recall@5"
        assert diag.generation_metric == "faithfulness"
        svg = re.search(
            rf'<svg class="quadrants" data-pipeline="{pipeline}"(.*?)</svg>', page, re.S
        )
        assert svg is not None
        points = re.findall(
            r'<a href="#([^"]+)"><circle class="pt[^"]*" data-sample="([^"]*)"', svg.group(1)
        )
        diagnosed = [r for r in diag.rows if r.quadrant is not Quadrant.UNKNOWN]
        assert len(points) == len(diagnosed) == 3
        assert [html.unescape(sid) for _, sid in points] == [r.sample_id for r in diagnosed]
        assert [a for a, _ in points] == [sample_anchor(r.sample_id, pipeline) for r in diagnosed]
        n_danger = len(diag.in_quadrant(Quadrant.BAD_RETRIEVAL_GOOD_ANSWER))
        assert n_danger == 2  # 'danger' and the hostile sample (faithfulness 0.5 passes)
        assert svg.group(1).count("pt-danger") == n_danger
        assert 'class="danger-zone"' in svg.group(1)
    # every quadrant is labelled; the dangerous sample is listed first in its table
    for q in Quadrant:
        if q is not Quadrant.UNKNOWN:
            assert f'<text class="qlabel" data-quadrant="{q.value}"' in page
    danger = re.search(
        r'<table class="dangerous" data-pipeline="langchain">(.*?)</table>', page, re.S
    )
    assert danger is not None
    assert f'<a href="#{sample_anchor("danger", "langchain")}">danger</a>' in danger.group(1)
    assert "Who wrote Faust?" in danger.group(1)
    assert "Not diagnosed (1)" in page
    assert "recall@5: skipped (no relevance labels)" in page


def test_comparison_tables(page: str) -> None:
    a, b = _evaluation(0.0), _evaluation(0.3)
    cmp = compare_frameworks({"ragbridge": a, "other <fw>": b})
    section = page[page.index('<section id="comparison">') :]
    section = section[: section.index("</section>")]
    for m in cmp.measures:
        assert f'<h3 data-measure="{m.measure}">' in section
        for f in m.frameworks:
            assert f'<tr data-framework="{html.escape(f.framework)}">' in section
            if f.mean is not None:
                assert f'<td class="num mean">{f.mean:.3f}</td>' in section
        for p in m.pairs:
            if p.mean_abs_diff is not None:
                assert f'<td class="num mad">{p.mean_abs_diff:.3f}</td>' in section
    faith = cmp.measure("faithfulness")
    assert faith.pairs[0].spearman is not None
    assert f'<td class="num spearman">{faith.pairs[0].spearman:+.2f}</td>' in section
    top = faith.disagreements[0]
    assert top.sample_id == "good"
    assert top.spread == pytest.approx(0.3)
    assert f'<a href="#{sample_anchor("good", "langchain")}">good</a>' in section
    assert "all claims supported" in section  # the reasons side by side
    assert "other &lt;fw&gt;" in section
    assert "other <fw>" not in section
    assert "needs &lt;labels&gt;" in section  # skipped pair with reason
    assert "note with &lt;b&gt;markup&lt;/b&gt;" in section
    assert '<table class="edge-cases">' not in section  # no sample scored by one side only


def test_edge_cases_are_listed() -> None:
    a = Evaluation(
        [("s1", "faithfulness", Score(value=1.0)), ("s2", "faithfulness", Score(value=0.5))]
    )
    b = Evaluation(
        [
            ("s1", "faithfulness", Score.fail("no_claims", "the answer makes no claim")),
            ("s2", "faithfulness", Score(value=0.25)),
        ]
    )
    page = render_report({"a": a, "b": b}, comparison=compare_frameworks({"a": a, "b": b}))
    table = re.search(r'<table class="edge-cases">(.*?)</table>', page, re.S)
    assert table is not None
    assert "<td>no_claims</td>" in table.group(1)
    assert "policy difference" in table.group(1)


def test_drilldown_one_details_per_sample(page: str) -> None:
    tags = _parse(page)
    ids = [s.id for s in _samples()]
    details = re.findall(r'<details class="sample" id="([^"]+)" data-pipeline="([^"]+)">', page)
    assert len(details) == 2 * len(ids) == tags.starts["details"] == tags.ends["details"]
    assert sorted(a for a, _ in details) == sorted(
        sample_anchor(sid, p) for sid in ids for p in ("langchain", "llamaindex")
    )
    good = page[page.index(f'id="{sample_anchor("good", "langchain")}"') :]
    good = good[: good.index("</details>")]
    assert "What is the capital of France?" in good
    assert "Paris is the capital of France." in good
    assert '<td class="num">1</td><td>d1</td><td class="num">0.900</td>' in good
    assert '<span class="tag rel">relevant (grade 2)</span>' in good
    assert '<span class="tag nonrel">not relevant</span>' in good
    assert '<table class="verdicts" data-kind="claims">' in good
    assert good.count('<span class="ok" title="pass">✓</span>') == 2
    assert "claim 0 &lt;i&gt;x&lt;/i&gt;" in good
    assert '<td class="num value">1.000</td>' in good
    hostile = page[page.index(f'id="{sample_anchor(HOSTILE_ID, "langchain")}"') :]
    hostile = hostile[: hostile.index("</details>")]
    assert '<tr class="failed" data-metric="answer_relevance">' in hostile
    assert "failed (parse_error)" in hostile
    assert hostile.count('<span class="bad" title="fail">✗</span>') == 1
    lost = page[page.index(f'id="{sample_anchor("lost", "langchain")}"') :]
    lost = lost[: lost.index("</details>")]
    assert '<tr class="skipped" data-metric="recall@5">' in lost
    assert "no relevance labels" in lost
    assert "judge did not answer in 30 s" in lost
    assert '<strong>Answer</strong> <span class="muted">none</span>' in lost


def test_hostile_strings_render_only_as_text(page: str) -> None:
    for text in HOSTILE:
        assert html.escape(text, quote=True) in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    assert "<img" not in page
    assert "<svg onload" not in page
    assert "onerror=" not in page.replace("onerror=alert(1)&gt;", "")
    assert "alert(2)" in page
    assert "<script>alert(2)" not in page
    tags = _parse(page)
    # two script elements: the explorer's data (JSON, which no browser runs) and ours, which
    # holds no user data
    assert tags.starts["script"] == 2
    assert tags.script_types == ["application/json", None]
    data, ours = tags.scripts
    assert "alert" not in ours
    assert not set(data) & {"<", ">", "&"}  # nothing in the data can end its element
    loaded = json.loads(data)
    assert {r["id"] for r in loaded["rows"]} >= {HOSTILE_ID}
    assert "Hostile <b>question</b>?" in [r["q"] for r in loaded["rows"]]
    assert tags.starts["img"] == 0
    # no attribute anywhere is an event handler, and ids are safe slugs
    assert not [a for a in tags.attrs if a[1].startswith("on")]
    for ident in tags.ids:
        assert re.fullmatch(r"[a-z0-9-]+", ident), ident
    # the hostile sample id: escaped in text and in data attributes, never in an id
    assert html.escape(HOSTILE_ID, quote=True) in page
    data_samples = [v for _, k, v in tags.attrs if k == "data-sample"]
    assert HOSTILE_ID in data_samples  # the parser unescapes it: it stayed inside the quotes


def test_no_network_references(page: str) -> None:
    tags = _parse(page)
    for tag, key, value in tags.attrs:
        if key in {"src", "href", "action", "srcset", "data", "poster", "xlink:href"}:
            assert value is not None, (tag, key)
            assert value.startswith("#"), (tag, key, value)
    assert tags.starts["link"] == 0
    assert tags.starts["iframe"] == 0
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.I)
    assert "url(" not in page
    assert "@import" not in page
    assert "http://" not in page
    assert "https://" not in page


def test_html_is_well_formed(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    tags = _parse(page)
    for tag in (
        "html", "head", "body", "main", "section", "table", "thead", "tbody", "tr",
        "details", "summary", "svg", "figure", "style", "script", "header", "nav", "dl", "a",
    ):  # fmt: skip
        assert tags.starts[tag] == tags.ends[tag], (tag, tags.starts[tag], tags.ends[tag])
    for tag in ("html", "head", "body", "main", "style"):
        assert tags.starts[tag] == 1, tag
    assert tags.starts["script"] == 2  # the explorer's JSON data and the page's script
    assert tags.starts["section"] == 8
    assert len(tags.ids) == len(set(tags.ids))


def test_single_evaluation_and_write_report(tmp_path: Path) -> None:
    ev = _evaluation()
    out = write_report(tmp_path / "sub" / "r.html", ev, samples=_samples(), generated_at=WHEN)
    assert out == tmp_path / "sub" / "r.html"
    text = out.read_text(encoding="utf-8")
    assert text == render_report(ev, samples=_samples(), generated_at=WHEN)
    assert "Side by side" not in text
    assert text.count('<details class="sample"') == 4
    assert f'id="{sample_anchor("danger")}"' in text


def test_quadrant_chart_omitted_with_a_note_when_no_measure() -> None:
    ev = Evaluation([("s1", "answer_relevance", Score(value=0.7))])
    page = render_report(ev)
    assert '<p class="note quadrant-omitted">Quadrant chart omitted: no retrieval measure' in page
    assert '<svg class="quadrants"' not in page
    assert page.count('<details class="sample"') == 1
    assert '<p class="muted">The sample record was not given to the report.</p>' in page


def test_explicit_diagnosis_is_used() -> None:
    ev = _evaluation()
    diag = diagnose(
        ev, retrieval="recall@5", generation="answer_relevance", generation_threshold=0.6
    )
    page = render_report(ev, diagnosis=diag)
    svg = re.search(r'<svg class="quadrants"(.*?)</svg>', page, re.S)
    assert svg is not None
    assert "answer_relevance (generation)" in svg.group(1)
    # 'lost' has no recall@5 value and the hostile sample's answer_relevance failed
    assert [(r.sample_id, r.quadrant) for r in diag.rows][:2] == [
        ("danger", Quadrant.BAD_RETRIEVAL_BAD_ANSWER),
        ("good", Quadrant.GOOD_RETRIEVAL_GOOD_ANSWER),
    ]
    assert svg.group(1).count("<circle") == 2
    assert svg.group(1).count("pt-danger") == 0  # 0.55 < 0.6: 'danger' is a bad answer here


def test_lower_is_better_generation_shades_the_bottom() -> None:
    ev = Evaluation(
        [
            ("a", "recall@5", Score(value=0.0)),
            ("a", "hallucination", Score(value=0.1)),
            ("b", "recall@5", Score(value=1.0)),
            ("b", "hallucination", Score(value=0.9)),
        ]
    )
    page = render_report(ev)
    assert "hallucination ≤ 0.5" in page
    svg = re.search(r'<svg class="quadrants"(.*?)</svg>', page, re.S)
    assert svg is not None
    zone = re.search(r'class="danger-zone" x="([\d.]+)" y="([\d.]+)"', svg.group(1))
    assert zone is not None
    assert float(zone.group(2)) == pytest.approx(44 + 0.5 * (420 - 2 * 44))  # the lower half
    assert svg.group(1).count("pt-danger") == 1


def test_with_a_real_scorer_run(tmp_path: Path) -> None:
    judge = CountingJudge()
    scorer = Scorer(["faithfulness", "recall@5"], judge=judge, cache=tmp_path / "c.sqlite")
    samples = _samples()[:2]
    ev = Evaluation(metadata={"judge_model": judge.model})
    for sample in samples:
        for metric, score in scorer.score(sample).items():
            ev.add(sample.id, metric, score)
    page = render_report(ev, samples=samples)
    for metric, s in ev.summary().items():
        assert f'<td class="num mean">{s.mean:.3f}</td>' in page or s.mean is None, metric
    assert page.count('<details class="sample"') == 2
    assert f"<dt>Judge model</dt><dd>{html.escape(judge.model)}</dd>" in page


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"evaluations": {}}, ValueError, r"evaluations: nothing to report"),
        ({"evaluations": {"x": 1}}, TypeError, r"evaluations\['x'\]: expected an Evaluation"),
        ({"samples": {"nope": []}}, ValueError, r"samples\['nope'\]: no such pipeline"),
        ({"samples": ["q"]}, TypeError, r"samples\['p'\]\[0\]: expected a Sample"),
        (
            {"samples": [Sample(id="a", question="q"), Sample(id="a", question="r")]},
            ValueError,
            r"samples\['p'\]\[1\]: id: duplicate sample id 'a'",
        ),
        ({"diagnosis": {"zz": None}}, ValueError, r"diagnosis\['zz'\]: no such pipeline"),
        ({"comparison": "x"}, TypeError, r"comparison must be a CrossComparison"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, object], error: type, match: str) -> None:
    args: dict[str, object] = {"evaluations": {"p": _evaluation()}}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        render_report(**args)  # type: ignore[arg-type]


def test_single_diagnosis_with_several_pipelines_is_refused() -> None:
    ev = _evaluation()
    with pytest.raises(ValueError, match="diagnosis: a single Diagnosis is ambiguous"):
        render_report({"a": ev, "b": ev}, diagnosis=diagnose(ev))


def test_offline_only_runs_say_there_was_no_judge() -> None:
    ev = Evaluation(metadata={"judge_model": None, "embedding_model": "all-MiniLM-L6-v2"})
    ev.add(
        "s1", "faithfulness", Score(value=0.5, provider="offline", judge_model="all-MiniLM-L6-v2")
    )
    html = render_report(ev)
    assert "<dt>Judge model</dt><dd>none (offline providers only)</dd>" in html
    assert "<dt>Judge calls</dt>" not in html


def test_run_warnings_are_a_visible_block_in_the_overview() -> None:
    """Ids that never match the labels (from the run): said at the top of the report."""
    from ragbridge.core.retrieval import score_samples

    samples = [
        Sample(
            id=f"q{i}",
            question="q",
            contexts=[Context(text="t", id=f"<i>chunk-{i}</i>")],
            relevance={f"doc-{i}": 1},
        )
        for i in range(3)
    ]
    ev = score_samples(samples, ["recall@5"])
    (warning,) = ev.metadata["warnings"]
    ev.metadata["aborted"] = "judge: 401 Unauthorized on 5/5 calls — check OPENAI_API_KEY"
    page = render_report(ev, samples=samples, generated_at=WHEN)
    block = re.search(r'<div class="warnings" role="alert"[^>]*>(.*?)</div>', page, re.S)
    assert block is not None
    items = [html.unescape(i) for i in re.findall(r"<li>(.*?)</li>", block.group(1), re.S)]
    assert items == [
        "the run stopped early: judge: 401 Unauthorized on 5/5 calls — check OPENAI_API_KEY",
        warning,
    ]
    assert page.index('class="warnings"') < page.index('id="summary"')  # above the numbers
    assert "retrieved '<i>chunk-0</i>'" in warning
    assert "<i>chunk" not in page  # escaped like every user string
    quiet = render_report(_evaluation(), samples=_samples(), generated_at=WHEN)
    assert 'class="warnings"' not in quiet
