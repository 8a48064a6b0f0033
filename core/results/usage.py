"""`Usage`: what a cell cost in judge calls and tokens.

Its own module, below `results` and `tally`, because both build it: the data model holds it on
every `Score`, and the tally sums it while cells stream past.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Usage"]


class Usage(BaseModel):
    """Judge calls and tokens a cell cost; ``cached_calls`` counts calls answered from cache.

    Usage adds up (``a + b``, and ``sum(usages, Usage())``) so a column or a whole run can
    publish what it spent.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = Field(default=0, ge=0)
    cached_calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )
