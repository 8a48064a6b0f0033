"""Citations: an answer read as statements and the contexts each cites (parser and ALCE
measures, `ragbridge.core.citations.measures`)."""

from .parse import parse_citations
from .types import Citation, CitedAnswer, Statement

__all__ = ["Citation", "CitedAnswer", "Statement", "parse_citations"]
