"""Debian's Chromium through Playwright, for the real-browser tests.

Where Chromium or Playwright is missing a test skips with the reason, unless the CI
environment variable is set: in CI a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

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
