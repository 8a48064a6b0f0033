"""`TestsetReport`: what a test-set run wrote, dropped and spent, counted so nothing is silent.

A generated set is only as trustworthy as its filters, so each filter reports what it removed:
quotes not found in their source, questions that lean on "the passage", near-duplicates,
no-answer candidates the corpus answers after all, calls that failed. A set smaller than asked
for is reported as such (`shortfall`), never padded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .estimate import TestsetEstimate
from .styles import NO_ANSWER, STYLES

__all__ = ["TestsetReport"]


@dataclass
class TestsetReport:
    """Counts of one `generate_testset` run (see the module)."""

    requested: int
    targets: dict[str, int]
    written: dict[str, int] = field(default_factory=dict)
    documents: int = 0
    chunks: int = 0
    generated: int = 0
    """Replies that parsed and passed the request's checks (questions written)."""
    failed_calls: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    """Failed calls by failure kind (``parse_error``, ``timeout``, ...)."""
    passages_verified: int = 0
    passages_dropped: int = 0
    """Answerable questions whose quote was not found in its source (dropped)."""
    not_standalone: int = 0
    """Questions dropped for pointing at "the passage" / "the text" instead of standing alone."""
    duplicates_dropped: int = 0
    no_answer_checked: int = 0
    no_answer_rejected: int = 0
    """No-answer candidates the retrieved chunks answer (judge said answered or partly)."""
    requests: int = 0
    """Judge requests made (what the estimate counts): generation calls and checks."""
    judge_calls: int = 0
    """Calls sent to the judge: requests not answered from the cache, plus retries and
    repair re-asks."""
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    embedding_calls: int = 0
    rounds: int = 0
    dedup_threshold: float = 0.0
    aborted: str | None = None
    """Why the run stopped early (the judge or embedder unusable), or None."""
    estimate: TestsetEstimate | None = None

    __test__ = False

    @property
    def total(self) -> int:
        return sum(self.written.values())

    @property
    def no_answer_share(self) -> float:
        return self.written.get(NO_ANSWER, 0) / self.total if self.total else 0.0

    @property
    def shortfall(self) -> dict[str, int]:
        """Questions missing per style (styles that met their target are left out)."""
        return {
            s: n - self.written.get(s, 0)
            for s, n in self.targets.items()
            if self.written.get(s, 0) < n
        }

    def lines(self) -> list[str]:
        """The report as ``ragbridge testset`` prints it."""
        order = [s for s in (*STYLES, NO_ANSWER) if s in self.targets]
        styles = ", ".join(f"{s} {self.written.get(s, 0)}/{self.targets[s]}" for s in order)
        out = [
            f"wrote {self.total} of {self.requested} questions ({styles}) from {self.chunks} "
            f"chunks of {self.documents} documents; no-answer share {self.no_answer_share:.1%}",
            f"passages: {self.passages_verified} verified in their source, "
            f"{self.passages_dropped} dropped (quote not found)",
            f"near-duplicates dropped: {self.duplicates_dropped} "
            f"(cosine > {self.dedup_threshold:g} to a kept question)",
            f"no-answer candidates: {self.no_answer_checked} checked against the corpus, "
            f"{self.no_answer_rejected} rejected (the corpus answers them)",
        ]
        if self.not_standalone:
            out.append(f"questions dropped for naming 'the passage/text': {self.not_standalone}")
        if self.failed_calls:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.failures.items()))
            out.append(f"failed judge calls: {self.failed_calls} ({kinds})")
        judge = (
            f"judge: {self.judge_calls} calls sent ({self.cached_calls} from the cache), "
            f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
        )
        if self.cost_usd is not None:
            judge += f", ${self.cost_usd:.4f}"
        judge += f"; {self.rounds} round{'' if self.rounds == 1 else 's'}"
        out.append(judge)
        if self.estimate is not None:
            out.append(
                f"estimate was {self.estimate.calls} judge requests (at most "
                f"{self.estimate.max_calls} with top-ups); the run made {self.requests}"
            )
        return out
