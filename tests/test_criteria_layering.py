"""The criteria package's imports run one way (tests/test_fences.py checks the graph); these
check what the inversion between `spec` and `measures` must keep: a spec builds its measure
whichever module of the package was imported first, and says why when it cannot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ragbridge.core.criteria import Criterion, criteria_metrics, spec
from ragbridge.core.criteria.measures import CriteriaMetric


@pytest.mark.parametrize(
    "first",
    [
        "from ragbridge.core.criteria.spec import Criterion, Aspect, Rubric, criteria_metrics",
        "from ragbridge.core import Criterion, Aspect, Rubric, criteria_metrics",
        "from ragbridge.core.criteria.lock import freeze\n"
        "from ragbridge.core.criteria import Criterion, Aspect, Rubric, criteria_metrics",
    ],
)
def test_a_spec_builds_its_measure_whatever_was_imported_first(first: str) -> None:
    code = (
        f"{first}\n"
        "import json\n"
        "specs = [Criterion('tone', 'Polite?'), Aspect('cites', 'Cites a policy.'),\n"
        "         Rubric('depth', {1: 'Shallow.', 2: 'Deep.'})]\n"
        "alone = [s.metric().name for s in specs]\n"
        "batched = [m.name for m in criteria_metrics(specs, batch=True)]\n"
        "print(json.dumps([alone, batched]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [["tone", "cites", "depth"]] * 2


def test_without_the_builder_metric_raises_saying_what_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    criterion = Criterion("tone", "Polite?")
    assert isinstance(criterion.metric(), CriteriaMetric)
    monkeypatch.setattr(spec, "_builders", [])
    with pytest.raises(RuntimeError, match=r"ragbridge\.core\.criteria\.measures installs it"):
        criterion.metric()
    with pytest.raises(RuntimeError, match="no measure builder"):
        criteria_metrics([criterion], batch=True)
