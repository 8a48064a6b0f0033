"""Issue 33, R1: the perturbations of a robustness run and the counterfactual fact.

Noise comes from passages retrieved for other questions (never the question's own, never one it
labels relevant), deterministically per (sample, condition, seed) across processes; ratios
replace round-half-up(r * k) of the k live passages, keeping the most relevant; the negative
condition is all noise; a counterfactual replaces a fact by whole words in any case. The
counterfactual comes from the user, the offline rule (numbers, years, names) or the judge.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from ragbridge.core.judging.engine import JudgeEngine
from ragbridge.core.robustness import (
    CLEAN,
    Condition,
    Counterfactual,
    NoisePool,
    PoolTooSmall,
    judge_counterfactual,
    judge_counterfactual_attempt,
    noise_count,
    offline_counterfactual,
    offline_counterfactual_attempt,
    perturb,
    replace_fact,
    user_counterfactual,
)
from ragbridge.core.sample import Context, Sample
from ragbridge.core.testing import ScriptedJudge
from ragbridge.core.text.words import numbers

K = 5


def _sample(i: int, *, shared: str | None = None, **fields: Any) -> Sample:
    """Question ``i`` with K passages of its own (ids ``q{i}-c{j}``), optionally one passage
    text it shares with another question (retrieved for both)."""
    contexts = [Context(text=f"Passage {j} about topic {i}.", id=f"q{i}-c{j}") for j in range(K)]
    if shared is not None:
        contexts[-1] = Context(text=shared, id=f"q{i}-shared")
    return Sample(id=f"q{i}", question=f"Question {i}?", contexts=contexts, **fields)


SHARED = "A passage both q0 and q1 retrieved."
CLEAN_RUN = [
    _sample(0, shared=SHARED),
    _sample(1, shared=SHARED),
    *(_sample(i) for i in range(2, 8)),
]
POOL = NoisePool.from_samples(CLEAN_RUN)


def _noise(contexts: list[Context]) -> list[Context]:
    return [c for c in contexts if "robustness" in c.metadata]


# --------------------------------------------------------------------------- determinism


def test_the_same_sample_condition_and_seed_give_the_same_perturbation() -> None:
    sample = CLEAN_RUN[0]
    for ratio in (0.2, 0.4, 0.6, 0.8):
        cond = Condition("noise", ratio)
        first = perturb(sample, sample.contexts, cond, POOL, seed=3)
        again = perturb(sample, sample.contexts, cond, NoisePool.from_samples(CLEAN_RUN), seed=3)
        assert first == again
    # the clean samples' order does not change the pool's draws
    shuffled = NoisePool.from_samples(list(reversed(CLEAN_RUN)))
    cond = Condition("noise", 0.6)
    assert perturb(sample, sample.contexts, cond, shuffled, seed=3) == perturb(
        sample, sample.contexts, cond, POOL, seed=3
    )
    # another seed draws other noise or other positions for at least one question
    differs = [
        perturb(s, s.contexts, cond, POOL, seed=3) != perturb(s, s.contexts, cond, POOL, seed=4)
        for s in CLEAN_RUN
    ]
    assert any(differs)


_CHILD = """
import json
from ragbridge.core.robustness import Condition, NoisePool, perturb
from ragbridge.core.sample import Context, Sample
clean = [Sample(id=f"q{i}", question="?", contexts=[Context(text=f"p{j} of {i}") for j in range(5)])
         for i in range(8)]
pool = NoisePool.from_samples(clean)
out = perturb(clean[0], clean[0].contexts, Condition("noise", 0.6), pool, seed=1)
print(json.dumps([c.text for c in out]))
"""


def test_draws_do_not_depend_on_the_process_hash_seed() -> None:
    # Python's hash() of a string is salted per process: a draw seeded by it would change on a
    # rerun, and every cached pipeline answer would be missed.
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert sum("of 0" not in t for t in outputs[0]) == 3


# --------------------------------------------------------------------------- what noise is


def test_noise_is_never_the_questions_own_passage_nor_one_it_labels_relevant() -> None:
    # q1-c0 is another question's passage that q0's labels grade relevant: never noise for q0
    labelled = CLEAN_RUN[0].model_copy(update={"relevance": {"q0-c0": 2, "q1-c0": 1}})
    own = {c.text for c in CLEAN_RUN[0].contexts}
    for seed in range(40):
        for cond in (Condition("noise", 0.8), Condition("negative")):
            out = perturb(labelled, labelled.contexts, cond, POOL, seed=seed)
            for context in _noise(out):
                assert context.text not in own
                assert context.text != SHARED  # retrieved for q0 too (as q1's)
                assert context.id != "q1-c0"
                assert context.metadata["from"] != "q0"
                assert context.metadata["from"] == context.id.partition("-")[0]


def test_noise_never_repeats_a_passage_the_question_keeps_even_from_a_live_retrieval() -> None:
    # the live retrieval of a rerun may differ from the clean one: a live passage that is in the
    # pool as another question's is not drawn again as noise
    sample = CLEAN_RUN[2]
    live = [*sample.contexts[:3], CLEAN_RUN[3].contexts[0], CLEAN_RUN[3].contexts[1]]
    for seed in range(40):
        out = perturb(sample, live, Condition("noise", 0.6), POOL, seed=seed)
        texts = [c.text for c in out]
        assert len(texts) == len(set(texts)) == K


def test_draw_avoids_texts_and_gives_fewer_when_the_pool_is_small() -> None:
    sample = CLEAN_RUN[0]
    avoid = [c.text for c in CLEAN_RUN[5].contexts]
    drawn = POOL.draw(sample, 100, seed=0, avoid=avoid)
    texts = {c.text for c in drawn}
    assert not texts & set(avoid)
    # 8 questions x 5 passages, one shared by q0 and q1: 39 distinct; minus q0's 5 (the shared
    # one among them) and q5's 5 avoided
    assert len(drawn) == 39 - 5 - 5 == POOL.capacity(sample, avoid)
    assert POOL.draw(sample, 2, seed=0) == POOL.draw(sample, 3, seed=0)[:2]  # nested draws


# --------------------------------------------------------------------------- ratios


def test_ratio_zero_is_the_live_retrieval_unchanged() -> None:
    sample = CLEAN_RUN[4]
    assert perturb(sample, sample.contexts, CLEAN, POOL) == sample.contexts
    assert perturb(sample, sample.contexts, Condition("noise", 0.0), POOL, seed=9) == (
        sample.contexts
    )


@pytest.mark.parametrize(("ratio", "replaced"), [(0.2, 1), (0.4, 2), (0.6, 3), (0.8, 4)])
def test_ratio_replaces_that_share_of_five_passages(ratio: float, replaced: int) -> None:
    sample = CLEAN_RUN[4]
    for seed in range(10):
        out = perturb(sample, sample.contexts, Condition("noise", ratio), POOL, seed=seed)
        assert len(out) == K
        noise = _noise(out)
        assert len(noise) == replaced
        assert all(c.metadata["robustness"] == "noise" for c in noise)
        kept = [c for c in out if c not in noise]
        assert kept == sample.contexts[: K - replaced]  # unlabelled: the top ranks, in order


def test_noise_goes_in_at_seeded_positions_not_always_at_the_end() -> None:
    sample = CLEAN_RUN[4]
    positions = set()
    for seed in range(20):
        out = perturb(sample, sample.contexts, Condition("noise", 0.4), POOL, seed=seed)
        positions.add(tuple(i for i, c in enumerate(out) if "robustness" in c.metadata))
    assert len(positions) > 3


def test_rounding_is_half_up_and_documented_cases_hold() -> None:
    assert noise_count(0.2, 4) == 1
    assert [noise_count(r, 5) for r in (0.0, 0.2, 0.4, 0.6, 0.8)] == [0, 1, 2, 3, 4]
    assert noise_count(0.2, 2) == 0
    assert noise_count(0.25, 2) == 1  # 0.5 rounds up (Python's round gives 0)
    assert noise_count(0.5, 0) == 0


def test_a_labelled_sample_keeps_its_most_relevant_passages() -> None:
    # graded relevant passages at ranks 3 and 5 are kept at 0.6 (3 of 5 replaced), in rank order
    sample = CLEAN_RUN[6].model_copy(update={"relevance": {"q6-c2": 1, "q6-c4": 2}})
    for seed in range(10):
        out = perturb(sample, sample.contexts, Condition("noise", 0.6), POOL, seed=seed)
        kept = [c.id for c in out if "robustness" not in c.metadata]
        assert kept == ["q6-c2", "q6-c4"]
    # at 0.4 (2 replaced) the next kept is the best-ranked unlabelled one
    out = perturb(sample, sample.contexts, Condition("noise", 0.4), POOL)
    assert [c.id for c in out if "robustness" not in c.metadata] == ["q6-c0", "q6-c2", "q6-c4"]


def test_negative_gives_k_passages_of_other_questions() -> None:
    sample = CLEAN_RUN[3]
    out = perturb(sample, sample.contexts, Condition("negative"), POOL, seed=2)
    assert len(out) == K
    assert all(c.metadata["robustness"] == "negative" for c in out)
    assert not {c.text for c in out} & {c.text for c in sample.contexts}
    assert all(c.metadata["from"] != sample.id for c in out)


def test_a_pool_too_small_is_an_error_naming_the_counts() -> None:
    clean = [_sample(0), Sample(id="tiny", question="?", contexts=["only passage"])]
    pool = NoisePool.from_samples(clean)
    with pytest.raises(PoolTooSmall) as info:
        perturb(clean[0], clean[0].contexts, Condition("noise", 0.4), pool)
    assert (info.value.needed, info.value.available) == (2, 1)
    assert "q0" in str(info.value)
    assert "noise@0.4" in str(info.value)
    with pytest.raises(PoolTooSmall):
        perturb(clean[0], clean[0].contexts, Condition("negative"), pool)
    assert pool.capacity(clean[0]) == 1
    # 0.2 of 5 needs one passage: there is one
    out = perturb(clean[0], clean[0].contexts, Condition("noise", 0.2), pool)
    assert [c.text for c in _noise(out)] == ["only passage"]


# --------------------------------------------------------------------------- counterfactual


def test_counterfactual_replaces_whole_words_in_any_case() -> None:
    fact = Counterfactual("Paris", "Lyon", "user")
    live = [
        Context(text="PARIS is the capital; Parisians love paris.", id="a", metadata={"k": 1}),
        Context(text="Nothing about it here.", id="b"),
        Context(text="Visit Paris, France.", id="c"),
    ]
    sample = Sample(id="s", question="Capital of France?", contexts=live)
    out = perturb(sample, live, Condition("counterfactual"), POOL, counterfactual=fact)
    assert out[0].text == "Lyon is the capital; Parisians love Lyon."
    assert out[0].metadata == {"k": 1, "robustness": "counterfactual", "from": "s"}
    assert out[1] is live[1]
    assert out[2].text == "Visit Lyon, France."
    with pytest.raises(ValueError, match="needs a fact"):
        perturb(sample, live, Condition("counterfactual"), POOL)


def test_a_number_is_not_replaced_inside_a_longer_number() -> None:
    fact = Counterfactual("849", "900", "user")
    context = Context(text="8,849 m, 849.5 m, 18490 m, and 849 m.")
    assert replace_fact(context, fact).text == "8,849 m, 849.5 m, 18490 m, and 900 m."
    unchanged = Context(text="no such number: 8490")
    assert replace_fact(unchanged, fact) is unchanged


def _fact_sample(reference: str, contexts: list[str], question: str = "Q?") -> Sample:
    return Sample(id="fact", question=question, reference=reference, contexts=contexts)


def test_offline_counterfactual_changes_an_amount_plausibly() -> None:
    sample = _fact_sample(
        "Everest is 8,849 metres high.",
        ["Mount Everest stands 8,849 m above sea level.", "K2 is 8,611 m high."],
    )
    built = offline_counterfactual(sample, sample.contexts, [])
    assert built is not None
    assert (built.original, built.source) == ("8,849", "offline")
    value = float(built.wrong.replace(",", ""))
    assert "," in built.wrong  # written as the original is
    assert 0.3 * 8849 < value < 3.1 * 8849
    assert built == offline_counterfactual(sample, sample.contexts, [])  # deterministic
    # the context now states the wrong amount and not the right one
    changed = replace_fact(sample.contexts[0], built)
    assert "8849" not in numbers(changed.text)


def test_offline_counterfactual_moves_a_year_by_a_few_years() -> None:
    sample = _fact_sample(
        "It was completed in 1889.",
        ["The Eiffel Tower opened on 31 March 1889 for the World's Fair."],
        question="When was the Eiffel Tower completed, 130 years ago?",
    )
    built = offline_counterfactual(sample, sample.contexts, [])
    assert built is not None
    assert built.original == "1889"
    assert 1 <= abs(int(built.wrong) - 1889) <= 5


def test_offline_counterfactual_of_a_date_changes_its_year_else_its_day() -> None:
    dated = _fact_sample("Born 25 June 1961.", ["Gervais (born 25 June 1961) is a comedian."])
    built = offline_counterfactual(dated, dated.contexts, [])
    assert built is not None
    assert built.original == "1961"
    day_only = _fact_sample("On March 28.", ["The shop opened on March 28 with 40 staff."])
    built = offline_counterfactual(day_only, day_only.contexts, [])
    assert built is not None
    assert built.original == "28"
    assert 25 <= int(built.wrong) <= 27  # a day it can be, not "March 42"


def test_offline_counterfactual_skips_the_questions_numbers_and_keeps_percentages() -> None:
    sample = _fact_sample(
        "In 2020, 94% of homes had power.",
        ["By 2020, 94 percent of homes had power."],
        question="What share of homes had power in 2020?",
    )
    built = offline_counterfactual(sample, sample.contexts, [])
    assert built is not None
    assert built.original == "94"
    assert 0 < float(built.wrong) <= 100


def test_offline_counterfactual_swaps_a_name_for_another_samples_name() -> None:
    sample = _fact_sample(
        "The tower was designed by Gustave Eiffel.",
        ["Engineers of Gustave Eiffel's company designed the tower."],
        question="Who designed the tower in Paris?",
    )
    others = [
        Sample(id="o1", question="Who discovered radium?", reference="Marie Curie did."),
        Sample(id="o2", question="Where is the museum?", reference="In New York."),
        Sample(id="o3", question="Where is it?", reference="It is Tokyo."),
        sample,  # the sample itself among the others is ignored
    ]
    built = offline_counterfactual(sample, sample.contexts, others)
    assert built is not None
    # the answer to another "who" question, not a place of the same length
    assert (built.original, built.wrong) == ("Gustave Eiffel", "Marie Curie")
    changed = replace_fact(sample.contexts[0], built)
    assert changed.text == "Engineers of Marie Curie's company designed the tower."


def test_a_name_ending_in_a_common_word_prefers_a_name_ending_in_it() -> None:
    sample = _fact_sample("Orange County.", ["It lies in Orange County, California."])
    others = [
        Sample(id=f"o{i}", question="Who?", reference=name)
        for i, name in enumerate(["Bob Barker.", "Lawrence County.", "Hong Kong."])
    ]
    for seed_id in ("a", "b", "c", "d"):
        moved = sample.model_copy(update={"id": seed_id})
        built = offline_counterfactual(moved, moved.contexts, others)
        assert built is not None
        assert built.wrong == "Lawrence County"


def test_a_sentence_opening_word_is_no_name_unless_the_passages_capitalise_it() -> None:
    others = [
        Sample(id="o1", question="?", reference="Lyon."),
        Sample(id="o2", question="?", reference="Engineers say so."),  # an opener, not a name
    ]
    opener = _fact_sample("However it rains.", ["It rains; however, it is warm."])
    assert offline_counterfactual(opener, opener.contexts, others) is None
    capital = _fact_sample("Paris is the capital.", ["The capital is Paris."])
    built = offline_counterfactual(capital, capital.contexts, others)
    assert built is not None
    assert (built.original, built.wrong) == ("Paris", "Lyon")
    lower = _fact_sample("Paris is the capital.", ["the capital is paris."])
    assert offline_counterfactual(lower, lower.contexts, others) is None


def test_offline_counterfactual_says_why_none_can_be_built() -> None:
    no_fact = _fact_sample("it is rather tall.", ["The tower is tall."])
    attempt = offline_counterfactual_attempt(no_fact, no_fact.contexts, [])
    assert attempt.counterfactual is None
    assert "no number, date or name" in attempt.reason
    lonely = _fact_sample("Gustave Eiffel.", ["Designed by Gustave Eiffel."])
    attempt = offline_counterfactual_attempt(lonely, lonely.contexts, [])
    assert attempt.counterfactual is None
    assert "'Gustave Eiffel'" in attempt.reason
    assert "2 words" in attempt.reason
    unreferenced = Sample(id="u", question="?", contexts=["Designed by Gustave Eiffel."])
    reason = offline_counterfactual_attempt(unreferenced, unreferenced.contexts, []).reason
    assert "no reference" in reason
    assert offline_counterfactual(no_fact, [], []) is None


# --------------------------------------------------------------------------- from the user


def test_user_counterfactual_reads_the_metadata() -> None:
    plain = Sample(id="u", question="?")
    assert user_counterfactual(plain) is None
    given = plain.model_copy(
        update={"metadata": {"counterfactual": {"original": " 1889 ", "wrong": "1893"}}}
    )
    assert user_counterfactual(given) == Counterfactual("1889", "1893", "user")


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("1889 -> 1893", "metadata.counterfactual:"),
        ({"original": "1889"}, "metadata.counterfactual.wrong"),
        ({"original": "", "wrong": "1893"}, "metadata.counterfactual.original"),
        ({"original": 1889, "wrong": "1893"}, "metadata.counterfactual.original"),
        ({"original": "Paris", "wrong": "paris"}, "metadata.counterfactual.wrong"),
    ],
)
def test_a_malformed_user_counterfactual_names_the_field(value: Any, field: str) -> None:
    sample = Sample(id="bad-one", question="?", metadata={"counterfactual": value})
    with pytest.raises(ValueError, match=r"metadata\.counterfactual") as info:
        user_counterfactual(sample)
    assert field in str(info.value)
    assert "bad-one" in str(info.value)


# --------------------------------------------------------------------------- from the judge

JUDGED = Sample(
    id="j",
    question="When was the tower completed?",
    reference="In 1889.",
    contexts=["The Eiffel Tower was completed in March 1889.", "It is 330 m tall."],
)


def _judge_run(reply: Any) -> tuple[ScriptedJudge, Any]:
    judge = ScriptedJudge({"robustness.counterfactual": reply})
    engine = JudgeEngine(judge, max_retries=0, timeout=None)
    attempt = asyncio.run(judge_counterfactual_attempt(engine, JUDGED, JUDGED.contexts))
    return judge, attempt


def test_the_judges_counterfactual_is_used_when_a_passage_states_it() -> None:
    judge, attempt = _judge_run({"original": "march 1889", "wrong": "June 1893"})
    assert attempt.counterfactual == Counterfactual("March 1889", "June 1893", "judge")
    assert judge.tasks() == ["robustness.counterfactual"]
    prompt = judge.calls[0].messages[1]["content"]
    assert "<<<BEGIN CONTEXT 1>>>\nThe Eiffel Tower was completed in March 1889." in prompt
    assert "<<<BEGIN REFERENCE>>>\nIn 1889.\n<<<END REFERENCE>>>" in prompt
    assert attempt.usage is not None


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({"original": "1890", "wrong": "1893"}, "'1890' is in no passage"),
        ({"original": "88", "wrong": "77"}, "'88' is in no passage"),  # inside 1889: no word
        ({"original": "", "wrong": ""}, "found no passage"),
        ({"original": "1889", "wrong": "1889"}, "no wrong value"),
    ],
)
def test_an_unusable_judge_counterfactual_is_none_with_the_reason(reply: Any, why: str) -> None:
    _, attempt = _judge_run(reply)
    assert attempt.counterfactual is None
    assert why in attempt.reason


def test_judge_counterfactual_returns_none_on_a_failed_call_and_without_a_reference() -> None:
    judge = ScriptedJudge({"robustness.counterfactual": "not json at all"})
    engine = JudgeEngine(judge, max_retries=0, timeout=None, repair=False)
    assert asyncio.run(judge_counterfactual(engine, JUDGED, JUDGED.contexts)) is None
    attempt = asyncio.run(judge_counterfactual_attempt(engine, JUDGED, JUDGED.contexts))
    assert attempt.reason.startswith("the judge gave no counterfactual")
    calls = len(judge.calls)
    bare = JUDGED.model_copy(update={"reference": None})
    assert asyncio.run(judge_counterfactual(engine, bare, bare.contexts)) is None
    assert len(judge.calls) == calls  # no call without a reference
