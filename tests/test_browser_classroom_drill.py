"""Issue 20's classroom drill in Chromium: a teacher shares her URL, and no student sees or changes her conversation.

One `streamlit run` (offline, its store in a temporary SQLite file, settings locked as in a class);
a teacher and seven students, each a Playwright browser context of its own (own cookies, own
websocket). Checked: the teacher's first save is bound to the hash of the cookie her first visit set
(never the secret itself); five students opening her address-bar URL at once each get a new
conversation and a notice, none of her text in their DOM or websocket frames, and one of them
switches the language there; her row in the store is unchanged byte for byte, and her F5 brings her
conversation back as it was, in English; the page never shows her id; the bare class link the page
offers gives two more students a conversation each of their own.

Skipped like every browser test (benchmarks/harness/browser.py) where Chromium or Playwright is missing, and
a failure instead when CI is set.
"""

from __future__ import annotations

import sqlite3

from benchmarks.harness import processes
from benchmarks.harness.browser import Person, chat_texts, chromium, page_env, require_browser, wait_idle
from benchmarks.harness.processes import ROOT
from memora.classroom.store.owner import owner_of

LOG = ROOT / "test-output" / "streamlit-classroom-drill.log"
MESSAGES = '[data-testid="stChatMessage"]'
PRIVATE = "Private note for the teacher: the quiz answers are B, C, A."


def rows(path) -> dict[str, tuple]:
    with sqlite3.connect(path) as db:
        found = {row[0]: row[1:] for row in db.execute("SELECT id, version, payload, owner FROM conversations")}
    db.close()
    return found


def test_a_teachers_shared_url_shows_and_changes_nothing_for_five_students_at_once(tmp_path):
    require_browser()
    env = page_env(tmp_path) | {"MEMORA_LOCK_SETTINGS": "true"}
    store_path = tmp_path / "data" / "conversations.sqlite3"
    with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as url, chromium() as browser:
        teacher = Person(browser, url)
        teacher.ready()
        teacher.type(PRIVATE)
        teacher.wait_for_messages(2)
        teacher.page.wait_for_function("() => new URLSearchParams(location.search).has('c')")
        cid, shared = teacher.conversation_id(), teacher.page.url
        secret = teacher.secret()
        before = rows(store_path)
        assert before[cid][2] == owner_of(secret), "the first visit's save is bound to the cookie the page set"
        assert secret not in store_path.read_bytes().decode("utf-8", "replace")
        assert cid not in teacher.page.locator("body").inner_text(), "the id is in the address bar only"

        # The class link the page offers: the bare app URL, without her id.
        teacher.page.get_by_text("Link for the class").click()
        offered = teacher.page.get_by_test_id("stCode").inner_text().strip()
        assert offered.rstrip("/") == url.rstrip("/") and cid not in offered

        # Five students open her address-bar URL at once (pages load side by side, then all type together).
        students = [Person(browser, shared) for _ in range(5)]
        for student in students:
            student.ready()
            student.page.get_by_text("not one of this browser's").wait_for()
        students[0].page.get_by_test_id("stSidebar").get_by_text("繁體中文").click()
        wait_idle(students[0].page)
        for n, student in enumerate(students):
            student.type(f"Student {n} writes into the shared link.")
        for student in students:
            student.wait_for_messages(2)
        ids = {student.conversation_id() for student in students}
        assert len(ids) == 5 and cid not in ids and None not in ids
        for n, student in enumerate(students):
            assert b"quiz answers" not in student.seen() and PRIVATE.encode() not in student.seen()
            assert len(chat_texts(student.page)) == 2 and f"Student {n} writes" in chat_texts(student.page)[0]
            assert student.secret() != secret
        after = rows(store_path)
        assert after[cid] == before[cid], "her conversation is unchanged in the store, byte for byte"
        assert {after[i][2] for i in ids} == {owner_of(s.secret()) for s in students}

        # Her F5: her conversation, as she left it, in her language.
        teacher.page.reload()
        teacher.wait_for_messages(2)
        texts = chat_texts(teacher.page)
        assert len(texts) == 2 and PRIVATE in texts[0] and "Student" not in " ".join(texts)
        teacher.page.get_by_text("Your conversation is back").wait_for()
        assert teacher.conversation_id() == cid

        # Two more students follow the class link: each a conversation of their own, with no notice.
        newcomers = [Person(browser, offered) for _ in range(2)]
        for n, newcomer in enumerate(newcomers):
            newcomer.ready()
            assert newcomer.page.get_by_text("not one of this browser's").count() == 0
            newcomer.type(f"Newcomer {n} came through the class link.")
        for newcomer in newcomers:
            newcomer.wait_for_messages(2)
            assert b"quiz answers" not in newcomer.seen() and b"Student" not in newcomer.seen()
        own = {newcomer.conversation_id() for newcomer in newcomers}
        assert len(own) == 2 and not own & (ids | {cid, None})
    assert cid.encode() not in LOG.read_bytes(), "no id in the server log"
