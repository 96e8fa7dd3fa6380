"""The settings ``load_settings`` reads, found by recording its reads rather than copied into a list."""

from __future__ import annotations

from memora.app.settings import load_settings


def settings_read() -> set[str]:
    """Every name ``load_settings`` asks for, with nothing set (each optional one is then read, none skipped)."""
    asked: set[str] = set()

    class Recording(dict):
        def __bool__(self) -> bool:  # load_settings replaces empty secrets with {}
            return True

        def get(self, name, default=None):
            asked.add(name)
            return default

    load_settings(Recording(), {})
    return asked


MALFORMED = "12\nture"
"""Malformed for any setting: not a number, a flag, a choice, a URL or a key, and not a name on one line."""
