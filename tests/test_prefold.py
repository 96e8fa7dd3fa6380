"""ShortTermMemory.prefold(): folding between turns, so the next reply waits for no summary."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memora.memory import ContextBudgetError, ShortTermMemory, policies
from memora.memory.backend import BackendError
from memora.memory.core import last_reply
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE
from memora.text.tokens import LocalTokenCounter
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat


def test_prefold_folds_the_pair_leaving_the_window_and_the_next_prepare_sends_no_summary_request(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=3)
    chat(memory, "one", "two", "three", "four")
    assert backend.summaries == []
    assert memory.plan().fold == 2

    version = memory.prefold()

    assert version is not None and version.folded == (0, 2)
    assert len(backend.summaries) == 1
    assert backend.summaries[0].new_messages == (Message("user", "one"), Message("assistant", "reply 1"))
    assert memory.summarized_message_count == 2 and memory.summary == "one | reply 1"

    chat(memory, "five")

    assert len(backend.summaries) == 1, "the next turn's prepare() made a summary request"
    sent = backend.replies[-1].messages
    assert sent[0] == Message("developer", SUMMARY_PREAMBLE + "one | reply 1")
    assert [m.content for m in sent[1:]] == ["two", "reply 2", "three", "reply 3", "four", "reply 4", "five"]
    assert last_reply(memory).newly_summarized == 0


def test_prefold_sends_the_next_reply_what_prepare_alone_would_have_sent():
    texts = ["one", "two", "three", "four", "five", "six"]
    with_prefold, without = ScriptedBackend(), ScriptedBackend()
    prefolding = ShortTermMemory(with_prefold, max_input_tokens=4000, max_recent_turns=2)
    plain = ShortTermMemory(without, max_input_tokens=4000, max_recent_turns=2)
    for text in texts:
        prefolding.prefold()  # between turns; nothing is due before the first
        chat(prefolding, text)
        chat(plain, text)

    assert [r.messages for r in with_prefold.replies] == [r.messages for r in without.replies]
    assert [s.new_messages for s in with_prefold.summaries] == [s.new_messages for s in without.summaries]


def test_prefold_with_nothing_due_makes_no_request(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=3)
    chat(memory, "one", "two", "three")

    assert memory.plan().fold == 0
    assert memory.prefold() is None
    assert backend.summaries == [] and memory.conversation.versions == ()


def test_prefold_folds_pairs_that_cannot_fit_the_budget_even_beside_the_shortest_message(backend):
    long_text = "apple " * 200
    probe = ShortTermMemory(ScriptedBackend(), max_recent_turns=3)
    user, reply = Message("user", long_text), Message("assistant", "reply 1")
    # The second long turn just fits with no summary; two long pairs beside even an
    # empty message do not, so whatever comes next, the next prepare() must fold.
    budget = probe.count_input_tokens([user, reply, user]) + 2
    assert probe.count_input_tokens([user, reply, user, reply, Message("user", "")]) > budget
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=3)
    chat(memory, long_text, long_text)
    assert backend.summaries == []

    assert memory.plan().fold > 0
    version = memory.prefold()
    chat(memory, "ok?")

    # Two long pairs do not fit one summary request within the budget either: they fold
    # in two pieces, one pair each, and every summary request stays within the budget.
    assert version is not None and version.summarized_message_count == 4
    assert [v.folded for v in memory.conversation.versions] == [(0, 2), (2, 4)]
    assert [len(s.new_messages) for s in backend.summaries] == [2, 2]
    local = LocalTokenCounter()
    assert all(local.count("", s.instructions, [Message("user", s.input_text)]) <= budget for s in backend.summaries)
    assert backend.replies[-1].counted_input_tokens <= budget
    assert backend.replies[-1].messages[0].role == "developer"
    assert backend.replies[-1].messages[-1] == Message("user", "ok?")


def test_a_failed_prefold_changes_nothing_and_the_next_prepare_folds_the_same_messages(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=3)
    chat(memory, "one", "two", "three", "four")
    backend.fail_next("summary")

    with pytest.raises(BackendError):
        memory.prefold()

    assert memory.conversation.versions == () and memory.summarized_message_count == 0
    assert len(memory.history) == 8 and not memory.conversation.pending
    chat(memory, "five")
    assert len(backend.summaries) == 2
    assert backend.summaries[1].new_messages == backend.summaries[0].new_messages
    assert memory.summarized_message_count == 2


def test_prefold_is_recorded_in_the_ledger_under_the_turn_just_finished(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=3)
    chat(memory, "one", "two", "three", "four")
    memory.prefold()

    last = memory.ledger[-1]
    assert (last.kind, last.turn) == ("summary", 4)
    assert memory.conversation.versions[-1].turn == 4
    assert memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)


def test_prefold_with_a_pending_user_message_raises_and_sends_nothing(backend):
    memory = ShortTermMemory(backend, max_input_tokens=4000, max_recent_turns=3)
    chat(memory, "one", "two", "three", "four")
    memory.add_user_message("five")

    with pytest.raises(ValueError):
        memory.prefold()
    assert backend.summaries == []
    assert memory.history[-1] == Message("user", "five")


words = st.sampled_from(["travel", "airport", "B1", "grammar", "旅遊", "英文", "練習", "please", "why?"])
texts = st.lists(words, min_size=1, max_size=150).map(" ".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(texts, min_size=1, max_size=10),
    budget=st.integers(min_value=450, max_value=1500),
    recent=st.integers(min_value=0, max_value=4),
    policy=st.sampled_from(policies.names()),
)
# A fold of 8 messages that does not fit one summary request at this budget: the prefold sends it in two.
@example(
    messages=[
        "travel B1 B1 B1 B1 旅遊 旅遊",
        "travel travel travel travel B1 B1 B1 B1 旅遊 旅遊 旅遊 旅遊 旅遊",
        "travel " * 12 + "B1 旅遊 旅遊",
        "travel " * 9 + "B1 B1 B1 旅遊 旅遊 旅遊",
        "travel",
    ],
    budget=450,
    recent=0,
    policy="watermark",
)
def test_prefold_only_folds_what_the_next_prepare_would_fold_anyway(messages, budget, recent, policy):
    backend = ScriptedBackend(summary_text=lambda request: "fact " * 30)
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=recent, fold_policy=policy)
    for text in messages:
        due = memory.summarized_message_count + memory.plan().fold
        without = copy.deepcopy(memory)
        try:
            chat(without, text)
        except ContextBudgetError:
            continue
        # Whatever this message is, the turn alone folds at least what the fold ahead planned.
        assert without.summarized_message_count >= due

        summaries_before = len(backend.summaries)
        version = memory.prefold()
        # A fold too big for one summary request goes in pieces (fold_pieces), so a prefold may send several.
        assert (len(backend.summaries) > summaries_before) == (version is not None)
        assert memory.summarized_message_count == due
        chat(memory, text)
        assert backend.replies[-1].counted_input_tokens <= budget
    folded = [m for s in backend.summaries for m in s.new_messages]
    assert folded == memory.history[: memory.summarized_message_count]
