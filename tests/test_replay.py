"""The replay: what a fold policy, or sending the full history, would have done with a conversation's token counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora.backends import OfflineBackend
from memora.memory import ContextBudgetError, ShortTermMemory
from memora.memory.core import local_budget, request_sizes
from memora.teaching.replay import (
    PolicySizes,
    ReplayedRequest,
    real_folds,
    replay,
    replay_full_history,
    replay_sizes,
)
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat

# Sizes small enough to count by hand: instructions 10, summary preamble 5, summary cap 20 (so a full summary
# message is 26), a summary request's fixed part 30, and room for 1,000 tokens of folded messages.
SIZES = PolicySizes(fixed=10, preamble=5, summary_cap=20, summary_request=30, fold_room=1000)
FOUR_TURNS = [10, 20] * 4  # each user message 10 tokens, each reply 20


def test_the_window_replay_of_four_short_turns_counted_by_hand():
    run = replay(FOUR_TURNS, "window", SIZES, budget=1000, max_recent_turns=1, prefold=False)
    assert run.requests == (
        ReplayedRequest(1, "reply", 10 + 10),
        ReplayedRequest(2, "reply", 10 + 30 + 10),
        # Turn 3: pair 1 leaves the 1-pair window. Its summary: the request's 30, no old summary, the pair's 30
        # tokens in; out, the 30 tokens it summarizes cut to the cap of 20. The reply sends 10 + (5 + 20) + 30 + 10.
        ReplayedRequest(3, "summary", 30 + 0 + 30, 20, (0, 2), estimated=True),
        ReplayedRequest(3, "reply", 75),
        # Turn 4: pair 2 folds onto the 20-token summary: in, 30 + 20 + 30; out, still the cap.
        ReplayedRequest(4, "summary", 80, 20, (2, 4), estimated=True),
        ReplayedRequest(4, "reply", 75),
    )
    assert (run.reply_requests, run.summary_requests, run.input_tokens, run.summary_output_tokens) == (4, 2, 360, 40)
    assert run.tokens_per_turn() == (20, 50, 60 + 20 + 75, 80 + 20 + 75)
    assert run.estimated and run.over_budget == 0


def test_folding_ahead_moves_each_fold_to_the_turn_before_and_adds_one_after_the_last_reply():
    run = replay(FOUR_TURNS, "window", SIZES, budget=1000, max_recent_turns=1)
    summaries = [(r.turn, r.span, r.input_tokens) for r in run.requests if r.kind == "summary"]
    assert summaries == [(2, (0, 2), 60), (3, (2, 4), 80), (4, (4, 6), 80)]
    assert [r.input_tokens for r in run.requests if r.kind == "reply"] == [20, 50, 75, 75]


def test_the_watermark_folds_once_in_a_larger_step_counted_by_hand():
    run = replay(FOUR_TURNS, "watermark", SIZES, budget=100, max_recent_turns=1, prefold=False)
    # Turn 4 would send 10 + 90 + 10 = 110 > 100: the two pairs older than the window fold in one request.
    assert run.requests[3:] == (ReplayedRequest(4, "summary", 30 + 60, 20, (0, 4), estimated=True), ReplayedRequest(4, "reply", 75))
    assert (run.reply_requests, run.summary_requests, run.input_tokens) == (4, 1, 20 + 50 + 80 + 90 + 75)
    window = replay(FOUR_TURNS, "window", SIZES, budget=100, max_recent_turns=1, prefold=False)
    assert window.summary_requests == 2


def test_the_full_history_sends_everything_and_marks_what_passes_the_budget():
    run = replay_full_history(FOUR_TURNS, 10, budget=100)
    assert [r.input_tokens for r in run.requests] == [20, 50, 80, 110]
    assert (run.summary_requests, run.input_tokens, run.over_budget) == (0, 260, 1)


def test_a_summary_never_outgrows_what_it_summarizes_and_a_fold_cuts_messages_to_its_room():
    small = PolicySizes(fixed=10, preamble=5, summary_cap=200, summary_request=30, fold_room=25)
    run = replay(FOUR_TURNS, "window", small, budget=1000, max_recent_turns=1, prefold=False)
    first = run.requests[2]
    assert (first.input_tokens, first.output_tokens) == (30 + 25, 30)  # 30 tokens folded, cut to the room of 25


def test_a_replay_needs_whole_pairs():
    with pytest.raises(ValueError, match="pairs"):
        replay([10, 20, 10], "window", SIZES, budget=1000, max_recent_turns=1)


SHORT_TURNS = [
    "My English level is B1, and recently I want to practise travel English.",
    "What is the difference between 'borrow' and 'lend'?",
    "How do you pronounce 'comfortable'?",
    "Can you give me an example sentence with 'although'?",
    "What does 'break the ice' mean?",
    "Is 'informations' a correct word?",
    "When should I use 'a few' instead of 'few'?",
    "Please plan a practice for my level and goal.",
]


@pytest.mark.parametrize("policy", ["window", "watermark"])
def test_the_replay_of_the_policy_a_conversation_ran_under_is_what_really_happened(policy):
    """Through the page's own steps (a turn, then its fold ahead), on the offline engine: same requests, same tokens."""
    memory = ShortTermMemory(OfflineBackend(), max_input_tokens=700, max_recent_turns=2, fold_policy=policy)
    for text in SHORT_TURNS * 2:
        chat(memory, text)
        memory.prefold()
    assert memory.conversation.versions, "the conversation must have folded for this test to mean anything"
    run = replay(
        memory.conversation.finished_counts, policy, replay_sizes(memory), budget=local_budget(memory),
        max_recent_turns=2, real_folds=real_folds(memory),
    )  # fmt: skip
    happened = [(r.turn, r.kind, r.counted_input_tokens, r.output_tokens if r.kind == "summary" else 0) for r in memory.ledger]
    assert [(r.turn, r.kind, r.input_tokens, r.output_tokens) for r in run.requests] == happened
    assert [r.span for r in run.requests if r.kind == "summary"] == [v.folded for v in memory.conversation.versions]
    assert not run.estimated


def test_without_the_real_summaries_the_replay_still_folds_when_and_what_really_was_folded():
    memory = ShortTermMemory(OfflineBackend(), max_input_tokens=700, max_recent_turns=2)
    for text in SHORT_TURNS:
        chat(memory, text)
        memory.prefold()
    sizes = replay_sizes(memory)
    run = replay(memory.conversation.finished_counts, "window", sizes, budget=local_budget(memory), max_recent_turns=2)
    assert [(r.turn, r.span) for r in run.requests if r.kind == "summary"] == [(v.turn, v.folded) for v in memory.conversation.versions]
    assert run.estimated


def test_both_policies_replay_with_the_memorys_own_summary_cap():
    for policy in ("window", "watermark"):
        memory = ShortTermMemory(OfflineBackend(), max_input_tokens=1000, fold_policy=policy)
        sizes = replay_sizes(memory)
        assert sizes.summary_cap == memory.limits.max_summary_tokens == 200
        assert sizes.full_summary == request_sizes(memory).full_summary


words = st.sampled_from(["travel", "airport", "B1", "grammar", "旅遊", "英文", "🙂", "please", "why?", "I live in Taipei."])
texts = st.one_of(st.lists(words, min_size=1, max_size=12).map(" ".join), st.integers(1, 300).map(lambda n: "travel " * n))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.tuples(texts, texts), min_size=1, max_size=16),
    budget=st.integers(min_value=500, max_value=2000),
    recent=st.integers(min_value=0, max_value=3),
    policy=st.sampled_from(["window", "watermark"]),
    prefold=st.booleans(),
)
def test_any_conversation_replayed_under_its_own_policy_is_what_really_happened(turns, budget, recent, policy, prefold):
    replies = iter(reply for _, reply in turns)
    memory = ShortTermMemory(ScriptedBackend(reply_text=lambda request: next(replies)), max_input_tokens=budget,
                             max_recent_turns=recent, fold_policy=policy)  # fmt: skip
    for text, _ in turns:
        try:
            chat(memory, text)
        except ContextBudgetError:
            break  # a refused message leaves its folds standing; the replay is of what came before
        if prefold:
            memory.prefold()
    else:
        sizes = replay_sizes(memory)
        run = replay(memory.conversation.finished_counts, policy, sizes, budget=local_budget(memory), max_recent_turns=recent,
                     prefold=prefold, real_folds=real_folds(memory))  # fmt: skip
        happened = [(r.turn, r.kind, r.counted_input_tokens, r.output_tokens if r.kind == "summary" else 0) for r in memory.ledger]
        assert [(r.turn, r.kind, r.input_tokens, r.output_tokens) for r in run.requests] == happened
        assert run.over_budget == 0 and not run.estimated


@dataclass
class TemplatedServer(ScriptedBackend):
    """A server that counts each request itself, its chat template adding ``template`` tokens to what the plan counts:
    a request the plan fits within ``template`` tokens of the budget is over it by the server's count."""

    template: int = 40

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        counted = super().count_request(model, instructions, messages)
        return None if counted is None else counted + self.template


@pytest.mark.parametrize("policy", ["window", "watermark"])
def test_the_replay_finds_each_request_the_memory_sent_retries_included(policy):
    """The memory folds one more pair whenever the server's own count is over the budget (``core.fold_until_it_fits``);
    the replay, through the same loop, finds the same requests in the same order: retries, folds ahead and replies."""
    server = TemplatedServer(count_remotely=True)
    memory = ShortTermMemory(server, max_input_tokens=400, max_recent_turns=8, fold_policy=policy)
    for text in SHORT_TURNS * 2:
        chat(memory, text)
        memory.prefold()
    assert len(server.counts) > len(server.replies), "the server must have refused some requests: the retries"
    run = replay(
        memory.conversation.finished_counts,
        policy,
        replay_sizes(memory),
        budget=local_budget(memory),
        max_recent_turns=8,
        real_folds=real_folds(memory),
    )
    happened = [(r.turn, r.kind, r.counted_input_tokens, r.output_tokens if r.kind == "summary" else 0) for r in memory.ledger]
    assert [(r.turn, r.kind, r.input_tokens, r.output_tokens) for r in run.requests] == happened
    assert [r.span for r in run.requests if r.kind == "summary"] == [v.folded for v in memory.conversation.versions]
    assert not run.estimated
