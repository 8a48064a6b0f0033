"""Self-preference: a judge grading answers its own model wrote.

LLM judges rate text from their own model higher than equally good text from another one
(Panickssery et al., "LLM Evaluators Recognize and Favor Their Own Generations", 2024). A run
cannot remove that bias, but it can say when it is exposed to it: when the model that produced
the answers is known — ``metadata["generator_model"]``, which the LangChain, LlamaIndex and
LangSmith adapters capture, or a model the caller names — and is the judge's model.

A run says so once: one line (a `SelfPreferenceWarning` from `ragbridge.core.evaluate`, one line
on stderr from the command line), and ``{"model": ..., "answers": n}`` under `METADATA_KEY` in
the run's metadata, which is the results file's header. Never once per sample: a run of 10,000
answers from one model is one finding.

Model names are compared by family (`model_family`): a provider prefix (``openai/gpt-4o``) and
a dated snapshot suffix (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``, ``-latest``) do
not make a different model, and the bias does not care which snapshot wrote the answer.

Nothing heavy is imported here: the command line installs its filter of `SelfPreferenceWarning`
before it knows whether it will score anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GENERATOR_KEY",
    "METADATA_KEY",
    "SelfPreference",
    "SelfPreferenceWarning",
    "generator_of",
    "model_family",
    "same_model",
    "self_preference_line",
]

GENERATOR_KEY = "generator_model"
"""The sample metadata key naming the model that wrote the answer (set by the adapters)."""

METADATA_KEY = "self_judged"
"""Where a run's metadata (the results header) records ``{"model": ..., "answers": n}``."""

_SNAPSHOT = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$")


class SelfPreferenceWarning(UserWarning):
    """The judge model also generated (some of) the answers it grades."""


def model_family(name: str) -> str:
    """``"openai/GPT-4o-2024-08-06"`` -> ``"gpt-4o"``: the name without a provider path or a
    dated snapshot suffix, lower-cased. Other parts (an Ollama tag ``:8b``) are kept: they
    name a different model."""
    text = name.strip().lower().rsplit("/", 1)[-1]
    return _SNAPSHOT.sub("", text) or text


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two model names are the same model (`model_family`); an empty name is none."""
    return bool(a and b) and model_family(str(a)) == model_family(str(b))


def generator_of(metadata: Mapping[str, Any], default: str | None = None) -> str | None:
    """The model that wrote a sample's answer: ``metadata["generator_model"]`` (the older key
    ``model`` is read too), else ``default`` (a model the caller names for the whole set)."""
    found = metadata.get(GENERATOR_KEY) or metadata.get("model")
    return str(found) if found else default


def self_preference_line(model: str, answers: int) -> str:
    """The one line a run says when ``answers`` of its answers were written by ``model``."""
    return (
        f"the judge model {model!r} generated {answers} of the answers it grades; a model "
        "judging its own outputs is biased towards them — use a different judge model"
    )


@dataclass
class SelfPreference:
    """Counts, over a run, the answers the judge's own model wrote.

    ``generator`` is the model the caller says wrote every answer whose metadata names none.
    """

    judge_model: str
    generator: str | None = None
    answers: int = 0

    def add(self, metadata: Mapping[str, Any], has_answer: bool = True) -> None:
        """Count one sample (its metadata); a sample without an answer is not graded as one."""
        if has_answer and same_model(generator_of(metadata, self.generator), self.judge_model):
            self.answers += 1

    def record(self) -> dict[str, Any] | None:
        """What the run's metadata holds under `METADATA_KEY`; None when no answer is the
        judge's own."""
        if not self.answers:
            return None
        return {"model": self.judge_model, "answers": self.answers}

    def line(self) -> str | None:
        """The warning line, or None."""
        return self_preference_line(self.judge_model, self.answers) if self.answers else None
