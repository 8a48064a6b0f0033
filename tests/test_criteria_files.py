"""Criteria files, pinned steps and the registry (issue 30): YAML/JSON with located errors,
the lock beside the file (stale steps fail loudly), freezing into the file, `register_criteria`."""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from pathlib import Path

import pytest

from ragbridge.core.criteria import (
    Aspect,
    CriteriaFileError,
    Criterion,
    Rubric,
    StaleStepsError,
    criteria_sha,
    freeze,
    load_criteria,
    lock_path_for,
    register_criteria,
    stale_steps,
)
from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.metrics import MetricContext, resolve
from ragbridge.core.registry import REGISTRY, Registry
from ragbridge.core.sample import Sample
from ragbridge.core.testing import ScriptedJudge

YAML = """\
# our criteria: reviewed like code
batch: false
criteria:
  - name: tone            # the measure's name
    criteria: Is the tone right for a customer of a bank?
    scale: [1, 5]
  - name: cites_policy
    definition: The answer cites the policy number it relies on.
    reads: [answer, contexts]
    samples: 3
  - name: completeness
    rubrics:
      1: Misses the point of the reference.
      2: Covers part of the reference.
      3: Covers all of the reference.
    reads: [question, answer, reference]
"""

SAMPLE = Sample(id="f1", question="Refund window?", answer="30 days.", reference="30 days.")


def write(tmp_path: Path, text: str, name: str = "criteria.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_yaml_file_loads_every_kind(tmp_path: Path) -> None:
    file = load_criteria(write(tmp_path, YAML))
    tone, cites, complete = file.specs
    assert tone == Criterion("tone", "Is the tone right for a customer of a bank?")
    assert cites == Aspect(
        "cites_policy",
        "The answer cites the policy number it relies on.",
        reads=("answer", "contexts"),
        samples=3,
    )
    assert isinstance(complete, Rubric)
    assert complete.scale == (1, 3)
    assert complete.reads == ("question", "answer", "reference")
    assert file.batch is False
    assert file.names == ["tone", "cites_policy", "completeness"]
    assert [m.name for m in file.metrics()] == file.names
    assert file.lock_path == tmp_path / "criteria.lock.json"
    assert file.frozen == frozenset()
    assert file.stale == ()


def test_a_json_file_and_a_bare_list_load_the_same(tmp_path: Path) -> None:
    yaml_file = load_criteria(write(tmp_path, YAML))
    entries = [
        {"name": "tone", "criteria": "Is the tone right for a customer of a bank?"},
        {
            "name": "cites_policy",
            "definition": "The answer cites the policy number it relies on.",
            "reads": ["answer", "contexts"],
            "samples": 3,
        },
        {
            "kind": "rubric",
            "name": "completeness",
            "rubrics": {
                "1": "Misses the point of the reference.",
                "2": "Covers part of the reference.",
                "3": "Covers all of the reference.",
            },
            "reads": ["question", "answer", "reference"],
        },
    ]
    as_json = load_criteria(write(tmp_path, json.dumps({"criteria": entries}), "c.json"))
    bare = load_criteria(write(tmp_path, json.dumps(entries, indent=1), "bare.json"))
    assert as_json.specs == yaml_file.specs == bare.specs
    assert as_json.lock_path.name == "c.lock.json"


def test_batch_from_the_file_and_overridden(tmp_path: Path) -> None:
    file = load_criteria(write(tmp_path, YAML.replace("batch: false", "batch: true")))
    assert file.batch is True
    batched = file.metrics()
    assert all(getattr(m, "batch", None) is None for m in file.metrics(batch=False))
    # tone reads (question, answer); the others read other fields: nothing to batch with
    assert all(getattr(m, "batch", None) is None for m in batched)


def _error(tmp_path: Path, text: str, name: str = "criteria.yaml") -> str:
    with pytest.raises(CriteriaFileError) as info:
        load_criteria(write(tmp_path, text, name))
    return str(info.value)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("scale: [1, 5]", "scale: [5, 1]"),
            r"criteria.yaml:6: criteria\[0\]\.scale: must be two integers, low < high",
        ),
        (("samples: 3", "samples: 0"), r"criteria.yaml:10: criteria\[1\]\.samples: must be"),
        (("reads: [answer, contexts]", "reads: [answr]"), r":9: criteria\[1\]\.reads: unknown"),
        (("    scale: [1, 5]", "    scael: [1, 5]"), r":6: criteria\[0\]\.scael: unknown key"),
        (("  - name: tone ", "  - nom: tone "), r":4: criteria\[0\]\.nom: unknown key"),
        (("name: cites_policy", "name: tone"), r":7: criteria\[1\]\.name: 'tone' is used twice"),
        (("name: tone ", "name: faithfulness "), r":4: criteria\[0\]\.name: .* built-in measure"),
        (("name: tone ", "name: 9lives "), r":4: criteria\[0\]\.name: must be a letter"),
        (
            ("      2: Covers part", "      4: Covers part"),
            r":12: criteria\[2\]\.rubrics: levels must be consecutive",
        ),
        (
            ("      2: Covers part of the reference.", "      2: ''"),
            r":14: criteria\[2\]\.rubrics\[2\]: must be non-empty",
        ),
        (
            ("    definition:", "    criteria: x\n    definition:"),
            r":7: criteria\[1\]: give exactly one of criteria",
        ),
        (("batch: false", "batch: maybe"), r"criteria.yaml:2: batch: must be true or false"),
        (("batch: false", "batches: false"), r"criteria.yaml:2: batches: unknown key"),
        (("scale: [1, 5]", "scale: [1, 5"), r"criteria.yaml:\d+: not valid YAML"),
    ],
)
def test_errors_name_the_file_line_entry_and_field(
    tmp_path: Path, edit: tuple[str, str], expected: str
) -> None:
    old, new = edit
    assert old in YAML
    message = _error(tmp_path, YAML.replace(old, new, 1))
    assert re.search(expected, message), message


def test_whole_file_errors(tmp_path: Path) -> None:
    assert "needs a list under criteria" in _error(tmp_path, "batch: true\n")
    assert re.search(
        r":4: criteria\[0\]: needs a name",
        _error(tmp_path, YAML.replace("- name: tone ", "- scale: [1, 5] ")),
    )
    assert "criteria: must be a list of entries" in _error(tmp_path, "criteria: []\n")
    assert "ends in .yaml, .yml or .json" in _error(tmp_path, YAML, "criteria.txt")
    assert re.search(r"c.json:3: not valid JSON", _error(tmp_path, '{"criteria":\n[\n}', "c.json"))
    with pytest.raises(CriteriaFileError, match="cannot read it"):
        load_criteria(tmp_path / "absent.yaml")
    assert issubclass(CriteriaFileError, ValueError)


# -------------------------------------------------------------------- the lock


STEPS = ["Read the answer.", "Judge its tone for a bank's customer."]


def score_tone(file_metrics: list[object]) -> tuple[ScriptedJudge, dict[str, object]]:
    judge = ScriptedJudge({"criteria.score": {"reason": "ok", "score": 5}})
    metric = next(m for m in file_metrics if getattr(m, "name", "") == "tone")
    ctx = MetricContext(judge=JudgeEngine(judge, max_retries=0, timeout=None))
    score = asyncio.run(metric.score(SAMPLE, ctx))  # type: ignore[attr-defined]
    assert isinstance(score.details, dict)
    return judge, {"details": score.details, "prompt_version": score.prompt_version}


def test_freeze_writes_the_lock_and_loading_applies_it(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    written = freeze(load_criteria(path), {"tone": STEPS}, model="gpt-fake")
    assert written == lock_path_for(path) == tmp_path / "criteria.lock.json"
    lock = json.loads(written.read_text())
    tone = load_criteria(path).specs[0]
    assert isinstance(tone, Criterion)
    assert lock == {
        "tone": {"criteria_sha": criteria_sha(tone), "steps": STEPS, "model": "gpt-fake"}
    }
    assert path.read_text() == YAML  # the criteria file is left as its authors wrote it
    file = load_criteria(path)
    assert file.frozen == {"tone"}
    assert file.specs[0].evaluation_steps == tuple(STEPS)  # type: ignore[union-attr]
    judge, scored = score_tone(file.metrics())
    assert judge.tasks() == ["criteria.score"]  # no steps call: they are pinned
    details = scored["details"]
    assert isinstance(details, dict)
    assert details["steps_source"] == "frozen"
    assert details["steps"] == STEPS
    assert scored["prompt_version"] == f"criteria.score@1+steps@{details['steps_version']}"


def test_editing_a_frozen_criterion_fails_loudly(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    freeze(load_criteria(path), {"tone": STEPS})
    path.write_text(YAML.replace("customer of a bank", "customer of an insurer"))
    with pytest.raises(StaleStepsError) as info:
        load_criteria(path)
    message = str(info.value)
    assert "'tone'" in message
    assert str(tmp_path / "criteria.lock.json") in message
    assert f"ragbridge criteria freeze {path}" in message
    assert info.value.names == ["tone"]
    assert stale_steps(path) == ["tone"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        file = load_criteria(path, stale="regenerate")
    assert any("stale" in str(w.message) for w in caught)
    assert file.stale == ("tone",)
    assert "tone" not in file.frozen
    assert file.specs[0].evaluation_steps is None  # type: ignore[union-attr]
    # the scale and the fields read are part of what the steps were written for
    path.write_text(YAML.replace("scale: [1, 5]", "scale: [1, 10]"))
    assert stale_steps(path) == ["tone"]
    with pytest.warns(UserWarning, match="stale"):
        refreeze = load_criteria(path, stale="regenerate")
    freeze(refreeze, {"tone": STEPS})
    assert stale_steps(path) == []
    assert load_criteria(path).frozen == {"tone"}


def test_steps_given_in_the_file_win_over_the_lock(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    freeze(load_criteria(path), {"tone": STEPS})
    own = YAML.replace("    scale: [1, 5]\n", "    scale: [1, 5]\n    evaluation_steps: [Mine.]\n")
    path.write_text(own)
    file = load_criteria(path)
    assert file.specs[0].evaluation_steps == ("Mine.",)  # type: ignore[union-attr]
    assert file.frozen == frozenset()


def test_freeze_refuses_what_has_no_steps_to_freeze(tmp_path: Path) -> None:
    file = load_criteria(write(tmp_path, YAML))
    with pytest.raises(ValueError, match="no criterion named 'nope'"):
        freeze(file, {"nope": STEPS})
    with pytest.raises(ValueError, match="is a aspect; only a scored criterion"):
        freeze(file, {"cites_policy": STEPS})
    with pytest.raises(ValueError, match="non-empty list"):
        freeze(file, {"tone": []})


def test_an_unreadable_lock_is_an_error_not_silence(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    lock_path_for(path).write_text("{not json")
    with pytest.raises(CriteriaFileError, match="not a readable criteria lock"):
        load_criteria(path)
    lock_path_for(path).write_text('{"tone": {"steps": []}}')
    with pytest.raises(CriteriaFileError, match="needs criteria_sha"):
        load_criteria(path)


def test_freeze_into_a_yaml_file_keeps_its_comments(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    assert freeze(load_criteria(path), {"tone": STEPS}, in_file=True) == path
    text = path.read_text()
    assert "# our criteria: reviewed like code" in text
    assert "name: tone            # the measure's name" in text
    assert not lock_path_for(path).exists()
    file = load_criteria(path)
    assert file.frozen == {"tone"}
    assert file.specs[0].evaluation_steps == tuple(STEPS)  # type: ignore[union-attr]
    assert file.specs[1:] == load_criteria(write(tmp_path, YAML, "again.yaml")).specs[1:]
    # frozen again: the old steps are replaced, not repeated
    freeze(file, {"tone": ["Only one step."]}, in_file=True)
    again = path.read_text()
    assert again.count("evaluation_steps:") == 1
    assert again.count("steps_frozen_for:") == 1
    assert load_criteria(path).specs[0].evaluation_steps == ("Only one step.",)  # type: ignore[union-attr]
    path.write_text(again.replace("customer of a bank", "customer"))
    with pytest.raises(StaleStepsError, match=f"frozen in {re.escape(str(path))}"):
        load_criteria(path)


def test_freeze_into_a_json_file(tmp_path: Path) -> None:
    entries = {"criteria": [{"name": "tone", "criteria": "Polite?"}]}
    path = write(tmp_path, json.dumps(entries), "c.json")
    freeze(load_criteria(path), {"tone": STEPS}, in_file=True)
    data = json.loads(path.read_text())
    assert data["criteria"][0]["evaluation_steps"] == STEPS
    assert load_criteria(path).frozen == {"tone"}


def test_freeze_into_a_file_refuses_steps_the_authors_wrote(tmp_path: Path) -> None:
    own = YAML.replace("    scale: [1, 5]\n", "    scale: [1, 5]\n    evaluation_steps: [Mine.]\n")
    path = write(tmp_path, own)
    with pytest.raises(ValueError, match="evaluation steps of its own"):
        freeze(load_criteria(path), {"tone": STEPS}, in_file=True)
    assert path.read_text() == own


# -------------------------------------------------------------------- the registry


def test_register_criteria_lists_and_resolves_them() -> None:
    registry = Registry()
    specs = [Criterion("tone", "Polite?"), Aspect("cites", "Cites a policy.", samples=3)]
    measures = register_criteria(specs, registry=registry)
    assert [m.name for m in measures] == ["tone", "cites"]
    assert {m.kind for m in measures} == {"criteria"}
    rows = {r["measure"]: r for r in registry.rows(plugins=False)}
    assert rows["tone"]["kind"] == "criteria"
    assert rows["tone"]["meaning"] == "Polite?"
    assert rows["tone"]["judge calls"] == "1 + 1 per run (steps)"
    assert rows["cites"]["judge calls"] == "3"
    assert "`tone`" in registry.markdown(plugins=False)
    built = registry.build("tone")
    assert built.name == "tone"
    assert type(built).spec == specs[0]
    assert register_criteria(specs, registry=registry) == measures  # the same again: a no-op
    changed = register_criteria([Criterion("tone", "Polite and warm?")], registry=registry)
    assert registry.measure("tone") == changed[0]
    assert registry.measure("tone").meaning == "Polite and warm?"


def test_register_criteria_refuses_a_built_in_name() -> None:
    with pytest.raises(ValueError, match="'faithfulness' is a built-in measure"):
        register_criteria([Aspect("faithfulness", "x")])
    with pytest.raises(ValueError, match="'Answer_Relevance' is a built-in measure"):
        register_criteria([Aspect("Answer_Relevance", "x")])


def test_a_registered_file_resolves_by_name_with_its_frozen_steps(tmp_path: Path) -> None:
    path = write(tmp_path, YAML)
    freeze(load_criteria(path), {"tone": STEPS})
    file = load_criteria(path)
    try:
        register_criteria(file)
        metric = resolve("tone")
        judge, scored = score_tone([metric])
        assert judge.tasks() == ["criteria.score"]
        assert scored["details"]["steps_source"] == "frozen"  # type: ignore[index]
        assert "tone" in {m.name for m in REGISTRY.measures(kind="criteria", plugins=False)}
    finally:
        for name in file.names:
            REGISTRY.remove_measure(name)
    with pytest.raises(KeyError):
        REGISTRY.remove_measure("tone")


def test_the_documented_format_example_runs() -> None:
    import doctest

    from ragbridge.core.criteria import files

    result = doctest.testmod(files)
    assert result.attempted >= 5
    assert result.failed == 0
