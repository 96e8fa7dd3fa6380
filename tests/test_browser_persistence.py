"""Conversation persistence in a real browser: a reload, and a restart of the `streamlit run` process, bring it back.

The same browser context throughout: its cookie holds the secret the conversation is bound to.

The page runs offline (its offline engine answers) with the conversation store in a temporary
SQLite file, as a teacher would run it. Skipped like every browser test (benchmarks/harness/browser.py)
where Chromium or Playwright is missing, and a failure instead when CI is set.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from benchmarks.harness import processes
from benchmarks.harness.browser import chat_texts, chromium, page_env, require_browser, wait_idle
from benchmarks.harness.processes import ROOT

LOG = ROOT / "test-output" / "streamlit-persistence.log"


def send(page, text: str, count: int) -> None:
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(text)
    box.press("Enter")
    page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=count)
    wait_idle(page)


def test_a_reload_and_a_server_restart_bring_the_conversation_back(tmp_path):
    require_browser()
    env = page_env(tmp_path)
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
        page.set_default_timeout(30_000)
        with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as url:
            page.goto(url)
            page.get_by_test_id("stChatInputTextArea").wait_for()
            wait_idle(page)
            send(page, "My name is Ana and I live in Porto.", 2)
            send(page, "I like green tea.", 4)
            page.wait_for_function("() => new URLSearchParams(location.search).has('c')")
            conversation_id = parse_qs(urlsplit(page.url).query)["c"][0]
            before = chat_texts(page)

            page.reload()
            page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=4)
            wait_idle(page)
            assert chat_texts(page) == before
            assert conversation_id not in page.locator("body").inner_text()  # in the address bar only, never on the page

        assert (tmp_path / "data" / "conversations.sqlite3").exists()
        with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as restarted:
            page.goto(f"{restarted}/?c={conversation_id}")
            page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=4)
            wait_idle(page)
            assert chat_texts(page) == before
            send(page, "What is my name?", 6)
            assert "My name is Ana" in chat_texts(page)[0] and len(chat_texts(page)) == 6
