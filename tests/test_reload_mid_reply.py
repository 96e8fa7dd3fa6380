"""A reload during a reply (issue 20, part 7) and a server stopped mid-reply (part 9), below the browser.

The page tests drive two AppTest sessions in one process, as a reload makes a second session on the
same server: the first holds a reply (a GatedBackend stops it after its first piece), the second
opens the same id. The shutdown tests drive ``memora.classroom.shutdown.drain`` on real jobs, keepers, a real
SQLite store and the real server ledger. The same two cases against a real `streamlit run` and
Chromium are in tests/test_browser_reload.py.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.classroom.flights import FLIGHTS, Flights
from memora.classroom.guard import GuardedBackend
from memora.classroom.job import ReplyJob
from memora.classroom.server_budget import ServerLedger
from memora.classroom.shutdown import drain
from memora.classroom.store.base import StoreUnreachable
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_browser_secret, owner_of
from memora.classroom.store.saved import dumps_saved, parse_saved
from memora.classroom.store.sqlite import SqliteStore
from memora.memory import ShortTermMemory
from memora.memory.backend import Completion, ReplyRequest
from memora.text.tokens import count_text
from memora.text.usage import Usage
from tests.support.app import APP, JOB_WAIT_S, finish, send, texts
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import FlakyStore

pytestmark = pytest.mark.usefixtures("no_secrets")


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    """The default store under ``~/.memora`` (HOME is ``tmp_path``): a tab given a test's memory keeps default settings."""
    monkeypatch.delenv("MEMORA_STORE_URL", raising=False)
    monkeypatch.delenv("MEMORA_DATA_DIR", raising=False)
    return tmp_path / ".memora" / "conversations.sqlite3"


@dataclass
class HeldBackend(ScriptedBackend):
    """Streams each reply one piece at a time, and holds before each piece after the first while ``held`` is clear.

    Unlike ``tests.support.fakes.GatedBackend``, a held reply still hands out pieces on ``release_one``, so a
    cancelled job sees its cancel at the next piece, as with a model that keeps streaming.
    """

    pieces: int = 4
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    free: threading.Event = field(default_factory=threading.Event)
    streaming: threading.Event = field(default_factory=threading.Event)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.replies.append(request)
        text = f"reply {len(self.replies)}"
        for index in range(self.pieces):
            if index:
                self.streaming.set()
                while not self.free.is_set() and not self.go.acquire(timeout=0.05):
                    pass
            yield f"{text}." if index == 0 else "."
        whole = text + "." * self.pieces
        yield Completion(whole, Usage(10, count_text(whole)))

    def release_one(self) -> None:
        self.go.release()


ANA = new_browser_secret()
"""The student's browser (its cookie's secret): AppTest sends no cookie, so a test puts it in session state."""


def open_tab(conversation_id: str | None = None, memory: ShortTermMemory | None = None, browser: str = ANA) -> AppTest:
    """A new tab of ``browser``: a reload is one with the same id, in the same browser."""
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.BROWSER_SECRET] = browser
    if conversation_id is not None:
        at.query_params["c"] = conversation_id
    if memory is not None:
        at.session_state[keys.MEMORY] = memory
    return at.run()


def stored_history(store_path, conversation_id: str) -> list[str]:
    store = SqliteStore(store_path)
    try:
        return [m.content for m in parse_saved(store.load(conversation_id, owner_of(ANA)).payload).transcript.history]
    finally:
        store.close()


def stored_ids(store_path) -> list[str]:
    with sqlite3.connect(store_path) as connection:
        return [row[0] for row in connection.execute("SELECT id FROM conversations")]


def test_a_reload_during_a_reply_adopts_it_then_goes_on_under_the_same_id(store_path):
    held = HeldBackend()
    held.free.set()
    first = open_tab(memory=ShortTermMemory(held))
    send(first, "My name is Ana.")
    cid = first.query_params["c"]
    held.free.clear()
    held.streaming.clear()
    first.chat_input[0].set_value("Where do I live?").run()  # the reply is held after its first piece
    assert held.streaming.wait(JOB_WAIT_S)
    job = first.session_state[keys.REPLY_JOB]

    reloaded = open_tab(cid)  # F5: a new session on the same server, with the same id
    assert reloaded.session_state[keys.REPLY_JOB] is job, "the new tab draws the reply still being written"
    assert "still being written" in texts(reloaded)
    assert reloaded.session_state[keys.MEMORY].history[-1].content == "Where do I live?"

    held.free.set()
    assert job.wait(JOB_WAIT_S)
    finish(reloaded.run())
    memory = reloaded.session_state[keys.MEMORY]
    keeper = reloaded.session_state[keys.CONVERSATION]
    assert memory is not job.memory, "once the reply ends, the new tab goes on with its own copy"
    assert [m.content for m in memory.history] == ["My name is Ana.", "reply 1....", "Where do I live?", "reply 2...."]
    assert keeper.conversation_id == cid and reloaded.query_params["c"] == cid
    assert keeper.version == SqliteStore(store_path).load(cid, owner_of(ANA)).version, "it goes on at the version the old tab saved"

    send(reloaded, "I like tea.")
    shown = texts(reloaded)
    assert "Another tab" not in shown and keeper.fork is None
    assert reloaded.query_params["c"] == cid
    assert stored_history(store_path, cid)[4] == "I like tea." and len(stored_history(store_path, cid)) == 6
    assert stored_ids(store_path) == [cid], "no fork: one conversation in the store"


def test_another_browser_opening_the_link_during_a_reply_adopts_nothing(store_path):
    held = HeldBackend()
    first = open_tab(memory=ShortTermMemory(held))
    first.chat_input[0].set_value("My private note.").run()
    assert held.streaming.wait(JOB_WAIT_S)
    job = first.session_state[keys.REPLY_JOB]

    other = open_tab(first.query_params["c"], browser=new_browser_secret())
    assert other.session_state[keys.REPLY_JOB] is None and other.session_state[keys.MEMORY] is not job.memory
    assert "My private note." not in texts(other) and "still being written" not in texts(other)
    assert other.session_state[keys.CONVERSATION].conversation_id != first.query_params["c"]
    held.free.set()
    assert job.wait(JOB_WAIT_S)


def test_a_reload_during_a_first_reply_finds_it_by_the_id_written_when_it_began(store_path):
    held = HeldBackend()
    first = open_tab(memory=ShortTermMemory(held))
    first.chat_input[0].set_value("Hello, first message.").run()
    assert held.streaming.wait(JOB_WAIT_S)
    cid = first.query_params["c"]  # not saved yet, but already in the URL
    assert SqliteStore(store_path).load(cid, owner_of(ANA)) is None

    reloaded = open_tab(cid)
    assert "still being written" in texts(reloaded)
    held.free.set()
    finish(reloaded)
    assert [m.content for m in reloaded.session_state[keys.MEMORY].history] == ["Hello, first message.", "reply 1...."]
    send(reloaded, "Second.")
    assert stored_ids(store_path) == [cid] and len(stored_history(store_path, cid)) == 4


def test_a_reply_stopped_from_the_reloaded_tab_puts_the_text_back_there(store_path):
    held = HeldBackend(pieces=50)
    held.free.set()
    first = open_tab(memory=ShortTermMemory(held))
    send(first, "Hello.")
    cid = first.query_params["c"]
    held.free.clear()
    held.streaming.clear()
    first.chat_input[0].set_value("A long question.").run()
    assert held.streaming.wait(JOB_WAIT_S)
    reloaded = open_tab(cid)
    reloaded.button(key=keys.STOP_BUTTON).click().run()
    held.free.set()
    finish(reloaded)
    assert reloaded.chat_input[0].value == "A long question."
    assert len(reloaded.session_state[keys.MEMORY].history) == 2
    send(reloaded, "Again.")
    assert stored_ids(store_path) == [cid]


def test_a_reload_after_a_refused_save_restores_what_this_server_holds_and_retries(tmp_path, store_path):
    store = FlakyStore(SqliteStore(tmp_path / "flaky.sqlite3"))
    held = HeldBackend()
    held.free.set()
    first = AppTest.from_file(APP, default_timeout=30)
    first.session_state[keys.BROWSER_SECRET] = ANA
    first.session_state[keys.CONVERSATION] = ConversationKeeper(store, owner=owner_of(ANA))
    first.session_state[keys.MEMORY] = ShortTermMemory(held)
    first.run()
    send(first, "Saved while the store is up.")
    cid = first.query_params["c"]
    store.down = True
    send(first, "Not saved: the store is down.")
    assert "could not be saved" in texts(first)

    reloaded = open_tab(cid)  # the store is still down: its copy could not even be read
    history = [m.content for m in reloaded.session_state[keys.MEMORY].history]
    assert history[2] == "Not saved: the store is down." and len(history) == 4
    assert "newer than the copy the store could save" in texts(reloaded)
    store.down = False
    reloaded.run()  # the next step retries, at the version the first tab had saved
    assert "could not be saved" not in texts(reloaded)
    assert [m.content for m in parse_saved(store.load(cid, owner_of(ANA)).payload).transcript.history] == history
    assert reloaded.session_state[keys.CONVERSATION].fork is None


def test_reloads_and_a_reopened_tab_during_an_outage_lose_no_billed_reply(tmp_path, store_path):
    """Issue 28, item 2: the second F5 used to open the store's older copy, and the reply was lost for good."""
    store = FlakyStore(SqliteStore(tmp_path / "flaky.sqlite3"))
    first = AppTest.from_file(APP, default_timeout=30)
    first.session_state[keys.BROWSER_SECRET] = ANA
    first.session_state[keys.CONVERSATION] = ConversationKeeper(store, owner=owner_of(ANA))
    first.session_state[keys.MEMORY] = ShortTermMemory(ScriptedBackend())
    first.run()
    send(first, "Saved while the store is up.")
    cid = first.query_params["c"]
    store.down = True
    send(first, "Not saved: the store is down.")
    expected = ["Saved while the store is up.", "reply 1", "Not saved: the store is down.", "reply 2"]

    tab = first
    for _ in range(4):  # F5, F5 again, then the tab closed (its session left behind) and the link opened anew
        tab = open_tab(cid, ShortTermMemory(ScriptedBackend()))  # the same server's settings: a model, not offline
        assert [m.content for m in tab.session_state[keys.MEMORY].history] == expected
        assert "newer than the copy the store could save" in texts(tab)
    assert "Not saved yet, will retry" in texts(tab), "on this conversation's page"
    classmate = open_tab(memory=ShortTermMemory(ScriptedBackend()), browser=new_browser_secret())
    assert "Not saved yet" not in texts(classmate) and not classmate.session_state[keys.MEMORY].history

    store.down = False
    send(classmate, "My first message.")  # a save succeeds: the conversations this process holds are tried again
    assert [m.content for m in parse_saved(store.load(cid, owner_of(ANA)).payload).transcript.history] == expected
    assert FLIGHTS.for_conversation(cid, owner_of(ANA)) is None, "saved: the process no longer holds it"
    tab.run()
    assert "could not be saved" not in texts(tab) and "Not saved yet" not in texts(tab)


def test_a_pending_message_comes_back_in_the_input_box_with_a_notice(store_path):
    memory = ShortTermMemory(ScriptedBackend())
    chat(memory, "Hello.")
    store = SqliteStore(store_path)
    store.save("P" * 32, dumps_saved(memory, "en", pending_message="My unanswered question."), 0, owner_of(ANA))
    store.close()
    at = open_tab("P" * 32)
    assert at.chat_input[0].value == "My unanswered question."
    assert "server stopped before it answered your last message" in texts(at)
    assert len(at.session_state[keys.MEMORY].history) == 2


# -- the shutdown drain ---------------------------------------------------------------------


def flight_of(flights: Flights, memory: ShortTermMemory, keeper: ConversationKeeper, text: str) -> ReplyJob:
    keeper.attach(memory)
    job = ReplyJob(memory, text).start()
    flights.add(job, keeper)
    return job


def test_drain_lets_a_reply_finish_within_the_grace_and_it_is_saved(tmp_path):
    held = HeldBackend()
    store = SqliteStore(tmp_path / "c.sqlite3")
    keeper, flights = ConversationKeeper(store), Flights()
    memory = ShortTermMemory(held)
    job = flight_of(flights, memory, keeper, "Finish me.")
    assert held.streaming.wait(JOB_WAIT_S)
    threading.Timer(0.3, held.free.set).start()  # the model goes on streaming a moment after the stop begins

    drained = drain(flights, grace_s=60)
    assert (drained.finished, drained.stopped, drained.kept, drained.lost) == (1, 0, 0, 0)
    assert job.progress.phase == "done"
    saved = parse_saved(store.load(keeper.conversation_id, keeper.owner).payload)
    assert [m.content for m in saved.transcript.history] == ["Finish me.", "reply 1...."] and saved.pending_message is None


def test_drain_with_the_storage_still_down_counts_what_it_could_not_save(tmp_path, caplog):
    """Issue 28, item 6: the log said "0 lost; 0 unsaved conversation(s) saved now" while billed replies were dropped."""
    caplog.set_level("INFO", logger="memora.classroom.shutdown")
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    flights = Flights()
    store.down = True
    keepers = []
    for text in ("Unsaved one.", "Unsaved two."):  # one finished before the stop, one finishing within the grace
        keeper, memory = ConversationKeeper(store), ShortTermMemory(ScriptedBackend())
        assert flight_of(flights, memory, keeper, text).wait(JOB_WAIT_S)
        assert keeper.dirty
        keepers.append(keeper)
    billed = sum(record.total_tokens for keeper in keepers for record in keeper.memory.ledger)

    drained = drain(flights, grace_s=5)
    assert (drained.resaved, drained.unsaved, drained.unsaved_tokens) == (0, 2, billed)
    assert "0 unsaved conversation(s) saved now, 2 could not be saved" in caplog.text
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors and f"{billed:,} billed tokens" in errors[0] and "Unsaved" not in caplog.text, "counts, never message text"

    store.down = False
    drained = drain(flights, grace_s=5)
    assert (drained.resaved, drained.unsaved) == (2, 0)


class RestartingStore(FlakyStore):
    """A store that does not answer (StoreUnreachable, as PostgreSQL restarting) for its next ``unanswered`` calls."""

    def __init__(self, inner, unanswered: int) -> None:
        super().__init__(inner)
        self.unanswered = unanswered

    def _check(self) -> None:
        if self.unanswered > 0:
            self.unanswered -= 1
            raise StoreUnreachable("PostgreSQL: OperationalError; the server's log says where and why")


def test_drain_tries_again_a_save_postgresql_did_not_answer_while_it_restarts(tmp_path):
    """Issue 44's campaign, PostgreSQL restarted during a roll's grace: a stopping process's reply whose save met the
    restart was tried once more at the drain's end, still in the restart, and lost with the process (3 typed messages
    of 24 students in one roll). Now the drain tries again while the store does not answer. No clock: the store
    answers after a count of calls."""
    store = RestartingStore(SqliteStore(tmp_path / "c.sqlite3"), unanswered=1)
    keeper, flights = ConversationKeeper(store), Flights()
    assert flight_of(flights, ShortTermMemory(ScriptedBackend()), keeper, "Saved after the restart.").wait(JOB_WAIT_S)
    assert keeper.dirty and isinstance(keeper.failure, StoreUnreachable), "the reply's own save met the restart"
    store.unanswered = 3  # the drain's first try and two more still meet it

    drained = drain(flights, grace_s=5)
    assert (drained.resaved, drained.unsaved) == (1, 0) and store.unanswered == 0
    saved = parse_saved(store.load(keeper.conversation_id, keeper.owner).payload)
    assert saved.transcript.history[0].content == "Saved after the restart."


def test_a_turn_whose_save_met_a_restart_keeps_its_booking_until_a_retry_saves_it(tmp_path):
    """Issue 44's campaign: a stopping process's reply whose save met the PostgreSQL restart gave its booking back at
    once, so the student's page on the other process saw no turn running, sent and saved first, and the stopping
    process's retry then made a copy that her conversation lacked (1 of 24 students). Now the booking stays until the
    retry lands: a page elsewhere is told a turn still runs there, and waits."""
    from memora.app.page.handover import turn_ended

    inner = SqliteStore(tmp_path / "c.sqlite3")
    store = RestartingStore(inner, unanswered=0)
    keeper = ConversationKeeper(store)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend()))
    assert keeper.room("Hello.") is None, "the turn is booked"
    store.unanswered = 1  # its save meets the restart
    chat(memory, "Hello.")
    assert keeper.dirty

    turn_ended(keeper)
    assert inner.running(keeper.conversation_id, "the page back elsewhere"), "its save is still to come: a turn runs"
    assert keeper.retry() and not keeper.dirty
    assert not inner.running(keeper.conversation_id, "the page back elsewhere"), "saved: the booking is given back"
    inner.close()


def test_a_turn_whose_save_the_store_refused_gives_its_booking_back_at_once(tmp_path):
    """A store that answered with an error (a full disk) is not about to save the turn: its booking
    goes back at once, as before issue 44's campaign, so that a tab of the same conversation opened
    meanwhile in this process does not wait for it until the lease ends (Chromium: the full-disk
    reload drill in test_browser_reload)."""
    from memora.app.page.handover import turn_ended

    inner = SqliteStore(tmp_path / "c.sqlite3")
    store = FlakyStore(inner)
    keeper = ConversationKeeper(store)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend()))
    assert keeper.room("Hello.") is None, "the turn is booked"
    store.down = True  # its save is refused
    chat(memory, "Hello.")
    assert keeper.dirty and not isinstance(keeper.failure, StoreUnreachable)
    store.down = False

    turn_ended(keeper)
    assert not inner.running(keeper.conversation_id, "another tab"), "no save is coming: no turn runs"
    assert keeper.dirty, "the conversation itself is still to be saved"
    inner.close()


def test_drain_stops_a_reply_past_the_grace_records_its_spend_and_keeps_the_message(tmp_path):
    held = HeldBackend(pieces=2)
    held.free.set()
    ledger = ServerLedger(tmp_path / "usage.sqlite3", 1_000_000)
    store = SqliteStore(tmp_path / "c.sqlite3")
    keeper, flights = ConversationKeeper(store), Flights()
    memory = ShortTermMemory(GuardedBackend(held, server_ledger=ledger))
    chat(memory, "An earlier turn.")
    keeper.attach(memory)
    keeper.save(memory)
    spent_before = ledger.spent()
    held.pieces, held.streaming = 10_000, threading.Event()
    held.free.clear()
    job = flight_of(flights, memory, keeper, "Keep my question.")
    assert held.streaming.wait(JOB_WAIT_S)
    streaming_on = threading.Event()

    def keep_streaming() -> None:  # a piece every 10 ms, never reaching the reply's end within the grace
        while not streaming_on.wait(0.01):
            held.release_one()

    threading.Thread(target=keep_streaming, daemon=True).start()
    try:
        drained = drain(flights, grace_s=0.2)
    finally:
        streaming_on.set()
    assert (drained.finished, drained.stopped, drained.kept, drained.lost) == (0, 1, 1, 0)
    assert job.progress.phase == "stopped"
    with sqlite3.connect(ledger.path) as connection:
        rows = connection.execute("SELECT kind, tokens, estimated, settled FROM requests").fetchall()
    assert rows[-1][0] == "reply" and rows[-1][2:] == (1, 1), "the stopped request is settled to its estimate"
    assert ledger.spent() > spent_before
    saved = parse_saved(store.load(keeper.conversation_id, keeper.owner).payload)
    assert saved.pending_message == "Keep my question."
    assert [m.content for m in saved.transcript.history] == ["An earlier turn.", "reply 1.."]


def test_drain_with_nothing_running_returns_at_once():
    assert drain(Flights(), grace_s=60).waited_s == 0.0


def test_finished_flights_are_forgotten_unless_unsaved(tmp_path):
    held = HeldBackend()
    held.free.set()
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    keeper = ConversationKeeper(store)
    memory = ShortTermMemory(held)
    job = flight_of(FLIGHTS, memory, keeper, "Saved.")
    assert job.wait(JOB_WAIT_S)
    assert FLIGHTS.for_conversation(keeper.conversation_id, keeper.owner) is None
    store.down = True
    job = flight_of(FLIGHTS, memory, keeper, "Not saved.")
    assert job.wait(JOB_WAIT_S)
    assert FLIGHTS.for_conversation(keeper.conversation_id, keeper.owner).job is job
    store.down = False
    assert keeper.retry()
    assert FLIGHTS.for_conversation(keeper.conversation_id, keeper.owner) is None


def test_a_second_interrupt_ends_the_wait_and_the_reply_is_stopped_and_kept(tmp_path):
    """A second Ctrl-C sets ``interrupted``: the drain stops the reply at once instead of waiting out a 10-minute grace."""
    held = HeldBackend(pieces=100_000)
    store = SqliteStore(tmp_path / "c.sqlite3")
    keeper, flights = ConversationKeeper(store), Flights()
    job = flight_of(flights, ShortTermMemory(held), keeper, "Interrupted.")
    assert held.streaming.wait(JOB_WAIT_S)
    streaming_on = threading.Event()

    def keep_streaming() -> None:
        while not streaming_on.wait(0.01):
            held.release_one()

    threading.Thread(target=keep_streaming, daemon=True).start()
    interrupted = threading.Event()
    interrupted.set()
    try:
        drained = drain(flights, grace_s=600, interrupted=interrupted)
    finally:
        streaming_on.set()
    assert (drained.stopped, drained.kept) == (1, 1) and job.progress.phase == "stopped"
    assert parse_saved(store.load(keeper.conversation_id, keeper.owner).payload).pending_message == "Interrupted."


def test_the_grace_is_a_setting():
    from memora.app.settings import DEFAULT_SHUTDOWN_GRACE_S, SettingsError, load_settings

    assert load_settings({}, {}).shutdown_grace_s == DEFAULT_SHUTDOWN_GRACE_S
    assert load_settings({}, {"MEMORA_SHUTDOWN_GRACE_S": "30"}).shutdown_grace_s == 30.0
    with pytest.raises(SettingsError, match="MEMORA_SHUTDOWN_GRACE_S"):
        load_settings({}, {"MEMORA_SHUTDOWN_GRACE_S": "soon"})


@dataclass
class SilentBackend(ScriptedBackend):
    """Sends nothing until ``answer`` is set: a model still thinking, a stream whose first byte has not come."""

    answer: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        if self.replies:  # the earlier turns answer at once
            self.asked.set()
            self.answer.wait(JOB_WAIT_S)
        yield from super().stream_reply(request)


def test_a_reply_stuck_before_its_first_byte_still_gets_its_message_kept_on_the_stored_copy(tmp_path):
    silent = SilentBackend()
    store = SqliteStore(tmp_path / "c.sqlite3")
    keeper, flights = ConversationKeeper(store), Flights()
    memory = ShortTermMemory(silent)
    keeper.attach(memory)
    chat(memory, "Saved first.")
    job = flight_of(flights, memory, keeper, "Still waiting.")
    assert silent.asked.wait(JOB_WAIT_S)
    try:
        drained = drain(flights, grace_s=0.1, unwind_s=0.1)
    finally:
        silent.answer.set()
    assert (drained.stopped, drained.kept, drained.lost) == (1, 1, 0)
    saved = parse_saved(store.load(keeper.conversation_id, keeper.owner).payload)
    assert saved.pending_message == "Still waiting."
    assert [m.content for m in saved.transcript.history] == ["Saved first.", "reply 1"]
    assert job.wait(JOB_WAIT_S) and job.progress.phase == "stopped"


def test_the_drain_writes_the_server_budgets_held_spend():
    class RecordingLedger:
        """Only ``write_held`` is called at exit; it records each call."""

        calls = 0

        def write_held(self) -> bool:
            self.calls += 1
            return True

    ledger = RecordingLedger()
    drain(Flights(), grace_s=60, ledger=ledger)
    assert ledger.calls == 1


def test_a_deleted_conversations_flights_hand_nothing_to_a_reload_and_save_nothing_back(tmp_path):
    """Issue 28: a closed tab's unsaved copy (a refused save) and another tab's reply still being written
    are this process's copies of a conversation; once it is deleted, neither may reach a reload, a retry
    or the shutdown drain."""
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    flights = Flights()
    closed_tab = ConversationKeeper(store)
    unsaved = ShortTermMemory(ScriptedBackend())
    assert flight_of(flights, unsaved, closed_tab, "Saved.").wait(JOB_WAIT_S)
    cid, owner = closed_tab.conversation_id, closed_tab.owner
    store.down = True
    assert flight_of(flights, unsaved, closed_tab, "Unsaved: the store is down.").wait(JOB_WAIT_S)
    held = HeldBackend()
    other_tab = ConversationKeeper(store, cid, closed_tab.version, owner=owner)
    running = flight_of(flights, ShortTermMemory(held), other_tab, "Still being written.")
    assert held.streaming.wait(JOB_WAIT_S)
    elsewhere = ConversationKeeper(store)  # another browser's conversation, unsaved too
    assert flight_of(flights, ShortTermMemory(ScriptedBackend()), elsewhere, "Not mine.").wait(JOB_WAIT_S)
    store.down = False

    assert store.delete(cid, owner)  # what the deleting tab's keeper did
    assert {f.keeper for f in flights.forget_conversation(cid, owner)} == {closed_tab, other_tab}
    held.free.set()  # the model goes on streaming: the cancelled job stops at its next piece
    assert running.wait(JOB_WAIT_S) and running.progress.phase == "stopped"
    assert flights.for_conversation(cid, owner) is None
    assert closed_tab.retry() and other_tab.retry() and not closed_tab.dirty
    assert flights.for_conversation(elsewhere.conversation_id, elsewhere.owner).keeper is elsewhere
    drained = drain(flights, grace_s=1)
    assert (drained.kept, drained.resaved) == (0, 1), "only the other browser's unsaved conversation is saved"
    assert store.load(cid, owner) is None and store.inner.delete_owner(owner) == 0, "nothing of it was saved again"
    assert store.load(elsewhere.conversation_id, elsewhere.owner) is not None
    assert flights.forget_owner(elsewhere.owner) == [] and elsewhere.memory is not None, "a saved flight is over already"


def test_deleting_during_a_reply_that_will_not_stop_hands_it_to_no_reload(store_path):
    """Issue 28: the deleted conversation's reply waits on the model past the 5 s a deletion waits for it.
    The tab goes on with a new id; the job still running on the deleted memory must not be registered
    under that id, or a reload of the tab's address would be handed the deleted conversation."""
    held = HeldBackend()
    first = open_tab(memory=ShortTermMemory(held))
    first.chat_input[0].set_value("My phone is 0912 345 678.").run()
    assert held.streaming.wait(JOB_WAIT_S)
    job, deleted = first.session_state[keys.REPLY_JOB], first.query_params["c"]
    next(b for b in first.button if b.label == "Yes, delete it").click().run()
    assert not job.progress.finished, "the model has not sent its next piece: the job is still running"
    assert "c" not in first.query_params
    keeper = first.session_state[keys.CONVERSATION]
    for address in (deleted, keeper.conversation_id):
        reloaded = open_tab(address)
        assert reloaded.session_state[keys.REPLY_JOB] is None and not reloaded.session_state[keys.MEMORY].history
        assert "0912" not in texts(reloaded)
    held.free.set()
    assert job.wait(JOB_WAIT_S) and job.progress.phase == "stopped"
    assert stored_ids(store_path) == []


def test_deleting_a_conversation_a_reload_holds_unsaved_lets_its_copy_go(tmp_path):
    """A reload during an outage holds the page's copy as a flight with no job (``Flights.hand_over``); deleting the
    conversation then must let that copy go too, not stop at a job it does not have."""
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    flights = Flights()
    tab = ConversationKeeper(store)
    memory = ShortTermMemory(ScriptedBackend())
    assert flight_of(flights, memory, tab, "Saved.").wait(JOB_WAIT_S)
    cid, owner = tab.conversation_id, tab.owner
    store.down = True
    assert flight_of(flights, memory, tab, "Unsaved: the store is down.").wait(JOB_WAIT_S)
    reloaded = ConversationKeeper(store, cid, tab.version, owner=owner)
    reloaded.attach(memory)
    reloaded.dirty = True  # the reload took over a copy the store has not taken yet
    flights.hand_over(flights.for_conversation(cid, owner), reloaded)
    assert flights.for_conversation(cid, owner).job is None
    store.down = False

    assert store.delete(cid, owner)
    assert [f.keeper for f in flights.forget_conversation(cid, owner)] == [reloaded]
    assert reloaded.memory is None and flights.for_conversation(cid, owner) is None
    assert not reloaded.retry() or store.load(cid, owner) is None, "nothing of the deleted conversation is saved back"
