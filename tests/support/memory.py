"""Driving a ShortTermMemory without the page, and the invariants every state of it must keep."""

from __future__ import annotations

from memora.memory import ShortTermMemory, Turn


def chat(memory: ShortTermMemory, *texts: str) -> str:
    """Sends each of ``texts`` as one turn, in order; returns the last reply. A failed turn raises, as the memory does."""
    reply = ""
    for text in texts:
        with memory.turn(text) as turn:
            reply = turn.run()
    return reply


def stream(memory: ShortTermMemory, text: str) -> tuple[list[str], Turn]:
    """One streamed turn: the deltas as they came, and the committed turn (its ``stats``, ``user_text``)."""
    with memory.turn(text) as turn:
        deltas = list(turn.stream())
    return deltas, turn


def assert_consistent(memory: ShortTermMemory) -> None:
    roles = [m.role for m in memory.history]
    assert roles == ["user", "assistant"] * (len(roles) // 2), "history must be alternating complete pairs"
    assert memory.summarized_message_count % 2 == 0
    assert memory.summarized_message_count <= len(memory.history)
    assert bool(memory.summary) == (memory.summarized_message_count > 0)
    assert memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)
