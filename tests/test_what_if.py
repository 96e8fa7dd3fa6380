"""The what-if's comparison table: the live policy's column is the ledger itself, the other columns are replays, and
the payoff reads its figures off the table."""

from __future__ import annotations

import pytest

from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory
from memora.memory.core import local_budget
from memora.teaching.prices import ModelPrice
from memora.teaching.replay import FULL_HISTORY, Replay, ReplayedRequest, real_folds, replay, replay_sizes
from memora.teaching.what_if import ROWS, Column, ledger_column, payoff, replay_column, what_if
from memora.text.usage import UsageRecord
from tests.support.lesson import FILLER, LESSON
from tests.support.memory import chat

PRICE = ModelPrice("gpt-5-mini", input=0.25, cached_input=0.025, output=2.0)


def record(turn: int, kind: str, counted: int, reported: int, output: int | None, budget: int | None = None) -> UsageRecord:
    """A ledger record whose counted input is ``counted`` and whose server reported ``reported``."""
    total = reported + (output or 0)
    return UsageRecord(turn, kind, "m", counted, reported, output, total, 0.1, input_budget=budget)


def test_the_ledgers_column_sums_every_request_at_its_counted_input_not_the_reported_one():
    ledger = [
        record(1, "reply", 100, 100, 40),
        record(2, "summary", 70, 59, 12),  # reported 11 under what was counted: the column keeps the count
        record(2, "reply", 120, 120, 30),
        record(2, "summary", 80, 69, 15),  # a fold ahead after turn 2's reply counts for turn 2
        record(3, "reply", 130, 150, 20, budget=140),  # the server counted 150 against a budget of 140
    ]
    column = ledger_column("window", ledger, 3, PRICE)
    assert column.from_ledger and not column.estimated
    assert [column.figure(row) for row in ROWS[:-1]] == [3, 2, 350, 150, 27, 527, 1]
    assert column.tokens_per_turn == (100, 70 + 12 + 120 + 80 + 15, 130)
    assert column.summaries_cost == 150 + 27
    assert column.usd == pytest.approx((500 * 0.25 + 27 * 2.0) / 1_000_000)
    assert ledger_column("window", ledger, 3).usd is None


def test_a_request_of_a_turn_not_finished_is_in_the_totals_and_counts_for_the_last_finished_turn():
    """A fold before a reply still in progress (or before one that failed) was sent: the ledger's column keeps it."""
    ledger = [record(1, "reply", 100, 100, 40), record(2, "summary", 70, 70, None)]
    column = ledger_column("window", ledger, 1)
    assert (column.summary_requests, column.summary_tokens, column.summaries_written) == (1, 70, 0)
    assert column.tokens_per_turn == (170,) and sum(column.tokens_per_turn) == column.total_tokens
    assert ledger_column("window", ledger, 0).tokens_per_turn == ()


def test_a_replays_column_sums_its_requests_and_says_when_a_summary_is_estimated():
    run = Replay(
        "watermark",
        2,
        (
            ReplayedRequest(1, "reply", 100),
            ReplayedRequest(2, "summary", 50, 10, (0, 2), True),
            ReplayedRequest(2, "reply", 90, fits=False),
        ),
    )
    column = replay_column(run, PRICE)
    assert not column.from_ledger and column.estimated
    assert [column.figure(row) for row in ROWS[:-1]] == [2, 1, 190, 50, 10, 250, 1]
    assert column.tokens_per_turn == (100, 150)
    assert column.usd == pytest.approx((240 * 0.25 + 10 * 2.0) / 1_000_000)


def column(strategy: str, per_turn: tuple[int, ...], summary_requests: int = 1) -> Column:
    """A column whose every token is a reply's but ``summary_requests`` summaries of 10 tokens in, 5 out, in turn 1."""
    summaries = 15 * summary_requests
    first = per_turn[0] - summaries
    return Column(
        strategy,
        from_ledger=False,
        reply_requests=len(per_turn),
        summary_requests=summary_requests,
        reply_tokens=sum(per_turn) - summaries,
        summary_tokens=10 * summary_requests,
        summaries_written=5 * summary_requests,
        over_budget=0,
        usd=None,
        estimated=False,
        tokens_per_turn=(first + summaries, *per_turn[1:]),
    )


def test_the_payoff_is_the_turn_from_which_the_running_total_stays_below_and_its_figures_are_the_tables():
    full = column(FULL_HISTORY, (100, 200, 300, 400), 0)
    # Below at turn 2, above again at turn 3, below from turn 4 on: it pays from turn 4, not from turn 2.
    memory = column("window", (120, 150, 400, 40))
    pay = payoff(memory, full)
    assert (pay.turn, pay.memory, pay.full, pay.turns, pay.summaries) == (4, 710, 1000, 4, 15)
    assert (pay.memory, pay.full) == (memory.total_tokens, full.total_tokens)
    assert payoff(column("window", (150, 250, 300, 310)), full).turn is None  # 1,010 against 1,000: it does not pay
    nothing = payoff(column("watermark", (100, 200, 300, 400), 0), full)
    assert (nothing.summary_requests, nothing.summaries, nothing.turn) == (0, 0, None)


def played(policy: str, budget: int, *texts: str) -> ShortTermMemory:
    """A conversation through the page's own steps on the offline engine: each turn, then its fold ahead."""
    memory = ShortTermMemory(OfflineBackend(), max_input_tokens=budget, fold_policy=policy)
    for text in texts:
        chat(memory, text)
        memory.prefold()
    return memory


@pytest.mark.parametrize("budget", [600, 1200], ids=["tight", "roomy"])
@pytest.mark.parametrize("policy", ["window", "watermark"])
def test_the_live_column_is_the_ledger_to_the_token_and_the_others_are_replays(policy, budget):
    memory = played(policy, budget, *LESSON, *FILLER, *FILLER)  # 16 turns: even the roomy watermark folds
    ledger = list(memory.ledger)
    replies = [r for r in ledger if r.kind == "reply"]
    summaries = [r for r in ledger if r.kind == "summary"]
    assert summaries, "the conversation must fold for the summary rows to mean anything"
    comparison = what_if(memory)
    yours = comparison.live
    other = "watermark" if policy == "window" else "window"
    assert [c.strategy for c in comparison.columns] == [policy, other, FULL_HISTORY]
    assert [c.from_ledger for c in comparison.columns] == [True, False, False]
    assert (yours.reply_requests, yours.summary_requests) == (len(replies), len(summaries))
    assert yours.reply_tokens == sum(r.counted_input_tokens for r in replies)
    assert yours.summary_tokens == sum(r.counted_input_tokens for r in summaries)
    assert yours.summaries_written == sum(r.output_tokens for r in summaries)
    assert yours.total_tokens == sum(yours.tokens_per_turn) == sum(r.counted_input_tokens for r in ledger) + yours.summaries_written
    assert yours.over_budget == sum(r.over_budget for r in replies) == 0
    # The other columns are the replays the what-if made, summed: the table holds nothing of its own.
    assert [replay_column(run) for run in comparison.replays] == list(comparison.columns[1:])
    assert comparison.column(FULL_HISTORY).reply_tokens == sum(r.full_history_tokens for r in replies)


def test_a_setting_changed_midway_leaves_the_live_column_the_ledger_where_a_replay_would_not_be():
    memory = played("window", 1000, *LESSON)
    memory.configure(max_recent_turns=1)  # the teacher narrows the window after six turns
    for text in FILLER:
        chat(memory, text)
        memory.prefold()
    ledger = list(memory.ledger)
    yours = what_if(memory).live
    assert yours.input_tokens == sum(r.counted_input_tokens for r in ledger)
    assert yours.summaries_written == sum(r.output_tokens for r in ledger if r.kind == "summary")
    # Today's window replayed over the whole conversation folds earlier than what was sent: a replay is not the ledger.
    sizes = replay_sizes(memory)
    counts = memory.conversation.finished_counts
    again = replay(counts, "window", sizes, budget=local_budget(memory), max_recent_turns=1, real_folds=real_folds(memory))
    assert replay_column(again).input_tokens != yours.input_tokens
