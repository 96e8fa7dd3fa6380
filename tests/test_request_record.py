"""Every figure from one record: over random conversations, each view of a request reads the record the memory made
when it checked that request, and the record equals what the ledger keeps and what the model was sent.

Both fold policies, budgets from tight to roomy, a server whose count disagrees with the local one (it reports more,
and where it counts requests itself, counts more), with and without the fold ahead the page makes after each reply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora import ContextBudgetError, ShortTermMemory
from memora.app.page.picture import next_picture, next_plan, request_picture
from memora.app.page.views import last_context_rows, message_marks
from memora.memory import policies
from memora.memory.backend import BackendError
from memora.memory.core import budget_in_force, last_sent
from memora.teaching.story import story
from memora.teaching.what_if import what_if
from memora.text.tokens import LocalTokenCounter
from memora.text.usage import RequestParts
from tests.support.fakes import ScriptedBackend

words = st.sampled_from(["travel", "airport", "B1", "grammar", "旅遊", "英文", "練習", "please", "why?", "comfortable"])
texts = st.lists(words, min_size=5, max_size=90).map(" ".join)


@dataclass
class DisagreeingServer(ScriptedBackend):
    """A server whose own count is ``input_scale`` times the local one, in what it reports and, with
    ``count_remotely``, in what its count endpoint answers before a request is sent."""

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        counted = super().count_request(model, instructions, messages)
        return None if counted is None else math.ceil(counted * self.input_scale)


def assert_parts_add_up(parts: RequestParts | None, counted: int) -> None:
    assert parts is not None, "every request of this session keeps its parts"
    assert parts.tokens == counted and parts.instructions >= 0 and parts.summary >= 0


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(texts, min_size=4, max_size=12),
    budget=st.integers(min_value=450, max_value=2500),
    recent=st.integers(min_value=0, max_value=3),
    policy=st.sampled_from(policies.names()),
    scale=st.sampled_from([1.0, 1.1, 1.3]),
    remote=st.booleans(),
    fold_ahead=st.booleans(),
)
def test_every_view_reads_the_record_of_the_request_it_shows(messages, budget, recent, policy, scale, remote, fold_ahead):
    backend = DisagreeingServer(input_scale=scale, count_remotely=remote)
    memory = ShortTermMemory(backend, max_input_tokens=budget, max_recent_turns=recent, fold_policy=policy)
    for text in messages:
        try:
            planned = memory.plan(text)
            with memory.turn(text) as turn:
                turn.run()
        except (ContextBudgetError, BackendError):
            continue
        record = memory.ledger[-1]
        parts = record.parts
        assert record.kind == "reply"
        assert_parts_add_up(parts, record.counted_input_tokens)
        assert parts == turn.prepared.parts and record.counted_input_tokens == turn.prepared.input_tokens
        assert record.input_budget == budget_in_force(memory), "the budget in force when it was checked"

        # The record numbers what was sent: the messages the model received, by the chat's numbers.
        history = memory.history
        prepared = turn.prepared
        sent = [m for m, source in zip(prepared.context_messages, prepared.sources, strict=True) if source in ("window", "current")]
        assert sent == [history[number - 1] for number in parts.numbers]
        assert parts.current is not None and parts.current.number == len(history) - 1
        assert [m.tokens for m in (*parts.window, parts.current)] == [memory.conversation.counts[n - 1] for n in parts.numbers]
        assert LocalTokenCounter().count(memory.model, turn.prepared.instructions, list(turn.prepared.context_messages)) == parts.tokens

        # A plan that folds nothing counts its request exactly: the same parts the record keeps.
        if not planned.fold and not record.newly_summarized:
            assert (planned.fixed, planned.summary, planned.window, planned.message) == (
                parts.instructions,
                parts.summary,
                parts.window_tokens,
                parts.current_tokens,
            )

        # Every view of this request reads the record.
        assert last_sent(memory) == parts
        picture = request_picture(parts)
        assert (picture.instructions, picture.summary, picture.window, picture.current) == (
            parts.instructions,
            parts.summary,
            parts.window_tokens,
            parts.current_tokens,
        )
        assert picture.used == record.counted_input_tokens and picture.budget == parts.budget
        numbered = [(row.number, row.tokens) for row in last_context_rows(memory, story(memory).folds) if row.number is not None]
        assert numbered == [(m.number, m.tokens) for m in (*parts.window, parts.current)]

        if fold_ahead:
            memory.prefold()
        ahead = next_plan(memory)
        if ahead is not None:
            bar = next_picture(ahead)
            assert (bar.instructions, bar.summary, bar.window, bar.current, bar.budget) == (
                ahead.fixed,
                ahead.summary,
                ahead.window,
                ahead.message,
                ahead.budget,
            )
            assert bar.used == ahead.input_tokens

        # Sent and next apart: a message of the last request that has been folded since says so.
        marks = message_marks(memory)
        for number in parts.numbers:
            if number <= memory.summarized_message_count:
                assert marks[number - 1] == "folded_since"

    # The ledger: every request's parts add up to what it counted, and each fold's record names what it folded.
    for record in memory.ledger:
        assert_parts_add_up(record.parts, record.counted_input_tokens)
    told = story(memory)
    assert told.total == memory.session_total_tokens
    for fold in told.folds:
        assert fold.request is not None, "every version of this session has its record"
        parts = memory.ledger[fold.request].parts
        assert parts is not None and parts.version == fold.version and parts.current is None
        assert parts.numbers == tuple(range(fold.first, fold.last + 1))

    # What if's first column is the ledger itself, to the token.
    live = what_if(memory).live
    replies = [r for r in memory.ledger if r.kind == "reply"]
    summaries = [r for r in memory.ledger if r.kind == "summary"]
    assert (live.reply_requests, live.summary_requests) == (len(replies), len(summaries))
    assert live.reply_tokens == sum(r.counted_input_tokens for r in replies)
    assert live.summary_tokens == sum(r.counted_input_tokens for r in summaries)
    assert live.summaries_written == sum(r.output_tokens or 0 for r in summaries)
