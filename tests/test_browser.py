"""The page in a real browser: Playwright drives Debian's Chromium against `streamlit run`.

Skipped with a reason where Chromium or Playwright is missing, unless the CI
environment variable is set: in CI a missing browser is a failure.
"""

from __future__ import annotations

import os
import re

import pytest

from benchmarks.harness.browser import OFFLINE_OPENING, chat, chromium, require_browser, wait_idle
from benchmarks.harness.processes import ROOT, streamlit_run

SCREENSHOT = ROOT / "test-output" / "browser.png"
AUDIT_SCREENSHOT = ROOT / "test-output" / "summary-audit.png"
B1 = "My English level is B1 and I want to practise travel English."
MESSAGES = [B1, "How do I ask for directions?", "What should I say at a hotel?", "How do I order food?", "Can you make me a practice plan?"]
CORRECTION = [
    B1,
    "My name is Mina.",
    "Actually my level is B2, not B1.",
    "How do I ask for directions?",
    "What should I say at a hotel?",
    "How do I order food?",
]


@pytest.fixture(scope="module")
def server():
    """`streamlit run` on a free local port, offline (no key in its environment), stopped at teardown."""
    require_browser()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MEMORA_BACKEND")}
    env["MEMORA_FOLD_POLICY"] = "window"  # the article's window (the default): folds within the few turns a browser test types
    with streamlit_run(env, ROOT / "test-output" / "streamlit-server.log") as url:
        yield url


def test_chat_panels_and_chart_in_chromium(server):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        page.goto(server)
        page.get_by_text("Offline mode:").wait_for()

        chat(page, MESSAGES, OFFLINE_OPENING)

        messages = page.get_by_test_id("stChatMessage")
        assert messages.count() == 2 * len(MESSAGES)
        assert page.get_by_text("Folded into the summary").count() >= 2

        sidebar = page.get_by_test_id("stSidebar")
        for label in ("Conversation summary", "Last request context", "Token usage", "Full history"):
            sidebar.locator("summary").filter(has_text=re.compile(f"{label}$")).click()
        wait_idle(page)
        chart = sidebar.get_by_test_id("stVegaLiteChart").last  # the usage chart; the picture is the first
        chart.wait_for()
        chart.locator("canvas, svg").first.wait_for()
        box_size = chart.bounding_box()
        assert box_size and box_size["height"] > 100
        assert sidebar.get_by_text("B1").count() >= 1
        assert sidebar.get_by_text("recent window").count() >= 1
        assert sidebar.get_by_text("current message").count() >= 1

        # A message over the budget fails before any request; the real widget gets its text back.
        box = page.get_by_test_id("stChatInputTextArea")
        too_long = "travel " * 1500
        box.fill(too_long)
        box.press("Enter")
        page.get_by_text("Your message was not sent").wait_for()
        wait_idle(page)
        assert box.input_value() == too_long
        assert messages.count() == 2 * len(MESSAGES)
        box.fill("")

        # Streamlit scrolls inside its own containers, so a tall viewport shows the whole page.
        page.set_viewport_size({"width": 1400, "height": 2800})
        wait_idle(page)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))


def test_summary_audit_shows_the_correction_as_a_word_diff_in_chromium(server):
    """The summary panel after a correction is folded; its screenshot is docs/summary-audit.png, which docs/page.md shows."""
    with chromium() as browser:
        # Tall: Streamlit's sidebar scrolls inside itself, and the screenshot is cut to the viewport.
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.set_default_timeout(30_000)
        page.goto(server)
        page.get_by_text("Offline mode:").wait_for()
        chat(page, CORRECTION, OFFLINE_OPENING)

        sidebar = page.get_by_test_id("stSidebar")
        header = page.locator("summary").filter(has_text=re.compile("Conversation summary$"))
        sidebar.locator(header).click()
        wait_idle(page)
        panel = sidebar.get_by_test_id("stExpander").filter(has=header)
        # Version 3 folded the correction: "B1 and" struck through, the corrected line in bold.
        panel.get_by_text("Version 3, after reply 6, for turn 7: folded messages 5–6").wait_for()
        assert panel.locator("del").filter(has_text="B1").count() >= 1
        assert panel.locator("strong").filter(has_text="B2, not B1").count() >= 1
        AUDIT_SCREENSHOT.parent.mkdir(exist_ok=True)
        panel.screenshot(path=str(AUDIT_SCREENSHOT))
