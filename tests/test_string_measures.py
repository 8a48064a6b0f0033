"""`ragbridge.adapters.strings`: reference-based string measures.

Values are checked against hand computations and against the libraries called directly.
BERTScore runs on a tiny randomly initialised BERT written to ``tmp_path`` and loaded by path
(bert-score accepts a folder as ``model_type``); sockets are blocked throughout.
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ragbridge.adapters.strings import (
    BERTSCORE_HINT,
    STRINGS_HINT,
    BertScore,
    BertScoreModelNotFoundError,
    Bleu,
    ExactMatch,
    RougeScore,
    TokenF1,
    exact_match,
    normalize_answer,
    token_f1,
)
from ragbridge.core import Sample, evaluate


def _has(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_strings = pytest.mark.skipif(
    not _has("rouge_score", "sacrebleu"), reason="needs the strings extra"
)
needs_bertscore = pytest.mark.skipif(
    not _has("bert_score", "torch", "transformers"), reason="needs the bertscore extra"
)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(self: socket.socket, *args: Any, **kwargs: Any) -> None:
        raise OSError("network access attempted in a hermetic test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def _one(metric: Any, answer: str | None, reference: str | None) -> Any:
    sample = Sample(id="s", question="q", answer=answer, reference=reference)
    score = evaluate([sample], [metric]).get("s", metric.name)
    assert score is not None
    return score


# -- SQuAD exact match and token F1 ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Cat sat.", "cat sat"),
        ("  An apple, a day!  ", "apple day"),
        ("the theory of 'the'", "theory of"),  # whole-word articles only
        ("Hello\tWorld\n", "hello world"),
    ],
)
def test_normalize_answer(text: str, normal: str) -> None:
    assert normalize_answer(text) == normal


@pytest.mark.parametrize(
    ("answer", "reference", "em", "f1", "p", "r"),
    [
        ("The Cat sat.", "cat sat", 1.0, 1.0, 1.0, 1.0),
        # cat sat on mat / cat lay on mat: 3 common of 4 and 4
        ("the cat sat on the mat", "a cat lay on a mat", 0.0, 0.75, 0.75, 0.75),
        # barack obama / obama: P = 1/2, R = 1, F1 = 2·(1/2)·1 / (3/2) = 2/3
        ("Barack Obama", "Obama", 0.0, 2 / 3, 0.5, 1.0),
        # multiset intersection: cat×3 vs cat×1 → 1 common; P = 1/3, R = 1, F1 = 1/2
        ("cat cat cat", "cat", 0.0, 0.5, 1 / 3, 1.0),
        ("Paris", "London", 0.0, 0.0, 0.0, 0.0),
        # both normalise to nothing: SQuAD 2.0 counts agreement as 1
        ("The.", "a", 1.0, 1.0, 1.0, 1.0),
        ("The.", "cat", 0.0, 0.0, 0.0, 0.0),
    ],
)
def test_em_and_f1_by_hand(
    answer: str, reference: str, em: float, f1: float, p: float, r: float
) -> None:
    assert exact_match(answer, reference) == em
    assert token_f1(answer, reference) == pytest.approx((f1, p, r))
    assert _one(ExactMatch(), answer, reference).value == em
    score = _one(TokenF1(), answer, reference)
    assert score.value == pytest.approx(f1)
    assert score.details == pytest.approx({"precision": p, "recall": r, "f1": f1})


def test_names_and_providers() -> None:
    metrics: list[Any] = [ExactMatch(), TokenF1()]
    if _has("rouge_score", "sacrebleu"):
        metrics += [RougeScore(), RougeScore("rouge1"), RougeScore("rouge2"), Bleu()]
        assert RougeScore(stat="r").name == "rouge_l_recall"
    names = [m.name for m in metrics]
    assert names[:2] == ["exact_match", "token_f1"]
    assert set(names[2:]) <= {"rouge_l", "rouge_1", "rouge_2", "bleu"}
    for m in metrics:
        assert m.provider == "string"
        assert not m.needs_judge
        assert not m.needs_nli
        assert m.requires == ("answer", "reference")


@pytest.mark.parametrize(("answer", "reference"), [("", "cat"), ("cat", None), ("  ", "cat")])
def test_missing_inputs(answer: str, reference: str | None) -> None:
    for metric in (ExactMatch(), TokenF1()):
        score = _one(metric, answer, reference)
        assert score.failure is not None
        assert score.failure.kind.value == "missing_input"


# -- ROUGE and BLEU ------------------------------------------------------------------------------

PAIRS = [
    ("the cat sat on the mat", "the cat lay on the mat"),
    ("Paris is the capital and largest city of France.", "The capital of France is Paris."),
    ("Cats are running quickly", "a cat runs"),
    ("completely different words here", "nothing shared at all"),
]


@needs_strings
@pytest.mark.parametrize("kind", ["rougeL", "rouge1", "rouge2"])
@pytest.mark.parametrize(("answer", "reference"), PAIRS)
def test_rouge_equals_the_library(kind: str, answer: str, reference: str) -> None:
    from rouge_score import rouge_scorer

    want = rouge_scorer.RougeScorer([kind], use_stemmer=True).score(reference, answer)[kind]
    for stat, value in (("f", want.fmeasure), ("p", want.precision), ("r", want.recall)):
        score = _one(RougeScore(kind, stat), answer, reference)  # type: ignore[arg-type]
        assert score.value == pytest.approx(value, abs=1e-12)
    assert score.details == pytest.approx(
        {"precision": want.precision, "recall": want.recall, "f": want.fmeasure}
    )


@needs_strings
def test_rouge_by_hand() -> None:
    """the cat sat on the mat / the cat lay on the mat: 5 of 6 unigrams, LCS 5, 3 of 5 bigrams."""
    a, r = PAIRS[0]
    assert _one(RougeScore("rouge1"), a, r).value == pytest.approx(5 / 6)
    assert _one(RougeScore("rougeL"), a, r).value == pytest.approx(5 / 6)
    assert _one(RougeScore("rouge2"), a, r).value == pytest.approx(3 / 5)
    assert _one(RougeScore("rouge1"), "cats running", "cat run").value == 1.0  # Porter stemmer


@needs_strings
@pytest.mark.parametrize(("answer", "reference"), PAIRS)
def test_bleu_equals_the_library(answer: str, reference: str) -> None:
    import sacrebleu

    want = sacrebleu.sentence_bleu(answer, [reference])
    score = _one(Bleu(), answer, reference)
    assert score.value == pytest.approx(want.score / 100, abs=1e-12)
    assert score.details["precisions"] == pytest.approx([p / 100 for p in want.precisions])
    assert score.details["brevity_penalty"] == pytest.approx(want.bp)
    lower = sacrebleu.sentence_bleu(answer, [reference], lowercase=True)
    assert _one(Bleu(lowercase=True), answer, reference).value == pytest.approx(lower.score / 100)


@needs_strings
def test_bleu_by_hand() -> None:
    """All n-gram precisions are 1 and the answer is 6 tokens to 7: BLEU = BP = exp(1 − 7/6)."""
    score = _one(Bleu(), "the cat sat on the mat", "the cat sat on the mat today")
    assert score.value == pytest.approx(math.exp(1 - 7 / 6))


@needs_strings
def test_identical_strings_score_one() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    for metric in (ExactMatch(), TokenF1(), RougeScore(), RougeScore("rouge2"), Bleu()):
        assert _one(metric, text, text).value == pytest.approx(1.0)
        empty = _one(metric, "", text)
        assert empty.failure is not None
        assert empty.failure.kind.value == "missing_input"


@needs_strings
def test_rouge_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        RougeScore("rougeLsum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stat"):
        RougeScore(stat="x")  # type: ignore[arg-type]


# -- BERTScore -----------------------------------------------------------------------------------

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    *"the a cat sat on mat dog ran lay paris is capital of france berlin germany .".split(),  # noqa: SIM905
]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not _has("bert_score", "torch", "transformers"):
        pytest.skip("needs the bertscore extra")
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("bert")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(folder), model_max_length=64)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)


BERT_PAIRS = [
    ("the cat sat on the mat .", "the cat lay on the mat ."),
    ("paris is the capital of france .", "berlin is the capital of germany ."),
    ("the dog ran .", "a cat sat ."),
]


@needs_bertscore
def test_bertscore_equals_the_library(tiny_bert: str) -> None:
    import bert_score

    direct = bert_score.BERTScorer(model_type=tiny_bert, num_layers=1)
    p, r, f = direct.score([a for a, _ in BERT_PAIRS], [b for _, b in BERT_PAIRS])
    metric = BertScore(tiny_bert, num_layers=1)
    assert metric.name == "bert_score"
    assert metric.provider == "string"
    samples = [
        Sample(id=str(i), question="q", answer=a, reference=b)
        for i, (a, b) in enumerate(BERT_PAIRS)
    ]
    ev = evaluate(samples, [metric])
    assert len({round(float(x), 5) for x in f}) == len(BERT_PAIRS)  # the pairs differ
    for i in range(len(BERT_PAIRS)):
        score = ev.get(str(i), "bert_score")
        assert score is not None
        assert score.value is not None
        assert score.value == pytest.approx(min(1.0, max(0.0, float(f[i]))), abs=1e-5)
        assert score.details["precision"] == pytest.approx(float(p[i]), abs=1e-5)
        assert score.details["recall"] == pytest.approx(float(r[i]), abs=1e-5)
        assert score.details["num_layers"] == 1


@needs_bertscore
def test_bertscore_identical_and_concurrent(tiny_bert: str) -> None:
    metric = BertScore(tiny_bert, num_layers=1).load()
    text = "the cat sat on the mat ."
    assert _one(metric, text, text).value == pytest.approx(1.0, abs=1e-5)
    empty = _one(metric, "", text)
    assert empty.failure is not None
    assert empty.failure.kind.value == "missing_input"

    alone = {pair: metric._score_pair(*pair) for pair in BERT_PAIRS}
    results: dict[int, tuple[float, float, float]] = {}

    def work(i: int) -> None:
        results[i] = metric._score_pair(*BERT_PAIRS[i % len(BERT_PAIRS)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in results.items():
        assert got == pytest.approx(alone[BERT_PAIRS[i % len(BERT_PAIRS)]], abs=1e-5)


@needs_bertscore
def test_bertscore_settings_and_missing_models(tiny_bert: str) -> None:
    with pytest.raises(ValueError, match="num_layers is required"):
        BertScore(tiny_bert)
    with pytest.raises(ValueError, match="model_type or lang"):
        BertScore()
    with pytest.raises(ValueError, match="needs lang"):
        BertScore(tiny_bert, 1, rescale_with_baseline=True)
    with pytest.raises(ValueError, match="no 'en' baseline"):
        BertScore(tiny_bert, 1, lang="en", rescale_with_baseline=True).load()
    with pytest.raises(BertScoreModelNotFoundError, match="never downloads"):
        BertScore("ragbridge-tests/no-such-model", num_layers=1).load()
    # bert-score's default English model is not on this machine either: a clear error, no fetch.
    with pytest.raises(BertScoreModelNotFoundError, match="roberta-large"):
        BertScore(lang="en").load()


# -- optional imports ----------------------------------------------------------------------------

_BLOCK = """
import json, sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"rouge_score", "sacrebleu", "bert_score"}:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, _Block())
import ragbridge.adapters.strings as s
out = {}
for label, make in [("rouge", lambda: s.RougeScore()), ("bleu", lambda: s.Bleu()),
                    ("bert", lambda: s.BertScore("m", 1)), ("em", lambda: s.ExactMatch())]:
    try:
        make()
        out[label] = None
    except ImportError as exc:
        out[label] = str(exc)
print(json.dumps(out))
"""


def test_missing_libraries_name_the_extra() -> None:
    out = subprocess.run([sys.executable, "-c", _BLOCK], capture_output=True, text=True, check=True)
    messages = json.loads(out.stdout)
    assert STRINGS_HINT in messages["rouge"]
    assert STRINGS_HINT in messages["bleu"]
    assert BERTSCORE_HINT in messages["bert"]
    assert messages["em"] is None  # EM and token F1 need no library
    assert STRINGS_HINT == 'pip install ".[strings]" (in your ragbridge clone)'
    assert BERTSCORE_HINT == 'pip install ".[bertscore]" (in your ragbridge clone)'


def test_import_is_light() -> None:
    code = (
        "import sys, json, ragbridge.adapters.strings\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy = {"torch", "transformers", "bert_score", "rouge_score", "sacrebleu", "nltk"}
    assert heavy & set(json.loads(out.stdout)) == set()


def test_bertscore_empty_folder_is_an_error(tmp_path: Path) -> None:
    """A folder without weights is reported as missing, not downloaded."""
    if not _has("bert_score", "torch", "transformers"):
        pytest.skip("needs the bertscore extra")
    with pytest.raises((OSError, ValueError)):
        BertScore(tmp_path, num_layers=1).load()
