"""Do the retrieved context ids and the relevance labels name the same things?

Ranking measures match ``contexts[i].id`` against the keys of ``sample.relevance``. When the two
name different things, every ranking measure is a plausible-looking 0.0 and nothing else looks
wrong. It happens by default in both big frameworks:

* LangChain's ``Document.id`` is a fresh UUID per chunk, while labels name source documents
  (the fix: ``id_key="source"``, or whichever metadata key names the document);
* LlamaIndex contexts are named by ``ref_doc_id`` (the document) by default, while labels may
  name nodes (the fix: ``use_ref_doc_id=False``) — or the reverse.

A single sample whose retrieved ids miss every label may be a genuine retrieval miss, so this is
judged at two levels, and every mismatched sample is said out loud at both, whatever the run size:

* **per sample** (`match_ids`, used by `ragbridge.core.retrieval.score_samples`): the ranking
  scores carry ``details["ids_matched"]`` (distinct retrieved ids that are relevance keys, at
  any grade) and, when it is 0, ``details["id_mismatch"]`` with an example of each side. When a
  context's *metadata* holds a labelled id while no id does, the evidence is conclusive (the
  ids name chunks, the labels documents): the sample fails with ``invalid_input`` and the fix,
  rather than scoring 0.0.
* **per run** (`IdCheck`, `id_warnings`, `note_id_warnings`): when any labelled sample shares no
  id with its labels, ONE line goes to ``Evaluation.metadata["warnings"]``. When none or almost
  none match (`IdCheck.warning`: every labelled sample, or `MISMATCH_SHARE` of `MIN_SAMPLES`
  or more) it names the count, an example retrieved id and label, the likely cause read from
  their shape, and the fix; when only a few miss (`IdCheck.misses`), it names those samples and
  says they are retrieval misses or ids naming other things. A 2-sample run whose ids never match
  scores 0.0 as surely as a 200-sample one, so the run size never silences the line. The CLI
  prints it, the HTML report shows it, and the framework sinks (LangSmith, LlamaIndex, DeepEval)
  append it to what they show.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..sample import Context
from .evaluation import Evaluation, Score

__all__ = [
    "MIN_SAMPLES",
    "MISMATCH_SHARE",
    "SHOWN_SAMPLES",
    "IdCheck",
    "IdMatch",
    "drop_id_warnings",
    "id_fix",
    "id_warnings",
    "match_ids",
    "note_id_warnings",
]

MIN_SAMPLES = 3
"""Labelled samples needed before "almost none match" reads as a likely id mistake."""
MISMATCH_SHARE = 0.8
"""Share of labelled samples with no matching id at which a run of `MIN_SAMPLES`+ reads as a
likely id mistake (below it, the mismatched samples are named as possible retrieval misses)."""
SHOWN_SAMPLES = 5
"""Mismatched sample ids the run-level line names before "… and N more"."""

_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_LLAMAINDEX_KEYS = ("node_id", "ref_doc_id")


@dataclass(frozen=True)
class IdMatch:
    """How one labelled sample's retrieved ids meet its relevance keys."""

    retrieved: int
    """Distinct context ids retrieved."""
    matched: int
    """How many of them are relevance keys (at any grade)."""
    retrieved_example: str | None = None
    label_example: str | None = None
    metadata_key: str | None = None
    """A context metadata key whose value IS a labelled id, when no context id is (conclusive)."""
    llamaindex: bool = False
    """The contexts came from LlamaIndex nodes (their metadata has ``node_id``)."""

    @property
    def mismatched(self) -> bool:
        """Ids were retrieved and none of them is labelled."""
        return self.retrieved > 0 and self.matched == 0

    def details(self) -> dict[str, Any]:
        """What goes into the ranking scores' ``details``."""
        out: dict[str, Any] = {"ids_matched": self.matched, "ids_retrieved": self.retrieved}
        if self.mismatched:
            out["id_mismatch"] = {
                "retrieved": self.retrieved_example,
                "labelled": self.label_example,
                "labels_in_metadata": self.metadata_key,
                "llamaindex": self.llamaindex,
            }
        return out

    def reason(self) -> str:
        """One sentence for a mismatched sample's score."""
        text = (
            f"none of the {self.retrieved} retrieved context ids (e.g. {self.retrieved_example!r})"
            f" is a labelled id (e.g. {self.label_example!r})"
        )
        if self.metadata_key is not None:
            return (
                f"{text}, but the contexts' metadata[{self.metadata_key!r}] holds labelled ids: "
                f"the ids and the labels name different things — "
                f"{id_fix(self.metadata_key, llamaindex=self.llamaindex)}"
            )
        return f"{text}: a retrieval miss, or ids that name other things than the labels"


def match_ids(
    contexts: Sequence[Context], relevance: Mapping[str, int], *, level: int = 1
) -> IdMatch:
    """Compare a labelled sample's retrieved ids with its relevance keys (see the module doc)."""
    retrieved = list(dict.fromkeys(c.id for c in contexts if c.id is not None))
    labelled = set(relevance)
    matched = sum(1 for i in retrieved if i in labelled)
    if not retrieved or matched:
        return IdMatch(retrieved=len(retrieved), matched=matched)
    relevant = sorted(k for k, g in relevance.items() if g >= level) or sorted(labelled)
    key = _metadata_key(contexts, labelled)
    return IdMatch(
        retrieved=len(retrieved),
        matched=0,
        retrieved_example=retrieved[0],
        label_example=relevant[0] if relevant else None,
        metadata_key=key,
        llamaindex=any("node_id" in c.metadata for c in contexts),
    )


def _metadata_key(contexts: Sequence[Context], labelled: set[str]) -> str | None:
    """The metadata key (LlamaIndex's node_id/ref_doc_id first) whose values hit the labels."""
    hits: dict[str, int] = {}
    for context in contexts:
        for key, value in context.metadata.items():
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                continue
            if str(value) in labelled:
                hits[key] = hits.get(key, 0) + 1
    if not hits:
        return None
    for key in _LLAMAINDEX_KEYS:
        if key in hits:
            return key
    return max(sorted(hits), key=lambda k: hits[k])


def id_fix(metadata_key: str | None, *, llamaindex: bool = False) -> str:
    """The fix to name for ids that do not match the labels."""
    if metadata_key == "node_id":
        return (
            "the labels name LlamaIndex nodes while the context ids name documents "
            "(ref_doc_id): pass use_ref_doc_id=False to run_query_engine / capture_retrievals "
            "/ the evaluators"
        )
    if metadata_key == "ref_doc_id":
        return (
            "the labels name LlamaIndex documents while the context ids name nodes: "
            "pass use_ref_doc_id=True (the default) to run_query_engine / capture_retrievals"
        )
    if metadata_key is not None and llamaindex:
        return (
            f"the labels name metadata[{metadata_key!r}] of the nodes: set each node's id from it "
            f"(or each context's id), since LlamaIndex contexts carry node or document ids"
        )
    if metadata_key is not None:
        return (
            f"pass id_key={metadata_key!r} to the LangChain adapter (run_pipeline, retrieve_only, "
            f"capture_retrievals) or to the LangSmith evaluators, or set each context's id from "
            f"metadata[{metadata_key!r}]"
        )
    if llamaindex:
        return (
            "LlamaIndex context ids are document ids (ref_doc_id) by default and node ids with "
            "use_ref_doc_id=False: label the same kind of id the contexts carry"
        )
    return (
        "make contexts[].id and the relevance keys name the same things (documents or "
        "chunks): id_key=... with LangChain, use_ref_doc_id=... with LlamaIndex"
    )


def _looks_random(value: str | None) -> bool:
    return value is not None and _UUID.match(value) is not None


class IdCheck:
    """The run-level tally: feed it samples' `IdMatch` (or their ranking scores), ask `warning`.

    Thread-safe and incremental, so a framework sink scoring one record at a time (a LangSmith
    evaluator, a DeepEval metric) can tell the run-level story as soon as it becomes true.
    A sample is counted once, however many ranking measures it has.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Counts, not the matches themselves: a run of a million samples keeps one id each.
        self._seen: set[str] = set()
        self._labelled = 0
        self._first_bad: IdMatch | None = None
        self._bad = 0
        self._bad_ids: list[str] = []  # the first SHOWN_SAMPLES, for the line
        self._bad_keys: dict[str, int] = {}
        self._bad_llamaindex = 0
        self._bad_ids_all_random = True
        self._bad_labels_any_random = False

    def add(self, sample_id: str, match: IdMatch) -> None:
        """Record one labelled sample (samples that retrieved no id are ignored)."""
        if match.retrieved == 0:
            return
        with self._lock:
            if sample_id in self._seen:
                return
            self._seen.add(sample_id)
            self._count(sample_id, match)

    def _count(self, sample_id: str, match: IdMatch) -> None:
        """Count one labelled sample's match (the lock held)."""
        self._labelled += 1
        if not match.mismatched:
            return
        self._bad += 1
        if len(self._bad_ids) < SHOWN_SAMPLES:
            self._bad_ids.append(str(sample_id))
        if self._first_bad is None:
            self._first_bad = match
        if match.metadata_key is not None:
            key = match.metadata_key
            self._bad_keys[key] = self._bad_keys.get(key, 0) + 1
        self._bad_llamaindex += match.llamaindex
        self._bad_ids_all_random &= _looks_random(match.retrieved_example)
        self._bad_labels_any_random |= _looks_random(match.label_example)

    def add_score(self, sample_id: str, score: Score) -> None:
        """Record a sample from a ranking `Score`'s details; other scores are ignored."""
        match = _from_details(score)
        if match is not None:
            self.add(sample_id, match)

    def add_scores(self, sample_id: str, scores: Iterable[Score]) -> None:
        for score in scores:
            self.add_score(sample_id, score)

    def add_sample(self, sample_id: str, scores: Iterable[Score]) -> None:
        """`add_scores` of all of a sample's Scores, for a caller that feeds each sample once
        (`evaluate`: its ids are unique): no id is kept, so a run's memory does not grow with
        its samples. The ranking Scores of one sample share its match; the first counts."""
        for score in scores:
            match = _from_details(score)
            if match is not None:
                if match.retrieved:
                    with self._lock:
                        self._count(sample_id, match)
                return

    def merge(self, later: IdCheck) -> None:
        """Add the tally of ``later``, a check fed the samples that come after this one's (a
        file scored in parts on several processes, `ragbridge.core.scoring.cores`): the
        counts, examples and named samples are then the ones a single check fed every sample
        in order would hold."""
        with self._lock, later._lock:
            self._seen |= later._seen
            self._labelled += later._labelled
            self._bad += later._bad
            room = SHOWN_SAMPLES - len(self._bad_ids)
            self._bad_ids.extend(later._bad_ids[: max(0, room)])
            if self._first_bad is None:
                self._first_bad = later._first_bad
            for key, count in later._bad_keys.items():
                self._bad_keys[key] = self._bad_keys.get(key, 0) + count
            self._bad_llamaindex += later._bad_llamaindex
            self._bad_ids_all_random &= later._bad_ids_all_random
            self._bad_labels_any_random |= later._bad_labels_any_random

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (sent back by a scoring process): everything but the lock."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def labelled(self) -> int:
        """Labelled samples that retrieved at least one id."""
        return self._labelled

    @property
    def mismatched(self) -> int:
        return self._bad

    def warning(self) -> str | None:
        """The run-level warning of a likely id mistake, or None.

        A likely mistake is every labelled sample missing (whatever the run size: a 2-sample
        run whose ids never match scores 0.0 as surely as a 200-sample one), or `MISMATCH_SHARE`
        or more of at least `MIN_SAMPLES`. The line names the count, an example, the cause read
        from the shape of the ids (metadata holding the labels, UUID ids vs non-UUID labels)
        and the fix; the framework sinks show it with their own hint.
        """
        found = self._state()
        if found is None or not _likely_mistake(found.labelled, found.bad):
            return None
        head = f"ranking measures: {found.count} retrieved no labelled context id ({found.example})"
        if found.key is not None:
            fix = id_fix(found.key, llamaindex=found.llamaindex)
            cause = f"the contexts' metadata[{found.key!r}] holds the labelled ids; {fix}"
        elif found.random_ids and not found.llamaindex:
            cause = (
                "the retrieved ids are random UUIDs, which is LangChain's Document.id (a fresh "
                "UUID per chunk): pass id_key='source' (or the metadata key naming the labelled "
                "document) to run_pipeline / retrieve_only / capture_retrievals"
            )
        else:
            fix = id_fix(None, llamaindex=found.llamaindex)
            cause = f"the ids and the labels seem to name different things; {fix}"
        return f"{head} — {cause}"

    def misses(self) -> str | None:
        """The line for a few mismatched samples among matching ones (not a likely mistake),
        naming them (up to `SHOWN_SAMPLES`): retrieval misses, or ids naming other things.
        None when every labelled sample matched, or when `warning` speaks instead."""
        found = self._state()
        if found is None or _likely_mistake(found.labelled, found.bad):
            return None
        hidden = found.bad - len(found.shown)
        more = f", … and {hidden} more" if hidden > 0 else ""
        head = (
            f"ranking measures: {found.count} retrieved no labelled context id "
            f"({', '.join(found.shown)}{more}; {found.example})"
        )
        if found.key is None:
            return f"{head} — retrieval misses, or ids that name other things than the labels"
        fix = id_fix(found.key, llamaindex=found.llamaindex)
        return f"{head} — the contexts' metadata[{found.key!r}] holds the labelled ids; {fix}"

    def lines(self) -> list[str]:
        """What the run says about its ids: the `warning`, else the `misses` line; [] when every
        labelled sample matched. One line at most, whatever the run size."""
        found = self.warning() or self.misses()
        return [] if found is None else [found]

    def _state(self) -> _Mismatches | None:
        with self._lock:
            n, bad, first = self._labelled, self._bad, self._first_bad
            keys = dict(self._bad_keys)
            llamaindex = self._bad_llamaindex * 2 > bad
            random_ids = self._bad_ids_all_random and not self._bad_labels_any_random
            shown = list(self._bad_ids)
        if not bad or first is None:
            return None
        return _Mismatches(
            labelled=n,
            bad=bad,
            count=f"{bad} of {n} labelled sample{'' if n == 1 else 's'}",
            example=(
                f"e.g. retrieved {first.retrieved_example!r} vs labelled {first.label_example!r}"
            ),
            key=max(sorted(keys), key=keys.__getitem__) if keys else None,
            llamaindex=llamaindex,
            random_ids=random_ids,
            shown=shown,
        )


@dataclass(frozen=True)
class _Mismatches:
    """A snapshot of an `IdCheck` with at least one mismatched sample, as its lines need it."""

    labelled: int
    bad: int
    count: str
    example: str
    key: str | None
    llamaindex: bool
    random_ids: bool
    shown: list[str]


def _likely_mistake(labelled: int, bad: int) -> bool:
    return bad > 0 and (
        bad == labelled or (labelled >= MIN_SAMPLES and bad >= MISMATCH_SHARE * labelled)
    )


def _from_details(score: Score) -> IdMatch | None:
    details = score.details
    if not isinstance(details, Mapping) or "ids_matched" not in details:
        return None
    matched = details.get("ids_matched")
    retrieved = details.get("ids_retrieved")
    if not isinstance(matched, int) or not isinstance(retrieved, int):
        return None
    info = details.get("id_mismatch")
    info = info if isinstance(info, Mapping) else {}

    def text(key: str) -> str | None:
        value = info.get(key)
        return value if isinstance(value, str) else None

    return IdMatch(
        retrieved=retrieved,
        matched=matched,
        retrieved_example=text("retrieved"),
        label_example=text("labelled"),
        metadata_key=text("labels_in_metadata"),
        llamaindex=info.get("llamaindex") is True,
    )


def id_warnings(evaluation: Evaluation) -> list[str]:
    """The run-level id warning of ``evaluation`` (0 or 1 line), read from its ranking cells."""
    check = IdCheck()
    for sample_id, _, score in evaluation:
        check.add_score(sample_id, score)
    return check.lines()


def note_id_warnings(evaluation: Evaluation, check: IdCheck | None = None) -> Evaluation:
    """Add `id_warnings` to ``evaluation.metadata["warnings"]`` (once); returns ``evaluation``.

    ``check`` is the tally of a run that fed it as it went (its cells may not be kept);
    without it the warning is read from ``evaluation``'s cells.
    """
    lines = id_warnings(evaluation) if check is None else check.lines()
    if lines:
        existing = evaluation.metadata.setdefault("warnings", [])
        for line in lines:
            if line not in existing:
                existing.append(line)
    return evaluation


def drop_id_warnings(metadata: dict[str, Any], lines: Iterable[str]) -> None:
    """Take a part's own id warning ``lines`` out of ``metadata["warnings"]`` (and the key,
    when nothing is left): a run scored in parts (a Dask partition, a range scored on another
    core: `ragbridge.core.scoring.cores`) says its id warning once, counted over the whole."""
    own = set(lines)
    kept = [line for line in metadata.get("warnings") or [] if line not in own]
    if kept:
        metadata["warnings"] = kept
    else:
        metadata.pop("warnings", None)
