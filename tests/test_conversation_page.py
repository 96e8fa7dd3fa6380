"""The page keeps its conversation: a reload (a new AppTest with the same ?c= and the same browser) brings it back.

Issue 14 part 1, and issue 20's owners and caps. AppTest sends no cookie, so a test is a browser by
putting that browser's secret in session state, as the cookie would have given it
(``memora.app.page.conversation.browser_secret``).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from memora.app.page import session_guard, turn
from memora.app.page import state as keys
from memora.app.page.conversation import shared_store
from memora.app.page.picture import picture_caption, request_picture
from memora.classroom.store.keeper import ConversationKeeper
from memora.classroom.store.owner import new_browser_secret, owner_of
from memora.classroom.store.reopen import reopen
from memora.classroom.store.saved import parse_saved
from memora.classroom.store.sqlite import SqliteStore
from memora.classroom.transcript.format import dumps_transcript
from memora.memory import ShortTermMemory
from tests.support.app import APP, open_panels, send, texts, tree_text
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import FlakyStore

pytestmark = pytest.mark.usefixtures("no_secrets")


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    path = tmp_path / "store" / "conversations.sqlite3"
    monkeypatch.setenv("MEMORA_STORE_URL", f"sqlite:///{path}")
    return path


TEACHER = new_browser_secret()
"""The browser most tests use: its cookie's secret."""


def open_page(conversation_id: str | None = None, browser: str = TEACHER) -> AppTest:
    """A new tab of ``browser`` on the page, its Settings and Teaching tools open: a reload is one with the same id in
    the URL, in the same browser."""
    at = open_panels(AppTest.from_file(APP, default_timeout=30))
    at.session_state[keys.BROWSER_SECRET] = browser
    if conversation_id is not None:
        at.query_params["c"] = conversation_id
    return at.run()


def conversation_id(at: AppTest) -> str:
    return at.session_state[keys.CONVERSATION].conversation_id


def test_a_reload_brings_the_conversation_back_as_it_was(store_path):
    at = open_page()
    assert "c" not in at.query_params  # not in the URL until something is saved
    assert "not long-term memory" in texts(at)
    send(at, "My name is Ana.")
    send(at, "I live in Porto.")
    cid = at.query_params["c"]
    assert cid == conversation_id(at) and store_path.exists()
    before = at.session_state[keys.MEMORY]

    reloaded = open_page(cid)
    memory = reloaded.session_state[keys.MEMORY]
    assert memory.history == before.history and len(memory.ledger) == len(before.ledger)  # coming back sent nothing
    assert "Your conversation is back" in texts(reloaded) and "Kept for this browser" in texts(reloaded)
    assert cid not in tree_text(reloaded), "the id is in the URL only, never on the page"
    assert reloaded.query_params["c"] == cid
    send(reloaded, "I like tea.")
    assert len(open_page(cid).session_state[keys.MEMORY].history) == 6


def test_a_restored_conversations_status_says_what_happened_before_it_was_opened(store_path, monkeypatch):
    monkeypatch.setenv("MEMORA_MAX_RECENT_TURNS", "1")
    at = open_page()
    for text in ("My name is Ana.", "I live in Porto.", "I am a nurse."):
        send(at, text)
    folded = at.session_state[keys.MEMORY].summarized_message_count
    assert folded == 4
    sent = at.session_state[keys.MEMORY].last_prepared

    reloaded = open_page(at.query_params["c"])
    page = texts(reloaded)
    # What was folded before the page opened is told, never "nothing folded". The last request comes back with the
    # conversation (issue 36): the page reads it as it was sent, never "0 tokens", and draws it at the sidebar's top.
    # The last fold's reason comes back with its version (issue 43): Status says why, as before the reload.
    assert "The last fold (summary v2, messages 3–4): pairs left the recent window." in page
    assert reloaded.session_state[keys.MEMORY].last_prepared == sent
    assert f"the last request sent {sent.input_tokens:,}" in page
    restored = reloaded.session_state[keys.MEMORY]
    assert sent.parts is not None and restored.last_prepared.parts == sent.parts
    assert picture_caption(request_picture(sent.parts), "en") in page
    assert [v.reason for v in reloaded.session_state[keys.MEMORY].conversation.versions] == ["window", "window"]
    assert "Nothing has been folded yet" not in page and "the last request sent 0" not in page


def test_the_language_comes_back_with_the_conversation(store_path):
    at = open_page()
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    send(at, "Hello.")
    reloaded = open_page(at.query_params["c"])
    assert reloaded.session_state[keys.LANG] == "zh-TW"
    assert "不是長期記憶" in texts(reloaded)


def test_a_language_or_budget_changed_after_the_last_turn_is_kept_too(store_path):
    at = open_page()
    send(at, "Hello.")
    at.radio(key=keys.LANG).set_value("zh-TW").run()
    at.number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    reloaded = open_page(at.query_params["c"])
    assert reloaded.session_state[keys.LANG] == "zh-TW"
    assert reloaded.session_state[keys.MEMORY].max_input_tokens == 1500


def click(at: AppTest, label: str) -> AppTest:
    return next(button for button in at.button if button.label == label).click().run()


def test_deleting_a_conversation_removes_it_from_the_store_and_its_address_opens_nothing(store_path):
    first_tab, second_tab = open_page(), open_page()
    send(first_tab, "My phone number is 0912 345 678.")
    send(first_tab, "Call me tonight.")
    send(second_tab, "Another conversation of this browser.")
    first, second = first_tab.query_params["c"], second_tab.query_params["c"]
    click(first_tab, "Yes, delete it")
    assert "c" not in first_tab.query_params and not first_tab.session_state[keys.MEMORY].history
    assert "deleted from this server" in texts(first_tab)
    assert [row[0] for row in stored_rows(store_path)] == [second]
    assert b"0912 345 678" not in b"".join(p.read_bytes() for p in store_path.parent.iterdir())
    reopened = open_page(first)
    assert not reopened.session_state[keys.MEMORY].history and "0912" not in tree_text(reopened)
    assert "not one of this browser's" in texts(reopened)
    send(first_tab, "A new start.")  # the deleting tab goes on as a new conversation, under a new id
    assert first_tab.query_params["c"] not in (first, second)
    assert open_page(second).session_state[keys.MEMORY].history[0].content == "Another conversation of this browser."


def test_forgetting_the_browser_deletes_all_its_conversations_replaces_its_cookie_and_spares_other_browsers(store_path):
    student = new_browser_secret()
    tab, other_tab, students_tab = open_page(), open_page(), open_page(browser=student)
    send(tab, "Teacher, first conversation.")
    send(other_tab, "Teacher, second conversation.")
    send(students_tab, "The student's own.")
    old_ids = (tab.query_params["c"], other_tab.query_params["c"])
    click(tab, "Yes, forget this browser")
    assert "2 saved conversation(s) deleted" in texts(tab)
    assert [row[3] for row in stored_rows(store_path)] == [owner_of(student)]
    new_secret = tab.session_state[keys.BROWSER_SECRET]
    assert new_secret != TEACHER and tab.session_state[keys.FORGOTTEN_SECRET] == TEACHER
    # The page's cookie script replaces the cookie that holds the forgotten secret with the new one.
    script = tab.get("html")[0].proto.body
    assert json.dumps(TEACHER) in script and json.dumps(new_secret) in script
    for old in old_ids:
        assert not open_page(old).session_state[keys.MEMORY].history
    send(tab, "After forgetting.")
    assert {row[3] for row in stored_rows(store_path)} == {owner_of(student), owner_of(new_secret)}


def test_a_store_that_cannot_delete_says_so_and_the_conversation_stays_kept(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.CONVERSATION] = keeper = ConversationKeeper(store)
    at.run()
    send(at, "Keep me until the store is back.")
    cid = at.query_params["c"]
    store.down = True
    click(at, "Yes, delete it")
    assert "could not be deleted" in texts(at) and "disk I/O error" in texts(at)
    assert at.session_state[keys.MEMORY].history[0].content == "Keep me until the store is back."
    assert at.query_params["c"] == cid and keeper.conversation_id == cid
    store.down = False
    send(at, "Still saved.")
    assert len(parse_saved(store.load(cid, keeper.owner).payload).transcript.history) == 4


def test_an_imported_conversation_gets_its_own_id_and_is_saved_at_once(store_path):
    at = open_page()
    send(at, "Before the import.")
    before = at.query_params["c"]
    imported = at.session_state[keys.MEMORY].__class__(at.session_state[keys.MEMORY].server.backend)
    chat(imported, "From the file.")
    at.session_state[keys.MEMORY] = imported  # what the import button's callback does
    at.run()
    after = at.query_params["c"]
    assert after != before
    assert open_page(after).session_state[keys.MEMORY].history[0].content == "From the file."
    assert open_page(before).session_state[keys.MEMORY].history[0].content == "Before the import."


def test_a_second_tab_with_nothing_unsaved_goes_on_with_what_the_first_saved_in_one_conversation(store_path):
    """Tab B opened the conversation, tab A then sent: B's message is sent on the conversation as A left it (B opens
    the later version first, and says so), so the conversation stays one and neither tab loses a turn. Opening B
    and running it again saves nothing: a reopened conversation is not written merely for being open."""
    tab_a = open_page()
    send(tab_a, "Shared start.")
    cid = tab_a.query_params["c"]
    tab_b = open_page(cid)
    tab_b.run()
    assert tab_b.session_state[keys.CONVERSATION].version == tab_a.session_state[keys.CONVERSATION].version == 1
    send(tab_a, "Only in tab A.")
    send(tab_b, "And in tab B.")
    assert tab_b.query_params["c"] == tab_a.query_params["c"] == cid and len(stored_rows(store_path)) == 1
    assert "Another tab of this browser saved a newer version of this conversation" in texts(tab_b)
    store = SqliteStore(store_path)
    history = [m.content for m in parse_saved(store.load(cid, owner_of(TEACHER)).payload).transcript.history]
    store.close()
    assert history[::2] == ["Shared start.", "Only in tab A.", "And in tab B."], "both tabs' turns, in one conversation"


def test_a_setting_a_second_tab_changed_is_carried_onto_the_version_the_first_saved_in_one_conversation(store_path):
    """Tab B changed its budget after tab A saved: a changed setting is not unsaved work (issue 44), so B's next
    message opens A's version, re-applies B's budget to it and is sent there, under the same id; no copy is made."""
    tab_a = open_page()
    send(tab_a, "Shared start.")
    cid = tab_a.query_params["c"]
    tab_b = open_page(cid)
    send(tab_a, "Only in tab A.")
    tab_b.number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    send(tab_b, "And in tab B.")
    assert tab_b.query_params["c"] == tab_a.query_params["c"] == cid and len(stored_rows(store_path)) == 1
    assert "Another tab of this browser saved this conversation" not in texts(tab_b)
    assert tab_b.session_state[keys.MEMORY].max_input_tokens == 1500 == tab_b.number_input(key=keys.BUDGET_INPUT).value
    store = SqliteStore(store_path)
    saved = parse_saved(store.load(cid, owner_of(TEACHER)).payload)
    store.close()
    assert [m.content for m in saved.transcript.history][::2] == ["Shared start.", "Only in tab A.", "And in tab B."]
    assert saved.transcript.settings.max_input_tokens == 1500, "B's budget, saved with the conversation"


def test_a_failed_save_keeps_the_conversation_says_so_and_retries(tmp_path):
    store = FlakyStore(SqliteStore(tmp_path / "c.sqlite3"))
    at = AppTest.from_file(APP, default_timeout=30)
    at.session_state[keys.CONVERSATION] = keeper = ConversationKeeper(store)
    at.run()
    store.down = True
    send(at, "Do not lose me.")
    assert at.session_state[keys.MEMORY].history[0].content == "Do not lose me."
    assert "could not be saved" in texts(at) and "disk I/O error" in texts(at)
    assert "c" not in at.query_params
    store.down = False
    at.run()  # any next step retries
    cid = at.query_params["c"]
    assert "could not be saved" not in texts(at)
    assert parse_saved(store.load(cid, keeper.owner).payload).transcript.history[0].content == "Do not lose me."


def test_a_missing_or_malformed_id_opens_a_new_conversation_and_says_why(store_path):
    missing = open_page("A" * 32)
    assert "not one of this browser's" in texts(missing) and "30 days" in texts(missing) and "AAAA" not in texts(missing)
    assert "c" not in missing.query_params
    malformed = open_page("<img src=x>")
    assert "not one Memora makes" in texts(malformed) and "<img" not in texts(malformed)


def test_with_the_store_off_nothing_is_kept_and_the_page_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORA_STORE_URL", "off")
    at = open_page()
    send(at, "Hello.")
    assert "c" not in at.query_params and "not kept on this server" in texts(at)
    assert not (tmp_path / ".memora" / "conversations.sqlite3").exists()


def test_a_reload_through_postgresql_served_by_another_process_of_the_class(monkeypatch, postgres_url):
    """The same round trip with the store in the real PostgreSQL that .ci/run starts."""
    url = postgres_url
    monkeypatch.setenv("MEMORA_STORE_URL", url)
    at = open_page()
    send(at, "Saved in PostgreSQL.")
    cid = at.query_params["c"]
    shared_store.clear()  # as a second process would: its own connection to the same database
    reloaded = open_page(cid)
    assert reloaded.session_state[keys.MEMORY].history[0].content == "Saved in PostgreSQL."
    assert "Kept for this browser" in texts(reloaded)


# -- issue 20: a conversation belongs to the browser that made it; the store's caps ------------------------


def stored_rows(store_path) -> list[tuple]:
    """Every row of the store as it is on disk: id, version, payload, owner."""
    with sqlite3.connect(store_path) as db:
        rows = db.execute("SELECT id, version, payload, owner FROM conversations ORDER BY id").fetchall()
    db.close()
    return rows


def test_a_shared_link_opens_a_new_conversation_in_another_browser_and_never_touches_the_teachers(store_path):
    teacher = open_page()
    send(teacher, "My private note: the quiz answers are B, C, A.")
    cid = teacher.query_params["c"]
    before = stored_rows(store_path)

    student = open_page(cid, browser=new_browser_secret())
    assert "quiz answers" not in tree_text(student) and not student.session_state[keys.MEMORY].history
    assert "not one of this browser's" in texts(student) and "Export and Import" in texts(student)
    assert "c" not in student.query_params and conversation_id(student) != cid
    student.radio(key=keys.LANG).set_value("zh-TW").run()  # a language switch on the shared link
    send(student, "The student's own question.")
    assert student.query_params["c"] != cid
    assert [row for row in stored_rows(store_path) if row[0] == cid] == [row for row in before if row[0] == cid]

    reloaded = open_page(cid)  # the teacher's F5
    history = reloaded.session_state[keys.MEMORY].history
    assert history[0].content == "My private note: the quiz answers are B, C, A." and len(history) == 2
    assert reloaded.session_state[keys.LANG] == "en" and "student's own" not in tree_text(reloaded)


@pytest.mark.parametrize(
    "hostile",
    [
        "../../../etc/passwd",
        "' OR 1=1; DROP TABLE conversations; --",
        "A" * 60_000,
        "Ωμέγα🙂" * 5 + "AAAAAAAAAAAAAAAAAAAAAA",
        "A" * 16 + "\x00" + "A" * 15,
    ],
)
def test_a_hostile_id_opens_an_empty_page_and_leaves_the_store_untouched(store_path, hostile):
    teacher = open_page()
    send(teacher, "Already saved.")
    before = stored_rows(store_path)
    at = open_page(hostile)
    assert not at.session_state[keys.MEMORY].history and "c" not in at.query_params
    assert "not one Memora makes" in texts(at) and hostile[:20] not in tree_text(at)
    assert stored_rows(store_path) == before


def test_at_the_new_conversations_cap_a_message_is_refused_before_it_is_sent_and_comes_back(store_path, monkeypatch):
    monkeypatch.setenv("MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR", "1")
    at = open_page()
    send(at, "The first conversation.")
    first = at.query_params["c"]
    at = open_page()  # a new tab of the same browser starts a new conversation
    at.chat_input[0].set_value("A second one, over the cap.").run()
    assert not at.session_state[keys.MEMORY].history, "nothing was sent for a turn that could not be kept"
    assert "started 1 conversations in the last hour" in texts(at)
    assert at.chat_input[0].value == "A second one, over the cap."
    assert [row[0] for row in stored_rows(store_path)] == [first]


def test_second_tabs_at_the_hourly_cap_go_on_in_the_conversation_and_the_cap_is_not_involved(store_path, monkeypatch):
    """Issue 39's second break: the browser at its hourly cap, two tabs on one conversation. A second tab with no
    unsaved work goes on with the conversation as the first left it, so no copy is made and the cap is not involved;
    since issue 44 a changed setting (its budget) is not unsaved work either: it is carried onto that version. A tab
    whose copy the cap would refuse (unsaved turns of its own) is refused before anything is sent:
    tests/test_store_room.py drives that one through the keeper."""
    monkeypatch.setenv("MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR", "2")
    tab_a = open_page()
    send(tab_a, "Shared start.")
    cid = tab_a.query_params["c"]
    send(open_page(), "A second conversation this hour: the browser is at its cap.")
    tab_b, tab_c = open_page(cid), open_page(cid)
    send(tab_a, "Only in tab A.")
    send(tab_c, "Tab C goes on with it.")
    assert tab_c.query_params["c"] == cid and len(stored_rows(store_path)) == 2, "no copy: the cap had nothing to refuse"
    tab_b.number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    send(tab_b, "And tab B, with its budget.")
    assert tab_b.query_params["c"] == cid and len(stored_rows(store_path)) == 2, "no copy: its budget is carried over"
    assert "would start a copy" not in texts(tab_b)
    assert [m.content for m in tab_b.session_state[keys.MEMORY].history][::2][-3:] == [
        "Only in tab A.",
        "Tab C goes on with it.",
        "And tab B, with its budget.",
    ]
    assert tab_b.session_state[keys.MEMORY].max_input_tokens == 1500


def test_after_delete_another_tab_of_the_conversation_sends_and_saves_nothing(store_path):
    """Issue 39's third break: after Delete in tab A, tab B saved the whole conversation under a new id."""
    tab_a = open_page()
    send(tab_a, "My phone number is 0912 345 678.")
    tab_b = open_page(tab_a.query_params["c"])
    click(tab_a, "Yes, delete it")
    tab_b.chat_input[0].set_value("Are you still there?").run()
    assert len(tab_b.session_state[keys.MEMORY].history) == 2, "refused before it was sent"
    assert "deleted in another tab" in texts(tab_b) and tab_b.chat_input[0].value == "Are you still there?"
    assert stored_rows(store_path) == []
    assert b"0912 345 678" not in b"".join(p.read_bytes() for p in store_path.parent.iterdir())


def test_after_forget_another_tab_of_the_old_browser_sends_and_saves_nothing(store_path):
    tab, other_tab = open_page(), open_page()
    send(tab, "Mine.")
    send(other_tab, "Also mine, in another tab.")
    click(tab, "Yes, forget this browser")
    other_tab.chat_input[0].set_value("Still here?").run()
    assert len(other_tab.session_state[keys.MEMORY].history) == 2 and "forgotten in another tab" in texts(other_tab)
    assert [row for row in stored_rows(store_path) if row[3] == owner_of(TEACHER)] == [], "nothing under the old cookie"


def test_an_import_over_the_conversation_cap_is_refused_and_nothing_changes(store_path, monkeypatch):
    monkeypatch.setenv("MEMORA_MAX_CONVERSATION_KB", "512")  # room for a first turn at its largest (memora.classroom.store.room)
    at = open_page()
    send(at, "Mine, before the import.")
    cid, before = at.query_params["c"], stored_rows(store_path)
    padded = json.loads(dumps_transcript(at.session_state[keys.MEMORY]))
    padded["last_context"] = [{"role": "user", "content": "padding " * 1_000}] * 80  # the bulk a hostile file puts in the last context
    del padded["last_request"]  # as a file written before the last request was kept: its figures would not match
    at.file_uploader(key=keys.IMPORT_INPUT).set_value(("big.json", json.dumps(padded).encode(), "application/json")).run()
    next(b for b in at.button if b.label == "Continue from this file").click().run()
    assert "was not imported" in texts(at) and "512 KB" in texts(at)
    assert at.query_params["c"] == cid and at.session_state[keys.MEMORY].history[0].content == "Mine, before the import."
    assert stored_rows(store_path) == before


def test_a_page_saved_reply_over_the_message_cap_comes_back_on_reload_but_the_same_file_is_not_imported(store_path, monkeypatch):
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
    monkeypatch.setenv("MEMORA_MAX_MESSAGE_CHARS", "60")
    at = open_page()
    send(at, "Hello there.")
    memory = at.session_state[keys.MEMORY]
    assert len(memory.history[1].content) > 60, "the offline engine's reply is longer than a student may type"
    reloaded = open_page(at.query_params["c"])
    assert reloaded.session_state[keys.MEMORY].history == memory.history and "Your conversation is back" in texts(reloaded)
    exported = dumps_transcript(memory)
    reloaded.file_uploader(key=keys.IMPORT_INPUT).set_value(("mine.json", exported, "application/json")).run()
    next(b for b in reloaded.button if b.label == "Continue from this file").click().run()
    assert "message_over_cap" in texts(reloaded), "a file from outside keeps the import caps"


# -- a conversation has one home (issue 44, finding 1) -------------------------------------------------------------


def stopping_process_mid_reply(store_path, cid: str) -> ConversationKeeper:
    """The process that served ``cid`` before a roll: it opened the conversation and booked a turn, which runs on
    through its grace (alive by the store's account: on SQLite its pid, this test's own)."""
    store = SqliteStore(store_path)
    opened = reopen(store, cid, ShortTermMemory(ScriptedBackend(), max_recent_turns=1), owner=owner_of(TEACHER), locked=False)
    assert opened.memory is not None
    opened.keeper.attach(opened.memory)
    assert opened.keeper.room("Where do I live?") is None, "its turn is booked: it runs there when the roll begins"
    return opened.keeper


def finish_in_grace(stopping: ConversationKeeper) -> None:
    """The stopping process finishes the reply within its grace, saves it, and its turn ends."""
    chat(stopping.memory, "Where do I live?")
    stopping.release_room()
    stopping.store.close()


def test_a_page_opened_while_its_last_reply_is_finished_elsewhere_says_so_and_shows_the_reply_once_it_lands(store_path):
    """Her page comes back (here: opens) while another process is still finishing her last reply: the page says so,
    and its next look after that reply's save shows it, under the same id, before she sends anything. A page with no
    turn running elsewhere asks nothing on its later runs (``render_finishing``)."""
    at = open_page()
    send(at, "Hello, I am Ana.")
    cid = at.query_params["c"]
    stopping = stopping_process_mid_reply(store_path, cid)

    page = open_page(cid)
    assert page.session_state[keys.FINISHING] is True
    assert "Your last reply is still being finished" in texts(page)
    page.run()
    assert "Your last reply is still being finished" in texts(page), "it keeps looking while that turn runs"
    finish_in_grace(stopping)
    page.run()
    assert page.session_state[keys.FINISHING] is False
    history = [m.content for m in page.session_state[keys.MEMORY].history]
    assert history[::2] == ["Hello, I am Ana.", "Where do I live?"], "the reply the stopping process saved"
    assert page.query_params["c"] == cid and page.session_state[keys.CONVERSATION].version == 2
    assert "Your last reply is still being finished" not in texts(page)
    send(page, "And where do I work?")
    assert len(stored_rows(store_path)) == 1, "one conversation: no copy"
    turns = [m.content for m in page.session_state[keys.MEMORY].history][::2]
    assert turns == ["Hello, I am Ana.", "Where do I live?", "And where do I work?"]


def test_a_page_with_no_turn_running_elsewhere_asks_the_store_once_as_it_opens_and_never_again(store_path, monkeypatch):
    """The look for a reply finished elsewhere costs a page with none nothing on its runs: one read-only question as
    the conversation is opened, none on any later run, no fragment drawn."""
    at = open_page()
    send(at, "Hello, I am Ana.")
    cid = at.query_params["c"]
    asked: list[str] = []
    running = SqliteStore.running

    def counted(store: SqliteStore, conversation_id: str, holder: str, owner: str | None = None) -> bool:
        asked.append(conversation_id)
        return running(store, conversation_id, holder, owner)

    monkeypatch.setattr(SqliteStore, "running", counted)
    page = open_page(cid)
    assert asked == [cid] and page.session_state[keys.FINISHING] is False
    for _ in range(3):
        page.run()
    send(page, "Where do I live?")
    assert asked == [cid], "no question on a later run (a message asks only inside its own room booking)"


def test_a_page_that_came_back_after_a_restart_never_calls_the_finished_reply_another_tabs(store_path, monkeypatch):
    """The reply the stopping process saved between her page's return and her next message: a page that came back
    on this process after its own stopped (``session_guard.came_back``) says it was finished and saved while the
    server restarted; the same catch-up in a page that did not come back (a real second tab) says another tab."""
    at = open_page()
    send(at, "Hello, I am Ana.")
    cid = at.query_params["c"]
    cases = ((True, "The server restarted while your last reply was being written"), (False, "Another tab of this browser"))
    for came_back, words in cases:
        monkeypatch.setattr(session_guard, "came_back", lambda came_back=came_back: came_back)
        page = open_page(cid)
        stopping = stopping_process_mid_reply(store_path, cid)
        finish_in_grace(stopping)
        send(page, "And where do I work?")
        assert words in texts(page)
        other = "Another tab" if came_back else "The server restarted"
        assert other not in texts(page)
        assert page.query_params["c"] == cid and len(stored_rows(store_path)) == 1, "one conversation: no copy"
        assert [m.content for m in page.session_state[keys.MEMORY].history][-4::2] == ["Where do I live?", "And where do I work?"]
    # The page that came back has sent a turn of its own since: a later catch-up is another tab's, and says so.
    monkeypatch.setattr(session_guard, "came_back", lambda: True)
    page = open_page(cid)
    send(page, "One.")
    finish_in_grace(stopping_process_mid_reply(store_path, cid))
    send(page, "Two.")
    assert "Another tab of this browser" in texts(page) and "The server restarted" not in texts(page)


def test_a_message_sent_while_her_last_reply_is_finished_elsewhere_waits_for_its_save_and_follows_it(store_path, monkeypatch):
    """She sends before the stopping process has saved her last reply: the message waits for that turn, as long as
    it runs (``ConversationKeeper.room``), while the page says her last reply is being finished; then it is sent on
    the version that save left, under the same id, with the reply before it."""
    at = open_page()
    send(at, "Hello, I am Ana.")
    cid = at.query_params["c"]
    page = open_page(cid)
    stopping = stopping_process_mid_reply(store_path, cid)
    said: list[str] = []
    say = turn._say_finishing

    def saying_then_saved(lang: str) -> None:  # the page is told; meanwhile the stopping process's save lands
        say(lang)
        said.append(lang)
        finish_in_grace(stopping)

    monkeypatch.setattr(turn, "_say_finishing", saying_then_saved)
    send(page, "And where do I work?")
    assert said == ["en"], "told once, as the wait began"
    assert page.query_params["c"] == cid and len(stored_rows(store_path)) == 1, "one conversation: no copy"
    turns = [m.content for m in page.session_state[keys.MEMORY].history][::2]
    assert turns == ["Hello, I am Ana.", "Where do I live?", "And where do I work?"]
    assert "Your last reply is still being finished" not in texts(page), "the run that sends it no longer says so"


@pytest.mark.parametrize("sends", [False, True], ids=["looks_again", "sends_meanwhile"])
def test_a_page_back_during_the_first_reply_keeps_its_id_and_goes_on_with_that_reply(store_path, monkeypatch, sends):
    """The stop came during the conversation's first reply: the store holds no row yet when her page comes back, only
    the stopping process's booking. The page keeps the id (not "not here", not a new conversation) and says her last
    reply is being finished; once its save lands, the next look, or the message she sent meanwhile, opens it. One
    conversation, with her first turn in it."""
    stopping = ConversationKeeper(SqliteStore(store_path), owner=owner_of(TEACHER))
    stopping.attach(ShortTermMemory(ScriptedBackend(), max_recent_turns=1))
    cid = stopping.conversation_id
    assert stopping.room("Hello, I am Ana.") is None, "the first turn is booked: the id is not in the store yet"

    page = open_page(cid)
    assert "Your last reply is still being finished" in texts(page) and "not one of this browser's" not in texts(page)
    assert page.query_params["c"] == cid and conversation_id(page) == cid
    if sends:
        say = turn._say_finishing

        def saying_then_saved(lang: str) -> None:
            say(lang)
            chat(stopping.memory, "Hello, I am Ana.")
            stopping.release_room()

        monkeypatch.setattr(turn, "_say_finishing", saying_then_saved)
    else:
        chat(stopping.memory, "Hello, I am Ana.")
        stopping.release_room()
        page.run()
        assert [m.content for m in page.session_state[keys.MEMORY].history][::2] == ["Hello, I am Ana."]
    send(page, "Where do I live?")
    stopping.store.close()
    assert page.query_params["c"] == cid and len(stored_rows(store_path)) == 1, "one conversation: no copy"
    assert [m.content for m in page.session_state[keys.MEMORY].history][::2] == ["Hello, I am Ana.", "Where do I live?"]
