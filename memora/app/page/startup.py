"""The page's first step: the session's state on the configured settings, or a refusal to start.

Settings fail closed: a malformed value (or a secrets file that cannot be read, or limits that do
not fit together) stops the page before anything else is drawn, and says which variables are wrong
and what they accept, on the page and in the server's log. Nothing falls back to defaults, which
would open a locked classroom unlocked, on another data folder, with no caps. Each page opened on
such a server logs the refusal again, so the log shows students being turned away until the server
is fixed and restarted.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

import streamlit as st

from memora.app.page import render
from memora.app.page.i18n import DEFAULT_LANGUAGE, t
from memora.app.page.state import setup_state
from memora.app.settings import SettingsError

log = logging.getLogger(__name__)


def setup_or_refuse() -> Any:
    """``setup_state()``; on a SettingsError, logs it, draws the refusal and ends this run
    (``st.stop``)."""
    try:
        return setup_state()
    except SettingsError as error:
        refuse(error)


def refuse(error: SettingsError) -> NoReturn:
    """Logs and shows every problem of ``error`` (whose text never holds a secret), then stops the
    script run."""
    log.error(
        "Memora cannot start: %d setting(s) must be fixed, then the server restarted:\n%s",
        len(error.problems),
        _listed(error),
    )
    render.alert(
        "error",
        t(DEFAULT_LANGUAGE, "page.settings_refused", count=len(error.problems)),
        icon=":material/error:",
    )
    render.code(_listed(error), language=None, wrap_lines=True)
    st.stop()


def _listed(error: SettingsError) -> str:
    return "\n".join(f"- {problem}" for problem in error.problems)
