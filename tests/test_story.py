"""One story of when a fold happened: the chat, the turn box, Status, the summary panel and the REPL tell the same.

The page folds ahead: after a reply it folds what the next turn is certain to fold. Such a fold serves the next turn,
so its one label is "after reply N, for turn N+1", and it counts in that turn's box, not in a later one's and not
nowhere. A conversation is driven through the page, then every view of it is read and compared.
"""

from __future__ import annotations

import re

import pytest

from memora.app.page import state as keys
from memora.app.repl import format_stats, run_command
from memora.memory import ShortTermMemory
from memora.teaching.story import story
from tests.support.app import expander, new_app, number_line, open_turn_boxes, send, status_figures
from tests.support.lesson import B1, FILLER
from tests.support.memory import chat

pytestmark = pytest.mark.usefixtures("no_secrets")


def _figure(table: str, label: str) -> int:
    row = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
    return int(row.rsplit("|", 2)[1].strip().replace(",", ""))


def test_every_view_of_a_conversation_agrees_on_its_folds_and_its_total():
    at = new_app()
    for text in [B1, *FILLER]:
        send(at, text)
    memory: ShortTermMemory = at.session_state[keys.MEMORY]
    told = story(memory)
    assert len(told.folds) == len(memory.conversation.versions) >= 2
    assert told.total == memory.session_total_tokens == sum(r.total_tokens for r in memory.ledger)
    # The page folded ahead: each fold came after a reply and served the next turn.
    assert all(fold.ahead and fold.serves == fold.after_reply + 1 for fold in told.folds)
    first = told.folds[0]
    assert (first.after_reply, first.serves, first.span) == (4, 5, (0, 2)), "the B1 turn left the 3-turn window"

    # The chat: each fold is its own event, right after the reply it followed, with the summary panel's numbers.
    events = [alert.value for alert in at.info if alert.value.startswith("Summary v")]
    assert len(events) == len(told.folds)
    assert events[0].startswith("Summary v1, after reply 4, for turn 5: messages 1–2 folded in, +")
    assert f"Session total: {told.folds[-1].session_total:,} tokens." in events[-1]
    # Every fold says why, not only the newest: the window of 3 turns pushed each pair out.
    assert all(", because the recent window holds 3 turns." in event for event in events), events
    assert told.folds[-1].session_total == told.total, "the last fold came after the last reply"
    numbers = [number_line(m).removeprefix(":gray[:small[").split("]")[0].split(" ")[0] for m in at.chat_message]
    assert numbers == [f"#{n}" for n in range(1, len(memory.history) + 1)]

    # The turn box of the turn each fold served counts it; the other boxes count none. A box draws only when opened.
    open_turn_boxes(at, *(account.turn for account in told.turns))
    for account in told.turns:
        table = expander(at, f"Turn {account.turn}: tokens and context").markdown[0].value
        served = [fold for fold in told.folds if fold.serves == account.turn]
        assert _figure(table, "Messages newly summarized") == sum(fold.count for fold in served)
        assert _figure(table, "Summary update tokens") == sum(fold.tokens for fold in served)
        assert _figure(table, "Session total tokens") == account.session_total
        # And the REPL's block for that turn says the same.
        block = format_stats(account, offline=True)
        assert f"Newly summarized messages: {sum(fold.count for fold in served)}" in block
        assert f"Session total tokens: {account.session_total}" in block
    assert _figure(expander(at, "Turn 5: tokens and context").markdown[0].value, "Messages newly summarized") == 2

    # The summary panel labels each version with the same words.
    at.session_state[keys.SUMMARY_PANEL_OPEN] = True
    at.run()
    versions = [c.value for c in expander(at, "Conversation summary").caption if c.value.startswith("Version ")]
    assert f"Version 1, after reply 4, for turn 5: folded messages 1–2 (2 messages), {first.tokens} tokens" in versions

    # Status and the REPL's status and usage: the same total, the same folds.
    assert status_figures(at)["Session total tokens"] == f"{told.total:,}"
    status = run_command(memory, "status")
    assert f"Session total tokens: {told.total}" in status and f"Folds: {len(told.folds)}" in status
    assert "Last fold: Summary v" in status and f"after reply {told.folds[-1].after_reply}" in status
    usage = run_command(memory, "usage")
    labels = re.findall(r"summary .* (v\d+ after reply \d+, for turn \d+)$", usage, flags=re.M)
    assert labels == [f"v{f.version} after reply {f.after_reply}, for turn {f.serves}" for f in told.folds]


def test_a_fold_inside_a_turn_serves_that_turn_and_follows_its_message(backend):
    """Without the fold ahead (the article's own loop), the turn folds before its reply: after reply N-1, for turn N."""
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "one", "two", "three")
    told = story(memory)
    fold = told.folds[0]
    assert (fold.ahead, fold.after_reply, fold.serves, fold.span) == (False, 2, 3, (0, 2))
    assert told.turn(3).folds == (fold,) and told.turn(3).newly_summarized == 2 == memory.ledger[-1].newly_summarized
    assert told.turn(3).summary_tokens == memory.ledger[-1].summary_tokens == fold.tokens
    assert told.total == memory.session_total_tokens


def test_a_saved_conversation_keeps_why_each_fold_happened(backend):
    from memora.classroom.transcript.format import dumps_transcript, parse_transcript, restore_memory

    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "one", "two", "three", "four")
    assert [v.reason for v in memory.conversation.versions] == ["window", "window"]
    again = restore_memory(parse_transcript(dumps_transcript(memory)), backend)
    assert again.conversation.versions == memory.conversation.versions
    assert [v.reason for v in again.conversation.versions] == ["window", "window"]
