"""The small corpus and labelled questions that every framework example uses.

Five HR policy documents of three sentences each (long enough for LlamaIndex to split them into
several chunks, so the examples show a labelled *document* id surviving chunking) and five
questions labelled with the id of the document that answers them. The last question is worded
unlike its document on purpose: a lexical retriever misses it, and the scores say so.
"""

from __future__ import annotations

DOCUMENTS: dict[str, str] = {
    "leave": "New employees receive 25 days of paid leave per year. "
    "Leave requests need the approval of the line manager. "
    "Part-time staff receive leave in proportion to their contracted hours.",
    "carry": "Unused leave can be carried over until the end of March of the following year. "
    "Carried-over days are always taken before the days of the new year. "
    "Days still open after March are lost.",
    "parking": "Parking at the head office is free for all staff. "
    "Visitors park in the marked bays next to the main entrance. "
    "Electric cars can charge at the six bays by the north gate.",
    "laptop": "Every employee gets a laptop on the first working day. "
    "Laptops are replaced every four years. "
    "A broken laptop is swapped within two working days.",
    "expenses": "Travel expenses are reimbursed within 30 days of submitting receipts. "
    "Receipts must be uploaded within three months of the trip. "
    "Taxi fares are reimbursed only for journeys after 10 pm.",
}

QUESTIONS: list[tuple[str, str, dict[str, int]]] = [
    ("q1", "How many days of paid leave do new employees get?", {"leave": 1}),
    ("q2", "Until when can unused leave be carried over?", {"carry": 1}),
    ("q3", "Is parking at the head office free?", {"parking": 1}),
    ("q4", "When are travel expenses reimbursed?", {"expenses": 1}),
    ("q5", "What happens to vacation I did not use?", {"carry": 1}),
]

ANSWERS: list[str] = [
    "New employees receive 25 days of paid leave per year.",
    "Unused leave can be carried over until the end of March.",
    "Yes, parking at the head office is free for all staff.",
    "Travel expenses are reimbursed within 30 days.",
    "I could not find that in the context.",
]
"""What a reasonable pipeline answers, in question order (the examples' fake LLMs say this)."""
