"""What ``--metrics``, ``--judge`` and ``--embedder`` mean on the command line, said truly.

* without ``--judge``, ``faithfulness`` is ``faithfulness:offline`` and the command says so once;
* the default embedder is real: a metric that needs one gets the local embedder (as ``--help``
  says), and a missing ``local`` extra is one line naming ``--embedder`` and the extra;
* no message names a Python argument (``embedder=...``);
* misspelled names get "did you mean" and the list of what exists; ``--version`` works.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from ragbridge.adapters.cli import main
from ragbridge.adapters.cli.options import embedder_for
from ragbridge.core.metrics import by_name
from ragbridge.core.results.evaluation import Evaluation
from ragbridge.core.sample import Context, Sample, save_samples
from ragbridge.core.testing import HashEmbedder

DATA = Path(__file__).parent / "data"
COUNTING = "python:ragbridge.core.testing:CountingJudge"
PYTHON_ARGUMENT = re.compile(r"\b(judge|embedder|nli|cache)=")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    save_samples(
        [
            Sample(
                id=f"q{i}",
                question=f"What colour is the sky on day {i}?",
                answer=f"On day {i} the sky is blue.",
                contexts=[Context(text=f"Day {i}: the sky is blue.", id=f"d{i}")],
                reference=f"The sky is blue on day {i}.",
                relevance={f"d{i}": 1},
            )
            for i in range(4)
        ],
        path,
    )
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert not PYTHON_ARGUMENT.search(err), f"a CLI message names a Python argument: {err}"
    return code, out, err


# --------------------------------------------------------------------------- the no-judge rule


def test_without_a_judge_faithfulness_is_the_offline_provider_and_it_says_so_once(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / "r.jsonl"
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness,mrr", "--embedder", "hash",
        "--out", str(out_path),
    )  # fmt: skip
    assert code == 0, err
    assert err.splitlines() == ["ragbridge: faithfulness → faithfulness:offline (no --judge)"]
    assert Evaluation.from_jsonl(out_path).get("q0", "faithfulness").provider == "offline"  # type: ignore[union-attr]


def test_with_a_judge_faithfulness_is_the_judge_version_and_nothing_is_said(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / "r.jsonl"
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness", "--judge", COUNTING,
        "--out", str(out_path),
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert Evaluation.from_jsonl(out_path).get("q0", "faithfulness").provider == "llm"  # type: ignore[union-attr]


def test_an_explicit_provider_is_not_a_substitution(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness:offline", "--embedder", "hash"
    )
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ("correctness", "correctness needs a judge and no offline provider exists: pass --judge"),
        ("faithfulness:llm", "faithfulness needs a judge: pass --judge SPEC"),
        ("faithfulness:nli", "faithfulness:nli needs an NLI model: pass --nli MODEL"),
    ],
)
def test_what_a_metric_needs_and_lacks_is_refused_naming_the_flag(
    metrics: str, message: str, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", metrics)
    assert code == 2
    assert err.startswith(f"ragbridge: error: {message}")
    assert err.count("\n") == 1


# --------------------------------------------------------------------------- the default embedder


def test_a_judge_without_embedder_gets_the_local_embedder_as_help_says() -> None:
    from ragbridge.adapters.local import NUMPY_MODEL, LocalEmbedder

    metrics = [by_name("answer_relevance")]  # the judge version: it embeds questions
    embedder = embedder_for(None, None, metrics)
    assert isinstance(embedder, LocalEmbedder)  # built lazily: no model is loaded here
    assert embedder.model == NUMPY_MODEL  # all-MiniLM-L6-v2 on the default backend
    assert embedder_for(None, None, [by_name("faithfulness")]) is None  # no metric needs one


def test_answer_relevance_with_a_judge_is_scored_with_the_default_embedder(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every answer_relevance cell failed "needs an embedder (embedder=...)".
    class FastLocal(HashEmbedder):  # the local embedder without its 5-8 s model load
        def __init__(self, model: str | None = None) -> None:
            super().__init__()
            self.model = "all-MiniLM-L6-v2"

    monkeypatch.setattr("ragbridge.adapters.local.LocalEmbedder", FastLocal)
    out_path = tmp_path / "r.jsonl"
    code, out, err = run_cli(
        capsys, "eval", str(data), "--metrics", "answer_relevance", "--judge", COUNTING,
        "--out", str(out_path),
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    results = Evaluation.from_jsonl(out_path)
    assert results.metadata["embedding_model"] == "all-MiniLM-L6-v2"
    assert all(s.status == "scored" for _, _, s in results)
    assert "answer_relevance" in out


def test_the_hash_embedder_spec_is_used_when_given(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "eval", str(data), "--metrics", "answer_relevance", "--judge", COUNTING,
        "--embedder", "hash",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert re.search(r"answer_relevance\s+\d\.\d{3}.*\s4\s+0\s+0", out)


def test_a_missing_local_extra_is_one_line_naming_embedder_and_the_extra(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ragbridge.adapters.local._installed", lambda module: False)
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "answer_relevance", "--judge", COUNTING
    )
    assert code == 2
    assert err == (
        "ragbridge: error: answer_relevance needs an embedder and the default one "
        '(--embedder local) is not installed: pip install ".[local]" (in your ragbridge clone), '
        "or pass "
        "--embedder SPEC (e.g. --embedder openai:text-embedding-3-small)\n"
    )


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("fathfulness", "unknown metric 'fathfulness'; did you mean faithfulness"),
        ("recall", "'recall' needs a cutoff: recall@k, e.g. recall@5"),
        ("recal@5", "unknown metric 'recal@5'; did you mean recall@5?"),
        ("answer_relevancy", "did you mean answer_relevance?"),
        ("faithfulnes:offline", "did you mean faithfulness:offline?"),
        ("ndcg@5,nope", "unknown metric 'nope'"),
    ],
)
def test_misspelled_metrics_get_a_suggestion_and_the_list_of_what_exists(
    name: str, expected: str, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "eval", str(data), "--metrics", name)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("ragbridge: error: --metrics: ")
    assert expected in err
    for listed in ("judge measures: faithfulness", "offline measures: answer_similarity",
                   "ranking measures: recall@k"):  # fmt: skip
        assert listed in err


def test_estimate_suggests_too(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "estimate", str(data), "--metrics", "contxt_recall")
    assert code == 2
    assert "did you mean context_recall" in err  # first; citation_recall is close too


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"ragbridge {version('ragbridge')}\n"
    exe = shutil.which("ragbridge", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, f"ragbridge {version('ragbridge')}\n")


# --------------------------------------------------------------------------- langsmith exports


def test_langsmith_default_metrics_are_the_ones_runs_can_support(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("langsmith")
    code, out, err = run_cli(
        capsys, "langsmith", str(DATA / "langsmith_runs.jsonl"), "--embedder", "hash"
    )
    assert code == 0, err
    assert out.splitlines()[0] == "4 samples, 2 metrics"
    assert "missing_input" not in out


def test_langsmith_metrics_the_runs_cannot_support_fail_naming_field_and_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: `missing_input 4` in the table, exit 0, and no word on which field or what to do.
    pytest.importorskip("langsmith")
    code, out, err = run_cli(
        capsys, "langsmith", str(DATA / "langsmith_runs.jsonl"), "--embedder", "hash",
        "--metrics", "faithfulness,context_recall,recall@5",
    )  # fmt: skip
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[0] == (
        "ragbridge: faithfulness → faithfulness:offline, "
        "context_recall → context_recall:offline (no --judge)"
    )
    recall, ranking = lines[1:]
    assert recall.startswith("ragbridge: error: context_recall: 4 of 4 cells failed")
    assert "'reference'" in recall
    assert recall.endswith(
        "fix: LangSmith runs carry no 'reference' (labels live on dataset examples): drop "
        "context_recall from --metrics, or keep the samples with --save-samples, add "
        "'reference' and run ragbridge eval"
    )
    assert ranking.startswith("ragbridge: error: recall@5: 4 of 4 cells failed")
    assert "'relevance'" in ranking
    assert "missing_input 4" in out


def test_nli_names_the_model_of_the_nli_providers(
    data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    from ragbridge.adapters.nli import NLIModel

    seen: dict[str, object] = {}

    def evaluate(samples: object, metrics: object, **kwargs: object) -> Evaluation:
        seen.update(kwargs)
        return Evaluation()

    monkeypatch.setattr("ragbridge.core.scoring.runner.evaluate", evaluate)
    code, _, err = run_cli(
        capsys, "eval", str(data), "--metrics", "faithfulness:nli", "--nli", "some-nli-model"
    )
    assert (code, err) == (0, "")
    assert isinstance(seen["nli"], NLIModel)
    assert seen["nli"].model == "some-nli-model"  # type: ignore[attr-defined]
