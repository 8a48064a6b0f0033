"""The ranking measures against trec_eval's own output (NIST conformance data in tests/data).

Every case in cases.json, every measure it lists that ragbridge implements, every query and the
``all`` row: values to 4 decimals, and the ``ragbridge trec`` command's lines byte for byte.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.core.retrieval import (
    evaluate_run,
    format_trec_lines,
    parse_trec_measures,
    read_qrels,
    read_run,
)

TREC = Path(__file__).parent / "data" / "trec_eval"
CASES = json.loads((TREC / "cases.json").read_text())["cases"]


def _split_args(args: list[str]) -> tuple[list[str], int]:
    """trec_eval arguments -> (measure specs we implement, relevance level)."""
    specs, level, i = [], 1, 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            specs.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("-m"):
            specs.append(arg[2:])
        elif arg.startswith("-l"):
            level = int(arg[2:])
        i += 1
    supported = []
    for spec in specs:
        try:
            parse_trec_measures([spec])
        except ValueError:
            continue
        supported.append(spec)
    return supported, level


def _expected_values() -> dict[str, dict[tuple[str, str], str]]:
    out: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    with (TREC / "expected_values.csv").open() as handle:
        for row in csv.DictReader(handle):
            out[row["case"]][(row["measure"], row["qid"])] = row["value"]
    return out


EXPECTED = _expected_values()
COVERED = {
    "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank",
    "P", "recall", "ndcg", "ndcg_cut", "map_cut", "success",
}  # fmt: skip


def _covered(trec_name: str) -> bool:
    """Whether a trec_eval output name is one of ours (parses back to the same name)."""
    try:
        measures = parse_trec_measures([trec_name])
    except ValueError:
        return False
    return [m.trec_name for m in measures] == [trec_name]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_every_covered_value_matches_trec_eval(case: dict[str, object]) -> None:
    specs, level = _split_args(case["trec_eval_args"])  # type: ignore[arg-type]
    result = evaluate_run(
        read_qrels(TREC / str(case["qrels"])),
        read_run(TREC / str(case["run"])),
        specs,
        relevance_level=level,
    )
    expected = {
        key: value for key, value in EXPECTED[str(case["case"])].items() if _covered(key[0])
    }
    got: dict[tuple[str, str], float] = {}
    for measure in result.measures:
        for qid, value in result.per_query(measure).items():
            if measure.family != "num_q":
                got[(measure.trec_name, qid)] = value
    for measure, value in result.aggregate().items():
        got[(measure.trec_name, "all")] = value
    assert set(got) == set(expected), "measure/query coverage differs from trec_eval's output"
    for key, text in expected.items():
        assert got[key] == pytest.approx(float(text), abs=5e-5), key
    # The coverage is what the README promises: at least these families in every all_trec case.
    families = {m.family for m in result.measures}
    if "all_trec" in specs:
        assert families == COVERED


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_trec_command_output_is_byte_identical(case: dict[str, object]) -> None:
    specs, level = _split_args(case["trec_eval_args"])  # type: ignore[arg-type]
    argv = ["trec", str(TREC / str(case["qrels"])), str(TREC / str(case["run"])), "-q"]
    argv += [f"-l{level}"]
    for spec in specs:
        argv += ["-m", spec]
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert main(argv) == 0
    ours = buffer.getvalue().splitlines(keepends=True)
    printed = {line.split("\t")[0].rstrip() for line in ours}
    theirs = [
        line
        for line in (TREC / str(case["expected_output"])).read_text().splitlines(keepends=True)
        if line.split("\t")[0].rstrip() in printed
    ]
    assert ours == theirs
    assert len(ours) > 20


def test_format_prints_counts_as_integers_and_pads_names(trec_data: Path) -> None:
    result = evaluate_run(
        read_qrels(trec_data / "rag24" / "qrels.txt"),
        read_run(trec_data / "rag24" / "run.txt"),
        ["num_q", "num_rel", "P_5"],
    )
    lines = list(format_trec_lines(result))
    assert lines[0] == "num_q                 \tall\t8"
    assert lines[1] == "num_rel               \tall\t1181"
    assert lines[2].startswith("P_5                   \tall\t0.")
