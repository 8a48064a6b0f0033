"""SummEval's four rated dimensions as ragbridge criteria: what ``ragbridge agreement --dataset
summeval`` judges by default, so a judge's figures on SummEval are comparable with the papers'.

The wording is ours. It follows what SummEval's experts were asked to rate (Fabbri et al. 2021,
after Kryściński et al. 2019): **coherence**, how the summary holds together as a whole;
**consistency**, whether everything it states is supported by the article; **fluency**, the
quality of its individual sentences; **relevance**, whether it keeps the article's important
points and only those. All four are on the experts' 1–5 scale (the G-Eval paper scored fluency
on 1–3; ragbridge keeps the scale people used, so a criterion's value and the people's answers
mean the same points).

The evaluation steps are given, not generated: the yardstick is fixed in the code, every run
and machine uses the same one, and scoring needs no steps-writing call. A team that words the
criteria differently passes its own file (``--criteria``) with the same four names.

Each criterion reads the article (``contexts``) and the summary (``answer``), except fluency,
which judges the sentences alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..criteria.spec import Criterion

__all__ = ["SUMMEVAL_TEXTS", "summeval_criteria"]

SUMMEVAL_TEXTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "coherence": (
        "Coherence: the summary reads as one organised piece about its topic. Its sentences "
        "follow from each other in a sensible order and together build up a clear account, "
        "rather than listing loosely related facts.",
        (
            "Read the article to learn its topic and its main line of events.",
            "Read the summary and check whether each sentence connects to the one before it.",
            "Note jumps, repeated points, contradictions or sentences whose subject is unclear.",
            "Score 5 for a well ordered account that flows, 1 for a disconnected heap of facts.",
        ),
        ("contexts", "answer"),
    ),
    "consistency": (
        "Consistency: every statement of the summary is supported by the article. A summary "
        "that adds facts the article does not state, or changes those it does (names, numbers, "
        "who did what), is inconsistent, however plausible the addition.",
        (
            "List the factual statements the summary makes.",
            "For each one, look for the part of the article that supports it.",
            "Mark statements the article contradicts or does not state at all.",
            "Score 5 when every statement is supported, lower the more are unsupported or wrong.",
        ),
        ("contexts", "answer"),
    ),
    "fluency": (
        "Fluency: each sentence of the summary is well formed on its own: grammatical, "
        "correctly spelled and punctuated, with natural word choice, and free of fragments, "
        "garbled or repeated words and formatting debris.",
        (
            "Read each sentence of the summary on its own.",
            "Note grammar, spelling and punctuation errors, fragments and stray tokens.",
            "Judge how much these errors get in the way of reading the sentences.",
            "Score 5 for clean, natural sentences, 1 when errors make the text hard to read.",
        ),
        ("answer",),
    ),
    "relevance": (
        "Relevance: the summary picks the article's important information. It covers the main "
        "points a reader of the article would need and leaves out minor details, redundancy "
        "and material that is not central to the article.",
        (
            "Read the article and decide which of its points are the important ones.",
            "Check which of those points the summary covers.",
            "Note content in the summary that is minor, repeated or beside the point.",
            "Score 5 when the key points are there without padding, 1 when they are missing.",
        ),
        ("contexts", "answer"),
    ),
}
"""name -> (criterion text, evaluation steps, fields read). Ours; see the module docstring."""


def summeval_criteria() -> tuple[Criterion, ...]:
    """The four SummEval criteria as `Criterion` specs on 1–5, in SummEval's order."""
    from ..criteria.spec import Criterion

    return tuple(
        Criterion(
            name=name,
            criteria=text,
            evaluation_steps=steps,
            reads=reads,
            scale=(1, 5),
            meaning=text.split(":", 1)[0] + " of a summary, as SummEval's experts rated it (1-5)",
        )
        for name, (text, steps, reads) in SUMMEVAL_TEXTS.items()
    )
