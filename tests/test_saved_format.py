"""The saved format's one change (issues 36 and 39): tombstones, and the last request kept with the conversation.

A deleted or forgotten conversation never comes back from another tab or process: two keepers on one real store
stand for two tabs (or two processes: each keeper talks to the store only), the second one idle or mid-reply.
The last request's context comes back with the conversation, whole: what the page draws against the budget.
"""

from __future__ import annotations

import json

import pytest

from memora.classroom.store import Gone, new_conversation_id
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.reopen import reopen
from memora.classroom.store.saved import dumps_saved, parse_saved
from memora.classroom.transcript.format import committed_request, dumps_transcript, parse_transcript, restore_memory
from memora.memory import ShortTermMemory
from memora.memory.values import PreparedContext
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import OWNER, STORE_KINDS, make_store, owned

PHONE = "0912 345 678"


@pytest.fixture(params=STORE_KINDS)
def store(request, tmp_path):
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


def two_tabs(store) -> tuple[ConversationKeeper, ConversationKeeper]:
    """Tab A saved a conversation with a phone number; tab B opened it from the store, as a reload or a process would."""
    tab_a = ConversationKeeper(store, owner=OWNER)
    tab_a.attach(memory := ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    chat(memory, f"My phone is {PHONE}.", "I live in Taipei.", "I teach English.")
    opened = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
    assert opened.outcome == "restored"
    opened.keeper.attach(opened.memory)
    return tab_a, opened.keeper


# -- tombstones --------------------------------------------------------------------------------------------------


def test_after_delete_in_one_tab_the_other_tabs_next_message_is_refused_before_it_is_sent(store):
    tab_a, tab_b = two_tabs(store)
    tab_a.delete()
    gone = tab_b.room("Do you remember my phone?")
    assert isinstance(gone, Gone) and gone.what == "conversation"
    assert owned(store) == 0


def test_after_delete_a_reply_committing_in_the_other_tab_saves_nothing_under_any_id(store):
    """Tab B was admitted and its reply was being written when tab A deleted: its commit neither writes the old id
    back nor forks it under a new one (the issue's 6 of 6 runs)."""
    tab_a, tab_b = two_tabs(store)
    assert tab_b.room("One more thing.") is None
    deleted = tab_a.conversation_id
    tab_a.delete()
    chat(tab_b.memory, "One more thing.")
    assert isinstance(tab_b.gone, Gone) and tab_b.fork is None and not tab_b.dirty
    assert store.load(deleted, OWNER) is None and owned(store) == 0, "nothing of it was saved anywhere"
    chat(tab_b.memory, "And another.")
    assert owned(store) == 0, "nor at any later save"


def test_after_forget_no_tab_of_the_old_browser_saves_anything_again(store):
    tab_a, tab_b = two_tabs(store)
    assert tab_a.forget_browser() == 1
    gone = tab_b.room("Still there?")
    assert isinstance(gone, Gone) and gone.what == "browser"
    chat(tab_b.memory, "Still there?")  # a crafted send past the refusal, or a reply already under way
    new_tab = ConversationKeeper(store, owner=OWNER)
    new_tab.attach(fresh := ShortTermMemory(ScriptedBackend()))
    assert isinstance(new_tab.room("A new conversation under the old cookie."), Gone)
    chat(fresh, "A new conversation under the old cookie.")
    assert owned(store) == 0, "the old cookie opens nothing, and nothing was saved under it"


def test_delete_never_buries_another_browsers_conversation(store):
    theirs = ConversationKeeper(store, owner=OWNER)
    theirs.attach(memory := ShortTermMemory(ScriptedBackend()))
    chat(memory, "Mine.")
    stranger = ConversationKeeper(store, theirs.conversation_id, 1)
    stranger.delete()
    chat(memory, "Still mine.")
    assert theirs.gone is None and store.load(theirs.conversation_id, OWNER).version == 2


def test_the_idle_sweep_removes_old_tombstones(tmp_path):
    from datetime import timedelta

    store = make_store("sqlite", tmp_path)
    cid = new_conversation_id()
    store.save(cid, "{}", 0, OWNER)
    store.delete(cid, OWNER)
    with store._lock:
        assert store._connect().execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] == 1
    store.delete_idle(timedelta(days=-1))
    with store._lock:
        assert store._connect().execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] == 0
    store.close()


# -- the last request ------------------------------------------------------------------------------------------


def assert_same_request(back: PreparedContext | None, sent: PreparedContext) -> None:
    assert back is not None
    assert back == sent, "instructions, messages, sources, each message's tokens and the counts, as sent"


def test_the_last_request_comes_back_with_the_conversation_whole(store):
    tab_a, _ = two_tabs(store)
    sent = tab_a.memory.last_prepared
    assert set(sent.sources) >= {"summary", "window", "current"}, "a request with a summary, a window and its message"
    reloaded = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    assert_same_request(reloaded.memory.last_prepared, sent)
    assert reloaded.memory.last_context == tab_a.memory.last_context
    record = [r for r in reloaded.memory.ledger if r.kind == "reply"][-1]
    assert (record.counted_input_tokens, record.input_budget) == (sent.input_tokens, tab_a.memory.max_input_tokens)


def test_a_save_made_while_the_next_turn_runs_keeps_the_last_finished_request(store):
    """A fold saves mid-turn, when the memory's last request is the one being prepared; a failed turn leaves its
    request in the memory. Either way the store keeps the request of the turn that finished."""
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    chat(memory, "First.", "Second.")
    finished = memory.last_prepared
    with pytest.raises(RuntimeError), memory.turn("Third, which fails.") as turn:
        for _ in turn.stream():
            raise RuntimeError("the reply broke off")
    assert memory.last_prepared is not finished
    keeper.language = "zh-TW"
    keeper.save(memory)
    back = reopen(store, keeper.conversation_id, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    assert_same_request(back.memory.last_prepared, finished)


def test_a_conversation_saved_before_requests_were_kept_still_opens(store):
    memory = ShortTermMemory(ScriptedBackend())
    chat(memory, "Hello.")
    document = json.loads(dumps_saved(memory, "en"))
    del document["transcript"]["last_request"]
    store.save(cid := new_conversation_id(), json.dumps(document), 0, OWNER)
    opened = reopen(store, cid, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    assert opened.outcome == "restored" and opened.memory.history == memory.history
    assert opened.memory.last_prepared is None and opened.memory.last_context == memory.last_context
    assert committed_request(opened.memory) is None


def test_an_export_carries_the_last_request_and_a_file_whose_figures_do_not_match_is_refused():
    memory = ShortTermMemory(ScriptedBackend())
    chat(memory, "Hello.", "How are you?")
    raw = dumps_transcript(memory)
    assert restore_memory(parse_transcript(raw), ScriptedBackend()).last_prepared == memory.last_prepared
    document = json.loads(raw)
    document["last_request"]["sources"].pop()
    with pytest.raises(ValueError, match="sources has"):
        parse_transcript(json.dumps(document))
    document = json.loads(raw)
    document["last_request"]["sources"][-1] = "window"
    with pytest.raises(ValueError, match="current message"):
        parse_transcript(json.dumps(document))


def test_the_saved_payload_still_reads_as_version_1():
    memory = ShortTermMemory(ScriptedBackend())
    chat(memory, "Hello.")
    saved = parse_saved(dumps_saved(memory, "en"))
    assert saved.transcript.last_request == memory.last_prepared
