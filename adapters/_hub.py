"""What the model-loading adapters (``local``, ``nli``, ``strings``) share: staying offline.

Not an adapter of its own and imports nothing optional, so sharing it keeps the rule that no
adapter imports another.
"""

from __future__ import annotations

import os

__all__ = ["OFFLINE_ENV", "disable_hub"]

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def disable_hub() -> None:
    """Keep huggingface_hub and transformers offline unless the user decided otherwise.

    ``setdefault``: a user who set ``HF_HUB_OFFLINE=0`` on purpose keeps downloads.
    """
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
