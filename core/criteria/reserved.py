"""Names a criterion may not take: those of the measures ragbridge or a plugin defines.

A criterion's name is its key everywhere, so one called ``faithfulness`` would shadow a
built-in measure's column in the same results. Both the file reader
(`ragbridge.core.criteria.files`, which reports the line) and the registration
(`ragbridge.core.criteria.registration`) refuse such a name; the check lives here, apart from
both, because registration accepts a loaded file and so imports the reader, which must not
import it back (the core's imports run one way).
"""

from __future__ import annotations

from ..registry import REGISTRY, Registry, normal_name

__all__ = ["KIND", "is_builtin_measure"]

KIND = "criteria"
"""The registry kind of a user's criteria (`MeasureSpec.kind`; how ``ragbridge metrics``
groups them)."""


def is_builtin_measure(name: str, registry: Registry | None = None) -> bool:
    """Whether ``name`` (normalised) is a measure ragbridge or a plugin defines."""
    from .. import metrics  # noqa: F401  (registers the built-in measures)

    wanted = normal_name(name)
    return any(
        normal_name(m.name) == wanted and m.kind != KIND
        for m in (registry or REGISTRY).measures(plugins=False)
    )
