"""F5 during a reply, and a SIGTERM during a reply, with a real `streamlit run` and Chromium (issue 20, parts 7 and 9).

The server runs as a teacher starts it, against a local stand-in for OpenAI (benchmarks/harness/servers.py)
whose replies arrive slowly (``drip``), so each reload or stop lands, for certain, in the middle
of a reply. The conversation store is the default SQLite file in a temporary data folder, which
the tests read directly. Every wait is on an event or a poll with a generous limit; nothing is timed.
Skipped like every browser test (benchmarks/harness/browser.py) where Chromium or Playwright is missing,
and a failure instead when CI is set.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from benchmarks.harness import processes
from benchmarks.harness.browser import chromium, require_browser, wait_idle
from benchmarks.harness.processes import ROOT
from benchmarks.harness.servers import ResponsesServer, drip
from memora.classroom.store.saved import parse_saved
from tests.support.budget import fill, small_tmpfs

LOG = ROOT / "test-output" / "streamlit-reload.log"
MESSAGES = '[data-testid="stChatMessage"]'
DELTAS = ("Hello", " there,", " Ana.", " You", " live", " in", " Porto,", " by", " the", " sea.")
REPLY = "".join(DELTAS)
EXIT_WAIT_S = 120
"""How long a stopped server may take to exit: a bound on a hang, well above its grace plus the unwind."""


@pytest.fixture
def model_server() -> Iterator[ResponsesServer]:
    with ResponsesServer(deltas=DELTAS) as server:
        yield server


def page_env(tmp_path: Path, model_server: ResponsesServer, **extra: str) -> dict[str, str]:
    require_browser()
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMORA_BACKEND", "MEMORA_MODEL", "MEMORA_STORE_URL", "MEMORA_DATA_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MEMORA_")}
    env.update(
        HOME=str(tmp_path),
        MEMORA_DATA_DIR=str(tmp_path / "data"),
        OPENAI_API_KEY="sk-test-reload-5e1f",
        OPENAI_BASE_URL=model_server.url,
        MEMORA_MAX_RETRIES="0",
        **extra,
    )
    return env


def new_page(browser):
    page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
    page.set_default_timeout(60_000)
    return page


def open_page(page, url: str, messages: int = 0) -> None:
    page.goto(url)
    page.get_by_test_id("stChatInputTextArea").wait_for()
    wait_for_messages(page, messages)


def wait_for_messages(page, count: int) -> None:
    page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=count)
    wait_idle(page)


def send(page, text: str) -> None:
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(text)
    box.press("Enter")


def wait_until_streaming(page) -> None:
    """The reply's first words are on the page and its Stop button is drawn: the reply is under way."""
    page.get_by_role("button", name="Stop").wait_for()
    page.locator(MESSAGES).last.get_by_text("Hello").wait_for()


def conversation_id(page) -> str:
    page.wait_for_function("() => new URLSearchParams(location.search).has('c')")
    return parse_qs(urlsplit(page.url).query)["c"][0]


def chat_texts(page) -> list[str]:
    return [element.inner_text() for element in page.locator(MESSAGES).all()]


def stored(data_dir: Path) -> dict[str, list[str]]:
    """Every conversation in the store, as its history's texts."""
    with sqlite3.connect(data_dir / "conversations.sqlite3") as connection:
        rows = connection.execute("SELECT id, payload FROM conversations").fetchall()
    return {cid: [m.content for m in parse_saved(payload).transcript.history] for cid, payload in rows}


def pending(data_dir: Path, conversation_id: str) -> str | None:
    with sqlite3.connect(data_dir / "conversations.sqlite3") as connection:
        (payload,) = connection.execute("SELECT payload FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    return parse_saved(payload).pending_message


def terminate(process: subprocess.Popen) -> None:
    """A clean SIGTERM, as systemd, Docker or a teacher's `kill` sends; waits for the exit."""
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=EXIT_WAIT_S)


def test_f5_during_a_reply_shows_the_finished_reply_under_the_same_id(tmp_path, model_server):
    env = page_env(tmp_path, model_server)
    with chromium() as browser, processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as url:
        page = new_page(browser)
        open_page(page, url)
        send(page, "My name is Ana.")
        wait_for_messages(page, 2)
        cid = conversation_id(page)

        model_server.queue_for("reply", drip(1.5))  # about 15 s left once the first words show: the reload lands mid-reply
        send(page, "Where do I live?")
        wait_until_streaming(page)
        page.reload()
        page.get_by_text("still being written").wait_for()  # the new tab adopted the reply in progress
        page.get_by_role("button", name="Stop").wait_for()  # and draws it streaming, with its Stop button
        page.get_by_role("button", name="Stop").wait_for(state="detached")  # the reply is committed: the whole page follows
        wait_idle(page)

        texts = chat_texts(page)
        assert len(texts) == 4 and REPLY in texts[3] and "Where do I live?" in texts[2]
        assert conversation_id(page) == cid
        body = page.locator("body").inner_text()
        assert "Another tab" not in body

        send(page, "I like green tea.")
        wait_for_messages(page, 6)
        assert conversation_id(page) == cid and "Another tab" not in page.locator("body").inner_text()
    conversations = stored(tmp_path / "data")
    assert list(conversations) == [cid], "no fork: one conversation in the store"
    assert conversations[cid][3] == REPLY and conversations[cid][4] == "I like green tea." and len(conversations[cid]) == 6


def test_sigterm_lets_a_reply_finish_within_the_grace_and_a_new_server_restores_it(tmp_path, model_server):
    env = page_env(tmp_path, model_server, MEMORA_SHUTDOWN_GRACE_S="60")
    log_start = LOG.stat().st_size if LOG.exists() else 0
    with chromium() as browser:
        page = new_page(browser)
        with processes.streamlit_process(env, LOG, "--server.fileWatcherType", "none") as (url, process):
            open_page(page, url)
            send(page, "My name is Ana.")
            wait_for_messages(page, 2)
            cid = conversation_id(page)
            model_server.queue_for("reply", drip(1.0))  # about 10 s left at the SIGTERM, well within the 60 s grace
            send(page, "Where do I live?")
            wait_until_streaming(page)
            terminate(process)
        assert stored(tmp_path / "data")[cid][2:] == ["Where do I live?", REPLY], "the reply finished and was saved"
        assert b"1 reply(ies) finished, 0 stopped" in LOG.read_bytes()[log_start:]

        with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as restarted:
            open_page(page, f"{restarted}/?c={cid}", 4)
            texts = chat_texts(page)
            assert len(texts) == 4 and REPLY in texts[3]


def test_sigterm_past_the_grace_records_the_spend_and_the_next_visit_gets_the_message_back(tmp_path, model_server):
    env = page_env(tmp_path, model_server, MEMORA_SHUTDOWN_GRACE_S="1", MEMORA_MAX_SERVER_TOKENS="1000000")
    question = "Where do I live? Please answer slowly."
    with chromium() as browser:
        page = new_page(browser)
        with processes.streamlit_process(env, LOG, "--server.fileWatcherType", "none") as (url, process):
            open_page(page, url)
            model_server.queue_for("reply", drip(1.5))  # ten deltas, 1.5 s apart: far past the grace
            send(page, question)  # the conversation's first message: nothing of it is saved yet
            wait_until_streaming(page)
            cid = conversation_id(page)  # written when the reply began, so that the next visit finds it
            terminate(process)
        with sqlite3.connect(tmp_path / "data" / "usage.sqlite3") as connection:
            rows = connection.execute("SELECT kind, tokens, estimated, settled FROM requests").fetchall()
        assert [(kind, estimated, settled) for kind, _, estimated, settled in rows] == [("reply", 1, 1)], "settled to its estimate"
        assert rows[0][1] > 0
        assert model_server.billed == [], "the model never reported a usage: the figure is the guard's estimate"
        assert pending(tmp_path / "data", cid) == question and stored(tmp_path / "data")[cid] == []

        with processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as restarted:
            open_page(page, f"{restarted}/?c={cid}")  # the same browser context, on the new server
            page.get_by_text("the server stopped before it answered your last message").wait_for()
            wait_idle(page)
            assert page.get_by_test_id("stChatInputTextArea").input_value() == question
            assert page.locator(MESSAGES).count() == 0
            send(page, question)
            wait_for_messages(page, 2)
    conversations = stored(tmp_path / "data")
    assert conversations[cid] == [question, REPLY] and pending(tmp_path / "data", cid) is None


def test_reloads_a_closed_tab_and_a_full_disk_lose_no_billed_reply(tmp_path, model_server):
    """Issue 28, item 2: the disk fills while a reply streams; F5, F5 again, the tab closed and the link opened
    again all show the billed reply, a classmate's page shows no "Not saved yet", and it is saved once the disk is back."""
    with small_tmpfs(tmp_path / "data", "4m") as data:
        env = page_env(tmp_path, model_server, MEMORA_MAX_SERVER_TOKENS="1000000")
        with chromium() as browser, processes.streamlit_run(env, LOG, "--server.fileWatcherType", "none") as url:
            ana = browser.new_context(viewport={"width": 1300, "height": 1000})
            page = ana.new_page()
            page.set_default_timeout(60_000)
            open_page(page, url)
            send(page, "My name is Ana.")
            wait_for_messages(page, 2)
            cid = conversation_id(page)

            model_server.queue_for("reply", drip(1.0))
            send(page, "Where do I live?")
            wait_until_streaming(page)
            filler = fill(data)  # the disk fills while the reply is billed
            page.get_by_text("Not saved yet, will retry").wait_for()
            wait_idle(page)
            assert REPLY in chat_texts(page)[3]

            for _ in range(2):  # F5, then F5 again
                page.reload()
                page.get_by_text("newer than the copy the store could save").wait_for()
                wait_for_messages(page, 4)
                assert len(chat_texts(page)) == 4 and REPLY in chat_texts(page)[3]
            page.close()
            page = ana.new_page()  # the tab closed, and the link opened again in the same browser
            page.set_default_timeout(60_000)
            open_page(page, f"{url}/?c={cid}", 4)
            assert REPLY in chat_texts(page)[3]
            page.get_by_text("Not saved yet, will retry").wait_for()

            classmate = new_page(browser)
            open_page(classmate, url)
            assert "Not saved yet" not in classmate.locator("body").inner_text()

            filler.unlink()
            send(page, "I like green tea.")
            wait_for_messages(page, 6)
            assert "Not saved yet" not in page.locator("body").inner_text()
            assert stored(data)[cid][2:5] == ["Where do I live?", REPLY, "I like green tea."]
