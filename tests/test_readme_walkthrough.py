"""The walkthrough ("The eval set's life", a page of the documentation site) runs as written
and prints what it shows.

Each ``$ ragbridge ...`` line of the page's output blocks runs, in order, in one empty folder,
in-process, against a fake OpenAI-compatible server on 127.0.0.1 (`fake_openai.FakeOpenAI`) whose
replies come from `walkthrough_judge`: the commands keep their ``--judge openai:gpt-4o-mini`` and
the server stands in for the endpoint, as ``OPENAI_BASE_URL`` would point a reader's shell at
theirs. The two people who fill in the form are played by `walkthrough_judge.annotate`, just
before the command that imports their files.

Every command must exit 0, and every output line the page shows under it (``...`` marks
omitted lines) must appear in what the command printed, in the same order. A command naming a
dataset placeholder (``FAITHBENCH_DIR``) runs on the development copy in ``../shared/data`` when
it is there, and is skipped otherwise.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import walkthrough_judge
from fake_openai import FakeOpenAI

from ragbridge.adapters.cli.main import main
from tests.test_readme import WALKTHROUGH_PAGE, page_text, read_blocks

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"FAITHBENCH_DIR": ROOT.parent / "shared" / "data" / "faithbench_dev"}


@dataclass
class Step:
    argv: list[str]
    shown: list[str] = field(default_factory=list)


def walkthrough() -> list[Step]:
    """The ``$ ragbridge`` lines of the walkthrough page's output blocks, with the lines shown."""
    steps: list[Step] = []
    for block in read_blocks(page_text(WALKTHROUGH_PAGE), WALKTHROUGH_PAGE):
        if block.lang != "":
            continue
        current: Step | None = None
        for line in block.lines:
            if line.startswith("$ ragbridge "):
                current = Step(shlex.split(line[2:])[1:])
                steps.append(current)
            elif current is not None and line.strip() and line.strip() != "...":
                current.shown.append(line.rstrip())
    return steps


def test_the_walkthrough_has_every_step() -> None:
    commands = [" ".join(step.argv[:2]) for step in walkthrough()]
    for expected in ("testset handbook", "split eval.jsonl", "annotate export", "annotate import"):
        assert any(c.startswith(expected) for c in commands), expected
    assert any(c.startswith("agreement results.jsonl") for c in commands)
    assert any("--repeat" in step.argv for step in walkthrough())


def _in_order(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line not found (in order) among the printed ones, or None."""
    at = 0
    for line in shown:
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            return line
    return None


def test_the_walkthrough_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    walkthrough_judge.reset()
    with FakeOpenAI(answer=walkthrough_judge.answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-walkthrough")
        for step in walkthrough():
            argv = list(step.argv)
            placeholders = [w for w in argv if w in DATASETS]
            if any(not DATASETS[w].exists() for w in placeholders):
                continue  # a public data set this checkout does not have
            argv = [str(DATASETS[w]) if w in DATASETS else w for w in argv]
            if argv[:2] == ["annotate", "import"]:
                for name in argv[2:]:
                    person = re.fullmatch(r"labels-(\w+)\.jsonl", name)
                    if person:
                        walkthrough_judge.annotate(Path("tasks.jsonl"), person[1], Path(name))
            code = main(argv)
            captured = capsys.readouterr()
            printed = [line.rstrip() for line in (captured.err + captured.out).splitlines()]
            where = f"ragbridge {' '.join(step.argv)}"
            assert code == 0, f"{where}: exit {code}\n{captured.err}"
            missing = _in_order(step.shown, printed)
            assert missing is None, (
                f"{where}: {WALKTHROUGH_PAGE} shows\n  {missing}\nbut the command printed:\n"
                + "\n".join(printed)
            )
    assert Path("eval.test.lock.json").exists()
    assert Path("agreement.html").read_text(encoding="utf-8").count("groundedness") >= 1
