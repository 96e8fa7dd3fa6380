"""A store cap refuses a turn before it is sent, with room for the turn at its largest (issue 28, item 1).

The break: a store a few bytes under ``MEMORA_MAX_STORE_MB`` let saved conversations and a new student's
first message be sent, billed and shown, then not saved. These tests fill real stores (SQLite and
PostgreSQL) to 170 bytes under their cap, as the issue's scripted student did, and check that nothing is
sent, that the message comes back, and that a turn's real growth never passes the bound it was admitted on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.app.page.conversation import shared_store
from memora.app.page.state import new_memory
from memora.app.settings import Settings
from memora.classroom.store import StoreCaps, new_conversation_id
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_owner
from memora.classroom.store.room import BOOKINGS, BYTES_PER_TOKEN, escaped, turn_growth
from memora.classroom.store.saved import dumps_saved
from memora.memory import ShortTermMemory
from memora.text.tokens import o200k_base
from tests.support.app import APP, CLASSROOM_KEY, finish, send, texts
from tests.support.fakes import GatedBackend, ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import OWNER, STORE_KINDS, make_store, write_raw

pytestmark = pytest.mark.usefixtures("no_secrets")

UNDER_CAP = 170
"""How far under its cap the issue's scripted student left the store."""


@pytest.fixture(autouse=True)
def fresh_store_cache():
    shared_store.clear()
    yield
    shared_store.clear()


def stored_total(store) -> int:
    if hasattr(store, "db"):
        return store.db.run(lambda c: c.execute("SELECT COALESCE(SUM(size), 0) FROM memora_conversations").fetchone()[0])
    with store._lock:
        return store._connect().execute("SELECT COALESCE(SUM(size), 0) FROM conversations").fetchone()[0]


def fill_to(store, total: int) -> None:
    """Another browser's conversation, sized so that the store holds exactly ``total`` bytes."""
    write_raw(store, new_conversation_id(), "x" * (total - stored_total(store)), owner=new_owner())
    assert stored_total(store) == total


# -- the bound -------------------------------------------------------------------------------------------


def test_bytes_per_token_is_the_costliest_o200k_base_token_as_saved_json():
    encoding = o200k_base()
    costliest = 0
    for token in range(encoding.n_vocab):
        try:
            raw = encoding.decode_single_token_bytes(token)
        except KeyError:
            continue
        # Byte by byte: a token may hold part of a UTF-8 character, which takes its own bytes once joined.
        costliest = max(costliest, sum(escaped(chr(b)) if b < 0x80 else 1 for b in raw))
    assert costliest == BYTES_PER_TOKEN


def test_a_turn_never_grows_the_saved_conversation_past_its_bound():
    """Replies at the reply cap of the costliest tokens, messages full of escapes, a fold on every turn."""
    cap = 12
    backend = ScriptedBackend(reply_text=lambda request: " " * BYTES_PER_TOKEN * cap)
    memory = ShortTermMemory(backend, max_recent_turns=1, max_input_tokens=400, max_reply_tokens=cap, max_summary_tokens=40)
    messages = ['"Quoted" \\ back\\slashes\n\t\x01 and 中文 ' * 4, "Short.", "Ünïcödé " * 20, "\x00\x1f" * 30]
    folded = 0
    for message in messages * 2:
        before = len(dumps_saved(memory, "en").encode())
        bound = turn_growth(memory, message)
        chat(memory, message)
        memory.prefold()
        grown = len(dumps_saved(memory, "en").encode()) - before
        assert 0 < grown <= bound, (message[:20], grown, bound)
        folded = len(memory.conversation.versions)
    assert folded >= 3, "the turns folded, so the bound's summaries were exercised"


# -- the store refuses before the turn is sent, on both stores --------------------------------------------------------


def keeper_with(store, *texts: str) -> ConversationKeeper:
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    chat(memory, *texts)
    return keeper


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_store_just_under_its_cap_refuses_the_next_turn_of_every_conversation_new_or_saved(kind, tmp_path):
    store = make_store(kind, tmp_path, StoreCaps(store_bytes=400_000))
    try:
        saved = keeper_with(store, "Hello.")
        assert saved.saved
        new = ConversationKeeper(store, owner=new_owner())
        new.attach(ShortTermMemory(ScriptedBackend()))
        fill_to(store, 400_000 - UNDER_CAP)
        assert saved.room("One more?").cap == "store"
        assert new.room("My first message.").cap == "store"
        assert (saved.refusal, new.refusal) == (None, None), "nothing was refused yet: nothing was saved, nor sent"
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_store_with_room_for_one_turn_admits_one_turn_at_a_time(kind, tmp_path):
    store = make_store(kind, tmp_path, StoreCaps(store_bytes=400_000))
    try:
        first, second = keeper_with(store, "Hello."), keeper_with(store, "Hi.")
        growth = first.size + turn_growth(first.memory, "Next.") - first.stored_bytes
        fill_to(store, 400_000 - growth - growth // 2)
        assert first.room("Next.") is None, "room for one turn at its largest"
        assert second.room("Next.").cap == "store", "the first turn's booking holds its bytes"
        first.release_room()
        assert second.room("Next.") is None
        second.release_room()
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_conversation_near_its_own_cap_is_refused_its_next_turn_before_it_is_sent(kind, tmp_path):
    store = make_store(kind, tmp_path)
    try:
        keeper = keeper_with(store, "Hello.")
        assert keeper.saved
        largest = keeper.size + turn_growth(keeper.memory, "Next.")
        store.caps = StoreCaps(conversation_bytes=keeper.size + 1_000)
        assert keeper.room("Hi.").cap == "conversation", "the bound holds the reply at its cap, not only the message"
        store.caps = StoreCaps(conversation_bytes=largest - 1)
        assert keeper.room("Next.").cap == "conversation"
        assert BOOKINGS.reserved(store, None) == 0, "a refused turn books nothing"
        store.caps = StoreCaps(conversation_bytes=largest)
        assert keeper.room("Next.") is None
        keeper.release_room()
    finally:
        store.close()


# -- the page: nothing billed, the message back, no "kept as last saved" for what was never saved --------------------


def open_page(data: Path, backend: ScriptedBackend, max_store_mb: int = 1) -> AppTest:
    settings = Settings(
        backend="openai", model="gpt-4.1-mini", api_key=CLASSROOM_KEY, max_reply_tokens=100, data_dir=str(data), max_store_mb=max_store_mb
    )
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.SETTINGS] = settings
    at.session_state[keys.MEMORY] = new_memory(settings, backend)
    return finish(at.run())


def fill_file(data: Path, total: int) -> None:
    path = data / "conversations.sqlite3"
    with sqlite3.connect(path) as db:
        have = db.execute("SELECT COALESCE(SUM(size), 0) FROM conversations").fetchone()[0]
        filler = "x" * (total - have)
        db.execute(
            "INSERT INTO conversations (id, version, payload, updated_at, owner, created_at, size) VALUES (?, 1, ?, 0, ?, 0, ?)",
            (new_conversation_id(), filler, new_owner(), len(filler)),
        )
    db.close()


def test_a_nearly_full_store_bills_no_turn_it_cannot_keep_for_a_saved_or_a_new_student(tmp_path):
    saved_backend, new_backend = ScriptedBackend(), ScriptedBackend()
    saved_student = open_page(tmp_path, saved_backend)
    send(saved_student, "My name is Ana.")
    assert saved_student.session_state[keys.CONVERSATION].saved
    new_student = open_page(tmp_path, new_backend)
    fill_file(tmp_path, 1024 * 1024 - UNDER_CAP)

    advice = {id(saved_student): "export the conversation to keep it", id(new_student): "too full (1.0 MB) to keep a new conversation"}
    for page, backend in ((saved_student, saved_backend), (new_student, new_backend)):
        sent = len(backend.replies)
        page.chat_input[0].set_value("Is there room for me?").run()
        finish(page)
        assert len(backend.replies) == sent, "refused before it was sent: nothing billed"
        shown = texts(page)
        assert "too full" in shown and "nothing was billed" in shown and advice[id(page)] in shown
        assert page.chat_input[0].value == "Is there room for me?", "the message is back in the box"
        assert "kept as last saved" not in shown
    assert saved_student.session_state[keys.MEMORY].history[-1].content == "reply 1"
    assert not new_student.session_state[keys.MEMORY].history


def test_a_new_conversation_whose_first_save_is_refused_is_not_called_kept_as_last_saved(tmp_path):
    """Another process fills the store while the first reply is written (its bookings are not this process's):
    the save is refused, and the page says the conversation is not saved, not "kept as last saved"."""
    backend = GatedBackend()
    student = open_page(tmp_path, backend)
    student.chat_input[0].set_value("My first message.").run()
    assert backend.streaming.wait(30)
    fill_file(tmp_path, 1024 * 1024 - UNDER_CAP)
    backend.release()
    finish(student)
    keeper = student.session_state[keys.CONVERSATION]
    assert keeper.refusal.cap == "store" and not keeper.saved
    shown = texts(student)
    assert "could not be saved: a reload will not bring it back" in shown and "kept as last saved" not in shown
    assert BOOKINGS.reserved(keeper.store, None) == 0, "the turn's booking was given back when its job ended"
