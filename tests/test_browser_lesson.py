"""The lesson on screen, in Chromium: the picture, the folds told between the messages, and nothing cut at a phone's width.

Six offline turns of the article's B1/travel conversation, then every sidebar panel opened, at a desktop's
1440×1000 and a phone's 390×844, in English and in 繁體中文. Each view is saved under ``test-output/lesson/`` to be
looked at. At 390 and 420 px no table in the sidebar scrolls sideways: a message's content is one click away on
its card instead.
"""

from __future__ import annotations

import os
import re

import pytest

from benchmarks.harness.browser import OFFLINE_OPENING, chat, chromium, require_browser, wait_idle
from benchmarks.harness.processes import ROOT, streamlit_run
from tests.support.lesson import LESSON

SHOTS = ROOT / "test-output" / "lesson"
PANELS = {
    "en": ("Conversation summary", "Last request context", "Full history", "Token usage", "What if"),
    "zh-TW": ("對話摘要", "上一次請求", "完整", "用量", "如果"),
}
OVERFLOW = """sidebar => {
    const wide = [];
    for (const el of sidebar.querySelectorAll('table, [data-testid="stDataFrame"] .dvn-scroller, [data-testid="stSidebarContent"]')) {
        const box = el.closest('[data-testid="stTable"], [data-testid="stDataFrame"]') || el;
        const shown = Math.min(box.clientWidth, sidebar.clientWidth);
        if (el.scrollWidth > shown + 1) wide.push(`${el.tagName}.${el.className}: ${el.scrollWidth} > ${shown}`);
    }
    return wide;
}"""
"""Every table and data grid in the sidebar wider than what shows of it: a column cut off, or a sideways scroll."""


@pytest.fixture(scope="module")
def server():
    require_browser()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MEMORA_BACKEND")}
    env["MEMORA_FOLD_POLICY"] = "window"
    with streamlit_run(env, ROOT / "test-output" / "streamlit-lesson.log") as url:
        yield url


def _open_sidebar(page) -> None:
    control = page.get_by_test_id("stExpandSidebarButton")
    if control.count() and control.is_visible():
        control.click()
        page.get_by_test_id("stSidebarContent").wait_for()
        wait_idle(page)


def _open_panels(page, lang: str) -> None:
    sidebar = page.get_by_test_id("stSidebar")
    for label in PANELS[lang]:
        summary = sidebar.locator("summary").filter(has_text=re.compile(label)).first
        if summary.locator("xpath=..").get_attribute("open") is None:
            summary.click()
            wait_idle(page)


def _shoot(page, name: str) -> None:
    """The view as it is, then the whole sidebar and the whole chat in a window tall enough to hold them."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.get_by_test_id("stSidebarContent").evaluate("sidebar => sidebar.scrollTo(0, 0)")  # the sidebar opens at its top
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 5000})
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / f"{name}-tall.png"))
    page.set_viewport_size(size)
    page.wait_for_timeout(500)


def _sidebar_overflow(page) -> list[str]:
    return page.get_by_test_id("stSidebar").evaluate(OVERFLOW)


def test_the_lesson_at_a_desktops_and_a_phones_width_in_both_languages(server):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(30_000)
        page.goto(server)
        page.get_by_text("Offline mode:").wait_for()
        chat(page, LESSON, OFFLINE_OPENING)

        # The chat tells each fold between the messages, numbered as the summary panel numbers them.
        folds = page.get_by_text(re.compile(r"^Summary v\d+, after reply \d+, for turn \d+"))
        assert folds.count() == 3
        assert folds.first.inner_text().startswith("Summary v1, after reply 4, for turn 5: messages 1–2 folded in")
        assert page.get_by_test_id("stChatMessage").first.get_by_text("#1").count() == 1

        sidebar = page.get_by_test_id("stSidebar")
        sidebar.get_by_text("What a request sends, against the budget").wait_for()
        picture = sidebar.get_by_test_id("stVegaLiteChart").first
        picture.locator("canvas, svg").first.wait_for()
        assert sidebar.get_by_text(re.compile(r"^Last request: instructions \d+ · summary \d+")).count() == 1
        assert sidebar.get_by_text(re.compile(r"^Your next message: ")).count() == 1
        # The newest turn box draws its request the same way, and says it in the same words.
        page.locator("summary").filter(has_text="Turn 6: tokens and context").click()
        wait_idle(page)
        turn_box = page.get_by_test_id("stExpander").filter(has_text="Turn 6: tokens and context")
        turn_box.get_by_test_id("stVegaLiteChart").locator("canvas, svg").first.wait_for()
        sent = sidebar.get_by_text(re.compile(r"^Last request: instructions")).inner_text().removeprefix("Last request: ")
        assert turn_box.get_by_text(sent).count() == 1
        _open_panels(page, "en")
        _shoot(page, "desktop-en")
        # What if's first column is the ledger: its counted input, read off the page, is the ledger cards' sum.
        cards = [text for text in sidebar.get_by_text(re.compile(r"^\d+ · Turn \d+ · ")).all_inner_texts()]
        counted = {"reply": 0, "summary": 0}
        for card in cards:
            kind = "summary" if " · summary" in card else "reply"
            counted[kind] += int(re.search(r"Counted input ([\d,]+)", card).group(1).replace(",", ""))
        assert len(cards) == 9 and counted["summary"] > 0, cards
        table = sidebar.get_by_test_id("stExpander").filter(has_text="What if: the other policy").get_by_test_id("stTable")
        cells = {row.locator("th").first.inner_text(): row.locator("td").first.inner_text() for row in table.locator("tbody tr").all()}
        assert int(cells["Counted input, replies"].replace(",", "")) == counted["reply"]
        assert int(cells["Counted input, summaries"].replace(",", "")) == counted["summary"]

        # The retention probe's table too: it runs offline on its own memory, and its table joins the sidebar's.
        sidebar.locator("summary").filter(has_text="Teaching tools").click()
        wait_idle(page)
        sidebar.get_by_role("button", name="Run the probe").click()
        sidebar.get_by_text("Probe finished.").wait_for(timeout=120_000)
        wait_idle(page)
        assert sidebar.get_by_test_id("stTable").count() >= 2, "the what-if table and the probe's"
        what_if = sidebar.get_by_test_id("stExpander").filter(has_text="What if: the other policy").get_by_test_id("stTable")
        assert what_if.count() == 1, "one table, the strategies as its columns"
        headings = [" ".join(text.split()) for text in what_if.locator("thead th").all_inner_texts()]
        assert headings == ["Figure", "Window (yours: the ledger)", "Watermark (estimate)", "Full history"]
        for width in (420, 390):
            page.set_viewport_size({"width": width, "height": 844})
            page.wait_for_timeout(500)
            _open_sidebar(page)
            assert _sidebar_overflow(page) == [], f"at {width} px"
        _shoot(page, "phone-en")

        page.set_viewport_size({"width": 1440, "height": 1000})
        page.wait_for_timeout(500)
        _open_sidebar(page)
        sidebar.get_by_text("繁體中文").click()
        wait_idle(page)
        page.get_by_text("一次請求送出什麼，和預算相比").wait_for()
        _open_panels(page, "zh-TW")
        _shoot(page, "desktop-zh-TW")
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        _open_sidebar(page)
        assert _sidebar_overflow(page) == [], "at 390 px, in 繁體中文"
        _shoot(page, "phone-zh-TW")
