"""The page in 繁體中文, in Chromium: after six turns, no label of the page's own is left in English.

The conversation's text is the learner's (English, as they practise it) and is set aside; so are code (the page
quotes `max_input_tokens` and file names as code) and the icons' ligature names, which the browser draws as icons.
What is left, the sidebar, the panels, the captions, the turn boxes and the chat's marks, may hold only the
words on the repository's allowlist (``memora/app/page/locales/zh-TW.allowlist``).
"""

from __future__ import annotations

import pytest

from benchmarks.harness.browser import chat, chromium, page_env, require_browser, wait_idle
from benchmarks.harness.processes import ROOT, streamlit_run
from benchmarks.screenshots import article_turns, set_panel, switch_language
from memora.app.page.i18n import t
from memora.app.page.panels import preview
from memora.text.prompts import SUMMARY_PREAMBLE
from tests.support.words import english_words

PANELS = ("panel.status", "panel.summary", "panel.context", "panel.history", "panel.usage", "panel.what_if", "tools.title")
# What the browser would read as words but the page shows as something else: an icon is its name in a ligature font
# (``inventory_2``), drawn as a picture; code is code.
HIDE_NOT_WORDS = """() => {
    for (const element of document.querySelectorAll("span")) {
        if (getComputedStyle(element).fontFamily.includes("Material Symbols")) element.style.display = "none";
    }
    for (const element of document.querySelectorAll("code")) element.style.display = "none";
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_browser()
    env = page_env(tmp_path_factory.mktemp("zh-tw"))
    env["MEMORA_FOLD_POLICY"] = "window"  # the article's window folds within six turns
    with streamlit_run(env, ROOT / "test-output" / "streamlit-zh-tw.log") as url:
        yield url


def shown_text(page) -> str:
    """The sidebar's and the page's visible text, icons and code aside."""
    page.evaluate(HIDE_NOT_WORDS)
    return page.get_by_test_id("stSidebar").inner_text() + "\n" + page.get_by_test_id("stMainBlockContainer").inner_text()


def test_after_six_turns_in_traditional_chinese_no_page_label_is_in_english(server):
    turns = article_turns()
    assert len(turns) == 6
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(server)
        page.get_by_test_id("stChatInputTextArea").wait_for()
        wait_idle(page)
        switch_language(page, "zh-TW")
        chat(page, turns)
        for key in PANELS:
            set_panel(page, "zh-TW", key, True)
        page.get_by_text(t("zh-TW", "chat.stats", turn=6)).click()  # the last turn's box: its figures, its sources
        wait_idle(page)
        text = shown_text(page)
        # The teaching tools' second tab: the upload box, whose words Streamlit writes in English unless the page says.
        page.get_by_role("tab", name=t("zh-TW", "tools.tab_transcript")).click()
        wait_idle(page)
        text += "\n" + shown_text(page)
        assert t("zh-TW", "chat.folded") in text and t("zh-TW", "glossary.title") in text
        assert "離線模式，不是語言模型。" in text, "the offline engine answered in the page's language"
        # The conversation's own text: the learner's turns, and the summary made of them, as the prompt sends it;
        # whole, or as the start of it that a message's card shows.
        for conversation_text in (*turns, SUMMARY_PREAMBLE):
            text = text.replace(conversation_text, " ").replace(preview(conversation_text), " ")
        assert english_words(text) == set(), text
        assert english_words(page.get_by_test_id("stChatInputTextArea").get_attribute("placeholder")) == set()
