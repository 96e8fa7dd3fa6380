"""The conversation store's contract, against real SQLite and real PostgreSQL; the keeper and the saved payload."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import timedelta

import pytest

from memora.app.settings import SettingsError, load_settings
from memora.backends import OfflineBackend
from memora.classroom.limits import SessionLimits
from memora.classroom.store import (
    CapReached,
    Gone,
    IdleSweep,
    StoreCaps,
    StoreError,
    VersionConflict,
    is_conversation_id,
    new_conversation_id,
    open_store,
)
from memora.classroom.store.base import RoomRequest
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_owner
from memora.classroom.store.reopen import reopen, save_import
from memora.classroom.store.saved import MAX_SAVED_BYTES, dumps_saved, parse_saved
from memora.classroom.store.sqlite import SqliteStore
from memora.classroom.transcript.format import TranscriptError, continue_in_session, dumps_transcript, parse_transcript
from memora.memory import ShortTermMemory
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import OWNER, STORE_KINDS, FlakyStore, backdate, make_store, owned, require_postgres_url, write_raw


@pytest.fixture(params=STORE_KINDS)
def store(request, tmp_path):
    store = make_store(request.param, tmp_path)
    yield store
    store.close()


def talked(*texts: str, **options) -> ShortTermMemory:
    memory = ShortTermMemory(ScriptedBackend(), max_recent_turns=1, **options)
    chat(memory, *texts)
    return memory


# -- the contract ------------------------------------------------------------------------------------


def test_ids_are_unguessable_and_only_their_shape_is_accepted():
    ids = {new_conversation_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(is_conversation_id(i) and len(i) == 32 for i in ids)
    for bad in (None, "", "x" * 31, "x" * 33, "../../etc/passwd" + "x" * 16, "a" * 31 + "%", "' OR 1=1 --" + "x" * 21):
        assert not is_conversation_id(bad)


def test_a_save_is_loaded_back_whole_and_each_save_bumps_the_version(store):
    cid = new_conversation_id()
    assert store.load(cid, OWNER) is None
    first = store.save(cid, '{"a": "é"}', 0, OWNER)
    assert (first.conversation_id, first.version) == (cid, 1)
    second = store.save(cid, '{"a": "二"}', 1, OWNER)
    loaded = store.load(cid, OWNER)
    assert (loaded.version, loaded.payload) == (2, '{"a": "二"}')
    assert loaded.updated_at >= first.updated_at == first.updated_at and second.version == 2


def test_a_stale_version_is_a_conflict_and_changes_nothing(store):
    cid = new_conversation_id()
    store.save(cid, "tab A, turn 1", 0, OWNER)
    store.save(cid, "tab A, turn 2", 1, OWNER)
    for stale in (0, 1, 3):
        with pytest.raises(VersionConflict) as raised:
            store.save(cid, f"tab B at {stale}", stale, OWNER)
        assert (raised.value.expected, raised.value.found) == (stale, 2)
    assert (store.load(cid, OWNER).version, store.load(cid, OWNER).payload) == (2, "tab A, turn 2")


def test_two_store_objects_on_one_database_see_each_others_saves_and_conflicts(store, tmp_path):
    """Two processes, as far as the store can tell: each has its own connection."""
    other = make_other(store, tmp_path)
    try:
        cid = new_conversation_id()
        store.save(cid, "one", 0, OWNER)
        assert other.load(cid, OWNER).payload == "one"
        other.save(cid, "two", 1, OWNER)
        with pytest.raises(VersionConflict):
            store.save(cid, "lost?", 1, OWNER)
        assert store.load(cid, OWNER).payload == "two"
    finally:
        other.close()


def make_other(store, tmp_path):
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    from memora.classroom.store.postgres import PostgresStore

    return PostgresStore(require_postgres_url())


def test_threads_racing_on_one_version_let_exactly_one_win(store):
    cid = new_conversation_id()
    store.save(cid, "start", 0, OWNER)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def race(n: int) -> None:
        barrier.wait()
        try:
            store.save(cid, f"thread {n}", 1, OWNER)
            outcomes.append("won")
        except VersionConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["won"]
    assert store.load(cid, OWNER).version == 2


def test_the_idle_sweep_deletes_only_conversations_idle_longer_than_the_setting(store):
    idle, fresh = new_conversation_id(), new_conversation_id()
    store.save(idle, "idle", 0, OWNER)
    store.save(fresh, "fresh", 0, OWNER)
    backdate(store, idle, 31)
    backdate(store, fresh, 29)
    assert store.delete_idle(timedelta(days=30)) == 1
    assert store.load(idle, OWNER) is None and store.load(fresh, OWNER).payload == "fresh"


def test_the_sweep_runs_at_most_once_an_interval(store):
    sweep = IdleSweep(store, timedelta(days=30))
    cid = new_conversation_id()
    store.save(cid, "idle", 0, OWNER)
    backdate(store, cid, 40)
    assert sweep.maybe_run() == 1
    other = new_conversation_id()
    store.save(other, "idle too", 0, OWNER)
    backdate(store, other, 40)
    assert sweep.maybe_run() is None  # within the hour: not swept yet
    assert store.load(other, OWNER) is not None
    assert IdleSweep(store, timedelta(days=30), interval_s=0).maybe_run() == 1


# -- the keeper and the payload, on each store ---------------------------------------------------------


def test_each_committed_turn_and_fold_is_saved_and_reopens_as_it_was(store):
    memory = ShortTermMemory(ScriptedBackend(), max_recent_turns=1)
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    chat(memory, "My name is Ana.", "I live in Porto.", "I like tea.")
    # 3 replies and the folds the 1-pair window made before turns 2 and 3 each saved once more.
    assert store.load(keeper.conversation_id, OWNER).version == 3 + len(memory.conversation.versions)
    reopened = reopen(store, keeper.conversation_id, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    assert reopened.outcome == "restored"
    back = reopened.memory
    assert back.history == memory.history and back.conversation.versions == memory.conversation.versions
    assert [r.total_tokens for r in back.ledger] == [r.total_tokens for r in memory.ledger]
    assert (back.max_recent_turns, back.limits.fold_policy) == (1, memory.limits.fold_policy)
    assert reopened.keeper.version == store.load(keeper.conversation_id, OWNER).version


def test_a_second_tab_on_the_same_id_forks_and_nothing_is_lost(store):
    first = ConversationKeeper(store, owner=OWNER)
    tab_a = talked("Hello from A.")
    first.attach(tab_a)
    first.save(tab_a)
    cid = first.conversation_id
    second = reopen(store, cid, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    tab_b = second.memory
    second.keeper.attach(tab_b)
    chat(tab_a, "A's second turn.")
    chat(tab_b, "B's second turn.")
    assert first.fork is None and second.keeper.fork is not None
    assert (second.keeper.fork.from_id, second.keeper.fork.to_id) == (cid, second.keeper.conversation_id)
    assert second.keeper.conversation_id != cid
    a_saved = parse_saved(store.load(cid, OWNER).payload).transcript.history
    b_saved = parse_saved(store.load(second.keeper.conversation_id, OWNER).payload).transcript.history
    assert a_saved[-2].content == "A's second turn." and b_saved[-2].content == "B's second turn."


def test_a_failed_save_keeps_the_turn_and_the_next_save_catches_up(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    memory = ShortTermMemory(ScriptedBackend())
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    store.down = True
    chat(memory, "This turn cannot be saved.")
    assert len(memory.history) == 2 and memory.history[0].content == "This turn cannot be saved."
    assert keeper.dirty and isinstance(keeper.failure, StoreError) and not keeper.saved
    assert keeper.retry() is False
    store.down = False
    assert keeper.retry() is True
    assert not keeper.dirty and keeper.failure is None
    assert parse_saved(store.load(keeper.conversation_id, OWNER).payload).transcript.history == tuple(memory.history)


def test_a_memory_left_behind_by_reset_no_longer_saves_under_the_new_id(tmp_path):
    store = SqliteStore(tmp_path / "c.sqlite3")
    old = talked("Old conversation.")
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(old)
    keeper.save(old)
    first = keeper.conversation_id
    fresh = ShortTermMemory(ScriptedBackend())
    keeper.start_new(fresh)
    chat(old, "A turn that finished late, in another thread.")
    assert store.load(keeper.conversation_id, OWNER) is None and store.load(first, OWNER).version == 1
    chat(fresh, "New conversation.")
    assert parse_saved(store.load(keeper.conversation_id, OWNER).payload).transcript.history[0].content == "New conversation."


def test_a_retry_never_waits_for_a_turn_running_in_another_thread(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    memory = ShortTermMemory(ScriptedBackend())
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    store.down = True
    chat(memory, "Unsaved.")
    store.down = False
    holding, release = threading.Event(), threading.Event()

    def turn_in_progress() -> None:
        with memory.lock:
            holding.set()
            release.wait()

    worker = threading.Thread(target=turn_in_progress)
    worker.start()
    holding.wait()
    assert keeper.retry() is False and keeper.dirty  # the busy memory is left alone, not waited for
    release.set()
    worker.join()
    assert keeper.retry() is True and store.load(keeper.conversation_id, OWNER).version == 1


def test_a_conversation_too_big_to_restore_is_not_saved_over_the_last_one_that_can_be(tmp_path, monkeypatch):
    store = SqliteStore(tmp_path / "c.sqlite3")
    memory = talked("Short.")
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    assert keeper.save(memory)
    monkeypatch.setattr("memora.classroom.store.keeper.MAX_SAVED_BYTES", len(dumps_saved(memory, "en").encode()) + 10)
    chat(memory, "This turn makes it too big to come back.")
    assert "over the" in str(keeper.failure) and keeper.version == 1
    assert len(parse_saved(store.load(keeper.conversation_id, OWNER).payload).transcript.history) == 2


def test_the_payload_never_holds_a_key_or_a_url(tmp_path):
    settings = load_settings(
        {}, {"OPENAI_API_KEY": "sk-test-never-stored-4f1a", "OPENAI_BASE_URL": "http://user:pw-secret@127.0.0.1:9/v1", "MEMORA_MODEL": "m"}
    )
    from memora.app.build import build_memory

    memory = build_memory(settings)
    memory.restore(talked("Hi.").history)
    payload = dumps_saved(memory, "en")
    for secret in ("sk-test-never-stored-4f1a", "never-stored", "pw-secret", "127.0.0.1"):
        assert secret not in payload


# -- a hostile or broken payload ------------------------------------------------------------------------


def hostile(kind: str) -> str:
    good = json.loads(dumps_saved(talked("Hello.", "Again."), "en"))
    if kind == "not_json":
        return "{" + "x" * 10
    if kind == "wrong_format":
        return json.dumps({**good, "format": "something-else"})
    if kind == "unknown_key":
        return json.dumps({**good, "api_key": "sk-planted"})
    if kind == "unpaired_message":
        good["transcript"]["history"].append({"role": "user", "content": "dangling"})
        return json.dumps(good)
    if kind == "too_large":
        return json.dumps({**good, "pad": "x" * MAX_SAVED_BYTES})
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["not_json", "wrong_format", "unknown_key", "unpaired_message", "too_large"])
def test_a_hostile_payload_is_refused_and_left_as_it_is(store, kind):
    cid = new_conversation_id()
    payload = hostile(kind)
    write_raw(store, cid, payload)
    session = ShortTermMemory(ScriptedBackend(), caps=SessionLimits(max_message_chars=200))
    reopened = reopen(store, cid, session, owner=OWNER, locked=False)
    assert reopened.outcome == "refused" and reopened.memory is None
    expected = {"wrong_format": "wrong_format", "unknown_key": "unknown_key"}.get(kind, kind)
    assert reopened.problem.code == expected
    assert reopened.keeper.conversation_id != cid and not reopened.keeper.saved
    assert store.load(cid, OWNER).payload == payload  # nothing overwrote it


def test_a_locked_page_restores_only_the_conversation_not_the_saved_budget(store):
    rich = talked("Hello.")
    payload = json.loads(dumps_saved(rich, "zh-TW"))
    payload["transcript"]["settings"].update(max_input_tokens=10_000_000, max_recent_turns=1000, model="gpt-planted")
    payload["fold_policy"] = "window"
    cid = new_conversation_id()
    write_raw(store, cid, json.dumps(payload))
    session = ShortTermMemory(ScriptedBackend(), model="server-model", max_input_tokens=2000, max_recent_turns=3, fold_policy="watermark")
    reopened = reopen(store, cid, session, owner=OWNER, locked=True)
    back = reopened.memory
    assert (back.max_input_tokens, back.max_recent_turns, back.model, back.limits.fold_policy) == (2000, 3, "server-model", "watermark")
    assert back.history == rich.history and reopened.language == "zh-TW"
    unlocked = reopen(store, cid, session, owner=OWNER, locked=False).memory
    restored = (unlocked.max_input_tokens, unlocked.max_recent_turns, unlocked.model, unlocked.limits.fold_policy)
    assert restored == (10_000_000, 1000, "server-model", "window")


def test_missing_and_malformed_ids_start_a_new_conversation_without_touching_the_store(store):
    for asked, outcome in ((new_conversation_id(), "missing"), ("not-an-id", "missing"), (None, "new")):
        reopened = reopen(store, asked, ShortTermMemory(OfflineBackend()), owner=OWNER, locked=False)
        assert reopened.outcome == outcome and reopened.memory is None and reopened.keeper.conversation_id != asked


def test_an_unreadable_store_is_reported_and_nothing_is_overwritten(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    cid = new_conversation_id()
    store.save(cid, dumps_saved(talked("Keep me."), "en"), 0, OWNER)
    store.down = True
    reopened = reopen(store, cid, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    assert reopened.outcome == "failed" and isinstance(reopened.problem, StoreError)
    assert reopened.keeper.conversation_id != cid


# -- settings -------------------------------------------------------------------------------------------


def test_store_url_and_idle_days_settings(tmp_path):
    assert load_settings({}, {"MEMORA_DATA_DIR": str(tmp_path)}).conversation_store_url == f"sqlite:///{tmp_path}/conversations.sqlite3"
    settings = load_settings({"MEMORA_STORE_URL": "off"}, {"MEMORA_STORE_URL": "sqlite:///x", "MEMORA_CONVERSATION_IDLE_DAYS": "7"})
    assert (settings.store_url, settings.conversation_idle_days) == ("off", 7)
    assert open_store("off") is None
    assert "pw-9" not in repr(load_settings({}, {"MEMORA_STORE_URL": "postgresql://u:pw-9@h/db"}))
    with pytest.raises(SettingsError) as raised:
        load_settings({}, {"MEMORA_STORE_URL": "mysql://u:pw-7@h/db"})
    assert "MEMORA_STORE_URL" in str(raised.value) and "pw-7" not in str(raised.value)
    with pytest.raises(SettingsError, match="MEMORA_CONVERSATION_IDLE_DAYS"):
        load_settings({}, {"MEMORA_CONVERSATION_IDLE_DAYS": "0"})


def test_store_caps_settings():
    assert load_settings({}, {}).store_caps == StoreCaps(1024 * 1024, 20, 1024 * 1024 * 1024)
    environ = {"MEMORA_MAX_CONVERSATION_KB": "64", "MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR": "5", "MEMORA_MAX_STORE_MB": "10"}
    assert load_settings({"MEMORA_MAX_STORE_MB": 20}, environ).store_caps == StoreCaps(64 * 1024, 5, 20 * 1024 * 1024)
    bad_values = {"MEMORA_MAX_CONVERSATION_KB": "8193", "MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR": "0", "MEMORA_MAX_STORE_MB": "lots"}
    for name, bad in bad_values.items():
        with pytest.raises(SettingsError, match=name):
            load_settings({}, {name: bad})


def test_a_sqlite_store_creates_its_folder_and_file_on_first_use(tmp_path):
    path = tmp_path / "not" / "yet" / "conversations.sqlite3"
    store = open_store(f"sqlite:///{path}")
    assert not path.exists()
    store.save(new_conversation_id(), "{}", 0, OWNER)
    assert path.exists()
    store.close()


@pytest.mark.integration  # a real socket, to a port where nothing answers
def test_a_postgres_store_that_cannot_be_reached_fails_with_store_error():
    store = open_store("postgresql://memora:wrong@127.0.0.1:9/none")
    with pytest.raises(StoreError) as raised:
        store.load(new_conversation_id(), OWNER)
    assert "wrong" not in str(raised.value)


# -- the shared classroom budget --------------------------------------------------------------------------


def test_the_postgres_server_ledger_is_shared_by_every_process_and_enforced(postgres_url):
    from memora.classroom.postgres_ledger import PostgresServerLedger
    from memora.classroom.server_budget import ServerBudgetReached
    from tests.support.budget import isolated_postgres_url

    url = isolated_postgres_url(postgres_url)  # a schema of its own: the shared database's tables are not touched
    one, two = PostgresServerLedger(url, 1000), PostgresServerLedger(url, 1000)
    one.settle(one.reserve(700, "reply"), 600)
    two.settle(two.reserve(300, "summary"), 300, estimated=True)
    assert one.spent() == two.spent() == 900
    booked = two.reserve(100, "reply")
    with pytest.raises(ServerBudgetReached):
        one.reserve(1, "reply")
    two.settle(booked, 100)
    settings = load_settings({}, {"MEMORA_STORE_URL": url, "MEMORA_MAX_SERVER_TOKENS": "1000"})
    assert isinstance(settings.server_ledger, PostgresServerLedger) and settings.server_ledger.spent() == 1000


# -- owners (issue 20): a conversation belongs to the browser that made it -------------------------------


def test_a_conversation_is_read_and_written_only_by_its_owner(store):
    cid, stranger = new_conversation_id(), new_owner()
    store.save(cid, "the teacher's private note", 0, OWNER)
    assert store.load(cid, stranger) is None, "another browser's conversation is not there for it"
    for version in (0, 1):
        with pytest.raises(VersionConflict):
            store.save(cid, "the student's text", version, stranger)
    assert (store.load(cid, OWNER).version, store.load(cid, OWNER).payload) == (1, "the teacher's private note")


def test_a_link_opened_by_another_browser_opens_a_new_conversation_and_never_writes_the_linked_one(store):
    teacher = ConversationKeeper(store, owner=OWNER)
    teacher.attach(memory := talked("My private note: the exam is on Friday."))
    assert teacher.save(memory)
    cid, before = teacher.conversation_id, store.load(teacher.conversation_id, OWNER)
    student = new_owner()
    opened = reopen(store, cid, ShortTermMemory(ScriptedBackend()), owner=student, locked=True)
    assert opened.outcome == "missing" and opened.memory is None and opened.keeper.conversation_id != cid
    opened.keeper.attach(theirs := talked("The student's own words."))
    assert opened.keeper.save(theirs)
    assert store.load(cid, OWNER) == before
    assert "private note" not in store.load(opened.keeper.conversation_id, student).payload
    assert reopen(store, cid, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=True).outcome == "restored"


def test_an_old_sqlite_table_is_migrated_in_place_and_its_rows_belong_to_no_browser(tmp_path):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE conversations (id TEXT PRIMARY KEY, version INTEGER NOT NULL, payload TEXT NOT NULL, updated_at REAL NOT NULL);"
        )
        old.execute("INSERT INTO conversations VALUES (?, 3, ?, ?)", (legacy := new_conversation_id(), "é" * 10, time.time()))
    old.close()
    store = SqliteStore(path, StoreCaps(store_bytes=10_000))
    assert store.load(legacy, OWNER) is None
    with pytest.raises(VersionConflict):
        store.save(legacy, "taken over?", 3, OWNER)
    store.save(cid := new_conversation_id(), "new", 0, OWNER)
    assert store.load(cid, OWNER).payload == "new"
    store.close()
    with sqlite3.connect(path) as reopened:
        columns = {row[1] for row in reopened.execute("PRAGMA table_info(conversations)")}
        row = reopened.execute("SELECT owner, size, payload FROM conversations WHERE id = ?", (legacy,)).fetchone()
    reopened.close()
    assert {"owner", "created_at", "size"} <= columns
    assert row == (None, 20, "é" * 10), "the old row is kept as it was, its size (UTF-8 bytes) counted against the store's cap"
    SqliteStore(path).load(cid, OWNER)  # a second opening migrates nothing twice


def test_an_old_postgresql_table_is_migrated_in_place_and_its_rows_belong_to_no_browser(postgres_url):
    """In a schema of its own, so the suite's shared tables are left alone."""
    import psycopg

    from memora.classroom.store.postgres import PostgresStore

    url, schema = postgres_url, f"memora_migration_{new_conversation_id()[:8].lower().replace('-', '_')}"
    legacy = new_conversation_id()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            admin.execute(
                f'CREATE TABLE "{schema}".memora_conversations '
                "(id TEXT PRIMARY KEY, version INTEGER NOT NULL, payload TEXT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            admin.execute(f'INSERT INTO "{schema}".memora_conversations (id, version, payload) VALUES (%s, 2, %s)', (legacy, "二" * 5))
            store = PostgresStore(f"{url}?options=-csearch_path%3D{schema}")
            try:
                assert store.load(legacy, OWNER) is None
                with pytest.raises(VersionConflict):
                    store.save(legacy, "taken over?", 2, OWNER)
                store.save(cid := new_conversation_id(), "new", 0, OWNER)
                assert store.load(cid, OWNER).payload == "new"
            finally:
                store.close()
            row = admin.execute(f'SELECT owner, size, payload FROM "{schema}".memora_conversations WHERE id = %s', (legacy,)).fetchone()
            assert row == (None, 15, "二" * 5)
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


# -- caps (issue 20): storage is bounded -----------------------------------------------------------------


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_conversation_over_its_byte_cap_is_refused_and_the_last_save_kept(kind, tmp_path):
    store = make_store(kind, tmp_path, StoreCaps(conversation_bytes=1000))
    try:
        cid = new_conversation_id()
        store.save(cid, "x" * 1000, 0, OWNER)
        with pytest.raises(CapReached) as refused:
            store.save(cid, "é" * 501, 1, OWNER)  # 1,002 bytes in UTF-8: bytes are counted, not characters
        assert (refused.value.cap, refused.value.limit) == ("conversation", 1000)
        assert store.load(cid, OWNER).payload == "x" * 1000
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_each_browser_may_start_so_many_conversations_an_hour(kind, tmp_path):
    store = make_store(kind, tmp_path, StoreCaps(new_per_hour=3))
    try:
        first = new_conversation_id()
        for n in range(3):
            store.save(first if n == 0 else new_conversation_id(), f"conversation {n}", 0, OWNER)
        assert store.book(RoomRequest("tab", OWNER, new_conversation_id(), 0, 0, 100)).refusal.cap == "browser"
        assert store.book(RoomRequest("tab", OWNER, first, 1, 100, 200)).refusal is None, "a saved one's turn is no new one"
        store.release("tab")
        with pytest.raises(CapReached) as refused:
            store.save(new_conversation_id(), "one too many", 0, OWNER)
        assert refused.value.cap == "browser"
        store.save(first, "an existing conversation goes on", 1, OWNER)
        store.save(new_conversation_id(), "another browser is not counted with this one", 0, new_owner())
        backdate_creation(store, OWNER, hours=1.1)
        store.save(new_conversation_id(), "an hour later", 0, OWNER)
    finally:
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_full_store_refuses_growth_but_keeps_every_conversation_as_saved(kind, tmp_path):
    store = make_store(kind, tmp_path, StoreCaps(store_bytes=100))
    try:
        a, b = new_conversation_id(), new_conversation_id()
        store.save(a, "a" * 60, 0, OWNER)
        store.save(b, "b" * 40, 0, new_owner())
        assert store.book(RoomRequest("tab", OWNER, a, 1, 60, 61)).refusal.cap == "store", "no room for even a byte"
        with pytest.raises(CapReached) as refused:
            store.save(a, "a" * 61, 1, OWNER)
        assert (refused.value.cap, refused.value.limit) == ("store", 100)
        with pytest.raises(CapReached):
            store.save(new_conversation_id(), "c", 0, OWNER)
        store.save(a, "A" * 50, 1, OWNER)  # a save that does not grow its conversation is kept
        assert store.load(a, OWNER).payload == "A" * 50
    finally:
        store.close()


def backdate_creation(store, owner: str, hours: float) -> None:
    if isinstance(store, SqliteStore):
        with store._lock:
            store._connect().execute("UPDATE conversations SET created_at = created_at - ? WHERE owner = ?", (hours * 3600, owner))
    else:
        store.db.run(
            lambda c: c.execute(
                "UPDATE memora_conversations SET created_at = created_at - %s WHERE owner = %s", (timedelta(hours=hours), owner)
            )
        )


def test_a_refused_save_keeps_the_turn_says_which_cap_and_the_next_turn_is_refused_before_it_is_sent(tmp_path):
    # A turn the page did not admit (the REPL's, say): its save is refused, and it stays in the session.
    store = SqliteStore(tmp_path / "c.sqlite3", StoreCaps(conversation_bytes=len(dumps_saved(talked("Hello."), "en")) + 200))
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory := ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    chat(memory, "Hello.")
    assert keeper.saved and keeper.refusal is None
    saved = store.load(keeper.conversation_id, OWNER)
    chat(memory, "A second turn that makes the conversation too large to keep.")
    assert len(memory.history) == 4, "the turn stays in the session"
    assert keeper.refusal.cap == "conversation" and not keeper.dirty and keeper.failure is None
    assert keeper.room("And a third?").cap == "conversation"
    assert store.load(keeper.conversation_id, OWNER) == saved


def test_a_choices_only_save_that_conflicts_does_not_copy_the_conversation(tmp_path):
    store = SqliteStore(tmp_path / "c.sqlite3")
    first = ConversationKeeper(store, owner=OWNER)
    first.attach(memory := talked("Shared start."))
    first.save(memory)
    second = reopen(store, first.conversation_id, ShortTermMemory(ScriptedBackend()), owner=OWNER, locked=False)
    second.keeper.attach(second.memory)
    chat(memory, "Only in tab A.")
    second.keeper.language = "zh-TW"  # a language switch in tab B, after tab A saved
    assert second.keeper.save_changed_choices() is False
    assert second.keeper.fork is None and second.keeper.conversation_id == first.conversation_id
    with store._lock:
        assert store._connect().execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == 1
    assert second.keeper.save_changed_choices() is True, "not tried again on every run"


def test_an_import_refused_by_a_cap_leaves_the_keeper_on_its_conversation(tmp_path):
    store = SqliteStore(tmp_path / "c.sqlite3", StoreCaps(new_per_hour=1))
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory := talked("Mine."))
    keeper.save(memory)
    cid = keeper.conversation_id
    imported = talked("From a file.")
    refused = save_import(keeper, imported)
    assert refused.cap == "browser"
    assert (keeper.memory, keeper.conversation_id, keeper.version, keeper.refusal) == (memory, cid, 1, None)
    chat(memory, "Still saved here.")
    assert len(parse_saved(store.load(cid, OWNER).payload).transcript.history) == 4


# -- a restore brings back what the page saved (issue 20) ------------------------------------------------


def test_a_page_saved_conversation_over_the_import_caps_comes_back_but_the_same_file_is_not_imported(store):
    limits = SessionLimits(max_message_chars=40, max_turns=2, max_session_tokens=150)
    long_reply = "A reply much longer than the forty characters a student may type. " * 3
    memory = ShortTermMemory(ScriptedBackend(reply_text=lambda request: long_reply), caps=limits)
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    chat(memory, "Hello there.", "Tell me more.")
    assert memory.session_total_tokens > 150, "the last turn ended a little over the session's cap"
    session = ShortTermMemory(ScriptedBackend(), caps=limits)
    reopened = reopen(store, keeper.conversation_id, session, owner=OWNER, locked=True)
    assert reopened.outcome == "restored" and reopened.memory.history == memory.history
    with pytest.raises(ValueError):
        reopened.memory.plan("One more?")  # the caps still hold for the next turn
    exported = dumps_transcript(memory)
    with pytest.raises(TranscriptError) as refused:
        continue_in_session(parse_transcript(exported), session, locked=True)
    assert refused.value.code == "message_over_cap"


# -- deleting a conversation, forgetting a browser (issue 28: a shared computer forgets) ---------------

PHONE = "0912 345 678"


def test_a_deleted_conversation_is_gone_with_every_version_and_only_its_owner_can_delete_it(store):
    cid = new_conversation_id()
    for version in range(3):
        store.save(cid, json.dumps({"turn": version, "phone": PHONE}), version, OWNER)
    other = new_owner()
    assert store.delete(cid, other) is False, "another browser's delete is a no-op, like a missing id"
    assert store.load(cid, OWNER).version == 3
    assert store.delete(cid, OWNER) is True
    assert store.load(cid, OWNER) is None
    assert store.delete(cid, OWNER) is False
    with pytest.raises(Gone):  # a tab still on version 3 cannot write it back under its old id
        store.save(cid, json.dumps({"turn": 3}), 3, OWNER)
    with pytest.raises(Gone):  # nor as a copy under a new one (its tombstone is checked on every save)
        store.save(new_conversation_id(), json.dumps({"turn": 3}), 0, OWNER, forked_from=cid)
    assert store.load(cid, OWNER) is None and owned(store) == 0


def test_deleting_an_owner_deletes_all_its_conversations_and_no_one_elses(store):
    other = new_owner()
    mine = [new_conversation_id() for _ in range(3)]
    for cid in mine:
        store.save(cid, '{"mine": true}', 0, OWNER)
    theirs = new_conversation_id()
    store.save(theirs, '{"theirs": true}', 0, other)
    assert store.delete_owner(OWNER) == 3
    assert all(store.load(cid, OWNER) is None for cid in mine)
    assert store.load(theirs, other).payload == '{"theirs": true}'
    assert store.delete_owner(OWNER) == 0


def test_a_deleted_sqlite_conversation_leaves_none_of_its_text_in_the_files(tmp_path):
    """SQLite keeps every earlier save of a row as a frame of its write-ahead log until a checkpoint, and a
    deleted row's bytes in freed pages unless ``secure_delete`` is on: both are scrubbed by a deletion."""
    store = SqliteStore(tmp_path / "data" / "conversations.sqlite3")
    keep = new_conversation_id()
    store.save(keep, json.dumps({"text": "x" * 20_000}), 0, OWNER)
    cid = new_conversation_id()
    for version in range(6):
        store.save(cid, json.dumps({"history": [PHONE] * (version + 1), "padding": "y" * 5_000 * version}), version, OWNER)

    def on_disk() -> bytes:
        return b"".join(path.read_bytes() for path in (tmp_path / "data").iterdir())

    assert on_disk().count(PHONE.encode()) >= 6
    assert store.delete(cid, OWNER)
    assert PHONE.encode() not in on_disk()
    cids = [new_conversation_id() for _ in range(2)]
    for cid in cids:
        store.save(cid, json.dumps({"phone": PHONE}), 0, OWNER)
    assert store.delete_owner(OWNER) == 3
    assert PHONE.encode() not in on_disk()
    store.close()


def test_a_deleted_conversations_late_turn_saves_nothing_and_the_keeper_starts_anew(store):
    """A reply still being written when the conversation is deleted commits into the old memory afterwards:
    it must neither write the old id back nor fork it to a new one."""
    memory = talked("My phone is " + PHONE + ".")
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    keeper.save(memory)
    deleted = keeper.conversation_id
    keeper.delete()
    assert keeper.conversation_id != deleted and not keeper.saved and keeper.memory is None
    chat(memory, "A turn that finished late, in another thread.")
    assert store.load(deleted, OWNER) is None and store.load(keeper.conversation_id, OWNER) is None
    assert keeper.fork is None and owned(store) == 0, "nothing of it was saved anywhere"
    fresh = ShortTermMemory(ScriptedBackend())
    keeper.attach(fresh)
    chat(fresh, "A new start.")
    assert parse_saved(store.load(keeper.conversation_id, OWNER).payload).transcript.history[0].content == "A new start."


def test_a_store_that_cannot_delete_changes_nothing(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    memory = talked("Keep me.")
    keeper = ConversationKeeper(store, owner=OWNER)
    keeper.attach(memory)
    keeper.save(memory)
    cid = keeper.conversation_id
    store.down = True
    with pytest.raises(StoreError):
        keeper.delete()
    with pytest.raises(StoreError):
        keeper.forget_browser()
    assert (keeper.conversation_id, keeper.version, keeper.memory) == (cid, 1, memory)
    store.down = False
    chat(memory, "Still kept.")
    assert store.load(cid, OWNER).version == 2
