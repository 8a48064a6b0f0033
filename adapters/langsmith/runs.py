"""Turn LangSmith traces into ragbridge `Sample`s (the *source* side of the LangSmith adapter).

Why it exists: a team that already traces its RAG pipeline with LangSmith has every sample it
needs in its runs — the question in the root's inputs, the retrieved passages in a retriever
child run, the answer in the root's outputs. This module reads them from wherever they are:

* a live `langsmith.run_trees.RunTree`, e.g. the ``run`` handed to an evaluator inside
  ``langsmith.evaluate`` (its ``child_runs`` are populated, even offline);
* `langsmith.schemas.Run` objects from ``client.list_runs`` (`samples_from_project`);
* runs exported as JSON / JSONL (`load_runs`), which the API returns *flat*: each run names its
  ``parent_run_id`` and the tree has to be rebuilt.

Retrieved documents are read in every shape LangSmith stores them
(`ragbridge.adapters.langsmith.reading`). A trace that does not fit raises a `ValueError` naming
the run id and what is missing, because a silently empty context list would score as a bad
retriever instead of a broken trace.

`offline_client` gives a `langsmith.Client` that never opens a connection, so
``langsmith.evaluate(..., upload_results=False, client=offline_client())`` runs with no network
and no API key (tests, CI, laptops on a plane).

Importing this module without langsmith raises ImportError naming the extra:
``pip install ".[langsmith]"`` (in your ragbridge clone; `INSTALL_HINT`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict, Unpack

from ragbridge.adapters._extras import install_hint
from ragbridge.core.sample import Sample

from ._framework import Client, Run
from .reading import (
    RetrieverSelector,
    descendants,
    example_id_of,
    field_of,
    find_text,
    keys_of,
    reference_contexts_of,
    retrieved_contexts,
    run_label,
    select_retrievers,
    start_key,
)

INSTALL_HINT = install_hint("langsmith")
"""What to run when the ``langsmith`` extra is missing."""

__all__ = [
    "INSTALL_HINT",
    "OfflineClient",
    "RunReading",
    "build_run_trees",
    "load_runs",
    "offline_client",
    "sample_from_run",
    "samples_from_project",
    "samples_from_runs",
]


class RunReading(TypedDict, total=False):
    """How a trace is read into a `Sample`: `sample_from_run`'s keyword arguments, which
    `samples_from_runs` and `samples_from_project` pass on to it for every trace."""

    retriever: RetrieverSelector
    question_key: str | None
    answer_key: str | None
    answer_run: str | None


_QUESTION_KEYS = ("question", "input", "query", "user_input")
_ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content")
_REFERENCE_KEYS = ("reference", "ground_truth", "expected_output", "answer")


# --------------------------------------------------------------------------- question / answer


def run_question(root: Any, question_key: str | None) -> str:
    inputs = field_of(root, "inputs") or {}
    if question_key is not None:
        if not isinstance(inputs, Mapping) or question_key not in inputs:
            raise ValueError(
                f"{run_label(root)}: inputs have no {question_key!r} (keys: {keys_of(inputs)})"
            )
        found = find_text(inputs[question_key], _QUESTION_KEYS)
    else:
        found = find_text(inputs, _QUESTION_KEYS)
    if found is None:
        raise ValueError(
            f"{run_label(root)}: cannot find the question in the inputs (keys: {keys_of(inputs)}); "
            "pass question_key=<input name>"
        )
    return found


def run_answer(root: Any, answer_key: str | None, answer_run: str | None) -> str | None:
    source = root
    if answer_run is not None:
        named = [r for r in descendants(root) if field_of(r, "name") == answer_run]
        if not named:
            raise ValueError(f"{run_label(root)}: no child run named {answer_run!r} (answer_run)")
        source = sorted(named, key=start_key)[-1]
    outputs = field_of(source, "outputs")
    if answer_key is not None:
        if not isinstance(outputs, Mapping) or answer_key not in outputs:
            raise ValueError(
                f"{run_label(source)}: outputs have no {answer_key!r} (keys: {keys_of(outputs)})"
            )
        return find_text(outputs[answer_key], _ANSWER_KEYS)
    if outputs is None:
        return None  # the pipeline failed after retrieval; the sample still scores retrieval
    return find_text(outputs, _ANSWER_KEYS)


def example_fields(example: Any) -> tuple[str | None, list[str] | None, dict[str, int] | None]:
    """Reference answer, reference contexts and graded relevance from an example's outputs."""
    outputs = field_of(example, "outputs") or {}
    if not isinstance(outputs, Mapping):
        return None, None, None
    reference = next((outputs[k] for k in _REFERENCE_KEYS if isinstance(outputs.get(k), str)), None)
    reference_contexts = reference_contexts_of(example)
    relevance: dict[str, int] | None = None
    graded = outputs.get("relevance", outputs.get("qrels"))
    if isinstance(graded, Mapping):
        relevance = {str(k): v for k, v in graded.items()}
    else:
        ids = outputs.get("relevant_ids", outputs.get("relevant_doc_ids"))
        if isinstance(ids, (list, tuple)):
            relevance = {str(i): 1 for i in ids}
    return reference, reference_contexts, relevance


# --------------------------------------------------------------------------- public: one run


def sample_from_run(
    run: Any,
    example: Any = None,
    *,
    retriever: RetrieverSelector = None,
    question_key: str | None = None,
    answer_key: str | None = None,
    answer_run: str | None = None,
    sample_id: str | None = None,
) -> Sample:
    """The `Sample` recorded by one trace (a `RunTree` or `langsmith.schemas.Run` with children).

    ``retriever`` picks the retrieval run: None takes runs with ``run_type == "retriever"``, a
    string matches run names, a callable is a predicate over runs. When several match, the last
    one to start is used — in a pipeline that retrieves again (query rewriting, agents) the last
    retrieval is the one the answer was written from — and the others are listed in
    ``metadata["langsmith"]["other_retriever_runs"]``. The root itself may be the retriever.

    The question comes from the root's inputs (``question_key``, else ``question``/``input``/
    ``query``, else its only string input); the answer from the root's outputs (``answer_key``,
    else ``answer``/``output``, else a bare string) or from the child named ``answer_run``. With
    an ``example`` (a `langsmith.schemas.Example` or a dict with ``outputs``), ``reference``
    comes from ``reference``/``ground_truth``/``expected_output``/``answer`` and ``relevance``
    from ``relevance`` (id → grade) or ``relevant_ids`` (grade 1).

    The sample id is ``sample_id``, else the example id (so runs of two experiments over one
    dataset pair up in `ragbridge.core.compare`), else the root run id.

    Raises ValueError naming the run id and the missing field when the trace does not fit.
    """
    if run is None:
        raise ValueError("sample_from_run() got None instead of a run")
    selected = select_retrievers(run, retriever)
    chosen = selected[-1]
    contexts = retrieved_contexts(chosen)
    question = run_question(run, question_key)
    answer = run_answer(run, answer_key, answer_run)
    reference = reference_contexts = relevance = None
    if example is not None:
        reference, reference_contexts, relevance = example_fields(example)
    example_id = example_id_of(run, example)
    info: dict[str, Any] = {
        "run_id": str(field_of(run, "id")),
        "run_name": field_of(run, "name"),
        "trace_id": None if field_of(run, "trace_id") is None else str(field_of(run, "trace_id")),
        "retriever_run_id": str(field_of(chosen, "id")),
        "retriever_run_name": field_of(chosen, "name"),
    }
    if example_id is not None:
        info["example_id"] = str(example_id)
    if len(selected) > 1:
        info["other_retriever_runs"] = [
            {"id": str(field_of(r, "id")), "name": field_of(r, "name")} for r in selected[:-1]
        ]
    metadata: dict[str, Any] = {"langsmith": info}
    models = run_model_names(run)
    if models:  # the last LLM run wrote the answer; `ragbridge eval` warns if it also judges
        metadata["generator_model"] = models[-1]
        if len(models) > 1:
            metadata["generator_models"] = models
    return Sample(
        id=sample_id or str(example_id if example_id is not None else field_of(run, "id")),
        question=question,
        answer=answer,
        contexts=contexts,
        reference=reference,
        reference_contexts=reference_contexts,
        relevance=relevance,
        metadata=metadata,
    )


def run_model_names(run: Any) -> list[str]:
    """Distinct model names of the ``llm`` runs in a trace, in start order.

    LangChain records ``ls_model_name`` in a run's metadata; other tracers only the invocation
    parameters (``model``/``model_name``). A run that names no model is left out, not guessed.
    """
    names: list[str] = []
    for r in descendants(run):
        if field_of(r, "run_type") != "llm":
            continue
        extra = field_of(r, "extra") or {}
        meta = extra.get("metadata") or {} if isinstance(extra, Mapping) else {}
        params = extra.get("invocation_params") or {} if isinstance(extra, Mapping) else {}
        name = meta.get("ls_model_name") or next(
            (params[k] for k in ("model", "model_name", "model_id") if params.get(k)), None
        )
        if name and str(name) not in names:
            names.append(str(name))
    return names


# --------------------------------------------------------------------------- trees from flat runs


def _as_run(record: Any) -> Run:
    """A `Run` (without children) from a dict or run object; nested children are dropped here."""
    if isinstance(record, Run):
        return record.model_copy(update={"child_runs": []})
    data = dict(record) if isinstance(record, Mapping) else record.model_dump()
    data.pop("child_runs", None)
    data.pop("parent_run", None)
    data.setdefault("trace_id", data.get("id"))  # fixed up once the tree is known
    if "run_type" not in data:
        raise ValueError(f"run {data.get('id')}: no run_type field")
    return Run.model_validate({**data, "child_runs": []})


def _flatten(records: Iterable[Any]) -> list[Any]:
    """Records with any nested ``child_runs`` lifted out, so both export styles load alike."""
    flat: list[Any] = []
    for record in records:
        flat.append(record)
        children = field_of(record, "child_runs") or []
        for child in _flatten(children):
            if field_of(child, "parent_run_id") is None and isinstance(child, Mapping):
                child = {**child, "parent_run_id": field_of(record, "id")}
            flat.append(child)
    return flat


def build_run_trees(records: Iterable[Any]) -> list[Run]:
    """Rebuild trees from flat runs (dicts or `Run`s linked by ``parent_run_id``); roots out.

    Children are ordered by start time, which is the order a pipeline did things in. A run whose
    parent is not among ``records`` (an export filtered by run type, say) becomes a root, so
    nothing read is silently dropped. Duplicate ids keep the last record.
    """
    by_id: dict[str, Run] = {}
    for record in _flatten(records):
        run = _as_run(record)
        by_id[str(run.id)] = run
    roots: list[Run] = []
    for run in by_id.values():
        parent = by_id.get(str(run.parent_run_id)) if run.parent_run_id is not None else None
        if parent is None:
            roots.append(run)
        else:
            assert parent.child_runs is not None
            parent.child_runs.append(run)
    for run in by_id.values():
        run.child_runs = sorted(run.child_runs or [], key=start_key)
    for root in roots:
        for run in descendants(root)[1:]:
            run.trace_id = root.trace_id if root.trace_id is not None else root.id
    return sorted(roots, key=start_key)


def load_runs(path: str | os.PathLike[str]) -> list[Run]:
    """Runs exported as JSON (a list, or ``{"runs": [...]}``) or JSONL, rebuilt into trees.

    Returns the root runs, each a `langsmith.schemas.Run` with ``child_runs`` filled in.
    """
    source = Path(path)
    text = source.read_text(encoding="utf-8")
    records: list[Any] = []
    try:
        whole: Any = json.loads(text)  # a JSON document: a list, {"runs": [...]}, or one run
    except json.JSONDecodeError:
        for number, line in enumerate(text.splitlines(), start=1):  # JSONL: one run a line
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{source}:{number}: invalid JSON: {exc.msg}") from None
    else:
        if isinstance(whole, Mapping) and isinstance(whole.get("runs"), list):
            records = whole["runs"]
        elif isinstance(whole, Mapping):
            records = [whole]
        elif isinstance(whole, list):
            records = whole
        else:
            raise ValueError(f"{source}: expected runs as a JSON list or JSONL, got {whole!r}")
    try:
        return build_run_trees(records)
    except Exception as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("run "):
            raise ValueError(f"{source}: {exc}") from None
        raise ValueError(f"{source}: not a LangSmith run export: {exc}") from exc


# --------------------------------------------------------------------------- many runs


def examples_by_id(examples: Iterable[Any] | Mapping[str, Any] | None) -> dict[str, Any]:
    if examples is None:
        return {}
    if isinstance(examples, Mapping):
        return {str(k): v for k, v in examples.items()}
    return {str(field_of(e, "id")): e for e in examples}


def samples_from_runs(
    runs: Iterable[Any],
    examples: Iterable[Any] | Mapping[str, Any] | None = None,
    **reading: Unpack[RunReading],
) -> list[Sample]:
    """One `Sample` per root run (see `sample_from_run` for the ``reading`` arguments).

    ``runs`` may be trees (from `load_runs`, or live RunTrees) or a flat list (dicts or `Run`s
    linked by ``parent_run_id``, as ``client.list_runs`` yields them): flat lists are rebuilt
    first. ``examples`` (Examples or dicts, or a mapping id → example) are matched to runs by
    ``reference_example_id`` — the link an experiment run keeps to its dataset row.
    """
    # ``**reading`` would also carry `sample_from_run`'s own ``sample_id`` to every trace, giving
    # them all one id; refuse what is not a reading option, as an explicit signature would.
    unknown = sorted(set(reading) - set(RunReading.__annotations__))
    if unknown:
        raise TypeError(f"samples_from_runs() got unexpected keyword arguments: {unknown}")
    items = list(runs)
    ids = {str(field_of(r, "id")) for r in items}
    if any(str(field_of(r, "parent_run_id")) in ids for r in items):
        items = build_run_trees(items)
    by_id = examples_by_id(examples)
    samples = []
    for root in items:
        parent = field_of(root, "parent_run_id")
        if parent is not None and str(parent) in ids:
            continue
        ref = field_of(root, "reference_example_id")
        samples.append(
            sample_from_run(
                root,
                by_id.get(str(ref)) if ref is not None else None,
                **reading,
            )
        )
    return samples


def samples_from_project(
    client: Any,
    project_name: str,
    *,
    filter: str | None = None,
    limit: int | None = None,
    examples: Iterable[Any] | Mapping[str, Any] | None = None,
    **reading: Unpack[RunReading],
) -> list[Sample]:
    """Samples from the traces of a LangSmith project (or experiment), read with ``client``.

    Root runs are listed with ``client.list_runs(project_name=..., is_root=True, filter=...,
    limit=...)`` — so ``filter`` and ``limit`` apply to traces, not to individual runs — and
    each trace's runs are then fetched by ``trace_id`` and rebuilt into a tree. ``client`` is a
    `langsmith.Client` or anything with the same ``list_runs``. ``examples`` and ``reading``
    are `samples_from_runs`'.
    """
    roots = list(
        client.list_runs(project_name=project_name, is_root=True, filter=filter, limit=limit)
    )
    trees = []
    for root in roots:
        trace = list(client.list_runs(project_name=project_name, trace_id=field_of(root, "id")))
        if not any(str(field_of(r, "id")) == str(field_of(root, "id")) for r in trace):
            trace.append(root)
        built = [t for t in build_run_trees(trace) if str(t.id) == str(field_of(root, "id"))]
        trees.extend(built)
    return samples_from_runs(trees, examples, **reading)


# --------------------------------------------------------------------------- offline client


class OfflineClient(Client):
    """A `langsmith.Client` that never touches the network; runs are kept in memory instead.

    Why: ``langsmith.evaluate`` without a client probes the API in a background thread, and
    LangChain runnables inside a trace post their runs even with ``upload_results=False``. This
    client skips the ``/info`` probe (``info={}``), posts nothing synchronously
    (``auto_batch_tracing=False``) and records every ``create_run``/``update_run`` payload in
    ``payloads`` — so traces can be inspected (`recorded_runs`, `recorded_trees`) in tests.
    """

    def __init__(self) -> None:
        super().__init__(
            api_url="http://127.0.0.1:1", api_key="x", info={}, auto_batch_tracing=False
        )
        # Not named `runs`: that is a read-only property of Client.
        self.payloads: list[tuple[str, dict[str, Any]]] = []

    def create_run(self, *args: Any, **kwargs: Any) -> None:
        """Record the run instead of POSTing it."""
        names = ("name", "inputs", "run_type")
        self.payloads.append(("create", {**dict(zip(names, args, strict=False)), **kwargs}))

    def update_run(self, *args: Any, **kwargs: Any) -> None:
        """Record the update instead of PATCHing it."""
        payload = {**kwargs}
        if args:
            payload["run_id"] = args[0]
        self.payloads.append(("update", payload))

    def recorded_runs(self) -> list[dict[str, Any]]:
        """The recorded runs as flat dicts (creates merged with their updates), like an export."""
        merged: dict[str, dict[str, Any]] = {}
        for kind, payload in self.payloads:
            data = {k: v for k, v in payload.items() if v is not None}
            run_id = data.pop("run_id", None) if kind == "update" else data.get("id")
            if run_id is None:
                continue
            data["id"] = run_id
            merged.setdefault(str(run_id), {}).update(data)
        return list(merged.values())

    def recorded_trees(self) -> list[Run]:
        """The recorded runs rebuilt into trees (roots, children in start order)."""
        return build_run_trees(self.recorded_runs())

    def clear(self) -> None:
        """Forget the recorded payloads."""
        self.payloads.clear()


def offline_client() -> OfflineClient:
    """A `langsmith.Client` that makes no network connection (see `OfflineClient`).

    Use it as ``langsmith.evaluate(target, data=[Example(...)], evaluators=[...],
    upload_results=False, client=offline_client())`` or
    ``langsmith.tracing_context(enabled=True, client=offline_client())``.
    """
    return OfflineClient()
