"""ragbridge core: the framework-neutral domain (samples, measures, results, statistics).

Nothing under ``ragbridge.core`` imports a RAG framework, an HTTP client or torch; that is what
keeps ``import ragbridge.core`` fast and lets every adapter depend on it without cycles.
"""

from .sample import (
    Context,
    Sample,
    SampleLoadReport,
    SampleValidationError,
    iter_samples,
    load_samples,
    sample_json_schema,
    save_samples,
)

__all__ = [
    "Context",
    "Sample",
    "SampleLoadReport",
    "SampleValidationError",
    "iter_samples",
    "load_samples",
    "sample_json_schema",
    "save_samples",
]
