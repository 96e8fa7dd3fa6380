"""A shared lab computer forgets, in a real browser (issue 28, item 3 and the cookie parts of item 6).

Student A and student B use one browser profile, as on a lab computer: one Playwright context (one
cookie jar), a page each. A chats with a phone number in her messages, deletes the conversation (or
makes the browser forget her) and closes her tab; B opens A's old address from the browser's history.
Checked: B is shown nothing of A's conversation, in the DOM or in any websocket frame; the store holds
nothing of it, not even in the SQLite file's bytes; the class's token budget still counts what A's
turns were billed, including a reply cancelled mid-stream by the deletion. A separate context is a
student on a computer of her own. And the owner cookie: a malformed one is replaced (so a reload brings
the conversation back), and with cookies blocked the page says that a reload starts over.

The page runs as a teacher starts it, against a local stand-in for OpenAI (benchmarks/harness/servers.py), with
its data under a temporary folder. Skipped like every browser test (benchmarks/harness/browser.py) where Chromium
or Playwright is missing, and a failure instead when CI is set.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.harness import processes
from benchmarks.harness.browser import MESSAGES, Person, chat_texts, chromium, page_env, require_browser, wait_idle
from benchmarks.harness.processes import ROOT
from benchmarks.harness.servers import ResponsesServer, drip
from memora.app.page.browser import COOKIE
from memora.classroom.store.owner import is_browser_secret, owner_of

LOG = ROOT / "test-output" / "streamlit-forget.log"
PHONE = "0912 345 678"
KEY = "sk-test-forget-0b7c4d2e9a"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ResponsesServer]:
    with ResponsesServer(deltas=("Hello", " there", "!")) as server:
        yield server


@pytest.fixture
def page(tmp_path: Path, model_server: ResponsesServer) -> Iterator[str]:
    """`streamlit run` with the teacher's key, a server-wide token budget and its data under ``tmp_path``."""
    require_browser()
    env = page_env(tmp_path)
    env.update(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=model_server.url, MEMORA_MAX_RETRIES="0", MEMORA_MAX_SERVER_TOKENS="1000000")
    with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as url:
        yield url


def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def stored(tmp_path: Path) -> list[tuple[str, str]]:
    """Every stored conversation's (id, owner), read from the SQLite file as it is on disk."""
    with sqlite3.connect(data(tmp_path) / "conversations.sqlite3") as db:
        rows = db.execute("SELECT id, owner FROM conversations ORDER BY id").fetchall()
    db.close()
    return rows


def on_disk(tmp_path: Path) -> bytes:
    """The conversation store's files, byte for byte (the database, its write-ahead log)."""
    return b"".join(path.read_bytes() for path in data(tmp_path).glob("conversations.sqlite3*"))


def server_ledger(tmp_path: Path) -> list[tuple[int, str, int, int]]:
    """The server-wide budget's rows (``MEMORA_MAX_SERVER_TOKENS``): id, kind, tokens, settled."""
    with sqlite3.connect(data(tmp_path) / "usage.sqlite3") as db:
        rows = db.execute("SELECT id, kind, tokens, settled FROM requests ORDER BY id").fetchall()
    db.close()
    return rows


def settled_ledger(tmp_path: Path, person: Person) -> list[tuple[int, str, int, int]]:
    """``server_ledger`` once every booking is settled to its bill (a reply's is settled as its stream ends)."""
    for _ in range(100):
        rows = server_ledger(tmp_path)
        if rows and all(settled for *_, settled in rows):
            return rows
        person.page.wait_for_timeout(100)
    raise AssertionError(f"bookings still open: {rows}")


def tab(context, url: str) -> Person:
    """A new tab in ``context``: the same browser profile (the same cookie jar) as its other tabs."""
    return Person(None, url, context=context)


def confirm(person: Person, control: str, button: str) -> None:
    """Opens the sidebar's ``control`` popover and presses its ``button``, as a student would: once the page has
    drawn it open (opening it reruns the page, which draws the popover from its state)."""
    person.page.get_by_test_id("stSidebar").get_by_test_id("stPopover").filter(has_text=control).get_by_role("button").first.click()
    wait_idle(person.page)
    person.page.get_by_role("button", name=button).click()
    wait_idle(person.page)


def opens_nothing_of(person: Person, *texts: str) -> None:
    person.ready()
    assert person.page.locator(MESSAGES).count() == 0
    assert "not one of this browser's" in person.page.locator("body").inner_text()
    for text in texts:
        assert text.encode() not in person.seen()


def test_a_deleted_conversation_is_gone_for_the_next_student_on_the_same_computer(page: str, tmp_path: Path) -> None:
    with chromium() as browser:
        lab = browser.new_context(viewport={"width": 1300, "height": 1000})
        a = tab(lab, page).ready()
        a.type(f"My phone number is {PHONE}.")
        a.wait_for_messages(2)
        a.type("Please call me after class.")
        a.wait_for_messages(4)
        address = a.page.url
        assert "?c=" in address and PHONE.encode() in on_disk(tmp_path)
        billed = settled_ledger(tmp_path, a)
        assert [kind for _, kind, _, settled in billed if settled] == ["reply", "reply"]
        # A misclick only opens the confirmation: nothing is deleted until its button is pressed.
        a.page.get_by_test_id("stSidebar").get_by_test_id("stPopover").filter(has_text="Delete this conversation").get_by_role(
            "button"
        ).first.click()
        a.page.keyboard.press("Escape")
        wait_idle(a.page)  # closing it reruns the page too
        assert len(stored(tmp_path)) == 1
        confirm(a, "Delete this conversation", "Yes, delete it")
        assert "deleted from this server" in a.page.locator("body").inner_text()
        assert "?c=" not in a.page.url and a.page.locator(MESSAGES).count() == 0
        # The confirmation closes with its deletion: the popover's button is gone, not left open over the new page.
        a.page.get_by_role("button", name="Yes, delete it").wait_for(state="hidden")
        a.page.close()

        b = tab(lab, address)  # the next student, from the browser's history
        opens_nothing_of(b, PHONE, "call me after class")
        assert stored(tmp_path) == [] and PHONE.encode() not in on_disk(tmp_path)
        assert server_ledger(tmp_path) == billed, "what A's turns were billed stays counted in the server's budget"


def test_a_reply_still_being_written_is_stopped_and_nothing_of_it_comes_back(
    page: str, tmp_path: Path, model_server: ResponsesServer
) -> None:
    with chromium() as browser:
        lab = browser.new_context(viewport={"width": 1300, "height": 1000})
        a = tab(lab, page).ready()
        a.type(f"My phone number is {PHONE}.")
        a.wait_for_messages(2)
        billed = settled_ledger(tmp_path, a)
        model_server.queue_for("reply", drip(1.0))  # about 8 s of streaming: deleted while it is written
        a.type("Tell me a long story about my phone.")
        a.page.wait_for_function("() => new URLSearchParams(location.search).has('c')")
        a.page.get_by_text("Tell me a long story").wait_for()
        address = a.page.url
        confirm(a, "Delete this conversation", "Yes, delete it")
        a.page.close()
        b = tab(lab, address)
        opens_nothing_of(b, PHONE, "long story")
        b.page.wait_for_timeout(9_000)  # past the end of the dripped stream: a late commit would have saved by now
        b.page.goto(address)  # the page took ?c= out of its address bar: the history still has it
        opens_nothing_of(b, PHONE, "long story")
        assert stored(tmp_path) == [] and PHONE.encode() not in on_disk(tmp_path)
        after = settled_ledger(tmp_path, b)
        assert {row[0] for row in billed} <= {row[0] for row in after}, "no booking is removed with the conversation"
        cancelled = [row for row in after if row[0] not in {b[0] for b in billed}]
        assert [(kind, settled) for _, kind, _, settled in cancelled] == [("reply", 1)] and cancelled[0][2] > 0


def test_forgetting_the_browser_deletes_all_its_conversations_and_replaces_its_cookie(page: str, tmp_path: Path) -> None:
    with chromium() as browser:
        lab = browser.new_context(viewport={"width": 1300, "height": 1000})
        first = tab(lab, page).ready()
        first.type(f"My phone number is {PHONE}.")
        first.wait_for_messages(2)
        second = tab(lab, page).ready()
        second.type("My address is 12 Harbour Road.")
        second.wait_for_messages(2)
        own = Person(browser, page).ready()  # another student, on a computer of her own
        own.type("Mine, on my own laptop.")
        own.wait_for_messages(2)
        addresses, secret = [first.page.url, second.page.url], first.secret()
        assert {owner for _, owner in stored(tmp_path)} == {owner_of(secret), owner_of(own.secret())}
        second.page.close()
        confirm(first, "Forget this browser", "Yes, forget this browser")
        assert "2 saved conversation(s) deleted" in first.page.locator("body").inner_text()
        first.page.wait_for_function(f"s => !document.cookie.includes('{COOKIE}=' + s)", arg=secret)
        replaced = first.secret()
        assert replaced != secret and is_browser_secret(replaced)
        first.page.close()
        for address in addresses:
            opens_nothing_of(tab(lab, address), PHONE, "Harbour Road")
        assert [owner for _, owner in stored(tmp_path)] == [owner_of(own.secret())]
        assert PHONE.encode() not in on_disk(tmp_path) and b"Harbour Road" not in on_disk(tmp_path)
        own.page.reload()
        own.wait_for_messages(2)
        assert "Mine, on my own laptop." in chat_texts(own.page)[0]


def test_a_malformed_owner_cookie_is_replaced_so_a_reload_brings_the_conversation_back(page: str) -> None:
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1300, "height": 1000})
        context.add_cookies([{"name": COOKIE, "value": "not-a-secret-of-ours", "url": page}])
        person = tab(context, page).ready()
        person.type("Remember me after a reload.")
        person.wait_for_messages(2)
        assert is_browser_secret(person.secret())
        person.page.reload()
        person.wait_for_messages(2)
        assert "Remember me after a reload." in chat_texts(person.page)[0]


def test_with_cookies_blocked_the_page_says_that_a_reload_starts_over(page: str) -> None:
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1300, "height": 1000})
        blocked = context.new_page()
        blocked.context.new_cdp_session(blocked).send("Emulation.setDocumentCookieDisabled", {"disabled": True})
        blocked.set_default_timeout(30_000)
        blocked.goto(page)
        blocked.get_by_test_id("stChatInputTextArea").wait_for()
        notice = blocked.get_by_test_id("memoraCookiesBlocked")
        notice.wait_for()
        assert "blocks cookies" in notice.inner_text() and "a reload or a new visit starts over" in notice.inner_text()
        allowed = context.new_page()
        allowed.goto(page)
        allowed.get_by_test_id("stChatInputTextArea").wait_for()
        wait_idle(allowed)
        assert allowed.get_by_test_id("memoraCookiesBlocked").count() == 0
