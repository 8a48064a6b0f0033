"""The cache: judge replies, embeddings and whole Scores, kept so that nothing paid for is paid
twice.

`disk` is the SQLite store (its housekeeping in `maintenance`, its SQL habits in `sqlite_io`),
`request_key` the key of a judge request, `stored` the forms and records every store shares,
`backend` the contract any store meets (Redis lives in the adapters), `guard` keeps a run going
when its store is lost, `scores` and `result_key` reuse whole Scores. The names the former
``cache`` module had are re-exported here, so `ragbridge.core.cache.Cache` reads as it always did.
"""

from .disk import *  # noqa: F403  (the former ``cache`` module's names, from where they live)
from .disk import __all__ as _disk_names
from .request_key import *  # noqa: F403
from .request_key import __all__ as _key_names
from .stored import *  # noqa: F403
from .stored import __all__ as _stored_names

__all__ = [*_disk_names, *_key_names, *_stored_names]
