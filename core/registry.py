"""What a measure is, and who computes it: the measure × provider registry.

A *measure* is a quantity with one definition (faithfulness: the share of the answer's claims the
contexts support). A *provider* is one way of computing it: an LLM judge (``llm``), embeddings and
string checks (``offline``), an entailment model (``nli``), a string library (``string``), or
another framework's implementation (``ragas``, ``deepeval``). Keeping the two apart is what lets
ragbridge compare providers of one measure on the same samples, and what lets a new provider be
added without editing the measure: it registers here, and `resolve` finds it by name,
``"faithfulness:offline"``.

The same split is how ir_measures separates a measure from the tools that compute it; the
ranking measures of `ragbridge.core.retrieval` already work that way, and are listed here as one
more kind of measure.

This module holds data and lookup only, and imports no measure: the built-in measures register
when `ragbridge.core.metrics` is imported, adapters' providers through the ``ragbridge.providers``
entry point group (loaded the first time a name is not found, or the whole table is asked for).
A user's provider registers with `register_provider` (a decorator) or the same entry point group.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .metrics.base import Metric, MetricContext
    from .results.evaluation import Score
    from .sample import Sample

__all__ = [
    "ENTRY_POINT_GROUP",
    "NEEDS",
    "REGISTRY",
    "Compute",
    "MeasureSpec",
    "ProviderSpec",
    "Registry",
    "UnknownMeasureError",
    "register_measure",
    "register_provider",
]

ENTRY_POINT_GROUP = "ragbridge.providers"
"""Entry points in this group are loaded before a name is reported unknown. Each names a callable
taking the `Registry` (``mypkg.ragbridge_plugin:register``) or a module that registers on import."""

NEEDS: tuple[str, ...] = ("judge", "embedder", "nli", "reference", "labels")
"""What a provider can need, in the order `ragbridge metrics` prints it."""

Compute = Callable[["Metric", "Sample", "MetricContext"], Awaitable["Score"]]
"""How a provider scores one sample: ``async (metric, sample, ctx) -> Score``. The metric carries
the provider's settings (thresholds); ``ctx`` the judge, embedder and NLI model."""


class UnknownMeasureError(KeyError, ValueError):
    """A name no measure or provider answers to. The message suggests the closest names.

    Both a KeyError (what a lookup by name raises) and a ValueError (what bad input raises), so
    callers written against either keep working; ``str()`` is the plain message.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class MeasureSpec:
    """One measure: its name, what it means, what it reads, and what it does at the edges.

    ``edges`` says, in a few words each, what the measure returns for the cases every provider
    meets (``"no claims"``, ``"no contexts"``, ``"no reference"``, ``"abstention"``): one policy
    per measure, so two providers of it cannot disagree on what an empty answer is worth.
    ``kind`` groups the table: ``judge`` (judge-based RAG measures and their offline variants),
    ``string`` (reference-based string measures), ``ranking`` (trec_eval measures over ids),
    ``agent`` (an agent's tool calls and steps: `ragbridge.core.agent`), ``criteria`` (a team's
    own, `ragbridge.core.criteria`).
    """

    name: str
    meaning: str
    requires: tuple[str, ...] = ()
    higher_is_better: bool = True
    edges: Mapping[str, str] = field(default_factory=dict)
    kind: str = "judge"
    factory: Callable[[], Metric] | None = None
    """Builds the measure's metric, default-configured; another provider is then selected with
    `Metric.use_provider`."""


@dataclass(frozen=True)
class ProviderSpec:
    """One way of computing a measure.

    ``needs`` is a subset of `NEEDS`; ``judge_calls`` is what a sample costs in judge calls
    (``"2, shared"``: shared with other measures of the same sample, counted once), ``how``
    one line on the method. ``compute`` scores a sample for a metric built with this provider;
    ``build`` makes a default-configured metric (when absent, the measure's factory is used).
    ``extra`` names the pip extra the provider needs, for the message of a missing import;
    ``note`` says where its definition differs from the measure's.
    """

    measure: str
    name: str
    how: str
    needs: frozenset[str] = frozenset()
    judge_calls: str = "0"
    compute: Compute | None = None
    build: Callable[[], Metric] | None = None
    extra: str | None = None
    note: str = ""
    """Where this provider's definition differs from the measure's (the comparison prints it)."""
    reads: frozenset[str] | None = None
    """The `Sample` fields ``compute`` reads, in the notation of `Metric.reads`; a kept Score of
    this provider is keyed on them (with the measure class's own). None: not declared, so the
    key covers the whole sample, metadata included (`ragbridge.core.cache.result_key`)."""
    definition: str = ""
    """This provider's own one-line definition, when it computes something other than the
    measure's ``meaning`` (RAGAS's exact match compares raw strings where the measure is
    SQuAD-normalised). The table (`Registry.rows`, ``ragbridge metrics``, the docs) shows it in
    place of the measure's, so no row claims a definition its provider does not compute."""

    @property
    def key(self) -> str:
        return f"{self.measure}:{self.name}"


def normal_name(name: str) -> str:
    """``"Context-Recall"``, ``"ContextRecall"``, ``" context_recall "`` -> ``context_recall``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[-\s_]+", "_", text).lower()


class Registry:
    """Measures by name, and their providers in registration order (the first is the default).

    Thread-safe: registration may happen while another thread resolves (an entry point loaded
    on a worker thread).
    """

    def __init__(self) -> None:
        self._measures: dict[str, MeasureSpec] = {}
        self._providers: dict[str, dict[str, ProviderSpec]] = {}
        self._lock = threading.RLock()
        self._pending: dict[str, list[ProviderSpec]] = {}
        self._plugins_loaded = False
        self._plugins_lock = threading.RLock()
        self.plugin_errors: list[str] = []
        """Entry points that failed to load, with why (shown by ``ragbridge metrics``)."""

    # ------------------------------------------------------------------ registration

    def add_measure(self, spec: MeasureSpec, default: ProviderSpec | None = None) -> MeasureSpec:
        """Add a measure, with its ``default`` provider first when given."""
        with self._lock:
            known = self._measures.get(spec.name)
            if known is not None and known != spec:
                raise ValueError(f"a measure named {spec.name!r} is already registered")
            self._measures[spec.name] = spec
            self._providers.setdefault(spec.name, {})
            if default is not None:
                self.add_provider(default)
            for provider in self._pending.pop(spec.name, []):
                self.add_provider(provider)
            return spec

    def add_provider(self, spec: ProviderSpec) -> ProviderSpec:
        unknown = sorted(spec.needs - set(NEEDS))
        if unknown:
            raise ValueError(f"{spec.key}: unknown needs {unknown}; use some of {list(NEEDS)}")
        with self._lock:
            if spec.measure not in self._measures:
                # Import order must not matter: a provider module may load before its measure.
                self._pending.setdefault(spec.measure, []).append(spec)
                return spec
            providers = self._providers[spec.measure]
            known = providers.get(spec.name)
            if known is not None and known != spec:
                raise ValueError(f"provider {spec.key!r} is already registered")
            providers[spec.name] = spec
            return spec

    def remove_provider(self, measure: str, name: str) -> None:
        """Take a provider out (a test's double, a plugin being reloaded)."""
        with self._lock:
            providers = self._providers.get(normal_name(measure), {})
            if name not in providers:
                raise UnknownMeasureError(f"no provider {measure}:{name} to remove")
            del providers[name]

    def remove_measure(self, name: str) -> None:
        """Take a measure and its providers out (a user's criterion being replaced by its
        edited version, `ragbridge.core.criteria.register_criteria`)."""
        with self._lock:
            key = normal_name(name)
            if key not in self._measures:
                raise UnknownMeasureError(f"no measure {name!r} to remove")
            del self._measures[key]
            self._providers.pop(key, None)

    # ------------------------------------------------------------------ lookup

    def measure(self, name: str) -> MeasureSpec:
        found = self._find(name)
        if found is None:
            raise UnknownMeasureError(self.unknown_message(name))
        return found

    def _find(self, name: str) -> MeasureSpec | None:
        wanted = normal_name(name)
        for attempt in range(2):
            with self._lock:
                found = self._measures.get(wanted) or next(
                    (
                        m
                        for m in self._measures.values()
                        if m.name.replace("_", "") == wanted.replace("_", "")
                    ),
                    None,
                )
            if found is not None or attempt == 1:
                return found
            self.load_plugins()
        return None

    def providers(self, measure: str) -> list[ProviderSpec]:
        """The providers of ``measure``, the default first."""
        spec = self.measure(measure)
        with self._lock:
            return list(self._providers[spec.name].values())

    def provider(self, measure: str, provider: str | None = None) -> ProviderSpec:
        """``provider`` of ``measure`` (None: the default); unknown names say what exists."""
        spec = self.measure(measure)
        for attempt in range(2):
            with self._lock:
                providers = self._providers[spec.name]
                if provider is None and providers:
                    return next(iter(providers.values()))
                if provider is not None and provider.strip() in providers:
                    return providers[provider.strip()]
            if attempt == 0:
                self.load_plugins()
        known = ", ".join(self._providers[spec.name]) or "none"
        raise UnknownMeasureError(
            f"metric {spec.name!r} has no provider {provider!r}; use {known}"
            + _hint(provider or "", list(self._providers[spec.name]))
        )

    def measures(self, *, kind: str | None = None, plugins: bool = True) -> list[MeasureSpec]:
        """Every registered measure (of ``kind``), in registration order."""
        if plugins:
            self.load_plugins()
        with self._lock:
            found = [m for m in self._measures.values() if kind is None or m.kind == kind]
            return sorted(found, key=self._rank)

    def _rank(self, measure: MeasureSpec) -> tuple[int, int]:
        """Table order: judge measures, then offline-only ones, strings, ranking, the rest."""
        kinds = ("judge", "string", "ranking", "agent")
        kind = kinds.index(measure.kind) if measure.kind in kinds else len(kinds)
        default = next(iter(self._providers[measure.name].values()), None)
        judged = default is not None and "judge" in default.needs
        return kind, 0 if judged else 1

    def pairs(self, *, plugins: bool = True) -> list[tuple[MeasureSpec, ProviderSpec]]:
        """Every measure × provider pair, the table `ragbridge metrics` prints."""
        out: list[tuple[MeasureSpec, ProviderSpec]] = []
        for measure in self.measures(plugins=plugins):
            with self._lock:
                out.extend((measure, p) for p in self._providers[measure.name].values())
        return out

    def build(self, name: str) -> Metric:
        """A default-configured metric for ``"measure"`` or ``"measure:provider"``."""
        base, colon, provider_name = name.partition(":")
        found = self._find(base)
        if found is None:
            raise UnknownMeasureError(self.unknown_message(name))
        measure = found
        provider = self.provider(measure.name, provider_name.strip() if colon else None)
        if provider.build is not None:
            return provider.build()
        if measure.factory is None:
            raise UnknownMeasureError(f"measure {measure.name!r} has no way to build a metric")
        return measure.factory().use_provider(provider.name)

    # ------------------------------------------------------------------ plugins and messages

    def load_plugins(self) -> None:
        """Load the ``ragbridge.providers`` entry points once (a failing one is recorded).

        Under a lock of its own, not the registry's: a plugin's import may wait on an import
        another thread holds while that thread registers a measure.
        """
        with self._plugins_lock:  # reentrant: a plugin may look a measure up while it loads
            if self._plugins_loaded:
                return
            self._plugins_loaded = True
            for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                try:
                    loaded = point.load()
                    if callable(loaded):
                        loaded(self)
                except Exception as exc:  # a broken plugin must not break every lookup
                    self.plugin_errors.append(f"{point.name} ({point.value}): {exc}")

    def rows(self, *, plugins: bool = True) -> list[dict[str, str]]:
        """The measure × provider table as rows: what `ragbridge metrics` and the docs print.

        ``needs`` joins the provider's own needs with what the measure reads (a reference,
        relevance labels), so the row says everything a user must supply. ``meaning`` is the
        provider's own `ProviderSpec.definition` where it has one, else the measure's.
        """
        out = []
        for measure, provider in self.pairs(plugins=plugins):
            needs = set(provider.needs)
            needs |= {"reference"} & set(measure.requires)
            needs |= {"labels"} if "relevance" in measure.requires else set()
            out.append(
                {
                    "measure": measure.name,
                    "provider": provider.name,
                    "kind": measure.kind,
                    "needs": ", ".join(n for n in NEEDS if n in needs) or "-",
                    "judge calls": provider.judge_calls,
                    "direction": "higher" if measure.higher_is_better else "lower",
                    "meaning": provider.definition or measure.meaning,
                    "how": provider.how,
                }
            )
        return out

    def markdown(self, *, plugins: bool = True) -> str:
        """The table in Markdown: one row per measure × provider (generated, never typed)."""
        columns = ("measure", "provider", "needs", "judge calls", "meaning")
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in self.rows(plugins=plugins):
            cells = [f"`{row['measure']}`", f"`{row['provider']}`", *(row[c] for c in columns[2:])]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def dangling(self) -> list[ProviderSpec]:
        """Providers registered for a measure that never was (a typo in a plugin, usually)."""
        with self._lock:
            return [p for specs in self._pending.values() for p in specs]

    def suggest(self, name: str, *, cutoff_example: int = 5) -> list[str]:
        """The closest known names to ``name`` (a typo, a missing cutoff, a wrong provider's
        measure): ``fathfulness`` → faithfulness, ``recal@5`` → recall@5, ``recall`` → recall@5."""
        base, colon, provider = name.strip().partition(":")
        with self._lock:
            names = list(self._measures)
        cut_families = [n[:-2] for n in names if n.endswith("@k")]
        plain_names = [n for n in names if not n.endswith("@k")]
        cut = re.fullmatch(r"(?P<base>.+?)@(?P<k>\d+)", base.strip())
        if cut is not None:
            return [f"{f}@{cut['k']}" for f in _close(normal_name(cut["base"]), cut_families)]
        plain = normal_name(base)
        if plain in cut_families and plain not in plain_names:
            return [f"{plain}@{cutoff_example}"]
        found = _close(plain, plain_names)
        found += [f"{f}@{cutoff_example}" for f in _close(plain, cut_families) if f not in found]
        return [f"{f}{colon}{provider}" if colon and f in plain_names else f for f in found]

    def unknown_message(self, name: str) -> str:
        """``unknown measure 'fathfulness'; did you mean faithfulness? — known: …``."""
        found = self.suggest(name)
        hint = f"; did you mean {' or '.join(found)}?" if found else ""
        with self._lock:
            names = list(self._measures)
        return f"unknown measure {name.strip()!r}{hint} — known: {', '.join(names)}"


def _close(word: str, candidates: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(word, list(dict.fromkeys(candidates)), n=3, cutoff=0.7)


def _hint(word: str, candidates: Iterable[str]) -> str:
    found = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.7)
    return f"; did you mean {' or '.join(found)}?" if found else ""


REGISTRY = Registry()
"""The process-wide registry `ragbridge.core.metrics.resolve` reads."""


def register_measure(
    spec: MeasureSpec, *, default: ProviderSpec | None = None, registry: Registry | None = None
) -> MeasureSpec:
    """Add a measure (idempotent for the same spec; a different one under a taken name fails),
    with its ``default`` provider first when given."""
    return (registry or REGISTRY).add_measure(spec, default)


def register_provider(
    measure: str,
    name: str,
    *,
    how: str,
    needs: Iterable[str] = (),
    judge_calls: str = "0",
    build: Callable[[], Metric] | None = None,
    extra: str | None = None,
    note: str = "",
    reads: Iterable[str] | None = None,
    definition: str = "",
    registry: Registry | None = None,
) -> Callable[[Any], Any]:
    """Decorator registering ``async (metric, sample, ctx) -> Score`` as a provider of a measure.

    ``@register_provider("faithfulness", "mynli", how="my entailment model", needs=["nli"])``
    makes ``"faithfulness:mynli"`` resolvable; the measure's own checks (required fields, edge
    policy, abstentions) still run before the function is called. Decorating a class (a `Metric`
    subclass that scores by itself) registers it as the provider's ``build`` instead.
    ``reads`` names the sample fields the function reads (see `ProviderSpec.reads`); without
    it a kept Score of the provider is keyed on the whole sample. ``definition`` is the
    provider's own one-line definition when it differs from the measure's meaning.
    """

    def decorate(target: Any) -> Any:
        is_class = isinstance(target, type)
        spec = ProviderSpec(
            measure=measure,
            name=name,
            how=how,
            needs=frozenset(needs),
            judge_calls=judge_calls,
            compute=None if is_class else target,
            build=target if is_class else build,
            extra=extra,
            note=note,
            reads=None if reads is None else frozenset(reads),
            definition=definition,
        )
        (registry or REGISTRY).add_provider(spec)
        return target

    return decorate
