"""What the robustness harness asks of a pipeline: answer one question with its retrieval
perturbed. Adapters implement `RobustPipeline` for LangChain and LlamaIndex; the harness never
imports a framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..sample import Context, Sample

__all__ = ["Perturb", "RobustPipeline"]

Perturb = Callable[[list[Context]], list[Context]]
"""Live retrieved contexts -> the contexts the pipeline is given instead."""


@runtime_checkable
class RobustPipeline(Protocol):
    """A pipeline the harness can re-run under a retrieval fault."""

    @property
    def identity(self) -> str:
        """What cached answers are keyed on: the pipeline's spec and a digest of its source, so
        an edited pipeline is run again rather than served stale answers."""
        ...

    async def answer(self, sample: Sample, perturb: Perturb | None) -> Sample:
        """``sample`` with ``answer`` and ``contexts`` filled in: the contexts the pipeline was
        *given* (after ``perturb``). A pipeline error goes to ``metadata["error"]`` with no
        answer, as `ragbridge.adapters.langchain.run_pipeline` records it."""
        ...
