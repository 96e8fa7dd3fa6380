"""Driving a ShortTermMemory without the page, and the invariants every state of it must keep."""

from __future__ import annotations

from memora.memory import ShortTermMemory


def chat(memory: ShortTermMemory, *texts: str) -> None:
    for text in texts:
        with memory.turn(text) as turn:
            turn.run()


def assert_consistent(memory: ShortTermMemory) -> None:
    roles = [m.role for m in memory.history]
    assert roles == ["user", "assistant"] * (len(roles) // 2), "history must be alternating complete pairs"
    assert memory.summarized_message_count % 2 == 0
    assert memory.summarized_message_count <= len(memory.history)
    assert bool(memory.summary) == (memory.summarized_message_count > 0)
    assert memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)
