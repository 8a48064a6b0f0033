"""MkDocs hooks: what the site generates instead of keeping by hand.

* The measures page (``measures.md``) lists every measure and provider the registry knows
  (`ragbridge.core.registry`, entry-point plugins included), with what each needs, what a sample
  costs in judge calls, how it computes and where its definition differs. The page's source holds
  a marker, ``<!-- registry: measures -->``, that `measures_markdown` replaces at build time, so a
  provider added to the registry appears on the site with no edit here. A plugin that fails to
  load is a build warning (``mkdocs build --strict`` fails): the page would otherwise be short.
* mkdocstrings reads the source with griffe, which finds a package by its folder name. The two
  source folders ``core/`` and ``adapters/`` are ``ragbridge.core`` and ``ragbridge.adapters``
  only through setuptools' ``package-dir``, so the build links them under a temporary
  ``ragbridge/`` folder and points the Python handler there. Nothing is written into the
  repository.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.hooks.ragbridge")

MARKER = "<!-- registry: measures -->"
PAGE = "measures.md"
KINDS = {
    "judge": "Measures of the answer and the contexts",
    "string": "Reference-based string measures",
    "ranking": "Ranking measures over context ids",
    "agent": "Measures of an agent's tool calls and steps",
    "criteria": "A team's own criteria",
}
_source_tree: Path | None = None


# --------------------------------------------------------------------------- the measures page


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def measures_markdown() -> tuple[str, list[str]]:
    """The measures page's generated part, and the plugins that failed to load (with why).

    One table of every measure × provider, as ``ragbridge metrics --markdown`` prints it, then
    one section per measure: its meaning, the fields it reads, its direction, its policy at the
    edges, and each provider with its needs, judge calls, method and, where it computes
    something else, its own definition and how that differs.
    """
    from ragbridge.core import metrics  # importing it registers the built-in measures
    from ragbridge.core.registry import REGISTRY

    rows = {(r["measure"], r["provider"]): r for r in REGISTRY.rows()}
    out = [
        "## Every measure and provider",
        "",
        "One row per measure × provider: what a provider needs (judge, embedder, NLI model, a "
        "reference, relevance labels), its judge calls per sample, and the definition it "
        "computes: the measure's, or the provider's own where it differs.",
        "",
        REGISTRY.markdown(),
    ]
    kind = None
    for measure in REGISTRY.measures():
        if measure.kind != kind:
            kind = measure.kind
            out += [f"## {KINDS.get(kind, kind.capitalize())}", ""]
        out += [f"### `{measure.name}`", "", f"{measure.meaning[0].upper()}{measure.meaning[1:]}."]
        facts = [
            f"reads: {', '.join(f'`{f}`' for f in measure.requires) or 'nothing'}",
            f"{'higher' if measure.higher_is_better else 'lower'} is better",
        ]
        name = getattr(measure.factory, "__name__", "")  # the metric class, when it is one
        if name and getattr(metrics, name, None) is measure.factory:
            path = f"ragbridge.core.metrics.{name}"
            facts.append(f"class: [`{path}`][{path}]")  # a link into the reference (autorefs)
        line = "; ".join(facts)
        out += ["", f"{line[0].upper()}{line[1:]}.", ""]
        if measure.edges:
            out += ["| at the edge | result |", "|---|---|"]
            out += [f"| {_cell(case)} | {_cell(rule)} |" for case, rule in measure.edges.items()]
            out.append("")
        out += ["| provider | needs | judge calls | how |", "|---|---|---|---|"]
        notes = []
        for provider in REGISTRY.providers(measure.name):
            needs = rows[(measure.name, provider.name)]["needs"]
            how = _cell(provider.how)
            if provider.extra:
                how += f' (`pip install ".[{provider.extra}]"`)'
            out.append(f"| `{provider.key}` | {needs} | {_cell(provider.judge_calls)} | {how} |")
            if provider.definition:
                notes.append(f"- `{provider.key}` computes: {provider.definition}.")
            if provider.note:
                notes.append(f"- `{provider.key}` differs: {provider.note}.")
        out += ["", *notes, ""] if notes else [""]
    return "\n".join(out).rstrip() + "\n", list(REGISTRY.plugin_errors)


# --------------------------------------------------------------------------- mkdocs events


def link_sources(root: Path) -> Path:
    """A new temporary folder holding ``ragbridge/core`` and ``ragbridge/adapters``, links to the
    repository's ``core/`` and ``adapters/``: the layout griffe needs to find ``ragbridge.*``.
    The caller removes it."""
    tree = Path(tempfile.mkdtemp(prefix="ragbridge-docs-src-"))
    package = tree / "ragbridge"
    package.mkdir()
    for folder in ("core", "adapters"):
        (package / folder).symlink_to(root / folder, target_is_directory=True)
    return tree


@event_priority(100)  # before mkdocstrings' own on_config, which may build the handler
def on_config(config: Any) -> Any:
    """Give mkdocstrings' Python handler the linked source tree as its search path."""
    global _source_tree
    on_shutdown()  # `mkdocs serve` configures again on every rebuild
    if "mkdocstrings" not in config.plugins:  # a configuration without the reference
        return config
    _source_tree = link_sources(Path(config.config_file_path).resolve().parent)
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(_source_tree)]
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        log.warning("%s: no %s marker, so the registry's tables are not shown", PAGE, MARKER)
        return markdown
    generated, errors = measures_markdown()
    for error in errors:
        log.warning("%s: a provider plugin failed to load: %s", PAGE, error)
    return markdown.replace(MARKER, generated)


def on_shutdown(**_: Any) -> None:
    """Remove the linked source tree (the links only: the repository is left alone)."""
    global _source_tree
    if _source_tree is not None:
        shutil.rmtree(_source_tree, ignore_errors=True)
        _source_tree = None
