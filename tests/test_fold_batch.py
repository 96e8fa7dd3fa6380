"""fold_batch_turns: the window grows by k turns, then folds in one summary request."""

from __future__ import annotations

from memora.memory import ShortTermMemory
from memora.messages import Message
from memora.prompts import SUMMARY_PREAMBLE
from memora.tokens import count_message
from tests.support.memory import chat


def test_window_grows_by_the_batch_then_folds_it_in_one_request(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=1, fold_batch_turns=2)
    chat(memory, "one", "two", "three", "four")
    assert backend.summaries == []

    chat(memory, "five")

    assert len(backend.summaries) == 1
    assert [m.content for m in backend.summaries[0].new_messages] == ["one", "reply 1", "two", "reply 2", "three", "reply 3"]
    assert [m.content for m in backend.replies[-1].messages[1:]] == ["four", "reply 4", "five"]


def test_a_fold_the_budget_forces_early_takes_the_whole_batch(backend):
    long_text = "apple " * 300
    probe = ShortTermMemory(backend, max_recent_turns=1)
    user, reply = Message("user", long_text), Message("assistant", "reply 1")
    full_summary = count_message("developer", SUMMARY_PREAMBLE) + probe.max_summary_tokens + 1
    # Three long turns fit with no summary. The fourth needs a fold, after which two long
    # pairs would still fit beside a full summary: the budget alone asks for one pair.
    budget = probe.count_input_tokens([user, reply, user, reply, user]) + full_summary + 20
    assert probe.count_input_tokens([user, reply, user, reply, user, reply, user]) > budget
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=1, fold_batch_turns=2)
    chat(memory, long_text, long_text, long_text)
    assert backend.summaries == []

    chat(memory, long_text)

    assert len(backend.summaries) == 1
    assert len(backend.summaries[0].new_messages) == 4, "folded back to max_recent_turns, not one pair"
    assert [m.role for m in backend.replies[-1].messages] == ["developer", "user", "assistant", "user"]
    assert backend.replies[-1].counted_input_tokens <= budget
