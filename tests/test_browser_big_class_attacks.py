"""Issue 39's attacks on a big class, in Chromium: two processes behind the shipped Caddyfile on one PostgreSQL.

One ``python -m memora.serve --processes 2`` for the whole module (a start costs two page loads' worth of CPU),
with the teacher's key against a local stand-in for OpenAI that records every request it answers, a store cap of
1 MiB and at most one new conversation per browser an hour. Each student is a Playwright context of her own (her
own cookies), pinned by Caddy's cookie to the process the attack needs. Checked in each: no reply is billed that
the store does not keep, and a message refused is refused before it is sent, with its text back in the box.

- The store cap across processes: room for one turn, two students on different processes send at once.
- A deleted conversation, or a forgotten browser, in tab A never comes back from tab B on the other process.
- The hourly cap: a second tab never forks into a conversation that the cap would refuse to keep (it goes on with
  the conversation as the first left it, after the first one's reply when it sends during it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from benchmarks.harness.browser import Person, chat_texts, chromium, require_browser, wait_idle
from benchmarks.harness.servers import ResponsesServer, drip
from memora.app.page.state import new_memory
from memora.app.settings import load_settings
from memora.classroom.store import new_conversation_id
from memora.classroom.store.owner import new_owner, owner_of
from memora.classroom.store.postgres import PostgresStore
from memora.classroom.store.room import turn_growth
from tests.support.bigclass import BigClass, big_class, caddy_cookie, saved_conversation
from tests.support.budget import isolated_postgres_url
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat
from tests.support.stores import require_postgres_url

pytestmark = pytest.mark.browser

KEY = "sk-test-big-class-5e1d7c3a90"
STORE_MB = 1
PHONE = "0912 345 678"


@dataclass(frozen=True)
class Class:
    """The running class, the model it bills against and its PostgreSQL URL."""

    running: BigClass
    model: ResponsesServer
    url: str
    browser: object


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Iterator[Class]:
    require_browser()
    url = isolated_postgres_url(require_postgres_url())
    settings = {
        "OPENAI_API_KEY": KEY,
        "MEMORA_MAX_RETRIES": "0",
        "MEMORA_MAX_SERVER_TOKENS": "1000000",
        "MEMORA_MAX_STORE_MB": str(STORE_MB),
        "MEMORA_MAX_NEW_CONVERSATIONS_PER_HOUR": "1",
    }
    with ResponsesServer(deltas=("Hello", " there", "!")) as model:
        settings["OPENAI_BASE_URL"] = model.url
        with big_class(url, tmp_path_factory.mktemp("big-class"), **settings) as running, chromium() as browser:
            yield Class(running, model, url, browser)


def student(big: Class, pinned_to: int, address: str | None = None, context=None) -> Person:
    """A tab pinned by Caddy's cookie to the process on ``pinned_to``: in ``context`` (another tab of that browser,
    re-pinned) or in a browser of its own; on ``address`` or the class's page."""
    context = context or big.browser.new_context(viewport={"width": 1300, "height": 1000})
    context.add_cookies([{"name": "memora_lb", "value": caddy_cookie(pinned_to), "url": big.running.proxy}])
    return Person(None, address or big.running.proxy, context=context).ready()


def replies_billed_for(model: ResponsesServer, text: str) -> int:
    """The reply requests the model answered whose input carries ``text``: each one billed."""
    return sum(1 for r in list(model.requests) if model.kind_of(r) == "reply" and text in json.dumps(r.body))


def refused(person: Person, notice: str, text: str) -> None:
    """``person``'s page says ``notice`` and has ``text`` back in its input box."""
    person.page.get_by_text(notice).first.wait_for()
    wait_idle(person.page)
    assert person.page.get_by_test_id("stChatInputTextArea").input_value() == text


def saved_payloads(url: str, text: str) -> int:
    """How many stored conversations, of any browser, hold ``text``."""
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute("SELECT count(*) FROM memora_conversations WHERE payload LIKE %s", (f"%{text}%",)).fetchone()[0]


def next_turn_growth(message: str) -> int:
    """What the store books for ``message`` as a conversation's second turn, at the page's settings: the size of the
    room the store-cap attack leaves (the reply's bound, 1,000 tokens at 128 bytes, is most of it)."""
    memory = new_memory(load_settings({}, {"OPENAI_API_KEY": KEY, "MEMORA_MAX_RETRIES": "0"}), ScriptedBackend())
    chat(memory, "Hello, I am a student.")
    return turn_growth(memory, message)


def test_the_store_cap_across_processes_bills_no_reply_it_cannot_keep(big: Class):
    a, b = big.running.ports
    ana, ben = student(big, a), student(big, b)
    for person, text in ((ana, "Hello, I am Ana."), (ben, "Hello, I am Ben.")):
        person.type(text)
        person.wait_for_messages(2)
    store = PostgresStore(big.url)
    filler = new_conversation_id()
    try:
        stored = store.db.run(lambda c: c.execute("SELECT COALESCE(SUM(size), 0) FROM memora_conversations").fetchone()[0])
        # Room for one turn and a half: the first student to ask gets it, the other cannot.
        room = 3 * next_turn_growth("Is there room for my turn, Ana?") // 2
        store.save(filler, "x" * (STORE_MB * 1024 * 1024 - stored - room), 0, new_owner())
        sent = {ana: "Is there room for my turn, Ana?", ben: "Is there room for my turn, Ben?"}
        # A slow reply holds its room while the other process asks for it.
        big.model.queue_for("reply", drip(0.5))
        for person, text in sent.items():
            person.page.get_by_test_id("stChatInputTextArea").fill(text)
        for person in sent:
            person.page.get_by_test_id("stChatInputTextArea").press("Enter")
        for person in sent:
            person.page.wait_for_function(
                "() => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= 4"
                " || document.body.innerText.includes('too full')"
            )
            wait_idle(person.page)
        answered = [p for p, text in sent.items() if replies_billed_for(big.model, text)]
        others = [p for p in sent if p not in answered]
        assert len(answered) == 1 and len(others) == 1, "room for one turn: one student answered, the other refused"
        kept, turned_away = answered[0], others[0]
        assert len(chat_texts(kept.page)) == 4
        kept.page.get_by_text("Hello there!").nth(1).wait_for()  # the slow reply, whole
        wait_idle(kept.page)
        assert saved_conversation(big.url, owner_of(kept.secret()), sent[kept]) is not None, "the billed reply is kept"
        refused(turned_away, "The conversation store is too full", sent[turned_away])
        assert replies_billed_for(big.model, sent[turned_away]) == 0, "refused before it was sent"
        assert len(chat_texts(turned_away.page)) == 2
    finally:
        # The other attacks share this store: the filler goes, the students' conversations stay.
        store.db.run(lambda c: c.execute("DELETE FROM memora_conversations WHERE id = %s", (filler,)))
        store.close()


@pytest.mark.parametrize(
    ("control", "button", "notice"),
    [
        ("Delete this conversation", "Yes, delete it", "was deleted in another tab"),
        ("Forget this browser", "Yes, forget this browser", "This browser was forgotten in another tab"),
    ],
)
def test_a_conversation_deleted_in_one_tab_never_comes_back_from_a_tab_on_the_other_process(big, control, button, notice):
    a, b = big.running.ports
    first = student(big, a)
    first.type(f"My phone number is {PHONE}.")
    first.wait_for_messages(2)
    secret = first.secret()
    # The same browser, re-pinned: this tab's page and websocket go to the other process, the first tab's stays.
    second = student(big, b, address=first.page.url, context=first.context)
    second.wait_for_messages(2)
    assert saved_payloads(big.url, PHONE) == 1
    first.page.get_by_test_id("stSidebar").get_by_test_id("stPopover").filter(has_text=control).get_by_role("button").first.click()
    wait_idle(first.page)  # opening the popover reruns the page, which draws it from its state
    first.page.get_by_role("button", name=button).click()
    wait_idle(first.page)
    second.type("Please call me after class.")
    refused(second, notice, "Please call me after class.")
    assert replies_billed_for(big.model, "call me after class") == 0, "nothing more of it is sent"
    assert saved_payloads(big.url, PHONE) == 0, "the deleted conversation is not saved again, under any id"
    assert saved_conversation(big.url, owner_of(secret), "Please call me") is None


def test_a_second_tab_at_the_hourly_cap_never_forks_into_a_conversation_it_cannot_keep(big: Class):
    """The browser at its hourly cap, two tabs on one conversation. An idle second tab goes on with the conversation
    as the first left it: no copy, so nothing for the cap to refuse. One that sends while the first one's reply is
    being written waits for that reply's save and goes on after it, in the same conversation. (A tab with a change of
    its own would copy it; the cap then refuses the copy before anything is sent: tests/test_conversation_page.py.)"""
    a, _ = big.running.ports
    first = student(big, a)
    first.type("My first message this hour.")
    first.wait_for_messages(2)  # this browser's one new conversation this hour
    second = student(big, a, address=first.page.url, context=first.context)
    second.wait_for_messages(2)
    first.type("The first tab goes on.")
    first.wait_for_messages(4)
    second.type("The second tab goes on too.")  # opens what the first tab saved, and goes on with it
    second.wait_for_messages(6)
    second.page.get_by_text("Another tab of this browser saved a newer version of this conversation").first.wait_for()  # a real second tab
    assert replies_billed_for(big.model, "The second tab goes on too.") == 1
    big.model.queue_for("reply", drip(0.5))
    first.type("A slow reply for the first tab.")  # the first tab opens the second's turn, then sends
    first.page.get_by_text("A slow reply for the first tab.").first.wait_for()  # booked: its reply is being written
    second.type("The second tab sends at the same moment.")  # waits for the first tab's save, then goes on after it
    second.wait_for_messages(10)
    texts = chat_texts(second.page)
    assert "A slow reply for the first tab." in texts[6] and "The second tab sends at the same moment." in texts[8]
    assert replies_billed_for(big.model, "The second tab sends at the same moment.") == 1
    assert saved_payloads(big.url, "My first message this hour.") == 1, "one conversation, no copy"
    assert saved_payloads(big.url, "The second tab sends at the same moment.") == 1
