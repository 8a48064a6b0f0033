"""Scoring: the spine that turns samples and metrics into Scores.

`record` holds the one function that scores a record (`score_record`); `scorer` the `Scorer` sinks
score one sample at a time with; `runner` the batch runner (`evaluate`); `partitions` cuts a large
set for a cluster and puts it back together; `background` scores live traffic off the request
path; `collector` sets the garbage collector for a process a run owns (the CLI's, a Dask
worker's).
`scorer`'s names are re-exported here.
"""

from .scorer import (
    Scorer,
    explain,
    fingerprint,
    run_sync,
)

__all__ = ["Scorer", "explain", "fingerprint", "run_sync"]
