"""A store cap refuses a turn before it is sent, with room for the turn at its largest (issue 28, item 1).

The break: a store a few bytes under ``MEMORA_MAX_STORE_MB`` let saved conversations and a new student's
first message be sent, billed and shown, then not saved. These tests fill real stores (SQLite and
PostgreSQL) to 170 bytes under their cap, as the issue's scripted student did, and check that nothing is
sent, that the message comes back, and that a turn's real growth never passes the bound it was admitted on.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.app.page.conversation import shared_store
from memora.app.page.state import new_memory
from memora.app.settings import Settings
from memora.classroom.store import StoreCaps, new_conversation_id
from memora.classroom.store.base import RoomRequest, StoreUnreachable
from memora.classroom.store.holders import dead_holders, new_holder
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_owner
from memora.classroom.store.reopen import reopen, save_import
from memora.classroom.store.room import BYTES_PER_TOKEN, escaped, turn_growth
from memora.classroom.store.saved import dumps_saved
from memora.memory import ShortTermMemory
from memora.text.tokens import o200k_base
from tests.support import room
from tests.support.app import APP, CLASSROOM_KEY, finish, send, texts
from tests.support.budget import isolated_postgres_url
from tests.support.fakes import GatedBackend, ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import OWNER, STORE_KINDS, make_store, write_raw


def booked(store) -> int:
    """The bytes booked in the store for turns still running, on any process: SQL on the real table."""
    if hasattr(store, "db"):
        return store.db.run(lambda c: c.execute("SELECT COALESCE(SUM(size), 0) FROM memora_room_bookings").fetchone()[0])
    with store._lock:
        return store._connect().execute("SELECT COALESCE(SUM(size), 0) FROM room_bookings").fetchone()[0]


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
    saved = json.loads(dumps_saved(memory, "en"))
    assert all(row["parts"] is not None for row in saved["transcript"]["ledger"]), "each row's parts are in the bound"


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
        assert booked(store) == 0, "a refused turn books nothing"
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
    assert booked(keeper.store) == 0, "the turn's booking was given back when its job ended"


# -- across processes and tabs (issue 39): the room is booked in the store itself ---------------------------------------


def wait_for(path: Path, process: subprocess.Popen) -> None:
    """Until the other process wrote ``path`` (or ended): a bound on a hang, not a measure of speed."""
    deadline = time.monotonic() + room.GO_WAIT_S
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists(), "the second process did not get ready"


def test_two_processes_on_one_postgresql_store_with_room_for_one_turn_bill_only_what_is_saved(postgres_url, tmp_path):
    """The issue's break: the store had room for one turn; two students, one per process, sent at the same moment:
    2 replies billed, 1 stored. Now whichever books second sees the first one's booking in the store. Each asks for
    room before either sends (``tests.support.room.send``): a turn that ended before the other asked was no race."""
    from memora.classroom.store.postgres import PostgresStore

    url = isolated_postgres_url(postgres_url)
    store = PostgresStore(url, StoreCaps(store_bytes=room.STORE_BYTES))
    ready, go, out = tmp_path / "ready", tmp_path / "go", tmp_path / "out"
    root = Path(__file__).resolve().parents[1]
    other = subprocess.Popen([sys.executable, "-m", "tests.support.room", url, str(ready), str(go), str(out)], cwd=root)
    try:
        keeper, backend = room.student(store)
        wait_for(ready, other)
        growth = max(room.next_turn_growth(keeper), int(ready.read_text()))
        fill_to(store, room.STORE_BYTES - growth - growth // 2)
        go.touch()
        mine = room.send(keeper, backend, Path(f"{go}.asked"), Path(f"{out}.asked"))
        assert other.wait(timeout=120) == 0
    finally:
        if other.poll() is None:
            other.kill()
        store.close()
    outcomes = [mine, json.loads(out.read_text())]
    assert sum(o["admitted"] for o in outcomes) == 1, outcomes
    assert [o["billed"] for o in outcomes if not o["admitted"]] == [1], "the refused student billed only the first turn"
    admitted = next(o for o in outcomes if o["admitted"])
    assert admitted["billed"] == 2 and not admitted["unsaved"] and admitted["version"] >= 2, "the billed reply is saved"


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_turn_that_must_copy_the_conversation_is_refused_before_it_is_sent_at_the_hourly_cap(kind, tmp_path):
    """The issue's second break: two tabs of one conversation, the browser at its hourly cap of new conversations.
    The second tab's turn would fork into a copy the cap refuses: it is refused before anything is sent, whether the
    other tab saved first or is sending at the same moment; with room under the cap it forks as before. A tab with
    nothing unsaved whose conversation the other saved first is ``behind`` instead: it books nothing, and the page
    opens the saved version rather than copying it."""
    store = make_store(kind, tmp_path, StoreCaps(new_per_hour=2))
    try:
        tab_a = keeper_with(store, "Hello.")
        opened = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        tab_b = opened.keeper
        tab_b.attach(b_memory := opened.memory)
        sent = len(b_memory.server.backend.billed)

        assert tab_a.room("A sends now.") is None, "tab A's turn is booked on the conversation"
        refused = tab_b.room("B sends at the same moment.", catch_up=False)  # a copy: as when the wait for A ran out
        assert refused is None and tab_b.would_fork, "with room under the hourly cap the copy is allowed"
        tab_b.release_room()

        write_raw(store, new_conversation_id(), "{}")  # a second conversation this hour: the browser is at its cap
        refused = tab_b.room("B sends at the same moment.", catch_up=False)
        assert refused.cap == "browser" and tab_b.would_fork, "a copy the cap refuses is refused before it is sent"
        chat(tab_a.memory, "A sends now.")
        tab_a.release_room()
        assert tab_a.fork is None and tab_a.version >= 2

        assert tab_b.room("B, after A saved.") is None and tab_b.behind, "B has nothing unsaved: it opens A's version"
        refused = tab_b.room("B, after A saved.", catch_up=False)
        assert refused.cap == "browser" and tab_b.would_fork, "as a copy, B's turn is still one the cap refuses"
        assert len(b_memory.server.backend.billed) == sent, "nothing of B's was sent"
        assert tab_b.refusal is None and tab_b.fork is None
    finally:
        store.close()


def test_a_turn_admitted_as_a_copy_saves_the_copy_and_leaves_the_other_tabs_conversation_alone(tmp_path):
    store = make_store("sqlite", tmp_path)
    try:
        tab_a = keeper_with(store, "Hello.")
        opened = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        tab_b = opened.keeper
        tab_b.attach(opened.memory)
        assert tab_a.room("A.") is None and tab_b.room("B.", catch_up=False) is None and tab_b.would_fork
        chat(opened.memory, "B.")  # B finishes first: it saves its copy, not over A's conversation
        chat(tab_a.memory, "A.")
        assert tab_b.fork.from_id == tab_a.conversation_id and tab_a.fork is None, "A saved its own turn, B its copy"
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_an_import_takes_room_so_it_cannot_take_the_bytes_a_running_turn_booked(kind, tmp_path):
    """The issue's untried case: an import landing while a classmate's reply runs. The import books its size
    against the running turn's booking, as a turn does; once that turn has ended, the same import fits."""
    store = make_store(kind, tmp_path, StoreCaps(store_bytes=400_000))
    try:
        running = keeper_with(store, "Hello.")
        growth = running.size + turn_growth(running.memory, "Next.") - running.stored_bytes
        importer = keeper_with(store, "Mine.")
        imported = ShortTermMemory(ScriptedBackend(), max_recent_turns=1)
        chat(imported, "From a file.")
        size = len(dumps_saved(imported, "en").encode())
        fill_to(store, 400_000 - growth - size // 2)
        assert running.room("Next.") is None, "the classmate's turn is admitted and booked"
        refused = save_import(importer, imported)
        assert refused.cap == "store" and importer.memory is not imported, "the import does not take the booked bytes"
        assert booked(store) == growth, "a refused import leaves only the running turn's booking"
        running.release_room()
        assert save_import(importer, imported) is None and importer.memory is imported
        assert booked(store) == 0, "the import gave its booking back once saved"
    finally:
        store.close()


def test_a_booking_the_store_could_not_drop_neither_holds_room_nor_forks_the_reloaded_tab(tmp_path, monkeypatch):
    """Found in Chromium (tests/test_browser_reload.py): the disk was full when a turn ended, so its booking stayed;
    the reloaded tab's next turn then looked like a second tab's and was saved as a copy. Now the store drops it at
    its next booking."""
    store = make_store("sqlite", tmp_path)
    tab = keeper_with(store, "Hello.")
    assert tab.room("Where do I live?") is None
    with monkeypatch.context() as disk:
        disk.setattr(store, "_connect", lambda: (_ for _ in ()).throw(sqlite3.OperationalError("database or disk is full")))
        tab.release_room()  # the turn ends while the disk is full: the store cannot drop the booking
    assert booked(store) > 0
    reloaded = reopen(store, tab.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
    reloaded.keeper.attach(reloaded.memory)
    assert reloaded.keeper.room("I like green tea.") is None and not reloaded.keeper.would_fork
    chat(reloaded.memory, "I like green tea.")
    assert reloaded.keeper.fork is None and reloaded.keeper.conversation_id == tab.conversation_id
    reloaded.keeper.release_room()
    assert booked(store) == 0, "the booking left by the full disk was dropped"
    store.close()


def test_a_booking_left_by_a_killed_process_of_this_machine_neither_holds_room_nor_forks_the_next_turn(tmp_path):
    """A process killed mid-reply (SIGKILL, out of memory) cannot give its booking back: it held the room, and made
    the conversation look busy, so the student's next turn on another process was saved as a copy, for the whole
    hour of the lease. The next booking on this machine sees that the booking's process has exited and drops it.
    A booking of a live process, or of another machine, holds until its lease. That is SQLite's rule, a file of one
    machine; PostgreSQL asks the holder's presence lock instead (tests/test_store_postgres.py)."""
    store = make_store("sqlite", tmp_path)
    try:
        tab = keeper_with(store, "Hello.")
        killed = subprocess.Popen([sys.executable, "-c", "pass"])
        killed.wait()
        machine = socket.gethostname()
        # In this order: a booking made after the killed process's would drop it already.
        left = {"another-machine:1:x": new_conversation_id(), f"{machine}:{killed.pid}:killed": tab.conversation_id}
        for holder, conversation_id in left.items():
            assert store.book(RoomRequest(holder, OWNER, conversation_id, 0, 0, 1000)).refusal is None
        assert booked(store) == 2000
        reopened = reopen(store, tab.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        reopened.keeper.attach(reopened.memory)
        assert reopened.keeper.room("Where was I?") is None and not reopened.keeper.would_fork, "not taken for a second tab"
        reopened.keeper.release_room()
        assert booked(store) == 1000, "the killed process's booking is gone; the other machine's holds until its lease"
        assert new_holder().startswith(f"{machine}:{os.getpid()}:"), "every booking is named by its machine and process"
        assert dead_holders([reopened.keeper.holder]) == [], "a live process's booking is kept"
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_tab_with_nothing_unsaved_waits_for_a_turn_running_elsewhere_and_goes_on_after_its_save(kind, tmp_path):
    """Tab B sends while tab A's reply (or a stopping process's) is being written on their conversation: B waits for
    A's save, then opens A's version rather than copying the conversation; if A's turn ends with nothing saved, B's
    turn goes on as the conversation's next one. No copy either way."""
    store = make_store(kind, tmp_path)
    try:
        tab_a = keeper_with(store, "Hello.")
        opened = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        tab_b = opened.keeper
        tab_b.attach(opened.memory)

        def a_ends(saved: bool) -> None:
            if saved:
                chat(tab_a.memory, "A writes a reply.")
            tab_a.release_room()

        for saves in (False, True):  # an ending with nothing saved first: then B still holds the latest version
            assert tab_a.room("A writes a reply.") is None, "A's turn is booked on the conversation"
            ends = threading.Timer(0.5, a_ends, args=(saves,))
            ends.start()
            assert tab_b.room("B sends meanwhile.") is None and not tab_b.would_fork
            ends.join()
            assert tab_b.behind is saves, "behind after A's save: the page opens A's version; else B goes on as it is"
            tab_b.release_room()
        assert stored_total(store) > 0 and tab_a.fork is None
    finally:
        store.close()


class Restarting:
    """A store (``inner``) whose ``book`` and ``running`` do not answer while PostgreSQL restarts: each call named in
    ``script`` raises StoreUnreachable, after running the step given for it (the stopping process's save landing, as
    the database comes back), and every later call is the inner store's. No clock: the calls alone set the order."""

    def __init__(self, inner, script: dict[tuple[str, int], object]) -> None:
        self.inner, self.script, self.calls = inner, script, {"book": 0, "running": 0, "load": 0}

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def _call(self, name: str, *args):
        self.calls[name] += 1
        if (name, self.calls[name]) in self.script:
            step = self.script[(name, self.calls[name])]
            if callable(step):
                step()
            raise StoreUnreachable("PostgreSQL: AdminShutdown, SQLSTATE 57P01; the server's log says where and why")
        return getattr(self.inner, name)(*args)

    def book(self, request):
        return self._call("book", request)

    def running(self, conversation_id, holder, owner=None):
        return self._call("running", conversation_id, holder, owner)

    def load(self, conversation_id, owner):
        return self._call("load", conversation_id, owner)


@pytest.mark.parametrize("fails", ["book", "running"])
def test_a_postgresql_restart_while_a_tab_sends_neither_forks_it_nor_loses_the_stopping_process_reply(fails, tmp_path):
    """Issue 44's campaign, PostgreSQL restarted mid-roll: 5 of 24 students forked. Tab B (a page back on another
    process) sends while A's reply (the stopping process's) is being written. The database does not answer B's
    booking (``book``), or B's question whether A's turn still runs while B waits (``running``); A's save lands as it
    comes back. Before, ``room`` took the failure for "the store is down", sent B's turn unbooked, and B's save, behind
    A's, made a copy without A's reply. Now B asks again until the store answers, then opens A's version."""
    inner = make_store("sqlite", tmp_path)
    try:
        tab_a = keeper_with(inner, "Hello.")
        store = Restarting(inner, {})
        opened = reopen(store, tab_a.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        tab_b = opened.keeper
        tab_b.attach(opened.memory)
        assert tab_a.room("A writes a reply.") is None, "A's turn is booked on the conversation"

        def a_saves() -> None:
            chat(tab_a.memory, "A writes a reply.")
            tab_a.release_room()

        # The database goes away at B's first call of that kind; A's save lands at the second, which still fails.
        store.script = {(fails, 1): None, (fails, 2): a_saves}
        assert tab_b.room("B sends meanwhile.") is None
        assert store.calls[fails] >= 3, "asked again until the store answered"
        assert tab_b.behind and not tab_b.would_fork, "B opens A's version, with A's reply, and sends on it"
        assert [m.content for m in reopen(inner, tab_a.conversation_id, opened.memory, owner=OWNER, locked=False).memory.history][-1] == (
            "reply 2"
        )
    finally:
        inner.close()


def test_a_page_back_during_a_first_reply_is_told_it_still_runs_though_postgresql_restarts_as_it_asks(tmp_path):
    """Issue 44's campaign again, after the fix above: 4 of 24 students still forked, each during the conversation's first
    reply, which ``room`` cannot weigh (no row yet); the page's own wait (``wait_for_finishing``) asks
    ``turn_running_elsewhere``, which took "no answer" for "no turn", so her message started the conversation beside
    the stopping process's first reply, whose save then came first. Now it asks again until the store answers."""
    inner = make_store("sqlite", tmp_path)
    try:
        tab_a = ConversationKeeper(inner, owner=OWNER)
        tab_a.attach(ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
        assert tab_a.room("A's first message.") is None, "A's first turn is booked under the id it will be saved as"
        store = Restarting(inner, {("running", 1): None, ("running", 2): None})
        page_back = ConversationKeeper(store, tab_a.conversation_id, 0, owner=OWNER)
        assert page_back.turn_running_elsewhere() is True and store.calls["running"] == 3
        chat(tab_a.memory, "A's first message.")
        tab_a.release_room()
        assert page_back.turn_running_elsewhere() is False, "once A's turn has ended, and saved"
    finally:
        inner.close()


def test_a_page_that_opens_while_postgresql_restarts_opens_her_conversation_not_a_second_one(tmp_path):
    """Before, a load that failed during the restart gave the page a new id, and her next message a second
    conversation beside hers; now the load is asked again until the store answers."""
    inner = make_store("sqlite", tmp_path)
    try:
        tab = keeper_with(inner, "Hello.")
        store = Restarting(inner, {("load", 1): None, ("load", 2): None})
        opened = reopen(store, tab.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
        assert opened.outcome == "restored" and opened.keeper.conversation_id == tab.conversation_id
        assert store.calls["load"] == 3
    finally:
        inner.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_turn_running_elsewhere_is_told_only_to_its_own_browser(kind, tmp_path):
    """A page asking about the id in its URL (``running`` with an owner) learns of that owner's live turn only: another
    browser holding the same link learns nothing of it. Without an owner, every live booking but the asker's counts."""
    store = make_store(kind, tmp_path)
    try:
        tab = keeper_with(store, "Hello.")
        cid = tab.conversation_id
        assert not store.running(cid, "", OWNER)
        assert tab.room("A writes a reply.") is None
        assert store.running(cid, "", OWNER) and store.running(cid, "")
        assert not store.running(cid, "", "another browser's owner hash")
        assert not store.running(cid, tab.holder, OWNER), "its own turn is not elsewhere"
        tab.release_room()
        assert not store.running(cid, "", OWNER)
    finally:
        store.close()


def test_a_postgresql_server_that_cannot_be_reached_is_unreachable_not_merely_failed():
    """What ``room`` asks again: a refused connection (nothing listens on port 1 here) is StoreUnreachable."""
    from memora.classroom.store.postgres_pool import PostgresPool

    pool = PostgresPool("postgresql://memora:secret@127.0.0.1:1/memora")
    with pytest.raises(StoreUnreachable) as raised:
        pool.run(lambda connection: connection.execute("SELECT 1"))
    assert "secret" not in str(raised.value)
    pool.close()
