"""The student the lesson's tests play: the article's B1 traveller. Her first message plants her level and goal; the
questions after it carry neither, so a summary that drops the first message loses them."""

from __future__ import annotations

B1 = "My English level is B1 and I want to practise travel English."
FILLER = (
    "How do I ask for directions?",
    "What should I say at a hotel?",
    "How do I order food?",
    "How do I buy a train ticket?",
    "What does 'break the ice' mean?",
)
LESSON = (B1, *FILLER)
"""Six turns: with the 3-turn recent window, the B1 turn is folded after the fourth reply."""
