"""The core stays framework-free and cheap to import; the package maps both source folders."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "langchain", "langchain_core", "langchain_community", "llama_index", "langsmith", "ragas",
    "deepeval", "torch", "sentence_transformers", "transformers", "openai", "httpx", "requests",
    "aiohttp", "pandas", "scipy",
}  # fmt: skip


def test_core_source_imports_no_framework() -> None:
    offenders = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN and not _inside_function(tree, node):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert offenders == []


def _inside_function(tree: ast.AST, target: ast.AST) -> bool:
    """Imports inside a function (pandas in to_pandas) or under ``if TYPE_CHECKING:`` are fenced."""
    for node in ast.walk(tree):
        fenced = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        )
        if fenced and any(child is target for child in ast.walk(node)):
            return True
    return False


def test_importing_all_of_core_loads_no_framework() -> None:
    code = (
        "import json, sys\n"
        "import ragbridge.core as c\n"
        "for name in c.__all__: getattr(c, name)\n"
        "import ragbridge.core.retrieval, ragbridge.core.results.stats, ragbridge.adapters.cli\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert loaded & FORBIDDEN == set()


def test_bare_import_is_lazy() -> None:
    code = "import sys, ragbridge.core; print('pydantic' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_source_package_is_listed_for_the_build() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, name in (("core", "ragbridge.core"), ("adapters", "ragbridge.adapters")):
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found == listed
    assert set(__import__("ragbridge.core").core.__all__) == set(_exports())
    assert config["package-dir"] == {"ragbridge.core": "core", "ragbridge.adapters": "adapters"}
    assert (ROOT / "core" / "py.typed").exists()
    assert (ROOT / "adapters" / "py.typed").exists()


def _exports() -> dict[str, str]:
    from ragbridge import core

    return core._EXPORTS


def test_evaluate_is_the_function_even_after_its_module_is_imported() -> None:
    code = (
        "import ragbridge.core.scoring.runner\n"
        "from ragbridge.core import evaluate\n"
        "import ragbridge.core as c\n"
        "print(callable(evaluate), callable(c.evaluate))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def _imported(node: ast.AST, package: list[str], modules: set[str]) -> set[str]:
    """Core modules ``node`` imports at any depth (a function-level import still runs), except
    under ``if TYPE_CHECKING:``."""
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        children: list[ast.AST] = list(node.orelse)
    else:
        children = list(ast.iter_child_nodes(node))
    found: set[str] = set()
    if isinstance(node, ast.ImportFrom):
        base = package[: len(package) - node.level + 1] if node.level else []
        target = ".".join([*base, *([node.module] if node.module else [])])
        for alias in node.names:
            child = f"{target}.{alias.name}"
            found.add(child if child in modules else target)
    elif isinstance(node, ast.Import):
        found.update(alias.name for alias in node.names)
    for child in children:
        found |= _imported(child, package, modules)
    return {m for m in found if m in modules}


def _core_imports() -> dict[str, set[str]]:
    """Each core module's imports of other core modules."""
    root = ROOT / "core"
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(["ragbridge.core", *parts])] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        graph[name] = _imported(tree, package, set(modules)) - {name}
    return graph


def test_core_has_no_import_loop() -> None:
    """A loop makes import order matter and hides layering mistakes; issue 14 removed the two
    there were (results <-> tally, metrics.context_precision <-> metrics.offline, now
    metrics.providers.offline)."""
    graph = _core_imports()
    assert graph["ragbridge.core.metrics.providers.offline.context_precision"]  # walk sees imports
    loops = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    loops.append(" -> ".join([*path, nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert loops == []
