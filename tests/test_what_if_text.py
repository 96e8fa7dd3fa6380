"""What if says why, in plain words and in its table's figures: a memory's summaries are requests too, so it pays only
from some turn on, and a memory that has folded nothing yet says so instead of that its summaries cost 0 tokens."""

from __future__ import annotations

from itertools import accumulate

import pytest

from memora.app.page import state as keys
from memora.teaching.replay import FULL_HISTORY
from memora.teaching.what_if import payoffs, what_if
from tests.support.app import expander, new_app, send
from tests.support.lesson import B1, FILLER

pytestmark = pytest.mark.usefixtures("no_secrets")

WHAT_IF = "What if: the other policy, or the full history"


def _opened(at):
    at.session_state[keys.WHAT_IF_PANEL_OPEN] = True
    at.run()
    return expander(at, WHAT_IF)


def _notes(panel):
    return [c.value for c in panel.caption if c.value.startswith("Why:")]


def test_a_short_conversation_says_the_window_does_not_pay_and_a_longer_one_names_the_turn_from_which_it_does():
    at = new_app()
    for text in [B1, *FILLER]:
        send(at, text)
    memory = at.session_state[keys.MEMORY]
    comparison = what_if(memory)
    yours = comparison.live
    assert yours.summary_requests and yours.total_tokens > comparison.column(FULL_HISTORY).total_tokens
    panel = _opened(at)
    table = panel.table[0].value
    notes = _notes(panel)
    assert len(notes) == len(payoffs(comparison)) == 2
    # Every figure of the sentence is a cell of the table: the summaries' rows added, the two totals.
    column = "Window (yours: the ledger)"
    summaries = sum(int(table.loc[row, column].replace(",", "")) for row in ("Counted input, summaries", "Summary output"))
    total, full = table.loc["Total tokens", column], table.loc["Total tokens", "Full history"]
    assert f"each summary is a request of its own ({summaries:,} tokens in all here" in notes[0]
    assert f"the Window policy's total, summaries included, is {total} tokens against {full} for the full history" in notes[0]
    assert "it does not pay in this conversation" in notes[0]

    for text in [*FILLER, *FILLER]:
        send(at, text)
    comparison = what_if(memory)
    yours, everything = comparison.live, comparison.column(FULL_HISTORY)
    running = list(zip(accumulate(yours.tokens_per_turn), accumulate(everything.tokens_per_turn), strict=True))
    assert running[-1] == (yours.total_tokens, everything.total_tokens), "the running totals end at the table's totals"
    below = [mine < theirs for mine, theirs in running]
    since = len(below) - below[::-1].index(False) + 1  # the turn after the last one not below
    assert all(below[since - 1 :]) and since <= comparison.turns
    panel = _opened(at)
    table = panel.table[0].value
    note = _notes(panel)[0]
    total, full = table.loc["Total tokens", column], table.loc["Total tokens", "Full history"]
    assert (
        f"stays below the full history's from turn {since} on: over these {comparison.turns} turns, {total} against {full} tokens" in note
    )


def test_a_policy_that_has_folded_nothing_yet_says_it_sent_what_the_full_history_sends_not_that_it_costs_0_tokens():
    at = new_app()
    send(at, B1)
    notes = _notes(_opened(at))
    assert len(notes) == 2
    for note, name in zip(notes, ("Window", "Watermark"), strict=True):
        assert note.startswith(f"Why: the {name} policy has folded nothing yet")
        assert "0 tokens in all" not in note and "does not pay" not in note
