"""A locked (classroom) page shows students no message, traceback, source or server path of an uncaught error.

On a laptop the one reading an error runs the server, so ``.streamlit/config.toml`` keeps ``full``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from memora.app.page import state as keys
from memora.app.page.state import LOCKED_ERROR_DETAILS
from memora.memory.backend import OPENAI_PROFILE
from tests.support.app import APP, tree_text

pytestmark = pytest.mark.usefixtures("no_secrets")

SERVER_PATH = "/srv/memora/secret-folder/state.db"


class BrokenBackend:
    """A bug of the page's own: reading the backend's label raises, with a server path in the message."""

    offline = False
    profile = OPENAI_PROFILE
    broken = False

    @property
    def label(self) -> str:
        if self.broken:
            raise RuntimeError(f"could not open {SERVER_PATH}")
        return "Broken"

    def count_request(self, model: str, instructions: str, messages: object) -> None:
        return None

    def counting_source(self, model: str) -> None:
        return None


def crashed_page(locked: bool, monkeypatch) -> AppTest:
    from memora.app.page.state import new_memory
    from memora.app.settings import Settings

    if locked:
        # The first session of a locked server sets the option for the whole process, as it starts.
        monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
        assert not AppTest.from_file(APP, default_timeout=30).run().exception
        assert config.get_option("client.showErrorDetails") == LOCKED_ERROR_DETAILS
    at = AppTest.from_file(APP, default_timeout=30)
    settings = Settings(locked=locked)
    at.session_state[keys.SETTINGS] = settings
    backend = BrokenBackend()
    at.session_state[keys.MEMORY] = new_memory(settings, backend)
    backend.broken = True
    return at.run()


def test_a_locked_page_shows_an_error_without_its_message_traceback_or_paths(monkeypatch) -> None:
    at = crashed_page(True, monkeypatch)
    assert at.exception, "the page did fail"
    shown = tree_text(at)
    assert SERVER_PATH not in shown and "streamlit_app.py" not in shown and "Traceback" not in shown
    assert "RuntimeError" in shown, "the error's type, for the teacher to find in the log"
    assert not at.exception[0].stack_trace


def test_an_unlocked_page_on_a_laptop_shows_the_whole_error(monkeypatch) -> None:
    at = crashed_page(False, monkeypatch)
    assert SERVER_PATH in tree_text(at) and at.exception[0].stack_trace
    config = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "full" and LOCKED_ERROR_DETAILS == "type"
