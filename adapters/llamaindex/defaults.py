"""LlamaIndex's global models as the judge and embedder, read as LlamaIndex's own evaluators
read them.

LlamaIndex code sets ``Settings.llm`` and ``Settings.embed_model`` once and builds evaluators
without models (``FaithfulnessEvaluator()`` uses ``llm or Settings.llm``;
``SemanticSimilarityEvaluator()`` ``embed_model or Settings.embed_model``). The ragbridge
evaluators do the same, so that swapping the evaluator is the whole change:

* a metric that needs a judge and is given none (``llm=``, ``judge=``, ``settings=``) judges with
  ``Settings.llm``;
* a metric that needs an embedder ragbridge has no default for (answer relevance on the judge)
  and is given none embeds with ``Settings.embed_model``. Offline providers keep ragbridge's
  default embedder (all-MiniLM-L6-v2) unless ``embed_model=`` names another: their thresholds
  were calibrated on it, and a global setting made for the pipeline's retrieval should not
  silently move them;
* when the model is not there either, the evaluator refuses at construction, in LlamaIndex's
  names (``llm=`` / ``Settings.llm``, ``embed_model=`` / ``Settings.embed_model``) — instead of
  a ``missing_input`` failure on every result.

The settings are read through their private fields: reading ``Settings.llm`` or
``Settings.embed_model`` when unset resolves LlamaIndex's OpenAI default, which raises
ImportError without the OpenAI packages (and would reach for OpenAI with them). LlamaIndex's
``MockLLM`` / ``MockEmbedding`` there (what ``Settings.llm = None`` leaves: the model is
disabled) count as unset: a judge that echoes its prompt would fail every result.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from ragbridge.core.metrics.base import Metric
from ragbridge.core.scoring.runner import resolve_metrics
from ragbridge.core.settings import Settings, SettingsOptions

from ._framework import LlamaSettings

__all__ = ["llamaindex_models", "model_aliases", "settings_model"]

_DISABLED = {"llm": "MockLLM", "embed_model": "MockEmbedding"}
Field = Literal["judge", "embedder"]
Options = TypeVar("Options", bound=SettingsOptions)


def model_aliases(options: Options, llm: Any, embed_model: Any) -> Options:
    """``options`` with ``llm=``/``embed_model=`` (LlamaIndex's names) as ``judge=``/
    ``embedder=``, passed on unchanged: `Settings` wraps or refuses a framework model, once.

    Every entry point of the adapter that takes LlamaIndex's names reads them here, so giving
    both names of one model is refused in the same words everywhere.
    """
    out = copy.copy(options)
    if llm is not None:
        _one_name("llm", "judge", out.get("judge"))
        out["judge"] = llm
    if embed_model is not None:
        _one_name("embed_model", "embedder", out.get("embedder"))
        out["embedder"] = embed_model
    return out


def _one_name(alias: str, name: str, given: Any) -> None:
    if given is not None:
        raise ValueError(
            f"{alias}= and {name}= name the same model: pass one of them "
            f"({alias}= is LlamaIndex's name for ragbridge's {name}=)"
        )


def settings_model(field: str) -> tuple[Any, str]:
    """LlamaIndex's ``Settings.<field>`` (``"llm"`` or ``"embed_model"``) without resolving a
    default, and why it is unusable ("" when it is usable or unset)."""
    model = getattr(LlamaSettings, f"_{field}", None)
    if model is not None and type(model).__name__ == _DISABLED[field]:
        return None, (
            f" (Settings.{field} holds LlamaIndex's {_DISABLED[field]}, what it keeps when "
            "the model is disabled)"
        )
    return model, ""


def llamaindex_models(
    metrics: Iterable[Metric | str], settings: Settings | None, options: SettingsOptions
) -> tuple[list[Metric], SettingsOptions]:
    """The metrics, resolved, and ``options`` with LlamaIndex's global models filled in where a
    metric needs one and none was given (see the module doc).

    Raises ValueError naming LlamaIndex's arguments when a needed model is nowhere.
    """
    resolved = resolve_metrics(metrics)
    out: SettingsOptions = {**options}
    judged = [m.name for m in resolved if m.needs_judge]
    if judged and not _given(out, settings, "judge"):
        model, why = settings_model("llm")
        if model is None:
            raise ValueError(
                f"{', '.join(judged)} need a judge LLM and none was given: pass llm=... "
                f"(LlamaIndex's name for judge=), or set llama_index.core.Settings.llm, which "
                f"LlamaIndex's own evaluators read{why}; or use an offline provider where one "
                f"exists, e.g. '{judged[0]}:offline'"
            )
        out["judge"] = model
    embedded = [m.name for m in resolved if m.needs_embedder]
    defaulted = any(m.needs_embedder and not m.needs_judge for m in resolved)
    if embedded and not defaulted and not _given(out, settings, "embedder"):
        model, why = settings_model("embed_model")
        if model is None:
            raise ValueError(
                f"{', '.join(embedded)} need an embedding model and none was given: pass "
                f"embed_model=... (LlamaIndex's name for embedder=), or set "
                f"llama_index.core.Settings.embed_model, which LlamaIndex's own evaluators "
                f"read{why}"
            )
        out["embedder"] = model
    return resolved, out


def _given(options: SettingsOptions, settings: Settings | None, field: Field) -> bool:
    ours = options.get(field)
    theirs = getattr(settings, field) if settings is not None else None
    return ours is not None or theirs is not None
