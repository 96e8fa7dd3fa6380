"""What if says why, in plain words: a memory's summaries are requests too, so it pays only from some turn on."""

from __future__ import annotations

from itertools import accumulate

import pytest

from memora.app.page import state as keys
from memora.teaching.replay import FULL_HISTORY
from memora.teaching.what_if import payoffs, what_if
from tests.support.app import expander, new_app, send
from tests.support.lesson import B1, FILLER

pytestmark = pytest.mark.usefixtures("no_secrets")


def _notes(at):
    at.session_state[keys.WHAT_IF_PANEL_OPEN] = True
    at.run()
    return [c.value for c in expander(at, "What if: the other policy, or the full history").caption if c.value.startswith("Why:")]


def test_a_short_conversation_says_the_window_does_not_pay_and_a_longer_one_names_the_turn_it_starts_to():
    at = new_app()
    for text in [B1, *FILLER]:
        send(at, text)
    memory = at.session_state[keys.MEMORY]
    comparison = what_if(memory)
    window = comparison.outcome("window").replay
    full = comparison.outcome(FULL_HISTORY).replay
    # Six turns: the window's summary requests cost more than the shorter requests saved.
    assert sum(window.tokens_per_turn()) > sum(full.tokens_per_turn())
    notes = _notes(at)
    assert len(notes) == len(payoffs(comparison)) == 2
    assert "it does not pay in this conversation" in notes[0]
    assert f"the Window policy's total, summaries included, is {sum(window.tokens_per_turn()):,} tokens" in notes[0]

    for text in [*FILLER, *FILLER]:
        send(at, text)
    comparison = what_if(memory)
    window = comparison.outcome("window").replay
    full = comparison.outcome(FULL_HISTORY).replay
    running = list(zip(accumulate(window.tokens_per_turn()), accumulate(full.tokens_per_turn()), strict=True))
    first = next(turn for turn, (mine, theirs) in enumerate(running, start=1) if mine < theirs)
    note = _notes(at)[0]
    assert f"drops below the full history's at turn {first}: {running[first - 1][0]:,} against {running[first - 1][1]:,}" in note
