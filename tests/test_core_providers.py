"""The core-side measure providers have one home, `ragbridge.core.metrics.providers`, and one
contract: an ``async (metric, sample, ctx) -> Score`` function registered for a measure."""

from __future__ import annotations

import inspect

import ragbridge.core.metrics  # noqa: F401  (registers every core provider)
from ragbridge.core.registry import REGISTRY

HOME = "ragbridge.core.metrics.providers"


def core_provider_functions() -> dict[str, object]:
    found: dict[str, object] = {}
    for measure in REGISTRY.measures():
        for provider in REGISTRY.providers(measure.name):
            module = getattr(provider.compute, "__module__", "") or ""
            if module.startswith("ragbridge.core"):
                found[f"{measure.name}:{provider.name}"] = provider.compute
    return found


def test_every_core_provider_function_lives_under_metrics_providers() -> None:
    found = core_provider_functions()
    assert {"faithfulness:offline", "faithfulness:nli", "hallucination:nli"} <= set(found)
    elsewhere = {
        name: getattr(compute, "__module__", None)
        for name, compute in found.items()
        if not str(getattr(compute, "__module__", "")).startswith(HOME + ".")
    }
    assert elsewhere == {}


def test_every_core_provider_function_has_the_one_contract() -> None:
    for name, compute in core_provider_functions().items():
        assert inspect.iscoroutinefunction(compute), name
        assert list(inspect.signature(compute).parameters) == ["metric", "sample", "ctx"], name


def test_the_measures_that_exist_only_offline_still_resolve_by_name() -> None:
    from ragbridge.core.metrics import AnswerSimilarity, ContextUsage, resolve
    from ragbridge.core.metrics.providers.offline import AnswerSimilarity as Homed

    assert AnswerSimilarity is Homed
    assert isinstance(resolve("answer_similarity"), AnswerSimilarity)
    assert isinstance(resolve("context_usage"), ContextUsage)
    assert resolve("faithfulness:nli").provider == "nli"
