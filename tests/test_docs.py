"""The documentation site is whole and says what the code does.

* The measures page is generated from the registry (`docs/hooks.py`): every measure and every
  provider, with what it needs, its judge calls, how it computes, and its own definition and
  difference where it has them; its table is the one ``ragbridge metrics --markdown`` prints.
* The reference documents every public name: each public module (the list of
  `test_public_imports.py`) has a reference page, and griffe — what mkdocstrings reads — finds each
  of its names, resolved to the object that defines it.
* Every page under ``docs/`` is in mkdocs.yml's ``nav``, and every ``nav`` entry exists.
* The README stays short, keeps the lines CI runs word for word, and its links lead to files.

The code blocks of every page run in `test_readme.py`, `test_readme_outputs.py` and
`test_readme_walkthrough.py`; ``mkdocs build --strict`` (in ``.ci/run``) checks the links between
pages and that mkdocstrings renders every reference page.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import warnings
from types import ModuleType

import pytest

from ragbridge.core import metrics  # noqa: F401  (registers the built-in measures)
from ragbridge.core.registry import REGISTRY
from tests.test_public_imports import PUBLIC
from tests.test_readme import PAGES, ROOT

DOCS = ROOT / "docs"
README_MAX_LINES = 300


def _hooks() -> ModuleType:
    """docs/hooks.py, loaded as mkdocs loads it (by path: it is not a package module)."""
    spec = importlib.util.spec_from_file_location("ragbridge_docs_hooks", DOCS / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the measures page


def test_the_measures_page_lists_every_measure_and_provider_the_registry_knows() -> None:
    hooks = _hooks()
    source = (DOCS / hooks.PAGE).read_text(encoding="utf-8")
    assert source.count(hooks.MARKER) == 1, "the measures page lost its generated part's marker"
    generated, errors = hooks.measures_markdown()
    assert errors == [], f"provider plugins failed to load, so the page would be short: {errors}"
    pairs = REGISTRY.pairs()
    assert len(pairs) >= 50
    for measure in REGISTRY.measures():
        assert f"### `{measure.name}`" in generated, measure.name
        for case, rule in measure.edges.items():
            assert f"| {case} | {rule} |" in generated, (measure.name, case)
    rows = {(r["measure"], r["provider"]): r for r in REGISTRY.rows()}
    for measure, provider in pairs:
        row = rows[(measure.name, provider.name)]
        line = next(
            (x for x in generated.splitlines() if x.startswith(f"| `{provider.key}` |")), None
        )
        assert line is not None, f"{provider.key} has no row of its own"
        assert f"| {row['needs']} |" in line, (provider.key, line)
        assert provider.how.replace("|", "\\|") in line, (provider.key, line)
        if provider.definition:
            assert f"`{provider.key}` computes: {provider.definition}." in generated
        if provider.note:
            assert f"`{provider.key}` differs: {provider.note}." in generated


def test_the_measures_table_is_the_one_ragbridge_metrics_prints() -> None:
    generated, _ = _hooks().measures_markdown()
    table = REGISTRY.markdown()
    assert table in generated
    assert table.count("\n") == len(REGISTRY.pairs()) + 2  # header, rule, a row per pair
    assert "registry table" not in (DOCS / "architecture.md").read_text(encoding="utf-8"), (
        "a hand-kept copy of the registry's table: the measures page generates it"
    )


# --------------------------------------------------------------------------- the reference


def _reference_pages() -> dict[str, str]:
    """Each module a reference page documents (``::: module``), with the page."""
    found: dict[str, str] = {}
    for page in sorted((DOCS / "reference").rglob("*.md")):
        for module in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(encoding="utf-8"), re.M):
            found[module] = page.relative_to(ROOT).as_posix()
    return found


def test_every_public_module_has_a_reference_page() -> None:
    documented = _reference_pages()
    missing = sorted(set(PUBLIC) - set(documented))
    assert missing == [], f"public modules with no reference page: {missing}"


def _deprecated(module: str, name: str) -> bool:
    """Whether ``module.name`` is a former name kept for callers, which warns when used (it
    resolves through ``__getattr__`` to its replacement, and the reference documents that)."""
    try:
        imported = importlib.import_module(module)
    except ImportError:  # an optional framework missing: its names are not deprecated
        return False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(imported, name, None)
    return any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_griffe_finds_every_public_name_of_the_reference() -> None:
    """mkdocstrings renders what griffe sees: each public module's ``__all__`` read statically
    (the packages export lazily, through ``__getattr__``), each name resolved to its definition.
    A deprecated former name is exempt: it is documented under its new name."""
    griffe = pytest.importorskip("griffe", reason="the docs extra: pip install '.[docs]'")
    tree = _hooks().link_sources(ROOT)
    try:
        loader = griffe.GriffeLoader(search_paths=[str(tree)])
        for package in ("ragbridge.core", "ragbridge.adapters"):
            loader.load(package)
        loader.resolve_aliases(implicit=False, external=None)
        problems: list[str] = []
        for module_path, names in PUBLIC.items():
            module = loader.modules_collection[module_path]
            exported = {getattr(e, "name", e) for e in module.exports or ()}
            problems += [f"{module_path}.{n}: not in __all__" for n in names if n not in exported]
            for name in sorted(set(names) & exported):
                try:
                    member = module[name]
                    if member.is_alias:
                        member.final_target  # noqa: B018  (raises when the alias cannot resolve)
                except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError) as exc:
                    if not _deprecated(module_path, name):
                        problems.append(f"{module_path}.{name}: {type(exc).__name__} {exc}")
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    assert problems == [], "\n".join(problems)


# --------------------------------------------------------------------------- the site's pages


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    in_nav = [p for p in PAGES if p.startswith("docs/")]
    assert len(in_nav) == len(set(in_nav)), "a page is listed twice in mkdocs.yml's nav"
    assert not [p for p in in_nav if not (ROOT / p).is_file()], "nav entries with no page"
    on_disk = {p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(on_disk - set(in_nav)) == [], "pages mkdocs.yml's nav does not list"


def test_the_pages_the_issue_asks_for_are_there() -> None:
    expected = {
        "index.md", "getting-started.md", "measures.md", "failures.md", "conformance.md",
        "benchmarks.md", "architecture.md", "reference/index.md",
        *(f"coming-from/{name}.md" for name in ("langsmith", "llamaindex", "deepeval", "ragas")),
        *(f"how-to/{name}.md" for name in (
            "langchain", "llamaindex", "langsmith", "ragas", "deepeval",
            "ci-gate", "production", "cluster", "eval-set-lifecycle", "cli",
        )),
    }  # fmt: skip
    assert sorted(expected - {p.removeprefix("docs/") for p in PAGES}) == []


# --------------------------------------------------------------------------- the README


def test_the_readme_is_short_and_keeps_the_lines_ci_runs() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move some to docs/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    run = re.findall(r"^readme '(.+)'$", ci, re.M)
    assert len(run) == 2, run
    assert not [line for line in run if line not in lines], "CI runs lines the README lost"


def test_the_readmes_links_lead_to_files() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert len(local) >= 15, "the README should lead into the site"
    assert [t for t in local if not (ROOT / t).is_file()] == []


# --------------------------------------------------------------------------- the example criteria


def test_the_example_criteria_file_loads_as_the_criteria_page_shows_it() -> None:
    """`examples/criteria.yaml` is the file the criteria page's commands name: it must load,
    and its YAML block on the page must be the same criteria (one of each kind)."""
    import yaml

    from ragbridge.core.criteria import load_criteria

    loaded = load_criteria(ROOT / "examples" / "criteria.yaml")
    assert loaded.batch
    assert {spec.kind for spec in loaded.specs} == {"criterion", "aspect", "rubric"}
    page = (DOCS / "how-to" / "criteria.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert block is not None
    shown = yaml.safe_load(block.group(1))
    names = {spec.name for spec in loaded.specs}
    assert {entry["name"] for entry in shown["criteria"]} <= names
