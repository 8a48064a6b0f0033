"""``ragbridge gate ... --markdown`` and ``ragbridge history --markdown``: the report a pull request
shows, its numbers, its escaping, its exit status, and the example CI workflow of the docs.

The golden file ``tests/data/gate_markdown/expected.md`` is the full output on a fixed pair of
results files. Its numbers were not taken on trust from the code that prints them:
`test_the_golden_numbers_are_hand_arithmetic_and_compare_s` re-derives every one from the raw
JSON lines — means, differences and the top regressions with exact fractions, the p-values by
enumerating all 2**8 sign patterns of the paired differences (exact rational arithmetic, as the
paired sign-flip test defines them for n <= 16), the verdicts by the gate's rule written out again —
and checks the CI cells against `ragbridge.core.results.stats.compare` (a seeded bootstrap, which
no hand can redo). The data were chosen so that no mean lands on a rounding half.
"""

from __future__ import annotations

import json
import re
import shlex
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli import main
from ragbridge.adapters.cli.main import build_parser
from ragbridge.adapters.cli.markdown_report import MAX_QUESTION, escape
from ragbridge.core.monitoring import MonitorStore, RunRecord
from ragbridge.core.monitoring.history import cells_of, run_record, source_name
from ragbridge.core.results.evaluation import Evaluation, Score
from ragbridge.core.results.stats import compare
from tests.test_report import HOSTILE, HOSTILE_ID

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("tests/data/gate_markdown")  # relative: the report names the files as given
GATE = ["gate", str(DATA / "results.jsonl"), "--baseline", str(DATA / "base.jsonl")]
GATE += ["--data", str(DATA / "samples.jsonl"), "--threshold", "recall@4=0.5", "--markdown"]
WORKFLOW = ROOT / "docs" / "examples" / "ragbridge-pr.yml"
PAGE = ROOT / "docs" / "how-to" / "pull-requests.md"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


# --------------------------------------------------------------------------- the golden file


def test_gate_markdown_prints_the_expected_file_and_exits_as_the_gate(
    at_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *GATE)
    assert code == 1  # faithfulness regressed: the gate fails, --markdown or not
    assert out == (ROOT / DATA / "expected.md").read_text(encoding="utf-8")
    assert err == ""


def _raw(name: str) -> dict[str, dict[str, Fraction]]:
    """metric -> sample id -> value, read from the JSON lines themselves (no ragbridge code)."""
    out: dict[str, dict[str, Fraction]] = {}
    for line in (ROOT / DATA / name).read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if "sample_id" in obj:
            out.setdefault(obj["metric"], {})[obj["sample_id"]] = Fraction(
                str(obj["score"]["value"])
            )
    return out


def _three(x: Fraction, sign: bool = False) -> str:
    """``x`` to 3 decimals, refusing a value on a rounding half (the data avoid them)."""
    assert (x * 2000).denominator != 1 or (x * 2000).numerator % 2 == 0, f"{x} is a half"
    d = (Decimal(x.numerator) / Decimal(x.denominator)).quantize(Decimal("0.001"), ROUND_HALF_EVEN)
    return f"{d:+}" if sign else f"{d}"


def _exact_p(diffs: list[Fraction]) -> Fraction:
    """Two-sided paired sign-flip p-value, every one of the 2**n sign patterns enumerated."""
    observed = abs(sum(diffs))
    if observed == 0 and not any(diffs):
        return Fraction(1)
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed
        for signs in product((1, -1), repeat=len(diffs))
    )
    return Fraction(hits, 2 ** len(diffs))


def _rows(text: str, head: str) -> list[list[str]]:
    """The cells of the Markdown table whose header row starts with ``head``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_the_golden_numbers_are_hand_arithmetic_and_compare_s() -> None:
    golden = (ROOT / DATA / "expected.md").read_text(encoding="utf-8")
    base, current = _raw("base.jsonl"), _raw("results.jsonl")
    lower_is_better = {"hallucination"}
    compared = compare(
        Evaluation.from_jsonl(ROOT / DATA / "base.jsonl"),
        Evaluation.from_jsonl(ROOT / DATA / "results.jsonl"),
    )
    rows = _rows(golden, "| metric |")
    assert [r[0].replace("\\_", "_") for r in rows] == list(base)
    failed = 0
    for row, metric in zip(rows, base, strict=True):
        ids = [s for s in base[metric] if s in current[metric]]
        a = [base[metric][s] for s in ids]
        b = [current[metric][s] for s in ids]
        diffs = [y - x for x, y in zip(a, b, strict=True)]
        mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
        diff = sum(diffs) / len(diffs)
        p = _exact_p(diffs)
        c = compared[metric]
        assert c.ci_low is not None
        assert c.ci_high is not None
        assert c.diff is not None
        assert abs(Fraction(c.diff) - diff) < 1e-12
        assert row[1:7] == [
            _three(mean_a), _three(mean_b), _three(diff, sign=True),
            f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]", _three(p), str(len(ids)),
        ]  # fmt: skip
        assert len(ids) == 8
        worse = diff if metric in lower_is_better else -diff
        word = "rise" if metric in lower_is_better else "drop"
        if worse <= Fraction(3, 100):
            assert row[7] == f"✓ within the allowed {word} 0.030"
        elif p < Fraction(5, 100):
            assert row[7] == f"✗ more than the allowed {word} 0.030 and significant"
            failed += 1
        else:
            assert row[7] == f"✓ more than the allowed {word} 0.030 but not significant"
    assert failed == 1
    assert golden.startswith("**✗ ragbridge gate failed: 1 check missed**\n")
    # the top regressions: every (sample, metric) pair that got worse, largest first
    drops = []
    for rank, metric in enumerate(base):
        for s, before in base[metric].items():
            if s in current[metric]:
                after = current[metric][s]
                worse = after - before if metric in lower_is_better else before - after
                if worse > 0:
                    drops.append((-worse, rank, s, metric, before, after))
    drops.sort()
    shown = _rows(golden, "| sample |")
    assert [(r[0], r[2].replace("@&#8203;", "@")) for r in shown] == [
        (d[2], d[3]) for d in drops[:5]
    ]
    assert [r[3:] for r in shown] == [
        [_three(d[4]), _three(d[5]), _three(d[5] - d[4], sign=True)] for d in drops[:5]
    ]


# --------------------------------------------------------------------------- escaping


@pytest.mark.parametrize("payload", [*HOSTILE, HOSTILE_ID, "a | b", "`x`", "**bold** _it_"])
def test_escape_leaves_no_markup_of_the_data(payload: str) -> None:
    text = escape(payload + "\nnext line\r\u2028end")
    assert "\n" not in text
    assert "\r" not in text
    assert "\u2028" not in text
    assert "<" not in text
    assert ">" not in text
    assert re.search(r"(?<!\\)[|`*_\[\]]", text) is None, text


def test_escape_cuts_long_text_and_defuses_mentions_and_issue_links() -> None:
    assert escape("x" * 500, MAX_QUESTION) == "x" * (MAX_QUESTION - 1) + "…"
    assert escape("ping @octocat, see #12 and org/repo#3") == (
        "ping @&#8203;octocat, see \\#&#8203;12 and org/repo\\#&#8203;3"
    )
    assert escape("recall@4 a@b.example") == "recall@4 a@b.example"  # no one is mentioned
    assert escape("&lt;script&gt;") == "&amp;lt;script&amp;gt;"  # the data's entity stays text


def _hostile_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two runs whose sample ids, metric name and questions are hostile, and their samples."""
    qid = "q|1`<b>"
    metric = "m|<img src=x onerror=alert(1)>"
    base, current = Evaluation(), Evaluation()
    ids = [qid, *(f"s{i}" for i in range(6))]
    for i, sid in enumerate(ids):
        base.add(sid, metric, Score(value=1.0))
        current.add(sid, metric, Score(value=0.0 if i < 6 else 1.0))
    a, b = tmp_path / "base.jsonl", tmp_path / "results.jsonl"
    base.to_jsonl(a)
    current.to_jsonl(b)
    samples = tmp_path / "samples.jsonl"
    questions = [
        "</td><script>alert(1)</script> | `code` *x* [l](javascript:alert(1))\n| a | b |\n@x",
        *HOSTILE,
        "y" * 400,
    ]
    lines = [
        json.dumps({"id": sid, "question": q, "answer": "a", "contexts": [{"text": "c"}]})
        for sid, q in zip(ids, questions + ["q"] * 7, strict=False)
    ]
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return a, b, samples


def test_a_report_of_hostile_data_renders_no_html_and_keeps_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown = pytest.importorskip("markdown", reason="the docs extra: pip install '.[docs]'")
    a, b, samples = _hostile_pair(tmp_path)
    code, out, _ = cli(
        capsys, "gate", str(b), "--baseline", str(a), "--data", str(samples), "--markdown"
    )
    assert code == 1  # 6 of 7 samples fell from 1 to 0: p = 2 * 2 / 2**7 < 0.05
    assert "<" not in out
    assert ">" not in out
    for line in out.splitlines():
        if line.startswith("|"):  # every row has exactly the cells of its header
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert len(cells) in (8, 6), line
    html = markdown.markdown(out, extensions=["tables"])
    tags = set(re.findall(r"<\s*([a-zA-Z][a-zA-Z0-9]*)", html))
    assert tags <= {"p", "strong", "table", "thead", "tbody", "tr", "th", "td", "h4", "ul", "li"}
    assert "href" not in html  # no link of the data's became a link
    assert len(re.findall(r"<tr>", html)) == 1 + 1 + 1 + 5  # header, row; header, top 5


# --------------------------------------------------------------------------- exit status


def test_a_passing_gate_exits_0_with_markdown(
    at_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(DATA / "base.jsonl")
    code, out, _ = cli(capsys, "gate", base, "--baseline", base, "--markdown")
    assert code == 0
    assert out.startswith("**✓ ragbridge gate passed**\n")
    assert "No sample scored worse than in the baseline." in out


def test_markdown_without_a_baseline_is_a_usage_error(
    at_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "gate", str(DATA / "results.jsonl"), "--markdown")
    assert code == 2
    assert out == ""
    assert "--markdown compares with a baseline" in err


# --------------------------------------------------------------------------- from the store


def _record(
    store: MonitorStore, path: Path, branch: str, when: float, command: str = "eval"
) -> RunRecord:
    evaluation = Evaluation.from_jsonl(path)
    source = source_name(ROOT / DATA / "samples.jsonl")  # as eval --history names its input
    run = run_record(evaluation, command, source, {}, "abc1234def", timestamp=when)
    run = run.model_copy(update={"branch": branch})
    store.add_run(run, cells_of(evaluation))
    return run


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, RunRecord]]:
    """A store: an old run of main (this run's cells: it must not be the baseline), the
    baseline (the latest run of main), a gate record on main after it, then this branch's run."""
    path = tmp_path / "runs.sqlite"
    with MonitorStore(path) as s:
        runs = {
            "old": _record(s, ROOT / DATA / "results.jsonl", "main", 1000.0),
            "base": _record(s, ROOT / DATA / "base.jsonl", "main", 2000.0),
            "gate": _record(s, ROOT / DATA / "results.jsonl", "main", 2500.0, "gate"),
            "pr": _record(s, ROOT / DATA / "results.jsonl", "feature/x", 3000.0),
        }
        if s.run(runs["base"].run_id).branch != "main":
            pytest.skip("this store does not keep RunRecord.branch yet (store schema 2)")
    return path, runs


def _metric_numbers(text: str) -> list[list[str]]:
    """The numeric cells of the metric table (all but the verdict)."""
    return [row[:7] for row in _rows(text, "| metric |")]


def test_gate_markdown_takes_the_baseline_from_the_store(
    at_root: None, store: tuple[Path, dict[str, RunRecord]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, runs = store
    argv = [a for a in GATE if a not in ("--baseline", str(DATA / "base.jsonl"))]
    code, out, err = cli(capsys, *argv, "--history", str(path))
    assert code == 1
    golden = (ROOT / DATA / "expected.md").read_text(encoding="utf-8")
    assert _metric_numbers(out) == _metric_numbers(golden)  # the same cells, the same numbers
    over = escape(runs["base"].source)
    assert f"baseline: run {runs['base'].run_id} of main over {over}." in out
    assert out.split("\n\n", 2)[2] == golden.split("\n\n", 2)[2]  # all but the naming line
    assert "recorded the gate run" in err  # on stderr: stdout is the Markdown
    code, out, err = cli(capsys, *argv, "--history", str(path), "--baseline-branch", "release")
    assert code == 2
    assert f"no run of branch release over {runs['base'].source}" in err


def test_history_markdown_compares_the_newest_run_with_main(
    at_root: None, store: tuple[Path, dict[str, RunRecord]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, runs = store
    code, out, _ = cli(
        capsys, "history", str(path), "--markdown", "--data", str(DATA / "samples.jsonl")
    )
    assert code == 0
    golden = (ROOT / DATA / "expected.md").read_text(encoding="utf-8")
    # the same cells, the same numbers; in the store's metric order (it keeps no other)
    assert sorted(_metric_numbers(out)) == sorted(_metric_numbers(golden))
    assert out.startswith("**▼ 1 metric worse than main**\n")
    assert f"This run: run {runs['pr'].run_id} (branch feature/x, commit abc1234)" in out
    assert f"baseline: run {runs['base'].run_id} (branch main, commit abc1234)" in out
    verdicts = {row[0]: row[7] for row in _rows(out, "| metric |")}
    # the history's rule (|Δ| >= 0.03 and p < 0.05, either way): only faithfulness moved
    assert verdicts.pop("faithfulness") == "▼ worse"
    assert set(verdicts.values()) == {"no significant change"}
    assert out.split("#### ")[1] == golden.split("#### ")[1]  # the same top regressions


# --------------------------------------------------------------------------- the CI example


def _run_scripts(node: Any) -> list[str]:
    """Every ``run:`` script of a workflow (jobs → steps), in order."""
    return [
        step["run"]
        for job in node["jobs"].values()
        for step in job.get("steps", [])
        if isinstance(step, dict) and "run" in step
    ]


def _ragbridge_commands(script: str) -> list[list[str]]:
    """The ``ragbridge ...`` commands of a shell script: continuation lines joined, commands
    split at ``&&``/``||``/``;``/``|``, a redirection (``>> "$GITHUB_STEP_SUMMARY"``) and what
    follows it dropped."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for word in [*lexer, ";"]:
            if word in ("&&", "||", ";", "|", ">", ">>", "2>", "&"):
                if words[:1] == ["ragbridge"]:
                    found.append(words[1:])
                words = [] if word not in (">", ">>") else ["<redirected>"]
            elif words[:1] != ["<redirected>"]:
                words.append(word)
    return found


def test_the_example_workflow_runs_ragbridge_commands_our_parser_accepts() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    scripts = _run_scripts(workflow)
    commands = [c for script in scripts for c in _ragbridge_commands(script)]
    names = [c[0] for c in commands]
    assert {"eval", "gate"} <= set(names), names
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # SystemExit (and the parser's message) on a bad line
    gate = next(c for c in commands if c[0] == "gate")
    assert "--markdown" in gate
    assert any("--history" in c for c in commands if c[0] == "eval")
    text = "\n".join(scripts)
    assert '>> "$GITHUB_STEP_SUMMARY"' in text
    assert "gh pr comment" in text


def test_the_parser_check_of_the_workflow_catches_a_bad_flag() -> None:
    """The check above can fail: a misspelt flag in a workflow line is refused."""
    (argv,) = _ragbridge_commands('ragbridge gate r.jsonl --markdwn >> "$GITHUB_STEP_SUMMARY"')
    assert argv == ["gate", "r.jsonl", "--markdwn"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)


def test_the_how_to_page_shows_the_workflow_file_as_it_is() -> None:
    page = PAGE.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert block is not None
    assert block.group(1) == WORKFLOW.read_text(encoding="utf-8")
    shown = re.search(r"```markdown\n(.*?)```", page, re.S)
    assert shown is not None
    assert shown.group(1) == (ROOT / DATA / "expected.md").read_text(encoding="utf-8")
