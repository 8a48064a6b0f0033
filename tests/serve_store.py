"""A results store for the ``ragbridge serve`` tests, with hostile text in every field it keeps.

Two evaluations of the same 40 questions (plus one sample only the candidate has, a failed and
a skipped cell), a third run later on, and live requests with scores and an alerting drop.
Sample ids, a metric name, a failure kind, the input file name, the command, the commit, the
settings, the metadata and the requests' questions carry script payloads: none may run. So do
the texts kept since store schema 3: every sample's question, answer, reference and contexts
(`sample_record_of`; the base run keeps them, the candidate does not), and the judge's reasons
and claims of the hostile sample's cells.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragbridge.core.monitoring.history import cells_of, run_record
from ragbridge.core.monitoring.records import RequestRecord, RunRecord, ScoreCell
from ragbridge.core.monitoring.store_api import open_store
from ragbridge.core.results.evaluation import Evaluation, Score

__all__ = [
    "BREAKOUT",
    "HANDLER",
    "HOSTILE",
    "HOSTILE_DETAILS",
    "HOSTILE_ID",
    "StoreFixture",
    "build_store",
    "sample_record_of",
]

BREAKOUT = (
    "</script><script>document.body.setAttribute('data-pwned','1'); window.pwned = 1</script>"
)
HANDLER = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2'); window.pwned = 2\">"
HOSTILE_ID = "evil\"'</script><script>window.pwned = 3</script>"
HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "</details>",
    BREAKOUT,
    HANDLER,
    HOSTILE_ID,
]
EVIL_METRIC = '<svg onload="window.pwned = 4">'
HOSTILE_DETAILS = {
    "claims": [
        {"claim": HANDLER, "verdict": BREAKOUT},
        {"claim": "Paris is the capital of France.", "verdict": HOSTILE[2]},
    ]
}
"""The details (claims and verdicts) of the hostile sample's faithfulness cells."""
T0 = 1_800_000_000.0


class StoreFixture:
    """The store (a path or a URL) and what was written to it (the evaluations, in sorted id
    order; the runs' ids, oldest first)."""

    def __init__(
        self, path: Path | str, base: Evaluation, cand: Evaluation, runs: list[str]
    ) -> None:
        self.path = path
        self.base = base
        self.cand = cand
        self.runs = runs


def _evaluations() -> tuple[Evaluation, Evaluation]:
    ids = sorted([f"q{i:03d}" for i in range(40)] + [HOSTILE_ID, "only-in-candidate"])
    base, cand = Evaluation(), Evaluation()
    for k, sid in enumerate(ids):  # sorted order: the order the store gives back
        if sid != "only-in-candidate":
            hostile = sid == HOSTILE_ID  # the judge's reason and claims carry payloads
            base.add(sid, "faithfulness", Score(
                value=round((k * 37 % 11) / 10, 2), reason=BREAKOUT if hostile else None,
                details=HOSTILE_DETAILS if hostile else None,
            ))  # fmt: skip
            if sid == "q005":
                base.add(sid, "recall@5", Score.fail("timeout", "the judge did not answer"))
            elif sid == "q006":
                base.add(sid, "recall@5", Score.skip("no relevance labels"))
            else:
                base.add(sid, "recall@5", Score(value=[1.0, 0.0, 0.5][k % 3]))
        cand.add(sid, "faithfulness", Score(value=round(min(1.0, (k * 37 % 11) / 10 + 0.2), 2)))
        cand.add(sid, "recall@5", Score(value=[1.0, 0.5, 0.5][k % 3]))
    return base, cand


def sample_record_of(sample_id: str) -> dict[str, Any]:
    """The kept record of a sample of the base run: script payloads in every text field."""
    return {
        "question": f"{HOSTILE[0]} question of {sample_id}",
        "answer": HANDLER,
        "reference": BREAKOUT,
        "contexts": [
            {"id": HOSTILE_ID, "text": f"first context {HOSTILE[2]}"},
            {"id": "c2", "text": HOSTILE[3]},
        ],
    }


def build_store(path: Path | str) -> StoreFixture:
    """Write the store at ``path`` (an SQLite file or a store URL): runs base (branch main),
    candidate (branch feature/x), a hostile one; requests."""
    base, cand = _evaluations()
    config = {"judge": HANDLER, "note": BREAKOUT}
    source = f"evals/{HANDLER}.jsonl"
    with open_store(str(path)) as store:
        a = run_record(
            base, "eval", source, config, "a1b2c3d4e5f6", run_id="0190base0001", timestamp=T0,
            metadata={"who": HOSTILE_ID},
        ).model_copy(update={"branch": "main"})  # fmt: skip
        store.add_run_samples(a.run_id, [(sid, sample_record_of(sid)) for sid in base.sample_ids])
        store.add_run(a, cells_of(base))
        b = run_record(
            cand, "eval", source, config, "f6e5d4c3b2a1", run_id="0190cand0002",
            timestamp=T0 + 3600,
        ).model_copy(update={"branch": "feature/x"})  # fmt: skip
        store.add_run(b, cells_of(cand))
        evil = RunRecord(
            run_id=f"0190evil{HOSTILE_ID}",
            timestamp=T0 + 7200,
            command=BREAKOUT,
            branch=HOSTILE[0],
            source=HOSTILE[2],
            commit=HOSTILE[0],
            config={HANDLER: HOSTILE[2]},
            summary={EVIL_METRIC: {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n_scored": 2}},
            metadata={"x": HOSTILE},
        )
        store.add_run(
            evil,
            [
                (HOSTILE_ID, EVIL_METRIC, ScoreCell(value=0.5)),
                (
                    HANDLER,
                    EVIL_METRIC,
                    ScoreCell(failure=BREAKOUT, reason=HANDLER, details=HOSTILE_DETAILS),
                ),
            ],
        )
        for i in range(400):
            drop = i >= 300
            store.add_request(
                RequestRecord(
                    request_id=f"req{i:04d}",
                    timestamp=T0 + 10_000 + 60 * i,
                    pipeline=HOSTILE[1],
                    question=HOSTILE[i % len(HOSTILE)],
                    sampled=True,
                    error=HANDLER if i % 97 == 0 else None,
                    scores={"faithfulness": ScoreCell(value=(0.3 if drop else 0.9) + (i % 5) / 50)},
                    attributes={"tag": HOSTILE_ID},
                )
            )
    return StoreFixture(path, base, cand, [a.run_id, b.run_id, evil.run_id])
