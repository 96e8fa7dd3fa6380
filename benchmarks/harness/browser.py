"""Debian's Chromium through Playwright, for the real-browser tests.

Where Chromium or Playwright is missing a test skips with the reason, unless the CI
environment variable is set: in CI a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from memora.app.page.browser import COOKIE

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser():
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package")
        sync_playwright = None
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(CHROMIUM + " (apt-get install chromium)")
    if missing:
        reason = "real-browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(reason + "; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)
    return sync_playwright


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, closed afterwards; the test skips without it (fails with CI set)."""
    sync_playwright = require_browser()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_idle(page) -> None:
    """Waits until the script has stopped running, twice in a row: the page reruns itself after a reply
    (to show the summary folded meanwhile), so one idle moment between two runs is not enough."""
    idle = '() => document.querySelector(\'[data-testid="stApp"]\')?.dataset.testScriptState === "notRunning"'
    for _ in range(2):
        page.wait_for_timeout(300)
        page.wait_for_function(idle, timeout=30_000)


class Person:
    """One person's browser: a context of its own (its own cookies, as a student's own laptop), one tab on
    ``url``, and every websocket frame the server sent it. ``ready()`` waits for the chat box.

    With ``context``, the tab opens in that context instead: the same browser profile as its other tabs,
    as the next student on a shared lab computer."""

    def __init__(self, browser, url: str, context=None) -> None:
        self.context = context or browser.new_context(viewport={"width": 1300, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.frames: list[bytes] = []
        self.page.on("websocket", lambda ws: ws.on("framereceived", self._keep))
        self.page.goto(url)

    def _keep(self, payload) -> None:
        self.frames.append(payload.encode() if isinstance(payload, str) else bytes(payload))

    def ready(self) -> Person:
        self.page.get_by_test_id("stChatInputTextArea").wait_for()
        wait_idle(self.page)
        return self

    def type(self, text: str) -> None:
        box = self.page.get_by_test_id("stChatInputTextArea")
        box.fill(text)
        box.press("Enter")

    def wait_for_messages(self, count: int) -> None:
        self.page.wait_for_function("n => document.querySelectorAll('[data-testid=\"stChatMessage\"]').length >= n", arg=count)
        wait_idle(self.page)

    def conversation_id(self) -> str | None:
        """The ``?c=`` id in the tab's address bar, or None."""
        return parse_qs(urlsplit(self.page.url).query).get("c", [None])[0]

    def secret(self) -> str:
        """This browser's secret, from its cookie."""
        return next(c["value"] for c in self.context.cookies() if c["name"] == COOKIE)

    def seen(self) -> bytes:
        """The DOM as it is now, and everything the websocket brought."""
        return self.page.content().encode() + b"\n".join(self.frames)


MESSAGES = '[data-testid="stChatMessage"]'
OFFLINE_OPENING = "Offline mode, no language model."
"""How the offline engine's every reply begins, in English."""


def chat(page, texts: Sequence[str], reply_opening: str | None = None) -> None:
    """Sends each of ``texts`` through the page's chat input and waits for its reply and for the page to settle (the
    fold ahead); with ``reply_opening`` (``OFFLINE_OPENING``), also until the reply shows it, not only its bubble."""
    box = page.get_by_test_id("stChatInputTextArea")
    before = page.locator(MESSAGES).count()
    for number, text in enumerate(texts, start=1):
        box.fill(text)
        box.press("Enter")
        shown = before + 2 * number  # each turn adds the message and its reply
        page.wait_for_function(f"n => document.querySelectorAll('{MESSAGES}').length >= n", arg=shown)
        if reply_opening is not None:
            page.locator(MESSAGES).nth(shown - 1).get_by_text(reply_opening).wait_for()
        wait_idle(page)


def page_env(tmp_path) -> dict[str, str]:
    """The environment of a page run as a teacher would: offline, with its data under ``tmp_path``."""
    drop = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMORA_BACKEND", "MEMORA_MODEL", "MEMORA_STORE_URL", "MEMORA_DATA_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HOME=str(tmp_path), MEMORA_DATA_DIR=str(tmp_path / "data"))
    return env


def chat_texts(page) -> list[str]:
    """The chat messages' texts, oldest first."""
    return [element.inner_text() for element in page.locator(MESSAGES).all()]
