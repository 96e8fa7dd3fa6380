"""Issues 13 and 14 in a real browser: a real Stop mid-reply, clicks mid-reply that must not cut it,
and hostile Markdown that must fetch nothing.

Debian's Chromium through Playwright, against `streamlit run` talking to a
local Responses server (benchmarks/harness/servers.py) through the real SDK. Skipped
without Chromium, failed instead when CI is set (see benchmarks/harness/browser.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, ClassVar

import pytest

from benchmarks.harness.browser import chromium, require_browser, wait_idle
from benchmarks.harness.processes import ROOT, streamlit_run
from benchmarks.harness.servers import ResponsesServer, drip

if TYPE_CHECKING:  # the browser helpers skip these tests when Playwright is missing, so it is imported only for types
    from playwright.sync_api import Browser, Locator, Page

KEY = "sk-test-browser-4f1a9c22d7"


@pytest.fixture
def model() -> Iterator[ResponsesServer]:
    deltas = tuple(f"word{n} " for n in range(60))
    with ResponsesServer(deltas=deltas) as server:
        yield server


def send_and_wait_for_words(browser: Browser, url: str, text: str) -> tuple[Page, Locator]:
    """Opens the page, sends ``text`` and returns once the dripping reply has begun to show; the page and its chat input."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    page.goto(url)
    box = page.get_by_test_id("stChatInputTextArea")
    box.wait_for()
    box.fill(text)
    box.press("Enter")
    page.get_by_text("word2").wait_for()
    return page, box


def page_env(model: ResponsesServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
    # The article's window policy (the default, set so the environment cannot change it): the summary is folded
    # (and drawn) within a few turns. ``extra`` may set another.
    env.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": model.url, "MEMORA_MAX_RETRIES": "0", "MEMORA_FOLD_POLICY": "window"} | extra)
    return env


def test_a_real_stop_mid_reply_redraws_the_page_with_the_text_back_and_a_notice(model: ResponsesServer) -> None:
    require_browser()
    model.queue_for("reply", drip(0.4))  # 60 events, 0.4 s apart: the reply is in flight for about 25 s
    with streamlit_run(page_env(model), ROOT / "test-output" / "streamlit-stop.log") as url, chromium() as browser:
        page, box = send_and_wait_for_words(browser, url, "Tell me a very long story.")
        stop = page.get_by_role("button", name="Stop")
        assert stop.is_visible()
        stop.click()
        page.get_by_text("Stopped. The reply was not kept").wait_for()
        wait_idle(page)
        assert box.input_value() == "Tell me a very long story."
        assert page.get_by_test_id("stChatMessage").count() == 0, "neither the stopped message nor a partial reply"
        assert page.get_by_role("button", name="Stop").count() == 0
        assert [model.kind_of(r) for r in model.requests] == ["reply"]
        assert page.get_by_text("word59").count() == 0, "the reply was really cut off"


def test_clicks_during_a_reply_let_it_finish_and_a_setting_waits_for_it(model: ResponsesServer) -> None:
    """Issue 14's red-team clicks while a reply drips: open *Token usage*, switch the language, change
    the budget. The reply goes on and is kept; the budget applies once it has finished, and says so
    meanwhile; the translated radios keep their values after the switch, and the open panel stays open."""
    require_browser()
    model.queue_for("reply", drip(0.3))  # 60 events, 0.3 s apart: about 18 s in flight
    # The watermark, which is not the radio's first option: a translated radio must keep a choice that is not its default.
    env = page_env(model, MEMORA_FOLD_POLICY="watermark")
    with streamlit_run(env, ROOT / "test-output" / "streamlit-clicks.log") as url, chromium() as browser:
        page, box = send_and_wait_for_words(browser, url, "Tell me a long story.")
        sidebar = page.get_by_test_id("stSidebar")

        sidebar.locator("summary").filter(has_text="Token usage").click()
        sidebar.get_by_text("繁體中文").click()
        sidebar.locator("summary").filter(has_text="設定").wait_for()
        # Streamlit counts a renamed expander as a new one, closed; the switch keeps the open panel open.
        sidebar.locator("details[open]").filter(has=page.locator("summary").filter(has_text="Token 用量")).wait_for()
        sidebar.locator("summary").filter(has_text="設定").click()
        budget = sidebar.get_by_role("spinbutton", name="輸入 Token 預算（max_input_tokens）")
        budget.fill("1500")
        budget.press("Enter")
        sidebar.get_by_text("回覆正在產生中").wait_for()
        assert page.get_by_text("word59").count() == 0, "the clicks came while the reply was still arriving"

        page.get_by_text("word59").wait_for()
        page.get_by_role("button", name="停止").wait_for(state="detached")  # the reply is committed: the whole page follows
        wait_idle(page)
        messages = page.get_by_test_id("stChatMessage")
        assert messages.count() == 2
        assert "word0" in messages.nth(1).inner_text() and "word59" in messages.nth(1).inner_text()
        assert box.input_value() == ""
        assert sidebar.get_by_text("回覆正在產生中").count() == 0, "the deferred budget was applied"
        assert budget.input_value() == "1500"  # the memory's side: test_reply_job.py
        assert [model.kind_of(r) for r in model.requests] == ["reply"]
        # The translated radios still show what was chosen (their labels changed with the language).
        checked = sidebar.locator("label:has(input[type=radio]:checked)")
        assert checked.filter(has_text="繁體中文").count() == 1
        assert checked.filter(has_text="水位線（摘要較少）").count() == 1, "MEMORA_FOLD_POLICY=watermark, not the first option"
        assert checked.count() == 2, "the language and the fold policy each keep one choice"
        backend = sidebar.get_by_test_id("stSelectbox").filter(has_text="後端")
        assert backend.locator("input").input_value() == "OpenAI Responses API", backend.inner_html()
        assert sidebar.get_by_text("已拒絕").count() == 0


class _Recorder(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args) -> None:
        pass


def test_hostile_markdown_everywhere_fetches_nothing_in_chromium(tmp_path) -> None:
    require_browser()
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{recorder.server_address[1]}"
    hostile = f'![a]({base}/inline.png?data=secret) ![b][r] <img src="{base}/html.png"> <{base}/autolink>\n\n[r]: {base}/reference.png'
    try:
        with ResponsesServer(deltas=("Reply ", "!", f"[c]({base}/split.png) ", hostile), summary_text="Summary " + hostile) as model:
            env = page_env(model, MEMORA_MAX_RECENT_TURNS="0")
            with streamlit_run(env, ROOT / "test-output" / "streamlit-hostile.log") as url, chromium() as browser:
                page = browser.new_page(viewport={"width": 1400, "height": 2400})
                page.set_default_timeout(30_000)
                page.goto(url)
                box = page.get_by_test_id("stChatInputTextArea")
                for n in range(2):
                    box.fill(f"Message {n} {hostile}")
                    box.press("Enter")
                    page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=2 * (n + 1))
                    wait_idle(page)
                box.fill(f"/![x]({base}/command.png)")
                box.press("Enter")
                wait_idle(page)
                sidebar = page.get_by_test_id("stSidebar")
                sidebar.locator("summary").filter(has_text="Conversation summary").click()
                wait_idle(page)
                page.get_by_text("Summary").first.wait_for()
                assert page.get_by_text(f"{base}/inline.png", exact=False).count() >= 1, "the hostile text is drawn, as text"
                assert page.locator("img[src*='127.0.0.1']").count() == 0
                page.wait_for_timeout(1000)  # an image request, if any, has long been sent by now
    finally:
        recorder.shutdown()
        recorder.server_close()
    assert _Recorder.hits == []
