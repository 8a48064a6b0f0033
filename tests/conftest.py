"""Shared test fixtures: paths to the bundled trec_eval conformance data."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TREC_DATA = DATA / "trec_eval"


@pytest.fixture
def trec_data() -> Path:
    return TREC_DATA
