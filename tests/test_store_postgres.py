"""What PostgreSQL decides for a class on several processes (issue 44): bounded connections, deletions that win their
race, bookings judged by their holder's presence lock, and a conversation that a rolling restart never splits, each
interleaving driven step by step on the real database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from memora.classroom.store import Gone, new_conversation_id
from memora.classroom.store import keeper as keeper_module
from memora.classroom.store.base import RoomRequest
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.postgres import CONVERSATION_LOCK, PostgresStore
from memora.classroom.store.postgres_pool import POOL_SIZE
from memora.classroom.store.presence import PRESENCE_LOCK, shared_presence
from memora.classroom.store.reopen import carry_choices, reopen
from memora.classroom.store.saved import parse_saved
from memora.memory import ShortTermMemory
from tests.support.budget import isolated_postgres_url, outage_cluster, pg_ctlcluster
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import OWNER, empty_postgres_store

WAIT_S = 30.0
"""A bound on a wait for the database to reach a state (a lock waited for, a backend gone): never a measure of speed."""


def sql(store: PostgresStore, query: str, params: tuple = ()) -> list[tuple]:
    return store.db.run(lambda c: c.execute(query, params).fetchall())


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"still not {what} after {WAIT_S:.0f} s"
        time.sleep(0.05)


# -- bounded connections (finding 5) --------------------------------------------------------------------------------


def test_forty_cleared_caches_leave_the_connections_at_the_pool_size(postgres_url):
    """A ``clear_cache`` message, which any browser may send, empties ``st.cache_resource`` (Streamlit's
    ``AppSession._handle_clear_cache_request``). 40 tabs each clearing it before their session made the store again
    made 41 connections; the store and the ledger now borrow from the process's pool, whatever the cache holds."""
    import streamlit as st

    from memora.app.page.conversation import shared_store
    from memora.classroom.postgres_ledger import PostgresServerLedger

    url = isolated_postgres_url(postgres_url)  # tables of its own: the pool is this URL's alone
    stores, failures, sessions = [], [], []

    def session(n: int) -> None:  # one tab's first run: open the store, save, reload, book a turn, read the budget
        try:
            store, _sweep = shared_store(url, 30)
            stores.append(store)
            cid = new_conversation_id()
            store.save(cid, f"tab {n}", 0, OWNER)
            assert store.load(cid, OWNER).payload == f"tab {n}"
            assert store.book(RoomRequest(f"tab {n}", OWNER, cid, 1, 6, 60)).refusal is None
            store.release(f"tab {n}")
            PostgresServerLedger(url, 10**9).standing()
        except Exception as error:
            failures.append(f"tab {n}: {error!r}")

    for n in range(40):
        st.cache_resource.clear()  # what the clear_cache message does, between one tab's session and the next
        sessions.append(threading.Thread(target=session, args=(n,)))
        sessions[-1].start()
    for thread in sessions:
        thread.join()
    assert failures == []
    assert len({id(store) for store in stores}) > 1, "the cache was emptied: sessions made their store again"
    rows = sql(
        stores[0],
        "SELECT application_name, COUNT(*) FROM pg_stat_activity WHERE application_name IN (%s, %s) GROUP BY 1",
        (f"memora {os.getpid()} pool", f"memora {os.getpid()} presence"),
    )
    counts = dict(rows)
    assert 1 <= counts[f"memora {os.getpid()} pool"] <= POOL_SIZE, counts
    assert counts[f"memora {os.getpid()} presence"] == 1, "one presence connection per process, outside the pool"


# -- a deletion against a first save (finding 6) --------------------------------------------------------------------


class PausedBefore:
    """A store's tables whose transactions stop before the first statement starting with ``prefix`` until ``go``:
    the point of a first save between its tombstone check and its INSERT, where a deletion used to slip in."""

    def __init__(self, tables, prefix: str) -> None:
        self.tables, self.prefix = tables, prefix
        self.url = tables.url
        self.reached, self.go = threading.Event(), threading.Event()

    def run(self, work):
        return self.tables.run(lambda c: work(_Pausing(c, self)))


class _Pausing:
    def __init__(self, connection, pause: PausedBefore) -> None:
        self.connection, self.pause = connection, pause

    def execute(self, query, params=None):
        if str(query).startswith(self.pause.prefix):
            self.pause.reached.set()
            assert self.pause.go.wait(WAIT_S)
        return self.connection.execute(query, params)


def test_a_deletion_during_a_first_save_waits_for_it_and_deletes_what_it_saved(postgres_url):
    """The break: a deletion committed between a first save's tombstone check and its INSERT, and the deleted
    conversation was saved, and shown again by the next reload. Now the deletion waits for the save's
    conversation lock, then deletes the row the save committed; every later save of it is Gone."""
    store = empty_postgres_store(postgres_url)
    saver = PostgresStore(postgres_url)  # another process's store, as far as the database can tell
    paused = PausedBefore(saver.db, "INSERT INTO memora_conversations")
    saver.db = paused
    cid, outcomes = new_conversation_id(), {}
    saving = threading.Thread(target=lambda: outcomes.update(saved=saver.save(cid, "first turn", 0, OWNER)))
    saving.start()
    assert paused.reached.wait(WAIT_S), "the first save checked the tombstones and is about to INSERT"
    deleting = threading.Thread(target=lambda: outcomes.update(deleted=store.delete(cid, OWNER)))
    deleting.start()
    waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::oid AND NOT granted"
    wait_until(lambda: sql(store, waiting, (CONVERSATION_LOCK,))[0][0] == 1, "the deletion waiting for the save's lock")
    paused.go.set()
    saving.join()
    deleting.join()
    assert outcomes["saved"].version == 1, "the save committed first"
    assert outcomes["deleted"] is True, "then the deletion found its row and deleted it"
    assert store.load(cid, OWNER) is None, "a reload finds nothing"
    with pytest.raises(Gone):
        store.save(cid, "the reply, late", 1, OWNER)
    with pytest.raises(Gone):
        store.save(new_conversation_id(), "a copy", 0, OWNER, forked_from=cid)


def test_a_row_with_a_tombstone_is_not_loaded(postgres_url):
    """A row that a save left beside its tombstone (before saves and deletions took one lock) is not there to ``load``,
    for a deleted conversation and for a forgotten browser alike."""
    store = empty_postgres_store(postgres_url)
    deleted, forgotten, other_owner = new_conversation_id(), new_conversation_id(), OWNER[::-1]
    store.save(deleted, "deleted", 0, OWNER)
    store.save(forgotten, "forgotten", 0, other_owner)
    sql(store, "INSERT INTO memora_tombstones (kind, key) VALUES ('conversation', %s), ('owner', %s) RETURNING 1", (deleted, other_owner))
    assert store.load(deleted, OWNER) is None
    assert store.load(forgotten, other_owner) is None
    kept = new_conversation_id()
    store.save(kept, "kept", 0, OWNER)
    assert store.load(kept, OWNER).payload == "kept", "a conversation with no tombstone still loads"


# -- a booking's holder, judged by its presence lock (finding 7) ----------------------------------------------------

HOLDING_PROCESS = """
import sys
from memora.classroom.store.base import RoomRequest
from memora.classroom.store.postgres import PostgresStore
from memora.classroom.store.presence import shared_presence
url, owner, conversation_id = sys.argv[1:4]
admission = PostgresStore(url).book(RoomRequest("the other process", owner, conversation_id, 1, 5, 500))
print(admission.refusal is None, shared_presence(url).backend_pid, flush=True)
sys.stdin.read()  # holds its booking until it is killed
"""


def bookings(store: PostgresStore, holder: str) -> int:
    return sql(store, "SELECT COUNT(*) FROM memora_room_bookings WHERE holder = %s", (holder,))[0][0]


def test_a_booking_whose_holders_process_died_holds_nothing_and_makes_no_turn_wait(postgres_url):
    """Another process books a turn on the conversation and is killed mid-reply (SIGKILL): while it lived, this
    process's turn on the conversation was busy; once PostgreSQL has dropped its connection, and with it its
    presence lock, its booking is dropped and the turn goes on as the conversation's next one."""
    store = empty_postgres_store(postgres_url)
    cid = new_conversation_id()
    store.save(cid, "Hello.", 0, OWNER)
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDING_PROCESS, postgres_url, OWNER, cid], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        admitted, backend_pid = other.stdout.readline().split()
        assert admitted == "True"
        ours = RoomRequest("this process", OWNER, cid, 1, 5, 500)
        assert store.book(ours).busy, "a live holder's turn runs on the conversation: ours waits for it"
        store.release(ours.holder)
    finally:
        other.kill()
        other.wait()
    # Its server process may outlive it by a moment: wait for it to be gone (false: it was gone already).
    sql(store, "SELECT pg_terminate_backend(%s, %s)", (int(backend_pid), int(WAIT_S * 1000)))
    admission = store.book(ours)
    assert (admission.busy, admission.fork, admission.refusal) == (False, False, None), "the dead holder busies no one"
    assert bookings(store, "the other process") == 0, "its booking is dropped"
    store.release(ours.holder)


def test_a_live_holder_is_never_taken_for_dead_by_its_machine_name_and_pid(postgres_url):
    """Two containers with host networking, or two cloned machines, share a hostname but not their pids: a booking
    named for this machine and a pid that does not run here is another machine's live turn, and stays."""
    store = empty_postgres_store(postgres_url)
    cid = new_conversation_id()
    store.save(cid, "Hello.", 0, OWNER)
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    twin = f"{socket.gethostname()}:{exited.pid}:a-process-of-the-twin-machine"
    assert store.book(RoomRequest(twin, OWNER, cid, 1, 5, 500)).refusal is None
    assert store.book(RoomRequest("this process", OWNER, cid, 1, 5, 500)).busy, "the twin's turn runs on the conversation"
    assert bookings(store, twin) == 1, "its booking is kept"
    for holder in (twin, "this process"):
        store.release(holder)


def test_a_holder_without_its_lock_is_alive_until_the_database_has_run_for_the_settle_time(postgres_url):
    """A PostgreSQL restart drops every presence lock, live processes' too: a booking whose lock is missing counts
    as alive until the database has run for ``settle_s`` (a stopping process's grace and unwind), then is dropped."""
    settling = empty_postgres_store(postgres_url)
    settling.settle_s = 10.0**9  # the database started less than that ago: every missing lock may still come back
    settled = PostgresStore(postgres_url, settle_s=0)
    cid = new_conversation_id()
    settling.save(cid, "Hello.", 0, OWNER)
    locks = "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::oid"
    held = {row[0] for row in sql(settling, locks, (PRESENCE_LOCK,))}
    missing = next(key for key in range(1, 1000) if key not in held)
    sql(
        settling,
        "INSERT INTO memora_room_bookings (holder, owner, conversation_id, size, new, expires_at, presence) "
        "VALUES ('before the restart', %s, %s, 500, FALSE, now() + interval '1 hour', %s) RETURNING 1",
        (OWNER, cid, missing),
    )
    ours = RoomRequest("this process", OWNER, cid, 1, 5, 500)
    assert settling.book(ours).busy, "within the settle time its holder may yet take its lock again"
    assert settled.book(ours).busy is False, "after it, the holder is gone"
    assert bookings(settled, "before the restart") == 0
    settled.release(ours.holder)


def test_a_live_process_takes_its_presence_lock_again_after_a_restart():
    """The database restarts while this process holds a booking: the process takes its own lock again as soon as
    the database answers, so its booking counts as alive with no settle time at all, and its pool serves again."""
    name, url = outage_cluster()
    store = empty_postgres_store(url)
    store.settle_s = 0
    cid = new_conversation_id()
    store.save(cid, "Hello.", 0, OWNER)
    assert store.book(RoomRequest("mid-reply", OWNER, cid, 1, 5, 500)).refusal is None
    presence = shared_presence(url)
    key, before = presence.key(), presence.backend_pid
    try:
        pg_ctlcluster(name, "stop")
    finally:
        pg_ctlcluster(name, "start")
    wait_until(lambda: presence.backend_pid != before, "holding the lock on a new connection")
    assert presence.key() == key, "the same key: its bookings are still its own"
    assert store.book(RoomRequest("next tab", OWNER, cid, 1, 5, 500)).busy, "the booking made before the restart is alive"
    for holder in ("mid-reply", "next tab"):
        store.release(holder)


# -- a conversation has one home (finding 1) ------------------------------------------------------------------------


def opened_tab(store: PostgresStore, *texts: str) -> ConversationKeeper:
    """A tab whose conversation holds ``texts``' turns, saved after each."""
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    chat(memory, *texts)
    return keeper


def reopened_tab(store: PostgresStore, conversation_id: str) -> ConversationKeeper:
    """The same browser's page opening the conversation from the store: after a reload, or back on another process."""
    opened = reopen(store, conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
    assert opened.memory is not None
    opened.keeper.attach(opened.memory)
    return opened.keeper


def caught_up(tab: ConversationKeeper) -> ConversationKeeper:
    """What the page does when ``room`` finds the tab behind (``memora.app.page.conversation.catch_up``)."""
    assert tab.memory is not None
    newer = reopen(tab.store, tab.conversation_id, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=OWNER, locked=False)
    newer = carry_choices(tab, tab.memory, newer)
    newer.keeper.attach(newer.memory)
    return newer.keeper


@pytest.mark.parametrize("landing", ["before", "during", "after"])
def test_the_reply_a_stopping_process_finishes_in_its_grace_is_the_conversation_the_page_goes_on_with(postgres_url, landing):
    """A rolling restart: process P is writing the student's reply when it is told to stop; her page comes back on
    process Q and opens the conversation from PostgreSQL. P's grace save lands before the page opens it, between that
    and her next message, or while that message waits for P's turn (alive by its presence lock: the page is told her
    last reply is being finished, for no fixed time). Each way her next message follows the reply, under the same
    id: never a copy, never taken for another tab's."""
    store = empty_postgres_store(postgres_url)
    stopping = opened_tab(store, "Hello, I am Ana.")
    cid = stopping.conversation_id
    assert stopping.room("Where do I live?") is None, "P's turn is booked: it runs on P when the roll begins"

    def grace_save() -> None:  # P finishes the reply within its grace, saves it, and its turn ends
        chat(stopping.memory, "Where do I live?")
        stopping.release_room()

    if landing == "before":
        grace_save()
    page = reopened_tab(store, cid)
    if landing == "during":
        grace_save()
    waited: list[int] = []

    def finishing() -> None:  # the page says her last reply is being finished; meanwhile P's save lands
        waited.append(page.version)
        if landing == "after":
            grace_save()

    assert page.room("And where do I work?", on_wait=finishing) is None
    assert waited == ([page.version] if landing == "after" else []), "the page waits only while P's turn runs"
    assert not page.would_fork and page.fork is None
    if page.behind:
        page = caught_up(page)
        assert page.room("And where do I work?") is None and not page.behind and not page.would_fork
    chat(page.memory, "And where do I work?")
    page.release_room()
    assert page.conversation_id == cid and page.fork is None, "one conversation"
    stored = parse_saved(store.load(cid, OWNER).payload)
    assert [m.content for m in stored.transcript.history][::2] == ["Hello, I am Ana.", "Where do I live?", "And where do I work?"]


def test_a_tab_waits_as_long_as_the_turn_running_elsewhere_lives_and_no_fixed_time(postgres_url, monkeypatch):
    """The wait for a turn running on the conversation elsewhere has no fixed bound (it was 8 s): however many times
    the tab asks, it waits while that turn's holder is alive and booked, then opens the version it saved."""
    monkeypatch.setattr(keeper_module, "BUSY_POLL_S", 0.001)
    store = empty_postgres_store(postgres_url)
    running = opened_tab(store, "Hello.")
    assert running.room("A long reply, please.") is None
    page = reopened_tab(store, running.conversation_id)
    asked = []
    running_elsewhere = store.running

    def counting(conversation_id, holder, owner=None):  # the running turn ends only after the waiting tab has asked 200 times
        asked.append(holder)
        if len(asked) == 200:
            chat(running.memory, "A long reply, please.")
            running.release_room()
        return running_elsewhere(conversation_id, holder, owner)

    monkeypatch.setattr(store, "running", counting)
    finishing = []
    assert page.room("Next.", on_wait=lambda: finishing.append(page.turn_running_elsewhere())) is None
    assert finishing == [True], "the page was told once that a turn runs on the conversation elsewhere"
    assert len(asked) == 200 and page.behind and not page.would_fork, "it asked until the turn had ended"
    assert page.turn_running_elsewhere() is False


def test_a_save_that_holds_no_unsaved_work_never_copies_the_conversation(postgres_url):
    """A fold, or a changed setting, saved after another tab saved a later version: it is not unsaved work, so it is
    not written as a copy; the tab's next message opens the later version and re-applies the setting to it."""
    store = empty_postgres_store(postgres_url)
    tab_a = opened_tab(store, "One.", "Two.", "Three.")
    tab_b = reopened_tab(store, tab_a.conversation_id)
    chat(tab_a.memory, "Four, in tab A.")
    tab_b.memory.configure(max_recent_turns=2)
    assert tab_b.save(tab_b.memory) is False, "a save of no new turn (a fold's, the choices') conflicts"
    assert tab_b.fork is None and tab_b.conversation_id == tab_a.conversation_id, "and makes no copy"
    assert (tab_b.dirty, tab_b.failure, tab_b.retry()) == (False, None, True), "nor is tried again on every run"
    assert tab_b.room("Five, in tab B.") is None and tab_b.behind and not tab_b.would_fork
    tab_b = caught_up(tab_b)
    assert tab_b.memory.max_recent_turns == 2, "tab B's window is carried onto tab A's version"
    chat(tab_b.memory, "Five, in tab B.")
    stored = parse_saved(store.load(tab_a.conversation_id, OWNER).payload)
    assert [m.content for m in stored.transcript.history][::2][-2:] == ["Four, in tab A.", "Five, in tab B."]
    assert stored.transcript.settings.max_recent_turns == 2 and tab_b.fork is None
