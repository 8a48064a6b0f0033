"""Ranking measures per `Sample`: ``contexts[i].id`` (in order) against ``sample.relevance``.

The same vectorised kernels as `evaluate_run` compute the values, so per-sample and trec_eval
numbers cannot drift apart. What is specific to samples is the policy for the cases a run file
never meets:

* ``relevance is None`` (nobody labelled it): a ``missing_input`` failure naming the field.
* no relevant document exists (``relevance == {}``, or no grade reaches the level): every ranking
  measure is *skipped* with that reason — recall and AP would divide by zero, and a 0 would punish
  a pipeline for a question with no right answer. The ``no_answer`` measure scores these samples
  instead: 1 when the pipeline returned no context scoring at or above ``no_answer_threshold``
  (any context counts when the threshold is None) or declined (``metadata["declined"] is True``,
  or an answer that abstains as a whole: "I don't know.", see
  `ragbridge.core.text.words.abstention`).
* retrieved ids that match none of the labels (LangChain's per-chunk UUIDs against document
  labels, say): the scores say so in ``details["ids_matched"]`` / ``details["id_mismatch"]``
  and their reason; a context whose metadata holds a labelled id while no id is one makes the
  sample an ``invalid_input`` failure naming the fix; and when none or almost none of a run's
  labelled samples match, ``metadata["warnings"]`` gets one line
  (`ragbridge.core.results.id_check`).
* a context without an id while labels exist: a ``missing_input`` failure naming ``contexts[i].id``.
* the same id twice in one ranking (several chunks of one labelled document): the first occurrence
  counts and later ones are dropped, as document-level evaluation requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..results.evaluation import Evaluation, FailureKind, Score
from ..results.id_check import match_ids, note_id_warnings
from ..sample import Sample
from ..text.words import abstention
from .compute import evaluate_run
from .measures import Measure, parse_measures
from .ranking import Qrels, Run

__all__ = ["PROVIDER", "ranking_rows", "score_ranking", "score_samples"]

PROVIDER = "retrieval"


def _dedupe(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _no_answer(sample: Sample, threshold: float | None) -> Score:
    returned = [
        i
        for i, c in enumerate(sample.contexts)
        if threshold is None or c.score is None or c.score >= threshold
    ]
    declined = sample.metadata.get("declined") is True
    if declined:
        return Score(value=1.0, reason="the pipeline declined to answer", provider=PROVIDER)
    abstains = abstention(sample.answer)
    if abstains is not None:
        return Score(
            value=1.0,
            reason=f"the answer abstains ('{abstains}'): the pipeline declined to answer",
            details={"abstention": abstains},
            provider=PROVIDER,
        )
    if not returned:
        where = "" if threshold is None else f" scoring >= {threshold}"
        return Score(value=1.0, reason=f"no context{where} was returned", provider=PROVIDER)
    where = "" if threshold is None else f" scoring >= {threshold}"
    return Score(
        value=0.0,
        reason=f"{len(returned)} context(s){where} returned; no relevant document exists",
        details={"returned_ranks": [i + 1 for i in returned]},
        provider=PROVIDER,
    )


def score_samples(
    samples: Iterable[Sample],
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    no_answer_threshold: float | None = None,
) -> Evaluation:
    """Score ranking measures on every sample; returns an `Evaluation` keyed by measure name."""
    rows = ranking_rows(
        samples, measures, relevance_level=relevance_level, no_answer_threshold=no_answer_threshold
    )
    return note_id_warnings(Evaluation(rows))


def ranking_rows(
    samples: Iterable[Sample],
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    no_answer_threshold: float | None = None,
) -> list[tuple[str, str, Score]]:
    """`score_samples`'s cells as ``(sample id, measure name, Score)`` rows, in sample then
    measure order, without the run-level id check: for a caller that keeps its own over more
    samples than these (`evaluate`, a chunk at a time: `ragbridge.core.scoring.batched`)."""
    wanted = parse_measures(measures)
    for m in wanted:
        if m.is_count:
            raise ValueError(f"{m.family} is a count, not a per-sample score")
    ranking = [m for m in wanted if m.family != "no_answer"]
    rows: list[tuple[str, str, Score]] = []
    position: dict[str, int] = {}
    pending: list[Sample] = []
    for sample in samples:
        if sample.id in position:
            raise ValueError(f"duplicate sample id {sample.id!r}")
        position[sample.id] = len(position)
        problem = _ranking_problem(sample, relevance_level)
        for m in wanted:
            if m.family == "no_answer":
                score = _no_answer_cell(sample, m, relevance_level, no_answer_threshold)
                rows.append((sample.id, m.name, score))
            elif problem is not None:
                rows.append((sample.id, m.name, problem))
        if problem is None and ranking:
            pending.append(sample)
    if pending:
        rows.extend(_ranking_cells(pending, ranking, relevance_level))
    order = {m.name: j for j, m in enumerate(wanted)}
    rows.sort(key=lambda row: (position[row[0]], order[row[1]]))
    return rows


def _no_answer_cell(
    sample: Sample, m: Measure, relevance_level: int, threshold: float | None
) -> Score:
    """``no_answer`` scores only labelled questions without a relevant document."""
    if sample.relevance is None:
        return _unlabelled(m)
    if _has_relevant(sample, relevance_level):
        reason = "the question has a relevant document; no_answer scores only questions without one"
        return Score.skip(reason, provider=PROVIDER)
    return _no_answer(sample, threshold)


def _ranking_cells(
    samples: Sequence[Sample], ranking: Sequence[Measure], relevance_level: int
) -> list[tuple[str, str, Score]]:
    """The ranking measures of samples that can be ranked, computed as one run (the kernels of
    `evaluate_run`), each cell with the sample's relevant ranks and how its ids matched."""
    qrels: dict[str, dict[str, int]] = {}
    rankings: dict[str, list[str]] = {}
    for sample in samples:
        assert sample.relevance is not None
        qrels[sample.id] = sample.relevance
        rankings[sample.id] = _dedupe([c.id for c in sample.contexts if c.id is not None])
    result = evaluate_run(
        Qrels(qrels), Run(rankings), list(ranking), relevance_level=relevance_level
    )
    row_of = {qid: i for i, qid in enumerate(result.qids)}
    # Python floats, the values `float(result.values[m][i])` reads, without a numpy scalar per cell
    columns = {m: result.values[m].tolist() for m in ranking}
    rows: list[tuple[str, str, Score]] = []
    for sample in samples:
        i = row_of[sample.id]
        assert sample.relevance is not None
        relevant = {d for d, g in sample.relevance.items() if g >= relevance_level}
        ranks = [r + 1 for r, d in enumerate(rankings[sample.id]) if d in relevant]
        match = match_ids(sample.contexts, sample.relevance, level=relevance_level)
        details = {"relevant_ranks": ranks, "num_relevant": len(relevant), **match.details()}
        for m in ranking:
            if match.metadata_key is not None:
                # Conclusive: the labels are in the contexts' metadata, not in their ids.
                score = Score.fail(
                    FailureKind.INVALID_INPUT, match.reason(), details=details, provider=PROVIDER
                )
            else:
                value = min(1.0, max(0.0, float(columns[m][i])))
                why = match.reason() if match.mismatched else None
                # plain values made here: `Score.trusted` skips pydantic's per-field work; each
                # cell gets its own details (a trusted Score does not copy them)
                own = dict(details, relevant_ranks=list(ranks))
                score = Score.trusted(value=value, reason=why, details=own, provider=PROVIDER)
            rows.append((sample.id, m.name, score))
    return rows


def score_ranking(
    sample: Sample,
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    no_answer_threshold: float | None = None,
) -> dict[str, Score]:
    """Ranking measures of one sample, keyed by measure name.

    Named for what it scores (a sample's ranking against its labels), so that it is not taken
    for the function that scores a record with every metric
    (`ragbridge.core.scoring.record.score_record`); ``score_sample``, its former name, still
    imports from `ragbridge.core.retrieval` and `ragbridge.core` with a DeprecationWarning.
    """
    evaluation = score_samples(
        [sample], measures, relevance_level=relevance_level, no_answer_threshold=no_answer_threshold
    )
    return {metric: score for sid, metric, score in evaluation}


def _has_relevant(sample: Sample, level: int) -> bool:
    return sample.relevance is not None and any(g >= level for g in sample.relevance.values())


def _unlabelled(m: Measure) -> Score:
    return Score.fail(
        FailureKind.MISSING_INPUT,
        f"{m.name} needs relevance labels: the sample's 'relevance' is null "
        "(use {} to mark a question with no relevant document)",
        provider=PROVIDER,
    )


def _ranking_problem(sample: Sample, level: int) -> Score | None:
    """The Score a ranking measure gets when it cannot be computed for this sample, else None."""
    if sample.relevance is None:
        return Score.fail(
            FailureKind.MISSING_INPUT,
            "ranking measures need relevance labels: the sample's 'relevance' is null",
            provider=PROVIDER,
        )
    if not _has_relevant(sample, level):
        return Score.skip(
            f"no relevant document exists (no grade >= {level} in relevance); "
            "the no_answer measure scores this question",
            provider=PROVIDER,
        )
    for i, context in enumerate(sample.contexts):
        if context.id is None:
            return Score.fail(
                FailureKind.MISSING_INPUT,
                f"contexts[{i}].id is missing: ranking measures match contexts to relevance by id",
                provider=PROVIDER,
            )
    return None
