"""A shared classroom link in a real browser: two students, one `streamlit run`, one teacher's key.

The server runs as a teacher would start it, with the key, the lock and a cap in
its environment, pointed at a local stand-in for OpenAI (benchmarks/harness/servers.py), and
with the SDK's debug logging on so that its log is worth searching. Two browser
contexts (two students, separate cookies and websockets) chat at once. Checked:
neither sees the other's conversation, in the DOM or in the websocket frames
the server sends it; the key is in no page, no frame and no server log, even
after a 401 whose body quotes it; the locked settings are disabled.

Skipped like every browser test (benchmarks/harness/browser.py) where Chromium or Playwright is missing, and
a failure instead when CI is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from benchmarks.harness import processes
from benchmarks.harness.browser import Person, chromium, require_browser, wait_idle
from benchmarks.harness.processes import ROOT
from benchmarks.harness.servers import ResponsesServer, drip, status

KEY = "sk-test-shared-by-teacher-3c9f0a77d1"
LOG = ROOT / "test-output" / "streamlit-sharing.log"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ResponsesServer]:
    with ResponsesServer(deltas=("Hello", " there", "!")) as server:
        yield server


@contextmanager
def streamlit_run(model_server: ResponsesServer, *extra: str) -> Iterator[str]:
    """`streamlit run` as a teacher starts it for a class, on a free local port."""
    require_browser()
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMORA_BACKEND", "MEMORA_MODEL", "MEMORA_MAX_INPUT_TOKENS", "MEMORA_MAX_RECENT_TURNS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=model_server.url,
        MEMORA_LOCK_SETTINGS="true",
        MEMORA_MAX_TURNS="20",
        MEMORA_MAX_RETRIES="0",
        OPENAI_LOG="debug",  # the SDK logs every request to stderr: the log must still not hold the key
    )
    with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none", *extra) as url:
        yield url


@pytest.fixture(scope="module")
def shared_page(model_server: ResponsesServer) -> Iterator[str]:
    """The page with the repository's .streamlit/config.toml (runner.fastReruns off)."""
    LOG.parent.mkdir(exist_ok=True)
    LOG.write_bytes(b"")
    with streamlit_run(model_server) as url:
        yield url


@pytest.fixture
def fast_rerun_page(model_server: ResponsesServer) -> Iterator[str]:
    """The page with Streamlit's default runner.fastReruns on: a rerun starts beside the running one."""
    with streamlit_run(model_server, "--runner.fastReruns", "true") as url:
        yield url


def test_two_students_share_one_key_without_seeing_each_other_or_the_key(shared_page: str, model_server: ResponsesServer) -> None:
    with chromium() as browser:
        alice, bob = Person(browser, shared_page).ready(), Person(browser, shared_page).ready()
        # Both send before either reply is awaited: two sessions in flight at once.
        alice.type("My name is Alice and I study in room 101.")
        bob.type("My name is Bob and I like trains.")
        alice.wait_for_messages(2)
        bob.wait_for_messages(2)
        alice.type("Alice's second question about the past tense.")
        alice.wait_for_messages(4)
        # Both replies complete (the status widget is not drawn in minimal toolbar mode, so wait for the text).
        alice.page.get_by_text("Hello there!").nth(1).wait_for()
        bob.page.get_by_text("Hello there!").first.wait_for()

        alice_seen, bob_seen = alice.seen(), bob.seen()
        assert b"room 101" in alice_seen and b"past tense" in alice_seen, "the frames were captured"
        assert b"Alice" not in bob_seen and b"room 101" not in bob_seen and b"past tense" not in bob_seen
        assert b"Bob" not in alice_seen and b"trains" not in alice_seen
        assert bob.page.get_by_test_id("stChatMessage").count() == 2
        assert alice.page.get_by_test_id("stChatMessage").count() == 4
        assert alice.page.get_by_text("Hello there!").count() == 2, "the replies came from the local model server"

        # The lock: the settings widgets are disabled and there is no key field.
        sidebar = bob.page.get_by_test_id("stSidebar")
        sidebar.locator("summary").filter(has_text="Settings").click()
        sidebar.get_by_text("Settings are locked for this shared page").wait_for()
        assert sidebar.locator("input[type=password]").count() == 0
        assert sidebar.get_by_test_id("stNumberInputField").first.is_disabled()

        # A 401 whose body quotes the key: the student sees a clear error, not the key.
        model_server.queue_for("reply", status(401, f"Incorrect API key provided: {KEY}."))
        bob.type("Does an error show the key?")
        bob.page.get_by_text("rejected the API key (HTTP 401)").wait_for()
        wait_idle(bob.page)
        assert bob.page.get_by_test_id("stChatInputTextArea").input_value() == "Does an error show the key?"

        for student in (alice, bob):
            assert KEY.encode() not in student.seen()
            assert b"sk-test-shared" not in student.seen()
    assert any(r.headers.get("authorization") == f"Bearer {KEY}" for r in model_server.requests), "the key was really used"
    log = LOG.read_bytes()
    assert b"Sending HTTP Request" in log, "the SDK's debug log reached the server log"
    assert KEY.encode() not in log


@pytest.mark.parametrize("page_fixture", ["shared_page", "fast_rerun_page"])
def test_a_rerun_in_the_middle_of_a_reply_lets_it_finish(page_fixture: str, model_server: ResponsesServer, request) -> None:
    """While a slow reply streams, the student switches the language: Streamlit reruns the script,
    and the reply, which runs on the session's reply job, goes on and is kept, with or without
    fastReruns. (Before memora.classroom.job, the rerun cut the turn and only gave its text back.)"""
    with chromium() as browser:
        student = Person(browser, request.getfixturevalue(page_fixture)).ready()
        page = student.page
        model_server.queue_for("reply", drip(0.5))
        student.type("A question whose reply is slow.")
        page.get_by_text("Hello").first.wait_for()  # the first words are on the page
        page.get_by_test_id("stSidebar").get_by_text("繁體中文").click()
        page.get_by_text("Hello there!").wait_for()
        page.get_by_role("button", name="停止").wait_for(state="detached")  # the reply is committed: the whole page follows
        wait_idle(page)
        messages = page.get_by_test_id("stChatMessage")
        assert messages.count() == 2 and "Hello there!" in messages.nth(1).inner_text()
        assert page.get_by_test_id("stChatInputTextArea").input_value() == ""
