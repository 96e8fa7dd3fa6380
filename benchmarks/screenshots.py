"""The README's pictures: the page in Chromium, offline, after the article's B1/travel conversation.

Run from the repository root::

    python -m benchmarks.screenshots                 # writes docs/screenshot-<language>-<width>x<height>.png
    python -m benchmarks.screenshots --out /tmp/shots

It starts ``streamlit run`` offline (no key, a data folder of its own under a temporary directory), opens the page
in Debian's Chromium (``/usr/bin/chromium`` through Playwright, ``benchmarks.harness.browser``), and for each
language (English, then 繁體中文, switched with the page's own selector before the first message) plays the
article's check, ``memora/teaching/scenarios/article-b1-travel.json``: the planted level and goal, four of its
filler questions and its final question, six turns in all. The window policy (the default) folds the oldest turn
once it leaves the 3-turn recent window: the fold ahead after replies 4, 5 and 6 folds turns 1, 2 and 3, so the
pictures show summary version 3, messages 1–6.

Then, at 1440x1000, the sidebar from its top (the picture of the last request against the budget and the next
request's plan, then the summary), with *Status* closed and *Conversation summary* and *Last request context* open,
and at 390x844, a phone, the last reply and the summary it was sent with: one PNG
each. Every piece of text on them comes from the page; nothing is staged. Chinese needs a CJK font on the machine
(Debian: ``apt-get install fonts-wqy-microhei``); without one Chromium draws boxes, and the script says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.browser import CHROMIUM, CHROMIUM_ARGS, MESSAGES, chat, page_env, wait_idle
from benchmarks.harness.processes import ROOT, streamlit_run
from memora.app.page.i18n import LANGUAGES, t

SCENARIO = ROOT / "memora" / "teaching" / "scenarios" / "article-b1-travel.json"
LANGUAGE_ORDER = ("en", "zh-TW")
DESKTOP = (1440, 1000)
PHONE = (390, 844)
OPEN_ON_DESKTOP = ("panel.summary", "panel.context")
FIRST_SHOWN = 6
"""The chat message at the top of the desktop's picture (0-based): the fourth question, #7, whose reply is followed by
the first fold, told as its own event ("Summary v1, after reply 4, for turn 5: messages 1–2 folded in, …")."""


def article_turns() -> list[str]:
    """The article's B1/travel check as six turns: what it plants, four filler questions, its final question."""
    scenario = json.loads(SCENARIO.read_text(encoding="utf-8"))
    return [*scenario["plant"], *scenario["filler"][:4], scenario["final_question"]]


def switch_language(page, lang: str) -> None:
    """Picks ``lang`` in the sidebar's language selector, as a student does, and waits for the page to redraw."""
    page.get_by_test_id("stSidebar").get_by_text(LANGUAGES[lang], exact=True).click()
    page.get_by_text(t(lang, "page.title")).wait_for()
    wait_idle(page)


def set_panel(page, lang: str, key: str, opened: bool) -> None:
    """Opens or closes the sidebar panel titled ``t(lang, key)`` by clicking its header, if it is not so already."""
    # A header's text starts with its icon's name (``forum``, ``compare_arrows``), then the title, whole: "完整對話紀錄"
    # is the history panel's title, and the end of the What if panel's.
    header = page.locator("summary").filter(has_text=re.compile(r"(?:^|[a-z_])" + re.escape(t(lang, key)) + "$"))
    panel = page.get_by_test_id("stSidebar").get_by_test_id("stExpander").filter(has=header)
    if (panel.locator("details").get_attribute("open") is not None) != opened:
        panel.locator("summary").click()
        wait_idle(page)


def shoot(browser, url: str, lang: str, out: Path) -> list[Path]:
    """One language's two pictures, of one conversation: the desktop's first, then the same tab as a phone."""
    context = browser.new_context(viewport={"width": DESKTOP[0], "height": DESKTOP[1]})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    page.get_by_test_id("stChatInputTextArea").wait_for()
    wait_idle(page)
    if lang != LANGUAGE_ORDER[0]:
        switch_language(page, lang)
    chat(page, article_turns())
    set_panel(page, lang, "panel.status", False)
    for key in OPEN_ON_DESKTOP:
        set_panel(page, lang, key, True)
    written = []
    for width, height in (DESKTOP, PHONE):
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        # Wide: the chat from the fourth question on, its reply, then the first fold as its own event.
        # A phone: the last reply, whose "Summary sent" still holds the level and goal planted in the first turn.
        shown = page.locator(MESSAGES).nth(FIRST_SHOWN) if width == DESKTOP[0] else page.locator(MESSAGES).last
        shown.evaluate("element => element.scrollIntoView({block: 'start'})")
        # The sidebar from its top: the picture of the last request against the budget, the plan of the next one,
        # and the summary it sends (on a phone the sidebar is closed).
        page.get_by_test_id("stSidebarContent").evaluate("sidebar => sidebar.scrollTo(0, 0)")
        path = out / f"screenshot-{lang}-{width}x{height}.png"
        page.screenshot(path=str(path))
        written.append(path)
    context.close()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder for the PNGs (default: docs/)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        print(f"{CHROMIUM} is missing: apt-get install chromium", file=sys.stderr)
        return 2
    if not subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, check=False).stdout.strip():
        print("no CJK font (apt-get install fonts-wqy-microhei): the 繁體中文 pictures will show boxes", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memora-shots-") as tmp:
        env = page_env(Path(tmp))
        env["MEMORA_FOLD_POLICY"] = "window"  # the article's lesson, whatever this shell's environment says
        with streamlit_run(env, Path(tmp) / "streamlit.log") as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for lang in LANGUAGE_ORDER:
                    for path in shoot(browser, url, lang, args.out):
                        print(path)
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
