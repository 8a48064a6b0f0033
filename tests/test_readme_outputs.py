"""Every output and figure the README and the site show, outside the walkthrough, is what the code
prints today.

`test_readme_walkthrough.py` checks the "eval set's life" page; this module checks the rest of
README.md and the pages of the site (`test_readme.site_pages`, in mkdocs.yml's nav order):

* Every ``$ ragbridge ...`` line of an output block (a fence with no language) runs as written,
  in page order, in-process, in one temporary folder. The first is ``ragbridge demo``: it
  writes ``ragbridge-demo/``, which the later commands read, so the demo runs once for the
  module. The commands the pages run "from the repository root" read ``adapters/`` and
  ``tests/``: the folder links both to the repository's.
* Under each command, every output line the page shows must be printed (stdout and stderr
  together, in order). ``...`` marks omitted lines; a line such as ``rouge_l ... bleu ...``
  shows the lines ``rouge_l`` and ``bleu`` with others around them. The exit code must be the
  one the output implies: 1 after ``gate failed``, 2 after ``ragbridge: error:``, else 0.
* What is normalised, and why: runs of whitespace (column widths follow the longest name in a
  table); in ``ragbridge history``, run ids, times and commit hashes (new for every run and
  every repository). Nothing else: a changed number fails.
* ``ragbridge history`` reads a store that the page's bash lines above it fill, run here in a
  git repository of two commits, the second breaking the answers (`history_samples`).
* The figures the prose quotes from those outputs (skipped cells, edge cases) are read back from
  them; the judged ``compare`` table runs the command the page names; the pytest failure runs
  under pytest; the framework table is checked against the example's own samples; the id
  warning and the exit-code table's lines come from ``eval`` runs on inputs of the shape they
  describe (the UUIDs of the id warning are masked); the short-answer agreement figures run on
  the dev set in ``../shared/data`` (skipped when it is absent).
* Timings are not measured here: for each, the pages name the script that prints it, and the
  test checks that the script exists and prints a line of the form quoted (with its subprocess
  stubbed), and that the places quoting one timing agree.

When a command's output changes, ``python -m pytest -q tests/test_readme_outputs.py`` lists every
line of a page that is no longer printed, next to what the command prints now.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.cli.main import main
from tests.test_readme import (  # one reader of the pages' fenced blocks
    BLOCKS,
    FAILURES_PAGE,
    PAGES,
    WALKTHROUGH_PAGE,
    Block,
    page_text,
)

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
NEEDS = ("langchain_core", "llama_index", "langsmith", "ragas", "deepeval", "tokenizers")
FROM_ROOT = ("adapters", "tests")
"""What the commands run "from the repository root" read; linked into the temporary folder."""

VARIABLE = {
    "history": (
        (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d"), "<time>"),
        (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,20}\b"), "<id>"),  # run ids and commits
    ),
}
"""Per command, what differs from run to run and is masked in both texts before comparing."""


@dataclass(frozen=True)
class Step:
    """One ``$ ragbridge ...`` line of an output block and the output lines shown under it."""

    argv: tuple[str, ...]
    shown: tuple[str, ...]
    line: int
    page: str = "README.md"

    @property
    def key(self) -> str:
        """The step's place: its page and line (unique, unlike the line alone)."""
        return f"{self.page}:{self.line}"

    @property
    def where(self) -> str:
        return f"{self.key}: ragbridge {' '.join(self.argv)}"

    @property
    def expected_exit(self) -> int:
        if any(s.startswith("gate failed") for s in self.shown):
            return 1
        if any(s.startswith("ragbridge: error:") for s in self.shown):
            return 2
        return 0


def site_text() -> str:
    """README.md and every page of the site, in page order, as one text."""
    return "\n".join(page_text(page) for page in PAGES)


def output_blocks() -> list[Block]:
    """The blocks that show output, outside the walkthrough (which has its own test)."""
    return [b for b in BLOCKS if b.lang == "" and b.page != WALKTHROUGH_PAGE]


def readme_steps() -> list[Step]:
    steps: list[Step] = []
    for block in output_blocks():
        command: tuple[tuple[str, ...], int] | None = None
        shown: list[str] = []
        for offset, line in enumerate([*block.lines, "$ ragbridge end"], start=1):
            if line.startswith("$ ragbridge "):
                if command is not None:
                    steps.append(Step(command[0], tuple(shown), command[1], block.page))
                command, shown = (tuple(shlex.split(line[2:])[1:]), block.line + offset), []
            elif command is not None and line.strip():
                shown.append(line.rstrip())
    return steps


STEPS = readme_steps()


def _norm(text: str, command: str = "") -> str:
    """``text`` with runs of whitespace as one space and the command's variable parts masked."""
    for pattern, mask in VARIABLE.get(command, ()):
        text = pattern.sub(mask, text)
    return " ".join(text.split())


def _pieces(shown: tuple[str, ...] | list[str], command: str = "") -> list[str]:
    """The printed lines a page's excerpt stands for: ``...`` dropped, each piece around it kept."""
    return [_norm(p, command) for line in shown for p in line.split("...") if p.strip()]


def not_printed(
    shown: tuple[str, ...] | list[str], printed: list[str], command: str = ""
) -> list[str]:
    """The shown pieces not printed as whole lines in the page's order (all of them, so one
    failure lists every figure to update)."""
    lines = [_norm(line, command) for line in printed]
    missing, at = [], 0
    for piece in _pieces(shown, command):
        try:
            at = lines.index(piece, at) + 1
        except ValueError:
            missing.append(piece)
    return missing


def _explain(where: str, missing: list[str], printed: list[str]) -> str:
    return (
        f"{where}: the page shows\n  " + "\n  ".join(missing)
        + "\nbut the command printed:\n" + "\n".join(printed)
    )  # fmt: skip


def run_cli(argv: list[str] | tuple[str, ...]) -> tuple[int, list[str]]:
    """Run ``ragbridge argv`` in-process: its exit code and what it printed (stderr and stdout
    in one stream, in the order written)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own exit on a bad argument
            code = exc.code if isinstance(exc.code, int) else 2
    return code, [line.rstrip() for line in buffer.getvalue().splitlines()]


def _needs_all() -> None:
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs pip install 'ragbridge[all]' (missing: {', '.join(missing)})")


# -- the history scenario --------------------------------------------------------------------------


def history_samples(*, broken: bool) -> list[dict[str, Any]]:
    """30 questions on meeting rooms, each answered from its first (labelled) context; in the
    broken commit, 20 of the answers give a wrong seat count (faithfulness 1.0 -> 0.0 on them)."""
    rows = []
    for i in range(1, 31):
        seats = 4 + 2 * i
        told = seats + 10 if broken and i % 3 else seats
        rows.append(
            {
                "id": f"q{i:02d}",
                "question": f"How many people does meeting room {i} seat?",
                "answer": f"Meeting room {i} seats {told} people.",
                "contexts": [
                    {
                        "id": f"room-{i}",
                        "text": f"Meeting room {i} seats {seats} people and has a projector.",
                    },
                    {
                        "id": f"room-{i + 1}",
                        "text": f"Meeting room {i + 1} seats {seats + 2} people.",
                    },
                ],
                "relevance": {f"room-{i}": 1},
            }
        )
    return rows


def history_commands() -> list[list[str]]:
    """The bash lines recording runs with ``--history`` in the section showing `history`."""
    shows = next(b for b in BLOCKS if any(s.startswith("$ ragbridge history ") for s in b.lines))
    found = []
    for block in BLOCKS:
        if block.lang != "bash" or (block.page, block.section) != (shows.page, shows.section):
            continue
        for line in block.lines:
            words = shlex.split(line.split(" #")[0])
            if words[:1] == ["ragbridge"] and "--history" in words:
                found.append(words[1:])
    assert found, f"{shows.page} shows no command recording a run with --history"
    return found


def _git(folder: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=README", "-c", "user.email=readme@example.invalid",
         "-c", "commit.gpgsign=false", *args],
        cwd=folder, env=env, check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def build_history(folder: Path, mp: pytest.MonkeyPatch) -> None:
    """A repository whose second commit broke the answers; each commit's eval and gate recorded."""
    folder.mkdir()
    mp.chdir(folder)
    _git(folder, "init", "-q")
    for broken in (False, True):
        data = "".join(json.dumps(row) + "\n" for row in history_samples(broken=broken))
        (folder / "eval.jsonl").write_text(data, encoding="utf-8")
        _git(folder, "add", "eval.jsonl")
        _git(folder, "commit", "-q", "-m", "break the answers" if broken else "answers")
        for argv in history_commands():
            code, printed = run_cli(argv)
            assert code in (0, 1), f"ragbridge {' '.join(argv)}: exit {code}\n" + "\n".join(printed)


# -- the commands, run once ------------------------------------------------------------------------


@dataclass
class Ran:
    work: Path
    results: dict[str, tuple[int, list[str]]]  # by the page and line of the command (Step.key)

    def of(self, command: str) -> list[str]:
        """What the first step running ``ragbridge command`` printed."""
        step = next(s for s in STEPS if s.argv[0] == command)
        return self.results[step.key][1]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    _needs_all()
    work = tmp_path_factory.mktemp("readme-outputs")
    for name in FROM_ROOT:
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    results: dict[str, tuple[int, list[str]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        for step in STEPS:
            where = work
            if step.argv[0] == "history":
                if shutil.which("git") is None:
                    continue  # the step's test says so
                where = work / "history"
                if not where.exists():
                    build_history(where, mp)
            mp.chdir(where)
            results[step.key] = run_cli(step.argv)
        yield Ran(work, results)


CHECKED_BY_ITS_OWN_TEST = {
    "sample ": "test_the_framework_table_shows_the_examples_own_scores",
    "E ": "test_the_pytest_failure_is_what_pytest_prints",
    "ragbridge: warning: ranking measures:": "test_the_id_warning_is_what_eval_prints",
}
"""Output blocks with no ``$ ragbridge`` line, by their first line, and what checks them."""


def test_every_output_block_is_checked() -> None:
    unchecked = [
        f"{block.where}: {block.lines[0][:60]}"
        for block in output_blocks()
        if not any(line.startswith("$ ragbridge ") for line in block.lines)
        and not any(block.lines[0].startswith(p) for p in CHECKED_BY_ITS_OWN_TEST)
    ]
    assert not unchecked, "output blocks this module does not check:\n" + "\n".join(unchecked)


def test_the_readme_shows_the_output_of_every_command() -> None:
    commands = {step.argv[0] for step in STEPS}
    assert commands >= {
        "demo", "metrics", "eval", "gate", "estimate", "export", "run", "langsmith",
        "history", "compare",
    }  # fmt: skip
    assert STEPS[0].argv == ("demo",), (
        "the demo must come first: the later commands read its output"
    )
    assert all(step.shown for step in STEPS), [s.where for s in STEPS if not s.shown]


@pytest.mark.parametrize("step", STEPS, ids=lambda s: f"{s.key}-{s.argv[0]}")
def test_the_readme_output_is_what_the_command_prints(step: Step, ran: Ran) -> None:
    if step.key not in ran.results:
        pytest.skip("git is not installed: the history example needs it to make two commits")
    code, printed = ran.results[step.key]
    assert code == step.expected_exit, f"{step.where}: exit {code}\n" + "\n".join(printed)
    missing = not_printed(step.shown, printed, step.argv[0])
    assert not missing, _explain(step.where, missing, printed)


# -- figures the prose quotes from those outputs ---------------------------------------------------


def _prose() -> str:
    """The pages with every run of whitespace as one space (prose wraps anywhere)."""
    return " ".join(site_text().split())


def _quoted(pattern: str) -> re.Match[str]:
    found = re.search(pattern, _prose())
    assert found is not None, f"no page says /{pattern}/ any more: update this test with it"
    return found


def _table(printed: list[str], title: str) -> dict[str, list[str]]:
    """The rows of the summary table printed under ``title``, by metric: the columns after it."""
    start = printed.index(title)
    rows: dict[str, list[str]] = {}
    for line in printed[start + 2 :]:
        if not line.startswith("  ") or ":" in line:
            break
        name, *columns = line.split()
        rows[name] = columns
    return rows


def test_the_demo_paragraph_counts_what_the_demo_printed(ran: Ran) -> None:
    printed = ran.of("demo")
    no_answer = int(re.search(r"\((\d+) with no answer", printed[0])[1])  # type: ignore[index]
    table = _table(printed, "langchain pipeline")
    skipped = {name: int(columns[5]) for name, columns in table.items()}  # mean, [lo, hi], ...
    assert int(_quoted(r"The (\d+) skipped retrieval cells")[1]) == skipped["recall@4"] == no_answer
    assert int(_quoted(r"The (\d+) skipped faithfulness cells")[1]) == skipped["faithfulness"]
    found = _quoted(r"the (\d+) no-answer questions and (\d+) the extractive answerer")
    assert (int(found[1]), int(found[2])) == (no_answer, skipped["faithfulness"] - no_answer)


def test_the_compare_paragraph_counts_its_edge_cases(ran: Ran) -> None:
    printed = ran.of("compare")
    edge_cases = [line for line in printed if line.strip().startswith("edge case ")]
    assert int(_quoted(r"the edge cases are the (\d+) questions the handbook cannot")[1]) == len(
        edge_cases
    )
    assert all(line.endswith("while ragas 0.00") for line in edge_cases)


def _calls(cell: str) -> tuple[int, int]:
    """``32 + 8 cached`` -> (32, 8); ``**12** (3 / sample)`` -> (12, 0)."""
    found = re.match(r"([\d,]+)(?: \+ (\d+) cached)?", cell.replace("*", "").strip())
    assert found is not None, cell
    return int(found[1].replace(",", "")), int(found[2] or 0)


def test_the_judged_comparison_table_is_what_compare_spends(ran: Ran) -> None:
    head = _quoted(r"`head -(\d+) (ragbridge-demo/\S+) > (\S+)`")
    command = _quoted(r"`ragbridge (compare \S+ --judge [^`]+)`")[1].split()
    assert command[1] == head[3]
    lines = (ran.work / head[2]).read_text(encoding="utf-8").splitlines()[: int(head[1])]
    (ran.work / head[3]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    contexts = _quoted(r"first (\d+) demo samples \((\d+) contexts each")
    assert int(contexts[1]) == len(lines)
    assert {len(json.loads(line)["contexts"]) for line in lines} == {int(contexts[2])}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ran.work)
        _, printed = run_cli(command)  # exit 1: RAGAS's negative relevancy fails every cell
    totals: dict[str, tuple[int, int, int]] = {}
    per_measure: dict[tuple[str, str], int] = {}
    measure = ""
    for line in printed:
        if re.fullmatch(r"[a-z_@]+", line):
            measure = line
        elif total := re.fullmatch(
            r"  (\w+): ([\d,]+) judge calls \((\d+) cached\), ([\d,]+) prompt tokens", line
        ):
            totals[total[1]] = (
                int(total[2].replace(",", "")),
                int(total[3]),
                int(total[4].replace(",", "")),
            )
        elif spent := re.fullmatch(r"  (\w+) .*\(([\d,]+) calls, [\d,]+ prompt tokens\)", line):
            per_measure[spent[1], measure] = int(spent[2].replace(",", ""))
    text = site_text().splitlines()
    at = text.index(_quoted(r"(\| framework \| judge calls \| prompt tokens \|[^\n]*?\|) \|---")[1])
    measures = [c.strip().replace(" ", "_") for c in text[at].strip("|").split("|")[3:]]
    rows = []
    for line in text[at + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    assert len(rows) == 3, rows
    for row in rows:
        name, *version = row[0].replace("*", "").split()
        framework = name.lower()
        if version:  # the version the figures were measured with is the one installed
            assert importlib.metadata.version(framework).startswith(version[0]), row[0]
        calls, cached = _calls(row[1])
        assert (calls, cached, _calls(row[2])[0]) == totals[framework], (row, totals[framework])
        for name_, cell in zip(measures, row[3:], strict=True):
            assert _calls(cell)[0] == per_measure[framework, name_], (framework, name_, cell)
        per_sample = re.search(r"\((\d+) / sample\)", row[1])
        if per_sample:
            assert int(per_sample[1]) * len(lines) == calls
    negative = float(_quoted(r"\*negative\* \(([−-]\d\.\d+) here\)")[1].replace("−", "-"))
    returned = [
        float(v)
        for v in re.findall(
            r"RAGAS returned (-?\d\.\d+(?:e-?\d+)?) for answer_relevance", "\n".join(printed)
        )
    ]
    assert negative in [round(v, 3) for v in returned], returned


# -- output of the examples -----------------------------------------------------------------------


@contextlib.contextmanager
def _example(name: str) -> Iterator[Any]:
    """``examples/<name>.py`` imported (not run), its changes to the environment and
    ``sys.path`` undone afterwards."""
    environ, path = dict(os.environ), list(sys.path)
    spec = importlib.util.spec_from_file_location(
        f"readme_example_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)
        sys.path[:] = path
        sys.modules.pop("corpus", None)  # examples/corpus.py, imported by the example


def _block_starting(prefix: str) -> Block:
    found = [b for b in output_blocks() if b.lines and b.lines[0].startswith(prefix)]
    assert len(found) == 1, f"the pages show {len(found)} output blocks starting {prefix!r}"
    return found[0]


def test_the_framework_table_shows_the_examples_own_scores() -> None:
    """Each row's cells are the score `examples/framework_sinks.py` computes for the sample;
    that every framework's column equals it is `test_examples.py`'s check of the example."""
    if importlib.util.find_spec("tokenizers") is None:
        pytest.skip("faithfulness:offline needs the local extra (pip install 'ragbridge[local]')")
    from ragbridge.core import Scorer

    block = _block_starting("sample ")
    with _example("framework_sinks") as sinks:
        scorer = Scorer([sinks.METRIC])
        direct = {s.id: sinks._cell(scorer.score(s)["faithfulness"].value) for s in sinks.SAMPLES}
    assert block.lines[0].split() == ["sample", "ragbridge", "langsmith", "deepeval", "llamaindex"]
    rows = [line.split() for line in block.lines[1:] if line.split()[0] in direct]
    assert len(rows) >= 2
    for sid, *cells in rows:
        assert cells == [direct[sid]] * 4, (sid, cells, direct[sid])


QUIET = [f"-pno:{name}" for name in ("cacheprovider", "asyncio", "deepeval", "langsmith_plugin")]
"""Plugins the nested pytest run leaves out: only ragbridge's is under test (no banners)."""


def test_the_pytest_failure_is_what_pytest_prints(pytester: pytest.Pytester) -> None:
    """The pytest failure the pages show: `assert_rag` as in `examples/framework_sinks.py` (its
    q1, answered 30 days where the context says 25), run by pytest, whose ``E`` lines must be the
    page's."""
    if importlib.util.find_spec("tokenizers") is None:
        pytest.skip("faithfulness:offline needs the local extra (pip install 'ragbridge[local]')")
    block = _block_starting("E ")
    pytester.makepyfile(
        test_readme_failure=f"""
        import sys
        sys.path.insert(0, {str(ROOT / "examples")!r})
        from framework_sinks import METRIC, SAMPLES
        from ragbridge.adapters.pytest_plugin import assert_rag

        def test_rag():
            q1 = next(s for s in SAMPLES if s.id == "q1")
            answer = "New employees receive 30 days of paid leave per year."
            wrong = q1.model_copy(update={{"id": "q1-wrong", "answer": answer}})
            assert_rag(wrong, [METRIC], {{"faithfulness": 0.9}})
        """
    )
    environ = dict(os.environ)
    try:
        result = pytester.runpytest_inprocess(*QUIET)
    finally:
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)
    result.assert_outcomes(failed=1)
    missing = not_printed(block.lines, result.outlines)
    assert not missing, _explain(f"{block.where}: pytest", missing, result.outlines)


def test_the_id_warning_is_what_eval_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warning for LangChain's random ``Document.id``s, on samples shaped like a LangChain
    run's (ids are fresh UUIDs, masked in both texts)."""
    block = _block_starting("ragbridge: warning: ranking measures:")
    shape = re.search(r"(\d+) of (\d+) labelled samples .* vs labelled '(\w+)-0'", block.lines[0])
    assert shape is not None
    rows = [
        {
            "id": f"q{i}",
            "question": f"What does policy {i} say?",
            "contexts": [
                {"id": str(uuid.uuid4()), "text": f"Policy {i} says this."} for _ in range(2)
            ],
            "relevance": {f"{shape[3]}-{i}": 1},
        }
        for i in range(int(shape[2]))
    ]
    (tmp_path / "langchain.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    code, printed = run_cli(["eval", "langchain.jsonl", "--metrics", "recall@5"])
    assert code == 0, printed
    uuid_ = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    masked = [uuid_.sub("<uuid>", line) for line in printed]
    missing = not_printed([uuid_.sub("<uuid>", line) for line in block.lines], masked)
    assert not missing, _explain(f"{block.where}: ragbridge eval", missing, printed)


# -- timings: named scripts, not measured here -----------------------------------------------------


def test_every_script_the_readme_names_exists() -> None:
    named = set(re.findall(r"python ((?:benchmarks|examples)/[\w/]+\.py)", _prose()))
    assert len(named) >= 10
    assert not [n for n in named if not (ROOT / n).is_file()]


def test_the_demo_timings_come_from_the_script_the_readme_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both places that time the demo name one script, agree once rounded, and the script
    prints a cold and a warm line in that form (its ``ragbridge demo`` subprocess stubbed, so
    nothing is timed: the numbers printed here mean nothing, the form does)."""
    intro = _quoted(
        r"writes `ragbridge-demo/`; (\d+) s on 2 cores after the install, (\d+) s for a rerun"
        r"[^`]*`ragbridge-demo/cache.sqlite`[^`]*`python (benchmarks/\w+\.py)`"
    )
    bench = _quoted(
        r"\*\*Demo rerun\*\* — `python (benchmarks/\w+\.py)`[^*]*"
        r"\*\*([\d.]+) s cold and ([\d.]+) s rerun\*\*"
    )
    assert intro[3] == bench[1]
    assert (int(intro[1]), int(intro[2])) == (round(float(bench[2])), round(float(bench[3])))
    script = ROOT / bench[1]
    assert script.is_file()

    def instant(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(subprocess, "run", instant)
    monkeypatch.setattr(sys, "argv", [str(script)])
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(r"^cold \(empty folder\):\s+\d+\.\d s", out, re.M), out
    assert re.search(r"^warm \(rerun 1\):\s+\d+\.\d s", out, re.M), out


SHORT_ANSWER = ROOT.parent / "shared" / "data" / "short_answer_dev"


def test_the_short_answer_agreement_figures_are_what_agreement_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kappa and AUROC the walkthrough quotes for ``--dataset short-answer`` (its output
    blocks are `test_readme_walkthrough.py`'s; this figure is in its prose). The two runs share
    an embedding cache, which saves the second the vectors of the right answers and changes no
    value (a cached vector is the one computed, bit for bit)."""
    if not SHORT_ANSWER.exists():
        pytest.skip(f"the short-answer dev set is not in this workspace ({SHORT_ANSWER})")
    if importlib.util.find_spec("tokenizers") is None:
        pytest.skip("faithfulness:offline needs the local extra (pip install 'ragbridge[local]')")
    flags = _quoted(
        r"`--dataset short-answer HALUEVAL_DIR (--metrics \S+) --fabricated (\w+)`, or `(\w+)`"
    )
    figures = _quoted(
        r"reaches kappa (\d\.\d+) and AUROC (\d\.\d+) \(one-turn fabrications\) or (\d\.\d+) and"
        r" (\d\.\d+) \(multi-turn\)"
    )
    monkeypatch.chdir(ROOT)
    for fabricated, kappa, auroc in (
        (flags[2], figures[1], figures[2]),
        (flags[3], figures[3], figures[4]),
    ):
        argv = ["agreement", "--dataset", "short-answer", str(SHORT_ANSWER), *flags[1].split(),
                "--fabricated", fabricated, "--cache", str(tmp_path / "cache.sqlite")]  # fmt: skip
        code, printed = run_cli(argv)
        assert code == 0, printed
        row = next(line.split() for line in printed if line.startswith("faithfulness:offline "))
        # metric n kappa@0.5 kappa@best (t) spearman AUROC [lo, hi] ...
        assert (row[2], row[6]) == (kappa, auroc), (fabricated, printed)


# -- "When a run fails": the exit-code table's examples ------------------------------------------


def _exit_examples() -> dict[int, list[str]]:
    """The ``ragbridge: error: ...`` lines the exit-code table shows, by exit code."""
    examples: dict[int, list[str]] = {}
    for line in page_text(FAILURES_PAGE).splitlines():
        row = re.match(r"\| `(\d+)` \|", line)
        if row:
            examples[int(row[1])] = re.findall(r"`(ragbridge: error: [^`]+)`", line)
    return examples


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def test_the_exit_code_table_shows_what_eval_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example line of the table, from an ``eval`` that ends with that code: samples
    without a reference (1), a context text that is a number (2), a judge endpoint answering
    401 (the suite's fake OpenAI server on 127.0.0.1) or a closed port (3). Also the measured
    figure beside it: how many requests a wrong key costs on 42 samples."""
    from fake_openai import FakeOpenAI

    examples = _exit_examples()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-readme")
    answered = [
        {
            "id": f"q{i}",
            "question": f"What colour is thing {i}?",
            "answer": f"Thing {i} is blue.",
            "contexts": [{"id": f"d{i}", "text": f"Thing {i} is blue."}],
        }
        for i in range(42)
    ]
    runs: list[tuple[int, str, list[str]]] = []
    (failed_bar,) = examples[1]
    cells = re.search(r"context_recall: (\d+) of (\d+) cells failed", failed_bar)
    assert cells is not None, failed_bar
    _write_jsonl(tmp_path / "no_reference.jsonl", answered[: int(cells[2])])
    runs.append((1, failed_bar, ["eval", "no_reference.jsonl", "--metrics", "context_recall"]))
    (usage,) = examples[2]
    bad = re.search(r"error: (\S+):1: contexts\[(\d+)\]\.text: expected a string, got (\d+)", usage)
    assert bad is not None, usage
    contexts: list[dict[str, Any]] = [{"text": "fine"}] * int(bad[2]) + [{"text": int(bad[3])}]
    _write_jsonl(tmp_path / bad[1], [{"id": "q1", "question": "Why?", "contexts": contexts}])
    runs.append((2, usage, ["eval", bad[1], "--metrics", "recall@5"]))
    unauthorized, refused = examples[3]
    closed = re.search(r"connection refused at (\S+) on", refused)
    assert closed is not None, refused
    _write_jsonl(tmp_path / "answered.jsonl", answered)
    judged = [
        "eval",
        "answered.jsonl",
        "--metrics",
        "faithfulness",
        "--judge",
        "openai:gpt-4o-mini",
    ]
    runs.append((3, refused, [*judged, "--base-url", closed[1]]))
    for code, shown, argv in runs:
        got, printed = run_cli(argv)
        assert got == code, printed
        assert not not_printed([shown], printed), _explain(
            f"ragbridge {' '.join(argv)}", [shown], printed
        )
    measured = _quoted(
        r"measured: (\d+) samples, 401 on every call → (\d+) requests, [\d.]+ s, exit (\d)"
    )
    assert int(measured[1]) == len(answered)
    with FakeOpenAI() as server:
        server.script("chat", "401")
        got, printed = run_cli([*judged, "--base-url", server.base_url])
        assert (got, server.count("chat")) == (int(measured[3]), int(measured[2])), printed
    assert not not_printed([unauthorized], printed), _explain("401", [unauthorized], printed)
