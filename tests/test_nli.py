"""`ragbridge.adapters.nli`: the NLI model adapter and the ``nli`` provider of the claim measures.

The model tests load a tiny randomly initialised BERT classifier, written to ``tmp_path`` with
``save_pretrained``, through the real `NLIModel` code path (no weights are downloaded: sockets are
blocked). The measure tests use a scripted `EntailmentModel` and hand-computed values.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.nli import INSTALL_HINT, NLIModel, NLIModelNotFoundError, _columns
from ragbridge.core import Sample, evaluate
from ragbridge.core.judging.judge import Entailment, EntailmentModel
from ragbridge.core.metrics import Faithfulness, Hallucination, by_name


def nli_faithfulness(threshold: float = 0.5) -> Faithfulness:
    """The core measure with the nli provider (the adapter holds no copy of it)."""
    return Faithfulness("nli", entailment=threshold)


def nli_hallucination() -> Hallucination:
    return Hallucination("nli")


HAVE_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs the nli extra (torch, transformers)")

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    *"the a cat sat on mat dog ran paris is capital of france berlin germany in not . ,".split(),  # noqa: SIM905
]  # fmt: skip
THREE = {0: "contradiction", 1: "neutral", 2: "entailment"}


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        raise OSError("network access attempted in a hermetic test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def _save_tiny(folder: Path, id2label: dict[int, str], state: Any = None) -> Any:
    """A 1-layer BERT classifier + WordPiece tokenizer in ``folder``; returns the state dict."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(folder), model_max_length=64)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    if state is None:
        with torch.no_grad():  # spread the logits so the classes differ clearly
            model.classifier.weight.normal_(0.0, 3.0)
            model.classifier.bias.copy_(torch.linspace(1.5, -1.5, len(id2label)))
    else:
        model.load_state_dict(state)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return model.state_dict()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not HAVE_TORCH:
        pytest.skip("needs the nli extra (torch, transformers)")
    root = tmp_path_factory.mktemp("nli")
    state = _save_tiny(root / "cne", THREE)
    permuted = {0: "ENTAILMENT", 1: "Neutral", 2: "CONTRADICTION"}
    _save_tiny(root / "enc", permuted, state=state)
    _save_tiny(root / "two", {0: "entailment", 1: "not_entailment"})
    _save_tiny(root / "bad", {0: "LABEL_0", 1: "LABEL_1"})
    return {"cne": root / "cne", "enc": root / "enc", "two": root / "two", "bad": root / "bad"}


PAIRS = [
    ("paris is the capital of france .", "paris is in france ."),
    ("berlin is the capital of germany .", "paris is in germany ."),
    ("the cat sat on the mat .", "the dog ran ."),
]


def _run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


# -- the model adapter ---------------------------------------------------------------------------


@needs_torch
def test_probabilities_are_distributions(models: dict[str, Path]) -> None:
    nli = NLIModel(models["cne"])
    assert isinstance(nli, EntailmentModel)
    assert not nli.loaded
    out = _run(nli.predict(PAIRS))
    assert nli.loaded
    assert nli.labels == THREE
    assert nli.detects_contradiction is True
    assert len(out) == len(PAIRS)
    for e in out:
        probs = (e.entailment, e.neutral, e.contradiction)
        assert all(0.0 <= p <= 1.0 for p in probs)
        assert sum(probs) == pytest.approx(1.0, abs=1e-5)
    assert len({round(e.entailment, 6) for e in out}) > 1  # not a constant model


@needs_torch
def test_labels_follow_id2label_order(models: dict[str, Path]) -> None:
    """Same weights, permuted id2label: entailment and contradiction swap places."""
    a = _run(NLIModel(models["cne"]).predict(PAIRS))
    b = _run(NLIModel(models["enc"]).predict(PAIRS))
    for x, y in zip(a, b, strict=True):
        assert x.contradiction > x.entailment  # column 0 has the largest bias
        assert y.entailment == pytest.approx(x.contradiction, abs=1e-6)
        assert y.contradiction == pytest.approx(x.entailment, abs=1e-6)
        assert y.neutral == pytest.approx(x.neutral, abs=1e-6)


@needs_torch
def test_batching_and_memo_do_not_change_results(models: dict[str, Path]) -> None:
    one = NLIModel(models["cne"], batch_size=1, cache_size=0)
    many = NLIModel(models["cne"], batch_size=16)
    a = _run(one.predict(PAIRS))
    b = _run(many.predict(PAIRS))
    c = _run(many.predict(list(reversed(PAIRS))))  # from the memo
    for x, y in zip(a, b, strict=True):
        assert y.entailment == pytest.approx(x.entailment, abs=1e-5)
    assert c == list(reversed(b))
    assert _run(many.predict([])) == []


@needs_torch
def test_long_inputs_are_truncated(models: dict[str, Path]) -> None:
    nli = NLIModel(models["cne"], max_length=24)
    long_premise = " ".join(["the cat sat on the mat ."] * 40)
    long_claim = " ".join(["paris is in france"] * 40)
    out = _run(nli.predict([(long_premise, "the cat sat ."), ("paris .", long_claim)]))
    assert len(out) == 2
    assert all(sum((e.entailment, e.neutral, e.contradiction)) == pytest.approx(1.0) for e in out)


@needs_torch
def test_two_label_model(models: dict[str, Path]) -> None:
    nli = NLIModel(models["two"])
    out = _run(nli.predict(PAIRS))
    assert nli.detects_contradiction is False
    for e in out:
        assert e.contradiction == 0.0
        assert e.entailment + e.neutral == pytest.approx(1.0, abs=1e-5)
    sample = Sample(id="s", question="q", answer="Paris is in France.", contexts=["paris ."])
    ev = evaluate([sample], [nli_faithfulness(), nli_hallucination()], nli=nli)
    assert ev.get("s", "faithfulness").status == "scored"  # type: ignore[union-attr]
    failure = ev.get("s", "hallucination").failure  # type: ignore[union-attr]
    assert failure is not None
    assert failure.kind.value == "invalid_input"
    assert "not_entailment" in failure.message


@needs_torch
def test_bad_label_set_is_refused(models: dict[str, Path]) -> None:
    nli = NLIModel(models["bad"])
    with pytest.raises(ValueError, match="LABEL_0") as info:
        nli.load()
    assert "entailment" in str(info.value)
    with pytest.raises(ValueError, match="LABEL_1"):
        _run(nli.predict(PAIRS[:1]))


@needs_torch
def test_missing_model_is_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(NLIModelNotFoundError, match="never downloads"):
        NLIModel("ragbridge-tests/no-such-nli-model").load()
    with pytest.raises(NLIModelNotFoundError, match="folder"):
        NLIModel(tmp_path).load()


@needs_torch
def test_metrics_end_to_end(models: dict[str, Path]) -> None:
    nli = NLIModel(models["cne"])
    samples = [
        Sample(
            id="a",
            question="Where is Paris?",
            answer="Paris is in France. Berlin is in Germany.",
            contexts=["paris is the capital of france .", "berlin is the capital of germany ."],
        ),
        Sample(id="b", question="?", answer="The cat sat.", contexts=[]),
        Sample(id="c", question="?", answer="", contexts=["paris ."]),
    ]
    calls: list[int] = []
    forward = nli._forward

    def counting(pairs: list[tuple[str, str]]) -> list[Entailment]:
        calls.append(len(pairs))
        return forward(pairs)

    nli._forward = counting  # type: ignore[method-assign]
    ev = evaluate(samples, [nli_faithfulness(), nli_hallucination()], nli=nli)
    assert sum(calls) == 4  # 2 sentences x 2 contexts, shared by both measures via the memo

    sentences = ("Paris is in France.", "Berlin is in Germany.")
    texts = [c.text for c in samples[0].contexts]
    direct = _run(NLIModel(models["cne"]).predict([(c, s) for s in sentences for c in texts]))
    rows = [direct[0:2], direct[2:4]]
    max_e = [max(e.entailment for e in row) for row in rows]
    max_c = [max(e.contradiction for e in row) for row in rows]
    faith = ev.get("a", "faithfulness")
    hall = ev.get("a", "hallucination")
    assert faith is not None
    assert hall is not None
    assert faith.value == pytest.approx(sum(e >= 0.5 for e in max_e) / 2)
    assert hall.value == pytest.approx(sum(max_c) / 2, abs=1e-6)
    assert faith.provider == hall.provider == "nli"
    assert ev.get("b", "faithfulness").value == 0.0  # type: ignore[union-attr]
    assert ev.get("b", "hallucination").value == 1.0  # type: ignore[union-attr]
    assert ev.get("c", "faithfulness").failure.kind.value == "missing_input"  # type: ignore[union-attr]


# -- label mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("id2label", "probs", "expected"),
    [
        (THREE, [0.1, 0.2, 0.7], (0.7, 0.2, 0.1)),
        ({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}, [0.1, 0.2, 0.7], (0.1, 0.2, 0.7)),
        ({0: "contradiction", 1: "entailment", 2: "neutral"}, [0.1, 0.2, 0.7], (0.2, 0.7, 0.1)),
        ({"0": "entailment", "1": "not_entailment"}, [0.3, 0.7], (0.3, 0.7, 0.0)),
        ({0: "Not Entailment", 1: "Entailment"}, [0.3, 0.7], (0.7, 0.3, 0.0)),
    ],
)
def test_columns_map_labels(
    id2label: dict[Any, str], probs: list[float], expected: tuple[float, float, float]
) -> None:
    e = _columns(id2label, "m").read(probs)
    assert (e.entailment, e.neutral, e.contradiction) == expected


@pytest.mark.parametrize(
    "id2label",
    [
        {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"},
        {0: "LABEL_0"},
        {0: "entailment", 1: "entailment", 2: "contradiction"},
        {0: "entailment", 1: "neutral"},
        {0: "entailment", 1: "neutral", 2: "contradiction", 3: "other"},
    ],
)
def test_columns_refuse_other_label_sets(id2label: dict[int, str]) -> None:
    with pytest.raises(ValueError, match="not an MNLI-style") as info:
        _columns(id2label, "m")
    assert repr(id2label[0]) in str(info.value)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="threshold"):
        Faithfulness("nli", entailment=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        NLIModel("m", batch_size=0)
    with pytest.raises(ValueError, match="model"):
        NLIModel("")


# -- the measures, with a scripted model ---------------------------------------------------------


class ScriptedNLI:
    """An `EntailmentModel` answering from a table; unknown pairs are neutral."""

    model = "scripted-nli"

    def __init__(self, table: dict[tuple[str, str], tuple[float, float, float]]) -> None:
        self.table = table
        self.calls: list[list[tuple[str, str]]] = []

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        self.calls.append(list(pairs))
        return [Entailment(*self.table.get(p, (0.0, 1.0, 0.0))) for p in pairs]


A, B = "Context A.", "Context B."
S1, S2 = "Paris is in France.", "Berlin is in Spain."
TABLE = {
    (A, S1): (0.9, 0.05, 0.05),
    (B, S1): (0.2, 0.7, 0.1),
    (A, S2): (0.1, 0.3, 0.6),
    (B, S2): (0.3, 0.6, 0.1),
}
SAMPLE = Sample(id="s", question="q", answer=f"{S1} {S2}", contexts=[A, B])


def test_scripted_values_by_hand() -> None:
    """S1: max entailment 0.9 (context 1), max contradiction 0.1; S2: 0.3 and 0.6.

    faithfulness = 1/2 at threshold 0.5 and 2/2 at 0.25; hallucination = (0.1 + 0.6)/2 = 0.35,
    max 0.6.
    """
    ev = evaluate([SAMPLE], [nli_faithfulness(), nli_hallucination()], nli=ScriptedNLI(TABLE))
    faith, hall = ev.get("s", "faithfulness"), ev.get("s", "hallucination")
    assert faith is not None
    assert hall is not None
    assert faith.value == 0.5
    assert hall.value == pytest.approx(0.35, abs=1e-12)
    assert faith.provider == "nli"
    assert faith.judge_model == "scripted-nli"
    claims = faith.details["claims"]  # type: ignore[index,call-overload]
    assert [c["supported"] for c in claims] == [True, False]
    assert [c["entailment"] for c in claims] == [0.9, 0.3]
    assert [c["context"] for c in claims] == [1, 2]
    assert hall.details["max"] == 0.6  # type: ignore[index,call-overload]
    assert hall.details["mean"] == 0.35  # type: ignore[index,call-overload]
    assert [s["contradiction"] for s in hall.details["sentences"]] == [0.1, 0.6]  # type: ignore[index,call-overload]

    low = evaluate([SAMPLE], [nli_faithfulness(threshold=0.25)], nli=ScriptedNLI(TABLE))
    assert low.get("s", "faithfulness").value == 1.0  # type: ignore[union-attr]


def test_names_and_providers() -> None:
    f, h = by_name("faithfulness:nli"), by_name("hallucination:nli")
    assert (f.name, h.name) == ("faithfulness", "hallucination")
    for m in (f, h):
        assert m.provider == "nli"
        assert m.needs_nli
        assert not m.needs_judge
        assert not m.needs_embedder
    assert isinstance(f, Faithfulness)
    assert f.entailment == 0.5
    assert repr(f) == "Faithfulness(provider='nli')"


def test_the_adapter_holds_no_second_copy_of_the_measures() -> None:
    import ragbridge.adapters.nli as adapter

    assert not hasattr(adapter, "NLIFaithfulness")
    assert not hasattr(adapter, "NLIHallucination")


class TwoLabelNLI(ScriptedNLI):
    """A two-label (entailment / not_entailment) model double: it never reports contradiction."""

    detects_contradiction = False

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        out = await super().predict(pairs)
        return [Entailment(e.entailment, 1.0 - e.entailment, 0.0) for e in out]


class LazyTwoLabelNLI(TwoLabelNLI):
    """Like `NLIModel`: it only knows it has two labels once the first predict loaded it."""

    def __init__(self, table: dict[tuple[str, str], tuple[float, float, float]]) -> None:
        super().__init__(table)
        self.detects_contradiction = None  # type: ignore[assignment]

    async def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        self.detects_contradiction = False
        return await super().predict(pairs)


@pytest.mark.parametrize("model", [TwoLabelNLI, LazyTwoLabelNLI])
def test_hallucination_by_name_refuses_a_two_label_model(model: type[ScriptedNLI]) -> None:
    """Before: by_name("hallucination:nli") scored 0.0 on a two-label model (the guard lived
    only in an adapter subclass). After: one implementation, a typed failure naming the model."""
    nli = model(TABLE)
    ev = evaluate([SAMPLE], ["faithfulness:nli", "hallucination:nli"], nli=nli)
    faith, hall = ev.get("s", "faithfulness"), ev.get("s", "hallucination")
    assert faith is not None
    assert hall is not None
    assert faith.value == 0.5  # entailment-based: a two-label model serves faithfulness
    assert hall.value is None
    assert hall.failure is not None
    assert hall.failure.kind.value == "invalid_input"
    assert "scripted-nli" in hall.failure.message
    assert "not_entailment" in hall.failure.message
    assert "three-label" in hall.failure.message


def test_threshold_is_checked_in_the_core() -> None:
    with pytest.raises(ValueError, match="entailment threshold"):
        Faithfulness("nli", entailment=1.5)
    with pytest.raises(ValueError, match="entailment threshold"):
        Hallucination("nli", entailment=True)


@pytest.mark.parametrize(
    ("sample", "faith", "hall"),
    [
        (Sample(id="e", question="q", answer="  ", contexts=[A]), "missing_input", "missing_input"),
        (Sample(id="n", question="q", answer="...", contexts=[A]), "no_claims", "no_claims"),
        (Sample(id="z", question="q", answer=S1, contexts=[]), 0.0, 1.0),
    ],
)
def test_edge_policy(sample: Sample, faith: object, hall: object) -> None:
    nli = ScriptedNLI(TABLE)
    ev = evaluate([sample], [nli_faithfulness(), nli_hallucination()], nli=nli)
    for name, want in (("faithfulness", faith), ("hallucination", hall)):
        score = ev.get(sample.id, name)
        assert score is not None
        if isinstance(want, str):
            assert score.failure is not None
            assert score.failure.kind.value == want
        else:
            assert score.value == want
    assert nli.calls == []  # nothing to ask the model in any of these cases


def test_without_a_model_is_missing_input() -> None:
    ev = evaluate([SAMPLE], [nli_faithfulness()])
    failure = ev.get("s", "faithfulness").failure  # type: ignore[union-attr]
    assert failure is not None
    assert failure.kind.value == "missing_input"
    assert "nli=" in failure.message


# -- optional imports ----------------------------------------------------------------------------

_BLOCK = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "transformers"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, _Block())
"""


def test_import_is_light_and_missing_extra_is_named() -> None:
    code = (
        _BLOCK
        + "import json\n"
        + "import ragbridge.adapters.nli as nli\n"
        + "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers'})\n"
        + "try:\n    nli.NLIModel('some/model')\n    msg = None\n"
        + "except ImportError as exc:\n    msg = str(exc)\n"
        + "print(json.dumps([loaded, msg]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, message = json.loads(out.stdout)
    assert loaded == []
    assert message is not None
    assert INSTALL_HINT in message
    assert INSTALL_HINT == 'pip install ".[nli]" (in your ragbridge clone)'


def test_plain_import_loads_no_torch() -> None:
    code = (
        "import sys, json, ragbridge.adapters.nli\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert {"torch", "transformers"} & set(json.loads(out.stdout)) == set()
